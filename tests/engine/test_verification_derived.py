"""Whether a run verifies each draft as it arrives follows from what its parts need (the
strategy, the selection, the acceptance, the stop rules), each part saying so itself
(engine/refinement.py): a new stop rule that reads the drafts' checks declares it, and the
drafts are verified, with no list of features to join in engine/settings.py."""

from __future__ import annotations

import pytest

from selfrefine import FakeBackend, SelfRefine, Task
from selfrefine.core.config import RefineConfig
from selfrefine.core.records import DecisionStep, StopReason
from selfrefine.engine import stopping
from selfrefine.engine.drafting.registry import find_strategy
from selfrefine.engine.refinement import Refinement
from selfrefine.engine.settings import Settings


def checked_task() -> Task:
    return Task(
        "checked", generate="Write {{ input }}.", feedback="Critique: {{ draft }}", refine="Better: {{ draft }}"
    ).with_verifier(lambda input, draft: len(draft.split()) >= 4)


class LongEnough(stopping.StopRule):
    """A new stop rule: stop once the draft's checks pass (it reads every draft's checks)."""

    def needs_verification(self, settings: Settings) -> bool:
        return True

    def before_round(self, run, t):
        check = run.board.of_iteration(t)
        if check is not None and check.passed:
            return DecisionStep(iteration=t, stop=True, reason=StopReason.VERIFIED, detail="long enough")
        return None


def verifies(task: Task, **options) -> bool:
    settings = Settings.resolve(RefineConfig.build(**options), task, find_strategy)
    return Refinement(task, settings, {}, "x").run.verify_every_draft


def test_each_part_says_whether_it_reads_the_drafts_checks():
    task = checked_task()
    assert not verifies(task)  # one draft a step, the last returned, any refinement kept
    assert verifies(task, select="verified")  # the selection ranks drafts by their checks
    assert verifies(task, accept="not_worse")  # the acceptance compares a refinement's with its parent's
    assert verifies(task, samples=3)  # the strategy chooses among samples by their checks
    assert verifies(task, json_schema={"type": "object"})  # the schema's stop rule stops on a valid draft


def test_a_new_stop_rule_that_reads_the_checks_gets_every_draft_verified(monkeypatch: pytest.MonkeyPatch):
    model = FakeBackend(
        {
            "generate": ["a dog"],
            "feedback": ["longer"] * 3,
            "refine": ["a big dog", "a big dog runs", "a big dog runs far"],
        }
    )
    before = SelfRefine(checked_task(), model, max_iterations=3).run("dogs")
    assert [it.verification is not None for it in before.iterations][:3] == [False, False, False]  # none reads them

    monkeypatch.setattr(stopping, "BEFORE_ROUND", (*stopping.BEFORE_ROUND, LongEnough()))
    model = FakeBackend(
        {
            "generate": ["a dog"],
            "feedback": ["longer"] * 3,
            "refine": ["a big dog", "a big dog runs", "a big dog runs far"],
        }
    )
    after = SelfRefine(checked_task(), model, max_iterations=3).run("dogs")
    assert all(it.verification is not None for it in after.iterations)
    assert (after.stop_reason, after.output, len(after.iterations)) == ("verified", "a big dog runs", 3)
