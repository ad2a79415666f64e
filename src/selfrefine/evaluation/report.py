"""Reports over run folders: the paper's tables, plots, and a self-contained HTML viewer.

Everything here reads finished run folders (``runs/NAME/meta.json`` + ``results.jsonl``,
see :mod:`selfrefine.runstore`) and never calls a model, so a report can be rebuilt at any
time and for any mix of runs (an ablation is just several folders).

Numbers follow the paper's layout: the one-step baseline is draft 0 of the same run (the
paper's "base" column), "Self-Refine" is the returned output (``result.selected``), the
per-iteration rows carry a stopped example's last draft forward, and the gain comes with a
paired bootstrap interval (:mod:`selfrefine.stats`). Failed examples (no result, or a run
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

import click
from pydantic import BaseModel, Field

from ..core.errors import InputError
from ..core.records import RunResult
from ..engine.selection import select_index
from .judge import Preference
from .runner import ExampleRow, summarize
from .runstore import RunMeta, RunStore
from .storage import report_error
from .stats import Interval, mean_known, paired_bootstrap_diff

MARKDOWN = "report.md"
HTML = "report.html"
METRIC_PLOT = "metric_vs_iteration.png"
COST_PLOT = "cost_vs_iteration.png"


class Cost(BaseModel):
    """Average cost per example (of a whole run, or of one iteration index)."""

    calls: float = 0.0
    prompt_tokens: float = 0.0
    completion_tokens: float = 0.0
    seconds: float = 0.0

    @property
    def tokens(self) -> float:
        return self.prompt_tokens + self.completion_tokens


class RunReport(BaseModel):
    """The numbers of one run folder, as the report tables show them."""

    name: str
    folder: str
    task: str
    metric_name: str
    models: dict[str, str]
    config: dict[str, Any] = Field(default_factory=dict)
    n: int  # examples in the folder (one row per id)
    failed: int  # rows without a result, or stopped by an error: left out of every number below
    by_iteration: list[float | None]  # mean metric after t refinements, t = 0..K (carry-forward)
    final: float | None  # the returned outputs (result.selected)
    best_selected: float | None  # the draft select="best" would return (highest feedback total)
    cumulative: float | None  # solved at any attempt; binary metrics only
    delta: Interval | None  # final - baseline, paired over examples
    cost: Cost  # per example
    cost_by_iteration: list[Cost]  # per example, calls of iteration t only
    stop_reasons: dict[str, int] = Field(default_factory=dict)
    judge_preference: Preference | None = None  # output vs one-step, when eval had --judge
    judge_failed: int = 0  # examples whose judge call failed
    metric_failed: int = 0  # examples whose metric hook raised on some draft
    answer_failed: int = 0  # examples whose answer hook raised
    first_errors: dict[str, str] = Field(default_factory=dict)  # kind -> first error, with its example id

    @property
    def errors(self) -> int:
        return self.failed + self.judge_failed + self.metric_failed + self.answer_failed

    @property
    def baseline(self) -> float | None:
        return self.by_iteration[0] if self.by_iteration else None

    @property
    def model(self) -> str:
        names = sorted(set(self.models.values()))
        if len(names) <= 1:
            return names[0] if names else "-"
        return ", ".join(f"{role}={name}" for role, name in self.models.items())


# --- numbers --------------------------------------------------------------------------------


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
    k = _max_iterations(meta, rows)
    summary = summarize(meta.task, rows, k)
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

Table = tuple[str, list[str], list[list[str]]]  # title, header, rows


def _f(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _ci(delta: Interval | None) -> str:
    return "-" if delta is None else f"[{delta.low:+.3f}, {delta.high:+.3f}]"


def _d(delta: Interval | None) -> str:
    return "-" if delta is None else f"{delta.estimate:+.3f}"


def _unique_names(reports: Sequence[RunReport]) -> list[str]:
    names = [r.name for r in reports]
    return [f"{r.name} ({r.folder})" if names.count(r.name) > 1 else r.name for r in reports]


def _settings(reports: Sequence[RunReport]) -> list[str]:
    """What differs between runs (config keys and models): the ablation's variable."""
    def show(value: Any) -> str:
        return value if isinstance(value, str) else json.dumps(value, sort_keys=True)

    flat = [{**{k: show(v) for k, v in r.config.items()}, "model": r.model} for r in reports]
    keys = sorted({k for f in flat for k in f})
    varying = [k for k in keys if len({f.get(k) for f in flat}) > 1]
    return [", ".join(f"{k}={f.get(k, '-')}" for k in varying) or "-" for f in flat]


def tables(reports: Sequence[RunReport]) -> list[Table]:
    names = _unique_names(reports)
    main: Table = (
        "Self-Refine vs. the one-step baseline (paper Table 1 layout)",
        ["Run", "Task", "Metric", "Model", "n", "Failed (left out)", "Base (y0)", "+Self-Refine", "Δ", "95% CI"],
        [
            [name, r.task, r.metric_name, r.model, str(r.n), str(r.failed), _f(r.baseline), _f(r.final), _d(r.delta), _ci(r.delta)]
            for name, r in zip(names, reports)
        ],
    )
    k = max(len(r.by_iteration) for r in reports) - 1
    iters: Table = (
        "Metric by iteration (a stopped example keeps its last draft)",
        ["Run", *[f"y{t}" for t in range(k + 1)], "Final", "Best-selected", "Cumulative"],
        [
            [name, *[_f(r.by_iteration[t]) if t < len(r.by_iteration) else "" for t in range(k + 1)],
             _f(r.final), _f(r.best_selected), _f(r.cumulative)]
            for name, r in zip(names, reports)
        ],
    )
    cost: Table = (
        "Cost per example",
        ["Run", "Calls", "Prompt tokens", "Completion tokens", "Seconds"],
        [[name, _f(r.cost.calls, 2), _f(r.cost.prompt_tokens, 1), _f(r.cost.completion_tokens, 1), _f(r.cost.seconds, 2)]
         for name, r in zip(names, reports)],
    )
    per_iter: Table = (
        "Cost per example by iteration (calls recorded for iteration t)",
        ["Run", "t", "Calls", "Prompt tokens", "Completion tokens", "Seconds"],
        [[name, str(t), _f(c.calls, 2), _f(c.prompt_tokens, 1), _f(c.completion_tokens, 1), _f(c.seconds, 2)]
         for name, r in zip(names, reports) for t, c in enumerate(r.cost_by_iteration)],
    )
    out = [main, iters, cost, per_iter]
    judged = [(name, r.judge_preference) for name, r in zip(names, reports) if r.judge_preference]
    if judged:
        out.append((
            "Pairwise judge: returned output vs one-step draft (both orders; a win needs both)",
            ["Run", "n", "Preferred", "Tie", "One-step preferred"],
            [[name, str(p.n), _f(p.win), _f(p.tie), _f(p.loss)] for name, p in judged],
        ))
    errored = [(name, r) for name, r in zip(names, reports) if r.errors]
    if errored:
        out.append((
            "Errors recorded in the rows (failed examples are left out of every number above)",
            ["Run", "Failed examples", "Judge errors", "Metric errors", "Answer errors", "First of each"],
            [[name, str(r.failed), str(r.judge_failed), str(r.metric_failed), str(r.answer_failed),
              "; ".join(f"{kind}: {_clip(text)}" for kind, text in r.first_errors.items()) or "-"]
             for name, r in errored],
        ))
    if len(reports) > 1:
        out.append((
            "Ablations (one row per run)",
            ["Run", "Setting", "n", "Base", "Final", "Δ", "95% CI", "Best-selected", "Tokens/ex", "Seconds/ex"],
            [[name, s, str(r.n), _f(r.baseline), _f(r.final), _d(r.delta), _ci(r.delta), _f(r.best_selected),
              _f(r.cost.tokens, 1), _f(r.cost.seconds, 2)]
             for name, s, r in zip(names, _settings(reports), reports)],
        ))
    return out


def _clip(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _md_cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def markdown(reports: Sequence[RunReport]) -> str:
    parts = ["# Self-Refine report", ""]
    for title, header, rows in tables(reports):
        parts += [f"## {title}", "", "| " + " | ".join(map(_md_cell, header)) + " |",
                  "|" + "|".join("---" for _ in header) + "|"]
        parts += ["| " + " | ".join(map(_md_cell, row)) + " |" for row in rows]
        parts.append("")
    parts.append("Δ is the paired mean of (returned output − draft 0) over examples; the interval is a "
                 "95% percentile bootstrap over examples (2000 resamples, seeded). Failed examples (no "
                 "result, or stopped by an error) are left out of every mean, Δ and interval.")
    return "\n".join(parts) + "\n"


def _html_tables(reports: Sequence[RunReport]) -> str:
    parts = []
    for title, header, rows in tables(reports):
        head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
        parts.append(f"<h2>{html.escape(title)}</h2>\n<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
    return "\n".join(parts)


# --- plots ----------------------------------------------------------------------------------


def _plot(path: Path, title: str, ylabel: str, series: list[tuple[str, list[float | None]]]) -> None:
    # The object-oriented API renders with Agg and touches no global pyplot state.
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 4.0), dpi=100)
    ax = fig.subplots()
    for label, ys in series:
        xs = list(range(len(ys)))
        ax.plot(xs, [float("nan") if y is None else y for y in ys], marker="o", label=label)
    ax.set_xlabel("iteration (refinements)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.grid(alpha=0.3)
    if series:
        ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, format="png", metadata={"Software": None})


def write_plots(reports: Sequence[RunReport], out: Path) -> list[Path]:
    names = _unique_names(reports)
    metric = out / METRIC_PLOT
    _plot(metric, "Metric vs. iteration", "mean metric", [(n, r.by_iteration) for n, r in zip(names, reports)])
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
        drafts.append({
            "index": it.index,
            "text": it.draft,
            "diff": word_diff(previous, it.draft) if previous is not None else None,
            "metric": row.metrics[pos] if pos < len(row.metrics) else None,
            "metric_error": row.metric_errors[pos] if pos < len(row.metric_errors) else None,
            "feedback": it.feedback.text if it.feedback else None,
            "feedback_source": it.feedback.source if it.feedback else None,
            "feedback_error": it.feedback.parse_error if it.feedback else None,
        })
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


def _best_scored(result: RunResult) -> int | None:
    """The draft select="best" picks, when a critique scored it: with no scores it falls back
    to the last draft, which no feedback made 'best'."""
    index = select_index(result.iterations, "best")
    scored = {it.index for it in result.iterations if it.feedback is not None and it.feedback.total is not None}
    return index if index in scored else None


def _script_json(data: Any) -> str:
    """JSON that is safe inside <script>: no ``</script>``, ``<!--`` or ``&`` can survive."""
    text = json.dumps(data, ensure_ascii=False)
    for char, escape in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(char, escape)
    return text


def render_html(reports: Sequence[RunReport], examples: Sequence[list[dict[str, Any]]], plots: Sequence[Path]) -> str:
    images = "\n".join(
        f'<figure><img alt="{html.escape(p.stem)}" src="data:image/png;base64,'
        f'{base64.b64encode(p.read_bytes()).decode("ascii")}"></figure>'
        for p in plots
    )
    data = {"runs": [{"name": n, "examples": ex} for n, ex in zip(_unique_names(reports), examples)]}
    template = resources.files("selfrefine.evaluation").joinpath("report_template.html").read_text(encoding="utf-8")
    parts = {"__TABLES__": _html_tables(reports), "__PLOTS__": images, "__DATA__": _script_json(data)}
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
    (out / MARKDOWN).write_text(markdown(reports), encoding="utf-8")
    plots = write_plots(reports, out)
    (out / HTML).write_text(render_html(reports, examples, plots), encoding="utf-8")
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
    na, nb = _unique_names([ra, rb])
    table = RichTable(box=box.ASCII, show_header=True)
    for col in ("", f"A: {na}", f"B: {nb}"):
        table.add_column(col, overflow="fold")
    rows: list[tuple[str, str, str]] = [
        ("task", ra.task, rb.task),
        ("model", ra.model, rb.model),
        ("n (failed, left out)", f"{ra.n} ({ra.failed})", f"{rb.n} ({rb.failed})"),
        ("judge / metric / answer errors", *(f"{r.judge_failed} / {r.metric_failed} / {r.answer_failed}" for r in (ra, rb))),
    ]
    k = max(len(ra.by_iteration), len(rb.by_iteration))
    for t in range(k):
        label = f"y{t} (baseline)" if t == 0 else f"y{t}"
        rows.append((label, *(_f(r.by_iteration[t]) if t < len(r.by_iteration) else "" for r in (ra, rb))))
    rows += [
        ("final", _f(ra.final), _f(rb.final)),
        ("best-selected", _f(ra.best_selected), _f(rb.best_selected)),
        ("cumulative", _f(ra.cumulative), _f(rb.cumulative)),
        ("Δ final-base [95% CI]", *(f"{_d(r.delta)} {_ci(r.delta)}" for r in (ra, rb))),
        ("tokens / example", _f(ra.cost.tokens, 1), _f(rb.cost.tokens, 1)),
        ("seconds / example", _f(ra.cost.seconds, 2), _f(rb.cost.seconds, 2)),
    ]
    for row in rows:
        table.add_row(*row)
    # runs of different tasks share example ids ("a", "0", ...) by chance only: no pairing
    paired = _paired_runs(folder_a, folder_b, seed) if ra.task == rb.task else None
    buffer = io.StringIO()
    console = Console(file=buffer, width=120, color_system=None, force_terminal=False, highlight=False)
    console.print(table)
    if ra.task != rb.task:
        console.print(f"Warning: A is a {ra.task} run and B a {rb.task} run: their metrics measure different "
                      "things and their examples differ, so no B - A difference is computed.")
    if paired is not None:
        console.print(f"final B - A on {paired.n} shared examples: {_d(paired)} {_ci(paired)}")
    return buffer.getvalue()


# --- CLI commands (the lead adds them with cli.add_command) ---------------------------------

_RUN = click.Path(exists=True, file_okay=False, path_type=Path)


@click.command("report")
@click.argument("runs", nargs=-1, required=True, type=_RUN)
@click.option("--out", "-o", type=click.Path(file_okay=False, path_type=Path), default=Path("report"), show_default=True,
              help="Folder for report.md, report.html and the plots.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the bootstrap intervals.")
def report_command(runs: tuple[Path, ...], out: Path, seed: int) -> None:
    """Tables, plots and an HTML trajectory viewer for one or more run folders."""
    try:
        reports = write_report(list(runs), out, seed=seed)
    except OSError as exc:  # a read-only or full --out: one line, not a traceback
        raise report_error(out, exc) from None
    click.echo(compare_lines(reports))
    for name in (MARKDOWN, HTML, METRIC_PLOT, COST_PLOT):
        click.echo(f"wrote {out / name}")


def compare_lines(reports: Sequence[RunReport]) -> str:
    """One line per run: the headline numbers, for the terminal."""
    return "\n".join(
        f"{name}: base {_f(r.baseline)} -> final {_f(r.final)} (Δ {_d(r.delta)} {_ci(r.delta)}, n={r.n}"
        + (f", {r.failed} failed left out" if r.failed else "") + ")"
        for name, r in zip(_unique_names(reports), reports)
    )


@click.command("compare")
@click.argument("run_a", type=_RUN)
@click.argument("run_b", type=_RUN)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the bootstrap intervals.")
def compare_command(run_a: Path, run_b: Path, seed: int) -> None:
    """Two run folders side by side: metric by iteration, gain with its CI, and cost."""
    click.echo(compare_table(run_a, run_b, seed=seed), nl=False)
