"""The Self-Refine loop: generate → feedback → stop? → refine → feedback → …

The core is async and backend-agnostic and is exposed as a stream of typed steps
(:mod:`selfrefine.core.records`); :meth:`SelfRefine.run` is the sync convenience wrapper.

Robustness rules implemented here:
- transient backend errors are retried with exponential backoff and never reach a prompt;
- an unparsable draft or feedback is re-requested at that step only (resampled with a new
  seed), never by restarting the example; after the retries the raw text is kept and the
  feedback carries ``parse_error``;
- a fatal backend error or an exhausted budget ends the run with the drafts so far kept.
"""

from __future__ import annotations

import asyncio
import atexit
import random
import threading
import time
import weakref
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..backends.base import Backend, CompletionRequest, CompletionResponse
from ..backends.registry import get_backend
from ..core.config import DEFAULT_MAX_ITERATIONS, RefineConfig
from ..core.errors import (
    BackendError,
    ConfigError,
    ParseError,
    SandboxUnavailableError,
    TransientBackendError,
    error_text,
)
from ..core.records import (
    ROLES,
    CallRecord,
    CallStep,
    DecisionStep,
    DraftStep,
    Feedback,
    FeedbackStep,
    Iteration,
    ResultStep,
    Role,
    RunConfig,
    RunResult,
    Step,
    StopReason,
    Usage,
    Verification,
)
from .plugins import find_task
from .selection import score_text, select_index, worse
from .spec import BackendPool, EngineSpec, Wrap
from .task import Task

T = TypeVar("T")


class _BudgetExceeded(Exception):
    def __init__(self, reason: StopReason, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


@dataclass
class _Run:
    input: str
    reference: Any
    started: float = field(default_factory=time.monotonic)
    iterations: list[Iteration] = field(default_factory=list)
    calls: list[CallRecord] = field(default_factory=list)
    unreported: list[CallRecord] = field(default_factory=list)  # failed calls not yet streamed
    current: int = 0  # index of the draft the next refinement starts from
    # the (draft, feedback) pairs the prompts show before the current draft, in the order
    # they were shown: earlier current drafts and rejected refinements (prefix-stable)
    transcript: list[int] = field(default_factory=list)
    verified: set[int] = field(default_factory=set)  # drafts whose verify() already ran

    def rejected(self) -> int:
        """Refinements rejected so far: each later refine call is seeded that much further on,
        so a sampled retry of the same draft is a new sample (0 keeps the paper's seeds)."""
        return sum(not it.accepted for it in self.iterations)

    def tokens(self) -> int:
        return sum(c.prompt_tokens + c.completion_tokens for c in self.calls)

    def elapsed(self) -> float:
        return time.monotonic() - self.started


class SelfRefine:
    """One task on one or more backends. Reusable across inputs; close it when done.

    ``model`` serves every role unless ``feedback_model``/``refine_model`` name a different
    backend for that role (e.g. a cheap critic and a larger refiner).
    """

    def __init__(
        self,
        task: Task | str,
        model: Backend | str | None = None,
        *,
        feedback_model: Backend | str | None = None,
        refine_model: Backend | str | None = None,
        config: RefineConfig | None = None,
        wrap: Wrap | None = None,
        **options: Any,
    ) -> None:
        self.task = find_task(task)
        if config is not None and options:
            raise ConfigError("pass either config= or keyword options, not both")
        self.config = config or RefineConfig.build(**options)
        if not self.task.has_verifier:
            if self.config.verifier_mode != "self":
                raise ConfigError(
                    f"task {self.task.name!r} has no verifier; use verifier_mode 'self' "
                    "or a task that checks itself"
                )
            if self.select == "verified":
                raise ConfigError(
                    f"task {self.task.name!r} has no verifier, so select 'verified' cannot rank "
                    "its drafts; use select 'last' or 'best', or a task that checks itself"
                )
            if self.config.accept != "any":
                raise ConfigError(
                    f"task {self.task.name!r} has no verifier, so accept 'not_worse' cannot "
                    "compare drafts; use accept 'any' or a task that checks itself"
                )
        base = get_backend(model)
        self.backends: dict[str, Backend] = {
            "generate": base,
            "feedback": get_backend(feedback_model) if feedback_model is not None else base,
            "refine": get_backend(refine_model) if refine_model is not None else base,
        }
        if wrap is not None:  # each distinct backend wrapped once, so shared roles stay shared
            wrapped = {id(b): wrap(b) for b in self.distinct_backends()}
            self.backends = {role: wrapped[id(b)] for role, b in self.backends.items()}

    @classmethod
    def from_spec(cls, spec: EngineSpec, *, pool: BackendPool | None = None, wrap: Wrap | None = None) -> SelfRefine:
        """The engine an :class:`EngineSpec` describes: the one way ``run``, ``eval``, ``serve``
        and Ray build theirs. With a ``pool``, backends are shared with the pool's other
        engines (and wrapped by the pool's ``wrap``)."""
        if pool is not None and wrap is not None:
            raise ConfigError("pass wrap to the BackendPool, which wraps each backend it opens once")
        pool = pool or BackendPool(wrap)
        models = spec.role_models()
        return cls(
            spec.task,
            pool.get(models["generate"]),
            feedback_model=pool.get(models["feedback"]),
            refine_model=pool.get(models["refine"]),
            config=spec.config,
        )

    # -- public API ----------------------------------------------------------------------

    @property
    def max_iterations(self) -> int:
        if self.config.max_iterations is not None:
            return self.config.max_iterations
        return self.task.max_iterations if self.task.max_iterations is not None else DEFAULT_MAX_ITERATIONS

    @property
    def history(self) -> str:
        return self.config.history or self.task.default_history

    @property
    def select(self) -> str:
        return self.config.select or self.task.default_select

    async def arun(self, input: str, reference: Any = None) -> RunResult:
        result = None
        async for step in self.astream(input, reference):
            if isinstance(step, ResultStep):
                result = step.result
        assert result is not None
        return result

    def run(self, input: str, reference: Any = None) -> RunResult:
        """Sync wrapper around :meth:`arun` (not usable inside a running event loop)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return _thread_runner().run(self.arun(input, reference))
        raise ConfigError("SelfRefine.run() was called inside an event loop; use `await arun()`")

    async def astream(self, input: str, reference: Any = None) -> AsyncIterator[Step]:
        """Run the loop, yielding each draft, feedback and decision as it happens."""
        text = self.task.prepare_input(input)
        run = _Run(input=text, reference=reference)
        stop, error = StopReason.ERROR, None
        try:
            async for step in self._steps(run):
                if isinstance(step, DecisionStep) and step.stop:
                    stop = step.reason or StopReason.MAX_ITERATIONS
                yield step
        except _BudgetExceeded as exc:
            stop = exc.reason
            yield from_decision(run, stop, str(exc))
        except BackendError as exc:
            stop, error = StopReason.ERROR, str(exc)
            yield from_decision(run, stop, error)
        for call in _drain(run):
            yield CallStep(call=call)
        yield ResultStep(result=await self._result(run, stop, error))

    def distinct_backends(self) -> list[Backend]:
        """Each backend once, however many roles share it."""
        return list({id(b): b for b in self.backends.values()}.values())

    async def aclose(self) -> None:
        for backend in self.distinct_backends():
            await backend.aclose()

    def close(self) -> None:
        asyncio.run(self.aclose())

    # -- the loop --------------------------------------------------------------------------

    async def _steps(self, run: _Run) -> AsyncIterator[Step]:
        prompt = self.task.render("generate", run.input)
        draft, call = await self._draft(run, "generate", 0, prompt)
        run.iterations.append(Iteration(index=0, draft=draft))
        for c in _drain(run):
            yield CallStep(call=c)
        yield DraftStep(iteration=0, draft=draft, call=call)
        if self._verify_every_draft:
            await self._verify(run, 0)
        while True:
            t = run.current
            if self._final_feedback_wasted(run):
                yield self._skip_final_feedback(run, t)
                return
            feedback = await self._feedback(run, t)
            run.iterations[t].feedback = feedback
            for c in _drain(run):
                yield CallStep(call=c)
            yield FeedbackStep(iteration=t, feedback=feedback)
            decision = self._decide(run, t, feedback)
            yield decision
            if decision.stop:
                return
            while True:  # refine draft t until a refinement is accepted or a stop rule holds
                refined = run.iterations[t]
                n = len(run.iterations)
                draft, call = await self._draft(run, "refine", n, self._refine_prompt(run))
                it = Iteration(index=n, draft=draft)
                run.iterations.append(it)
                for c in _drain(run):
                    yield CallStep(call=c)
                yield DraftStep(iteration=n, draft=draft, call=call)
                rejected = ""
                unchanged = _same(draft, refined.draft)
                if self._verify_every_draft:
                    check = await self._verify(run, n)
                    # a sampled echo is a failed attempt too: the draft is refined again, seeded
                    # anew, rather than ending the run (greedy, the retry would repeat it)
                    echo = unchanged and self._refine_samples
                    if self.config.accept == "not_worse" and (echo or worse(check, refined.verification)):
                        why = "the refinement changed nothing" if unchanged else (
                            f"verifier score fell {score_text(refined.verification)} → {score_text(check)}"
                        )
                        rejected = f"rejected: {why}; draft {t} is refined again"
                        it.accepted = False
                        # the verifier's findings are its feedback: no critic call
                        it.feedback = Feedback(
                            text=check.text if check is not None else "", source="verifier", verification=check
                        )
                        yield FeedbackStep(iteration=n, feedback=it.feedback)
                if self.config.stop_on_no_change and unchanged and not rejected:
                    detail = "the refinement changed nothing"
                    yield DecisionStep(iteration=n, stop=True, reason=StopReason.NO_CHANGE, detail=detail)
                    return
                if not rejected:
                    run.transcript.append(t)
                    run.current = n
                    break
                # the next prompt shows the refined draft, then the rejected attempt and its
                # findings, then the refined draft again as the current one
                run.transcript += [t, n]
                decision = self._decide(run, n, None)
                if decision.stop:
                    yield decision.model_copy(update={"detail": f"{rejected}; {decision.detail}"})
                    return
                yield decision.model_copy(update={"detail": rejected})

    def _decide(self, run: _Run, t: int, feedback: Feedback | None) -> DecisionStep:
        """Stop or refine after draft t. ``feedback`` None: t is a rejected refinement, whose
        findings stop nothing; only the refinement cap and the budgets apply."""
        cfg = self.config

        def stop(reason: StopReason, detail: str) -> DecisionStep:
            return DecisionStep(iteration=t, stop=True, reason=reason, detail=detail)

        attempted = len(run.iterations) - 1  # refinements attempted, rejected ones included
        if feedback is None:
            pass
        elif cfg.stop_on_feedback and feedback.done:
            return stop(StopReason.FEEDBACK, "the feedback says the draft is done")
        else:
            low = feedback.text.lower()
            hit = next((s for s in cfg.stop_contains if s and s.lower() in low), None)
            if hit is not None:
                return stop(StopReason.FEEDBACK, f"the feedback contains {hit!r}")
            threshold = cfg.score_threshold if cfg.score_threshold is not None else self.task.score_threshold
            if threshold is not None and feedback.total is not None and feedback.total >= threshold:
                return stop(StopReason.SCORE, f"score {feedback.total:g} >= {threshold:g}")
        if attempted >= self.max_iterations:
            return stop(StopReason.MAX_ITERATIONS, f"reached {self.max_iterations} refinement(s)")
        spent = self._budget_spent(run)
        if spent is not None:
            return stop(*spent)
        return DecisionStep(iteration=t, stop=False, detail="refine")

    def _final_feedback_wasted(self, run: _Run) -> bool:
        """Whether the next critique can change neither the returned draft nor when the run
        stops: select "last" ignores scores, and at the refinement cap the run stops whatever
        the critique says (on the default model it was 70 s of a 241 s run)."""
        cfg = self.config
        at_cap = len(run.iterations) - 1 >= self.max_iterations
        return at_cap and self.select == "last" and cfg.feedback_mode == "actionable" and not cfg.final_feedback

    def _skip_final_feedback(self, run: _Run, t: int) -> DecisionStep:
        """The stop _decide would give at the cap, without the critique it would have read."""
        detail = (f"reached {self.max_iterations} refinement(s); the last draft's critique is skipped "
                  "(it cannot change the result; final_feedback asks for it)")
        return DecisionStep(iteration=t, stop=True, reason=StopReason.MAX_ITERATIONS, detail=detail)

    # -- prompts ---------------------------------------------------------------------------

    def _history(self, run: _Run) -> list[dict[str, str]]:
        """The {draft, feedback} pairs shown before the current draft, per the history policy.

        Without rejected refinements these are drafts 0..t-1; a rejected refinement adds the
        draft it refined and itself (with the verifier's findings), in the order shown, so
        each refine prompt extends the previous one."""
        policy = self.history
        if policy == "none" or not run.transcript:
            return []
        shown = run.transcript if policy == "full" else run.transcript[-1:]
        earlier = [run.iterations[i] for i in shown]
        return [{"draft": it.draft, "feedback": it.feedback.text if it.feedback else ""} for it in earlier]

    def _refine_prompt(self, run: _Run) -> str:
        t = run.current
        current = run.iterations[t]
        role = "refine"
        if self.config.feedback_mode == "none" and "refine_nofeedback" in self.task.templates:
            role = "refine_nofeedback"
        return self.task.render(
            role,
            run.input,
            draft=current.draft,
            feedback=current.feedback.text if current.feedback else "",
            history=self._history(run),
            iteration=t,
        )

    # -- calls -----------------------------------------------------------------------------

    async def _draft(self, run: _Run, role: Role, t: int, prompt: str) -> tuple[str, CallRecord]:
        """A parsed draft; after the parse retries, the raw reply, or when that is empty the
        draft being refined (an empty refinement then counts as unchanged: "no change")."""
        reseed = run.rejected() if role == "refine" else 0
        draft, call, error = await self._parsed_call(run, role, t, prompt, None, self.task.parse_draft, reseed)
        if error is None:
            return draft, call
        return _raw(call) or (run.iterations[run.current].draft if run.iterations else ""), call

    async def _feedback(self, run: _Run, t: int) -> Feedback:
        mode = self.config.feedback_mode
        if mode == "generic":
            return Feedback(text=self.task.generic_feedback, source="generic")
        if mode == "none":
            return Feedback(text="", source="none")
        verifier = self.config.verifier_mode
        check = None
        if verifier != "self":
            check = await self._verify(run, t)
        if verifier == "verifier":
            assert check is not None
            return Feedback(text=check.text, done=check.passed, total=check.score, source="verifier", verification=check)
        critique = await self._critique(run, t)
        if check is None:
            return critique
        return self.task.combine(critique, check, input=run.input, draft=run.iterations[t].draft)

    def _temperature(self, role: Role) -> float:
        """The role's sampling temperature: the run's override, else the task's default."""
        cfg = self.config
        return cfg.temperature if cfg.temperature is not None else self.task.temperature[role]

    @property
    def _refine_samples(self) -> bool:
        """Whether the refiner samples (temperature > 0), so a new seed gives a new reply."""
        return self._temperature("refine") > 0

    @property
    def _verify_every_draft(self) -> bool:
        """Whether each draft is verified as it arrives (selection or acceptance need it)."""
        return self.select == "verified" or self.config.accept == "not_worse"

    async def _verify(self, run: _Run, t: int) -> Verification | None:
        """The task's check of draft t: computed once (in a thread) and kept on the record."""
        it = run.iterations[t]
        if t not in run.verified:
            it.verification = await asyncio.to_thread(self.task.verify, run.input, it.draft)
            run.verified.add(t)
        return it.verification

    async def _critique(self, run: _Run, t: int) -> Feedback:
        draft = run.iterations[t].draft
        prompt = self.task.render(
            "feedback", run.input, draft=draft, history=self._history(run), iteration=t
        )
        schema = self.task.feedback_schema if self.config.constrained else None

        def parse(text: str) -> Feedback:
            return self.task.parse_feedback(text, input=run.input, draft=draft)

        feedback, call, error = await self._parsed_call(run, "feedback", t, prompt, schema, parse)
        if error is None:
            return feedback
        raw = _raw(call)
        return Feedback(text=raw, done=self.task.says_done(raw), parse_error=error)

    async def _parsed_call(
        self,
        run: _Run,
        role: Role,
        t: int,
        prompt: str,
        schema: dict[str, Any] | None,
        parse: Callable[[str], T],
        reseed: int = 0,
    ) -> tuple[Any, CallRecord, str | None]:
        """Call, parse; on a parse error re-ask this step only. Returns (value, call, error)."""
        error = None
        for attempt in range(1, self.config.parse_retries + 2):
            request = self._request(role, prompt, schema, attempt, reseed)
            response, call = await self._call(run, role, t, request)
            try:
                return parse(response.text), call, None
            except ParseError as exc:
                error = str(exc)
                call.ok, call.error = False, f"parse: {error}"  # an unusable reply is a failed attempt
                run.unreported.append(call)
        return None, call, error

    def _request(
        self, role: Role, prompt: str, schema: dict[str, Any] | None, attempt: int, reseed: int = 0
    ) -> CompletionRequest:
        cfg, task = self.config, self.task
        temperature = self._temperature(role)
        seed = cfg.seed if not reseed else (cfg.seed or 0) + reseed
        if attempt > 1:  # a parse retry must resample, or a deterministic model repeats itself
            temperature = max(temperature, 0.7)
            seed = (seed or 0) + attempt - 1
        return CompletionRequest(
            role=role,
            prompt=prompt,
            system=task.system,
            max_tokens=cfg.max_tokens or task.max_tokens[role],
            temperature=temperature,
            seed=seed,
            stop=task.stop_sequences[role],
            json_schema=schema,
        )

    async def _call(self, run: _Run, role: Role, t: int, request: CompletionRequest) -> tuple[CompletionResponse, CallRecord]:
        """One logical call with transient-error retries, budgets and accounting."""
        cfg = self.config
        backend = self.backends[role]
        for attempt in range(1, cfg.backend_retries + 2):
            self._check_budgets(run)
            call = CallRecord(role=role, iteration=t, attempt=_next_attempt(run, role, t), model=backend.name)
            if cfg.record_prompts:
                call.prompt = request.prompt
            try:
                response = await self._send(run, backend, request, call)
            except (TransientBackendError, BackendError, _BudgetExceeded) as exc:
                call.ok, call.error = False, str(exc)
                run.calls.append(call)
                run.unreported.append(call)
                if isinstance(exc, TransientBackendError) and attempt <= cfg.backend_retries:
                    await asyncio.sleep(self._backoff(attempt, run))
                    continue
                if isinstance(exc, TransientBackendError):
                    raise BackendError(f"{backend.name} failed {attempt} times; last error: {exc}") from exc
                raise
            call.prompt_tokens, call.completion_tokens = response.prompt_tokens, response.completion_tokens
            call.response, call.cached = response.text, response.cached
            call.cached_prompt_tokens = response.cached_prompt_tokens
            run.calls.append(call)
            return response, call
        raise AssertionError("unreachable")

    async def _send(self, run: _Run, backend: Backend, request: CompletionRequest, call: CallRecord) -> CompletionResponse:
        """One attempt under the backend's concurrency limit; times the wait and the call apart."""
        queued = time.perf_counter()
        async with self._semaphore(backend):
            start = time.perf_counter()
            call.wait_seconds = round(start - queued, 6)
            remaining = None
            if self.config.max_seconds is not None:  # measured after the wait in the queue
                self._check_budgets(run)
                remaining = self.config.max_seconds - run.elapsed()
            try:
                return await asyncio.wait_for(backend.complete(request), remaining)
            except asyncio.TimeoutError:
                if remaining is None:  # the backend's own timeout surfaced as asyncio's
                    raise TransientBackendError(f"{backend.name}: request timed out") from None
                raise _BudgetExceeded(*self._budget_spent(run) or (StopReason.TIME_BUDGET, "time budget ran out")) from None
            finally:
                call.seconds = round(time.perf_counter() - start, 6)

    def _budget_spent(self, run: _Run) -> tuple[StopReason, str] | None:
        """The budget that has run out (the one place both budgets are checked), or None."""
        cfg = self.config
        if cfg.max_total_tokens is not None and run.tokens() >= cfg.max_total_tokens:
            return StopReason.TOKEN_BUDGET, f"token budget used up: {run.tokens()} tokens of {cfg.max_total_tokens}"
        if cfg.max_seconds is not None and run.elapsed() >= cfg.max_seconds:
            return StopReason.TIME_BUDGET, f"time budget ran out: {run.elapsed():.1f}s of {cfg.max_seconds:g}s"
        return None

    def _check_budgets(self, run: _Run) -> None:
        spent = self._budget_spent(run)
        if spent is not None:
            raise _BudgetExceeded(*spent)

    def _backoff(self, attempt: int, run: _Run) -> float:
        cfg = self.config
        delay = min(cfg.retry_max_delay, cfg.retry_base_delay * 2 ** (attempt - 1))
        delay *= random.uniform(0.5, 1.0)  # jitter so concurrent runs do not retry in lockstep
        if cfg.max_seconds is not None:
            delay = max(0.0, min(delay, cfg.max_seconds - run.elapsed()))
        return delay

    def examples_in_flight(self) -> int:
        """How many examples to run at once so no backend idles: each example has at most
        one call in flight, and between calls it parses, scores and renders, so four
        examples per request a backend takes at once keep its queue full."""
        limits = [b.max_concurrency for b in self.distinct_backends()]
        return max(4, 4 * max(limits, default=1))

    def _semaphore(self, backend: Backend) -> asyncio.Semaphore:
        return backend_semaphore(backend)

    # -- result ----------------------------------------------------------------------------

    async def _result(self, run: _Run, stop: StopReason, error: str | None) -> RunResult:
        selected = select_index(run.iterations, self.select)
        output = run.iterations[selected].draft if selected is not None else None
        metric = answer = metric_error = answer_error = None
        if output is not None:
            (metric, metric_error), (answer, answer_error) = await asyncio.to_thread(self._score_output, run, output)
        config = RunConfig(
            **self.config.model_dump(exclude={"max_iterations", "history", "select"}),
            max_iterations=self.max_iterations, history=self.history, select=self.select,
            models={role: self.backends[role].name for role in ROLES},
            model_files={r: i for r in ROLES if (i := self.backends[r].model_info()) is not None},
        )
        return RunResult(
            task=self.task.name,
            input=run.input,
            iterations=run.iterations,
            output=output,
            selected=selected,
            stop_reason=stop,
            error=error,
            calls=run.calls,
            usage=Usage.of(run.calls),
            config=config,
            metric=metric,
            metric_error=metric_error,
            answer=answer,
            answer_error=answer_error,
        )

    def _score_output(self, run: _Run, output: str) -> tuple[tuple[Any, str | None], tuple[Any, str | None]]:
        """(metric, its error), (answer, its error): a broken hook must not lose the finished
        run, and its error is kept in the result instead of a bare None."""
        return (_hook(self.task.metric, run.input, output, run.reference), _hook(self.task.answer, output))


# One limit per backend object and event loop, shared by every engine that uses the backend
# (a server keeps one engine per task and options over the same backends), so the backend's
# max_concurrency holds however many engines call it. Per loop: the sync wrapper makes one.
_SEMAPHORES: "weakref.WeakKeyDictionary[Backend, dict[int, asyncio.Semaphore]]" = weakref.WeakKeyDictionary()
_SEMAPHORES_LOCK = threading.Lock()


def backend_semaphore(backend: Backend) -> asyncio.Semaphore:
    loop = id(asyncio.get_running_loop())
    with _SEMAPHORES_LOCK:
        per_loop = _SEMAPHORES.setdefault(backend, {})
        if loop not in per_loop:
            per_loop[loop] = asyncio.Semaphore(max(1, backend.max_concurrency))
        return per_loop[loop]


def _hook(fn: Callable[..., Any], *args: Any) -> tuple[Any, str | None]:
    try:
        return fn(*args), None
    except SandboxUnavailableError:
        raise  # this machine cannot run model code at all: say so, not metric=None
    except Exception as exc:
        return None, error_text(exc)


def from_decision(run: _Run, reason: StopReason, detail: str) -> DecisionStep:
    t = run.iterations[-1].index if run.iterations else 0
    return DecisionStep(iteration=t, stop=True, reason=reason, detail=detail)


def _next_attempt(run: _Run, role: Role, t: int) -> int:
    """Attempts are numbered per step (role and iteration), across parse and backend retries,
    so three failed parses read as attempts 1, 2 and 3, not three times attempt 1."""
    return 1 + sum(c.role == role and c.iteration == t for c in run.calls)


def _drain(run: _Run) -> list[CallRecord]:
    calls, run.unreported = run.unreported, []
    return calls


def _raw(call: CallRecord) -> str:
    return (call.response or "").strip()


def _same(a: str, b: str) -> bool:
    return " ".join(a.split()) == " ".join(b.split())


def refine(task: Task | str, input: str, model: Backend | str | None = None, **options: Any) -> RunResult:
    """One-shot sync helper: ``refine("commongen", "dog, ball, park")``."""
    engine = SelfRefine(task, model, **options)
    try:
        return engine.run(input)
    finally:
        engine.close()


_RUNNERS = threading.local()


def _thread_runner() -> asyncio.Runner:
    """One event loop per thread, kept across sync ``run()`` calls: a fresh loop per call
    (``asyncio.run``) cost ~2 ms per call in setup and executor teardown, and dropped the
    backends' pooled connections and warm worker threads every time."""
    runner = getattr(_RUNNERS, "runner", None)
    if runner is None:
        runner = _RUNNERS.runner = asyncio.Runner()
        atexit.register(runner.close)
    return runner
