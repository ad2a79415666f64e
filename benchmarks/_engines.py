"""Shared plumbing for the throughput benchmarks: the engines, the data, the timing.

Two engines, both running SmolLM2-135M from the embedded GGUF file:

- ``server``: llama.cpp's own ``llama-server`` (built by ``scripts/build_llama_server.sh``
  from the sources vendored in the llama-cpp-python sdist), started on 127.0.0.1 with
  ``-np`` slots and reached through the ``openai:`` backend, as a user would;
- ``embedded``: the in-process llama.cpp backend.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from selfrefine import SelfRefine
from selfrefine.backends.base import Backend, CompletionRequest, CompletionResponse
from selfrefine.backends.embedded import LlamaCppBackend, default_model_path
from selfrefine.backends.openai_compat import OpenAIBackend
from selfrefine.evaluation.datasets import Example, load_examples
from selfrefine.evaluation.runner import evaluate_rows

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "datasets"

# The seven tasks' development files in ../shared/datasets; the two code tasks use the
# packaged slow programs of the code-optimisation benchmark.
DATA = {
    "sentiment": "yelp_extreme.dev.jsonl",
    "dialogue": "fed.dev.json",
    "gsm8k": "gsm8k.dev.jsonl",
    "acronym": "acronyms.dev.tsv",
    "commongen": "commongen_hard.dev.jsonl",
}
TASKS = ("sentiment", "dialogue", "codeopt", "readability", "gsm8k", "acronym", "commongen")


def examples(task: str, limit: int) -> list[Example]:
    """The first ``limit`` inputs of a task, without references: the benchmarks time the
    engine, not the metrics (codeopt's timing metric alone takes seconds per program)."""
    if task in ("codeopt", "readability"):
        from selfrefine.tasks.codeopt_bench import load_benchmark

        return [Example(id=p.id, input=p.slow) for p in load_benchmark()[:limit]]
    path = SHARED / DATA[task]
    if not path.exists():
        sys.exit(f"no data for {task}: expected {path}")
    return [Example(id=e.id, input=e.input) for e in load_examples(task, path, limit=limit)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(proc: subprocess.Popen, url: str, seconds: float, what: str) -> None:
    """Until GET ``url`` answers 200; a RuntimeError (naming ``what``) when the process exits
    first or ``seconds`` pass."""
    deadline = time.time() + seconds
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}: {' '.join(map(str, proc.args))}")
        with contextlib.suppress(OSError):
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        if time.time() > deadline:
            raise RuntimeError(f"{what} did not answer {url} in {seconds:.0f} s")
        time.sleep(0.5)


def stop(proc: subprocess.Popen) -> None:
    """Terminate a server, then kill it if it is still there after 10 s."""
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def server_binary() -> str:
    out = subprocess.run(
        ["bash", str(ROOT / "scripts" / "build_llama_server.sh")], check=True, stdout=subprocess.PIPE, text=True
    )
    return out.stdout.strip().splitlines()[-1]


@dataclass
class Server:
    url: str
    process: subprocess.Popen
    slots: int

    def backend(self, **options) -> OpenAIBackend:
        options.setdefault("concurrency", self.slots)
        return OpenAIBackend("smollm2", base_url=f"{self.url}/v1", **options)


@contextlib.contextmanager
def llama_server(slots: int = 4, ctx_per_slot: int = 4096, threads: int | None = None) -> Iterator[Server]:
    """Start llama-server on 127.0.0.1 and stop it afterwards."""
    port = free_port()
    threads = threads or os.cpu_count() or 1
    cmd = [
        server_binary(),
        "-m",
        str(default_model_path()),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "-np",
        str(slots),
        "-c",
        str(ctx_per_slot * slots),
        "-t",
        str(threads),
        "-tb",
        str(threads),
        "--log-disable",
    ]
    log = open(ROOT / "runs" / f"llama-server-{port}.log", "w") if (ROOT / "runs").is_dir() else subprocess.DEVNULL
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(proc, f"{url}/health", 120, "llama-server")
        yield Server(url, proc, slots)
    finally:
        stop(proc)
        if log is not subprocess.DEVNULL:
            log.close()


class Recording(Backend):
    """Passes calls through and keeps every request with its start time (for replay)."""

    def __init__(self, inner: Backend) -> None:
        super().__init__(inner.name)
        self.inner = inner
        self.max_concurrency = inner.max_concurrency
        self.requests: list[CompletionRequest] = []
        self.responses: list[CompletionResponse] = []

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        self.requests.append(request)
        response = await self.inner.complete(request)
        self.responses.append(response)
        return response

    def cache_identity(self) -> str:
        return self.inner.cache_identity()

    async def aclose(self) -> None:
        await self.inner.aclose()


@dataclass
class EvalRun:
    seconds: float
    examples: int
    calls: int
    prompt_tokens: int
    completion_tokens: int
    cached_prompt_tokens: int
    failed: int
    # the share of prompt characters no earlier prompt starts with, examples run one after
    # another: what a perfect, unbounded prefix cache would still have to compute
    ideal_computed_share: float = 0.0

    @property
    def examples_per_s(self) -> float:
        return self.examples / self.seconds

    def line(self, label: str) -> str:
        n = max(1, self.examples)
        return (
            f"{label:<34} {self.examples_per_s:7.4f} ex/s  {self.seconds:7.1f} s  "
            f"{self.calls / n:5.1f} calls/ex  {self.prompt_tokens / n:7.0f} prompt tok/ex  "
            f"{self.completion_tokens / n:5.0f} completion tok/ex  failed {self.failed}"
        )


def run_eval(
    task: str, backend: Backend, items: Sequence[Example], *, concurrency: int, max_iterations: int
) -> EvalRun:
    """``selfrefine eval``'s engine path (evaluate_rows) at temperature 0, timed."""
    engine = SelfRefine(task, backend, max_iterations=max_iterations, temperature=0.0, seed=0, record_prompts=True)

    async def go():
        try:
            return await evaluate_rows(engine, items, concurrency=concurrency)
        finally:
            await engine.aclose()

    t0 = time.perf_counter()
    rows = asyncio.run(go())
    seconds = time.perf_counter() - t0
    calls = [c for r in rows if r.result for c in r.result.calls]
    return EvalRun(
        seconds=seconds,
        examples=len(rows),
        calls=len(calls),
        prompt_tokens=sum(c.prompt_tokens for c in calls),
        completion_tokens=sum(c.completion_tokens for c in calls),
        cached_prompt_tokens=sum(c.cached_prompt_tokens or 0 for c in calls),
        failed=sum(1 for r in rows if r.error),
        ideal_computed_share=ideal_computed_share([c.prompt or "" for c in calls]),
    )


def ideal_computed_share(prompts: Sequence[str]) -> float:
    """1 - (characters shared with the longest-matching earlier prompt) / (characters sent)."""
    seen: list[str] = []
    sent = shared = 0
    for prompt in prompts:
        sent += len(prompt)
        shared += max((len(os.path.commonprefix([prompt, s])) for s in seen), default=0)
        seen.append(prompt)
    return 1 - shared / max(1, sent)


def embedded(**options) -> LlamaCppBackend:
    return LlamaCppBackend(None, name="embedded", **options)


def dump(path: str | None, data: dict) -> None:
    if path:
        Path(path).write_text(json.dumps(data, indent=2) + "\n")
