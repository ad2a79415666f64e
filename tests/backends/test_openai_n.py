"""K samples of one prompt through the ``openai:`` backend: one request with ``n=K`` where
the server honours it, one request per sample where it refuses ``n`` or ignores it.

A real threaded ``http.server`` on 127.0.0.1 plays three kinds of OpenAI-compatible server
(vLLM and the OpenAI API honour ``n``; llama-server answers 400 "Only one completion choice
is allowed"; llama_cpp.server returns one choice whatever ``n`` says); the real ``openai``
SDK talks to it, and the server records every request body it received.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from conftest import JsonServer

from selfrefine import BackendError
from selfrefine.backends.base import CompletionRequest
from selfrefine.backends.openai_compat import OpenAIBackend


class Server(JsonServer):
    """Answers chat requests as a server of kind ``honours``, ``refuses`` or ``ignores``."""

    def __init__(self) -> None:
        super().__init__()
        self.kind = "honours"

    def answer(self, path: str, body: dict) -> tuple[int, dict]:
        n = body.get("n", 1)
        if n > 1 and self.kind == "refuses":
            return 400, {"error": {"message": "Only one completion choice is allowed", "type": "invalid_request_error"}}
        count = n if self.kind == "honours" else 1
        seed = body.get("seed")
        choices = [
            {
                "index": i,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": f"sample {i} seed {seed}"},
            }
            for i in range(count)
        ]
        usage = {"prompt_tokens": 10, "completion_tokens": 3 * count + 1, "total_tokens": 11 + 3 * count}
        return 200, {
            "id": "x",
            "object": "chat.completion",
            "created": 1,
            "model": "m",
            "choices": choices,
            "usage": usage,
        }


@pytest.fixture(scope="module")
def _server() -> Iterator[Server]:
    srv = Server()
    yield srv
    srv.close()


@pytest.fixture
def server(_server: Server) -> Server:
    _server.bodies = []
    return _server


def _sample(backend: OpenAIBackend, n: int, times: int = 1) -> list[list]:
    async def go() -> list[list]:
        try:
            request = CompletionRequest(role="refine", prompt="hi", temperature=0.8, seed=7)
            return [await backend.complete_n(request, n) for _ in range(times)]
        finally:
            await backend.aclose()

    return asyncio.run(go())


def test_a_server_that_honours_n_gets_one_request(server):
    server.kind = "honours"
    [got] = _sample(OpenAIBackend("m", base_url=server.base_url), 4)
    assert [b.get("n") for b in server.bodies] == [4]
    assert [r.text for r in got] == [f"sample {i} seed 7" for i in range(4)]
    # the prompt is counted once; the 13 completion tokens are shared out (4 + 3 + 3 + 3)
    assert [r.prompt_tokens for r in got] == [10, 0, 0, 0]
    assert sum(r.completion_tokens for r in got) == 13


def test_a_server_that_refuses_n_gets_one_request_per_sample_from_then_on(server):
    server.kind = "refuses"
    first, second = _sample(OpenAIBackend("m", base_url=server.base_url), 3, times=2)
    # the refused n=3, then seeds 7, 8, 9; the second call no longer asks for n
    assert [(b.get("n"), b.get("seed")) for b in server.bodies] == [
        (3, 7),
        (None, 7),
        (None, 8),
        (None, 9),
        (None, 7),
        (None, 8),
        (None, 9),
    ]
    assert [r.text for r in first] == ["sample 0 seed 7", "sample 0 seed 8", "sample 0 seed 9"]
    assert [r.text for r in second] == [r.text for r in first]


def test_a_server_that_ignores_n_is_topped_up(server):
    server.kind = "ignores"
    [got] = _sample(OpenAIBackend("m", base_url=server.base_url), 3)
    assert [(b.get("n"), b.get("seed")) for b in server.bodies] == [(3, 7), (None, 8), (None, 9)]
    assert len({r.text for r in got}) == 3


def test_request_n_off_never_asks_for_n(server):
    server.kind = "honours"
    _sample(OpenAIBackend("m", base_url=server.base_url, request_n="off"), 2)
    assert [b.get("n") for b in server.bodies] == [None, None]


def test_request_n_on_makes_a_refusal_an_error(server):
    server.kind = "refuses"
    with pytest.raises(BackendError, match=r"request refused \(400\)"):
        _sample(OpenAIBackend("m", base_url=server.base_url, request_n="on"), 2)
