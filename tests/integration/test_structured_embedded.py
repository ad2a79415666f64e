"""Structured output on the default embedded model (Qwen2.5-Coder-1.5B via llama.cpp, issue 38
item 3): a first draft decoded under a small schema (llama.cpp's grammar, from the run's
``json_schema``) is JSON that validates, so the run stops on it with its parsed value."""

from __future__ import annotations

import json

import pytest

from selfrefine import SelfRefine, StopReason

pytestmark = pytest.mark.integration

CAPITAL = {
    "type": "object",
    "properties": {"country": {"type": "string", "maxLength": 30}, "capital": {"type": "string", "maxLength": 30}},
    "required": ["country", "capital"],
    "additionalProperties": False,
}


def test_a_draft_decoded_under_a_small_schema_parses(embedded):
    engine = SelfRefine("chat", embedded, json_schema=CAPITAL, derive_checks=False, max_tokens=48, max_iterations=1)
    result = engine.run("What is the capital of France?")  # not closed: the session's model is shared
    first = result.iterations[0]
    assert first.finish_reason == "stop", first.draft  # the grammar ended the object within 48 tokens
    assert set(json.loads(first.draft)) == {"country", "capital"}
    assert first.verification.passed and result.stop_reason is StopReason.VERIFIED
    assert result.parsed == json.loads(result.output) and len(result.iterations) == 1
