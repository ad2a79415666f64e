"""A check kind is added in one place (issue 44): a class defining its arguments, check,
finding, description, repair, grounding and example registers itself by being defined, and
from then on a task file's ``checks:`` list reads it, it checks drafts and says its repair, the
derivation's prompt and schema offer it, and a request that states it keeps it. No other file
is edited: the kind below lives only in this test module."""

from __future__ import annotations

import asyncio
import re
from typing import ClassVar, Literal

import pytest
from pydantic import Field

from selfrefine import ChecksStep, FakeBackend, SelfRefine
from selfrefine.checks.instructions import CHECK_TYPES, KINDS, Instruction, checks_schema, parse_checks
from selfrefine.core.errors import TaskError
from selfrefine.engine import derivation
from selfrefine.tasks.taskfile import load_task

TASK = """\
name: cheer
generate: "Write about {{ input }}."
feedback: "Draft: {{ draft }}\\nCritique:"
refine: "Draft: {{ draft }}\\nCritique: {{ feedback }}\\nBetter:"
checks:
  - {type: exclaims, n: 2}
  - {type: count, unit: words, relation: at most, n: 10}
"""
REQUEST = "Cheer the team on in one line, with at least 2 exclamation marks."


@pytest.fixture
def exclaims():
    """The new kind, defined here and nowhere else; forgotten afterwards, so the other tests
    see the built-in kinds only."""

    class Exclaims(Instruction):
        """At least ``n`` exclamation marks."""

        type: Literal["exclaims"] = "exclaims"
        n: int = Field(ge=1, le=100)
        example: ClassVar[str] = '{"type": "exclaims", "n": 2}'

        def _problem(self, text: str) -> str | None:
            found = text.count("!")
            return None if found >= self.n else f"needs at least {self.n} exclamation marks, has {found}"

        def describe(self) -> str:
            return f"at least {self.n} exclamation marks"

        def _repair(self, text: str) -> str:
            return (
                f"Add {self.n - text.count('!')} more exclamation marks at the ends of sentences; change nothing else."
            )

        def grounded(self, text: str) -> bool:
            return re.search(r"\bexclamation", text) is not None

    yield Exclaims
    del KINDS["exclaims"]


def test_a_task_file_reads_the_new_kind_checks_a_draft_and_says_its_repair(exclaims, tmp_path):
    path = tmp_path / "cheer.yaml"
    path.write_text(TASK)
    verifier = load_task(path).declared.verifier
    [check, _] = verifier.fn.checks
    assert isinstance(check, exclaims) and check.n == 2
    assert verifier("team", "Go team! Win!").passed
    failed = verifier("team", "Go team.")
    assert not failed.passed and failed.score == 0.5
    [finding] = failed.findings
    assert (
        finding.text == "needs at least 2 exclamation marks, has 0" and finding.check == "at least 2 exclamation marks"
    )
    assert finding.repair == "Add 2 more exclamation marks at the ends of sentences; change nothing else."


def test_a_request_that_states_the_new_kind_grounds_it_and_one_that_does_not_drops_it(exclaims):
    [check] = parse_checks([{"type": "exclaims", "n": 2}])
    assert derivation.grounded(check, REQUEST)
    assert not derivation.grounded(check, REQUEST.replace("2", "3"))  # its number: the shared test
    assert not derivation.grounded(check, "Cheer the team on in 2 lines.")  # its own words: the kind's test


def test_the_derivation_offers_the_new_kind_and_keeps_it_where_stated(exclaims):
    assert "exclaims" in str(checks_schema())
    prompt = derivation.template().render({"input": REQUEST})
    assert '{"type": "language", "code": "de"}\n{"type": "exclaims", "n": 2}\n\nRequest:' in prompt  # a line of its own
    assert derivation.prompt_version() != derivation.PROMPT_VERSION  # a derivation cached before is not reused
    derived = '{"checks": [{"type": "exclaims", "n": 2}, {"type": "exclaims", "n": 5}]}'
    backend = FakeBackend({"checks": [derived]}, default="Go team! Win!")
    steps = asyncio.run(_steps(SelfRefine("chat", backend, max_iterations=1)))
    [shown] = [s for s in steps if isinstance(s, ChecksStep)]
    assert [c.check for c in shown.checks] == [{"type": "exclaims", "n": 2}]  # 5 is not in the request
    assert [d.check for d in shown.dropped] == [{"type": "exclaims", "n": 5}]
    assert steps[-1].result.iterations[0].verification.passed


async def _steps(engine):
    return [s async for s in engine.astream(REQUEST)]


def test_a_kind_cannot_take_a_type_another_kind_has():
    with pytest.raises(TypeError, match="check type 'count' is taken by selfrefine.checks.instructions.counts.Count"):

        class Counted(Instruction):
            type: Literal["count"] = "count"

    assert KINDS["count"] in CHECK_TYPES


def test_the_built_in_kinds_alone_are_known_outside_the_new_kinds_test():
    """The kind above is gone once each of its tests ends."""
    assert "exclaims" not in KINDS and set(KINDS) == {str(k.model_fields["type"].default) for k in CHECK_TYPES}
    with pytest.raises(TaskError, match="unknown type"):
        parse_checks([{"type": "exclaims", "n": 2}])
    assert "exclaims" not in derivation.template().source
