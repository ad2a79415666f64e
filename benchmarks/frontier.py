"""Quality against tokens: our samples × refinements grid, the auto strategy and the presets
against DSPy's BestOfN and Refine, on one llama-server, the same inputs and metric code.

    .venv/bin/python benchmarks/frontier.py                                   # every point
    .venv/bin/python benchmarks/frontier.py --points ours-k4-r1,dspy-bestofn-n3 --tasks commongen
    .venv/bin/python benchmarks/frontier.py --report-only                     # docs/frontier.md from runs
    .venv/bin/python benchmarks/frontier.py --rows fresh --points ours-k1-r0  # the fresh rows (FRESH_ROWS)

Grown from ``vs_peers.py`` (its server, DSPy environment, records and metric): one
llama-server on the default model's GGUF file serves every system, one example at a time.
A point is a system on a task; each finished example is appended to
``--out/<task>/<point>.jsonl`` and skipped on a rerun, so the benchmark is resumable and
grows in passes (``--limit-*``, ``--points``). Ours runs through the library on the
``openai:`` backend behind a response cache (``--cache``, shared by every point: a rerun,
or a point whose requests another point already sent, costs no model call; ``--no-cache``:
every call reaches the server).

Rows: without ``--rows`` a task runs on the first ``--limit-*`` rows of its dev file (the
old rows, on which the prompts, presets and the auto rule were shaped); ``--rows fresh``
(``FRESH_ROWS``) or ``--rows commongen=56-99,gsm8k=132-231`` (inclusive 0-based rows) runs
on rows nobody tuned on. Ids are unique per row, so both kinds share a point's file.

- ``ours-kK-rR``: ``samples=K``, ``max_iterations=R`` (R=0: the best of K first drafts),
  hybrid feedback, the returned draft chosen by the task's verifier; ``ours-kK-rR-v``: the
  same with the verifier's findings as the only feedback (no critic call); on gsm8k
  ``ours-k4-r0-quantities`` / ``-steps`` vote 4 samples written two ways in turn (a program,
  and a program quoting the question's numbers first / a step-by-step answer);
- ``ours-auto-B``: ``strategy="auto"`` with a budget of B tokens per example;
- ``ours-best``: ``preset="best"``; ``ours-paper``: the paper's loop; ``ours-repair``: ``REPAIR_BEST``
  (chat's ``--preset best``: sequential first drafts, then focused repairs; ``fresh_repair.py``);
- ``dspy-bestofn-nN``: DSPy ``BestOfN(N)``, ``dspy-refine-n3``: ``Refine(N=3)``, reward = the
  task's own reference-free check (threshold 1.0).

The report (``--doc``, between its markers) has each point's returned metric with its 95%
bootstrap interval, tokens and seconds per example (commongen: also the first sentence's
coverage; "any correct": the share of examples where some draft of the run scored 1.0, the
ceiling of a better selection), a PNG per task (metric against tokens, log x) and the
dominance table: for each DSPy point, our best point at no more tokens per example and the
paired difference. The fresh rows get tables of their own (``## Fresh rows``), with, for
each ``ours-auto-B``, the fixed grid's best point at no more tokens and the paired
difference auto − it. s/ex is the wall time over the examples with no cache hit (their
count beside it): an example answered partly from the cache took less than its cost.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
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
    parse_span,
    read_records,
    records_path,
    select_examples,
    select_rows,
    summarise,
    write_between,
)
from vs_peers import MODEL_NAME, log, peers_python, sampling, server

from selfrefine.backends.base import Backend
from selfrefine.backends.openai_compat import OpenAIBackend
from selfrefine.core.config import RefineConfig
from selfrefine.core.records import RunResult
from selfrefine.engine.loop import SelfRefine
from selfrefine.evaluation.datasets import Example
from selfrefine.evaluation.response_cache import CachedBackend, ResponseCache
from selfrefine.evaluation.stats import paired_bootstrap_diff
from selfrefine.task.task import REPAIR_BEST

TASKS = ("commongen", "gsm8k", "acronym", "sentiment")
PEER_TASKS = ("commongen", "gsm8k")  # DSPy runs these (benchmarks/_peers_dspy.py has their signatures)
HYBRID = {"verifier_mode": "hybrid", "select": "verified"}
VERIFIER = {"verifier_mode": "verifier", "select": "verified"}
OURS: dict[str, dict] = {
    **{f"ours-k{k}-r{r}": {**HYBRID, "samples": k, "max_iterations": r} for k in (1, 2, 4) for r in (0, 1, 2)},
    "ours-k3-r0": {**HYBRID, "samples": 3, "max_iterations": 0},  # between the grid's widths
    "ours-k5-r0": {**HYBRID, "samples": 5, "max_iterations": 0},  # gsm8k's earlier --preset best
    # gsm8k's votes across two ways of writing a program in turn (the points above: its default, programs)
    "ours-k4-r0-quantities": {**HYBRID, "samples": 4, "max_iterations": 0, "ways": ("program", "quantities")},
    "ours-k4-r0-steps": {**HYBRID, "samples": 4, "max_iterations": 0, "ways": ("program", "steps")},
    # the code's findings alone (no critic call): a round costs its refinements only
    **{f"ours-k{k}-r{r}-v": {**VERIFIER, "samples": k, "max_iterations": r} for k in (1, 2, 4) for r in (1, 2)},
    **{f"ours-auto-{b}": {**HYBRID, "strategy": "auto", "max_total_tokens": b} for b in (1000, 1500, 3000, 6000)},
    "ours-best": {"preset": "best"},
    "ours-repair": dict(REPAIR_BEST),  # chat's --preset best on the task (issue 45; benchmarks/fresh_repair.py)
    "ours-paper": {},
}
THEIRS = {
    "dspy-bestofn-n1": ("bestofn", 1),
    "dspy-bestofn-n3": ("bestofn", 3),
    "dspy-bestofn-n5": ("bestofn", 5),
    "dspy-refine-n3": ("refine", 3),
}
DEFAULT_POINTS = (
    "dspy-bestofn-n3",
    "ours-k4-r0",
    "ours-best",
    "ours-k1-r0",
    "ours-k2-r0",
    "dspy-bestofn-n1",
    "ours-auto-3000",
    "dspy-bestofn-n5",
    "ours-k4-r1",
    "ours-k2-r1",
    "ours-k1-r1",
    "dspy-refine-n3",
)
# rows not used to shape prompts, presets or the auto rule (issue 31): commongen rows 40-55
# and gsm8k rows 100-131 shaped the prompts, the first --limit-* rows the presets and auto
FRESH_ROWS: dict[str, tuple[int, int]] = {"commongen": (56, 99), "gsm8k": (132, 231), "acronym": (16, 65)}
# the fixed grid an auto point is held against: samples x rounds, and --preset best
GRID = tuple(p for p in OURS if p.startswith("ours-k") or p == "ours-best")
TABLE_START, TABLE_END = "<!-- frontier:table:start -->", "<!-- frontier:table:end -->"
FRESH_START, FRESH_END = "<!-- frontier:fresh:start -->", "<!-- frontier:fresh:end -->"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--limit-commongen", type=int, default=20)
    p.add_argument("--limit-gsm8k", type=int, default=30)
    p.add_argument("--limit-acronym", type=int, default=16)
    p.add_argument("--limit-sentiment", type=int, default=16)
    p.add_argument("--tasks", default=",".join(TASKS))
    p.add_argument("--points", default=",".join(DEFAULT_POINTS), help="comma-separated; see the module docstring")
    p.add_argument("--out", type=Path, default=ROOT / "runs" / "frontier")
    p.add_argument("--doc", type=Path, default=ROOT / "docs" / "frontier.md")
    p.add_argument("--base-url", help="an OpenAI-compatible server already running (default: start llama-server)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rows", help="fresh, or TASK=FIRST-LAST,... (inclusive 0-based rows; other tasks: --limit-*)")
    p.add_argument("--data-dir", type=Path, default=DATA_DIR, help="where the dev files are")
    p.add_argument("--cache", type=Path, help="our points' response cache (default: OUT/responses.sqlite)")
    p.add_argument("--no-cache", action="store_true", help="every call of ours reaches the server")
    p.add_argument("--report-only", action="store_true")
    args = p.parse_args(argv)
    args.limits = {task: getattr(args, f"limit_{task}") for task in TASKS}
    try:
        args.rows = parse_rows(args.rows) if args.rows else {}
    except ValueError as exc:
        p.error(str(exc))
    args.cache = None if args.no_cache else (args.cache or args.out / "responses.sqlite")
    args.tasks, args.points = args.tasks.split(","), args.points.split(",")
    unknown = [x for x in args.points if x not in OURS and x not in THEIRS]
    if unknown:
        p.error(f"unknown point(s) {', '.join(unknown)}; known: {', '.join([*OURS, *THEIRS])}")
    return args


def parse_rows(spec: str) -> dict[str, tuple[int, int]]:
    """``--rows``: ``fresh`` (FRESH_ROWS) or ``TASK=FIRST-LAST,...`` with inclusive 0-based
    row indices of each task's dev file; ValueError names the part that is wrong."""
    if spec.strip() == "fresh":
        return dict(FRESH_ROWS)
    rows: dict[str, tuple[int, int]] = {}
    for part in spec.split(","):
        task, eq, span = part.strip().partition("=")
        if not eq or task not in TASKS or task in rows:
            raise ValueError(
                f"bad --rows part {part!r}: expected TASK=FIRST-LAST once per task, TASK one of {', '.join(TASKS)}"
            )
        rows[task] = parse_span(span)
    return rows


def examples_of(task: str, args: argparse.Namespace) -> list[Example]:
    """The task's rows for this run: its ``--rows`` range, else its first ``--limit-*`` rows."""
    if task in args.rows:
        return select_rows(task, *args.rows[task], args.data_dir)
    return select_examples(task, args.limits[task], args.data_dir)


def run_ours(point: str, task: str, examples: list[Example], base_url: str, args: argparse.Namespace) -> None:
    path = records_path(args.out, task, point)
    todo = [e for e in examples if e.id not in read_records(path)]
    log(f"{point} {task}: {len(todo)} to run")
    if todo:
        asyncio.run(_run_ours(point, task, todo, base_url, path, args.cache))


async def _run_ours(point: str, task: str, todo: list[Example], base_url: str, path: Path, cache: Path | None) -> None:
    backend: Backend = OpenAIBackend(MODEL_NAME, base_url=base_url, concurrency=1, request_n="off")
    if cache is not None:  # samples are separate seeded requests either way (request_n off)
        backend = CachedBackend(backend, ResponseCache(cache))
    engine = SelfRefine(task, backend, config=RefineConfig(**OURS[point]))
    try:
        for example in todo:
            record = await _one(engine, point, task, example)
            append_record(path, record)
            log(
                f"{point} {task} {record.id}: {record.one_step_metric:.3f} -> {record.metric:.3f}  "
                f"tokens {record.prompt_tokens}+{record.completion_tokens}  {record.seconds:.1f} s  "
                f"{record.cache_hits}/{record.calls} cached  any correct {record.any_correct}  {record.stop_reason}"
            )
    finally:
        await engine.aclose()


async def _one(engine: SelfRefine, point: str, task: str, example: Example) -> Record:
    t0 = time.perf_counter()
    try:
        result = await engine.arun(example.input, example.reference)
    except Exception as exc:  # noqa: BLE001 - a crash is a measured outcome
        return Record(
            id=example.id,
            task=task,
            system=point,
            crashed=True,
            error=f"{type(exc).__name__}: {exc}"[:500],
            seconds=round(time.perf_counter() - t0, 3),
        )
    one_step, output = (result.iterations[0].draft if result.iterations else ""), result.output or ""
    return Record(
        id=example.id,
        task=task,
        system=point,
        one_step=one_step,
        output=output,
        one_step_metric=metric(task, example, one_step),
        metric=metric(task, example, output),
        crashed=not output,
        error=result.error,
        calls=result.usage.calls,
        prompt_tokens=result.usage.prompt_tokens,
        completion_tokens=result.usage.completion_tokens,
        cached_prompt_tokens=result.usage.cached_prompt_tokens,
        seconds=round(time.perf_counter() - t0, 3),
        load=round(os.getloadavg()[0], 2),
        stop_reason=result.stop_reason.value,
        cache_hits=sum(c.cached for c in result.calls),
        any_correct=any_correct(task, example, result),
    )


def any_correct(task: str, example: Example, result: RunResult) -> bool:
    """Whether any draft of the run (every iteration's, every sample's) scores 1.0 by the metric."""
    drafts = {it.draft for it in result.iterations} | {c.draft for it in result.iterations for c in it.candidates}
    return any(metric(task, example, d) >= 1.0 for d in drafts if d)


def run_theirs(point: str, task: str, args: argparse.Namespace, base_url: str) -> None:
    system, n = THEIRS[point]
    temperature, max_tokens = sampling(task)
    cmd = [
        str(peers_python()),
        str(ROOT / "benchmarks" / "_peers_dspy.py"),
        "--task",
        task,
        "--system",
        system,
        "--api-base",
        base_url,
        "--model-name",
        MODEL_NAME,
        *(["--rows", "{}-{}".format(*args.rows[task])] if task in args.rows else ["--limit", str(args.limits[task])]),
        "--data-dir",
        str(args.data_dir),
        "--n",
        str(n),
        "--temperature",
        str(temperature),
        "--max-tokens",
        str(max_tokens),
        "--out",
        str(args.out),
        "--name",
        point,
    ]
    subprocess.run(cmd, check=True, env={**os.environ, "PYTHONPATH": str(ROOT / "benchmarks")})


# --- the report ---------------------------------------------------------------------------


def load(out: Path, task: str, examples: list[Example]) -> dict[str, list[Record]]:
    """The finished records of every point on the given inputs of a task."""
    found = {}
    for point in [*OURS, *THEIRS]:
        recs = read_records(records_path(out, task, point))
        chosen = [recs[e.id] for e in examples if e.id in recs]
        if chosen:
            found[point] = chosen
    return found


def fmt_diff(iv) -> str:
    return "–" if iv is None else f"{iv.estimate:+.3f} [{iv.low:+.3f}, {iv.high:+.3f}]"


def paired(task: str, base: list[Record], other: list[Record], examples: list[Example]) -> tuple[int, str, str]:
    """``other − base`` on the examples both finished: their number, the difference with its
    95% interval, and for commongen the same on the output's first sentence (a gain that comes
    only from writing more sentences does not count)."""
    by_example = {e.id: e for e in examples}
    by_id = {r.id: r for r in base}
    pairs = [(by_id[r.id], r) for r in other if r.id in by_id]
    diff = paired_bootstrap_diff([b.metric for b, _ in pairs], [o.metric for _, o in pairs])
    first = "–"
    if task == "commongen":

        def strict(rec: Record) -> float:
            return metric(task, by_example[rec.id], first_sentence(rec.output))

        first = fmt_diff(paired_bootstrap_diff([strict(b) for b, _ in pairs], [strict(o) for _, o in pairs]))
    return len(pairs), fmt_diff(diff), first


def best_within(candidates: list[str], summaries: dict, budget: float) -> str | None:
    """The candidate with the highest returned metric at no more than ``budget`` tokens/ex."""
    within = [p for p in candidates if summaries[p].tokens <= budget]
    return max(within, key=lambda p: summaries[p].returned.estimate) if within else None


def dominance(task: str, points: dict[str, list[Record]], summaries: dict, examples: list[Example]) -> list[str]:
    """For each DSPy point: our best point at no more tokens per example, and the paired
    difference (ours − theirs) on the examples both finished (commongen: also first sentence)."""
    ours = [p for p in points if p in OURS]
    return [
        at_its_tokens(task, p, ours, points, summaries, examples, subject_minus_best=False)
        for p in points
        if p in THEIRS
    ]


def versus_grid(task: str, points: dict[str, list[Record]], summaries: dict, examples: list[Example]) -> list[str]:
    """For each ``ours-auto-B``: the fixed grid's best point (GRID) at no more tokens per
    example, and the paired difference auto − it (commongen: also first sentence)."""
    grid = [p for p in points if p in GRID]
    autos = [p for p in points if p.startswith("ours-auto-")]
    return [at_its_tokens(task, p, grid, points, summaries, examples, subject_minus_best=True) for p in autos]


def at_its_tokens(
    task: str,
    subject: str,
    pool: list[str],
    points: dict[str, list[Record]],
    summaries: dict,
    examples: list[Example],
    subject_minus_best: bool,
) -> str:
    """One row: the best of ``pool`` at no more tokens per example than ``subject``, and the
    paired difference (``subject`` − it when ``subject_minus_best``, else it − ``subject``)."""
    budget = summaries[subject].tokens
    best = best_within(pool, summaries, budget)
    if best is None:
        return f"| {task} | {subject} | {budget:.0f} | none at ≤ its tokens | – | – | – |"
    base, other = (points[best], points[subject]) if subject_minus_best else (points[subject], points[best])
    n, diff, first = paired(task, base, other, examples)
    return f"| {task} | {subject} | {budget:.0f} | {best} ({summaries[best].tokens:.0f}) | {n} | {diff} | {first} |"


def frontier(summaries: dict) -> list[str]:
    """Our points that no other point of ours dominates: none has at most their tokens and
    at least their returned metric, and fewer tokens or a higher metric (sorted by tokens)."""
    ours = {p: s for p, s in summaries.items() if p in OURS}

    def dominates(o, s) -> bool:
        at_most, at_least = o.tokens <= s.tokens, o.returned.estimate >= s.returned.estimate
        return at_most and at_least and (o.tokens < s.tokens or o.returned.estimate > s.returned.estimate)

    return [
        p
        for p, s in sorted(ours.items(), key=lambda kv: kv[1].tokens)
        if not any(dominates(o, s) for q, o in ours.items() if q != p)
    ]


def plot(task: str, summaries: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for family, color in (("ours", "tab:blue"), ("dspy", "tab:orange")):
        pts = sorted((s.tokens, s.returned.estimate, name) for name, s in summaries.items() if name.startswith(family))
        if pts:
            ax.plot(
                [p[0] for p in pts], [p[1] for p in pts], "o-" if family == "dspy" else "o", color=color, label=family
            )
            for x, y, name in pts:
                ax.annotate(
                    name.removeprefix(f"{family}-"), (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points"
                )
    ax.set_xscale("log")
    ax.set(xlabel="prompt + completion tokens per example (log)", ylabel="returned metric", title=task)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


TABLE_HEAD = [
    "| task | point | n | returned [95%] | 1st sentence [95%] | any correct | one-step | tokens/ex | calls/ex "
    "| hits/ex | s/ex (n) |",
    "|---|---|---|---|---|---|---|---|---|---|---|",
]
TIME_NOTE = (
    "s/ex: wall seconds per example over the examples none of whose calls the response cache answered "
    "(how many in brackets; an example with a hit took less than its cost); hits/ex: calls answered from "
    "the cache; any correct: the share of examples where some draft of the run (any sample, any round) "
    "scores 1.0, the ceiling of a better selection (gsm8k: any sample correct); tokens count every call, "
    "cached or not."
)


def point_row(task: str, point: str, s, records: list[Record]) -> str:
    """One point's line of the results table."""
    first = (
        "–"
        if s.first_sentence is None
        else f"{s.first_sentence.estimate:.3f} [{s.first_sentence.low:.3f}, {s.first_sentence.high:.3f}]"
    )
    known = [r.any_correct for r in records if r.any_correct is not None]
    ceiling = f"{sum(known) / len(known):.3f}" if known else "–"
    hits = sum(r.cache_hits for r in records) / len(records)
    timed = [r.seconds for r in records if not r.cache_hits]
    secs = f"{sum(timed) / len(timed):.1f} ({len(timed)})" if timed else "– (0)"
    return (
        f"| {task} | {point} | {s.n} | {s.returned.estimate:.3f} [{s.returned.low:.3f}, {s.returned.high:.3f}] "
        f"| {first} | {ceiling} | {s.one_step.estimate:.3f} | {s.tokens:.0f} | {s.calls:.2f} | {hits:.2f} | {secs} |"
    )


def section(args: argparse.Namespace, rows: dict[str, list[Example]], suffix: str = "") -> tuple[str, int]:
    """The tables of one set of rows (task -> its examples) and how many records they hold;
    ``suffix`` tells the plots apart (fresh rows: ``-fresh``) and adds the auto table."""
    table = list(TABLE_HEAD)
    dom = [
        "| task | DSPy point | its tokens/ex | our best at ≤ its tokens (tokens/ex) | n | ours − theirs [95%] "
        "| 1st sentence: ours − theirs [95%] |",
        "|---|---|---|---|---|---|---|",
    ]
    grid = [
        "| task | auto point | its tokens/ex | the grid's best at ≤ its tokens (tokens/ex) | n | auto − grid [95%] "
        "| 1st sentence: auto − grid [95%] |",
        "|---|---|---|---|---|---|---|",
    ]
    fronts = ["| task | our frontier (tokens/ex → returned) | `--preset best` on it? |", "|---|---|---|"]
    found = 0
    for task, examples in rows.items():
        points = load(args.out, task, examples)
        found += sum(map(len, points.values()))
        summaries = {p: summarise(task, p, recs, examples) for p, recs in points.items()}
        for p, s in sorted(summaries.items(), key=lambda kv: kv[1].tokens):
            table.append(point_row(task, p, s, points[p]))
        dom += dominance(task, points, summaries, examples)
        grid += versus_grid(task, points, summaries, examples)
        front = frontier(summaries)
        if front:
            best = "ours-best" in summaries and ("yes" if "ours-best" in front else "no")
            fronts.append(
                f"| {task} | "
                + ", ".join(f"{p} ({summaries[p].tokens:.0f} → {summaries[p].returned.estimate:.3f})" for p in front)
                + f" | {best or 'not run'} |"
            )
        if summaries:
            plot(task, summaries, args.doc.parent / f"frontier{suffix}-{task}.png")
    parts = [table, [TIME_NOTE], dom, *([grid] if suffix else []), fronts]
    return "\n\n".join("\n".join(part) for part in parts), found


def report(args: argparse.Namespace) -> str:
    """The old rows' tables (each task's first --limit-* rows) and the fresh rows' (--rows, else
    FRESH_ROWS), each between its markers in --doc; a set with no records leaves its block as it is."""
    old = {task: select_examples(task, args.limits[task], args.data_dir) for task in args.tasks}
    spans = args.rows or FRESH_ROWS
    fresh = {task: select_rows(task, *spans[task], args.data_dir) for task in args.tasks if task in spans}
    texts = []
    for rows, suffix, (start, end) in (
        (old, "", (TABLE_START, TABLE_END)),
        (fresh, "-fresh", (FRESH_START, FRESH_END)),
    ):
        text, found = section(args, rows, suffix)
        if found:
            write_between(args.doc, start, end, text)
        texts.append(f"{'fresh' if suffix else 'old'} rows ({found} records)\n\n{text}")
    print("\n\n".join(texts))
    return "\n\n".join(texts)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if not args.report_only:
        with server(args) as base_url:
            for point in args.points:
                for task in args.tasks:
                    if point in OURS:
                        run_ours(point, task, examples_of(task, args), base_url, args)
                    elif task in PEER_TASKS:
                        run_theirs(point, task, args, base_url)
                report(args)  # after each point: the doc is current whenever the run stops
    report(args)


if __name__ == "__main__":
    sys.exit(main())
