"""One run's model calls: transient-error retries with backoff, the token and time budgets,
each backend's concurrency limit, and the record of every attempt.

Robustness rules implemented here:
- transient backend errors are retried with exponential backoff (and jitter) and never
  reach a prompt; every attempt, failed or not, is a :class:`CallRecord`;
- a fatal backend error or an exhausted budget ends the call with an exception the run
  turns into its stop reason, the drafts so far kept.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ..backends.base import Backend, CompletionRequest, CompletionResponse, TextSink, nth_sample, shown_prompt
from ..core.errors import BackendError, TransientBackendError
from ..core.records import CallRecord, Role, StopReason
from .settings import CallPolicy

#: receives each piece of a streamed reply with its call's role, iteration, attempt and, when
#: its step samples several drafts, the sample's number (1, 2, …)
DeltaSink = Callable[[Role, int, int, str, "int | None"], None]


class BudgetExceeded(Exception):
    """A budget ran out before or during a call; the run stops with ``reason``."""

    def __init__(self, reason: StopReason, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


@dataclass
class CallLog:
    """Every call of one run, and the failed ones not yet streamed."""

    started: float = field(default_factory=time.monotonic)
    calls: list[CallRecord] = field(default_factory=list)
    unreported: list[CallRecord] = field(default_factory=list)

    def tokens(self) -> int:
        return sum(c.prompt_tokens + c.completion_tokens for c in self.calls)

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def drain(self) -> list[CallRecord]:
        """The failed calls not yet reported, once."""
        calls, self.unreported = self.unreported, []
        return calls

    def next_attempt(self, role: Role, t: int, purpose: str | None = None) -> int:
        """Attempts are numbered per step (role, iteration and purpose), across parse and
        backend retries, so three failed parses read as attempts 1, 2 and 3."""
        return 1 + sum(c.role == role and c.iteration == t and c.purpose == purpose for c in self.calls)

    def failed(self, call: CallRecord, error: str) -> None:
        call.ok, call.error = False, error
        self.unreported.append(call)


class Caller:
    """Makes one run's calls under its policy's retries and budgets."""

    def __init__(self, policy: CallPolicy, backends: Mapping[Role, Backend], log: CallLog) -> None:
        self.policy, self.backends, self.log = policy, backends, log
        self.sink: DeltaSink | None = None  # set: calls asked to stream hand it their pieces

    async def call(
        self,
        role: Role,
        t: int,
        request: CompletionRequest,
        samples: int = 1,
        *,
        stream: bool = False,
        purpose: str | None = None,
        sample: int | None = None,
    ) -> list[tuple[CompletionResponse, CallRecord]]:
        """One logical call (``samples`` replies to the request) with transient-error retries;
        ``stream``: a single sample's reply goes to the sink piece by piece as it comes;
        ``purpose``: what the call is for besides its role's step (recorded); ``sample``: the
        number of the step's (first) sample this call is (its streamed pieces say so). Several
        samples asked to stream are shown as they come (:meth:`_each_sample`)."""
        if stream and samples > 1 and self.sink is not None:
            return await self._each_sample(role, t, request, samples, purpose, sample or 1)
        backend = self.backends[role]
        for attempt in range(1, self.policy.backend_retries + 2):
            self.check_budgets()
            calls = [self._record(role, t, backend, request, purpose) for _ in range(samples)]
            try:
                on_text = self._pieces(role, t, calls[0].attempt, sample) if stream and samples == 1 else None
                responses = await self._send(backend, request, calls[0], samples, on_text)
            except (TransientBackendError, BackendError, BudgetExceeded) as exc:
                self._failed(calls, str(exc))
                if isinstance(exc, TransientBackendError) and attempt <= self.policy.backend_retries:
                    await asyncio.sleep(self.backoff(attempt))
                    continue
                if isinstance(exc, TransientBackendError):
                    raise BackendError(f"{backend.name} failed {attempt} times; last error: {exc}") from exc
                raise
            # a batch's time is shared among its samples, so that a run's seconds add up
            share = round(calls[0].seconds / samples, 6)
            return [self._finished(r, c, share, calls[0].wait_seconds) for r, c in zip(responses, calls)]
        raise AssertionError("unreachable")

    def _pieces(self, role: Role, t: int, attempt: int, sample: int | None = None) -> TextSink | None:
        if self.sink is None:
            return None
        sink = self.sink
        return lambda text: sink(role, t, attempt, text, sample)

    async def _each_sample(
        self, role: Role, t: int, request: CompletionRequest, samples: int, purpose: str | None, first: int
    ) -> list[tuple[CompletionResponse, CallRecord]]:
        """Several samples of a step shown as they come (the live view, the API's stream): one
        streamed call per sample, in turn, on a backend that serves one call at a time (the
        embedded model: no slower than a batch there); on one that serves several, all at
        once, each sample's text handed to the sink whole as it ends. The requests are the
        batch's (``nth_sample``: the seed moved on per sample)."""
        one_at_a_time = self.backends[role].max_concurrency <= 1

        async def one(i: int) -> tuple[CompletionResponse, CallRecord]:
            part = nth_sample(request, i)
            [(response, call)] = await self.call(role, t, part, stream=one_at_a_time, purpose=purpose, sample=first + i)
            if not one_at_a_time and self.sink is not None:
                self.sink(role, t, call.attempt, response.text, first + i)
            return response, call

        if one_at_a_time:
            return [await one(i) for i in range(samples)]
        return list(await asyncio.gather(*(one(i) for i in range(samples))))

    def _record(
        self, role: Role, t: int, backend: Backend, request: CompletionRequest, purpose: str | None = None
    ) -> CallRecord:
        attempt = self.log.next_attempt(role, t, purpose)
        call = CallRecord(role=role, iteration=t, attempt=attempt, model=backend.name, purpose=purpose)
        if self.policy.record_prompts:
            call.prompt = shown_prompt(request)  # a conversation whole
        self.log.calls.append(call)  # counted now, so the next record of this step numbers on
        return call

    def _failed(self, calls: list[CallRecord], error: str) -> None:
        """A failed attempt is one record (the first); the others of its batch never happened."""
        for extra in calls[1:]:
            self.log.calls.remove(extra)
        self.log.failed(calls[0], error)

    def _finished(
        self, response: CompletionResponse, call: CallRecord, seconds: float, wait_seconds: float
    ) -> tuple[CompletionResponse, CallRecord]:
        call.prompt_tokens, call.completion_tokens = response.prompt_tokens, response.completion_tokens
        call.response, call.cached = response.text, response.cached
        call.finish_reason = response.finish_reason
        call.cached_prompt_tokens = response.cached_prompt_tokens
        call.seconds, call.wait_seconds = seconds, wait_seconds
        return response, call

    async def _send(
        self, backend: Backend, request: CompletionRequest, call: CallRecord, samples: int, on_text: TextSink | None
    ) -> list[CompletionResponse]:
        """One attempt under the backend's concurrency limit; times the wait and the call apart."""
        queued = time.perf_counter()
        async with backend_semaphore(backend):
            start = time.perf_counter()
            call.wait_seconds = round(start - queued, 6)
            remaining = None
            if self.policy.max_seconds is not None:  # measured after the wait in the queue
                self.check_budgets()
                remaining = self.policy.max_seconds - self.log.elapsed()
            try:
                return await asyncio.wait_for(_complete(backend, request, samples, on_text), remaining)
            except TimeoutError:
                if remaining is None:  # the backend's own timeout surfaced as asyncio's
                    raise TransientBackendError(f"{backend.name}: request timed out") from None
                raise BudgetExceeded(*self.budget_spent() or (StopReason.TIME_BUDGET, "time budget ran out")) from None
            finally:
                call.seconds = round(time.perf_counter() - start, 6)

    def tokens_left(self) -> float:
        """Tokens the run's budget has left (infinite without one)."""
        budget = self.policy.max_total_tokens
        return float("inf") if budget is None else budget - self.log.tokens()

    def budget_spent(self) -> tuple[StopReason, str] | None:
        """The budget that has run out (the one place both budgets are checked), or None."""
        policy, log = self.policy, self.log
        if policy.max_total_tokens is not None and log.tokens() >= policy.max_total_tokens:
            return StopReason.TOKEN_BUDGET, f"token budget used up: {log.tokens()} tokens of {policy.max_total_tokens}"
        if policy.max_seconds is not None and log.elapsed() >= policy.max_seconds:
            return StopReason.TIME_BUDGET, f"time budget ran out: {log.elapsed():.1f}s of {policy.max_seconds:g}s"
        return None

    def check_budgets(self) -> None:
        spent = self.budget_spent()
        if spent is not None:
            raise BudgetExceeded(*spent)

    def backoff(self, attempt: int) -> float:
        policy = self.policy
        delay = min(policy.retry_max_delay, policy.retry_base_delay * 2 ** (attempt - 1))
        delay *= random.uniform(0.5, 1.0)  # jitter so concurrent runs do not retry in lockstep
        if policy.max_seconds is not None:
            delay = max(0.0, min(delay, policy.max_seconds - self.log.elapsed()))
        return delay


async def _complete(
    backend: Backend, request: CompletionRequest, samples: int, on_text: TextSink | None = None
) -> list[CompletionResponse]:
    if samples == 1:
        return [await (backend.complete(request) if on_text is None else backend.stream(request, on_text))]
    responses = await backend.complete_n(request, samples)
    if len(responses) != samples:
        raise BackendError(f"{backend.name}: asked for {samples} samples, got {len(responses)}")
    return responses


# One limit per backend object and event loop, shared by every engine that uses the backend
# (a server keeps one engine per task and options over the same backends), so the backend's
# max_concurrency holds however many engines call it. Per loop: the sync wrapper makes one.
_SEMAPHORES: weakref.WeakKeyDictionary[Backend, dict[int, asyncio.Semaphore]] = weakref.WeakKeyDictionary()
_SEMAPHORES_LOCK = threading.Lock()


def backend_semaphore(backend: Backend) -> asyncio.Semaphore:
    loop = id(asyncio.get_running_loop())
    with _SEMAPHORES_LOCK:
        per_loop = _SEMAPHORES.setdefault(backend, {})
        if loop not in per_loop:
            per_loop[loop] = asyncio.Semaphore(max(1, backend.max_concurrency))
        return per_loop[loop]
