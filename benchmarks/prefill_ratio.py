"""Benchmark 3: prefill tokens the engine actually computed vs prompt tokens sent.

    .venv/bin/python benchmarks/prefill_ratio.py [--engine server|embedded] [--limit 4]

Runs `selfrefine eval`'s engine path on each of the seven tasks and reads, per call, how
many prompt tokens the engine took from its prefix cache: llama-server's
``timings.cache_n`` (through the openai backend), or the embedded backend's own count
(its context's shared prefix plus restored KV snapshots). computed = sent - reused.

"ideal" is what a perfect, unbounded prefix cache would still compute on the same prompts
(run one example after another): the floor set by the prompts themselves, since each
example's text and drafts appear after a different few-shot block in each role.
"""

from __future__ import annotations

import argparse

from _engines import TASKS, dump, embedded, examples, llama_server, run_eval


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=["server", "embedded"], default="server")
    parser.add_argument("--tasks", default=",".join(TASKS))
    parser.add_argument("--limit", type=int, default=4)
    parser.add_argument("--max-iters", type=int, default=2)
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--json")
    args = parser.parse_args()
    tasks = args.tasks.split(",")

    runs = {}
    if args.engine == "server":
        with llama_server(slots=args.slots) as server:
            for task in tasks:
                runs[task] = run_eval(
                    task,
                    server.backend(),
                    examples(task, args.limit),
                    concurrency=args.concurrency,
                    max_iterations=args.max_iters,
                )
    else:
        backend = embedded()
        for task in tasks:
            runs[task] = run_eval(
                task, backend, examples(task, args.limit), concurrency=args.concurrency, max_iterations=args.max_iters
            )

    print(f"engine {args.engine}, {args.limit} examples per task, max {args.max_iters} refinements")
    print(f"{'task':<12} {'sent/ex':>8} {'reused/ex':>10} {'computed/ex':>12} {'computed/sent':>14} {'ideal':>6}")
    sent = reused = 0
    for task, r in runs.items():
        n = max(1, r.examples)
        computed = r.prompt_tokens - r.cached_prompt_tokens
        print(
            f"{task:<12} {r.prompt_tokens / n:8.0f} {r.cached_prompt_tokens / n:10.0f} {computed / n:12.0f} "
            f"{computed / max(1, r.prompt_tokens):14.2f} {r.ideal_computed_share:6.2f}"
        )
        sent += r.prompt_tokens
        reused += r.cached_prompt_tokens
    ratio = (sent - reused) / max(1, sent)
    print(f"{'all':<12} {'':>8} {'':>10} {'':>12} {ratio:14.2f}  (target <= 0.3)")
    dump(args.json, {"engine": args.engine, "runs": {t: vars(r) for t, r in runs.items()}, "ratio": ratio})


if __name__ == "__main__":
    main()
