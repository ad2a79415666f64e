"""Diagnostic for issue 21 item 12: do grammar-constrained greedy feedback calls on the
embedded model give the same logits warm (prefix reuse) as cold?

    .venv/bin/python benchmarks/greedy_warm_cold.py [--model embedded]

Runs commongen on three inputs (temperature 0, 2 refinements, every critique kept) through
one ``LlamaCppBackend`` with prefix reuse, recording each request. Each feedback request
(the role decoded under the JSON-schema grammar) is then replayed on a second backend with
``prefix_reuse=False``. For every decode step it compares a hash of the raw logits (a
logits processor, first in llama-cpp-python's sampler chain, so before the grammar) and
their argmax, and prints the first step where warm and cold differ. Takes a few minutes on
2 cores. The hook wraps the backend's private ``_sampling``: a diagnostic, not an API.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
from typing import Any

import numpy as np

from selfrefine import RefineConfig, SelfRefine
from selfrefine.backends.base import Backend, CompletionRequest, CompletionResponse
from selfrefine.backends.embedded import LlamaCppBackend

INPUTS = ["kitchen, knife, onion, cut, cry", "dog, frisbee, catch, throw, park", "sun, beach, towel, wave, sand"]
Steps = dict[str, list[tuple[str, int]]]


def trace_logits(backend: LlamaCppBackend, steps: Steps) -> None:
    """Record (hash, argmax) of the raw logits of every step of each grammar-constrained call."""
    original = backend._sampling

    def sampling(request: CompletionRequest) -> dict[str, Any]:
        kwargs = original(request)
        if request.json_schema is not None:
            log = steps.setdefault(request.prompt, [])

            def record(_ids: Any, scores: Any) -> Any:
                raw = np.asarray(scores, dtype=np.float32)
                log.append((hashlib.sha1(raw.tobytes()).hexdigest()[:12], int(np.argmax(raw))))
                return scores

            kwargs["logits_processor"] = [record]
        return kwargs

    backend._sampling = sampling  # type: ignore[method-assign]


class Recording(Backend):
    """Passes calls through and keeps (request, reply text)."""

    def __init__(self, inner: Backend) -> None:
        super().__init__("recording")
        self.inner, self.calls = inner, []

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        response = await self.inner.complete(request)
        self.calls.append((request, response.text))
        return response


async def main(model: str) -> None:
    warm_steps: Steps = {}
    cold_steps: Steps = {}
    warm = LlamaCppBackend(model=model, n_ctx=4096)
    trace_logits(warm, warm_steps)
    recording = Recording(warm)
    engine = SelfRefine(
        "commongen", recording, config=RefineConfig(max_iterations=2, temperature=0.0, final_feedback=True)
    )
    for concepts in INPUTS:
        await engine.arun(concepts)
    cold = LlamaCppBackend(model=model, n_ctx=4096, prefix_reuse=False)
    trace_logits(cold, cold_steps)
    same = 0
    feedback = [(r, t) for r, t in recording.calls if r.json_schema is not None]
    for request, warm_text in feedback:
        cold_text = (await cold.complete(request)).text
        w, c = warm_steps[request.prompt], cold_steps[request.prompt]
        first = next((i for i, (a, b) in enumerate(zip(w, c)) if a != b), None)
        if first is None and warm_text == cold_text:
            same += 1
            continue
        where = "none" if first is None else f"{first} (argmax warm {w[first][1]}, cold {c[first][1]})"
        print(f"differs: text equal {warm_text == cold_text}; first step with other logits: {where}")
        print(f"  warm: {warm_text[:100]}\n  cold: {cold_text[:100]}")
    print(f"feedback calls with identical logits and text: {same} of {len(feedback)}")
    await warm.aclose()
    await cold.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="embedded")
    asyncio.run(main(parser.parse_args().model))
