"""Framework overhead per model call: the loop on the zero-latency fake backend.

    .venv/bin/python benchmarks/overhead.py [--examples 200] [--iters 4]

Everything but the model is measured: prompt rendering, request building, parsing,
records, stop rules and the asyncio plumbing. Prints microseconds per call for serial runs
and for all examples in flight at once.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

from selfrefine import FakeBackend, SelfRefine

MISSING = json.dumps({"missing_concepts": ["ball"], "commonsense": "NONE"})


def make_engine(iters: int) -> SelfRefine:
    backend = FakeBackend(
        {"generate": [], "feedback": [], "refine": []},
        default=lambda r: MISSING if r.role == "feedback" else f"A dog runs {len(r.prompt)}.",
    )
    return SelfRefine("commongen", backend, max_iterations=iters, stop_on_no_change=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=200)
    parser.add_argument("--iters", type=int, default=4)
    args = parser.parse_args()
    inputs = [f"dog, ball, park, tree{i}" for i in range(args.examples)]

    engine = make_engine(args.iters)
    # one run first: what a process loads once (the task's lemmatizer and numpy, imported on
    # first use since --help stopped loading them) is not a per-call cost
    make_engine(args.iters).run("cat, hat, mat")
    t0 = time.perf_counter()
    serial = [engine.run(x) for x in inputs]
    serial_s = time.perf_counter() - t0
    calls = sum(r.usage.calls for r in serial)

    engine = make_engine(args.iters)

    async def together():
        return await asyncio.gather(*(engine.arun(x) for x in inputs))

    t0 = time.perf_counter()
    concurrent = asyncio.run(together())
    concurrent_s = time.perf_counter() - t0
    assert [r.drafts for r in concurrent] == [r.drafts for r in serial]

    print(f"{args.examples} examples x {args.iters} refinements = {calls} calls on the zero-latency fake backend")
    print(f"serial:     {serial_s * 1e6 / calls:8.1f} us per call  ({args.examples / serial_s:8.1f} examples/s)")
    print(
        f"concurrent: {concurrent_s * 1e6 / calls:8.1f} us per call  ({args.examples / concurrent_s:8.1f} examples/s)"
    )


if __name__ == "__main__":
    main()
