"""Quality against tokens: our samples × refinements grid, the auto strategy and the presets
against DSPy's BestOfN and Refine, on one llama-server, the same inputs and metric code.

    .venv/bin/python benchmarks/frontier.py                                   # every point
    .venv/bin/python benchmarks/frontier.py --points ours-k4-r1,dspy-bestofn-n3 --tasks commongen
    .venv/bin/python benchmarks/frontier.py --report-only                     # docs/frontier.md from runs

Grown from ``vs_peers.py`` (its server, DSPy environment, records and metric): one
llama-server on the default model's GGUF file serves every system, one example at a time.
A point is a system on a task; each finished example is appended to
``--out/<task>/<point>.jsonl`` and skipped on a rerun, so the benchmark is resumable and
grows in passes (``--limit-*``, ``--points``). Ours runs through the library on the
``openai:`` backend with no response cache (every call reaches the server).

- ``ours-kK-rR``: ``samples=K``, ``max_iterations=R`` (R=0: the best of K first drafts),
  hybrid feedback, the returned draft chosen by the task's verifier; ``ours-kK-rR-v``: the
  same with the verifier's findings as the only feedback (no critic call);
- ``ours-auto-B``: ``strategy="auto"`` with a budget of B tokens per example;
- ``ours-best``: ``preset="best"``; ``ours-paper``: the paper's loop;
- ``dspy-bestofn-nN``: DSPy ``BestOfN(N)``, ``dspy-refine-n3``: ``Refine(N=3)``, reward = the
  task's own reference-free check (threshold 1.0).

The report (``--doc``, between its markers) has each point's returned metric with its 95%
bootstrap interval, tokens and seconds per example (commongen: also the first sentence's
coverage), a PNG per task (metric against tokens, log x) and the dominance table: for
each DSPy point, our best point at no more tokens per example and the paired difference.
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
    ROOT,
    Record,
    append_record,
    first_sentence,
    metric,
    read_records,
    records_path,
    select_examples,
    summarise,
    write_between,
)
from vs_peers import MODEL_NAME, log, peers_python, sampling, server

from selfrefine.backends.openai_compat import OpenAIBackend
from selfrefine.core.config import RefineConfig
from selfrefine.engine.loop import SelfRefine
from selfrefine.evaluation.datasets import Example
from selfrefine.evaluation.stats import paired_bootstrap_diff

TASKS = ("commongen", "gsm8k", "acronym", "sentiment")
PEER_TASKS = ("commongen", "gsm8k")  # DSPy runs these (benchmarks/_peers_dspy.py has their signatures)
HYBRID = {"verifier_mode": "hybrid", "select": "verified"}
VERIFIER = {"verifier_mode": "verifier", "select": "verified"}
OURS: dict[str, dict] = {
    **{f"ours-k{k}-r{r}": {**HYBRID, "samples": k, "max_iterations": r} for k in (1, 2, 4) for r in (0, 1, 2)},
    "ours-k3-r0": {**HYBRID, "samples": 3, "max_iterations": 0},  # between the grid's widths
    "ours-k5-r0": {**HYBRID, "samples": 5, "max_iterations": 0},  # gsm8k's earlier --preset best
    # the code's findings alone (no critic call): a round costs its refinements only
    **{f"ours-k{k}-r{r}-v": {**VERIFIER, "samples": k, "max_iterations": r} for k in (1, 2, 4) for r in (1, 2)},
    **{f"ours-auto-{b}": {**HYBRID, "strategy": "auto", "max_total_tokens": b} for b in (1500, 3000, 6000)},
    "ours-best": {"preset": "best"},
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
TABLE_START, TABLE_END = "<!-- frontier:table:start -->", "<!-- frontier:table:end -->"


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
    p.add_argument("--report-only", action="store_true")
    args = p.parse_args(argv)
    args.limits = {task: getattr(args, f"limit_{task}") for task in TASKS}
    args.tasks, args.points = args.tasks.split(","), args.points.split(",")
    unknown = [x for x in args.points if x not in OURS and x not in THEIRS]
    if unknown:
        p.error(f"unknown point(s) {', '.join(unknown)}; known: {', '.join([*OURS, *THEIRS])}")
    return args


def run_ours(point: str, task: str, examples: list[Example], base_url: str, out: Path) -> None:
    path = records_path(out, task, point)
    todo = [e for e in examples if e.id not in read_records(path)]
    log(f"{point} {task}: {len(todo)} to run")
    if todo:
        asyncio.run(_run_ours(point, task, todo, base_url, path))


async def _run_ours(point: str, task: str, todo: list[Example], base_url: str, path: Path) -> None:
    backend = OpenAIBackend(MODEL_NAME, base_url=base_url, concurrency=1, request_n="off")
    engine = SelfRefine(task, backend, config=RefineConfig(**OURS[point]))
    try:
        for example in todo:
            record = await _one(engine, point, task, example)
            append_record(path, record)
            log(
                f"{point} {task} {record.id}: {record.one_step_metric:.3f} -> {record.metric:.3f}  "
                f"tokens {record.prompt_tokens}+{record.completion_tokens}  {record.seconds:.1f} s  {record.stop_reason}"
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
    )


def run_theirs(point: str, task: str, limit: int, base_url: str, out: Path) -> None:
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
        "--limit",
        str(limit),
        "--n",
        str(n),
        "--temperature",
        str(temperature),
        "--max-tokens",
        str(max_tokens),
        "--out",
        str(out),
        "--name",
        point,
    ]
    subprocess.run(cmd, check=True, env={**os.environ, "PYTHONPATH": str(ROOT / "benchmarks")})


# --- the report ---------------------------------------------------------------------------


def load(out: Path, task: str, limit: int) -> tuple[list[Example], dict[str, list[Record]]]:
    """The finished records of every point on the first ``limit`` inputs of a task."""
    examples = select_examples(task, limit)
    found = {}
    for point in [*OURS, *THEIRS]:
        recs = read_records(records_path(out, task, point))
        chosen = [recs[e.id] for e in examples if e.id in recs]
        if chosen:
            found[point] = chosen
    return examples, found


def dominance(task: str, points: dict[str, list[Record]], summaries: dict, examples: list[Example]) -> list[str]:
    """For each DSPy point: our best point at no more tokens per example, and the paired
    difference (ours − theirs) on the examples both finished; for commongen also on the
    output's first sentence (a gain that comes only from writing more sentences does not count)."""
    rows = []
    by_example = {e.id: e for e in examples}
    for theirs in [p for p in points if p in THEIRS]:
        budget = summaries[theirs].tokens
        ours = [p for p in points if p in OURS and summaries[p].tokens <= budget]
        if not ours:
            rows.append(f"| {task} | {theirs} | {budget:.0f} | none at ≤ its tokens | – | – | – |")
            continue
        best = max(ours, key=lambda p: summaries[p].returned.estimate)
        by_id = {r.id: r for r in points[theirs]}
        pairs = [(by_id[r.id], r) for r in points[best] if r.id in by_id]
        diff = paired_bootstrap_diff([t.metric for t, _ in pairs], [o.metric for _, o in pairs])
        first = "–"
        if task == "commongen":

            def strict(rec: Record) -> float:
                return metric(task, by_example[rec.id], first_sentence(rec.output))

            d1 = paired_bootstrap_diff([strict(t) for t, _ in pairs], [strict(o) for _, o in pairs])
            first = f"{d1.estimate:+.3f} [{d1.low:+.3f}, {d1.high:+.3f}]"
        rows.append(
            f"| {task} | {theirs} | {budget:.0f} | {best} ({summaries[best].tokens:.0f}) | {len(pairs)} | "
            f"{diff.estimate:+.3f} [{diff.low:+.3f}, {diff.high:+.3f}] | {first} |"
        )
    return rows


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


def report(args: argparse.Namespace) -> str:
    table = [
        "| task | point | n | returned [95%] | 1st sentence [95%] | one-step | tokens/ex | calls/ex | s/ex |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    dom = [
        "| task | DSPy point | its tokens/ex | our best at ≤ its tokens (tokens/ex) | n | ours − theirs [95%] "
        "| 1st sentence: ours − theirs [95%] |",
        "|---|---|---|---|---|---|---|",
    ]
    fronts = ["| task | our frontier (tokens/ex → returned) | `--preset best` on it? |", "|---|---|---|"]
    for task in args.tasks:
        examples, points = load(args.out, task, args.limits[task])
        summaries = {p: summarise(task, p, recs, examples) for p, recs in points.items()}
        for p, s in sorted(summaries.items(), key=lambda kv: kv[1].tokens):
            first = (
                "–"
                if s.first_sentence is None
                else f"{s.first_sentence.estimate:.3f} [{s.first_sentence.low:.3f}, {s.first_sentence.high:.3f}]"
            )
            table.append(
                f"| {task} | {p} | {s.n} | {s.returned.estimate:.3f} [{s.returned.low:.3f}, {s.returned.high:.3f}] "
                f"| {first} | {s.one_step.estimate:.3f} | {s.tokens:.0f} | {s.calls:.2f} | {s.seconds:.1f} |"
            )
        dom += dominance(task, points, summaries, examples)
        front = frontier(summaries)
        if front:
            best = "ours-best" in summaries and ("yes" if "ours-best" in front else "no")
            fronts.append(
                f"| {task} | "
                + ", ".join(f"{p} ({summaries[p].tokens:.0f} → {summaries[p].returned.estimate:.3f})" for p in front)
                + f" | {best or 'not run'} |"
            )
        if summaries:
            plot(task, summaries, args.doc.parent / f"frontier-{task}.png")
    text = "\n".join(table) + "\n\n" + "\n".join(dom) + "\n\n" + "\n".join(fronts)
    write_between(args.doc, TABLE_START, TABLE_END, text)
    print(text)
    return text


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if not args.report_only:
        with server(args) as base_url:
            for point in args.points:
                for task in args.tasks:
                    if point in OURS:
                        run_ours(point, task, select_examples(task, args.limits[task]), base_url, args.out)
                    elif task in PEER_TASKS:
                        run_theirs(point, task, args.limits[task], base_url, args.out)
                report(args)  # after each point: the doc is current whenever the run stops
    report(args)


if __name__ == "__main__":
    sys.exit(main())
