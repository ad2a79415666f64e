"""One run of the loop: generate → feedback → stop? → refine → feedback → …

A :class:`Refinement` runs one input: its state is one record (:class:`~.state.RunState`),
its drafts come from one drafting part chosen from the settings (:mod:`.drafting`), its
calls go through :class:`~.calls.Caller`; :class:`~.loop.SelfRefine` makes one per input and
streams its steps. Which draft is returned and how drafts rank are pure functions
(:mod:`.selection`, :mod:`.ranking`).

- a refinement a drafting part rejects gets the verifier's findings as its feedback, and
  the next prompt shows it between two copies of the draft it refined (prefix-stable);
- a fatal backend error or an exhausted budget ends the run with the drafts so far kept.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from ..backends.base import Backend
from ..core.errors import BackendError, SandboxUnavailableError, error_text
from ..core.records import (
    ROLES,
    CallStep,
    DecisionStep,
    DraftStep,
    Feedback,
    FeedbackStep,
    ResultStep,
    Role,
    RunResult,
    Step,
    StopReason,
    Usage,
)
from ..core.stoprule import stop_hit
from .budgeted import Budgeted
from .calls import BudgetExceeded, Caller, CallLog
from .candidates import Pool
from .context import RunContext, verifier_feedback
from .drafting import Drafted, Drafter, OneDraft
from .incomplete import output_metric
from .sampling import BestOfK, Votes
from .selection import rejection_detail, select_index
from .settings import Settings
from .state import RunState
from .task import Task


def drafter_for(settings: Settings) -> Drafter:
    """The drafting part the settings ask for (a new one per run: parts keep run state)."""
    if settings.auto:
        return Budgeted(settings.samples, settings.votes)
    if settings.samples > 1:
        return Votes(settings.samples) if settings.votes else BestOfK(settings.samples)
    return OneDraft()


class Refinement:
    """One input's run: its state, its drafting part, and the loop over them."""

    def __init__(
        self, task: Task, settings: Settings, backends: Mapping[Role, Backend], input: str, reference: Any = None
    ) -> None:
        self.task, self.settings, self.backends = task, settings, backends
        self.state = RunState(input=input, reference=reference, pool=Pool(votes=settings.votes), log=CallLog())
        self.caller = Caller(settings.calls, backends, self.state.log)
        self.run = RunContext(task, settings, self.state, self.caller)
        self.drafter = drafter_for(settings)

    # -- the run ---------------------------------------------------------------------------

    async def stream(self) -> AsyncIterator[Step]:
        """Every step of the run, then its result."""
        stop, error = StopReason.ERROR, None
        try:
            async for step in self._steps():
                if isinstance(step, DecisionStep) and step.stop:
                    stop = step.reason or StopReason.MAX_ITERATIONS
                yield step
        except BudgetExceeded as exc:
            stop = exc.reason
            yield self._final_decision(stop, str(exc))
        except BackendError as exc:
            stop, error = StopReason.ERROR, str(exc)
            yield self._final_decision(stop, error)
        for call in self.state.log.drain():
            yield CallStep(call=call)
        yield ResultStep(result=await self.result(stop, error))

    async def _steps(self) -> AsyncIterator[Step]:
        made = await self.drafter.first(self.run, self.task.render("generate", self.state.input))
        self.state.iterations.append(made.iteration)
        for step in self._drafted(made):
            yield step
        if self.settings.verify_every_draft:
            await self.run.verify(0)
        while not self.state.stopped:
            async for step in self._round():
                yield step

    async def _round(self) -> AsyncIterator[Step]:
        """Critique the current draft, decide, and refine it until a refinement is accepted."""
        state, t = self.state, self.state.current
        early = (
            self._skip_final_feedback(t) if self._final_feedback_wasted() else self.drafter.before_round(self.run, t)
        )
        if early is not None:
            yield state.decided(early)
            return
        feedback = await self._feedback(t)
        state.iterations[t].feedback = feedback
        for call in state.log.drain():
            yield CallStep(call=call)
        yield FeedbackStep(iteration=t, feedback=feedback)
        decision = state.decided(self._decide(t, feedback))
        yield decision
        if not decision.stop:
            async for step in self._refine(t):
                yield step

    async def _refine(self, t: int) -> AsyncIterator[Step]:
        """Refine draft t until a refinement is accepted or a stop rule holds."""
        state = self.state
        while not state.stopped:
            n = len(state.iterations)
            made = await self.drafter.refinement(self.run, n, self.run.refine_prompt())
            if isinstance(made, DecisionStep):
                yield state.decided(made)
                return
            it = made.iteration
            state.iterations.append(it)
            verdict = await self.drafter.judge(self.run, state.iterations[t], it)  # before it is shown
            if verdict.rejected:
                it.accepted, it.feedback = False, verifier_feedback(it.verification)
            for step in self._drafted(made):
                yield step
            if not verdict.rejected:
                if verdict.stops:
                    yield state.decided(self._no_change(n))
                else:
                    state.accepted(t, n)
                return
            yield FeedbackStep(iteration=n, feedback=it.feedback)
            state.rejected(t, n)
            decision = state.decided(self._decide(n, None))
            yield decision.model_copy(update={"detail": rejection_detail(f"rejected: {verdict.rejected}", t, decision)})

    def _drafted(self, made: Drafted) -> list[Step]:
        it = made.iteration
        step = DraftStep(
            iteration=it.index, draft=it.draft, call=made.call, candidates=it.candidates, accepted=it.accepted
        )
        return [*(CallStep(call=c) for c in self.state.log.drain()), step]

    # -- decisions -------------------------------------------------------------------------

    def _decide(self, t: int, feedback: Feedback | None) -> DecisionStep:
        """Stop or refine after draft t. ``feedback`` None: t is a rejected refinement, whose
        findings stop nothing; only the refinement cap and the budgets apply."""
        reason = self._feedback_stop(feedback) if feedback is not None else None
        if reason is None and self.run.at_cap(len(self.state.iterations) - 1):
            reason = (StopReason.MAX_ITERATIONS, f"reached {self.settings.max_iterations} refinement(s)")
        reason = reason or self.caller.budget_spent()
        if reason is not None:
            return DecisionStep(iteration=t, stop=True, reason=reason[0], detail=reason[1])
        return DecisionStep(iteration=t, stop=False, detail="refine")

    def _feedback_stop(self, feedback: Feedback) -> tuple[StopReason, str] | None:
        """The stop the feedback itself asks for: its done signal, a stop phrase, a score."""
        settings = self.settings
        if settings.stop_on_feedback and feedback.done:
            return StopReason.FEEDBACK, "the feedback says the draft is done"
        hit = stop_hit(feedback.text, settings.stop_contains, settings.stop_matches)
        if hit is not None:
            return StopReason.FEEDBACK, f"the feedback {hit}"
        threshold = settings.score_threshold
        if threshold is not None and feedback.total is not None and feedback.total >= threshold:
            return StopReason.SCORE, f"score {feedback.total:g} >= {threshold:g}"
        return None

    def _no_change(self, n: int) -> DecisionStep:
        return DecisionStep(
            iteration=n, stop=True, reason=StopReason.NO_CHANGE, detail="the refinement changed nothing"
        )

    def _final_feedback_wasted(self) -> bool:
        """Whether the next critique can change neither the returned draft nor when the run
        stops: at the refinement cap the run stops whatever the critique says (on the default
        model it was 70 s of a 241 s run), and the returned draft ignores it under select
        "last", and under "verified" unless another draft ties with it on the verifier (the
        critic's score breaks that tie; a gsm8k best-of-5 paid ~250 tokens for nothing)."""
        settings = self.settings
        at_cap = self.run.at_cap(len(self.state.iterations) - 1)
        if not at_cap or settings.feedback_mode != "actionable" or settings.final_feedback:
            return False
        select = settings.select
        return select == "last" or (select == "verified" and not self._tied_on_verifier(self.state.current))

    def _tied_on_verifier(self, t: int) -> bool:
        """Whether another returnable draft has draft t's verifier score."""
        iterations = self.state.iterations
        mine = iterations[t].verification
        return mine is None or any(
            it.index != t and it.accepted and it.verification is not None and it.verification.score == mine.score
            for it in iterations
        )

    def _skip_final_feedback(self, t: int) -> DecisionStep:
        """The stop _decide would give at the cap, without the critique it would have read."""
        detail = (
            f"reached {self.settings.max_iterations} refinement(s); the last draft's critique is skipped "
            "(it cannot change the result; final_feedback asks for it)"
        )
        return DecisionStep(iteration=t, stop=True, reason=StopReason.MAX_ITERATIONS, detail=detail)

    def _final_decision(self, reason: StopReason, detail: str) -> DecisionStep:
        iterations = self.state.iterations
        t = iterations[-1].index if iterations else 0
        return DecisionStep(iteration=t, stop=True, reason=reason, detail=detail)

    # -- feedback --------------------------------------------------------------------------

    async def _feedback(self, t: int) -> Feedback:
        """Draft t's feedback per the feedback and verifier modes (a kept sample's critique,
        made when it broke a tie, is reused)."""
        settings, run = self.settings, self.run
        if settings.feedback_mode == "generic":
            return Feedback(text=self.task.generic_feedback, source="generic")
        if settings.feedback_mode == "none":
            return Feedback(text="", source="none")
        verifier = settings.verifier_mode
        check = await run.verify(t) if verifier != "self" else None
        if verifier == "verifier":
            assert check is not None
            return Feedback(
                text=check.text, done=check.passed, total=check.score, source="verifier", verification=check
            )
        it = self.state.iterations[t]
        kept = next((c for c in it.candidates if c.chosen), None)
        critique = kept.feedback if kept is not None and kept.feedback is not None else await run.critique(t)
        if check is None:
            return critique
        return self.task.combine(critique, check, input=self.state.input, draft=it.draft)

    # -- result ----------------------------------------------------------------------------

    async def result(self, stop: StopReason, error: str | None) -> RunResult:
        state = self.state
        state.pool.rescore(state.iterations)  # the final votes decide among the drafts
        selected = select_index(state.iterations, self.settings.select)
        output = state.iterations[selected].draft if selected is not None else None
        metric = answer = metric_error = answer_error = None
        if selected is not None and output is not None:
            (metric, metric_error), (answer, answer_error) = await asyncio.to_thread(self._score_output, output)
            metric = output_metric(metric, state.iterations[selected].finish_reason)
        models = {role: self.backends[role].name for role in ROLES}
        files = {r: i for r in ROLES if (i := self.backends[r].model_info()) is not None}
        return RunResult(
            task=self.task.name,
            input=state.input,
            iterations=state.iterations,
            output=output,
            selected=selected,
            stop_reason=stop,
            error=error,
            calls=state.log.calls,
            usage=Usage.of(state.log.calls),
            config=self.settings.run_config(models, files),
            metric=metric,
            metric_error=metric_error,
            answer=answer,
            answer_error=answer_error,
        )

    def _score_output(self, output: str) -> tuple[tuple[Any, str | None], tuple[Any, str | None]]:
        """(metric, its error), (answer, its error): a broken hook must not lose the finished
        run, and its error is kept in the result instead of a bare None."""
        return _hook(self.task.metric, self.state.input, output, self.state.reference), _hook(self.task.answer, output)


def _hook(fn: Callable[..., Any], *args: Any) -> tuple[Any, str | None]:
    try:
        return fn(*args), None
    except SandboxUnavailableError:
        raise  # this machine cannot run model code at all: say so, not metric=None
    except Exception as exc:
        return None, error_text(exc)
