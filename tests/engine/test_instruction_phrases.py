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


# issue 45 item 4: instructions code read too seldom, so the derivation's model call (asked only
# where code leaves wording unread) was skipped with them missing; one phrasing of each class
@pytest.mark.parametrize(
    ("request_", "expected"),
    [
        ("Tell a story. The number of sentences should be in the range of 8 to 12.",
         [{"type": "count", "unit": "sentences", "relation": "at least", "n": 8},
          {"type": "count", "unit": "sentences", "relation": "at most", "n": 12}]),
        ("Describe Oslo in 150 words or less.", [{"type": "count", "unit": "words", "relation": "at most", "n": 150}]),
        ("Describe Oslo in 150 or fewer words.", [{"type": "count", "unit": "words", "relation": "at most", "n": 150}]),
        ("Answer in 3 or 4 sentences.", [{"type": "count", "unit": "sentences", "relation": "at least", "n": 3},
                                         {"type": "count", "unit": "sentences", "relation": "at most", "n": 4}]),
        ("Write a poem. Highlight some lines with markdown, like *this line*.",
         [{"type": "count", "unit": "highlights", "relation": "at least", "n": 1}]),
        ('Highlight a few phrases twice with "*".',
         [{"type": "count", "unit": "highlights", "relation": "at least", "n": 2}]),
        ("Italicize at least 4 keywords, like *this*.",
         [{"type": "count", "unit": "highlights", "relation": "at least", "n": 4}]),
        ('Review the film. The very last sentence of your response should be "See it twice."',
         [{"type": "ends_with", "phrase": "See it twice."}]),
        ("Write a memo. Finish your memo with this exact phrase: Any questions?",
         [{"type": "ends_with", "phrase": "Any questions?"}]),
        ("Write about school. Make sure the word homework doesn't appear at all.",
         [{"type": "forbidden_words", "words": ["homework"]}]),
        ("Write a rant, but do not include rude words such as 'idiot', 'stupid', etc.",
         [{"type": "forbidden_words", "words": ["idiot", "stupid"]}]),
        ("Avoid using the following keywords: rain, snow, hail\nKeep it short.",
         [{"type": "forbidden_words", "words": ["rain", "snow", "hail"]}]),
        ("Use the word banana 2 to 4 times.",
         [{"type": "word_frequency", "word": "banana", "relation": "at least", "n": 2},
          {"type": "word_frequency", "word": "banana", "relation": "at most", "n": 4}]),
        ("The word river should appear 3 or more times.",
         [{"type": "word_frequency", "word": "river", "relation": "at least", "n": 3}]),
        ("Mention the keyword 'tide' for more than 2 times.",
         [{"type": "word_frequency", "word": "tide", "relation": "at least", "n": 3}]),
        ("Stress a few words in caps. Limit the number of words with all capital letters to less than six.",
         [{"type": "capital_words", "relation": "at most", "n": 5}]),
        ("Use some words in all caps, but those all-caps words should appear at most 4 times.",
         [{"type": "capital_words", "relation": "at most", "n": 4}]),
        ("Write a jingle. Commas are not allowed in it.", [{"type": "forbidden_chars", "chars": ","}]),
        ("Explain tides. Double quotes should be placed around your entire answer.", [{"type": "quoted"}]),
        ("Wrap your entire response (the reasoning steps and also the final number you get) with double quotation marks.",
         [{"type": "quoted"}]),
        ("Write it in English, with all letters lowercased.", [{"type": "case", "letters": "lower"}]),
        ("Your reply should not contain any capital letters.", [{"type": "case", "letters": "lower"}]),
        ("Make sure to only use capital letters in your reply.", [{"type": "case", "letters": "upper"}]),
        ("Write 2 paragraphs separated by two new lines. Paragraph 2 must start with the word 'then'.",
         [{"type": "paragraph_start", "nth": 2, "word": "then"}]),
        ("Plan my week in this format:\nMonday\n***\nTuesday\n***\nWednesday",
         [{"type": "count", "unit": "paragraphs", "relation": "exactly", "n": 3, "marker": "***"}]),
        ("It should be in English and have no capital letters.", [{"type": "language", "code": "en"}]),
        ("Your whole reply should be in lowercase english.", [{"type": "language", "code": "en"}]),
        ("Write a 3 section plan. Each section should be noted as Part X.",
         [{"type": "count", "unit": "sections", "relation": "exactly", "n": 3, "marker": "Part"}]),
        ("Write a report with two sections (Chapter 1 and Chapter 2).",
         [{"type": "count", "unit": "sections", "relation": "exactly", "n": 2, "marker": "Chapter"}]),
        ("The poem should have exactly 4 stanzas, separated by ***.",
         [{"type": "count", "unit": "paragraphs", "relation": "exactly", "n": 4, "marker": "***"}]),
        ("Answer in exactly 5 paragraphs, and the last paragraph must start with the word 'finally'.",
         [{"type": "paragraph_start", "nth": 5, "word": "finally"}]),
        ('Do not include the letter "z" anywhere in your reply.',
         [{"type": "letter_frequency", "letter": "z", "relation": "at most", "n": 0}]),
        ("Avoid using the letter e more than twice.",
         [{"type": "letter_frequency", "letter": "e", "relation": "at most", "n": 2}]),
        ("The word ocean should not appear more than 3 times.",
         [{"type": "word_frequency", "word": "ocean", "relation": "at most", "n": 3}]),
        ('Fix this sentence: "Me and him goes home."\nRepeat the text above word for word, then fix it.',
         [{"type": "starts_with", "phrase": 'Fix this sentence: "Me and him goes home."'}]),
    ],
)  # fmt: skip
def test_more_phrasings_of_a_stated_instruction_are_read(request_, expected):
    found = kinds(request_)
    for check in expected:
        assert check in [{k: v for k, v in c.items() if k in check} for c in found]


@pytest.mark.parametrize(
    "request_",
    [
        "Write about the word 'ocean'; it should not appear more than twice.",  # a limit (at most 2), not a ban
        "Explain how to highlight text in a word processor.",  # highlighting named, no markdown shown
        "Write a story where the word dragon appears 2 times, then describe the dragon.",  # no range
    ],
)
def test_a_new_phrasing_that_states_no_such_instruction_reads_none(request_):
    found = kinds(request_)
    assert not any(c["type"] == "forbidden_words" or c.get("unit") == "highlights" for c in found)
    if "dragon" in request_:  # a count said once, no range
        assert not any(c["type"] == "word_frequency" and c["relation"] != "exactly" for c in found)


def test_a_request_is_never_read_as_asking_both_letter_cases():
    # IFEval-style: the lowercase is negated 50 characters back, beyond the plain reading's window
    caps = (
        "Use all capital letters to express the craziness. Basically, not a single word in your "
        "entire reply should contain lowercase letters."
    )
    assert [c for c in kinds(caps) if c["type"] == "case"] == [{"type": "case", "letters": "upper"}]
    both = "Write it in all lowercase letters. Write it in all capital letters."  # contradictory: code reads neither
    assert [c for c in kinds(both) if c["type"] == "case"] == []
