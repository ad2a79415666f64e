"""Token bans on the default embedded model (core/bans.py, backends/token_bans.py): a reply the
model writes with commas, and one it writes in lowercase, come back without them when the
request's ban refuses those tokens; and a run with ``ban_tokens`` returns a first draft that
passes its "no commas" check. Short greedy calls (at most 48 tokens each)."""

from __future__ import annotations

import asyncio

import pytest

from selfrefine import SelfRefine
from selfrefine.backends.base import CompletionRequest
from selfrefine.core.bans import TokenBan

pytestmark = pytest.mark.integration

LIST = "Name the first five planets from the Sun, separated by commas, on one line."


def reply(backend, prompt: str, ban: TokenBan | None) -> str:
    request = CompletionRequest(role="generate", prompt=prompt, max_tokens=48, temperature=0.0, ban=ban)
    return asyncio.run(backend.complete(request)).text


def test_a_banned_character_never_appears_where_the_model_writes_it_unbanned(embedded):
    assert "," in reply(embedded, LIST, None)  # the model's own reply lists with commas
    banned = reply(embedded, LIST, TokenBan(chars=","))
    assert "," not in banned and "Mercury" in banned  # the same answer, other separators


def test_a_banned_letter_case_never_appears_and_the_reply_still_ends(embedded):
    prompt = "Say hello to a friend in one short sentence."
    assert any(c.islower() for c in reply(embedded, prompt, None))
    text = reply(embedded, prompt, TokenBan(letters="lower"))
    assert text.strip() and not any(c.islower() for c in text)


def test_a_run_with_ban_tokens_drafts_without_the_forbidden_character(embedded):
    engine = SelfRefine(
        "chat", embedded, checks=[{"type": "forbidden_chars", "chars": ","}], derive_checks=False,
        ban_tokens=True, max_iterations=0, max_tokens=48, temperature=0,
    )  # fmt: skip
    result = engine.run(LIST)
    assert "," not in result.output and result.iterations[0].verification.passed
