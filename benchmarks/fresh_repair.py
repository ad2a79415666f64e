"""The repair mechanism against each task's own ``--preset best``, on commongen's and gsm8k's fresh rows.

    .venv/bin/python benchmarks/fresh_repair.py --tasks commongen --limit 12 --minutes 18   # run (resumable)
    .venv/bin/python benchmarks/fresh_repair.py --report-only                              # docs/frontier.md

Issue 45's "the same mechanism on commongen and gsm8k (fresh rows) against today's preset":
``ours-repair`` is :data:`~selfrefine.task.task.REPAIR_BEST` (chat's ``--preset best``: first
drafts one at a time until one passes the checks, at most 4, then one failed check's focused
repair at a time, 2 tries each, at most 3 refinements, no judge) set on the task;
``ours-best`` is the task's own ``--preset best``. Both are points of ``frontier.py`` (its
records, metric and ``FRESH_ROWS``, rows nobody tuned on), run row by row in turn (each row
by both points before the next, so a run cut short by ``--minutes`` stays paired), on the
embedded model in process (the default GGUF through llama-cpp-python, as ``ifeval.py`` runs
it: no llama-server build needed) behind a response cache both points share (a request both
send is answered once; tokens count every call). The report (``--doc``, between its markers)
has per task and point n, the returned metric with its 95% interval, tokens and calls per
example, for commongen the share of returned outputs the scene check flags as lists
(:func:`~selfrefine.tasks.commongen.is_list_like`), and the paired difference repair − best.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

from _peers import (
    DATA_DIR,
    ROOT,
    Record,
    append_record,
    first_sentence,
    metric,
    read_records,
    records_path,
    select_rows,
    write_between,
)
from frontier import FRESH_ROWS, OURS, _one
from vs_peers import log

from selfrefine.core.config import RefineConfig
from selfrefine.evaluation.datasets import Example
from selfrefine.evaluation.stats import bootstrap_mean, paired_bootstrap_diff
from selfrefine.tasks.commongen import is_list_like

TASKS = ("commongen", "gsm8k")
POINTS = ("ours-best", "ours-repair")  # preset first: the mechanism's difference is repair − best
START, END = "<!-- frontier:repair:start -->", "<!-- frontier:repair:end -->"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", default=",".join(TASKS))
    p.add_argument("--limit", type=int, default=12, help="the first N fresh rows of each task")
    p.add_argument("--minutes", type=float, default=18.0, help="start no new row after this many minutes")
    p.add_argument("--out", type=Path, default=ROOT / "runs" / "fresh-repair")
    p.add_argument("--doc", type=Path, default=ROOT / "docs" / "frontier.md")
    p.add_argument("--data-dir", type=Path, default=DATA_DIR, help="where the dev files are")
    p.add_argument("--report-only", action="store_true")
    p.add_argument(
        "--replay", action="store_true", help="the report replays the mechanism's runs from the cache: repairs kept"
    )
    args = p.parse_args(argv)
    args.tasks = args.tasks.split(",")
    bad = [t for t in args.tasks if t not in TASKS]
    if bad:
        p.error(f"unknown task(s) {', '.join(bad)}; known: {', '.join(TASKS)}")
    return args


def fresh(task: str, limit: int, data_dir: Path) -> list[Example]:
    first, last = FRESH_ROWS[task]
    return select_rows(task, first, min(last, first + limit - 1), data_dir)


async def run(args: argparse.Namespace) -> None:
    from selfrefine.backends.embedded import LlamaCppBackend
    from selfrefine.engine.loop import SelfRefine
    from selfrefine.evaluation.response_cache import CachedBackend, ResponseCache

    args.out.mkdir(parents=True, exist_ok=True)
    backend = CachedBackend(LlamaCppBackend(model="embedded", n_ctx=8192), ResponseCache(args.out / "responses.sqlite"))
    deadline = time.monotonic() + args.minutes * 60
    for task in args.tasks:
        engines = {p: SelfRefine(task, backend, config=RefineConfig(**OURS[p])) for p in POINTS}
        done = {p: read_records(records_path(args.out, task, p)) for p in POINTS}
        for example in fresh(task, args.limit, args.data_dir):
            todo = [p for p in POINTS if example.id not in done[p]]
            if todo and time.monotonic() > deadline:
                log(f"{task}: --minutes {args.minutes} spent; rerun to go on")
                return
            for point in todo:
                record = await _one(engines[point], point, task, example)
                append_record(records_path(args.out, task, point), record)
                log(
                    f"{point} {task} {record.id}: {record.metric:.3f} tokens {record.prompt_tokens}+"
                    f"{record.completion_tokens} calls {record.calls} {record.seconds:.1f} s {record.stop_reason}"
                )


def list_share(task: str, records: list[Record], by_id: dict[str, Example]) -> float | None:
    """The share of returned outputs the scene check flags as lists (commongen only)."""
    if task != "commongen" or not records:
        return None
    return sum(is_list_like(r.output, by_id[r.id].input) for r in records if r.output) / len(records)


def iv(x) -> str:
    return "–" if x is None else f"{x.estimate:.3f} [{x.low:.3f}, {x.high:.3f}]"


def signed_iv(x) -> str:
    return "–" if x is None else f"{x.estimate:+.3f} [{x.low:+.3f}, {x.high:+.3f}]"


def verdict(diff, ratio: float) -> str:
    """The paired difference in words: worse or better only where its interval excludes 0."""
    if diff is None:
        return "no paired rows"
    cost = f"at {ratio:.2f}× the preset's tokens"
    if diff.high < 0:
        return f"the mechanism is **worse** than the task's preset, {diff.estimate:+.3f} {cost}"
    if diff.low > 0:
        return f"the mechanism is **better** than the task's preset, {diff.estimate:+.3f} {cost}"
    side = "below" if diff.estimate < 0 else "above" if diff.estimate > 0 else "level with"
    return f"{side} the task's preset by {abs(diff.estimate):.3f}, an interval that includes 0, {cost}"


def first_coverage(task: str, records: list[Record], by_id: dict[str, Example]) -> list[float] | None:
    """commongen: each returned output's first sentence's coverage (the task asks for one sentence)."""
    if task != "commongen":
        return None
    return [metric(task, by_id[r.id], first_sentence(r.output)) for r in records]


def replay(args: argparse.Namespace, task: str, examples: list[Example]) -> str:
    """The mechanism's runs replayed through the library from the response cache (a request
    it does not hold reaches the model and is counted): how many first drafts passed every
    check, and the focused repairs tried, kept, and why the others were rejected."""
    from selfrefine.backends.embedded import LlamaCppBackend
    from selfrefine.engine.loop import SelfRefine
    from selfrefine.evaluation.response_cache import CachedBackend, ResponseCache

    backend = CachedBackend(LlamaCppBackend(model="embedded", n_ctx=8192), ResponseCache(args.out / "responses.sqlite"))
    engine = SelfRefine(task, backend, config=RefineConfig(**OURS["ours-repair"]))
    passed, tries, kept, why = 0, 0, 0, {"its check still failed": 0, "it broke a passing check": 0, "other": 0}
    for example in examples:
        result = asyncio.run(engine.arun(example.input, example.reference))
        first = result.iterations[0].verification if result.iterations else None
        passed += bool(first and first.passed)
        for focus in (it.focus for it in result.iterations if it.focus is not None):
            tries += 1
            kept += focus.kept
            if not focus.kept:
                reason = (
                    "its check still failed"
                    if focus.why.startswith("the check it was for still fails")
                    else "it broke a passing check"
                    if focus.why.startswith("it breaks a check")
                    else "other"
                )
                why[reason] += 1
    rejected = ", ".join(f"{n} {reason}" for reason, n in why.items() if n) or "none"
    return (
        f"  replayed from the response cache ({backend.misses} calls missed it): a first draft passed every "
        f"check (no repair needed) on {passed} of {len(examples)} rows; focused repairs tried {tries}, kept {kept}; "
        f"rejected: {rejected} (other: scored lower by the checks, or no change)"
    )


def report(args: argparse.Namespace) -> str:
    """Per task: each point on the rows both points finished, then repair − best, paired."""
    rows = [
        "| task | point | n | returned [95%] | 1st sentence [95%] | tokens/ex | calls/ex | outputs flagged as lists |",
        "|---|---|---|---|---|---|---|---|",
    ]
    diffs = [
        "| task | n | repair − best [95%] | better / worse | 1st sentence: repair − best [95%] "
        "| tokens: repair / best | lists: repair − best |",
        "|---|---|---|---|---|---|---|",
    ]
    verdicts = []
    for task in args.tasks:
        examples = fresh(task, FRESH_ROWS[task][1] - FRESH_ROWS[task][0] + 1, args.data_dir)
        by_id = {e.id: e for e in examples}
        found = {p: read_records(records_path(args.out, task, p)) for p in POINTS}
        ids = [e.id for e in examples if all(e.id in found[p] for p in POINTS)]
        if not ids:
            continue
        recs = {p: [found[p][i] for i in ids] for p in POINTS}
        tokens, lists = {}, {}
        for p in POINTS:
            tokens[p] = sum(r.prompt_tokens + r.completion_tokens for r in recs[p]) / len(ids)
            lists[p] = list_share(task, recs[p], by_id)
            calls = sum(r.calls for r in recs[p]) / len(ids)
            share = "–" if lists[p] is None else f"{lists[p]:.3f}"
            first = first_coverage(task, recs[p], by_id)
            rows.append(
                f"| {task} | {p} | {len(ids)} | {iv(bootstrap_mean([r.metric for r in recs[p]]))} "
                f"| {iv(first and bootstrap_mean(first))} | {tokens[p]:.0f} | {calls:.2f} | {share} |"
            )
        best, repair = ([r.metric for r in recs[p]] for p in POINTS)
        diff = paired_bootstrap_diff(best, repair)
        better = sum(r > b for b, r in zip(best, repair, strict=True))
        worse = sum(r < b for b, r in zip(best, repair, strict=True))
        ratio = tokens["ours-repair"] / tokens["ours-best"] if tokens["ours-best"] else float("nan")
        share = "–" if lists["ours-best"] is None else f"{lists['ours-repair'] - lists['ours-best']:+.3f}"
        firsts = [first_coverage(task, recs[p], by_id) for p in POINTS]
        first = signed_iv(firsts[0] and paired_bootstrap_diff(*firsts))
        diffs.append(
            f"| {task} | {len(ids)} | {signed_iv(diff)} | {better} / {worse} | {first} | {ratio:.2f}× | {share} |"
        )
        verdicts.append(f"- {task} ({len(ids)} rows): {verdict(diff, ratio)}")
        if args.replay:
            verdicts.append(replay(args, task, [by_id[i] for i in ids]))
    text = "\n".join(rows) + "\n\n" + "\n".join(diffs) + "\n\n" + "\n".join(verdicts)
    write_between(args.doc, START, END, text)
    print(text)
    return text


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if not args.report_only:
        asyncio.run(run(args))
    report(args)


if __name__ == "__main__":
    sys.exit(main())
