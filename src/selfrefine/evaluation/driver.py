"""``selfrefine eval``: a dataset through the engine into a durable, resumable run folder."""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .. import __version__
from ..core.errors import InputError
from ..core.wording import plural
from ..engine.loop import SelfRefine
from ..task.task import Task
from .datasets import Example
from .judge import PairwiseJudge
from .progress import Plan, RowProgress, progress_bar
from .response_cache import CachedBackend, ResponseCache
from .runner import EvalSummary, ExampleRow, evaluate_rows, summarize
from .runstore import RunMeta, RunStore


def run_meta(name: str, engine: SelfRefine, data: str, limit: int | None, tests: Path | None = None) -> RunMeta:
    """What the run folder holds; ``tests`` is the --tests file of a codeopt eval (its
    content is part of the experiment: other tests, other metric)."""
    config = engine.settings.recorded()
    for volatile in ("record_prompts", "retry_base_delay", "retry_max_delay", "backend_retries"):
        config.pop(volatile, None)  # do not change results: resuming with other values is fine
    if config.get("accept") == "any":
        config.pop("accept")  # the default, left out so run folders made before it still resume
    if not config.get("final_feedback"):
        config.pop("final_feedback", None)  # skipping a critique changes no output: older folders resume
    for key, default in (("samples", 1), ("strategy", "fixed"), ("preset", None)):
        if config.get(key) == default:
            config.pop(key, None)  # options added later, at their defaults: older folders resume
    roles = engine.backends
    # the judge at its default, the feedback role's backend, is no setting of its own: folders
    # made before the judge role resume
    own = {role: b for role, b in roles.items() if role != "judge" or b is not roles["feedback"]}
    return RunMeta(
        name=name,
        task=engine.task.name,
        data=data,
        models={role: b.name for role, b in roles.items()},
        model_ids={role: b.cache_identity() for role, b in own.items()},
        model_files={r: i.model_dump() for r, b in roles.items() if (i := b.model_info()) is not None},
        config=config,
        limit=limit,
        version=__version__,
        tests=str(tests.resolve()) if tests is not None else None,
        tests_sha256=hashlib.sha256(tests.read_bytes()).hexdigest() if tests is not None else None,
    )


def check_ids(examples: Sequence[Example]) -> None:
    seen: set[str] = set()
    for e in examples:
        if e.id in seen:
            raise InputError(f"example id {e.id!r} appears twice in the data; ids must be unique to resume")
        seen.add(e.id)


RowSink = Callable[[ExampleRow], None]
# runs the examples left to do and hands each finished row to the sink (local: the engine
# in this process; ``--ray``: a pool of actors, see ray_pool.py)
Runner = Callable[[Sequence[Example], RowSink], Awaitable[Any]]


async def run_eval(
    engine: SelfRefine,
    examples: Sequence[Example],
    store: RunStore,
    *,
    concurrency: int = 4,
    console: Console | None = None,
    judge: PairwiseJudge | None = None,
    retry_failed: bool = True,
    runner: Runner | None = None,
) -> tuple[EvalSummary, list[ExampleRow]]:
    """Run the examples not yet in ``store``; each row is on disk before it is counted.

    A failed example (no result, or stopped by an error) is run again unless
    ``retry_failed`` is False; its new row supersedes the old one (:class:`RunStore`).
    ``runner`` runs the examples elsewhere (e.g. :class:`~.ray_pool.RayPool`); by default
    ``engine`` runs them here, ``concurrency`` at once, with ``judge``."""
    check_ids(examples)
    recorded = store.rows()  # read the run folder once
    done = {r.id for r in recorded if not (retry_failed and r.failed)}
    retried = len(({r.id for r in recorded} - done) & {e.id for e in examples})
    todo = [e for e in examples if e.id not in done]
    console = console or Console(stderr=True)
    if recorded:  # a rerun into the same folder: say what is kept, not only a bar that starts part-way
        again = f" ({retried} failed ones again)" if retried else ""
        console.print(escape(f"resuming: {len(examples) - len(todo)} finished rows kept, {len(todo)} to run{again}"))
    with progress_bar(console) as progress:
        plan = Plan(engine.max_iterations, critic=engine.settings.critic)
        on_row = RowProgress(store, progress, engine.task.name, len(examples), len(done), plan)
        try:
            if runner is not None:
                await runner(todo, on_row)
            else:
                await evaluate_rows(engine, todo, concurrency=concurrency, on_row=on_row, judge=judge, watch=on_row)
        finally:
            await engine.aclose()
            if judge is not None:
                await judge.backend.aclose()
    rows = store.rows()
    summary = summarize(engine.task.name, rows, engine.max_iterations)
    summary.cache_dropped = sum(c.dropped for c in _caches(engine, judge)) + getattr(runner, "cache_dropped", 0)
    store.write_summary(summary, {"skipped_as_finished": len(done), "retried_failed": retried})
    return summary, rows


def _caches(engine: SelfRefine, judge: PairwiseJudge | None) -> list[ResponseCache]:
    """The response caches the engine's and the judge's backends answer from, each once."""
    backends = [*engine.backends.values(), *([judge.backend] if judge is not None else [])]
    caches = {id(b.cache): b.cache for b in backends if isinstance(b, CachedBackend)}
    return [c for c in caches.values() if isinstance(c, ResponseCache)]


def has_metric(task: Task) -> bool:
    """Whether the task defines a metric (a YAML task file and dialogue do not)."""
    return type(task).metric is not Task.metric


def summary_table(summary: EvalSummary, folder: Path, metric: bool = True, metric_name: str | None = None) -> Table:
    """The summary as a table; ``metric`` False (the task defines none) says so once where
    the numbers would be, instead of a column of dashes; ``metric_name`` says what it measures."""
    table = Table(title=f"{summary.task}: {plural(summary.examples, 'example')} → {folder}")
    table.add_column("measure")
    table.add_column("value", justify="right")

    def fmt(x: float | None) -> str:
        return "-" if x is None else f"{x:.3f}"

    if not metric:
        table.add_row("metric", "no metric: the task defines none")
    elif metric_name:
        table.add_row("metric", escape(metric_name))
    for t, value in enumerate(summary.by_iteration if metric else ()):
        table.add_row("one-step (iteration 0)" if t == 0 else f"after {plural(t, 'refinement')}", fmt(value))
    if metric:
        table.add_row("final (returned output)", fmt(summary.final))
    if summary.cumulative is not None:
        table.add_row("cumulative (solved at any iteration)", fmt(summary.cumulative))
    if summary.judge_preference is not None:
        table.add_row("judge: output preferred over one-step", str(summary.judge_preference))
    if summary.rejected_per_example:
        table.add_row("rejected refinements / example", f"{summary.rejected_per_example:.2f}")
    table.add_row("failed examples (left out of every mean)", str(summary.failed))
    if summary.judge_preference is not None or summary.judge_failed:
        table.add_row("judge calls failed (no verdict)", str(summary.judge_failed))
    table.add_row("examples whose metric raised", str(summary.metric_failed))
    if summary.answer_failed:
        table.add_row("examples whose answer hook raised", str(summary.answer_failed))
    if summary.cache_dropped:
        table.add_row("damaged cache entries (dropped, recomputed)", str(summary.cache_dropped))
    for kind, error in summary.first_errors.items():
        table.add_row(f"first {kind} error", escape(error if len(error) <= 200 else error[:200] + "…"))
    table.add_row("calls / example", f"{summary.calls_per_example:.1f}")
    table.add_row(
        "prompt + completion tokens / example",
        f"{summary.prompt_tokens_per_example:,.0f} + {summary.completion_tokens_per_example:,.0f}",
    )
    table.add_row("model seconds / example", f"{summary.seconds_per_example:.1f}")
    table.add_row("stop reasons", ", ".join(f"{k} {v}" for k, v in sorted(summary.stop_reasons.items())))
    return table
