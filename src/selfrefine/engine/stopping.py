"""When a run stops: the stop rules of the loop, in one place.

After each critique the run stops on the feedback's own signal (its done flag, a stop
phrase or pattern, a score at the threshold), at the refinement cap, or when a budget is
spent; a rejected refinement's findings stop nothing, only the cap and the budgets apply.
A critique that can change neither the returned draft nor when the run stops is not asked
for. The run's drafter contributes its own stops as :class:`Stop` values (the auto
strategy: the verifier is satisfied, the budget pays for no round), which become the run's
decisions here. Every stop is a :class:`~selfrefine.core.records.DecisionStep` with its reason.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass

from ..core.records import DecisionStep, Feedback, StopReason
from ..core.stoprule import stop_hit
from ..core.wording import plural
from .context import RunContext
from .settings import Settings


@dataclass(frozen=True)
class Stop:
    """A stop a part of the run asks for: its reason, and why in words."""

    reason: StopReason
    detail: str


Contributed = Callable[[int], "Stop | None"]  # the drafter's stop before draft t's round


class StopRule(ABC):
    """A stop rule asked before draft t's round, and what it needs of the run: a rule that
    reads draft t's checks says so (``needs_verification``), and every draft is verified."""

    def needs_verification(self, settings: Settings) -> bool:
        """Whether this rule reads each draft's checks under these settings."""
        return False

    @abstractmethod
    def before_round(self, run: RunContext, t: int) -> DecisionStep | None:
        """Its stop before draft t is critiqued (None: the round goes on)."""


class SchemaValidated(StopRule):
    """The stop of a run with a JSON Schema once its draft t passes its code checks: the
    schema (and the run's other checks, the task's verifier) is what the run asked for."""

    def needs_verification(self, settings: Settings) -> bool:
        return settings.checks.schema is not None

    def before_round(self, run: RunContext, t: int) -> DecisionStep | None:
        if run.settings.checks.schema is None:
            return None
        check = run.board.of_iteration(t)
        if check is None or not check.passed:
            return None
        detail = f"draft {t} validates against the schema" + (
            " and passes every check" if run.state.checks.all or run.task.has_verifier else ""
        )
        return DecisionStep(iteration=t, stop=True, reason=StopReason.VERIFIED, detail=detail)


# the rules asked before a round, in order, besides the wasted critique's and the drafter's
BEFORE_ROUND: tuple[StopRule, ...] = (SchemaValidated(),)


class StopRules:
    """The stop rules of one run, read from its settings, state, scores and budgets, with
    the stops its drafter contributes (``contributed``)."""

    def __init__(self, run: RunContext, contributed: Contributed | None = None) -> None:
        self.run = run
        self.contributed = contributed or (lambda t: None)
        self.rules = BEFORE_ROUND

    def needs_verification(self, settings: Settings) -> bool:
        """Whether a stop rule of the run reads each draft's checks."""
        return any(rule.needs_verification(settings) for rule in self.rules)

    def after(self, t: int, feedback: Feedback | None) -> DecisionStep:
        """Stop or refine after draft t. ``feedback`` None: t is a rejected refinement, whose
        findings stop nothing; only the refinement cap and the budgets apply."""
        run = self.run
        reason = self._asked_by(feedback) if feedback is not None else None
        if reason is None and run.at_cap(len(run.state.iterations) - 1):
            reason = (StopReason.MAX_ITERATIONS, at_cap(run.settings.stops.max_iterations))
        reason = reason or run.caller.budget_spent()
        if reason is not None:
            return DecisionStep(iteration=t, stop=True, reason=reason[0], detail=reason[1])
        return DecisionStep(iteration=t, stop=False, detail="refine")

    def _asked_by(self, feedback: Feedback) -> tuple[StopReason, str] | None:
        """The stop the feedback itself asks for: its done signal, a stop phrase, a score."""
        stops = self.run.settings.stops
        if stops.on_feedback and feedback.done:
            return StopReason.FEEDBACK, "the feedback says the draft is done"
        hit = stop_hit(feedback.text, stops.contains, stops.matches)
        if hit is not None:
            return StopReason.FEEDBACK, f"the feedback {hit}"
        threshold = stops.score_threshold
        if threshold is not None and feedback.total is not None and feedback.total >= threshold:
            return StopReason.SCORE, f"score {feedback.total:g} >= {threshold:g}"
        return None

    def before_round(self, t: int) -> DecisionStep | None:
        """The stop before draft t is critiqued: a rule's of :data:`BEFORE_ROUND` (under a
        JSON Schema, draft t validates and passes the run's other checks); at the cap when that
        critique is wasted; or the one the drafter contributes."""
        for rule in self.rules:
            decided = rule.before_round(self.run, t)
            if decided is not None:
                return decided
        wasted = self._before_critique(t)
        if wasted is not None:
            return wasted
        stop = self.contributed(t)
        return self.decision(t, stop) if stop is not None else None

    def _before_critique(self, t: int) -> DecisionStep | None:
        """The stop at the cap without the critique of draft t, when that critique is wasted."""
        if not self._critique_wasted():
            return None
        n = self.run.settings.stops.max_iterations
        last = "not critiqued" if n == 0 else "the last draft is not critiqued"
        detail = f"{at_cap(n)} ({last}, as a critique could change nothing; --final-feedback asks for one)"
        return DecisionStep(iteration=t, stop=True, reason=StopReason.MAX_ITERATIONS, detail=detail)

    def _critique_wasted(self) -> bool:
        """Whether the next critique can change neither the returned draft nor when the run
        stops: at the refinement cap the run stops whatever the critique says (on the default
        model it was 70 s of a 241 s run), and the returned draft ignores it under select
        "last", and under "verified" unless another draft ties with it on the verifier (the
        critic's score breaks that tie; a gsm8k best-of-5 paid ~250 tokens for nothing)."""
        run, settings = self.run, self.run.settings
        at_cap = run.at_cap(len(run.state.iterations) - 1)
        if not at_cap or settings.feedback_mode != "actionable" or settings.stops.final_feedback:
            return False
        select = settings.select
        if select == "verified" and settings.judge.available:
            return True  # drafts the verifier ties go to the judge (or, voted, share an answer), not the critic
        return select == "last" or (select == "verified" and not self._tied_on_verifier(run.state.current))

    def _tied_on_verifier(self, t: int) -> bool:
        """Whether another returnable draft has draft t's verifier score."""
        run = self.run
        mine = run.board.of_iteration(t)
        return mine is None or any(
            it.index != t and it.accepted and (other := run.board.of_iteration(it.index)) is not None
            and other.score == mine.score
            for it in run.state.iterations
        )  # fmt: skip

    @staticmethod
    def decision(t: int, stop: Stop) -> DecisionStep:
        """A contributed stop as the run's decision on draft t."""
        return DecisionStep(iteration=t, stop=True, reason=stop.reason, detail=stop.detail)

    @staticmethod
    def no_change(n: int) -> DecisionStep:
        """The stop after refinement n repeated its parent."""
        return DecisionStep(
            iteration=n, stop=True, reason=StopReason.NO_CHANGE, detail="the refinement changed nothing"
        )

    def ended(self, reason: StopReason, detail: str) -> DecisionStep:
        """The stop of a run a budget or a failing backend ended mid-step."""
        iterations = self.run.state.iterations
        t = iterations[-1].index if iterations else 0
        return DecisionStep(iteration=t, stop=True, reason=reason, detail=detail)


def at_cap(n: int) -> str:
    """The stop at the refinement cap in words: "stopped after the first draft: max_iterations is 0"."""
    done = "the first draft" if n == 0 else plural(n, "refinement")
    return f"stopped after {done}: max_iterations is {n}"
