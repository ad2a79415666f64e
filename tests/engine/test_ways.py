"""Votes across ways of solving (issue 31), on the fake model: gsm8k's samples written as a
program and as a step-by-step answer in turn, votes weighted by how often each way agrees
with the others, and a disputed draft's refinement shown the other answers' drafts."""

from __future__ import annotations

import pytest

from selfrefine import FakeBackend, SelfRefine
from selfrefine.core.errors import ConfigError, DraftParseError
from selfrefine.engine.scoring.votes import tally, way_weights
from selfrefine.tasks.gsm8k import GSM8K, steps_program

QUESTION = "Nine apples twice: how many?"
TWO = ("program", "steps")


def program(value: int) -> str:
    return f"def solution():\n    return {value}"


def steps(value: int) -> str:
    return f"Nine apples twice is 9 * 2.\nThe answer is {value}."


def test_a_step_by_step_answer_becomes_a_program_that_returns_its_number():
    code = steps_program("Tom has 3 * 4 = 12 apples.\nHe eats 2: 12 - 2 = 10.\nThe answer is 1,010.")
    assert code == "def solution():\n    # Tom has 3 * 4 = 12 apples.\n    # He eats 2: 12 - 2 = 10.\n    return 1010"
    assert GSM8K().verify(QUESTION, code).answer == "1010"
    assert steps_program("The answer is $5.50") == "def solution():\n    return 5.5"
    assert steps_program("```python\ndef solution():\n    return 3\n```") == "def solution():\n    return 3"
    with pytest.raises(DraftParseError, match="The answer is N"):
        steps_program("It is probably eighteen.")


def test_a_hostile_step_stays_a_comment():
    # every line of the reasoning becomes a comment: none of it runs
    code = steps_program("x = 1\n    import os; os.system('rm -rf /')\r\nThe answer is 3.")
    body = code.splitlines()[1:-1]
    assert body and all(line.startswith("    # ") for line in body)
    assert GSM8K().verify(QUESTION, code).answer == "3"


def test_votes_of_one_way_weigh_one_and_of_two_ways_by_their_agreement():
    assert way_weights([None, None, None], ["18", "12", None]) == [1.0, 1.0, 1.0]
    # program says 18, 18, 12; steps say 12, 99: a third of the programs' answers (12) is among
    # the steps' answers, half of the steps' answers (12) among the programs'
    ways = ["program", "steps", "program", "steps", "program"]
    answers = ["18", "12", "18", "99", "12"]
    weights = way_weights(ways, answers)
    assert [round(w, 3) for w in weights] == [0.667, 0.75, 0.667, 0.75, 0.667]
    counts = tally(answers, weights)
    assert round(counts["12"], 3) == 1.417 and round(counts["18"], 3) == 1.333  # 12 leads; raw is 2-2


def test_samples_are_written_each_way_in_turn_and_the_weighted_majority_is_returned():
    replies = [program(18), steps(12), program(18), steps(99), program(12)]
    backend = FakeBackend({"generate": replies})
    result = SelfRefine("gsm8k", backend, samples=5, max_iterations=0, ways=TWO).run(QUESTION)
    gens = [r for r in backend.requests if r.role == "generate"]
    assert [("Python function" in r.prompt, "The answer is N." in r.prompt) for r in gens] == [
        (True, False),
        (False, True),
    ] * 2 + [(True, False)]
    assert [(r.temperature, r.seed) for r in gens] == [(0.0, 0), (0.0, 1), (0.7, 2), (0.7, 3), (0.7, 4)]
    first = result.iterations[0]
    assert [c.way for c in first.candidates] == ["program", "steps", "program", "steps", "program"]
    # raw votes tie 18 and 12 (2 each; the first seen, 18, would win); weighted, 12 wins
    assert (
        result.answer == "12" and result.output == "def solution():\n    # Nine apples twice is 9 * 2.\n    return 12"
    )
    assert "# Votes: 2 samples return 18, 2 samples return 12, 1 sample returns 99" in first.verification.text
    # gsm8k's default, one way only: the votes of before (the tie goes to the first seen)
    backend = FakeBackend({"generate": replies})
    one = SelfRefine("gsm8k", backend, samples=5, max_iterations=0).run(QUESTION)
    assert one.answer == "18" and all(c.way is None for c in one.iterations[0].candidates)
    assert "way" not in one.iterations[0].candidates[0].model_dump()  # records as before ways


def test_a_disputed_draft_is_refined_with_the_other_answers_drafts():
    # no majority (18, 12, 7): the verifier is not satisfied, and the refinement sees the others
    backend = FakeBackend({"generate": [program(18), steps(12), program(7)], "refine": [program(18)]})
    engine = SelfRefine("gsm8k", backend, samples=3, max_iterations=1, verifier_mode="verifier", ways=TWO)
    result = engine.run(QUESTION)
    refine = next(r for r in backend.requests if r.role == "refine")
    said = (
        "# The samples disagree (1 sample returns 18, 1 sample returns 12, 1 sample returns 7); this draft returns 18."
    )
    assert said in refine.prompt
    assert "# A sample that returns 12:\ndef solution():\n    # Nine apples twice is 9 * 2.\n    return 12" in (
        refine.prompt
    )
    assert "# A sample that returns 7:\ndef solution():\n    return 7" in refine.prompt
    assert "Which reading of the question is right?" in result.iterations[0].feedback.text
    # samples that agree: nothing to weigh, no rival shown
    backend = FakeBackend({"generate": [program(18), steps(18), program(18)], "refine": [program(18)]})
    SelfRefine("gsm8k", backend, samples=3, max_iterations=1, verifier_mode="verifier", ways=TWO).run(QUESTION)
    assert all("disagree" not in r.prompt for r in backend.requests)


def test_auto_asks_each_way_first_and_stops_when_two_ways_agree():
    backend = FakeBackend({"generate": [program(18), steps(18), program(12)]})
    result = SelfRefine("gsm8k", backend, strategy="auto", max_total_tokens=10_000, ways=TWO).run(QUESTION)
    assert [c.way for c in result.iterations[0].candidates] == ["program", "steps"]
    assert result.answer == "18" and result.stop_reason.value == "verified"


def test_ways_a_task_lacks_or_a_run_cannot_use_are_a_clear_error():
    backend = FakeBackend({"generate": [program(18)]})
    with pytest.raises(ConfigError, match="task 'gsm8k' has no way 'prose': its ways are program, steps, quantities"):
        SelfRefine("gsm8k", backend, samples=2, ways=("prose",))
    with pytest.raises(ConfigError, match="it writes its drafts one way"):
        SelfRefine("commongen", backend, samples=2, ways=("program",))
    with pytest.raises(ConfigError, match="give samples > 1 or strategy auto"):
        SelfRefine("gsm8k", backend, ways=("program", "steps"))


def test_ways_in_the_order_asked_each_with_its_own_prompt():
    # the run's order decides which way comes first; each way keeps its own template
    backend = FakeBackend({"generate": [steps(18), program(18)]})
    SelfRefine("gsm8k", backend, samples=2, max_iterations=0, ways=("steps", "program")).run(QUESTION)
    assert ["The answer is N." in r.prompt for r in backend.requests] == [True, False]


def test_the_quantities_way_is_a_program_that_quotes_the_question_first():
    backend = FakeBackend({"generate": [program(18), program(18)]})
    engine = SelfRefine("gsm8k", backend, samples=2, max_iterations=0, ways=("program", "quantities"))
    result = engine.run(QUESTION)
    assert "copy, as comments, each number the question gives" in backend.requests[1].prompt
    assert [c.way for c in result.iterations[0].candidates] == ["program", "quantities"]
