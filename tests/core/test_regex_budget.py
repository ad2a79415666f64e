"""Issue 46 item 1: one cost bound for every regex a run brings, whatever form it comes in.

On c3793c2 a list was bounded together only where it was one list: a task file's
``must_match:``/``must_not_match:`` (refused in 3 s), a task's or a request's stop patterns.
The ``regex`` checks of a ``checks:`` list (a task file's, or an API request's), the
model's derived checks and regexes from different places (a task file's checks with its
score and stop patterns, with the request's stop patterns and regex checks) were each
bounded alone: 32 regex checks each just within the bound ran 82.9 s in a task file and
77.8 s through ``serve`` (here: 8-12 s for a run of one draft). Now every regex of a run
shares the one budget (:func:`selfrefine.core.saferegex.within_budget`), and a run over it
is refused before any model call."""

from __future__ import annotations

import asyncio
import json
import re
import time

import pytest

from selfrefine import ChecksStep, ConfigError, FakeBackend, SelfRefine, Task, TaskError, TaskFileError, load_task
from selfrefine.checks.instructions import InstructionChecks, parse_checks
from selfrefine.core.saferegex import MAX_REGEX_STEPS, bounded, regex_steps, within_budget

TEMPLATES = {"generate": "Write about {{ input }}.", "feedback": "Critique {{ draft }}", "refine": "Better {{ draft }}"}
# the audit's payload: 32 distinct patterns, each within the bound alone (about 0.2-0.4 s
# each on a draft of word characters), far over it together
HEAVY = [rf"(?:\w+\W){{0,3}}{chr(ord('A') + i % 26)}{i // 26}" for i in range(32)]
DRAFT = "a" * 4999 + " "  # the draft that makes each of them slowest
REGEX_CHECKS = [{"type": "regex", "pattern": p} for p in HEAVY]


def _task_file(tmp_path, **keys) -> str:
    path = tmp_path / "hostile.yaml"
    path.write_text(json.dumps({"name": "hostile", **TEMPLATES, "max_iterations": 1, **keys}))
    return str(path)


def test_each_pattern_of_the_payload_is_within_the_bound_alone_and_two_are_over_it():
    for pattern in HEAVY:
        bounded(pattern, re.MULTILINE)
    assert regex_steps(HEAVY[0], re.MULTILINE) * 2 > MAX_REGEX_STEPS
    with pytest.raises(ValueError, match="these 2 check regexes together could backtrack too long"):
        within_budget([(p, re.MULTILINE) for p in HEAVY[:2]], "check regexes")


def test_thirty_two_regex_checks_in_a_list_are_refused_together_quickly():
    started = time.monotonic()
    with pytest.raises(TaskError, match="^these 32 regex checks together could backtrack too long"):
        parse_checks(REGEX_CHECKS)
    with pytest.raises(TaskError, match="these 32 regex checks together"):
        InstructionChecks(REGEX_CHECKS)
    assert time.monotonic() - started < 5  # refused by the estimate, nothing searched


def test_a_task_files_checks_list_of_32_regexes_is_refused_at_load(tmp_path):
    path = _task_file(tmp_path, checks=REGEX_CHECKS)
    started = time.monotonic()
    with pytest.raises(TaskFileError) as caught:
        task = load_task(path)
        SelfRefine(task, FakeBackend(default=DRAFT), max_iterations=0).run("rain")  # 12 s on c3793c2
    assert time.monotonic() - started < 5
    message = str(caught.value)
    assert path in message and "these 32 regex checks together could backtrack too long" in message, message
    # the mapping form was, and is, refused the same way
    with pytest.raises(TaskFileError, match="these 32 check regexes together"):
        load_task(_task_file(tmp_path, checks={"must_not_match": HEAVY}))


def test_a_requests_regex_checks_are_refused_together_before_any_call():
    fake = FakeBackend(default=DRAFT)
    started = time.monotonic()
    with pytest.raises(ConfigError, match="invalid option checks: these 32 regex checks together"):
        SelfRefine("chat", fake, checks=REGEX_CHECKS, max_iterations=0).run("rain")
    assert time.monotonic() - started < 5 and fake.requests == []


@pytest.mark.parametrize(
    ("task_keys", "options"),
    [
        # a task file's checks list beside its stop patterns
        ({"checks": REGEX_CHECKS[:1], "stop": {"matches": HEAVY[1]}}, None),
        # a task file's mapping beside its score regex
        ({"checks": {"must_match": HEAVY[:1]}, "score": rf"({HEAVY[1]})"}, None),
        # a task file's checks, and the request's regex checks
        ({"checks": {"must_match": HEAVY[:1]}}, {"checks": REGEX_CHECKS[1:2]}),
        ({"checks": REGEX_CHECKS[:1]}, {"checks": REGEX_CHECKS[1:2]}),
        # a task file's stop patterns, and the request's stop patterns
        ({"stop": {"matches": HEAVY[0]}}, {"stop_matches": HEAVY[1:2]}),
        # the request's own: its stop patterns beside its regex checks
        ({}, {"stop_matches": HEAVY[:1], "checks": REGEX_CHECKS[1:2]}),
    ],
    ids=["list+stop", "mapping+score", "mapping+request", "list+request", "stop+request_stop", "request_stop+checks"],
)
def test_regexes_from_different_places_share_one_budget(tmp_path, task_keys, options):
    fake = FakeBackend(default=DRAFT)
    with pytest.raises((TaskFileError, ConfigError), match="together could backtrack too long") as caught:
        task = load_task(_task_file(tmp_path, **task_keys))
        SelfRefine(task, fake, max_iterations=0, **(options or {})).run("rain")
    assert "regexes" in str(caught.value) and fake.requests == []


def test_regexes_within_the_budget_together_still_run():
    light = [
        {"type": "regex", "pattern": r"^Title: \w{1,40}$"},
        {"type": "regex", "pattern": r"\bsorry\b", "present": False},
    ]
    task = Task("t", **TEMPLATES, score=r"score:\s*(\d+)", stop_matches=[r"^lgtm\b"], verify={"must_match": [r"\d"]})
    result = SelfRefine(
        task, FakeBackend(default="Title: rain\nscore: 3"), checks=light, max_iterations=1, verifier_mode="verifier"
    ).run("x")
    assert [c.check["type"] for c in result.checks] == ["regex", "regex"]
    assert result.iterations[0].verification.passed is True, result.iterations[0].verification


def test_a_model_never_derives_a_regex_check():
    # the request says "regex": on c3793c2 the model's regex checks were kept, each bounded alone
    derived = json.dumps({"checks": [{"type": "regex", "pattern": HEAVY[0]}, {"type": "regex", "pattern": HEAVY[1]}]})
    engine = SelfRefine(
        "chat",
        FakeBackend({"checks": [derived]}, default="* one\n* two\n* three"),
        max_iterations=0,
        derive_checks=True,
    )

    async def steps() -> list:
        request = "Give me three tips as a bulleted list; each line must match the regex \\w+."
        return [s async for s in engine.astream(request)]

    found = asyncio.run(steps())
    [step] = [s for s in found if isinstance(s, ChecksStep)]
    assert all(c.check["type"] != "regex" for c in step.checks) and all(
        c.check["type"] != "regex" for c in found[-1].result.checks
    )
    assert [d.check["type"] for d in step.dropped] == ["regex", "regex"]  # recorded as dropped, not silently lost
