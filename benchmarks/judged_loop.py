"""The judge in the loop (issue 29): one step against what ``--preset best`` returns, on the
tasks without a code verifier for quality, by each task's own metric -> docs/judges.md.

    .venv/bin/python benchmarks/judged_loop.py                     # every set, resumable
    .venv/bin/python benchmarks/judged_loop.py --sets chat,commongen --systems one-step,best
    .venv/bin/python benchmarks/judged_loop.py --report-only       # the table from the run folders

Systems (each a run folder under ``--out``, through the eval harness: durable rows, resume,
one response cache shared by every run):

- ``one-step``: one draft, no round (``max_iterations=0``), no checks derived from a chat
  request (nothing to rank or refine by them): what the model gives alone, at its tokens;
- ``best``: ``--preset best``: 4 samples, the task's code checks and then its judge choose
  (engine/judge.py), one round of refinement that replaces the draft only when it earns it;
- ``best-no-judge``: the same with ``judging=False`` (the critic breaks ties, as before the
  judge), on the sets whose task has code checks.

Metrics: each task's own metric of the returned output (commongen: concept coverage; toxicity:
1 - p(offensive) from alt-profanity-check, the mean of its parts; story: the premise's
constraints; chat: the share of the request's instruction checks that pass, checks written with
each request in benchmarks/data/chat_requests.jsonl and never shown to the loop). Dialogue and
story are also compared pairwise (returned vs one-step, both orders, the same model as judge
with the task's criteria; the loop's judge asks other questions). The rows are fixed and were
not used to write the prompts or the judge's questions: commongen_hard rows 56-75 (rows 40-55
shaped the prompts), the first rows of the other sets.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from _cli import names
from rich.console import Console

from selfrefine.backends.registry import get_backend
from selfrefine.core.config import RefineConfig
from selfrefine.engine.loop import SelfRefine
from selfrefine.evaluation.datasets import Example, load_examples
from selfrefine.evaluation.driver import run_eval, run_meta
from selfrefine.evaluation.judge import DEFAULT_CRITERIA, PairwiseJudge
from selfrefine.evaluation.response_cache import CachedBackend, ResponseCache
from selfrefine.evaluation.runner import ExampleRow
from selfrefine.evaluation.runstore import RunStore
from selfrefine.evaluation.stats import mean_known, paired_bootstrap_diff
from selfrefine.tasks import get_task
from selfrefine.tasks.toxicity import DATA as PACKAGED

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "datasets"
# name: (task, data file, rows taken)
SETS: dict[str, tuple[str, Path, range]] = {
    "commongen": ("commongen", SHARED / "commongen_hard.dev.jsonl", range(56, 76)),
    "chat": ("chat", ROOT / "benchmarks" / "data" / "chat_requests.jsonl", range(0, 20)),
    "toxicity-dev": ("toxicity", PACKAGED / "toxicity.dev.jsonl", range(0, 8)),
    "toxicity-heldout": ("toxicity", PACKAGED / "toxicity.heldout.jsonl", range(0, 8)),
    "dialogue": ("dialogue", SHARED / "fed.dev.json", range(0, 8)),
    "story": ("story", PACKAGED / "story.dev.jsonl", range(0, 6)),
}
SYSTEMS: dict[str, dict[str, Any]] = {
    "one-step": {"max_iterations": 0, "derive_checks": False},  # what the plain model gives, at its tokens
    "best": {"preset": "best"},
    "best-no-judge": {"preset": "best", "judging": False},
}
PAIRWISE = {"dialogue", "story"}  # also compared returned vs one-step by a pairwise judge


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sets", default=",".join(SETS), help="comma-separated subset of " + ", ".join(SETS))
    p.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated subset of " + ", ".join(SYSTEMS))
    p.add_argument("--model", default="embedded", help="a model spec (default: the embedded model)")
    p.add_argument("--out", type=Path, default=ROOT / "runs" / "judged_loop", help="parent of the run folders")
    p.add_argument("--cache", type=Path, help="response cache file (default: the harness default)")
    p.add_argument("--summary", type=Path, default=ROOT / "docs" / "judged_loop.json")
    p.add_argument("--report-only", action="store_true")
    args = p.parse_args(argv)
    args.sets = names(args.sets, tuple(SETS), "set")
    args.systems = names(args.systems, tuple(SYSTEMS), "system")
    return args


def examples_of(name: str) -> list[Example]:
    task, path, rows = SETS[name]
    return load_examples(task, path, rows.stop)[rows.start :]


def runs(args: argparse.Namespace) -> list[tuple[str, str]]:
    """(set, system) pairs to run: best-no-judge only where the task has code checks."""
    return [
        (s, system)
        for s in args.sets
        for system in args.systems
        if system != "best-no-judge" or get_task(SETS[s][0]).has_verifier
    ]


def run_one(name: str, system: str, args: argparse.Namespace, cache: ResponseCache) -> Path:
    task = get_task(SETS[name][0])
    engine = SelfRefine(
        task,
        get_backend(args.model),
        config=RefineConfig.build(**SYSTEMS[system]),
        wrap=lambda b: CachedBackend(b, cache),
    )
    examples = examples_of(name)
    folder = args.out / f"{name}-{system}"
    store = RunStore(folder)
    store.start(run_meta(folder.name, engine, str(SETS[name][1]), len(examples)))
    started = time.perf_counter()
    asyncio.run(run_eval(engine, examples, store, concurrency=1, console=Console(stderr=True)))
    print(f"{name} {system}: {time.perf_counter() - started:.0f} s -> {folder}", flush=True)
    return folder


def rows_of(folder: Path) -> dict[str, ExampleRow]:
    return {r.id: r for r in RunStore(folder).rows() if r.result is not None} if folder.exists() else {}


def pairwise(name: str, args: argparse.Namespace, cache: ResponseCache) -> list[str]:
    """Returned (best) vs one-step per row, both orders: 'best' / 'one-step' / 'tie'."""
    path = args.out / f"{name}-pairwise.jsonl"
    done = {json.loads(line)["id"]: json.loads(line)["winner"] for line in path.open()} if path.exists() else {}
    one, best = rows_of(args.out / f"{name}-one-step"), rows_of(args.out / f"{name}-best")
    task = get_task(SETS[name][0])
    judge = PairwiseJudge(
        CachedBackend(get_backend(args.model), cache), criteria=task.judge_criteria or DEFAULT_CRITERIA
    )
    for id in sorted(set(one) & set(best) - set(done)):
        a, b = one[id].result, best[id].result
        verdict = asyncio.run(judge.acompare(a.input, a.output or "", b.output or ""))
        done[id] = {"a": "one-step", "b": "best", "tie": "tie"}[verdict.winner]
        with path.open("a") as f:
            f.write(json.dumps({"id": id, "winner": done[id]}) + "\n")
    return list(done.values())


def tokens(row: ExampleRow) -> int:
    return row.result.usage.total_tokens if row.result else 0


def judge_calls(row: ExampleRow) -> list[Any]:
    """The judge's calls of a row (the "judge" role's: one decoded token each)."""
    return [c for c in row.result.calls if c.ok and c.role == "judge"]


def summarise(name: str, args: argparse.Namespace, cache: ResponseCache) -> dict[str, Any]:
    one = rows_of(args.out / f"{name}-one-step")
    out: dict[str, Any] = {
        "set": name,
        "task": SETS[name][0],
        "rows": f"{SETS[name][2].start}-{SETS[name][2].stop - 1}",
    }
    for system in ("best", "best-no-judge"):
        other = rows_of(args.out / f"{name}-{system}")
        ids = sorted(set(one) & set(other))
        if not ids:
            continue
        base = [one[i].result.metric for i in ids]
        returned = [other[i].result.metric for i in ids]
        first = [other[i].metrics[0] if other[i].metrics else None for i in ids]
        diff = paired_bootstrap_diff(base, returned) if any(v is not None for v in base) else None
        pairs = [(a, b) for a, b in zip(base, returned, strict=True) if a is not None and b is not None]
        calls = [c for i in ids for c in judge_calls(other[i])]
        out[system] = {
            "n": len(ids),
            "max_iterations": RunStore(args.out / f"{name}-{system}").meta().config.get("max_iterations"),  # as run
            "one_step": mean_known(base),
            "first_draft": mean_known(first),
            "returned": mean_known(returned),
            "delta": diff.model_dump() if diff else None,
            "wins_ties_losses": [
                sum(b > a for a, b in pairs),
                sum(b == a for a, b in pairs),
                sum(b < a for a, b in pairs),
            ],
            "tokens_per_example": sum(tokens(other[i]) for i in ids) / len(ids),
            "one_step_tokens_per_example": sum(tokens(one[i]) for i in ids) / len(ids),
            "seconds_per_example": sum(other[i].result.usage.seconds for i in ids) / len(ids),
            "judge_calls_per_example": len(calls) / len(ids),
            "judge_prompt_tokens_per_call": sum(c.prompt_tokens for c in calls) / len(calls) if calls else None,
            "judge_seconds_per_call": sum(c.seconds for c in calls) / len(calls) if calls else None,
            "returned_outputs": {i: other[i].result.output for i in ids},
        }
    if name in PAIRWISE and "best" in out:
        verdicts = pairwise(name, args, cache)
        out["pairwise"] = {w: verdicts.count(w) for w in ("best", "tie", "one-step")}
    return out


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    cache = ResponseCache(args.cache)
    if not args.report_only:
        for name, system in runs(args):
            if not SETS[name][1].exists():
                print(f"{name}: skipped: no {SETS[name][1]}", file=sys.stderr)
                continue
            run_one(name, system, args, cache)
    summary = [summarise(name, args, cache) for name in args.sets]
    args.summary.write_text(json.dumps(summary, indent=1), encoding="utf-8")
    for s in summary:
        for system in ("best", "best-no-judge"):
            if system in s:
                r = s[system]
                print(
                    f"{s['set']:17} {system:13} n={r['n']:2} one-step {r['one_step']} -> {r['returned']}  W/T/L {r['wins_ties_losses']}"
                )
        if "pairwise" in s:
            print(f"{s['set']:17} pairwise {s['pairwise']}")
    cache.close()


if __name__ == "__main__":
    main()
