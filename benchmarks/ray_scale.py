"""Benchmark: `selfrefine eval --ray` throughput against the number of actors, and against local.

    .venv/bin/python benchmarks/ray_scale.py [--part fake|embedded|all] [--latency 0.25] [--examples 320]
        [--embedded-model embedded] [--embedded-examples 4] [--repeats 2]

Both parts run the CLI's path (the engine spec of parsed ``eval`` options, ``run_eval``
into a run folder, rows fsync'ed) on one local Ray cluster started once, side by side:

- fake: the fake model waits ``--latency`` seconds per call and does no work, like a remote
  API; each actor keeps ``--in-flight`` examples going (as if its node had a server with
  that many slots). Examples/s for 1, 2, 4, 8 actors (0.25 CPU each, so 8 fit on 2 cores),
  end to end (actor start included) and steady (rows after every actor was up);
- embedded: the in-process model on this machine's cores, Ray with 2 actors x 1 thread vs
  local (one engine, threads = all cores), the same examples, temperature 0, in
  ``--repeats`` alternating pairs.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import logging
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ray
from rich.console import Console

from selfrefine.cli.commands import EvalFlags, cli
from selfrefine.engine.loop import SelfRefine
from selfrefine.engine.spec import EngineSpec
from selfrefine.evaluation.datasets import load_examples
from selfrefine.evaluation.driver import run_eval, run_meta
from selfrefine.evaluation.ray_pool import EngineRecipe, PoolOptions, RayPool
from selfrefine.evaluation.runstore import RunStore

ROOT = Path(__file__).resolve().parent.parent
COMMONGEN = ROOT.parent / "shared" / "datasets" / "commongen_hard.dev.jsonl"
FB_DONE = json.dumps({"missing_concepts": [], "commonsense": "NONE"})


@dataclass
class Timing:
    label: str
    examples: int
    seconds: float  # end to end, actor start included
    steady: float | None = None  # examples/s once every actor was up
    up: float | None = None  # seconds until every actor was up (the pool's start-up cost)
    calls: int = 0
    tokens: int = 0

    @property
    def per_s(self) -> float:
        return self.examples / self.seconds

    def line(self) -> str:
        steady = f", steady {self.steady:.2f}/s, all actors up by {self.up:.1f} s" if self.steady else ""
        return (
            f"{self.label:<34} {self.examples} examples in {self.seconds:6.1f} s = {self.per_s:6.3f}/s{steady}"
            f"  ({self.calls / self.examples:.1f} calls, {self.tokens / self.examples:,.0f} tokens / example)"
        )


def engine_spec(args: list[str]) -> EngineSpec:
    """The engine spec `selfrefine eval commongen ARGS` builds."""
    params = cli.commands["eval"].make_context("eval", ["commongen", "--data", "d", "--out", "o", *args]).params
    task = params.pop("task")  # the command's argument; the rest are its flags
    return EvalFlags.of(params).engine.spec(task)


def measure(
    label: str, spec: EngineSpec, data: Path, limit: int, pool: PoolOptions | None, concurrency: int = 4
) -> Timing:
    engine = SelfRefine.from_spec(spec)
    examples = load_examples("commongen", data, limit)
    with tempfile.TemporaryDirectory() as folder:
        store = RunStore(folder)
        store.start(run_meta("bench", engine, str(data), limit))
        runner = Watch(RayPool(EngineRecipe.portable(spec), pool)) if pool else None
        start = time.perf_counter()
        if runner is not None:
            runner.start = start
        quiet = Console(file=io.StringIO())  # no per-example lines between the numbers
        _, rows = asyncio.run(run_eval(engine, examples, store, concurrency=concurrency, runner=runner, console=quiet))
        seconds = time.perf_counter() - start
    failed = [r.id for r in rows if r.failed]
    if failed:
        raise SystemExit(f"{label}: {len(failed)} examples failed, e.g. {rows[0].error}")
    return Timing(
        label,
        len(rows),
        seconds,
        runner.steady() if runner else None,
        runner.up() if runner else None,
        sum(r.result.usage.calls for r in rows),
        sum(r.result.usage.total_tokens for r in rows),
    )


class Watch:
    """The pool as a runner, noting when rows arrive and when every actor was up."""

    def __init__(self, pool: RayPool) -> None:
        self.pool = pool
        self.times: list[float] = []
        self.start = time.perf_counter()
        self.all_up: int | None = None  # rows before every actor was up

    async def __call__(self, todo: Any, on_row: Any) -> None:
        def watched(row: Any) -> None:
            on_row(row)
            self.times.append(time.perf_counter())
            if self.all_up is None and len(self.pool.live) >= self.pool.stats.actors:
                self.all_up = len(self.times)

        await self.pool(todo, watched)

    def up(self) -> float | None:
        """Seconds from the run's start to the first row after every actor was up."""
        return None if self.all_up is None else self.times[self.all_up - 1] - self.start

    def steady(self) -> float | None:
        if self.all_up is None or len(self.times) - self.all_up < 4:
            return None
        window = self.times[-1] - self.times[self.all_up - 1]
        return (len(self.times) - self.all_up) / window


def fake_part(args: argparse.Namespace, folder: Path) -> list[Timing]:
    data = folder / "d.jsonl"
    source = COMMONGEN.read_text().splitlines()
    data.write_text("\n".join(source[i % len(source)] for i in range(args.examples)) + "\n")
    replies = folder / "r.json"
    replies.write_text(
        json.dumps({"default": FB_DONE, "latency": args.latency, "replies": {"generate": ["A dog plays."] * 10_000}})
    )
    spec = engine_spec(["-m", f"fake:{replies}"])
    results = []
    for actors in (1, 2, 4, 8):
        pool = PoolOptions(actors=actors, cpus_per_actor=0.25, in_flight=args.in_flight)
        results.append(measure(f"ray, {actors} actor(s) x {args.in_flight} in flight", spec, data, args.examples, pool))
        print(results[-1].line(), flush=True)
    base, base_steady = results[0].per_s, results[0].steady
    for actors, t in zip((1, 2, 4, 8), results):
        steady = f", {t.steady / base_steady:.2f}x steady" if t.steady and base_steady else ""
        print(f"ratio {actors} actors / 1 actor: {t.per_s / base:.2f}x end to end{steady}")
    return results


def embedded_part(args: argparse.Namespace) -> list[Timing]:
    """Local and Ray alternately (local, ray, ray, local, ...), so that load from other jobs
    that drifts during the run weighs on both alike."""
    cores = os.cpu_count() or 1
    base = [
        "-m",
        args.embedded_model,
        "--max-iters",
        str(args.max_iters),
        "--temperature",
        "0",
    ]
    pool = PoolOptions(actors=cores, cpus_per_actor=1, in_flight=4)
    runs = {"local": f"local, 1 engine x {cores} threads", "ray": f"ray, {cores} actors x 1 thread"}
    results: dict[str, list[Timing]] = {"local": [], "ray": []}
    for repeat in range(args.repeats):
        for kind in ("local", "ray") if repeat % 2 == 0 else ("ray", "local"):
            timing = measure(
                runs[kind], engine_spec(base), COMMONGEN, args.embedded_examples, pool if kind == "ray" else None
            )
            results[kind].append(timing)
            print(timing.line(), flush=True)
    for repeat, (local, remote) in enumerate(zip(results["local"], results["ray"])):
        print(f"ratio ray / local ({args.embedded_model}), pair {repeat + 1}: {remote.per_s / local.per_s:.2f}x")
    total = {k: sum(t.seconds for t in v) for k, v in results.items()}
    print(f"ratio ray / local ({args.embedded_model}), all pairs: {total['local'] / total['ray']:.2f}x")
    return results["local"] + results["ray"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["fake", "embedded", "all"], default="all")
    parser.add_argument("--latency", type=float, default=0.25, help="seconds per fake call")
    parser.add_argument("--examples", type=int, default=320)
    parser.add_argument("--in-flight", type=int, default=2, help="examples per actor at once (fake part)")
    parser.add_argument("--embedded-model", default="embedded")
    parser.add_argument("--embedded-examples", type=int, default=4)
    parser.add_argument("--max-iters", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=2, help="local/ray pairs of the embedded part")
    parser.add_argument("--json", help="write the numbers here too")
    args = parser.parse_args()
    ray.init(address="local", num_cpus=os.cpu_count(), include_dashboard=False, logging_level=logging.WARNING)
    out: dict[str, Any] = {}
    try:
        with tempfile.TemporaryDirectory() as folder:
            if args.part in ("fake", "all"):
                print(f"fake model, {args.latency} s per call, {args.examples} commongen examples, 2 calls each")
                out["fake"] = [vars(t) for t in fake_part(args, Path(folder))]
            if args.part in ("embedded", "all"):
                print(
                    f"{args.embedded_model}, {args.embedded_examples} commongen examples, max {args.max_iters} "
                    f"refinement(s), temperature 0, {os.cpu_count()} cores"
                )
                out["embedded"] = [vars(t) for t in embedded_part(args)]
    finally:
        ray.shutdown()
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
