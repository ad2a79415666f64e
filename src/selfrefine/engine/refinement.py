"""One run of the loop: generate → feedback → stop? → refine → feedback → …

A :class:`Refinement` runs one input: its state is one record (:class:`~.state.RunState`),
its drafts come from one drafting part chosen from the settings (:mod:`.drafting`), its
stops from :class:`~.stopping.StopRules`, its calls go through :class:`~.calls.Caller`; :class:`~.loop.SelfRefine` makes one per input and
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
from ..checks.incomplete import output_metric
from ..core.errors import BackendError, SandboxUnavailableError, error_text
from ..core.records import (
    MODEL_ROLES,
    CallStep,
    DecisionStep,
    DraftStep,
    FailedCheck,
    Feedback,
    FeedbackStep,
    ResultStep,
    Role,
    RunResult,
    Step,
    StopReason,
    Usage,
)
from ..task.task import Task
from .calls import BudgetExceeded, Caller, CallLog
from .context import RunContext, verifier_feedback
from .derivation import run_checks
from .drafting.base import Drafted, Drafter, Strategy
from .drafting.registry import find_strategy
from .focused import FORMS, FocusedRound, repair_targets
from .judge import judge_iterations
from .output_checks import output_fails
from .run_checks import RunChecks
from .scoring.ranking import score
from .scoring.scoreboard import Scoreboard, normal_text
from .scoring.selection import (
    acceptance_needs_verification,
    rejection_detail,
    select_index,
    selection_needs_verification,
)
from .settings import Settings
from .state import RunState
from .stopping import Stop, StopRules


def verifies_every_draft(settings: Settings, strategy: Strategy, stops: StopRules) -> bool:
    """Whether each draft is verified as it arrives: when a part of the run reads the drafts'
    checks (the strategy, the selection, the acceptance, a stop rule). Each part says so
    itself, so a new one needs no list kept here or in the settings."""
    needs = (
        strategy.needs_verification,
        selection_needs_verification,
        acceptance_needs_verification,
        stops.needs_verification,
    )
    return any(need(settings) for need in needs)


class Refinement:
    """One input's run: its state, its drafting part, and the loop over them."""

    def __init__(
        self,
        task: Task,
        settings: Settings,
        backends: Mapping[Role, Backend],
        input: str,
        reference: Any = None,
    ) -> None:
        self.task, self.settings, self.backends = task, settings, backends
        board = Scoreboard(votes=settings.sampling.votes)
        checks = RunChecks(policy=settings.checks)  # the engine's, held: given and schema parsed once
        self.state = RunState(input=input, reference=reference, board=board, log=CallLog(), checks=checks)
        self.caller = Caller(settings.calls, backends, self.state.log)
        self.run = RunContext(task, settings, self.state, self.caller)
        strategy = find_strategy(settings.sampling.strategy)
        self.drafter: Drafter = strategy.drafter(settings)  # a new one per run: it keeps run state
        self.stops = StopRules(self.run, lambda t: self.drafter.before_round(self.run, t))
        self.run.verify_every_draft = verifies_every_draft(settings, strategy, self.stops)

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
            yield self.stops.ended(stop, str(exc))
        except BackendError as exc:
            stop, error = StopReason.ERROR, str(exc)
            yield self.stops.ended(stop, error)
        for call in self.state.log.drain():
            yield CallStep(call=call)
        yield ResultStep(result=await self.result(stop, error))

    async def _steps(self) -> AsyncIterator[Step]:
        async for step in run_checks(self.run):  # before the first draft: drafts are checked by them
            yield step
        prompt = await self.run.first_prompt()
        self.state.first_prompt_chars = len(prompt)  # what the auto strategy prices a prompt's tokens by
        made = await self.drafter.first(self.run, prompt)
        self.state.iterations.append(made.iteration)
        for step in self._drafted(made):
            yield step
        if self.run.verify_every_draft or not self.task.has_verifier:  # without one: an echo is failed
            await self.run.verify(0)
        while not self.state.stopped:
            async for step in self._round():
                yield step

    async def _round(self) -> AsyncIterator[Step]:
        """Critique the current draft, decide, and refine it until a refinement is accepted."""
        state, t = self.state, self.state.current
        early = self.stops.before_round(t)
        if early is not None:
            yield state.decided(early)
            return
        feedback = await self._feedback(t)
        state.iterations[t].feedback = feedback
        for call in state.log.drain():
            yield CallStep(call=call)
        yield FeedbackStep(iteration=t, feedback=feedback)
        decision = state.decided(self.stops.after(t, feedback))
        yield decision
        if not decision.stop:
            async for step in self._refine(t):
                yield step

    async def _refine(self, t: int) -> AsyncIterator[Step]:
        """Refine draft t until a refinement is accepted or a stop rule holds."""
        state = self.state
        form = FORMS.get(self.settings.refine_form)
        if form is not None:  # one failed check's repair at a time, in the form's prompt (focused.py)
            targets = await repair_targets(self.run, t)
            if targets:
                async for step in FocusedRound(self.run, self.stops, t, self._drafted, form).steps(targets):
                    yield step
                return
        while not state.stopped:
            n = len(state.iterations)
            made = await self.drafter.refinement(self.run, n, await self.run.refine_prompt())
            if isinstance(made, Stop):
                yield state.decided(self.stops.decision(state.current, made))
                return
            it = made.iteration
            state.iterations.append(it)
            verdict = await self.drafter.accept(self.run, state.iterations[t], it)  # before it is shown
            if verdict.rejected:
                it.accepted, it.feedback = False, verifier_feedback(self.run.board.of_iteration(n))
            for step in self._drafted(made):
                yield step
            if not verdict.rejected:
                if verdict.stops:
                    yield state.decided(self.stops.no_change(n))
                else:
                    state.accepted(t, n)
                return
            yield FeedbackStep(iteration=n, feedback=it.feedback)
            state.rejected(t, n)
            decision = state.decided(self.stops.after(n, None))
            yield decision.model_copy(update={"detail": rejection_detail(f"rejected: {verdict.rejected}", t, decision)})

    def _drafted(self, made: Drafted) -> list[Step]:
        it = made.iteration
        self.run.board.publish([it])  # the step shows the scores as they stand
        step = DraftStep(
            iteration=it.index,
            draft=it.draft,
            call=made.call,
            candidates=it.candidates,
            accepted=it.accepted,
            focus=it.focus,
        )
        return [*(CallStep(call=c) for c in self.state.log.drain()), step]

    # -- feedback --------------------------------------------------------------------------

    async def _feedback(self, t: int) -> Feedback:
        """Draft t's feedback per the feedback and verifier modes, as the drafter shows it to
        the refinement (a critique the drafter already made is reused)."""
        settings, run = self.settings, self.run
        if settings.feedback_mode == "generic":
            return Feedback(text=self.task.declared.defaults.generic_feedback, source="generic")
        if settings.feedback_mode == "none":
            return Feedback(text="", source="none")
        verifier = settings.verifier_mode
        # a task without a verifier is checked too: its echo of the request fails (incomplete.py)
        check = await run.verify(t) if verifier != "self" or not self.task.has_verifier else None
        if verifier == "verifier":
            if check is None:  # checks of the run's own, and none applies (none was derived)
                return Feedback(text="no check applies to this draft", done=True, source="verifier")
            own = Feedback(text=check.text, done=check.passed, total=check.score, source="verifier", verification=check)
            return self.drafter.feedback(run, t, own)
        known = self.drafter.known_critique(run, t)
        critique = known if known is not None else await run.critique(t)
        if check is not None:
            it = self.state.iterations[t]
            critique = self.task.combine(critique, check, input=self.state.input, draft=it.draft)
        return self.drafter.feedback(run, t, critique)

    # -- result ----------------------------------------------------------------------------

    async def result(self, stop: StopReason, error: str | None) -> RunResult:
        state = self.state
        await self.drafter.finish(self.run)
        if self.settings.select == "verified" and self.settings.judge.on:
            await self._judge_returnable()
        self.run.board.publish(state.iterations)  # each record receives its final verification
        selected = select_index(state.iterations, self.settings.select)
        output = state.iterations[selected].draft if selected is not None else None
        metric = answer = metric_error = answer_error = None
        if selected is not None and output is not None:
            (metric, metric_error), (answer, answer_error) = await asyncio.to_thread(self._score_output, output)
            metric = output_metric(metric, state.iterations[selected].finish_reason)
        models = {role: self.backends[role].name for role in MODEL_ROLES}
        files = {r: i for r in MODEL_ROLES if (i := self.backends[r].model_info()) is not None}
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
            checks=state.checks.records(),
            checks_dropped=state.checks.dropped,
            parsed=await self._parsed(output),
            fails=await self._fails(output, selected),
        )

    async def _fails(self, output: str | None, selected: int | None) -> list[FailedCheck] | None:
        """The checks the output still fails; a check that cannot finish (its budget spent, a
        backend's judge) leaves it unsaid (None) rather than losing the finished run."""
        finish = self.state.iterations[selected].finish_reason if selected is not None else None
        try:
            return await output_fails(self.run, output, finish)
        except (BudgetExceeded, BackendError):
            return None

    async def _parsed(self, output: str | None) -> Any:
        """The output's JSON value under the run's schema (None: no schema, or it does not validate)."""
        schema = self.settings.checks.schema
        return await asyncio.to_thread(schema.parsed, output) if schema is not None and output is not None else None

    async def _judge_returnable(self) -> None:
        """The judge on the returnable drafts the code checks tie at the top (distinct texts),
        so ``select="verified"`` returns the judge's best among them; a failing judge call
        leaves the drafts as ranked so far (the finished run is kept)."""
        board = self.run.board
        accepted = [it for it in self.state.iterations if it.accepted]
        top = max(score(board.of_iteration(it.index)) for it in accepted) if accepted else None
        tied = [it.index for it in accepted if score(board.of_iteration(it.index)) == top]
        if len({normal_text(self.state.iterations[t].draft) for t in tied}) < 2:
            return
        try:
            await judge_iterations(self.run, tied)
        except (BudgetExceeded, BackendError):
            pass

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
