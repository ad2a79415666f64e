"""Reports over run folders: the paper's tables, plots, and a self-contained HTML viewer.

Everything here reads finished run folders (``runs/NAME/meta.json`` + ``results.jsonl``,
see :mod:`selfrefine.evaluation.runstore`) and never calls a model, so a report can be rebuilt at any
time and for any mix of runs (an ablation is just several folders).

Numbers follow the paper's layout: the one-step baseline is draft 0 of the same run (the
paper's "base" column), "Self-Refine" is the returned output (``result.selected``), the
per-iteration rows carry a stopped example's last draft forward, and the gain comes with a
paired bootstrap interval (:mod:`selfrefine.evaluation.stats`). Failed examples (no result, or a run
stopped by an error) are counted and left out of every mean, Δ and interval; judge,
metric and answer-hook errors recorded in the rows are counted and shown.
"""

from __future__ import annotations

import base64
import difflib
import html
import io
import json
import re
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from ..checks.incomplete import cut_off
from ..core.errors import InputError
from ..core.records import Iteration, RunResult
from ..core.wording import judge_note
from ..engine.scoring.selection import select_index
from .report_tables import (
    LEGEND,
    SMALL_N,
    Cost,
    RunReport,
    delta_text,
    differing_settings,
    html_tables,
    interval_text,
    markdown,
    number,
    small_sample_warning,
    unique_names,
)
from .runner import ExampleRow, summarize
from .runstore import RunMeta, RunStore
from .stats import Interval, mean_known, paired_bootstrap_diff
from .storage import open_file

MARKDOWN = "report.md"
HTML = "report.html"
METRIC_PLOT = "metric_vs_iteration.png"
COST_PLOT = "cost_vs_iteration.png"


def _load(folder: str | Path) -> tuple[RunMeta, list[ExampleRow]]:
    store = RunStore(folder)
    return store.meta(), store.rows()


def _metric_name(task: str) -> str:
    try:  # a YAML task or plugin may not be importable where the report is built
        from ..tasks import get_task

        return get_task(task).metric_name or "metric"
    except Exception:
        return "metric"


def _max_iterations(meta: RunMeta, rows: Sequence[ExampleRow]) -> int:
    """K: the configured cap, or the longest trajectory when the cap is not recorded."""
    longest = max((len(r.metrics) - 1 for r in rows if r.result is not None), default=0)
    cap = meta.config.get("max_iterations")
    return max(longest, cap if isinstance(cap, int) else 0)


def _position(row: ExampleRow, index: int | None) -> int | None:
    """Position in ``row.metrics`` of the iteration numbered ``index``."""
    if index is None or row.result is None:
        return None
    for pos, it in enumerate(row.result.iterations):
        if it.index == index:
            return pos
    return None


def _metric_of(row: ExampleRow, index: int | None) -> float | None:
    pos = _position(row, index)
    return row.metrics[pos] if pos is not None and pos < len(row.metrics) else None


def _cost_of_iteration(rows: Sequence[ExampleRow], t: int) -> Cost:
    calls = [c for r in rows if r.result is not None for c in r.result.calls if c.iteration == t]
    n = max(1, len(rows))
    return Cost(
        calls=len(calls) / n,
        prompt_tokens=sum(c.prompt_tokens for c in calls) / n,
        completion_tokens=sum(c.completion_tokens for c in calls) / n,
        seconds=sum(c.seconds for c in calls) / n,
    )


def run_table(folder: str | Path, *, seed: int = 0) -> RunReport:
    """Every number the report shows for one run folder."""
    meta, rows = _load(folder)
    summary = summarize(meta.task, rows, _max_iterations(meta, rows))
    k = len(summary.by_iteration) - 1  # the rounds that ran, not the cap: no rows for rounds that never ran
    done = [r for r in rows if not r.failed]  # a failed run has no comparable trajectory
    finals = [_metric_of(r, r.result.selected) for r in done]  # type: ignore[union-attr]
    bests = [_metric_of(r, select_index(r.result.iterations, "best")) for r in done]  # type: ignore[union-attr]
    delta = paired_bootstrap_diff([r.metric_at(0) for r in done], finals, seed=seed)
    return RunReport(
        name=meta.name or Path(folder).name,
        folder=str(folder),
        task=meta.task,
        metric_name=_metric_name(meta.task),
        models=meta.models,
        config=meta.config,
        n=summary.examples,
        failed=summary.failed,
        by_iteration=summary.by_iteration,
        final=mean_known(finals),
        best_selected=mean_known(bests),
        cumulative=summary.cumulative,
        delta=delta,
        cost=Cost(
            calls=summary.calls_per_example,
            prompt_tokens=summary.prompt_tokens_per_example,
            completion_tokens=summary.completion_tokens_per_example,
            seconds=summary.seconds_per_example,
        ),
        cost_by_iteration=[_cost_of_iteration(done, t) for t in range(k + 1)],
        judge_preference=summary.judge_preference,
        stop_reasons=summary.stop_reasons,
        judge_failed=summary.judge_failed,
        metric_failed=summary.metric_failed,
        answer_failed=summary.answer_failed,
        first_errors=summary.first_errors,
    )


# --- tables (one description, rendered as markdown, HTML or text) --------------------------


# --- plots ----------------------------------------------------------------------------------


def _plot(
    path: Path, title: str, ylabel: str, series: list[tuple[str, list[float | None]]], note: str | None = None
) -> None:
    # The object-oriented API renders with Agg and touches no global pyplot state.
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 4.0), dpi=100)
    ax = fig.subplots()
    for label, ys in series:
        xs = list(range(len(ys)))
        ax.plot(xs, [float("nan") if y is None else y for y in ys], marker="o", label=label)
    ax.set_xlabel("iteration (refinements)")
    ax.set_ylabel(ylabel)
    ax.set_title(title if note is None else f"{title}\n({note})", fontsize=None if note is None else "medium")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.grid(alpha=0.3)
    if series:
        ax.legend(fontsize="small")
    fig.tight_layout()
    with open_file(path, "wb") as fh:  # not through a link planted in the report folder
        fig.savefig(fh, format="png", metadata={"Software": None})


def write_plots(reports: Sequence[RunReport], out: Path) -> list[Path]:
    names = unique_names(reports)
    metric = out / METRIC_PLOT
    tasks = list(dict.fromkeys(r.task for r in reports))
    note = f"different tasks, unlike metrics: {', '.join(tasks)}" if len(tasks) > 1 else None
    series = [(n, r.by_iteration) for n, r in zip(names, reports)]
    _plot(metric, "Metric vs. iteration", "mean metric", series, note)
    cost = out / COST_PLOT
    cumulative = []
    for name, r in zip(names, reports):
        total, ys = 0.0, []
        for c in r.cost_by_iteration:
            total += c.tokens
            ys.append(total)
        cumulative.append((name, ys))
    _plot(cost, "Cost vs. iteration", "cumulative tokens per example", cumulative)
    return [metric, cost]


# --- trajectories for the HTML viewer -------------------------------------------------------

_WORD = re.compile(r"\s*\S+")


def word_diff(old: str, new: str) -> list[tuple[str, str]]:
    """Word-level diff as (op, text) segments: ``=`` kept, ``-`` deleted, ``+`` inserted.

    Words are compared without their whitespace, but each keeps the whitespace before it,
    so line breaks and indentation of code survive in the rendered diff.
    """
    a, b = _WORD.findall(old), _WORD.findall(new)
    matcher = difflib.SequenceMatcher(None, [w.strip() for w in a], [w.strip() for w in b], autojunk=False)
    out: list[tuple[str, str]] = []
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            out.append(("=", "".join(b[j1:j2])))
            continue
        if i2 > i1:
            out.append(("-", "".join(a[i1:i2])))
        if j2 > j1:
            out.append(("+", "".join(b[j1:j2])))
    return out


def trajectory(row: ExampleRow) -> dict[str, Any]:
    """One example as the viewer shows it: drafts, diffs, feedback and metric per draft."""
    result = row.result
    if result is None:
        return {"id": row.id, "error": row.error, "input": "", "drafts": [], "judge_error": None, "answer_error": None}
    drafts, previous = [], None
    for pos, it in enumerate(result.iterations):
        drafts.append(
            {
                "index": it.index,
                "text": it.draft,
                "diff": word_diff(previous, it.draft) if previous is not None else None,
                "metric": row.metrics[pos] if pos < len(row.metrics) else None,
                "metric_error": row.metric_errors[pos] if pos < len(row.metric_errors) else None,
                "feedback": it.feedback.text if it.feedback else None,
                "feedback_source": it.feedback.source if it.feedback else None,
                "feedback_error": it.feedback.parse_error if it.feedback else None,
                "cut_off": cut_off(it.finish_reason),  # stopped at the token limit
                "rejected": not it.accepted,  # a refinement accept="not_worse" turned down
                # the task's judge, where it ranked this draft (engine/judge.py)
                "judge": judge_note(it.verification)
                if it.verification and it.verification.judged is not None
                else None,
                **_samples(it),
            }
        )
        previous = it.draft
    return {
        "id": row.id,
        "error": row.error,
        "input": result.input,
        "stop_reason": result.stop_reason.value,
        "selected": result.selected,
        "best": _best_scored(result),
        "drafts": drafts,
        "judge_error": row.judge_error,
        "answer_error": row.answer_error,
    }


def _samples(it: Iteration) -> dict[str, Any]:
    """``{"samples": [...]}``: every sample of a step (text, verifier score, passed, chosen,
    the critic's text when it saw one), when the step sampled more than one; else nothing,
    so a one-sample step's data and view are as before samples existed."""
    if len(it.candidates) < 2:
        return {}
    return {
        "samples": [
            {
                "text": c.draft,
                "score": c.verification.score if c.verification else None,
                "passed": c.verification.passed if c.verification else None,
                "judge": judge_note(c.verification) if c.verification and c.verification.judged is not None else None,
                "chosen": c.chosen,
                "feedback": c.feedback.text if c.feedback else None,
            }
            for c in it.candidates
        ]
    }


def _best_scored(result: RunResult) -> int | None:
    """The draft select="best" picks, when a critique scored it: with no scores it falls back
    to the last draft, which no feedback made 'best'."""
    index = select_index(result.iterations, "best")
    scored = {it.index for it in result.iterations if it.feedback is not None and it.feedback.total is not None}
    return index if index in scored else None


def _script_json(data: Any) -> str:
    """JSON that is safe inside <script>: no ``</script>``, ``<!--`` or ``&`` can survive."""
    text = json.dumps(data, ensure_ascii=False)
    for char, escape in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(char, escape)
    return text


def render_html(reports: Sequence[RunReport], examples: Sequence[list[dict[str, Any]]], plots: Sequence[Path]) -> str:
    images = "\n".join(
        f'<figure><img alt="{html.escape(p.stem)}" src="data:image/png;base64,'
        f'{base64.b64encode(p.read_bytes()).decode("ascii")}"></figure>'
        for p in plots
    )
    data = {"runs": [{"name": n, "examples": ex} for n, ex in zip(unique_names(reports), examples)]}
    template = resources.files("selfrefine.evaluation").joinpath("report_template.html").read_text(encoding="utf-8")
    parts = {"__TABLES__": html_tables(reports), "__PLOTS__": images, "__DATA__": _script_json(data)}
    # One pass, so text inserted for one placeholder is never scanned for another.
    return re.sub("|".join(parts), lambda m: parts[m.group(0)], template)


def write_report(folders: Sequence[str | Path], out: str | Path, *, seed: int = 0) -> list[RunReport]:
    """Write report.md, the two PNG plots and a self-contained report.html into ``out``."""
    if not folders:
        raise InputError("give at least one run folder to report on")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    reports = [run_table(f, seed=seed) for f in folders]
    examples = [[trajectory(row) for row in RunStore(f).rows()] for f in folders]
    with open_file(out / MARKDOWN, "wb") as fh:
        fh.write(markdown(reports).encode("utf-8"))
    plots = write_plots(reports, out)
    with open_file(out / HTML, "wb") as fh:
        fh.write(render_html(reports, examples, plots).encode("utf-8"))
    return reports


# --- side-by-side comparison ----------------------------------------------------------------


def _paired_runs(a: str | Path, b: str | Path, seed: int) -> Interval | None:
    """Final metric of B minus A over the example ids both runs finished."""

    def finals(folder: str | Path) -> dict[str, float | None]:
        return {r.id: _metric_of(r, r.result.selected) for r in RunStore(folder).rows() if not r.failed}  # type: ignore[union-attr]

    fa, fb = finals(a), finals(b)
    ids = [i for i in fa if i in fb]
    return paired_bootstrap_diff([fa[i] for i in ids], [fb[i] for i in ids], seed=seed)


def compare_table(folder_a: str | Path, folder_b: str | Path, *, seed: int = 0) -> str:
    """Two runs side by side as plain text (for ``selfrefine compare A B``)."""
    from rich import box
    from rich.console import Console
    from rich.table import Table as RichTable

    ra, rb = run_table(folder_a, seed=seed), run_table(folder_b, seed=seed)
    na, nb = unique_names([ra, rb])
    table = RichTable(box=box.ASCII, show_header=True)
    for col in ("", f"A: {na}", f"B: {nb}"):
        table.add_column(col, overflow="fold")
    # what differs between the two (the model has its own row): the experiment's variable
    varying = [(f"setting: {k}", a, b) for k, (a, b) in differing_settings([ra, rb]) if k != "model"]
    rows: list[tuple[str, str, str]] = [
        ("task", ra.task, rb.task),
        ("model", ra.model, rb.model),
        *(varying or [("settings", "the same", "the same")]),
        ("n (failed, left out)", f"{ra.n} ({ra.failed})", f"{rb.n} ({rb.failed})"),
        (
            "judge / metric / answer errors",
            *(f"{r.judge_failed} / {r.metric_failed} / {r.answer_failed}" for r in (ra, rb)),
        ),
    ]
    k = max(len(ra.by_iteration), len(rb.by_iteration))
    for t in range(k):
        label = f"y{t} (baseline)" if t == 0 else f"y{t}"
        rows.append((label, *(number(r.by_iteration[t]) if t < len(r.by_iteration) else "" for r in (ra, rb))))
    rows += [
        ("final", number(ra.final), number(rb.final)),
        ("best-selected", number(ra.best_selected), number(rb.best_selected)),
        ("cumulative", number(ra.cumulative), number(rb.cumulative)),
        ("Δ final-base [95% CI]", *(f"{delta_text(r.delta)} {interval_text(r.delta)}" for r in (ra, rb))),
        ("tokens / example", number(ra.cost.tokens, 1), number(rb.cost.tokens, 1)),
        ("seconds / example", number(ra.cost.seconds, 2), number(rb.cost.seconds, 2)),
    ]
    for row in rows:
        table.add_row(*row)
    # runs of different tasks share example ids ("a", "0", ...) by chance only: no pairing
    paired = _paired_runs(folder_a, folder_b, seed) if ra.task == rb.task else None
    buffer = io.StringIO()
    # the terminal's width (COLUMNS, else 80 when piped): the cells fold to fit it
    console = Console(file=buffer, color_system=None, force_terminal=False, highlight=False)
    console.print(table)
    if ra.task != rb.task:
        console.print(
            f"Warning: A is a {ra.task} run and B a {rb.task} run: their metrics measure different "
            "things and their examples differ, so no B - A difference is computed."
        )
    if paired is not None:
        console.print(f"final B - A on {paired.n} shared examples: {delta_text(paired)} {interval_text(paired)}")
    warning = small_sample_warning([ra, rb])
    if warning is None and paired is not None and paired.n < SMALL_N:
        warning = f"Warning: B - A rests on {paired.n} shared examples, fewer than {SMALL_N}: its interval is not to be trusted."
    if warning:
        console.print(warning)
    console.print("How to read it:")
    for line in LEGEND:
        console.print(f"  - {line}")
    return buffer.getvalue()
