"""Checks steer wherever they exist, and every result names the checks its returned output
still fails (issue 45, items 5 and 6): a task file with ``checks:`` and a run given ``checks``
verify with them by default (a critic's "done" cannot end the run while one fails); a failed
regex check's finding is words, never the pattern; the vocabulary counts characters; under
a JSON Schema no wording check is derived from the request's text. On the fake model."""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path

import pytest

from selfrefine import FakeBackend, SelfRefine, Task, refine
from selfrefine.checks.instructions import Count, parse_checks
from selfrefine.checks.instructions.phrases import stated
from selfrefine.core.records import ChecksStep, FailedCheck, StopReason
from selfrefine.engine.derivation import grounded
from selfrefine.tasks.taskfile import load_task

COMMIT = """\
name: commit
generate: "Write a commit message for: {{ input }}"
feedback: "Message: {{ draft }}\\nList problems, or say NONE."
refine: "Message: {{ draft }}\\nProblems: {{ feedback }}\\nRewrite:"
stop:
  contains: NONE
max_iterations: 3
checks:
  - {type: forbidden_chars, chars: ","}
  - {type: regex, pattern: '\\A[A-Z][^\\n]{0,49}$', says: "one line of at most 50 characters, starting with a capital letter"}
"""
BAD = "fixed the parser, which crashed on empty input files and on lines longer than the buffer"
GOOD = "Fix parser crash on empty input"


def commit_task(tmp_path: Path, extra: str = "") -> Task:
    path = tmp_path / "commit.yaml"
    path.write_text(COMMIT + textwrap.dedent(extra))
    return load_task(path)


def critic_says_none(*refinements: str) -> FakeBackend:
    """A critic that always says NONE (done), and a refiner with the given replies."""
    return FakeBackend({"generate": [BAD], "feedback": ["NONE"] * 5, "refine": list(refinements)})


# -- item 6: a task file's checks steer by default --------------------------------------------


def test_a_task_files_checks_repair_one_failed_check_at_a_time_by_default(tmp_path):
    # issue 45: a task file with checks refines in focus (no critic: the checks are the feedback)
    fake = critic_says_none(GOOD)
    result = SelfRefine(commit_task(tmp_path), fake).run("parser crash on empty input")
    assert result.config.refine_form == "focused" and result.config.verifier_mode == "verifier"
    assert [it.draft for it in result.iterations] == [BAD, GOOD] and result.iterations[1].focus.kept
    assert not fake.prompts("feedback") and result.fails == []
    [repair] = fake.prompts("refine")
    assert "Edit the reply: Remove every comma" in repair  # the first failed check's own repair


def test_a_task_files_checks_keep_the_run_going_while_they_fail(tmp_path):
    # before: the critic's NONE ended the run on draft 0 (stop "feedback"), its checks failing
    fake = critic_says_none(GOOD)
    result = SelfRefine(commit_task(tmp_path, "refine_form: history\n"), fake).run("parser crash on empty input")
    assert result.config.verifier_mode == "hybrid"
    assert [it.draft for it in result.iterations] == [BAD, GOOD]
    first = result.iterations[0].feedback
    assert first is not None and first.done is False and "remove the 1 comma" in first.text
    assert result.stop_reason is StopReason.FEEDBACK and result.output == GOOD
    assert result.fails == []  # the returned output passes every check


def test_a_task_file_may_keep_the_critic_alone(tmp_path):
    task = commit_task(tmp_path, "verifier_mode: self\n")
    result = SelfRefine(task, critic_says_none(GOOD)).run("parser crash")
    assert result.config.verifier_mode == "self" and result.stop_reason is StopReason.FEEDBACK
    assert [it.draft for it in result.iterations] == [BAD]
    # the result still says what its output fails
    assert [f.says for f in result.fails or []] == [
        "use no commas",
        "one line of at most 50 characters, starting with a capital letter",
    ]


def test_checks_given_with_a_run_steer_it_by_default():
    task = Task("note", generate="Write: {{ input }}", feedback="{{ draft }}\nSay NONE if fine.", refine="{{ draft }}\n{{ feedback }}", stop_contains=["NONE"])  # fmt: skip
    checks = [{"type": "forbidden_chars", "chars": ","}]
    result = refine(task, "x", critic_says_none(GOOD), checks=checks, max_iterations=2)
    assert result.config.verifier_mode == "hybrid"
    assert [it.draft for it in result.iterations] == [BAD, GOOD] and result.fails == []


# -- item 5: every result names the checks its output fails -----------------------------------


def test_the_result_names_the_checks_the_returned_output_fails(tmp_path):
    fake = critic_says_none(BAD, BAD, BAD)  # the refiner returns its draft word for word
    result = SelfRefine(commit_task(tmp_path, "refine_form: history\n"), fake).run("parser crash")
    assert result.stop_reason is StopReason.NO_CHANGE and result.output == BAD
    assert result.fails == [
        FailedCheck(source="task", says="use no commas", finding="remove the 1 comma"),
        FailedCheck(
            source="task",
            says="one line of at most 50 characters, starting with a capital letter",
            finding="does not follow the rule: one line of at most 50 characters, starting with a capital letter",
        ),
    ]
    assert type(result).model_validate_json(result.model_dump_json()).fails == result.fails


def test_given_and_task_checks_are_named_and_a_run_without_checks_says_nothing(tmp_path):
    checks = [{"type": "count", "unit": "words", "relation": "at most", "n": 3}]
    result = SelfRefine(commit_task(tmp_path), critic_says_none(GOOD), checks=checks).run("x")
    assert [(f.source, f.says) for f in result.fails or []] == [("given", "at most 3 words")]
    plain = Task("plain", generate="{{ input }}", feedback="{{ draft }}", refine="{{ draft }}")
    untested = refine(plain, "x", FakeBackend(default="a, b"), max_iterations=0)
    assert untested.fails is None and "fails" not in untested.model_dump()


def test_a_verifier_of_its_own_is_named_by_its_task():
    fake = FakeBackend({"generate": ["A dog runs."]})
    result = refine("commongen", "dog, ball, park", fake, max_iterations=0)
    assert [(f.source, f.says) for f in result.fails or []] == [("task", "the commongen task's own check")]
    assert "ball" in result.fails[0].finding  # type: ignore[index]


# -- item 6: a regex check's finding is words -------------------------------------------------


@pytest.mark.parametrize(
    ("checks", "draft", "finding"),
    [
        ({"must_match": r"\A[A-Z]"}, "lower", "does not have the required form (check must_match)"),
        (
            {"must_not_match": [r"\d+", "(?i)sorry"]},
            "Sorry",
            "has a form that is not allowed (check must_not_match 2) (found 'Sorry')",
        ),  # fmt: skip
        (
            {"must_match": {"pattern": r"\A[A-Z]", "says": "start with a capital"}},
            "x",
            "does not follow the rule: start with a capital",
        ),  # fmt: skip
    ],
)
def test_a_failed_regex_check_never_shows_its_pattern(checks, draft, finding):
    task = Task("t", generate="{{ input }}", feedback="{{ draft }}", refine="{{ draft }}", verify=checks)
    found = task.verify("in", draft)
    assert found is not None and found.text == finding and "\\" not in found.text and "/" not in found.text
    regex = parse_checks([{"type": "regex", "pattern": r"\A[A-Z]", "says": "start with a capital"}])[0]
    assert regex.check("x").finding == "does not follow the rule: start with a capital"
    assert regex.describe() == "start with a capital"


# -- item 6: a character count ----------------------------------------------------------------


def test_the_vocabulary_counts_characters():
    check = Count(unit="characters", relation="at most", n=10)
    assert check.describe() == "at most 10 characters (letters, spaces and punctuation)"
    assert check.check("hello world!").finding == f"needs {check.describe()}, has 12"
    assert check.check("hello").passed
    assert stated("Write a tweet of at most 280 characters.") == [
        {"type": "count", "unit": "characters", "relation": "at most", "n": 280}
    ]
    assert stated("Keep it under 50 chars.") == [
        {"type": "count", "unit": "characters", "relation": "at most", "n": 49}
    ]
    assert stated("Write a story with exactly two characters.") == []  # a cast, not a length
    assert stated("A play with 3 characters.") == []
    assert grounded(check, "answer in at most 10 characters") and not grounded(check, "answer in at most 10 words")


# -- item 6: under a JSON Schema, no wording check is derived from the request ---------------

CUSTOMER = {"type": "object", "properties": {"customer": {"type": "string"}}, "required": ["customer"]}
NOTE = 'From this note, which ends with "paid in full", extract the customer as JSON. Note: ACME, 300 USD, paid in full'


async def _steps(engine: SelfRefine, text: str) -> list:
    return [s async for s in engine.astream(text)]


def test_under_a_schema_a_quoted_phrase_is_no_check_and_a_valid_draft_stops():
    assert {"type": "ends_with", "phrase": "paid in full"} in stated(NOTE)  # what code reads from the wording
    fake = FakeBackend({"generate": ['{"customer": "ACME"}'], "refine": ['{"customer": "ACME"} paid in full']})
    engine = SelfRefine("chat", fake, json_schema=CUSTOMER)
    steps = asyncio.run(_steps(engine, NOTE))
    checks = next(s for s in steps if isinstance(s, ChecksStep))
    assert {"type": "ends_with", "phrase": "paid in full"} in [d.check for d in checks.dropped]
    assert "no JSON reply can pass" in checks.note
    result = steps[-1].result
    assert all(c.check["type"] != "ends_with" for c in result.checks)
    assert result.stop_reason is StopReason.VERIFIED and len(result.iterations) == 1  # before: refined on
    assert result.parsed == {"customer": "ACME"} and result.fails == []


def test_a_task_files_mapping_counts_characters_too():
    from selfrefine import Checks
    from selfrefine.checks.instructions import InstructionChecks, from_checks

    checks = Checks(max_chars=50, min_chars=5)
    assert checks("in", "x" * 51).text == "needs at most 50 characters (letters, spaces and punctuation), has 51"
    assert checks("in", "Fix it").passed and checks("in", "x" * 51).score == 1 / 2
    stated_checks = InstructionChecks(from_checks(checks))
    assert [c.describe() for c in stated_checks.checks] == [
        "at least 5 characters (letters, spaces and punctuation)",
        "at most 50 characters (letters, spaces and punctuation)",
    ]
    assert not stated_checks("in", "x" * 51).passed and stated_checks("in", "Fix it").passed
