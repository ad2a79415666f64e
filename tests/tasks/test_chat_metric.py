"""The chat task's metric: the share of a dataset row's instruction checks an answer passes
(issue 29, "In the loop": IFEval-style requests with code checks). The checks are the
reference: only the metric sees them, never the critic or the refiner."""

from __future__ import annotations

import json

import pytest

from selfrefine import SelfRefine
from selfrefine.backends.fake import FakeBackend
from selfrefine.core.errors import TaskError
from selfrefine.tasks.chat import Chat

NOTE = {"max_words": 10, "must_not_match": ",", "required_words": ["Thursday"]}
BULLETS = {"min_lines": 3, "max_lines": 3, "must_not_match": [r"^(?!\* )\S"]}  # chat_requests.jsonl's chat-01


@pytest.mark.parametrize(
    "checks, answer, score",
    [
        (NOTE, "Please water my plants on Thursday.", 1.0),
        (NOTE, "Hello, friend, please water my plants on Monday.", 1 / 3),  # a comma, no Thursday
        (NOTE, "Hello, friend, please water my plants on Monday and on Tuesday too.", 0.0),  # 11 words
        (BULLETS, "* energy\n\n* skin\n* focus", 1.0),  # blank lines are not lines
        (BULLETS, "Water helps:\n* energy\n* skin", 0.5),  # three lines, but one is no bullet
        (BULLETS, "Water helps:\n* energy\n* skin\n* focus", 0.0),
    ],
)
def test_the_metric_is_the_share_of_the_rows_checks_passed(checks, answer, score):
    assert Chat().metric("a request", answer, checks) == pytest.approx(score)


def test_without_checks_there_is_no_metric():
    assert Chat().metric("Say hi.", "Hi!") is None and Chat().metric("Say hi.", "Hi!", None) is None


@pytest.mark.parametrize(
    "reference, message",
    [
        ({"must_match": "(a+)+b"}, r"^check must_match: regex /\(a\+\)\+b/ repeats a group"),
        ({"max_wrds": 5}, r"^unknown check 'max_wrds'; known: must_match"),
        ({}, r"^check checks: no checks given"),
        ({"min_words": 9, "max_words": 3}, r"min_words 9 is more than max_words 3"),
        (["max_words"], r"^chat's reference is a mapping of checks .* not list$"),
        ("under 50 words", r"^chat's reference is a mapping of checks .* not str$"),
    ],
)
def test_a_bad_reference_is_a_one_line_task_error(reference, message):
    with pytest.raises(TaskError, match=message) as caught:
        Chat().metric("Say hi.", "Hi!", reference)
    assert "\n" not in str(caught.value)


def test_the_checks_reach_the_metric_and_never_a_prompt():
    checks = {"must_not_match": r"zq{1,3}x", "required_words": ["Thursday"]}
    backend = FakeBackend(
        {
            "generate": ["See you on Monday."],
            "feedback": [json.dumps({"issues": ["Say which day: Thursday."]}), '{"issues": []}'],
            "refine": ["See you on Thursday."],
        }
    )
    result = SelfRefine("chat", backend, max_iterations=2).run("Invite me for Thursday.", checks)
    assert result.drafts == ["See you on Monday.", "See you on Thursday."]
    assert result.metric == 1.0  # the returned draft passes both checks
    prompts = backend.prompts()  # the loop's 4 calls: the request states no instruction, so no derivation call
    assert len(prompts) == 4 and not any("zq{1,3}x" in p or "required_words" in p for p in prompts)
