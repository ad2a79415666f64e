"""Benchmark 1: examples/s of `selfrefine eval` vs a reference-style serial loop.

    .venv/bin/python benchmarks/eval_vs_serial.py [--engine server|embedded] [--task commongen] [--limit 6]

Same engine, same inputs, same prompts, temperature 0, measured back to back in one run:

- reference-style: one example at a time, one call at a time, no prefix reuse (the
  server's prompt cache off with ``cache_prompt=false``; the embedded backend with
  ``prefix_reuse=false``), as the reference code runs;
- selfrefine eval: many examples in flight under the backend's own limit (the server's
  ``-np`` slots; 1 for the in-process engine), prefix reuse on.

Both runs are checked to have done comparable work (calls and tokens per example).
"""

from __future__ import annotations

import argparse

from _engines import TASKS, dump, embedded, examples, llama_server, run_eval


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=["server", "embedded"], default="server")
    parser.add_argument("--task", choices=TASKS, default="commongen")
    parser.add_argument("--limit", type=int, default=6)
    parser.add_argument("--max-iters", type=int, default=2)
    parser.add_argument("--slots", type=int, default=4, help="llama-server -np")
    parser.add_argument("--concurrency", type=int, default=8, help="examples in flight for eval")
    parser.add_argument("--json", help="write the numbers here too")
    args = parser.parse_args()
    items = examples(args.task, args.limit)

    if args.engine == "server":
        with llama_server(slots=args.slots) as server:
            serial = run_eval(
                args.task,
                server.backend(cache_prompt=False, concurrency=1),
                items,
                concurrency=1,
                max_iterations=args.max_iters,
            )
            ours = run_eval(
                args.task, server.backend(), items, concurrency=args.concurrency, max_iterations=args.max_iters
            )
    else:
        serial = run_eval(args.task, embedded(prefix_reuse=False), items, concurrency=1, max_iterations=args.max_iters)
        ours = run_eval(args.task, embedded(), items, concurrency=args.concurrency, max_iterations=args.max_iters)

    print(
        f"engine {args.engine}, task {args.task}, {len(items)} examples, max {args.max_iters} refinements, temperature 0"
    )
    print(serial.line("reference-style serial, no reuse"))
    print(ours.line("selfrefine eval"))
    ratio = ours.examples_per_s / serial.examples_per_s
    print(f"ratio eval / serial: {ratio:.2f}x  (target >= 5x)")
    # on a server the two runs' trajectories can differ slightly (batching changes logits)
    per_call = (serial.seconds / max(1, serial.calls)) / (ours.seconds / max(1, ours.calls))
    print(
        f"ratio per call: {per_call:.2f}x  ({serial.seconds / max(1, serial.calls):.2f} s vs "
        f"{ours.seconds / max(1, ours.calls):.2f} s per call)"
    )
    dump(
        args.json,
        {
            "engine": args.engine,
            "task": args.task,
            "serial": vars(serial),
            "eval": vars(ours),
            "ratio": ratio,
            "ratio_per_call": per_call,
        },
    )


if __name__ == "__main__":
    main()
