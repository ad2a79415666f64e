"""OpenTelemetry spans of ``selfrefine serve``, recorded with the SDK's in-memory exporter:
request → run → round (one per draft) → model call, with tokens, stop reason and role; and
tracing off (no SDK provider configured) leaves the backends unwrapped."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import pytest
import test_serve
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from test_serve import COMMONGEN, user, writer

from selfrefine.service.tracing import TracedBackend, Tracing, sdk_configured

serve = test_serve.serve  # the real-server fixture


@pytest.fixture
def spans():
    """A tracer of a private provider (the global one is left alone) and its exporter."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield Tracing(provider.get_tracer("test")), exporter
    provider.shutdown()


def finished(
    exporter: InMemorySpanExporter, request_name: str, timeout: float = 5.0, also: tuple[str, ...] = ("selfrefine.run",)
) -> list[ReadableSpan]:
    """The spans, once the request span and ``also`` have ended: a stream ends the request
    span after its last event, and a streamed run is detached from its socket, so its own
    span may end a moment after the request's."""
    deadline = time.monotonic() + timeout
    while not {request_name, *also} <= {s.name for s in exporter.get_finished_spans()}:
        assert time.monotonic() < deadline, [s.name for s in exporter.get_finished_spans()]
        time.sleep(0.02)
    return list(exporter.get_finished_spans())


@pytest.mark.parametrize("stream", [False, True])
def test_request_run_round_and_call_spans(serve, spans, stream):
    tracing, exporter = spans
    served = serve(tracing=tracing)
    client = served.client()
    if stream:
        chunks = list(client.chat.completions.create(model=COMMONGEN, messages=user("dog, ball, park"), stream=True))
        result = next(c.selfrefine for c in chunks if c.choices and c.choices[0].finish_reason)
    else:
        result = client.chat.completions.create(model=COMMONGEN, messages=user("dog, ball, park")).selfrefine

    all_spans = finished(exporter, "selfrefine.request /v1/chat/completions")
    by_name: dict[str, list[ReadableSpan]] = {}
    for span in all_spans:
        by_name.setdefault(span.name, []).append(span)
    [request] = by_name.pop("selfrefine.request /v1/chat/completions")
    [run] = by_name.pop("selfrefine.run")
    rounds = by_name.pop("selfrefine.round")
    calls = [s for name in list(by_name) if name.startswith("selfrefine.call ") for s in by_name.pop(name)]
    assert by_name == {}, "no other spans"

    assert request.attributes["selfrefine.model"] == COMMONGEN
    assert request.attributes["selfrefine.stream"] is stream
    assert request.status.status_code != StatusCode.ERROR
    # the run: why it stopped and what it cost, as the reply's trajectory says
    usage = result["usage"]
    assert run.attributes["selfrefine.task"] == "commongen"
    assert run.attributes["selfrefine.stop_reason"] == "feedback"
    assert run.attributes["selfrefine.prompt_tokens"] == usage["prompt_tokens"]
    assert run.attributes["selfrefine.completion_tokens"] == usage["completion_tokens"]
    assert run.attributes["selfrefine.calls"] == 4
    assert run.attributes["selfrefine.selected"] == 1
    # a round per draft, ended at the decision on it
    assert sorted(r.attributes["selfrefine.iteration"] for r in rounds) == [0, 1]
    assert [r.attributes["selfrefine.stop"] for r in sorted(rounds, key=lambda r: r.start_time)] == [False, True]
    # a call span per model call, with role and tokens that add up to the run's
    ordered = sorted(calls, key=lambda c: c.start_time)
    assert [c.attributes["selfrefine.role"] for c in ordered] == ["generate", "feedback", "refine", "feedback"]
    assert [c.name for c in ordered] == [f"selfrefine.call {c.attributes['selfrefine.role']}" for c in ordered]
    assert sum(c.attributes["selfrefine.prompt_tokens"] for c in calls) == usage["prompt_tokens"]
    assert sum(c.attributes["selfrefine.completion_tokens"] for c in calls) == usage["completion_tokens"]
    assert all(c.attributes["selfrefine.seconds"] >= 0 for c in calls)
    # the tree: call under its round, round under the run, run under the request; one trace
    round_of = {r.attributes["selfrefine.iteration"]: r for r in rounds}
    parents = [c.parent.span_id for c in ordered]
    ids = [round_of[i].context.span_id for i in (0, 0, 1, 1)]
    assert parents == ids  # draft 0 and its critique, then the refinement and its critique
    assert all(r.parent.span_id == run.context.span_id for r in rounds)
    assert run.parent.span_id == request.context.span_id
    assert request.parent is None
    assert {s.context.trace_id for s in all_spans} == {request.context.trace_id}


def test_a_failed_run_marks_its_request_span(serve, spans):
    from selfrefine.backends.fake import FakeBackend
    from selfrefine.core.errors import BackendError

    tracing, exporter = spans
    served = serve(FakeBackend([BackendError("model server down")]), tracing=tracing)
    with pytest.raises(Exception):  # noqa: B017 - the 502 itself is test_serve's business
        served.client().chat.completions.create(model=COMMONGEN, messages=user("dog, ball"))
    spans_ = finished(exporter, "selfrefine.request /v1/chat/completions")
    [run] = [s for s in spans_ if s.name == "selfrefine.run"]
    [call] = [s for s in spans_ if s.name == "selfrefine.call generate"]
    assert run.attributes["selfrefine.stop_reason"] == "error"
    assert "model server down" in run.attributes["selfrefine.error"]
    assert call.status.status_code == StatusCode.ERROR


def test_tracing_is_off_without_a_configured_sdk_provider(serve, spans):
    assert not sdk_configured()  # this process never sets the global provider
    off = Tracing.from_environment()
    assert not off.enabled
    backend = writer()
    assert off.backend(backend) is backend
    assert off.request("/v1/chat/completions") is None

    plain = serve(backend)  # ServeSettings' default tracing: from the environment
    assert not plain.settings.tracing.enabled
    service = plain.server.config.app.state.service
    assert service.pool.backends.model is backend  # not wrapped: no per-call cost
    assert plain.client().chat.completions.create(model=COMMONGEN, messages=user("dog, ball")).choices

    traced = serve(writer(), tracing=spans[0])
    assert isinstance(traced.server.config.app.state.service.pool.backends.model, TracedBackend)


def test_tracing_is_on_once_an_sdk_provider_is_configured():
    # in a child: the global provider can be set once per process
    code = textwrap.dedent("""
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from selfrefine.service.tracing import Tracing
        assert not Tracing.from_environment().enabled
        trace.set_tracer_provider(TracerProvider())
        assert Tracing.from_environment().enabled
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_a_call_that_sends_the_conversation_shows_its_messages_roles(serve, spans):
    """Chat's first draft is the user's own conversation: its span lists the messages' roles
    in order (never their text); a prompt's call has no such attribute."""
    from selfrefine import FakeBackend

    tracing, exporter = spans
    fake = FakeBackend(default=lambda r: '{"issues": []}' if r.role == "feedback" else "Lisbon.")
    client = serve(fake, tracing=tracing).client()
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "A city?"},
        {"role": "assistant", "content": "Porto."},
        {"role": "user", "content": "Another one?"},
    ]
    client.chat.completions.create(model="selfrefine/chat", messages=messages)
    calls = {s.name: s for s in finished(exporter, "selfrefine.request /v1/chat/completions") if "call" in s.name}
    assert list(calls["selfrefine.call generate"].attributes["selfrefine.messages"]) == [
        "system",
        "user",
        "assistant",
        "user",
    ]
    assert "selfrefine.messages" not in calls["selfrefine.call feedback"].attributes
