"""A run with a JSON Schema on an ``openai:`` model (issue 38 item 3): each draft's request
carries the schema as ``response_format`` (``json_schema``, strict where the schema is in
OpenAI's strict subset; ``json_object`` for any object), the critic's stays as it was. The
server is a real HTTP server on 127.0.0.1 that records each body and answers as a chat server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from conftest import JsonServer, chat_completion

from selfrefine import SelfRefine
from selfrefine.backends.openai_compat import OpenAIBackend, strict_subset

STRICT = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}}},
    "required": ["name", "tags"],
    "additionalProperties": False,
}
LOOSE = {"type": "object", "properties": {"name": {"type": "string"}}}  # name optional, others allowed


class Server(JsonServer):
    """Answers every draft with ``reply`` and every critique with no issues."""

    reply = '{"name": "x", "tags": []}'

    def answer(self, path: str, body: dict) -> tuple[int, dict]:
        system = body["messages"][0]["content"] if body["messages"][0]["role"] == "system" else ""
        content = self.reply if "JSON Schema" in system or "JSON object" in system else '{"issues": []}'
        choice = {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        return 200, chat_completion(choice, usage)


@pytest.fixture
def server() -> Iterator[Server]:
    srv = Server()
    yield srv
    srv.close()


def run(server: Server, schema: dict, **options) -> list[dict]:
    backend = OpenAIBackend("m", base_url=server.base_url, api_key="k")
    with SelfRefine("chat", backend, json_schema=schema, derive_checks=False, **options) as engine:
        engine.run("Invent a tag list.")
    return server.bodies


def test_a_drafts_request_carries_its_schema_as_a_strict_response_format(server):
    [draft] = run(server, STRICT)
    assert draft["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "draft", "schema": STRICT, "strict": True},
    }
    assert "JSON Schema" in draft["messages"][0]["content"]  # the shape is told, beside the constraint


def test_a_schema_outside_the_strict_subset_is_sent_not_strict(server):
    server.reply = '{"name": "x"}'
    [draft] = run(server, LOOSE)
    assert draft["response_format"]["json_schema"]["strict"] is False  # OpenAI would refuse it strict


def test_any_object_is_asked_as_json_object_and_no_constrain_sends_none(server):
    server.reply = '{"a": 1}'
    [draft] = run(server, {"type": "object"})
    assert draft["response_format"] == {"type": "json_object"}
    server.bodies = []
    [draft] = run(server, {"type": "object"}, constrained=False)
    assert "response_format" not in draft


def test_the_critics_request_is_unchanged(server):
    server.reply = '{"name": 1, "tags": []}'  # fails the schema: the critic is asked (chat: hybrid)
    bodies = run(server, STRICT, max_iterations=1)
    critic = next(b for b in bodies if "JSON Schema" not in b["messages"][0]["content"])
    assert critic["response_format"]["json_schema"]["name"] == "feedback"
    assert critic["response_format"]["json_schema"]["strict"] is True


def test_strict_subset():
    assert strict_subset(STRICT)
    assert not strict_subset(LOOSE)
    assert not strict_subset({"type": "object"})
    assert strict_subset({"type": "array", "items": {"type": "integer"}})
    assert not strict_subset({"type": "array", "items": LOOSE})
