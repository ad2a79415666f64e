"""A 200 whose body is not the API's shape is transient: retried and recorded like a 5xx.

A real threaded ``http.server`` on 127.0.0.1 plays the server (or a proxy that damaged the
reply); the real ``openai`` SDK talks to it.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from conftest import scored_task

from selfrefine import SelfRefine, StopReason, TransientBackendError
from selfrefine.backends.base import CompletionRequest
from selfrefine.backends.openai_compat import OpenAIBackend

GOOD = {
    "id": "x",
    "object": "chat.completion",
    "created": 1,
    "model": "m",
    "choices": [
        {"index": 0, "finish_reason": "stop", "text": "a draft", "message": {"role": "assistant", "content": "a draft"}}
    ],
    "usage": {"prompt_tokens": 5, "completion_tokens": 2},
}
CUT = json.dumps(GOOD).encode()[:60]  # what a proxy that dropped the tail passes on

MALFORMED = {
    "cut-off JSON": CUT,
    "empty body": b"",
    "not UTF-8": b'{"choices": [{"text": "\xff\xfe"}]}',
    "no choices": b'{"id": "x", "model": "m"}',
    "choices null": b'{"id": "x", "choices": null}',
    "choices empty": b'{"id": "x", "choices": []}',
    "a JSON list": b"[1, 2]",
    "choice is a string": b'{"choices": ["a draft"]}',
    "choice without message or text": b'{"choices": [{"index": 0}]}',
    "token count not a number": json.dumps({**GOOD, "usage": {"prompt_tokens": "many"}}).encode(),
}


class Scripted:
    """Answers POSTs with the queued bodies (status 200, application/json), then GOOD."""

    def __init__(self) -> None:
        self.queue: list[bytes] = []
        script = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length", 0)))
                body = script.queue.pop(0) if script.queue else json.dumps(GOOD).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


@pytest.fixture(scope="module")
def _scripted() -> Iterator[Scripted]:
    srv = Scripted()
    yield srv
    srv.httpd.shutdown()
    srv.httpd.server_close()


@pytest.fixture
def server(_scripted: Scripted) -> Scripted:
    _scripted.queue = []
    return _scripted


def _complete(backend: OpenAIBackend) -> str:
    async def go() -> str:
        try:
            return (await backend.complete(CompletionRequest(role="generate", prompt="hi"))).text
        finally:
            await backend.aclose()

    return asyncio.run(go())


@pytest.mark.parametrize("api", ["chat", "completion"])
@pytest.mark.parametrize("what", list(MALFORMED))
def test_malformed_200_is_transient(server, api, what):
    server.queue = [MALFORMED[what]]
    backend = OpenAIBackend("m", base_url=server.base_url, api=api, timeout=5)
    with pytest.raises(TransientBackendError, match="server sent a malformed response"):
        _complete(backend)


@pytest.mark.parametrize("api", ["chat", "completion"])
def test_well_formed_200_still_works(server, api):
    assert _complete(OpenAIBackend("m", base_url=server.base_url, api=api, timeout=5)) == "a draft"


def test_loop_retries_a_cut_off_body_and_records_the_failed_attempts(server):
    server.queue = [CUT, b""]  # two damaged replies, then a good one
    backend = OpenAIBackend("m", base_url=server.base_url, timeout=5)
    engine = SelfRefine(scored_task(), backend, max_iterations=0, backend_retries=2, retry_base_delay=0)
    result = engine.run("rain")
    assert result.stop_reason is not StopReason.ERROR, result.error
    assert result.output == "a draft"
    drafts = [c for c in result.calls if c.role == "generate"]  # a feedback call follows
    assert [(c.attempt, c.ok) for c in drafts] == [(1, False), (2, False), (3, True)]
    assert all("malformed response" in c.error for c in drafts[:2])


def test_loop_gives_up_on_malformed_bodies_after_its_retries(server):
    server.queue = [CUT] * 3
    backend = OpenAIBackend("m", base_url=server.base_url, timeout=5)
    engine = SelfRefine(scored_task(), backend, max_iterations=0, backend_retries=2, retry_base_delay=0)
    result = engine.run("rain")
    assert result.stop_reason is StopReason.ERROR
    assert "failed 3 times" in result.error and "malformed response" in result.error
    assert [c.ok for c in result.calls] == [False, False, False]
