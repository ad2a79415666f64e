"""Run one engine over many examples: concurrency, per-example rows, metric per iteration.

Like DSPy's ``Evaluate``: dataset + task metric + concurrency → a score and per-example
rows. The metric is computed by the task's code on every draft, so the report shows the
one-step baseline (iteration 0), each iteration, the final and the best-selected output,
and the paper's cumulative variant (solved at any iteration). An example whose run failed
is kept as a row with its error; it never stops the others.
"""

from __future__ import annotations

import asyncio
import statistics
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel, Field

from .datasets import Example
from .judge import JudgeResult, PairwiseJudge, preference_rate
from .loop import SelfRefine
from .records import RunResult, StopReason


class ExampleRow(BaseModel):
    id: str
    result: RunResult | None = None
    error: str | None = None
    metrics: list[float | None] = Field(default_factory=list)  # the metric of draft 0, 1, …
    judge: JudgeResult | None = None  # returned output ('b') vs the one-step draft 0 ('a')

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
    task: str
    examples: int
    failed: int
    by_iteration: list[float | None]  # mean metric after t refinements, t = 0..max
    final: float | None  # mean metric of the returned outputs (per the select policy)
    cumulative: float | None  # share solved at any iteration (binary metrics)
    calls_per_example: float
    prompt_tokens_per_example: float
    completion_tokens_per_example: float
    seconds_per_example: float
    stop_reasons: dict[str, int]
    rejected_per_example: float = 0.0  # refinements rejected by accept="not_worse"
    judge_preference: dict[str, float] | None = None  # win/tie/loss of the output over draft 0


def _mean(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.fmean(known) if known else None


def _metrics(engine: SelfRefine, example: Example, result: RunResult) -> list[float | None]:
    out: list[float | None] = []
    for it in result.iterations:
        try:
            out.append(engine.task.metric(result.input, it.draft, example.reference))
        except Exception:  # a metric crash on one draft must not lose the row
            out.append(None)
    return out


async def evaluate_rows(
    engine: SelfRefine,
    examples: Sequence[Example],
    *,
    concurrency: int = 4,
    on_row: Callable[[ExampleRow], Any] | None = None,
    judge: PairwiseJudge | None = None,
) -> list[ExampleRow]:
    """Run every example (at most ``concurrency`` at once); rows come back in input order.

    With a ``judge``, each returned output is compared with the one-step draft 0 (the
    paper's preference metric); identical texts are a tie without a judge call."""
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(example: Example) -> ExampleRow:
        async with gate:
            try:
                result = await engine.arun(example.input, example.reference)
            except Exception as exc:  # bad input etc.: record it and go on
                row = ExampleRow(id=example.id, error=f"{type(exc).__name__}: {exc}")
            else:
                metrics = await asyncio.to_thread(_metrics, engine, example, result)
                row = ExampleRow(id=example.id, result=result, metrics=metrics, error=result.error)
                if judge is not None:
                    row.judge = await _judge(judge, result)
        if on_row is not None:
            on_row(row)
        return row

    return list(await asyncio.gather(*(one(e) for e in examples)))


async def _judge(judge: PairwiseJudge, result: RunResult) -> JudgeResult | None:
    if result.output is None or not result.iterations:
        return None
    base = result.iterations[0].draft
    if base.strip() == result.output.strip():
        return JudgeResult(winner="tie")
    try:
        return await judge.acompare(result.input, base, result.output)
    except Exception:  # a judge failure must not lose the finished example
        return None


def summarize(task: str, rows: Sequence[ExampleRow], max_iterations: int) -> EvalSummary:
    done = [r for r in rows if r.result is not None]
    by_iteration = [_mean([r.metric_at(t) for r in done]) for t in range(max_iterations + 1)]
    final = _mean([r.metrics[r.result.selected] if r.result.selected is not None and r.metrics else None for r in done])
    known = [m for r in done for m in r.metrics if m is not None]
    binary = bool(known) and all(m in (0.0, 1.0) for m in known)  # no metric: no solve rate
    cumulative = _mean([float(any(m == 1.0 for m in r.metrics)) for r in done if r.metrics]) if binary else None
    n = max(1, len(done))
    reasons: dict[str, int] = {}
    for r in done:
        reasons[r.result.stop_reason.value] = reasons.get(r.result.stop_reason.value, 0) + 1
    return EvalSummary(
        task=task,
        examples=len(rows),
        failed=sum(1 for r in rows if r.result is None or r.result.stop_reason is StopReason.ERROR),
        by_iteration=by_iteration,
        final=final,
        cumulative=cumulative,
        calls_per_example=sum(r.result.usage.calls for r in done) / n,
        prompt_tokens_per_example=sum(r.result.usage.prompt_tokens for r in done) / n,
        completion_tokens_per_example=sum(r.result.usage.completion_tokens for r in done) / n,
        seconds_per_example=sum(r.result.usage.seconds for r in done) / n,
        stop_reasons=reasons,
        rejected_per_example=sum(not it.accepted for r in done for it in r.result.iterations) / n,
        judge_preference=preference_rate([r.judge for r in done if r.judge]) if any(r.judge for r in done) else None,
    )


def evaluate(engine: SelfRefine, examples: Sequence[Example], *, concurrency: int = 4) -> tuple[EvalSummary, list[ExampleRow]]:
    """Sync convenience: rows and their summary."""
    rows = asyncio.run(evaluate_rows(engine, examples, concurrency=concurrency))
    return summarize(engine.task.name, rows, engine.max_iterations), rows
