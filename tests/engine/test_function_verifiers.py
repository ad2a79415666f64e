"""Verifiers without subclassing (issue 30, item 12): a plain function given as ``verify=``
and a YAML task's ``checks:`` decide which sample wins and reject a worse refinement, with
findings that say what failed; the checks are validated strictly when the file loads, and
their regexes cannot hang on a hostile draft."""

from __future__ import annotations

import json
import re
import time

import pytest
from click.testing import CliRunner

from selfrefine import FakeBackend, SelfRefine, Task, TaskError, TaskFileError, load_task
from selfrefine.cli import cli

TEMPLATES = dict(
    generate="Write about {{ input }}.",
    feedback="Text: {{ draft }}\nCritique:",
    refine="Text: {{ draft }}\nCritique: {{ feedback }}\nBetter text:",
)


def coverage(input: str, draft: str) -> tuple[float, list[str]]:
    """A user's verifier: the share of the input's words the draft uses, and which are missing."""
    words = [w.strip() for w in input.split(",")]
    missing = [w for w in words if w not in draft.lower()]
    return 1 - len(missing) / len(words), [f"missing {w}" for w in missing]


def test_a_function_verifier_picks_the_sample_and_rejects_a_worse_refinement():
    backend = FakeBackend(
        {
            "generate": ["A dog sleeps.", "A dog runs in the park."],
            "feedback": ["Use the ball too."],
            "refine": ["A cat naps.", "A dog naps."],
        }
    )
    task = Task("words", **TEMPLATES)
    engine = SelfRefine(task, backend, verify=coverage, samples=2, max_iterations=1, accept="not_worse")
    result = engine.run("dog, park, ball")
    first, attempt = result.iterations
    assert [c.chosen for c in first.candidates] == [False, True]  # 2/3 beats 1/3
    assert first.verification.text == "missing ball" and first.verification.score == pytest.approx(2 / 3)
    assert not attempt.accepted  # both refinements score lower: rejected, with the findings as feedback
    assert "missing park" in attempt.feedback.text
    assert result.output == "A dog runs in the park." and result.config.select == "verified"
    assert not task.has_verifier  # the engine checks a copy; the user's task object is unchanged


def test_task_takes_a_verify_function_and_its_replies_are_checked():
    task = Task("lines", **TEMPLATES, verify=lambda input, draft: draft.count("\n") == 2)
    assert task.has_verifier and task.verify("x", "a\nb\nc").passed is True
    assert task.verify("x", "a").model_dump(include={"passed", "score"}) == {"passed": False, "score": 0.0}
    assert Task("s", **TEMPLATES, verify=lambda i, d: 0.25).verify("x", "y").score == 0.25
    with pytest.raises(TaskError, match=r"verify function .* returned 1.5; .* score in \[0, 1\]"):
        Task("s", **TEMPLATES, verify=lambda i, d: 1.5).verify("x", "y")

    def broken(input: str, draft: str) -> float:
        raise KeyError("oops")

    with pytest.raises(TaskError, match="verify function .*broken raised KeyError"):
        Task("s", **TEMPLATES, verify=broken).verify("x", "y")
    with pytest.raises(TaskError, match="has its own verifier"):  # commongen's stays commongen's
        SelfRefine("commongen", FakeBackend(), verify=coverage)


def test_checks_in_python_are_the_same_as_in_a_task_file():
    task = Task("short", **TEMPLATES, verify={"max_words": 3, "must_not_match": "(?i)sorry"})
    # the finding is words a model can act on, never the raw regex (issue 45)
    assert (
        task.verify("x", "Sorry, I cannot").text
        == "has a form that is not allowed (check must_not_match) (found 'Sorry')"
    )
    with pytest.raises(TaskError, match=r"^unknown check 'max_word'; known: must_match"):
        Task("short", **TEMPLATES, verify={"max_word": 3})
    with pytest.raises(TaskError, match=r"^check must_match: regex /\(a\)\\1/ refers back"):
        Task("short", **TEMPLATES, verify={"must_match": r"(a)\1"})


HAIKU = """\
name: haiku
generate: "Write a haiku about {{ input }}."
feedback: "Haiku: {{ draft }}\\nCritique:"
refine: "Haiku: {{ draft }}\\nCritique: {{ feedback }}\\nBetter haiku:"
checks:
  min_lines: 3
  max_lines: 3
  must_not_match: '(?i)\\bsorry\\b'
  required_words: [moon]
"""


def test_yaml_checks_pick_the_sample_and_reject_a_worse_refinement_from_the_cli(tmp_path):
    (tmp_path / "haiku.yaml").write_text(HAIKU)
    replies = {
        "generate": ["Sorry, I cannot write poems.", "The moon on the lake\nripples in the night"],
        "feedback": ["Add a third line."],
        "refine": ["I am sorry.", "Moon\nlake"],
    }
    (tmp_path / "r.json").write_text(json.dumps(replies))
    args = ["run", str(tmp_path / "haiku.yaml"), "moon", "-m", f"fake:{tmp_path / 'r.json'}", "--json"]
    args += ["--samples", "2", "--select", "verified", "--accept", "not_worse", "--max-iters", "1"]
    out = CliRunner().invoke(cli, args)
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    first, attempt = data["iterations"]
    assert [c["chosen"] for c in first["candidates"]] == [False, True]
    lost = first["candidates"][0]["verification"]
    assert lost["score"] == 0 and "needs exactly 3 lines, has 1" in lost["text"] and "found 'Sorry'" in lost["text"]
    check = {"text": "needs exactly 3 lines, has 2", "passed": False, "score": 2 / 3, "answer": None}
    repair = "It has 2 lines; change it to have exactly 3 lines; keep the content."  # for --refine-form focused
    assert first["verification"] == {
        **check,
        "findings": [{"check": "exactly 3 lines", "text": check["text"], "repair": repair, "kind": "count"}],
    }
    assert attempt["accepted"] is False  # 1/3 and 1/3 after 2/3: rejected
    assert data["output"] == "The moon on the lake\nripples in the night"


def test_a_draft_that_passes_every_check_wins_and_says_so(tmp_path):
    (tmp_path / "haiku.yaml").write_text(HAIKU)
    task = load_task(tmp_path / "haiku.yaml")
    backend = FakeBackend({"generate": ["Moon.", "The moon rises\nover the quiet lake\nnight birds call"]})
    result = SelfRefine(task, backend, samples=2, max_iterations=0).run("moon")
    assert result.output.startswith("The moon rises") and result.iterations[0].verification.passed
    assert result.iterations[0].verification.text == "all checks pass" and task.has_verifier


@pytest.mark.parametrize(
    ("checks", "message"),
    [
        ("  max_word: 8", r"unknown key 'checks.max_word' \(known: must_match, must_not_match, min_words"),
        ("  must_match: '['", r"key 'checks.must_match': regex /\[/ is invalid"),
        ("  must_match: '(\\w+\\s?)*$'", r"a nested repeat"),
        ("  must_not_match: '.*a.*b'", r"could backtrack too long"),
        ("  must_match: '(a)\\1'", r"backreferences"),
        ("  min_lines: 4\n  max_lines: 3", r"min_lines 4 is more than max_lines 3"),
        ("  min_words: -1", r"checks.min_words"),
        ("  {}", r"no checks given"),
    ],
)
def test_checks_are_validated_strictly_when_the_file_loads(tmp_path, checks, message):
    path = tmp_path / "bad.yaml"
    path.write_text(HAIKU.split("checks:")[0] + "checks:\n" + checks + "\n")
    with pytest.raises(TaskFileError) as err:
        load_task(path)
    assert str(err.value).startswith(f"task file {path}: ") and "\n" not in str(err.value)
    assert re.search(message, str(err.value)), str(err.value)


def test_check_regexes_stay_fast_on_a_hostile_draft():
    from selfrefine import Checks
    from selfrefine.checks.declared import MAX_REGEX_CHARS

    checks = Checks(must_match=r"\w+x", must_not_match=r"\d{1,3}(?:,\d{3}){0,5}", max_words=3)
    started = time.monotonic()
    found = checks("in", "a" * MAX_REGEX_CHARS)  # the slowest draft the pattern may search
    assert time.monotonic() - started < 2 and found.text == "does not have the required form (check must_match)"
    long = checks("in", "a" * (MAX_REGEX_CHARS + 1) + " b c d")
    assert (
        long.score == 0 and "needs at most 3 words, has 4" in long.text and "the regex checks read at most" in long.text
    )


def test_findings_say_what_failed():
    from selfrefine import Checks

    checks = Checks(min_lines=3, max_lines=3, min_words=2, max_words=5, required_words=["Lumo", "lamp"])
    found = checks("in", "lumo\nlamps\nglow\nbright")
    # five checks: a line count (equal bounds: exactly), two word bounds, two words
    assert found.text == "needs exactly 3 lines, has 4; needs the word 'lamp'" and found.score == pytest.approx(3 / 5)
    assert Checks(max_words=1)("in", "a b").text == "needs at most 1 word, has 2"
    assert Checks(min_words=3)("in", "a b").text == "needs at least 3 words, has 2"
