"""OpenTelemetry spans for the server: request → run → round → model call.

Optional and zero-cost when off: nothing from ``opentelemetry`` is imported unless the SDK is
installed and a tracer provider of the SDK is configured (by the embedding program, or by
``opentelemetry-instrument selfrefine serve`` from ``OTEL_*`` variables). Off, every method
here returns its argument or None.

- a request span per HTTP request (route, model, stream);
- a run span per Self-Refine run (task, stop reason, tokens, seconds, calls, selected draft);
- a round span per draft: from the start of its call to the decision taken on it;
- a call span per model call, timed where it happens (in a backend wrapper), with role,
  model, prompt and completion tokens, and the error of a failed call; a call that sends a
  conversation as it is (chat's first draft) says so: its messages' roles in order (never
  their text, as no span carries a prompt).
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

from ..backends.base import Backend, CompletionRequest, CompletionResponse, TextSink
from ..core.records import DecisionStep, DraftStep, ModelInfo, ResultStep, Step

NAME = "selfrefine"
# the span a model call belongs to: the round in progress (set between the loop's steps)
_current_round: contextvars.ContextVar[Any] = contextvars.ContextVar("selfrefine_round", default=None)


def sdk_configured() -> bool:
    """True when opentelemetry-sdk is installed and its tracer provider is the global one."""
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
    except ImportError:
        return False
    return isinstance(trace.get_tracer_provider(), TracerProvider)


class Tracing:
    """Span factory of one server; ``Tracing.off()`` does nothing at all."""

    def __init__(self, tracer: Any | None) -> None:
        self.tracer = tracer

    @classmethod
    def off(cls) -> Tracing:
        return cls(None)

    @classmethod
    def from_environment(cls) -> Tracing:
        """On when the OpenTelemetry SDK is installed and configured, else off."""
        if not sdk_configured():
            return cls.off()
        from opentelemetry import trace

        return cls(trace.get_tracer(NAME))

    @property
    def enabled(self) -> bool:
        return self.tracer is not None

    def request(self, route: str, **attributes: Any) -> Any:
        """The request span (None when off); the caller ends it with :func:`end`. Not made
        current: a streamed reply outlives the handler, and async generators resume in
        other contexts, so parents are passed explicitly."""
        if self.tracer is None:
            return None
        attrs = {"http.route": route, **{f"selfrefine.{k}": v for k, v in attributes.items() if v is not None}}
        return self.tracer.start_span(f"{NAME}.request {route}", attributes=attrs)

    def backend(self, backend: Backend) -> Backend:
        """``backend`` with a span around each call (itself when tracing is off)."""
        return backend if self.tracer is None else TracedBackend(backend, self.tracer)

    async def steps(self, steps: AsyncIterator[Step], task: str, parent: Any = None) -> AsyncIterator[Step]:
        """The loop's steps, with the run span (under ``parent``) and a span per round."""
        if self.tracer is None:
            async for step in steps:
                yield step
            return
        from opentelemetry import trace

        context = trace.set_span_in_context(parent) if parent is not None else None
        run = self.tracer.start_span(f"{NAME}.run", context=context, attributes={"selfrefine.task": task})
        rounds = _Rounds(self.tracer, trace.set_span_in_context(run))
        try:
            async for step in _in_round(steps, rounds):
                rounds.observe(step, run)
                yield step
        finally:
            rounds.close("the run ended before its decision")
            run.end()


def end(span: Any, error: str | None = None) -> None:
    """End a span from :meth:`Tracing.request` (None: tracing is off)."""
    if span is None:
        return
    if error is not None:
        from opentelemetry.trace import Status, StatusCode

        span.set_status(Status(StatusCode.ERROR, error))
    span.end()


class _Rounds:
    """Opens a round span at each draft and ends it at the decision taken on that draft."""

    def __init__(self, tracer: Any, run_context: Any) -> None:
        self.tracer = tracer
        self.run_context = run_context
        self.span: Any = None
        self.stopped = False  # after the stop decision no draft follows: no round to open

    def begin(self) -> None:
        if self.span is None and not self.stopped:
            self.span = self.tracer.start_span(f"{NAME}.round", context=self.run_context)

    def observe(self, step: Step, run: Any) -> None:
        if isinstance(step, DraftStep) and self.span is not None:
            self.span.set_attribute("selfrefine.iteration", step.iteration)
        elif isinstance(step, DecisionStep) and self.span is not None:
            self.stopped = step.stop
            self.span.set_attribute("selfrefine.stop", step.stop)
            if step.reason is not None:
                self.span.set_attribute("selfrefine.stop_reason", step.reason.value)
            self.span.end()
            self.span = None
        elif isinstance(step, ResultStep):
            _result_attributes(run, step)

    def close(self, why: str) -> None:
        if self.span is not None:
            self.span.set_attribute("selfrefine.unfinished", why)
            self.span.end()
            self.span = None


async def _in_round(steps: AsyncIterator[Step], rounds: _Rounds) -> AsyncIterator[Step]:
    """Advance the loop with the round span current, so calls made meanwhile nest under it."""
    from opentelemetry import trace

    while True:
        rounds.begin()
        token = _current_round.set(trace.set_span_in_context(rounds.span) if rounds.span is not None else None)
        try:
            step = await steps.__anext__()
        except StopAsyncIteration:
            return
        finally:
            _current_round.reset(token)
        yield step


def _result_attributes(run: Any, step: ResultStep) -> None:
    result = step.result
    run.set_attribute("selfrefine.stop_reason", result.stop_reason.value)
    run.set_attribute("selfrefine.iterations", len(result.iterations))
    run.set_attribute("selfrefine.calls", result.usage.calls)
    run.set_attribute("selfrefine.prompt_tokens", result.usage.prompt_tokens)
    run.set_attribute("selfrefine.completion_tokens", result.usage.completion_tokens)
    run.set_attribute("selfrefine.model_seconds", result.usage.seconds)
    if result.selected is not None:
        run.set_attribute("selfrefine.selected", result.selected)
    if result.error:
        run.set_attribute("selfrefine.error", result.error)


class TracedBackend(Backend):
    """A span around each call of ``inner``, under the round in progress."""

    def __init__(self, inner: Backend, tracer: Any) -> None:
        super().__init__(inner.name)
        self.inner = inner
        self.tracer = tracer
        self.max_concurrency = inner.max_concurrency

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        with self._span(request) as span:
            return self._finished(span, await self.inner.complete(request))

    async def stream(self, request: CompletionRequest, on_text: TextSink) -> CompletionResponse:
        with self._span(request) as span:
            return self._finished(span, await self.inner.stream(request, on_text))

    @staticmethod
    def _finished(span: Any, response: CompletionResponse) -> CompletionResponse:
        span.set_attribute("selfrefine.prompt_tokens", response.prompt_tokens)
        span.set_attribute("selfrefine.completion_tokens", response.completion_tokens)
        if response.finish_reason:
            span.set_attribute("selfrefine.finish_reason", response.finish_reason)
        return response

    @contextmanager
    def _span(self, request: CompletionRequest) -> Iterator[Any]:
        attrs: dict[str, Any] = {
            "selfrefine.role": request.role,
            "selfrefine.model": self.inner.name,
            "selfrefine.max_tokens": request.max_tokens,
        }
        if request.turns is not None:  # sent as the conversation's own messages
            attrs["selfrefine.messages"] = [t.role for t in request.turns] + ["user"]
        start = time.perf_counter()
        # record_exception/set_status_on_exception: a failed call shows as an error span
        with self.tracer.start_as_current_span(
            f"{NAME}.call {request.role}", context=_current_round.get(), attributes=attrs
        ) as span:
            try:
                yield span
            finally:
                span.set_attribute("selfrefine.seconds", round(time.perf_counter() - start, 6))

    async def aclose(self) -> None:
        await self.inner.aclose()

    def describe(self) -> str:
        return self.inner.describe()

    def cache_identity(self) -> str:
        return self.inner.cache_identity()

    def model_info(self) -> ModelInfo | None:
        return self.inner.model_info()
