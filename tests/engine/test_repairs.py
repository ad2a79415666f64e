"""Each check says how a failure is repaired (issue 45 item 1): a short instruction in the
kind's own words, with its arguments, carried on the verification's findings."""

from __future__ import annotations

import pytest

from selfrefine.checks.instructions import CHECK_TYPES, Instruction, InstructionChecks, parse_checks
from selfrefine.checks.instructions.base import MAX_CHECK_CHARS
from selfrefine.core.records import Verification
from selfrefine.engine.run_checks import ChecksPolicy, RunChecks, SchemaCheck

TEXT = "The Quick brown fox, the lazy dog, and the cat met at noon. They talked.\n\nThen they left."

# (check as data, a text it fails, words its repair must say)
CASES = [
    ({"type": "case", "letters": "lower"}, TEXT, ["entirely in lowercase letters"]),
    ({"type": "case", "letters": "upper"}, TEXT, ["entirely in capital letters"]),
    ({"type": "forbidden_chars", "chars": ","}, TEXT, ["Remove every comma", "periods or 'and'"]),
    ({"type": "forbidden_chars", "chars": ";!"}, "Stop! Now; go", ["semicolon", "exclamation mark"]),
    ({"type": "forbidden_words", "words": ["fox", "owl"]}, TEXT, ["Remove the word 'fox'"]),
    ({"type": "keywords", "words": ["river", "stone", "fox"]}, TEXT, ["Add the words 'river' and 'stone'"]),
    ({"type": "count", "unit": "words", "relation": "at most", "n": 10}, TEXT, ["It has 18 words", "at most 10 words"]),
    ({"type": "count", "unit": "words", "relation": "at least", "n": 60}, TEXT, ["It has 18 words", "at least 60"]),
    ({"type": "count", "unit": "sentences", "relation": "exactly", "n": 1}, TEXT, ["3 sentences", "exactly 1"]),
    ({"type": "count", "unit": "paragraphs", "relation": "exactly", "n": 3}, TEXT, ["2 paragraphs", "exactly 3"]),
    ({"type": "count", "unit": "bullets", "relation": "exactly", "n": 3}, TEXT, ["0 bullet points", "exactly 3"]),
    ({"type": "count", "unit": "sections", "relation": "at least", "n": 2, "marker": "Day"}, TEXT, ["'Day 1'"]),
    ({"type": "count", "unit": "highlights", "relation": "at least", "n": 2}, TEXT, ["at least 2 highlighted"]),
    ({"type": "count", "unit": "placeholders", "relation": "at least", "n": 1}, TEXT, ["[name]"]),
    ({"type": "count", "unit": "lines", "relation": "at most", "n": 1}, TEXT, ["It has 2 lines", "at most 1"]),
    ({"type": "word_frequency", "word": "the", "relation": "at most", "n": 1}, TEXT, ["'the'", "at most 1 time"]),
    ({"type": "letter_frequency", "letter": "z", "relation": "at least", "n": 4}, TEXT, ["'z'", "at least 4"]),
    ({"type": "capital_words", "relation": "at least", "n": 3}, TEXT, ["at least 3 words in all capital"]),
    ({"type": "paragraph_start", "nth": 2, "word": "Finally"}, TEXT, ["paragraph 2", "'Finally'"]),
    ({"type": "paragraph_start", "nth": 4, "word": "Then"}, TEXT, ["at least 4 paragraphs"]),
    ({"type": "starts_with", "phrase": "Once upon a time"}, TEXT, ["Begin the text with 'Once upon a time'"]),
    ({"type": "ends_with", "phrase": "Is there anything else?"}, TEXT, ["End the text with 'Is there anything"]),
    ({"type": "quoted"}, TEXT, ["double quotes"]),
    ({"type": "json"}, TEXT, ["valid JSON", "Expecting value"]),
    ({"type": "title"}, TEXT, ["<<Title>>"]),
    ({"type": "postscript", "marker": "P.P.S"}, TEXT, ["starting with P.P.S"]),
    ({"type": "two_responses"}, TEXT, ["2 different responses", "******"]),
    ({"type": "one_of", "options": ["My answer is yes.", "My answer is no."]}, TEXT, ["'My answer is no.'"]),
    ({"type": "language", "code": "de"}, TEXT, ["in German"]),
    (
        {"type": "count", "unit": "characters", "relation": "at most", "n": 50},
        TEXT,
        ["It has 89 characters", "at most 50"],
    ),
    ({"type": "regex", "pattern": r"\d{4}", "says": "name the year"}, TEXT, ["follows this rule: name the year"]),
    ({"type": "regex", "pattern": r"\d{4}"}, TEXT, ["the form the task asks for"]),
    ({"type": "regex", "pattern": "f[aeiou]x", "present": False}, TEXT, ["Remove 'fox'"]),
]


@pytest.mark.parametrize(("data", "text", "said"), CASES, ids=[f"{c[0]['type']}-{i}" for i, c in enumerate(CASES)])
def test_a_failed_check_says_its_repair_with_its_arguments(data: dict, text: str, said: list[str]) -> None:
    [check] = parse_checks([data])
    assert not check.check(text).passed
    repair = check.repair(text)
    for words in said:
        assert words in repair, (repair, words)
    if data["type"] == "regex":
        assert data["pattern"] not in repair  # never the pattern: the model cannot act on a regex
    assert repair[0].isupper() and repair.endswith("."), repair  # an instruction, one sentence or two
    assert len(repair) < 400


def test_every_registered_kind_has_a_repair_of_its_own() -> None:
    """A new kind cannot leave its repair out: each overrides the base's generic one, and the
    cases above try each kind at least once."""
    for kind in CHECK_TYPES:
        assert kind._repair is not Instruction._repair, f"{kind.__name__} has no repair of its own"
    tried = {data["type"] for data, _, _ in CASES}
    assert tried == {str(kind.model_fields["type"].default) for kind in CHECK_TYPES}


def test_a_draft_too_long_to_read_is_repaired_by_shortening() -> None:
    [check] = parse_checks([{"type": "case", "letters": "lower"}])
    assert "Shorten the text" in check.repair("a" * (MAX_CHECK_CHARS + 1))


def test_the_run_checks_carry_each_failed_checks_repair_on_the_verification() -> None:
    checks = parse_checks(
        [{"type": "case", "letters": "lower"}, {"type": "count", "unit": "words", "relation": "at most", "n": 60}]
    )
    verdict = RunChecks(policy=ChecksPolicy(given=tuple(checks))).verify(TEXT)
    assert verdict is not None and verdict.passed is False
    [finding] = verdict.findings  # the word count passes
    assert finding.check == "use only lowercase letters"
    assert finding.repair == "Rewrite the text entirely in lowercase letters; change nothing else."
    assert verdict.repair == finding.repair
    again = Verification.model_validate_json(verdict.model_dump_json())  # typed: survives a round trip
    assert again.findings == verdict.findings


def test_a_passing_verification_has_no_findings_and_its_record_is_unchanged() -> None:
    verdict = InstructionChecks([{"type": "count", "unit": "words", "relation": "at most", "n": 60}])("", TEXT)
    assert verdict.passed and verdict.findings == [] and verdict.repair is None
    assert "findings" not in verdict.model_dump()  # records of runs before repairs read the same


def test_a_task_files_checks_carry_repairs() -> None:
    verdict = InstructionChecks([{"type": "keywords", "words": ["river"]}, {"type": "quoted"}])("", TEXT)
    assert [f.repair for f in verdict.findings] == [
        "Add the word 'river' where it fits; keep the rest.",
        'Wrap the whole text in double quotes: put " at its very start and " at its very end; change nothing else.',
    ]


def test_a_schema_error_says_its_repair() -> None:
    schema = {"type": "object", "properties": {"age": {"type": "integer", "minimum": 0}}, "required": ["age"]}
    check = SchemaCheck.of(schema)
    [finding] = check.verify('{"age": -3}').findings
    assert "Fix the JSON so it validates" in (finding.repair or "") and "$.age" in (finding.repair or "")
    [finding] = check.verify("not json at all").findings
    assert (finding.repair or "").startswith("Reply with JSON only")
    both = RunChecks(policy=ChecksPolicy(given=tuple(parse_checks([{"type": "quoted"}])), schema=check)).verify(
        '{"age": -3}'
    )
    assert both is not None and [f.check for f in both.findings][0].startswith("JSON that validates")


def test_commongens_missing_concepts_say_their_repair() -> None:
    from selfrefine.tasks.commongen import CommonGen

    verdict = CommonGen().verify("ball, kick, goal", "The boy kicks the ball.")
    assert verdict.passed is False
    assert verdict.repair == "Use the word 'goal' in the sentence; keep it one natural scene."


def test_gsm8ks_failing_program_says_its_repair() -> None:
    from selfrefine.tasks.gsm8k import GSM8K

    try:
        verdict = GSM8K().verify("q", "def solution():\n    return 1 / 0\n")
    except Exception as exc:  # noqa: BLE001 - a machine without the sandbox cannot run programs
        pytest.skip(f"the sandbox cannot run programs here: {exc}")
    assert verdict.passed is False
    repair = verdict.repair or ""
    assert repair.startswith("The program fails: ") and "ZeroDivisionError" in repair
    assert repair.endswith("Fix it so solution() returns the answer.")


def test_a_task_files_mapping_of_checks_carries_repairs_in_words():
    from selfrefine.checks.declared import Checks

    checks = Checks(
        max_words=5,
        required_words=["lamp"],
        must_match=[{"pattern": "^[A-Z]", "says": "start with a capital letter"}],
        must_not_match=["(?i)sorry"],
    )
    verdict = checks("", "sorry, this solar desk light is not available today")
    assert [f.repair for f in verdict.findings] == [
        "It has 9 words; shorten it to at most 5 words; keep the meaning.",
        "Add the word 'lamp' where it fits; keep the rest.",
        "Rewrite the text so that it follows this rule: start with a capital letter; change nothing else.",
        "Remove 'sorry'; change nothing else.",
    ]
    assert [f.text for f in verdict.findings] == checks.findings("sorry, this solar desk light is not available today")
