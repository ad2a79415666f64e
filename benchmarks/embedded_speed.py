"""Tokens per second of the embedded model on this machine, cold and with a warm prefix.

    .venv/bin/python benchmarks/embedded_speed.py [--model embedded:smollm2-135m] [--threads N] [--repeats 3]

Prints prefill tokens/s of a cold prompt (gsm8k's feedback prompt: its few-shot block plus
one example), decode tokens/s, the time of one whole call cold vs with its prefix already
in the KV cache (what one Llama per role buys the loop), and the cost per token of
JSON-schema constrained decoding (llama-cpp-python applies the grammar to the whole
vocabulary at every step).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from selfrefine.backends.embedded import default_model_path, default_threads
from selfrefine.tasks import get_task
from selfrefine.tasks.commongen import FEEDBACK_SCHEMA

CODE = "def solution():\n    total = 3 * 4\n    return total"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=default_threads())
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--model", default="embedded", help="catalogue name (default: the default model)")
    args = parser.parse_args()

    from llama_cpp import Llama, LlamaGrammar

    prompt = get_task("gsm8k").render("feedback", "Tom has 3 boxes of 4 apples. How many apples?", draft=CODE)
    llm = Llama(model_path=str(default_model_path(args.model)), n_ctx=2048, n_threads=args.threads, verbose=False)
    tokens = llm.tokenize(prompt.encode())
    grammar = LlamaGrammar.from_json_schema(json.dumps(FEEDBACK_SCHEMA), verbose=False)
    prefill, decode, cold, warm, constrained = [], [], [], [], []
    for _ in range(args.repeats):
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(tokens)
        prefill.append(len(tokens) / (time.perf_counter() - t0))
        t0 = time.perf_counter()  # prefix already evaluated: this is decode only
        out = llm.create_completion(prompt, max_tokens=64, temperature=0.0, stop=[])
        decode.append(out["usage"]["completion_tokens"] / (time.perf_counter() - t0))
        warm.append(time.perf_counter() - t0)
        llm.reset()
        t0 = time.perf_counter()
        llm.create_completion(prompt, max_tokens=64, temperature=0.0, stop=[])
        cold.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        out = llm.create_completion(prompt, max_tokens=64, temperature=0.0, stop=[], grammar=grammar)
        constrained.append((time.perf_counter() - t0) / max(1, out["usage"]["completion_tokens"]))
    med = statistics.median
    print(
        f"model {default_model_path(args.model).name}, {args.threads} threads, prompt {len(tokens)} tokens, {args.repeats} repeats (medians)"
    )
    print(f"prefill (cold prompt):        {med(prefill):7.1f} tokens/s")
    print(f"decode:                       {med(decode):7.1f} tokens/s")
    print(f"one call, cold prompt:        {med(cold):7.2f} s")
    print(f"one call, prefix in KV cache: {med(warm):7.2f} s  ({med(cold) / med(warm):.1f}x faster)")
    print(
        f"JSON-schema constrained decoding: {med(constrained) * 1000:.0f} ms per token "
        f"(unconstrained {1000 / med(decode):.0f} ms)"
    )


if __name__ == "__main__":
    main()
