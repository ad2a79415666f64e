"""Concurrency and prefix-cache bookkeeping (no model needed)."""

from __future__ import annotations

import asyncio
import hashlib
import json

import pytest
from openai.types.chat import ChatCompletion

from selfrefine import SelfRefine
from selfrefine.backends.base import CompletionRequest, CompletionResponse
from selfrefine.backends.fake import FakeBackend
from selfrefine.backends.openai_compat import cached_prompt_tokens
from selfrefine.backends.registry import get_backend
from selfrefine.core.errors import ConfigError
from selfrefine.core.records import CallRecord, Usage


class JitteryBackend(FakeBackend):
    """Replies depend only on the prompt; latency varies per prompt, so concurrent runs
    interleave their calls differently from serial ones."""

    max_concurrency = 3

    def __init__(self) -> None:
        super().__init__(default=self.reply)
        self.in_flight = self.peak = 0

    @staticmethod
    def reply(request: CompletionRequest) -> str:
        digest = hashlib.sha256(request.prompt.encode()).hexdigest()
        if request.role == "feedback":
            return json.dumps({"missing_concepts": [f"c{digest[:2]}"], "commonsense": "NONE"})
        return f"A sentence {digest[:8]} about {request.prompt[-30:].splitlines()[-1]}."

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            await asyncio.sleep(int(hashlib.sha256(request.prompt.encode()).hexdigest()[:2], 16) / 255 * 0.01)
            return await super().complete(request)
        finally:
            self.in_flight -= 1


def test_concurrent_loops_give_the_trajectories_of_serial_runs_within_the_backend_limit():
    inputs = [f"dog, ball, park, tree{i}" for i in range(12)]
    serial = [SelfRefine("commongen", JitteryBackend(), max_iterations=3, seed=i).run(x) for i, x in enumerate(inputs)]
    backend = JitteryBackend()

    async def together():
        engines = [SelfRefine("commongen", backend, max_iterations=3, seed=i) for i in range(len(inputs))]
        return await asyncio.gather(*(e.arun(x) for e, x in zip(engines, inputs)))

    concurrent = asyncio.run(together())
    for s, c in zip(serial, concurrent):
        assert c.drafts == s.drafts
        assert [i.feedback for i in c.iterations] == [i.feedback for i in s.iterations]
        assert c.stop_reason == s.stop_reason
    assert backend.peak >= 2  # they really overlapped


def test_one_engine_holds_its_backend_to_the_declared_limit():
    backend = JitteryBackend()
    engine = SelfRefine("commongen", backend, max_iterations=3)

    async def together():
        return await asyncio.gather(*(engine.arun(f"cat, mat, hat{i}") for i in range(10)))

    asyncio.run(together())
    assert backend.peak == backend.max_concurrency


def test_examples_in_flight_follow_the_backend_limits():
    assert SelfRefine("commongen", FakeBackend(default="x")).examples_in_flight() == 4 * FakeBackend.max_concurrency
    slow = FakeBackend(default="x")
    slow.max_concurrency = 1
    assert SelfRefine("commongen", slow).examples_in_flight() == 4


def test_cached_prompt_tokens_from_standard_usage_and_llama_server_timings():
    base = {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "hi"}}],
    }
    standard = ChatCompletion.model_validate(
        {
            **base,
            "usage": {
                "prompt_tokens": 100,
                "completion_tokens": 5,
                "total_tokens": 105,
                "prompt_tokens_details": {"cached_tokens": 64},
            },
        }
    )
    llama_server = ChatCompletion.model_validate(
        {
            **base,
            "usage": {"prompt_tokens": 100, "completion_tokens": 5, "total_tokens": 105},
            "timings": {"cache_n": 90, "prompt_n": 10},
        }
    )
    silent = ChatCompletion.model_validate(
        {**base, "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
    )
    assert cached_prompt_tokens(standard) == 64
    assert cached_prompt_tokens(llama_server) == 90
    assert cached_prompt_tokens(silent) is None


def test_usage_sums_reused_prompt_tokens():
    calls = [
        CallRecord(role="generate", iteration=0, prompt_tokens=100, cached_prompt_tokens=80),
        CallRecord(role="feedback", iteration=0, prompt_tokens=50, cached_prompt_tokens=None),
    ]
    assert Usage.of(calls).cached_prompt_tokens == 80


def test_boolean_backend_options_are_parsed_and_checked():
    backend = get_backend("openai:m", base_url="http://127.0.0.1:1/v1", cache_prompt="false")
    assert backend.cache_prompt is False
    with pytest.raises(ConfigError, match="true or false"):
        get_backend("openai:m", base_url="http://127.0.0.1:1/v1", cache_prompt="maybe")
