"""Tokens per second of the embedded model on this machine, cold and with a warm prefix.

    .venv/bin/python benchmarks/embedded_speed.py [--threads N] [--repeats 3]

Prints prefill tokens/s on a cold prompt, decode tokens/s, and the time of the same prompt
again with its prefix already in the KV cache (what one Llama per role buys the loop).
"""

from __future__ import annotations

import argparse
import statistics
import time

from selfrefine.backends.embedded import default_model_path, default_threads
from selfrefine.tasks import get_task


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=default_threads())
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    from llama_cpp import Llama

    task = get_task("commongen")
    prompt = task.render("refine", "kitchen, knife, onion, cut, cry", draft="A knife.", feedback="NONE")
    prefill, decode, warm = [], [], []
    for _ in range(args.repeats):
        llm = Llama(model_path=str(default_model_path()), n_ctx=2048, n_threads=args.threads, verbose=False)
        tokens = llm.tokenize(prompt.encode())
        t0 = time.perf_counter()
        llm.eval(tokens)  # cold prefill of the whole prompt
        prefill.append(len(tokens) / (time.perf_counter() - t0))
        llm.reset()
        t0 = time.perf_counter()
        out = llm.create_completion(prompt, max_tokens=64, temperature=0.0, stop=[])
        first = time.perf_counter() - t0
        n = out["usage"]["completion_tokens"]
        t0 = time.perf_counter()
        llm.create_completion(prompt, max_tokens=64, temperature=0.0, stop=[])
        warm.append(time.perf_counter() - t0)
        decode.append(n / max(1e-9, first - len(tokens) / prefill[-1]))
        llm.close()
    print(f"model: {default_model_path().name}, threads: {args.threads}, prompt: {len(tokens)} tokens")
    print(f"prefill (cold): {statistics.median(prefill):7.1f} tokens/s")
    print(f"decode:         {statistics.median(decode):7.1f} tokens/s")
    cold = len(tokens) / statistics.median(prefill) + n / statistics.median(decode)
    print(f"same call cold ~{cold:.2f}s vs prefix in KV cache {statistics.median(warm):.2f}s "
          f"({cold / statistics.median(warm):.1f}x)")


if __name__ == "__main__":
    main()
