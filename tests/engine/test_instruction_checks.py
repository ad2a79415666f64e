"""Instruction checks (checks/instructions, issue 38): each check type gives the official IFEval
verifier's verdict on hand-made texts (pass, fail and edge cases), says what failed in words
with numbers, validates strictly, has a compact JSON schema that llama.cpp turns into a
grammar, states a task file's ``checks:`` with the same verdicts, and reads a hostile draft in
bounded, linear time."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from selfrefine import Checks, TaskError
from selfrefine.checks.instructions import (
    CHECK_TYPES,
    MAX_CHECK_CHARS,
    Count,
    EndsWith,
    ForbiddenChars,
    InstructionChecks,
    Language,
    ParagraphStart,
    checks_schema,
    from_checks,
    parse_checks,
    schema_size,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

# (IFEval instruction, its kwargs, a text, the official verdict): the verdict is asserted for
# the official verifier too, so a case that stops testing what its comment says fails
CASES = [
    ("punctuation:no_comma", {}, "No commas here at all.", True),
    ("punctuation:no_comma", {}, "One, two.", False),
    ("punctuation:no_comma", {}, "   ", False),  # an empty response follows nothing
    ("length_constraints:number_words", {"relation": "at least", "num_words": 5}, "one two three four five", True),
    ("length_constraints:number_words", {"relation": "at least", "num_words": 4}, "don't stop", False),  # 3 words
    ("length_constraints:number_words", {"relation": "less than", "num_words": 3}, "a well-known fact", False),
    ("length_constraints:number_words", {"relation": "less than", "num_words": 3}, "എത്തിയപ്പോഴാണല്ലോ ഞാനോ", True),
    ("length_constraints:number_sentences", {"relation": "less than", "num_sentences": 3}, "Dr. Smith went home. He slept.", True),
    ("length_constraints:number_sentences", {"relation": "at least", "num_sentences": 3}, "It costs 5. then we go. Really? Yes!", True),
    ("length_constraints:number_sentences", {"relation": "at least", "num_sentences": 4}, "It costs 5. then we go. Really? Yes!", False),
    ("length_constraints:number_sentences", {"relation": "less than", "num_sentences": 2}, "A list\n- no periods\n- at all", True),
    ("length_constraints:number_sentences", {"relation": "at least", "num_sentences": 3}, "Wait... The end is near. I. Introduction", True),
    ("length_constraints:number_sentences", {"relation": "less than", "num_sentences": 3}, 'He said "Go." Then he left.', True),
    ("length_constraints:number_sentences", {"relation": "at least", "num_sentences": 2}, "See the U.S. Army. It is big.", True),
    ("length_constraints:number_sentences", {"relation": "at least", "num_sentences": 3}, "See the U.S. Army. It is big.", False),
    ("length_constraints:number_paragraphs", {"num_paragraphs": 3}, "A\n***\nB\n***\nC", True),
    ("length_constraints:number_paragraphs", {"num_paragraphs": 3}, "A\n\nB\n\nC", False),  # *** separates them
    ("length_constraints:number_paragraphs", {"num_paragraphs": 3}, "A\n***\n\n***\nC", False),  # an empty one
    ("length_constraints:number_paragraphs", {"num_paragraphs": 3}, "***\nA\n***\nB\n***\nC\n***", True),
    ("length_constraints:nth_paragraph_first_word", {"num_paragraphs": 2, "nth_paragraph": 2, "first_word": "summer"}, "Intro.\n\nSummer, is hot.", True),
    ("length_constraints:nth_paragraph_first_word", {"num_paragraphs": 2, "nth_paragraph": 2, "first_word": "summer"}, "Intro.\n\n**Summer** is hot.", False),
    ("length_constraints:nth_paragraph_first_word", {"num_paragraphs": 2, "nth_paragraph": 2, "first_word": "summer"}, "Intro.\n\nSummer is hot.\n\nMore.", False),
    ("keywords:forbidden_words", {"forbidden_words": ["cat"]}, "A dog sat.", True),
    ("keywords:forbidden_words", {"forbidden_words": ["cat"]}, "The CAT sat.", False),
    ("keywords:forbidden_words", {"forbidden_words": ["cat"]}, "Cats like a category.", True),  # whole words only
    ("keywords:existence", {"keywords": ["moon", "sun"]}, "The Moonlight and the SUN.", True),  # inside words too
    ("keywords:existence", {"keywords": ["moon", "sun"]}, "The moon.", False),
    ("keywords:frequency", {"keyword": "dog", "frequency": 2, "relation": "at least"}, "A dog and two Dogs.", True),
    ("keywords:frequency", {"keyword": "dog", "frequency": 2, "relation": "less than"}, "dog dog", False),
    ("keywords:letter_frequency", {"letter": "q", "let_frequency": 2, "let_relation": "at least"}, "Quick quiz", True),
    ("keywords:letter_frequency", {"letter": "q", "let_frequency": 2, "let_relation": "less than"}, "Quick quiz", False),
    ("detectable_format:number_highlighted_sections", {"num_highlights": 2}, "*one* and **two**", True),
    ("detectable_format:number_highlighted_sections", {"num_highlights": 1}, "* * and ** ** and *a\nb*", False),
    ("detectable_format:number_bullet_lists", {"num_bullets": 3}, "Intro\n* a\n* b\n- c", True),
    ("detectable_format:number_bullet_lists", {"num_bullets": 3}, "* a\n* b\n**c**", False),
    ("detectable_format:number_bullet_lists", {"num_bullets": 3}, "1. a\n2. b\n3. c", False),  # numbers are no bullets
    ("detectable_format:number_bullet_lists", {"num_bullets": 3}, "  * a\n\n  - b\n---", True),  # --- counts
    ("detectable_format:multiple_sections", {"section_spliter": "SECTION", "num_sections": 2}, "SECTION 1\nx\nSECTION 2\ny", True),
    ("detectable_format:multiple_sections", {"section_spliter": "SECTION", "num_sections": 2}, "Section 1\nx\nSection 2\ny", False),
    ("detectable_content:number_placeholders", {"num_placeholders": 2}, "Dear [name], at [address].", True),
    ("detectable_content:number_placeholders", {"num_placeholders": 2}, "Dear [name [title]] and [a\n]", False),
    ("detectable_format:title", {}, "<<Joy of Rain>>\nRain falls.", True),
    ("detectable_format:title", {}, "<<>>\n<< >>\n<<a\n>>", False),
    ("detectable_format:title", {}, "<<>> and << >>", True),  # from the first << to the last >>
    ("detectable_format:json_format", {}, '```json\n{"a": [1, 2]}\n```', True),
    ("detectable_format:json_format", {}, 'Here it is: {"a": 1}', False),
    ("detectable_format:json_format", {}, '{"a": [1, 2}', False),
    ("detectable_format:constrained_response", {}, "Hmm. My answer is maybe. Because.", True),
    ("detectable_format:constrained_response", {}, "my answer is yes.", False),
    ("detectable_content:postscript", {"postscript_marker": "P.S."}, "Hi.\n\np.s. bye", True),
    ("detectable_content:postscript", {"postscript_marker": "P.S."}, "Hi.\n\nP.S bye", False),
    ("detectable_content:postscript", {"postscript_marker": "P.P.S"}, "Hi.\n\nP. P. S more", True),
    ("combination:repeat_prompt", {"prompt_to_repeat": "Write a poem."}, "WRITE A POEM. Roses are red.", True),
    ("combination:repeat_prompt", {"prompt_to_repeat": "Write a poem."}, "Sure! Write a poem.", False),
    ("combination:two_responses", {}, "First.\n******\nSecond.", True),
    ("combination:two_responses", {}, "Same.\n******\nSame.", False),
    ("combination:two_responses", {}, "A\n******\n\n******\nB", False),
    ("combination:two_responses", {}, "******\nA\n******\nB", True),
    ("startend:end_checker", {"end_phrase": "Any other questions?"}, '"Done. Any other questions?"', True),
    ("startend:end_checker", {"end_phrase": "Any other questions?"}, "Done. Any other questions? Bye.", False),
    ("startend:quotation", {}, '  "Hello there."\n', True),
    ("startend:quotation", {}, '"Hello there.', False),
    ("change_case:english_lowercase", {}, "all of this response is written in lowercase english.", True),
    ("change_case:english_lowercase", {}, "all of this response is written in lowercase English.", False),
    ("change_case:english_capital", {}, "THIS WHOLE RESPONSE IS WRITTEN IN CAPITAL LETTERS.", True),
    ("change_case:english_capital", {}, "ДЕСЬ ВСЯ ВІДПОВІДЬ НАПИСАНА ВЕЛИКИМИ ЛІТЕРАМИ УКРАЇНСЬКОЮ.", False),  # not English
    ("change_case:capital_word_frequency", {"capital_relation": "at least", "capital_frequency": 3}, "NASA and the USA, I think.", True),
    ("change_case:capital_word_frequency", {"capital_relation": "less than", "capital_frequency": 2}, "DON'T go.", False),
    ("language:response_language", {"language": "de"}, "Das ist eine kurze Antwort auf Deutsch, geschrieben für den Test.", True),
    ("language:response_language", {"language": "de"}, "This is a short answer in English, written for the test.", False),
    ("language:response_language", {"language": "de"}, "12345 !!!", True),  # nothing to tell by: passes
]  # fmt: skip


@pytest.fixture(scope="module")
def official():
    pytest.importorskip("if_verifiable", reason="IFEval's official verifiers: pip install -e '.[test]'")
    pytest.importorskip("punkt", reason="Punkt's English model for NLTK: pip install -e '.[test]'")
    from _ifeval_official import follows

    return follows


@pytest.mark.parametrize(("instruction", "kwargs", "text", "verdict"), CASES, ids=lambda v: str(v)[:40])
def test_each_check_gives_the_official_verdict(official, instruction, kwargs, text, verdict):
    from _ifeval_map import checks_for, follows

    assert official(instruction, kwargs, text) is verdict  # the case still tests what it says
    assert follows(checks_for(instruction, kwargs), text) is verdict


def test_the_cases_cover_every_ifeval_instruction_and_every_check_type():
    from _ifeval_map import checks_for

    verdicts: dict[str, set[bool]] = {}
    for instruction, _, _, verdict in CASES:
        verdicts.setdefault(instruction, set()).add(verdict)
    assert len(verdicts) == 25 and all(v == {True, False} for v in verdicts.values())  # each passes and fails
    used = {type(check) for i, kw, *_ in CASES for check in checks_for(i, kw)}
    assert {t.__name__ for t in CHECK_TYPES} - {t.__name__ for t in used} == {"Regex"}  # tested below


def test_findings_name_what_failed_with_numbers():
    bullets = "* a\n* b\n- c\n* d\n- e"
    assert Count(unit="bullets", relation="exactly", n=3).check(bullets).finding == (
        "needs exactly 3 bullet points (lines starting with * or -), has 5"
    )
    assert ForbiddenChars(chars=",").check("a, b, c, d, e").finding == "remove the 4 commas"
    assert EndsWith(phrase="Is there anything else I can help with?").check("Bye.").finding == (
        "end with the phrase 'Is there anything else I can help with?', with nothing after it"
    )
    assert (
        Count(unit="words", relation="at most", n=99).check("word " * 120).finding == "needs at most 99 words, has 120"
    )
    assert ParagraphStart(nth=3, word="summer").check("One.\n\nTwo.").finding == (
        "paragraph 3 must start with the word 'summer'; it has 2 paragraphs (separated by blank lines)"
    )
    found = InstructionChecks(
        parse_checks(
            [
                {"type": "count", "unit": "sections", "relation": "at least", "n": 2, "marker": "SECTION"},
                {"type": "paragraph_start", "nth": 2, "word": "summer"},
                {"type": "count", "unit": "paragraphs", "relation": "exactly", "n": 2, "marker": "***"},
                {"type": "capital_words", "relation": "at most", "n": 1},
                {"type": "keywords", "words": ["moon", "tide"]},
                {"type": "forbidden_words", "words": ["sun"]},
                {"type": "case", "letters": "lower"},
                {"type": "postscript", "marker": "P.P.S"},
            ]
        )
    ).findings("SECTION 1 Sun and SUN.\n\nIn NASA ***\n\n***")
    assert found == [
        "needs at least 2 sections marked 'SECTION 1', 'SECTION 2', …, has 1",
        "paragraph 2 must start with the word 'summer'; it starts with 'in'",
        "has an empty paragraph between two *** dividers",
        "needs at most 1 word in all capital letters, has 3 ('SECTION', 'SUN', 'NASA')",
        "needs the words 'moon', 'tide'",
        "remove the word 'sun' (2 times)",
        "use only lowercase letters: has 16 capital letters (first in 'SECTION')",
        "end with a postscript starting with P.P.S",
    ]


def test_a_verifier_over_checks_scores_the_share_that_pass():
    verify = InstructionChecks([{"type": "count", "unit": "lines", "relation": "exactly", "n": 2}, {"type": "quoted"}])
    half = verify("input", "one\ntwo")
    assert (half.score, half.passed, half.text) == (0.5, False, 'wrap the whole response in double quotes ("…")')
    assert verify("input", '"one\ntwo"').text == "all checks pass"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([{"type": "bogus"}], "check 1: unknown type; known: count, paragraph_start"),
        ([{"unit": "words"}], "check 1: no type; give one of count"),
        (
            [{"type": "count", "unit": "words", "relation": "at least", "n": -1}],
            "check 1 (count): n: Input should be greater",
        ),
        (
            [{"type": "count", "unit": "words", "relation": "about", "n": 3}],
            "check 1 (count): relation: Input should be",
        ),
        (
            [{"type": "count", "unit": "words", "relation": "at least", "n": 3, "marker": "x"}],
            "check 1 (count): marker applies to",
        ),
        ([{"type": "json"}, {"type": "keywords", "words": [" "]}], "check 2 (keywords): words.0: must not be blank"),
        ([{"type": "language", "code": "xx"}], "check 1 (language): code: Input should be 'af'"),
        ([{"type": "quoted", "extra": 1}], "check 1 (quoted): extra: is not an argument of this check"),
        ([{"type": "regex", "pattern": "(a+)+$"}], "check 1 (regex): pattern: regex /(a+)+$/ repeats a group"),
        ("json", "checks are a list of mappings"),
        ([{"type": "json"}] * 33, "checks are a list of at most 32"),
    ],
)
def test_invalid_checks_are_one_clear_error(data, message):
    with pytest.raises(TaskError) as caught:
        parse_checks(data)
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)


def test_the_schema_is_compact_lists_every_requested_check_and_becomes_a_grammar():
    schema = checks_schema()
    kinds = [item["properties"]["type"]["const"] for item in schema["items"]["anyOf"]]
    assert kinds == [t.model_fields["type"].default for t in CHECK_TYPES if t.__name__ != "Regex"]  # no regexes
    assert all("type" in item["required"] for item in schema["items"]["anyOf"])  # the discriminator is decoded
    assert schema_size() == len(json.dumps(schema, separators=(",", ":"))) < 4000
    print(f"checks schema: {schema_size()} characters, {len(kinds)} types")
    llama_grammar = pytest.importorskip("llama_cpp.llama_grammar", reason="llama-cpp-python: the [embedded] extra")
    grammar = llama_grammar.json_schema_to_gbnf(json.dumps(schema))
    assert len(grammar) < 12_000  # string bounds would nest a rule per character (44,564 with them)
    # what a model decodes under the schema is a valid list of checks
    decoded = [{"type": "count", "unit": "bullets", "relation": "exactly", "n": 3}, {"type": "language", "code": "de"}]
    assert parse_checks(decoded) == [Count(unit="bullets", relation="exactly", n=3), Language(code="de")]


TEXTS = ["Lumo\nlamps glow\nbright", "a lamp", "one two three\n\nfour five six", "the Lumo lamp: x1, x2", "x" * 5_001]


@pytest.mark.parametrize("text", TEXTS, ids=range(len(TEXTS)))
def test_a_task_files_checks_keep_their_verdicts_in_the_vocabulary(text):
    checks = Checks(
        must_match=r"(?i)lamp", must_not_match=r"\d{1,3}", min_words=2, max_words=5, min_lines=1, max_lines=3,
        required_words=["Lumo"],
    )  # fmt: skip
    stated = InstructionChecks(from_checks(checks))
    assert stated("in", text).passed == checks("in", text).passed
    assert {f for f in stated.findings(text) if "regex" in f or "match" in f} <= set(checks.findings(text))


def test_the_language_is_read_the_same_every_time():
    text = "Ciao, come stai? Spero che tu stia bene oggi."
    assert {Language(code="it").check(text).passed for _ in range(5)} == {True}
    assert Language(code="de").check(text).finding == "write the whole response in German; it reads as Italian"


HOSTILE = {
    "brackets": "[" * 100_000,
    "stars": "*" * 99_999 + "\n",
    "angles": "<<" * 50_000,
    "line breaks": "\n" * 100_000,
    "spaces": " " * 100_000,
    "periods": "a. " * 33_333,
    "ellipses": "...A " * 20_000,
    "one word": "x" * 100_000,
    "json depth": "[" * 100_000,
    "quotes": '"' * 100_000,
    "dividers": "***" * 33_333,
    "postscripts": "p. p. " * 16_666,
}


@pytest.mark.parametrize("name", HOSTILE)
def test_every_check_reads_a_hostile_draft_in_bounded_time(name):
    checks = [
        {"type": "count", "unit": u, "relation": "at least", "n": 3} for u in ("words", "sentences", "lines", "bullets")
    ] + [
        {"type": "count", "unit": "paragraphs", "relation": "exactly", "n": 3, "marker": "***"},
        {"type": "count", "unit": "paragraphs", "relation": "exactly", "n": 3},
        {"type": "count", "unit": "sections", "relation": "at least", "n": 3, "marker": "Section"},
        {"type": "count", "unit": "highlights", "relation": "at least", "n": 3},
        {"type": "count", "unit": "placeholders", "relation": "at least", "n": 3},
        {"type": "capital_words", "relation": "at least", "n": 3},
        {"type": "paragraph_start", "nth": 2, "word": "x"},
        {"type": "keywords", "words": ["x y"], "whole": True},
        {"type": "forbidden_words", "words": ["a"]},
        {"type": "word_frequency", "word": "ab", "relation": "at least", "n": 3},
        {"type": "letter_frequency", "letter": "a", "relation": "at least", "n": 3},
        {"type": "case", "letters": "upper"},
        {"type": "forbidden_chars", "chars": ",."},
        {"type": "starts_with", "phrase": "x" * 2000},
        {"type": "ends_with", "phrase": "x y"},
        {"type": "quoted"},
        {"type": "json"},
        {"type": "title"},
        {"type": "postscript", "marker": "P.P.S"},
        {"type": "two_responses"},
        {"type": "one_of", "options": ["My answer is yes."]},
        {"type": "language", "code": "en"},
        {"type": "regex", "pattern": r"\w{1,30}x"},
    ]
    verify = InstructionChecks(checks)
    Language(code="en").check("Loads the detector's profiles (a second or two) before the clock starts.")
    started = time.perf_counter()
    verify("in", HOSTILE[name])
    assert time.perf_counter() - started < 3.0  # linear: about 0.1 s each on 2 shared cores


def test_a_draft_past_the_bound_fails_every_check_unread():
    found = Count(unit="words", relation="at least", n=1).check("word " * (MAX_CHECK_CHARS // 5 + 1))
    assert (
        not found.passed
        and found.finding == f"is {MAX_CHECK_CHARS + 5:,} characters; checks read at most {MAX_CHECK_CHARS:,}"
    )
