"""Run one engine over many examples: concurrency, per-example rows, metric per iteration.

Like DSPy's ``Evaluate``: dataset + task metric + concurrency → a score and per-example
rows. The metric is computed by the task's code on every draft, so the report shows the
one-step baseline (iteration 0), each iteration, the final and the best-selected output,
and the paper's cumulative variant (solved at any iteration). An example whose run failed
is kept as a row with its error; it never stops the others, and the summary counts it
apart from the means. A metric, answer or judge hook that raises is recorded in the row
(``metric_errors``, ``answer_error``, ``judge_error``) and counted, never dropped quietly.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from pydantic import BaseModel, Field

from ..checks.incomplete import output_metric
from ..core.errors import StorageError, error_text
from ..core.records import ResultStep, RunResult, Step, StopReason
from ..engine.loop import SelfRefine
from .datasets import Example
from .judge import Comparison, PairwiseJudge, Preference, preference_rate
from .stats import mean_known


class ExampleRow(BaseModel):
    id: str
    result: RunResult | None = None
    error: str | None = None
    metrics: list[float | None] = Field(default_factory=list)  # the metric of draft 0, 1, …
    # metric_errors[t]: why metrics[t] is None when the metric hook raised on draft t
    # (empty in rows written before errors were recorded, and when no hook raised)
    metric_errors: list[str | None] = Field(default_factory=list)
    judge: Comparison | None = None  # returned output ('b') vs the one-step draft 0 ('a')
    judge_error: str | None = None  # the judge call failed (bad key, dead server): no verdict
    answer_error: str | None = None  # the task's answer hook raised on the returned output

    @property
    def failed(self) -> bool:
        """No result, or a run stopped by an error: counted apart, left out of the means,
        and retried by a rerun of the same eval."""
        return self.result is None or self.result.stop_reason is StopReason.ERROR

    @property
    def metric_failed(self) -> bool:
        return any(e is not None for e in self.metric_errors)

    def metric_at(self, t: int) -> float | None:
        """The metric of the output after t refinements (a stopped run keeps its last draft;
        after a rejected refinement the output is still the last accepted draft)."""
        if not self.metrics:
            return None
        t = min(t, len(self.metrics) - 1)
        iterations = self.result.iterations if self.result is not None else []
        while 0 < t < len(iterations) and not iterations[t].accepted:
            t -= 1
        return self.metrics[t]


class EvalSummary(BaseModel):
    """Means over the examples that did not fail; the failed ones are only counted."""

    task: str
    examples: int  # rows, one per example id
    failed: int  # rows without a result or stopped by an error: left out of every mean below
    by_iteration: list[float | None]  # mean metric after t refinements, t = 0..the most any example ran
    final: float | None  # mean metric of the returned outputs (per the select policy)
    cumulative: float | None  # share solved at any iteration (binary metrics)
    calls_per_example: float
    prompt_tokens_per_example: float
    completion_tokens_per_example: float
    seconds_per_example: float
    stop_reasons: dict[str, int]
    rejected_per_example: float = 0.0  # refinements rejected by accept="not_worse"
    judge_preference: Preference | None = None  # win/tie/loss of the output over draft 0
    judge_failed: int = 0  # examples whose judge call failed (no verdict, not in judge_preference)
    metric_failed: int = 0  # examples whose metric hook raised on at least one draft
    answer_failed: int = 0  # examples whose answer hook raised on the returned output
    first_errors: dict[str, str] = Field(default_factory=dict)  # kind -> the first such error, for the fix
    cache_dropped: int = 0  # damaged response-cache entries dropped and recomputed by this eval command


def _metrics(engine: SelfRefine, example: Example, result: RunResult) -> tuple[list[float | None], list[str | None]]:
    """The metric of every draft, and the error of each draft whose metric hook raised.

    Each distinct text is scored once: the returned draft's metric is the one the loop
    already computed (for codeopt a second timing run of the same program), and a draft
    repeated unchanged is not scored again."""
    known: dict[str, tuple[float | None, str | None]] = {}
    if result.output is not None:
        known[result.output] = (result.metric, result.metric_error)
    for it in result.iterations:
        if it.draft not in known:
            try:
                known[it.draft] = (engine.task.metric(result.input, it.draft, example.reference), None)
            except Exception as exc:  # a metric crash on one draft must not lose the row
                known[it.draft] = (None, error_text(exc))
    # a draft cut off at the token limit is no answer, whatever its text scores (as the loop
    # scores the returned output)
    values = [output_metric(known[it.draft][0], it.finish_reason) for it in result.iterations]
    errors = [known[it.draft][1] for it in result.iterations]
    return values, errors if any(errors) else []


async def evaluate_rows(
    engine: SelfRefine,
    examples: Sequence[Example],
    *,
    concurrency: int = 4,
    on_row: Callable[[ExampleRow], Any] | None = None,
    judge: PairwiseJudge | None = None,
    watch: Watcher | None = None,
) -> list[ExampleRow]:
    """Run every example (at most ``concurrency`` at once); rows come back in input order.

    With a ``judge``, each returned output is compared with the one-step draft 0 (the
    paper's preference metric); identical texts are a tie without a judge call. ``watch``
    hears each example start and each of its steps as it happens (the eval's progress)."""
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(example: Example) -> ExampleRow:
        async with gate:
            try:
                result = await _run(engine, example, watch)
            except StorageError:
                raise  # a full disk or damaged cache fails every example alike: stop, say why
            except Exception as exc:  # bad input etc.: record it and go on
                row = ExampleRow(id=example.id, error=error_text(exc))
            else:
                metrics, errors = await asyncio.to_thread(_metrics, engine, example, result)
                # the loop already ran the answer hook on the returned output and kept its error
                row = ExampleRow(
                    id=example.id,
                    result=result,
                    metrics=metrics,
                    metric_errors=errors,
                    error=result.error,
                    answer_error=result.answer_error,
                )
                if judge is not None:
                    row.judge, row.judge_error = await _judge(judge, result)
        if on_row is not None:
            on_row(row)
        return row

    tasks = [asyncio.ensure_future(one(e)) for e in examples]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:  # a storage error or a cancel: nothing more runs (examples that finish in
        # this turn of the event loop still hand their rows on: RunStore.append copes)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


class Watcher(Protocol):
    """What follows the examples as they run (:class:`~.progress.RowProgress`)."""

    def started(self, example: Example) -> None: ...

    def step(self, example: Example, step: Step) -> None: ...


async def _run(engine: SelfRefine, example: Example, watch: Watcher | None) -> RunResult:
    """One example's run; ``watch`` hears it start and sees each step."""
    if watch is None:
        return await engine.arun(example.input, example.reference)
    watch.started(example)
    result = None
    async for step in engine.astream(example.input, example.reference):
        watch.step(example, step)
        if isinstance(step, ResultStep):
            result = step.result
    assert result is not None
    return result


async def _judge(judge: PairwiseJudge, result: RunResult) -> tuple[Comparison | None, str | None]:
    """(verdict, None), (None, error) when the judge call failed, or (None, None) when there
    is nothing to judge (no returned output)."""
    if result.output is None or not result.iterations:
        return None, None
    base = result.iterations[0].draft
    if base.strip() == result.output.strip():
        return Comparison(winner="tie"), None
    try:
        return await judge.acompare(result.input, base, result.output), None
    except Exception as exc:  # a judge failure must not lose the finished example
        return None, error_text(exc)


def summarize(task: str, rows: Sequence[ExampleRow], max_iterations: int) -> EvalSummary:
    """Means over the rows that did not fail (a failed row has no comparable trajectory);
    failures and hook errors are counted apart."""
    ok = [r for r in rows if not r.failed]
    # only the rounds that ran: with every example stopped at draft 0, "after 2 refinements"
    # would repeat draft 0's number as if two rounds had run (carry-forward)
    rounds = min(max_iterations, max((len(r.result.iterations) - 1 for r in ok if r.result), default=0))
    by_iteration = [mean_known([r.metric_at(t) for r in ok]) for t in range(rounds + 1)]
    final = mean_known(
        [r.metrics[r.result.selected] if r.result.selected is not None and r.metrics else None for r in ok]
    )
    known = [m for r in ok for m in r.metrics if m is not None]
    binary = bool(known) and all(m in (0.0, 1.0) for m in known)  # no metric: no solve rate
    cumulative = mean_known([float(any(m == 1.0 for m in r.metrics)) for r in ok if r.metrics]) if binary else None
    n = max(1, len(ok))
    reasons: dict[str, int] = {}
    for r in rows:
        if r.result is not None:
            reasons[r.result.stop_reason.value] = reasons.get(r.result.stop_reason.value, 0) + 1
    judged = [r.judge for r in ok if r.judge]
    return EvalSummary(
        task=task,
        examples=len(rows),
        failed=len(rows) - len(ok),
        by_iteration=by_iteration,
        final=final,
        cumulative=cumulative,
        calls_per_example=sum(r.result.usage.calls for r in ok) / n,
        prompt_tokens_per_example=sum(r.result.usage.prompt_tokens for r in ok) / n,
        completion_tokens_per_example=sum(r.result.usage.completion_tokens for r in ok) / n,
        seconds_per_example=sum(r.result.usage.seconds for r in ok) / n,
        stop_reasons=reasons,
        rejected_per_example=sum(not it.accepted for r in ok for it in r.result.iterations) / n,
        judge_preference=preference_rate(judged) if judged else None,
        judge_failed=sum(r.judge_error is not None for r in rows),
        metric_failed=sum(r.metric_failed for r in rows),
        answer_failed=sum(r.answer_error is not None for r in rows),
        first_errors=first_errors(rows),
    )


def first_errors(rows: Sequence[ExampleRow]) -> dict[str, str]:
    """The first error of each kind, with its example id: enough to see the fix (a bad key
    fails every judge call the same way)."""
    out: dict[str, str] = {}
    for r in rows:
        found = {
            "example": r.error if r.failed else None,
            "judge": r.judge_error,
            "metric": next((e for e in r.metric_errors if e), None),
            "answer": r.answer_error,
        }
        for kind, error in found.items():
            if error and kind not in out:
                out[kind] = f"{r.id}: {error}"
    return out
