"""A run folder's numbers (:class:`RunReport`) and the report's tables: titled rows of
text, as Markdown and as HTML. Pure records and formatting; report.py computes them."""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from .judge import Preference
from .stats import Interval


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


Table = tuple[str, list[str], list[list[str]]]  # title, header, rows


def number(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def interval_text(delta: Interval | None) -> str:
    return "-" if delta is None else f"[{delta.low:+.3f}, {delta.high:+.3f}]"


def delta_text(delta: Interval | None) -> str:
    return "-" if delta is None else f"{delta.estimate:+.3f}"


def unique_names(reports: Sequence[RunReport]) -> list[str]:
    names = [r.name for r in reports]
    return [f"{r.name} ({r.folder})" if names.count(r.name) > 1 else r.name for r in reports]


def differing_settings(reports: Sequence[RunReport]) -> list[tuple[str, list[str]]]:
    """The settings that differ between runs (config keys and model), each with every run's
    value ("-" where a run does not record it): the ablation's variable."""

    def show(value: Any) -> str:
        return value if isinstance(value, str) else json.dumps(value, sort_keys=True)

    flat = [{**{k: show(v) for k, v in r.config.items()}, "model": r.model} for r in reports]
    keys = sorted({k for f in flat for k in f})
    return [(k, [f.get(k, "-") for f in flat]) for k in keys if len({f.get(k) for f in flat}) > 1]


def _settings(reports: Sequence[RunReport]) -> list[str]:
    """Per run, its values of the settings that differ: "max_iterations=2, select=best"."""
    varying = differing_settings(reports)
    return [", ".join(f"{k}={values[i]}" for k, values in varying) or "-" for i in range(len(reports))]


def mixed_tasks_warning(reports: Sequence[RunReport]) -> str | None:
    """A warning when the runs are of different tasks: their metrics measure different
    things, so one axis or one table column puts unlike numbers side by side."""
    tasks = list(dict.fromkeys(r.task for r in reports))
    if len(tasks) < 2:
        return None
    metrics = "; ".join(f"{t}: {next(r.metric_name for r in reports if r.task == t)}" for t in tasks)
    return (
        f"Warning: these runs are of {len(tasks)} different tasks ({metrics}). Their metrics measure "
        "different things, so the metric plot and the tables put unlike numbers side by side: "
        "compare runs of one task."
    )


SMALL_N = 10  # below this many examples, a 95% bootstrap interval is not to be read as one


def small_sample_warning(reports: Sequence[RunReport]) -> str | None:
    """A warning when a run's Δ rests on fewer than SMALL_N examples: a bootstrap over n
    examples can only reshuffle those n, so its "95%" interval is far too narrow to trust
    (over 2 examples the resampled means take 3 values)."""
    small = [
        f"{name} (n = {r.delta.n})"
        for name, r in zip(unique_names(reports), reports)
        if r.delta and r.delta.n < SMALL_N
    ]
    if not small:
        return None
    return (
        f"Warning: too few examples for the intervals to mean much: {', '.join(small)}. A bootstrap "
        f"interval over fewer than {SMALL_N} examples only reshuffles those few, so it is much "
        "narrower than the truth; read these Δs as anecdotes and run more examples (--limit)."
    )


LEGEND = (
    "y0, y1, …: the mean metric of the output after 0, 1, … refinements (y0 is the one-step "
    "draft, the baseline: Base; an example that stopped earlier keeps its last draft).",
    "Final (+Self-Refine): the mean metric of the returned outputs, per the run's --select.",
    "Best-selected: what --select best would have returned, the draft the critic scored "
    "highest; it can be below Final when the critic's scores disagree with the metric, or when "
    "the draft that scored best by the metric was never critiqued (the last one, without "
    "--final-feedback).",
    "Cumulative: the share of examples solved (metric 1) at any iteration, for pass/fail "
    "metrics only: '-' means the metric is not pass/fail, so there is no solve rate; "
    "0.000 means no example was solved.",
    "Δ: the paired mean of (returned output − draft 0) over examples; 95% CI: a percentile "
    "bootstrap over examples (2000 resamples, seeded). Failed examples (no result, or stopped "
    "by an error) are left out of every mean, Δ and interval.",
)


def tables(reports: Sequence[RunReport]) -> list[Table]:
    names = unique_names(reports)
    out = [_main_table(names, reports), _iteration_table(names, reports), _cost_table(names, reports),
           _cost_by_iteration_table(names, reports)]  # fmt: skip
    out.append(_stop_table(names, reports))
    return out + _judge_tables(names, reports) + _error_tables(names, reports) + _ablation_tables(names, reports)


# what each stop reason (core.records.StopReason) means, for a reader of the report
STOP_MEANINGS = {
    "feedback": "the critique said the draft needs no change",
    "score_threshold": "the critique's score reached the threshold",
    "max_iterations": "the refinement cap was reached",
    "no_change": "a refinement returned the same draft",
    "token_budget": "the token budget was used up",
    "time_budget": "the time budget was used up",
    "error": "a model call failed after its retries",
    "verified": "the draft passed the task's checks",
}


def _stop_table(names: list[str], reports: Sequence[RunReport]) -> Table:
    """How many examples stopped for each reason, per run (a run where every example
    stopped at draft 0 ran no refinement: its iteration table has only y0)."""
    rows = []
    for name, r in zip(names, reports):
        counts = sorted(r.stop_reasons.items(), key=lambda item: (-item[1], item[0]))
        rows += [[name, reason, str(count), STOP_MEANINGS.get(reason, "-")] for reason, count in counts]
        if not counts:
            rows.append([name, "-", "0", "no example finished"])
    return "Why examples stopped (examples per stop reason)", ["Run", "Stop reason", "Examples", "Meaning"], rows


def _main_table(names: list[str], reports: Sequence[RunReport]) -> Table:
    """Returned output against the one-step draft, per run."""
    return (
        "Self-Refine vs. the one-step baseline (paper Table 1 layout)",
        ["Run", "Task", "Metric", "Model", "n", "Failed (left out)", "Base (y0)", "+Self-Refine", "Δ", "95% CI"],
        [
            [
                name,
                r.task,
                r.metric_name,
                r.model,
                str(r.n),
                str(r.failed),
                number(r.baseline),
                number(r.final),
                delta_text(r.delta),
                interval_text(r.delta),
            ]
            for name, r in zip(names, reports)
        ],
    )


def _iteration_table(names: list[str], reports: Sequence[RunReport]) -> Table:
    """The metric after each refinement."""
    k = max(len(r.by_iteration) for r in reports) - 1
    return (
        "Metric by iteration (a stopped example keeps its last draft)",
        ["Run", *[f"y{t}" for t in range(k + 1)], "Final", "Best-selected", "Cumulative"],
        [
            [
                name,
                *[number(r.by_iteration[t]) if t < len(r.by_iteration) else "" for t in range(k + 1)],
                number(r.final),
                number(r.best_selected),
                number(r.cumulative),
            ]
            for name, r in zip(names, reports)
        ],
    )


def _cost_table(names: list[str], reports: Sequence[RunReport]) -> Table:
    """Calls, tokens and seconds per example."""
    return (
        "Cost per example",
        ["Run", "Calls", "Prompt tokens", "Completion tokens", "Seconds"],
        [
            [
                name,
                number(r.cost.calls, 2),
                number(r.cost.prompt_tokens, 1),
                number(r.cost.completion_tokens, 1),
                number(r.cost.seconds, 2),
            ]
            for name, r in zip(names, reports)
        ],
    )


def _cost_by_iteration_table(names: list[str], reports: Sequence[RunReport]) -> Table:
    """The cost per example of each iteration."""
    return (
        "Cost per example by iteration (calls recorded for iteration t)",
        ["Run", "t", "Calls", "Prompt tokens", "Completion tokens", "Seconds"],
        [
            [
                name,
                str(t),
                number(c.calls, 2),
                number(c.prompt_tokens, 1),
                number(c.completion_tokens, 1),
                number(c.seconds, 2),
            ]
            for name, r in zip(names, reports)
            for t, c in enumerate(r.cost_by_iteration)
        ],
    )


def _judge_tables(names: list[str], reports: Sequence[RunReport]) -> list[Table]:
    """The pairwise judge's verdicts, where a run has them."""
    judged = [(name, r.judge_preference) for name, r in zip(names, reports) if r.judge_preference]
    if judged:
        return [
            (
                "Pairwise judge: returned output vs one-step draft (both orders; a win needs both)",
                ["Run", "n", "Preferred", "Tie", "One-step preferred"],
                [[name, str(p.n), number(p.win), number(p.tie), number(p.loss)] for name, p in judged],
            )
        ]
    return []


def _error_tables(names: list[str], reports: Sequence[RunReport]) -> list[Table]:
    """What failed in the rows, where anything did."""
    errored = [(name, r) for name, r in zip(names, reports) if r.errors]
    if errored:
        return [
            (
                "Errors recorded in the rows (failed examples are left out of every number above)",
                ["Run", "Failed examples", "Judge errors", "Metric errors", "Answer errors", "First of each"],
                [
                    [
                        name,
                        str(r.failed),
                        str(r.judge_failed),
                        str(r.metric_failed),
                        str(r.answer_failed),
                        "; ".join(f"{kind}: {_clip(text)}" for kind, text in r.first_errors.items()) or "-",
                    ]
                    for name, r in errored
                ],
            )
        ]
    return []


def _ablation_tables(names: list[str], reports: Sequence[RunReport]) -> list[Table]:
    """One row per run, when the report compares several."""
    if len(reports) > 1:
        return [
            (
                "Ablations (one row per run)",
                ["Run", "Setting", "n", "Base", "Final", "Δ", "95% CI", "Best-selected", "Tokens/ex", "Seconds/ex"],
                [
                    [
                        name,
                        s,
                        str(r.n),
                        number(r.baseline),
                        number(r.final),
                        delta_text(r.delta),
                        interval_text(r.delta),
                        number(r.best_selected),
                        number(r.cost.tokens, 1),
                        number(r.cost.seconds, 2),
                    ]
                    for name, s, r in zip(names, _settings(reports), reports)
                ],
            )
        ]
    return []


def _clip(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _md_cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def markdown(reports: Sequence[RunReport]) -> str:
    parts = ["# Self-Refine report", ""]
    warning = mixed_tasks_warning(reports)
    if warning:
        parts += [f"> **{warning}**", ""]
    for title, header, rows in tables(reports):
        parts += [
            f"## {title}",
            "",
            "| " + " | ".join(map(_md_cell, header)) + " |",
            "|" + "|".join("---" for _ in header) + "|",
        ]
        parts += ["| " + " | ".join(map(_md_cell, row)) + " |" for row in rows]
        parts.append("")
    small = small_sample_warning(reports)
    if small:
        parts += [f"> **{small}**", ""]
    parts += ["## How to read these tables", "", *(f"- {line}" for line in LEGEND)]
    return "\n".join(parts) + "\n"


def html_tables(reports: Sequence[RunReport]) -> str:
    warnings = [w for w in (mixed_tasks_warning(reports), small_sample_warning(reports)) if w]
    parts = [f'<p class="warning"><strong>{html.escape(w)}</strong></p>' for w in warnings]
    for title, header, rows in tables(reports):
        head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
        parts.append(
            f"<h2>{html.escape(title)}</h2>\n<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
        )
    legend = "".join(f"<li>{html.escape(line)}</li>" for line in LEGEND)
    parts.append(f'<h2>How to read these tables</h2>\n<ul class="legend">{legend}</ul>')
    return "\n".join(parts)
