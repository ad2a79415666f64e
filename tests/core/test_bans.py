"""Token bans (core/bans.py): what a check forbids outright, and how several bans join."""

from __future__ import annotations

import pytest

from selfrefine.checks.instructions import parse_checks
from selfrefine.core.bans import TokenBan, joined


def test_a_ban_refuses_tokens_holding_a_forbidden_character_or_a_letter_of_the_banned_case():
    commas = TokenBan(chars=",")
    assert commas.refuses(",") and commas.refuses("ing,") and not commas.refuses(" and")
    no_capitals = TokenBan(letters="upper")
    assert no_capitals.refuses(" The") and no_capitals.refuses("É") and not no_capitals.refuses(" the")
    no_lowercase = TokenBan(letters="lower")
    assert no_lowercase.refuses(" the") and not no_lowercase.refuses(" THE") and not no_lowercase.refuses("42!")
    assert not TokenBan(letters="upper").refuses("")  # a control token (end of turn) reads as "": a reply can end


@pytest.mark.parametrize(
    ("check", "ban"),
    [
        ({"type": "forbidden_chars", "chars": ", !"}, TokenBan(chars=",!")),
        ({"type": "case", "letters": "lower"}, TokenBan(letters="upper")),
        ({"type": "case", "letters": "upper"}, TokenBan(letters="lower")),
        ({"type": "letter_frequency", "letter": "E", "relation": "at most", "n": 0}, TokenBan(chars="eE")),
        ({"type": "letter_frequency", "letter": "e", "relation": "at most", "n": 2}, None),
        ({"type": "count", "unit": "words", "relation": "at most", "n": 30}, None),
        ({"type": "forbidden_words", "words": ["story"]}, None),
    ],
    ids=["chars", "lowercase", "capitals", "no-letter", "few-letters", "count", "words"],
)
def test_each_check_bans_only_what_it_forbids_outright(check, ban):
    [parsed] = parse_checks([check])
    assert parsed.ban() == ban


def test_joined_bans_add_their_characters_and_contradicting_cases_ban_neither():
    assert joined([]) is None and joined([None]) is None
    assert joined([TokenBan(chars=","), TokenBan(chars=";,"), None]) == TokenBan(chars=",;")
    assert joined([TokenBan(chars=","), TokenBan(letters="upper")]) == TokenBan(chars=",", letters="upper")
    # "all lowercase" beside "all capitals": no reply passes both; the checks decide, not the decoder
    assert joined([TokenBan(letters="upper"), TokenBan(letters="lower")]) is None
    assert joined([TokenBan(letters="upper"), TokenBan(letters="lower"), TokenBan(chars="!")]) == TokenBan(chars="!")
