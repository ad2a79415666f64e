"""``ban_tokens`` on the fake model: each draft's request (first draft, samples, repairs) carries
what the run's checks forbid outright (core/bans.py), derived or given; the derivation's and the
critic's requests carry none, and without the option no request does. The real decoder's side
is tests/integration/test_token_bans_embedded.py."""

from __future__ import annotations

import pytest

from selfrefine import FakeBackend, SelfRefine
from selfrefine.core.bans import TokenBan

NO_COMMA = {"type": "forbidden_chars", "chars": ","}
CAPITALS = {"type": "case", "letters": "upper"}
WORDS = {"type": "count", "unit": "words", "relation": "at most", "n": 6}


def bans(model: FakeBackend) -> list[tuple[str, str | None, TokenBan | None]]:
    return [(r.role, r.purpose, r.ban) for r in model.requests]


def test_every_draft_request_carries_the_checks_bans_and_no_other_request_does():
    # draft 0 fails the word count; the repair passes: two draft requests, both banned
    model = FakeBackend({"generate": ["THE CAT SAT ON THE WARM MAT ALL DAY."], "refine": ["THE CAT SAT."]})
    engine = SelfRefine(
        "chat", model, checks=[NO_COMMA, CAPITALS, WORDS], derive_checks=False, ban_tokens=True,
        refine_form="focused", max_iterations=1,
    )  # fmt: skip
    result = engine.run("Describe the cat in at most 6 words, in capitals, with no commas.")
    assert result.output == "THE CAT SAT."
    want = TokenBan(chars=",", letters="lower")
    assert bans(model) == [("generate", None, want), ("refine", None, want)]


def test_derived_checks_ban_the_drafts_and_the_derivation_call_is_not_banned():
    model = FakeBackend(
        {"generate": ["a short reply with no commas"], "checks": ['{"checks": []}']},
    )
    engine = SelfRefine("chat", model, ban_tokens=True, max_iterations=0)
    engine.run("Write one line about rain. Do not use any commas in your reply.")
    drafts = [r for r in model.requests if r.role == "generate" and r.purpose is None]
    assert [r.ban for r in drafts] == [TokenBan(chars=",")]  # code read "do not use any commas"
    assert all(r.ban is None for r in model.requests if r.purpose is not None or r.role == "feedback")


@pytest.mark.parametrize("options", [{}, {"ban_tokens": False}], ids=["default", "off"])
def test_without_the_option_no_request_is_banned(options):
    model = FakeBackend({"generate": ["THE CAT SAT."]})
    SelfRefine("chat", model, checks=[NO_COMMA, CAPITALS], derive_checks=False, max_iterations=0, **options).run(
        "The cat, in capitals, no commas."
    )
    assert [r.ban for r in model.requests] == [None]


def test_contradicting_case_checks_ban_no_letters():
    model = FakeBackend({"generate": ["The cat sat."]})
    lower = {"type": "case", "letters": "lower"}
    SelfRefine(
        "chat", model, checks=[lower, CAPITALS, NO_COMMA], derive_checks=False, max_iterations=0, ban_tokens=True
    ).run("The cat.")
    assert [r.ban for r in model.requests] == [TokenBan(chars=",")]
