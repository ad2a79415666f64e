"""Issue 39, item 12: what a client reads of a run on a real ``selfrefine serve`` (uvicorn on
127.0.0.1, the openai SDK and plain HTTP as clients). An IPv6 upstream's address is cut from
502s, failed calls and stream error events as other URLs are; a template of the operator's
task file that fails to render during a run is a 500 naming the task, not a 400 blaming the
request, and tells nothing of the template or the file; a run's config names no file of the
server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest
from test_serve import COMMONGEN, Served, start_server, user

from selfrefine.backends.base import CompletionRequest
from selfrefine.backends.embedded import LlamaCppBackend
from selfrefine.backends.fake import FakeBackend
from selfrefine.backends.registry import get_backend
from selfrefine.backends.roles import RoleBackends
from selfrefine.core.errors import BackendError, TransientBackendError
from selfrefine.service import ServeSettings
from selfrefine.service.tracing import Tracing
from selfrefine.tasks import get_task

IPV6 = "http://[::1]:9/v1"  # the probe's --base-url: nothing listens on port 9


@pytest.fixture
def started() -> Iterator[list[Served]]:
    servers: list[Served] = []
    yield servers
    for served in servers:
        served.stop()


def serve(started: list[Served], backends: RoleBackends, **settings: Any) -> Served:
    served = start_server(ServeSettings(backends=backends, tracing=Tracing.off(), **settings))
    started.append(served)
    return served


def _sse(text: str) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: {")]


def test_an_ipv6_upstream_address_is_cut_from_failed_calls(started):
    # the probe itself: the real OpenAI backend on [::1]:9. b6c03ab's URL pattern stopped at
    # the "[", so the whole address stayed in every failed call a client was sent
    served = serve(started, RoleBackends.of(get_backend("openai:m", base_url=IPV6, api_key="k")))
    ask = {"task": "commongen", "input": "dog, ball", "options": {"max_seconds": 1.5}}
    native = httpx2.post(f"{served.url}/v1/refine", json=ask, timeout=30)
    streamed = httpx2.post(f"{served.url}/v1/refine", json={**ask, "stream": True}, timeout=30)
    assert native.status_code == 200, native.text
    errors = [c["error"] for c in native.json()["calls"]] + [
        e["call"]["error"] for e in _sse(streamed.text) if e.get("kind") == "call"
    ]
    assert errors and all("cannot reach server" in e and e.endswith("(at <upstream>)") for e in errors), errors
    for text in (native.text, streamed.text):
        assert "::1" not in text and "http://" not in text, text


def test_an_ipv6_upstream_address_is_cut_from_502s_and_stream_errors(started):
    # what the real backend says when [::1]:9 does not answer, raised at once (no retries)
    request = CompletionRequest(role="generate", prompt="hi")
    with pytest.raises(TransientBackendError) as said:
        asyncio.run(get_backend("openai:m", base_url=IPV6, api_key="k").complete(request))
    message = str(said.value)
    assert IPV6 in message

    def fails(request: CompletionRequest) -> str:
        raise BackendError(message)

    served = serve(started, RoleBackends.of(FakeBackend(default=fails)))
    client = served.client()
    with pytest.raises(openai.APIStatusError) as caught:
        client.chat.completions.create(model=COMMONGEN, messages=user("dog, ball"))
    assert caught.value.status_code == 502
    stream = httpx2.post(
        f"{served.url}/v1/chat/completions", json={"model": COMMONGEN, "messages": user("a, b"), "stream": True}
    )
    native = httpx2.post(f"{served.url}/v1/refine", json={"task": "commongen", "input": "dog, ball"})
    for text in (caught.value.response.text, stream.text, native.text):
        assert "cannot reach server" in text and "<upstream>" in text, text
        assert "::1" not in text and "http://" not in text, text


BROKEN = """\
name: brittle
generate: "Write about {{ input }}."
feedback: "Critique {{ draft }}. Secret rubric {{ 1 // (draft | length - 5) }}"
refine: "Better: {{ draft }} ({{ feedback }})"
"""


def test_a_template_that_fails_during_a_run_is_the_servers_500_not_the_clients_400(started, tmp_path):
    # b6c03ab: 400 invalid_option ("task file /srv/.../brittle.yaml: template 'feedback' line
    # 1 failed to render: ZeroDivisionError ...") blamed the request, and told the client the
    # operator's file and its template
    path = tmp_path / "operator-secret.yaml"
    path.write_text(BROKEN, encoding="utf-8")
    served = serve(started, RoleBackends.of(FakeBackend(default="Short")), extra_tasks=[get_task(str(path))])
    with pytest.raises(openai.InternalServerError) as caught:
        served.client().chat.completions.create(model="selfrefine/brittle", messages=user("dogs"))
    error = caught.value.response.json()["error"]
    assert caught.value.status_code == 500 and error["type"] == "server_error" and error["code"] == "task_failed"
    assert "the server's task 'brittle' is broken (a prompt template failed to render)" in error["message"]
    assert "not the request's" in error["message"]
    stream = httpx2.post(f"{served.url}/v1/refine", json={"task": "brittle", "input": "dogs", "stream": True})
    [event] = [e for e in _sse(stream.text) if "error" in e]
    assert event["error"]["code"] == "task_failed" and event["error"]["type"] == "server_error"
    for text in (caught.value.response.text, stream.text):
        for secret in ("operator-secret", "rubric", "feedback", "ZeroDivision", "line 1", str(tmp_path)):
            assert secret not in text, (secret, text)
    fine = served.client().chat.completions.create(model="selfrefine/brittle", messages=user("dogs"),
                                                   extra_body={"selfrefine": {"max_iterations": 0}})  # fmt: skip
    assert fine.choices[0].message.content == "Short"  # the task works where its template does


def test_a_runs_config_names_no_file_of_the_server(started, tmp_path):
    # b6c03ab: config.models and config.model_files gave the client the server's model path
    model = tmp_path / "private-models" / "secret-weights.gguf"
    model.parent.mkdir()
    model.write_bytes(b"GGUF" + bytes(60))  # the judge's file: named in the record, never loaded here
    judge = LlamaCppBackend(model_path=model)
    fake = FakeBackend(default="A dog chases a ball.")
    served = serve(started, RoleBackends.of(fake, judge=judge))
    native = httpx2.post(
        f"{served.url}/v1/refine", json={"task": "chat", "input": "hi", "options": {"max_iterations": 0}}
    )
    streamed = httpx2.post(f"{served.url}/v1/refine", json={"task": "chat", "input": "hi", "stream": True})
    assert native.status_code == 200, native.text
    config = native.json()["config"]
    assert config["models"]["judge"] == "gguf:<server file>" and config["models"]["generate"] == "fake"
    assert config["model_files"] == {}
    for text in (native.text, streamed.text):
        assert "secret-weights" not in text and "private-models" not in text and str(Path(tmp_path)) not in text
