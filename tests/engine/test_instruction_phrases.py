"""The checks code reads from a request's common phrasings (checks/instructions/phrases.py):
each rule on a request that states its instruction, and on one that does not (a number that
is no count, a topic's word, a negation)."""

from __future__ import annotations

import pytest

from selfrefine.checks.instructions import parse_checks
from selfrefine.checks.instructions.phrases import stated


def kinds(request: str) -> list[dict]:
    found = stated(request)
    parse_checks(found)  # every check read is a valid check
    return found


@pytest.mark.parametrize(
    ("request_", "expected"),
    [
        ("Describe Paris in at least 120 words.", {"type": "count", "unit": "words", "relation": "at least", "n": 120}),
        ("Reply in fewer than five sentences.", {"type": "count", "unit": "sentences", "relation": "at most", "n": 4}),
        ("Write a 300+ word essay.", {"type": "count", "unit": "words", "relation": "at least", "n": 300}),
        ("List exactly 3 bullet points.", {"type": "count", "unit": "bullets", "relation": "exactly", "n": 3}),
        ("Write two paragraphs separated by ***.",
         {"type": "count", "unit": "paragraphs", "relation": "exactly", "n": 2, "marker": "***"}),
        ("Use 4 sections, each starting with Part X.",
         {"type": "count", "unit": "sections", "relation": "exactly", "n": 4, "marker": "Part"}),
        ("Highlight at least 2 parts with markdown.", {"type": "count", "unit": "highlights", "relation": "at least", "n": 2}),
        ("Please avoid commas entirely.", {"type": "forbidden_chars", "chars": ","}),
        ("answer all in lowercase letters.", {"type": "case", "letters": "lower"}),
        ("Write it entirely in capital letters.", {"type": "case", "letters": "upper"}),
        ("Make it sound like a pirate and capitalize every letter.", {"type": "case", "letters": "upper"}),
        ("Put double quotation marks around the whole reply.", {"type": "quoted"}),
        ("Return the result in JSON format.", {"type": "json"}),
        ("Give it a title in double angular brackets like <<this>>.", {"type": "title"}),
        ("Finish with a P.S. for the reader.", {"type": "postscript", "marker": "P.S."}),
        ('End your email with "Best, Ana".', {"type": "ends_with", "phrase": "Best, Ana"}),
        ('Start your answer with "Dear Sam".', {"type": "starts_with", "phrase": "Dear Sam"}),
        ('Include the keywords "lamp" and "desk".', {"type": "keywords", "words": ["lamp", "desk"]}),
        ('Do not use the words "very" or "really".', {"type": "forbidden_words", "words": ["very", "really"]}),
        ("The letter z should appear at least 3 times.",
         {"type": "letter_frequency", "letter": "z", "relation": "at least", "n": 3}),
        ('Use the word "green" twice.', {"type": "word_frequency", "word": "green", "relation": "exactly", "n": 2}),
        ("Answer only in German, no other language.", {"type": "language", "code": "de"}),
        ("Start the second paragraph with the word 'meanwhile'.",
         {"type": "paragraph_start", "nth": 2, "word": "meanwhile"}),
    ],
)  # fmt: skip
def test_a_stated_instruction_is_read(request_, expected):
    assert expected in kinds(request_)


@pytest.mark.parametrize(
    "request_",
    [
        "Explain photosynthesis to a ten-year-old.",  # a number that counts nothing asked of the reply
        "Write a 500 word essay about trains.",  # a size said loosely: no relation, no "+"
        "Write a paragraph on the US elections.",  # a topic's words: no keyword instruction
        "Describe a knife and fork, and how commas changed printing.",  # commas named, not forbidden
        "Summarize the article about JSON parsers.",  # JSON named, not asked for
    ],
)
def test_a_request_that_states_nothing_checkable_gets_no_check(request_):
    assert kinds(request_) == []


def test_a_repeated_request_is_the_text_before_the_instruction_or_after_it():
    before = "Write a haiku about frogs. First repeat the request above word for word, then answer."
    assert {"type": "starts_with", "phrase": "Write a haiku about frogs."} in kinds(before)
    after = "Repeat the request below first, then answer it. Write a haiku about frogs."
    assert {"type": "starts_with", "phrase": "Write a haiku about frogs."} in kinds(after)


def test_a_counted_word_needs_no_keyword_check_and_a_negated_list_is_forbidden():
    found = kinds('Make sure to use the word "clearly" at least 2 times.')
    assert [c["type"] for c in found] == ["word_frequency"]
    found = kinds('Please use plain words and do not say the word "nickname".')
    assert {"type": "forbidden_words", "words": ["nickname"]} in found and all(c["type"] != "keywords" for c in found)
