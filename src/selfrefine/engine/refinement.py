"""One run of the loop: generate → feedback → stop? → refine → feedback → …

A :class:`Refinement` owns one run's state (the drafts, the transcript the prompts show,
the calls) and its steps; :class:`~.loop.SelfRefine` makes one per input and streams its
steps. The calls go through :class:`~.calls.Caller`; which draft is returned and whether a
refinement is rejected are pure functions (:mod:`.selection`).

- an unparsable draft or feedback is re-requested at that step only (resampled with a new
  seed), never by restarting the example; after the retries the raw text is kept and the
  feedback carries ``parse_error``;
- a fatal backend error or an exhausted budget ends the run with the drafts so far kept.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

from ..backends.base import Backend, CompletionRequest
from ..core.errors import BackendError, ParseError, SandboxUnavailableError, error_text
from ..core.records import (
    ROLES,
    CallRecord,
    CallStep,
    Candidate,
    DecisionStep,
    DraftStep,
    Feedback,
    FeedbackStep,
    Iteration,
    ResultStep,
    Role,
    RunResult,
    Step,
    StopReason,
    Usage,
    Verification,
)
from ..core.stoprule import stop_hit
from .calls import BudgetExceeded, Caller, CallLog
from .candidates import Pool
from .incomplete import output_metric
from .sampled import SampledSteps, chosen, same_text
from .selection import rejection, rejection_detail, select_index
from .settings import Settings
from .strategy import START_WIDTH, RoundOutcome
from .task import Task

T = TypeVar("T")


class Refinement(SampledSteps):
    """One input's run: its state and its steps."""

    def __init__(
        self, task: Task, settings: Settings, backends: dict[str, Backend], input: str, reference: Any = None
    ) -> None:
        self.task, self.settings, self.config = task, settings, settings.config
        self.backends = backends
        self.input, self.reference = input, reference
        self.log = CallLog()
        self.caller = Caller(settings.config, backends, self.log)
        self.iterations: list[Iteration] = []
        self.current = 0  # index of the draft the next refinement starts from
        # the (draft, feedback) pairs the prompts show before the current draft, in the order
        # they were shown: earlier current drafts and rejected refinements (prefix-stable)
        self.transcript: list[int] = []
        self.verified: set[int] = set()  # drafts whose verify() already ran
        self.stopped = False
        self.pool = Pool(votes=settings.votes)  # every sample, when a step samples several
        self.width = START_WIDTH if self.config.strategy == "auto" else self.config.samples
        self.outcome: RoundOutcome | None = None  # what the verifier saw in the last sampled round
        self.planned: tuple[int, str] | None = None  # the auto strategy's width for the round begun

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
        for call in self.log.drain():
            yield CallStep(call=call)
        yield ResultStep(result=await self.result(stop, error))

    async def _steps(self) -> AsyncIterator[Step]:
        async for step in self._first_draft():
            yield step
        while not self.stopped:
            async for step in self._round():
                yield step

    async def _first_draft(self) -> AsyncIterator[Step]:
        prompt = self.task.render("generate", self.input)
        if self.settings.sampling:
            it = await self._sampled("generate", 0, prompt, self.width)
            self.iterations.append(it)
            for step in self._drafted(0, it.draft, chosen(it).call, it.candidates):
                yield step
            return
        draft, call = await self._draft("generate", 0, prompt)
        self.iterations.append(Iteration(index=0, draft=draft, finish_reason=call.finish_reason))
        for step in self._drafted(0, draft, call):
            yield step
        if self.settings.verify_every_draft:
            await self._verify(0)

    async def _round(self) -> AsyncIterator[Step]:
        """Critique the current draft, decide, and refine it until a refinement is accepted."""
        t = self.current
        if self._final_feedback_wasted():
            yield self._stop(self._skip_final_feedback(t))
            return
        satisfied = self._satisfied(t)
        if satisfied is not None:
            yield self._stop(satisfied)
            return
        if self.config.strategy == "auto":  # a round the budget cannot pay for starts no critique
            self.planned = self._next_width(critique=True)
            if self.planned[0] == 0:
                yield self._stop(
                    DecisionStep(iteration=t, stop=True, reason=StopReason.TOKEN_BUDGET, detail=self.planned[1])
                )
                return
        feedback = await self._feedback(t)
        self.iterations[t].feedback = feedback
        for call in self.log.drain():
            yield CallStep(call=call)
        yield FeedbackStep(iteration=t, feedback=feedback)
        decision = self._stop(self._decide(t, feedback))
        yield decision
        if not decision.stop:
            async for step in self._refine_sampled(t) if self.settings.sampling else self._refine(t):
                yield step

    async def _refine(self, t: int) -> AsyncIterator[Step]:
        """Refine draft t until a refinement is accepted or a stop rule holds."""
        while True:
            n = len(self.iterations)
            draft, call = await self._draft("refine", n, self._refine_prompt())
            self.iterations.append(Iteration(index=n, draft=draft, finish_reason=call.finish_reason))
            rejected = await self._rejected(t, n)  # before the draft is shown, so it shows as rejected
            for step in self._drafted(n, draft, call, accepted=not rejected):
                yield step
            if rejected:
                yield FeedbackStep(iteration=n, feedback=self.iterations[n].feedback)
            unchanged = same_text(draft, self.iterations[t].draft)
            if self.config.stop_on_no_change and unchanged and not rejected:
                yield self._stop(
                    DecisionStep(
                        iteration=n, stop=True, reason=StopReason.NO_CHANGE, detail="the refinement changed nothing"
                    )
                )
                return
            if not rejected:
                self.transcript.append(t)
                self.current = n
                return
            # the next prompt shows the refined draft, then the rejected attempt and its
            # findings, then the refined draft again as the current one
            self.transcript += [t, n]
            decision = self._stop(self._decide(n, None))
            yield decision.model_copy(update={"detail": rejection_detail(rejected, t, decision)})
            if decision.stop:
                return

    def _drafted(
        self,
        t: int,
        draft: str,
        call: CallRecord | None,
        candidates: list[Candidate] | None = None,
        accepted: bool = True,
    ) -> list[Step]:
        step = DraftStep(iteration=t, draft=draft, call=call, candidates=candidates or [], accepted=accepted)
        return [*(CallStep(call=c) for c in self.log.drain()), step]

    async def _rejected(self, t: int, n: int) -> str:
        """Why refinement n of draft t is rejected ("" when it is not); a rejected one gets
        the verifier's findings as its feedback (no critic call)."""
        if not self.settings.verify_every_draft:
            return ""
        check = await self._verify(n)
        refined, it = self.iterations[t], self.iterations[n]
        unchanged = same_text(it.draft, refined.draft)
        why = rejection(self.config.accept, unchanged, self.settings.refine_samples, check, refined.verification)
        if why is None:
            return ""
        it.accepted = False
        it.feedback = Feedback(text=check.text if check is not None else "", source="verifier", verification=check)
        return f"rejected: {why}"

    def _stop(self, decision: DecisionStep) -> DecisionStep:
        self.stopped = self.stopped or decision.stop
        return decision

    # -- decisions -------------------------------------------------------------------------

    def _decide(self, t: int, feedback: Feedback | None) -> DecisionStep:
        """Stop or refine after draft t. ``feedback`` None: t is a rejected refinement, whose
        findings stop nothing; only the refinement cap and the budgets apply."""
        reason = self._feedback_stop(feedback) if feedback is not None else None
        if reason is None and len(self.iterations) - 1 >= self.settings.max_iterations:
            reason = (StopReason.MAX_ITERATIONS, f"reached {self.settings.max_iterations} refinement(s)")
        reason = reason or self.caller.budget_spent()
        if reason is not None:
            return DecisionStep(iteration=t, stop=True, reason=reason[0], detail=reason[1])
        return DecisionStep(iteration=t, stop=False, detail="refine")

    def _feedback_stop(self, feedback: Feedback) -> tuple[StopReason, str] | None:
        """The stop the feedback itself asks for: its done signal, a stop phrase, a score."""
        cfg = self.config
        if cfg.stop_on_feedback and feedback.done:
            return StopReason.FEEDBACK, "the feedback says the draft is done"
        hit = stop_hit(feedback.text, cfg.stop_contains, cfg.stop_matches)
        if hit is not None:
            return StopReason.FEEDBACK, f"the feedback {hit}"
        threshold = self.settings.score_threshold
        if threshold is not None and feedback.total is not None and feedback.total >= threshold:
            return StopReason.SCORE, f"score {feedback.total:g} >= {threshold:g}"
        return None

    def _final_feedback_wasted(self) -> bool:
        """Whether the next critique can change neither the returned draft nor when the run
        stops: at the refinement cap the run stops whatever the critique says (on the default
        model it was 70 s of a 241 s run), and the returned draft ignores it under select
        "last", and under "verified" unless another draft ties with it on the verifier (the
        critic's score breaks that tie; a gsm8k best-of-5 paid ~250 tokens for nothing)."""
        cfg = self.config
        if not self._at_cap(len(self.iterations) - 1) or cfg.feedback_mode != "actionable" or cfg.final_feedback:
            return False
        select = self.settings.select
        return select == "last" or (select == "verified" and not self._tied_on_verifier(self.current))

    def _at_cap(self, refinements: int) -> bool:
        return refinements >= self.settings.max_iterations

    def _tied_on_verifier(self, t: int) -> bool:
        """Whether another returnable draft has draft t's verifier score."""
        mine = self.iterations[t].verification
        return mine is None or any(
            it.index != t and it.accepted and it.verification is not None and it.verification.score == mine.score
            for it in self.iterations
        )

    def _skip_final_feedback(self, t: int) -> DecisionStep:
        """The stop _decide would give at the cap, without the critique it would have read."""
        detail = (
            f"reached {self.settings.max_iterations} refinement(s); the last draft's critique is skipped "
            "(it cannot change the result; final_feedback asks for it)"
        )
        return DecisionStep(iteration=t, stop=True, reason=StopReason.MAX_ITERATIONS, detail=detail)

    def _final_decision(self, reason: StopReason, detail: str) -> DecisionStep:
        t = self.iterations[-1].index if self.iterations else 0
        return DecisionStep(iteration=t, stop=True, reason=reason, detail=detail)

    # -- prompts ---------------------------------------------------------------------------

    def _history(self, transcript: list[int] | None = None) -> list[dict[str, str]]:
        """The {draft, feedback} pairs shown before the current draft, per the history policy.

        Without rejected refinements these are drafts 0..t-1; a rejected refinement adds the
        draft it refined and itself (with the verifier's findings), in the order shown, so
        each refine prompt extends the previous one."""
        policy, transcript = self.settings.history, self.transcript if transcript is None else transcript
        if policy == "none" or not transcript:
            return []
        shown = transcript if policy == "full" else transcript[-1:]
        earlier = [self.iterations[i] for i in shown]
        return [{"draft": it.draft, "feedback": it.feedback.text if it.feedback else ""} for it in earlier]

    def _refine_prompt(self) -> str:
        t = self.current
        current = self.iterations[t]
        role = "refine"
        if self.config.feedback_mode == "none" and "refine_nofeedback" in self.task.templates:
            role = "refine_nofeedback"
        feedback = current.feedback.text if current.feedback else ""
        return self.task.render(
            role, self.input, draft=current.draft, feedback=feedback, history=self._history(), iteration=t
        )

    # -- calls -----------------------------------------------------------------------------

    async def _draft(self, role: Role, t: int, prompt: str) -> tuple[str, CallRecord]:
        """A parsed draft; after the parse retries, the raw reply, or when that is empty the
        draft being refined (an empty refinement then counts as unchanged: "no change")."""
        reseed = self._rejections() if role == "refine" else 0
        draft, call, error = await self._parsed_call(role, t, prompt, None, self.task.parse_draft, reseed, stream=True)
        if error is None:
            return draft, call
        return _raw(call) or (self.iterations[self.current].draft if self.iterations else ""), call

    def _rejections(self) -> int:
        """Refinements rejected so far: each later refine call is seeded that much further on,
        so a sampled retry of the same draft is a new sample (0 keeps the paper's seeds)."""
        return sum(not it.accepted for it in self.iterations)

    async def _feedback(self, t: int) -> Feedback:
        mode, verifier = self.config.feedback_mode, self.config.verifier_mode
        if mode == "generic":
            return Feedback(text=self.task.generic_feedback, source="generic")
        if mode == "none":
            return Feedback(text="", source="none")
        check = await self._verify(t) if verifier != "self" else None
        if verifier == "verifier":
            assert check is not None
            return Feedback(
                text=check.text, done=check.passed, total=check.score, source="verifier", verification=check
            )
        chosen = next((c for c in self.iterations[t].candidates if c.chosen), None)
        critique = chosen.feedback if chosen is not None and chosen.feedback is not None else await self._critique(t)
        if check is None:
            return critique
        return self.task.combine(critique, check, input=self.input, draft=self.iterations[t].draft)

    async def _verify(self, t: int) -> Verification | None:
        """The task's check of draft t: computed once (in a thread) and kept on the record."""
        it = self.iterations[t]
        if t not in self.verified:
            it.verification = await self._checked(it.draft, it.finish_reason)
            self.verified.add(t)
        return it.verification

    async def _critique(self, t: int, draft: str | None = None, transcript: list[int] | None = None) -> Feedback:
        """The critic on draft t (or on ``draft``, a sample for step t, with the transcript the
        prompt will have once it is step t's draft: its critique is then reused as is).
        A sample's critique is not streamed: it may never be the step's feedback."""
        own = draft is None
        draft = self.iterations[t].draft if draft is None else draft
        history = self._history(transcript)
        prompt = self.task.render("feedback", self.input, draft=draft, history=history, iteration=t)
        schema = self.task.feedback_schema if self.config.constrained else None

        def parse(text: str) -> Feedback:
            return self.task.parse_feedback(text, input=self.input, draft=draft)

        feedback, call, error = await self._parsed_call("feedback", t, prompt, schema, parse, stream=own)
        if error is None:
            return feedback
        raw = _raw(call)
        return Feedback(text=raw, done=self.task.says_done(raw), parse_error=error)

    async def _parsed_call(
        self,
        role: Role,
        t: int,
        prompt: str,
        schema: dict[str, Any] | None,
        parse: Callable[[str], T],
        reseed: int = 0,
        *,
        stream: bool = False,
    ) -> tuple[Any, CallRecord, str | None]:
        """Call, parse; on a parse error re-ask this step only. Returns (value, call, error);
        ``stream``: each attempt's reply goes to the caller's sink as it is written."""
        error = None
        for attempt in range(1, self.config.parse_retries + 2):
            request = self._request(role, prompt, schema, attempt, reseed)
            [(response, call)] = await self.caller.call(role, t, request, stream=stream)
            try:
                return parse(response.text), call, None
            except ParseError as exc:
                error = str(exc)
                self.log.failed(call, f"parse: {error}")  # an unusable reply is a failed attempt
        return None, call, error

    def _request(
        self, role: Role, prompt: str, schema: dict[str, Any] | None, attempt: int, reseed: int = 0
    ) -> CompletionRequest:
        cfg, settings = self.config, self.settings
        temperature = settings.temperature[role]
        seed = cfg.seed if not reseed else (cfg.seed or 0) + reseed
        if attempt > 1:  # a parse retry must resample, or a deterministic model repeats itself
            temperature = max(temperature, 0.7)
            seed = (seed or 0) + attempt - 1
        return CompletionRequest(
            role=role,
            prompt=prompt,
            system=self.task.system,
            max_tokens=settings.max_tokens[role],
            temperature=temperature,
            seed=seed,
            stop=settings.stop[role],
            json_schema=schema,
        )

    # -- result ----------------------------------------------------------------------------

    async def result(self, stop: StopReason, error: str | None) -> RunResult:
        self.pool.rescore(self.iterations)  # the final votes decide among the drafts
        selected = select_index(self.iterations, self.settings.select)
        output = self.iterations[selected].draft if selected is not None else None
        metric = answer = metric_error = answer_error = None
        if selected is not None and output is not None:
            (metric, metric_error), (answer, answer_error) = await asyncio.to_thread(self._score_output, output)
            metric = output_metric(metric, self.iterations[selected].finish_reason)
        models = {role: self.backends[role].name for role in ROLES}
        files = {r: i for r in ROLES if (i := self.backends[r].model_info()) is not None}
        return RunResult(
            task=self.task.name,
            input=self.input,
            iterations=self.iterations,
            output=output,
            selected=selected,
            stop_reason=stop,
            error=error,
            calls=self.log.calls,
            usage=Usage.of(self.log.calls),
            config=self.settings.run_config(models, files),
            metric=metric,
            metric_error=metric_error,
            answer=answer,
            answer_error=answer_error,
        )

    def _score_output(self, output: str) -> tuple[tuple[Any, str | None], tuple[Any, str | None]]:
        """(metric, its error), (answer, its error): a broken hook must not lose the finished
        run, and its error is kept in the result instead of a bare None."""
        return _hook(self.task.metric, self.input, output, self.reference), _hook(self.task.answer, output)


def _hook(fn: Callable[..., Any], *args: Any) -> tuple[Any, str | None]:
    try:
        return fn(*args), None
    except SandboxUnavailableError:
        raise  # this machine cannot run model code at all: say so, not metric=None
    except Exception as exc:
        return None, error_text(exc)


def _raw(call: CallRecord) -> str:
    return (call.response or "").strip()
