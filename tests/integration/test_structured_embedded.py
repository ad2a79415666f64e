"""Structured output on the default embedded model (Qwen2.5-Coder-1.5B via llama.cpp, issue 38
item 3): a first draft decoded under a small schema (llama.cpp's grammar, from the run's
``json_schema``) is JSON that validates, so the run stops on it with its parsed value; a schema
llama.cpp cannot decode under is decoded free (SmolLM2-135M: plumbing only)."""

from __future__ import annotations

import asyncio
import json

import pytest

from selfrefine import SelfRefine, StopReason
from selfrefine.backends.base import CompletionRequest

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


@pytest.mark.parametrize(
    "schema",
    [
        {
            "type": "string",
            "pattern": "^[a-z]{1,8}\\.[a-z]{2,3}$",
        },  # the converter writes a grammar llama.cpp cannot parse
        {"not": {"type": "string"}},  # the converter refuses it
    ],
)
def test_a_schema_llama_cpp_cannot_decode_under_is_decoded_free_not_a_crash(smollm, schema, caplog):
    # sampling under an unparsable grammar crashed the process (a NULL sampler); now the reply
    # is written free (the loop validates it) and the log says why, once per schema
    request = CompletionRequest(role="generate", prompt="Write a domain name.", max_tokens=8, json_schema=schema)
    with caplog.at_level("WARNING", logger="selfrefine.embedded"):
        reply = asyncio.run(smollm.complete(request))
        asyncio.run(smollm.complete(request))
    assert reply.completion_tokens > 0
    assert [r.getMessage().startswith("llama.cpp cannot decode under this JSON schema") for r in caplog.records] == [
        True
    ]
