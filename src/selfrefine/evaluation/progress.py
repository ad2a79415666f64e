"""What ``selfrefine eval`` shows while it runs: a line when each example starts, its steps as
they happen with an estimate of the time the example has left, and each finished row.

On a terminal a rich bar counts the finished rows (with the eval's ETA) and its text follows
the latest step; in a pipe or a log every step is a line of its own, so the first line comes
with the first example, not when it ends (an example of commongen_hard takes minutes on the
embedded model). Each row is written durably before it is counted."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from ..core.records import CallStep, DecisionStep, DraftStep, FeedbackStep, Step
from ..core.wording import plural
from .datasets import Example
from .runner import ExampleRow
from .runstore import RunStore

SHOWN_INPUT = 60  # characters of an example's input on its start line


@dataclass(frozen=True)
class Plan:
    """What bounds an example's length: its refinement cap, and whether each round has a
    critique call of its own (not with feedback from the code alone or a fixed message)."""

    max_iterations: int
    critic: bool = True

    def steps_left(self, step: DraftStep | FeedbackStep) -> int:
        """Steps the model writes that the example may still take after ``step`` (at most: a
        stop rule can end it sooner). A round is a critique (with a critic) and a refinement."""
        rounds, per_round = max(0, self.max_iterations - step.iteration), 2 if self.critic else 1
        if isinstance(step, FeedbackStep):  # this critique's refinement, then the rounds after it
            return 1 + (rounds - 1) * per_round if rounds else 0
        return rounds * per_round


@dataclass
class Started:
    """One example in flight: when it started, and the draft and critique steps it has taken."""

    number: int
    started: float = field(default_factory=time.monotonic)
    steps: int = 0


def duration(seconds: float) -> str:
    """``45s``, ``6m05s``, ``1h02m``."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def called(step: Step) -> bool:
    """Whether a step is one the model wrote: a draft, or a critique from the critic (not the
    code's findings alone, a fixed message or none)."""
    return isinstance(step, DraftStep) or (
        isinstance(step, FeedbackStep) and step.feedback.source in ("model", "hybrid")
    )


def step_text(step: Step) -> str | None:
    """A step in a few words, for the progress line; None for steps not shown."""
    if isinstance(step, DraftStep):
        what = "first draft" if step.iteration == 0 else f"refinement {step.iteration}"
        samples = f", best of {len(step.candidates)} samples" if len(step.candidates) > 1 else ""
        return f"{what} written{samples}" + ("" if step.accepted else " (rejected)")
    if isinstance(step, FeedbackStep):
        return f"critique of draft {step.iteration}"
    if isinstance(step, DecisionStep) and step.stop:
        return f"stops: {step.reason or 'stop'}"
    if isinstance(step, CallStep):
        return f"a {step.call.role} call failed, retrying: {step.call.error or ''}"
    return None


class RowProgress:
    """The eval's progress (see the module): ``started`` and ``step`` as the local runner
    calls them, and ``__call__`` for each finished row (every runner, local or Ray)."""

    def __init__(self, store: RunStore, progress: Progress, task: str, total: int, done: int, plan: Plan) -> None:
        self.store = store
        self.progress = progress
        self.console = progress.console
        self.total = total
        self.count = done
        self.finals: list[float] = []
        self.tokens = 0
        self.plan = plan
        self.began = time.monotonic()
        self.finished_here = 0  # rows this command finished (a resumed run's kept ones aside)
        self.flight: dict[str, Started] = {}
        self.starts = done
        self.bar = progress.add_task(task, total=total, completed=done, stats="")

    @property
    def piped(self) -> bool:
        return not self.console.is_terminal

    def started(self, example: Example) -> None:
        self.starts += 1
        self.flight[example.id] = Started(self.starts)
        text = " ".join(example.input.split())
        shown = text if len(text) <= SHOWN_INPUT else text[: SHOWN_INPUT - 1] + "…"
        self._line(
            f"▶ {example.id}: example {self.starts} of {self.total} started ({len(self.flight)} in flight): {shown}"
        )

    def step(self, example: Example, step: Step) -> None:
        said = step_text(step)
        now = self.flight.get(example.id)
        if said is None or now is None:
            return
        elapsed = time.monotonic() - now.started
        line = f"{example.id} [{duration(elapsed)}]: {said}"
        if called(step):
            now.steps += 1
            line += self._eta(now, elapsed, self.plan.steps_left(step))  # type: ignore[arg-type]
        if self.piped:
            self._line(f"  {line}")
        else:
            self.progress.update(self.bar, stats=self._stats() + f"  {escape(line)}")

    @staticmethod
    def _eta(now: Started, elapsed: float, left: int) -> str:
        if left == 0:
            return "; no step left"
        per_step = elapsed / max(1, now.steps)
        steps = plural(left, "more step")
        return f"; ETA ≤ {duration(per_step * left)} for it (at most {steps} at ~{duration(per_step)} each)"

    def __call__(self, row: ExampleRow) -> None:
        self.store.append(row)  # durable first, counted second
        self.count += 1
        self.finished_here += 1
        self.flight.pop(row.id, None)
        if row.result is not None:
            self.tokens += row.result.usage.total_tokens
            if row.result.selected is not None and row.metrics and row.metrics[row.result.selected] is not None:
                self.finals.append(row.metrics[row.result.selected])
        self.progress.update(self.bar, advance=1, stats=self._stats())
        if self.piped:  # logs get one line per example instead of a bar
            metric, tokens = self._running()
            self._line(
                f"[{self.count}/{self.total}] {row.id}: {row_outcome(row)}; running {metric}, tokens {tokens}{self._left()}"
            )

    def _running(self) -> tuple[str, str]:
        metric = f"metric {statistics.fmean(self.finals):.3f}" if self.finals else "metric -"
        return metric, f"{self.tokens:,}"

    def _stats(self) -> str:
        metric, tokens = self._running()
        return f"{metric}  tokens {tokens}"

    def _left(self) -> str:
        """The eval's ETA at the rate of the rows this command finished."""
        left = self.total - self.count
        if not left:
            return ""
        per_row = (time.monotonic() - self.began) / max(1, self.finished_here)
        return f"; {left} to go, ETA ~{duration(per_row * left)}"

    def _line(self, text: str) -> None:
        self.console.print(escape(text), highlight=False, soft_wrap=True)


def row_outcome(row: ExampleRow) -> str:
    """The stop reason or error of a row, with its hook errors, for a log line."""
    what = row.error or (row.result.stop_reason.value if row.result else "")
    what += "".join(
        f"; {kind} error: {err}" for kind, err in (("judge", row.judge_error), ("answer", row.answer_error)) if err
    )
    if row.metric_failed:
        what += f"; metric error: {next(e for e in row.metric_errors if e)}"
    return what


def progress_bar(console: Console) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        TextColumn("{task.fields[stats]}"),
        console=console,
        transient=False,
        disable=not console.is_terminal,
    )
