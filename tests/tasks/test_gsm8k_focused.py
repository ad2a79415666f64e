"""gsm8k under ``refine_form="focused"`` on the fake model: a program that fails is repaired
from its finding's instruction (the error, then "Fix it so solution() returns the answer."),
kept only when it runs and returns a number (issue 45 item 2)."""

from __future__ import annotations

import pytest

from selfrefine import FakeBackend, SelfRefine

QUESTION = "A pen costs 3 dollars. How much do 4 pens cost?"
FAILS = "def solution():\n    price = 3\n    return price * pens\n"
RUNS = "def solution():\n    price = 3\n    pens = 4\n    return price * pens\n"


@pytest.fixture(autouse=True)
def _sandbox() -> None:
    from selfrefine.tasks.gsm8k import GSM8K

    try:
        GSM8K().verify("q", "def solution():\n    return 1\n")
    except Exception as exc:  # noqa: BLE001 - a machine without the sandbox cannot run programs
        pytest.skip(f"the sandbox cannot run programs here: {exc}")


def test_a_failing_program_is_repaired_in_focus_from_its_error() -> None:
    model = FakeBackend({"generate": [FAILS], "refine": [FAILS, RUNS]})
    result = SelfRefine("gsm8k", model, refine_form="focused", max_iterations=3).run(QUESTION, reference=12)
    first, second = result.iterations[1].focus, result.iterations[2].focus
    assert first is not None and not first.kept and first.why == "the repair changed nothing"
    assert second is not None and second.kept and second.check == "solution() runs and returns a number"
    assert second.repair.startswith("The program fails: ") and "NameError" in second.repair
    prompt = [r.prompt for r in model.requests if r.role == "refine"][0]
    assert QUESTION in prompt and FAILS.strip() in prompt and "Fix it so solution() returns the answer." in prompt
    assert [r.role for r in model.requests] == ["generate", "refine", "refine"]  # no critic call
    assert result.output == RUNS.strip() and result.metric == 1.0 and result.fails == []


def test_with_votes_the_failing_programs_finding_still_reaches_the_repair() -> None:
    # several samples vote on the answer; the voted check kept the text but dropped the
    # findings, so the focused round had no repair to ask for and fell back to the paper's form
    model = FakeBackend({"generate": [FAILS, FAILS], "refine": [RUNS]}, default='{"issues": []}')
    engine = SelfRefine("gsm8k", model, refine_form="focused", samples=2, max_iterations=1)
    result = engine.run(QUESTION, reference=12)
    focus = result.iterations[1].focus
    assert focus is not None and focus.check == "solution() runs and returns a number"
    assert "NameError" in focus.repair
