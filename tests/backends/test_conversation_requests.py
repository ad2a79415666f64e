"""A request that sends a conversation as it is (``CompletionRequest.turns``: chat's first
draft): every backend gets the user's own messages, the response cache and the records keep
them, and a request cannot carry a system prompt beside the conversation's own.

The ``openai:`` backend talks, through the real SDK, to a real threaded server on
127.0.0.1 that records each request body (conftest.JsonServer).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Iterator

import pytest
from conftest import JsonServer, chat_completion
from pydantic import ValidationError

from selfrefine.backends.base import CompletionRequest, Turn, chat_messages, flat_prompt, shown_prompt
from selfrefine.backends.fake import FakeBackend
from selfrefine.backends.openai_compat import OpenAIBackend
from selfrefine.core.bans import TokenBan
from selfrefine.evaluation.response_cache import ResponseCache

MESSAGES = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "My name is Ana."},
    {"role": "assistant", "content": "Hello Ana!"},
    {"role": "user", "content": "What is my name?"},
]


def conversation(**kw) -> CompletionRequest:
    *before, last = MESSAGES
    return CompletionRequest(role="generate", prompt=last["content"], turns=[Turn(**m) for m in before], **kw)


def test_a_conversation_goes_as_its_own_messages_and_a_prompt_as_before():
    assert chat_messages(conversation()) == MESSAGES
    plain = CompletionRequest(role="feedback", prompt="Check it.", system="You check.")
    assert chat_messages(plain) == [
        {"role": "system", "content": "You check."},
        {"role": "user", "content": "Check it."},
    ]
    # a completion endpoint gets a transcript ending on the assistant's cue; the prompt form is unchanged
    assert flat_prompt(conversation()) == (
        "System: Be brief.\n\nUser: My name is Ana.\n\nAssistant: Hello Ana!\n\nUser: What is my name?\n\nAssistant:"
    )
    assert flat_prompt(plain) == "You check.\n\nCheck it."
    # one user message alone (turns []) is the plain question: no label, no system prompt
    alone = CompletionRequest(role="generate", prompt="Hi there, who are you?", turns=[])
    assert chat_messages(alone) == [{"role": "user", "content": "Hi there, who are you?"}]
    assert flat_prompt(alone) == shown_prompt(alone) == "Hi there, who are you?"
    assert shown_prompt(plain) == "Check it."  # records keep the prompt as before


def test_a_conversation_carries_its_own_system_turn_only():
    with pytest.raises(ValidationError, match="give turns or system"):
        conversation(system="You are a task's prompt.")
    with pytest.raises(ValidationError):
        Turn(role="tool", content="x")


def test_the_fake_records_the_messages_and_counts_their_words():
    fake = FakeBackend(table={"My name is Ana": "Your name is Ana."})  # looked up in the whole conversation
    response = asyncio.run(fake.complete(conversation()))
    assert response.text == "Your name is Ana."
    assert chat_messages(fake.requests[0]) == MESSAGES
    assert response.prompt_tokens == len("Be brief. My name is Ana. Hello Ana! What is my name?".split())
    assert fake.prompts() == [flat_prompt(conversation())]


def test_the_cache_key_holds_the_messages_and_keeps_the_old_keys():
    a = conversation()
    other = a.model_copy(update={"turns": [Turn(role="user", content="My name is Bo.")]})
    assert ResponseCache.key("m", a) != ResponseCache.key("m", other)
    assert ResponseCache.key("m", a) != ResponseCache.key("m", a.model_copy(update={"turns": None}))
    # a request without turns (or a ban) hashes as it did before the field existed
    plain = CompletionRequest(role="generate", prompt="p", seed=1)
    fields = plain.model_dump(mode="json", exclude={"top_logprobs", "turns", "purpose", "ban"})
    old = hashlib.sha256(json.dumps({"model": "m", "request": fields}, sort_keys=True).encode()).hexdigest()
    assert ResponseCache.key("m", plain) == old
    # a banned request is another reply: never answered from the unbanned one's entry
    assert ResponseCache.key("m", plain.model_copy(update={"ban": TokenBan(chars=",")})) != old


class Server(JsonServer):
    def answer(self, path: str, body: dict) -> tuple[int, dict]:
        usage = {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11}
        if path.endswith("/completions") and "chat" not in path:
            choice = {"index": 0, "finish_reason": "stop", "text": "Ana."}
            return 200, {"id": "x", "object": "text_completion", "created": 1, "model": "m", "choices": [choice]}
        choice = {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Ana."}}
        return 200, chat_completion(choice, usage)


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    srv = Server()
    yield srv
    srv.close()


def _complete(backend: OpenAIBackend, request: CompletionRequest) -> str:
    async def go() -> str:
        try:
            return (await backend.complete(request)).text
        finally:
            await backend.aclose()

    return asyncio.run(go())


def test_openai_sends_the_conversation_as_chat_messages_or_its_transcript(server):
    server.bodies = []
    assert _complete(OpenAIBackend("m", base_url=server.base_url), conversation()) == "Ana."
    assert server.bodies[-1]["messages"] == MESSAGES
    assert _complete(OpenAIBackend("m", base_url=server.base_url, api="completion"), conversation()) == "Ana."
    assert server.bodies[-1]["prompt"] == flat_prompt(conversation())
