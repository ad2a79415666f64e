"""The ``openai:`` backend against a real ``python -m llama_cpp.server`` on 127.0.0.1."""

from __future__ import annotations

import asyncio

import pytest
from conftest import require_smollm
from llama_server import Server

from selfrefine import SelfRefine, StopReason
from selfrefine.backends.openai_compat import OpenAIBackend
from selfrefine.core.records import DraftStep, ResultStep

pytestmark = [pytest.mark.integration, pytest.mark.server]


@pytest.fixture
def server(llama_server):
    return llama_server  # the session's one server (conftest)


def test_chat_endpoint_falls_back_to_the_json_object_form_for_good(server):
    """llama_cpp.server knows only ``{"type": "json_object", "schema": ...}``: it refuses the
    standard json_schema form once, and from then on the backend sends the older form, for
    every later feedback call of this run and of the next."""
    backend = OpenAIBackend("smollm2", base_url=server.base_url)
    assert backend.json_format == "auto"
    engine = SelfRefine("commongen", backend, max_iterations=1, temperature=0.0)
    before = len(server.chat_statuses())
    results = [engine.run(concepts) for concepts in ("dog, frisbee, catch, throw", "sun, beach, towel")]
    statuses = server.chat_statuses()[before:]
    for result in results:
        assert result.stop_reason is not StopReason.ERROR, result.error
        fbs = [it.feedback for it in result.iterations if it.feedback is not None]
        assert fbs and all(fb.parse_error is None for fb in fbs), [fb.text for fb in fbs]
        assert all(c.prompt_tokens > 0 for c in result.calls if c.ok)
        assert result.usage.completion_tokens > 0
    assert backend.json_format == "json_object"
    refused = [code for code in statuses if code != 200]
    assert len(refused) == 1 and refused[0] in (400, 422, 500), statuses
    # every recorded call is one request, plus the one refused request (retried within its call)
    assert len(statuses) == sum(len(r.calls) for r in results) + 1, statuses


def test_completion_endpoint(server):
    backend = OpenAIBackend("smollm2", base_url=server.base_url, api="completion")
    question = "Tom has 5 apples and buys 3 more. How many apples does he have?"
    result = SelfRefine("gsm8k", backend, max_iterations=1).run(question, reference=8)
    assert result.stop_reason is not StopReason.ERROR, result.error
    assert result.iterations[0].draft.startswith("def solution")
    assert result.usage.calls >= 2


def test_server_dying_mid_run_keeps_finished_drafts():
    require_smollm()
    srv = Server()
    backend = OpenAIBackend("smollm2", base_url=srv.base_url, timeout=120)
    engine = SelfRefine("commongen", backend, max_iterations=2, backend_retries=2, retry_base_delay=0.05)

    async def drive():
        result = None
        async for step in engine.astream("sun, beach, towel"):
            if isinstance(step, DraftStep) and step.iteration == 0:
                srv.stop()  # the server dies after the first draft
            if isinstance(step, ResultStep):
                result = step.result
        await engine.aclose()
        return result

    try:
        result = asyncio.run(drive())
    finally:
        srv.stop()
    assert result.stop_reason is StopReason.ERROR
    assert "failed 3 times" in result.error and "cannot reach server" in result.error
    assert result.output == result.iterations[0].draft and result.output
    failed = [c for c in result.calls if not c.ok]
    assert [c.role for c in failed] == ["feedback"] * 3, failed
    assert [c.attempt for c in failed] == [1, 2, 3]
