"""Several samples per step, on the fake model: exact trajectories of candidates, selection,
ties, votes, the auto strategy, and the shape of the record, the stream and the JSON."""

from __future__ import annotations

import json
import time

import pytest
from click.testing import CliRunner

from selfrefine import FakeBackend, SelfRefine, StopReason, Task
from selfrefine.cli.commands import cli
from selfrefine.core.errors import ConfigError
from selfrefine.core.records import DraftStep

FB = json.dumps({"missing_concepts": [], "commonsense": "It is odd."})  # never "done": the loop refines


def commongen(generate: list[str], refine: list[str] | None = None, **options) -> tuple:
    backend = FakeBackend({"generate": generate, "feedback": [FB] * 8, "refine": refine or []}, default=FB)
    engine = SelfRefine("commongen", backend, **options)
    return engine, backend


def test_the_first_draft_is_the_best_of_k_samples_and_the_losers_stay_in_the_record():
    engine, backend = commongen(["A dog.", "A dog runs in the park.", "A dog runs."], samples=3, max_iterations=0)
    result = engine.run("dog, run, park")
    first = result.iterations[0]
    assert [c.draft for c in first.candidates] == ["A dog.", "A dog runs in the park.", "A dog runs."]
    assert [c.chosen for c in first.candidates] == [False, True, False]
    assert [round(c.verification.score, 3) for c in first.candidates] == [0.333, 1.0, 0.667]
    assert result.output == "A dog runs in the park." and first.verification.score == 1.0
    # three generate requests, seeded apart, at the task's sampling temperature
    gens = [r for r in backend.requests if r.role == "generate"]
    assert [r.seed for r in gens] == [0, 1, 2] and {r.temperature for r in gens} == {
        1.0
    }  # commongen's sampling temperature
    assert [c.call.attempt for c in first.candidates] == [1, 2, 3]


def test_a_tie_among_samples_goes_to_the_first():
    engine, _ = commongen(["A dog runs.", "A dog is running."], samples=2, max_iterations=0)
    result = engine.run("dog, run")
    assert [c.chosen for c in result.iterations[0].candidates] == [True, False]


def test_a_refinement_round_is_accepted_only_when_its_best_scores_strictly_higher():
    engine, backend = commongen(
        ["A dog runs.", "A dog runs."],  # 2 of 3 concepts
        [
            "A dog runs fast.",
            "A dog runs home.",  # round 1: a tie at 2/3 -> rejected, draft 0 kept
            "A dog runs in the park.",
            "A dog.",
        ],  # round 2: 3/3 -> accepted
        samples=2,
        max_iterations=2,
        judging=False,  # the critic's tie-breaks (the judge's: test_judged_loop.py)
    )
    result = engine.run("dog, run, park")
    assert [it.accepted for it in result.iterations] == [True, False, True]
    assert result.selected == 2 and result.output == "A dog runs in the park."
    assert result.iterations[1].feedback.source == "verifier"  # the rejected round's findings, no critic call
    # draft 0: two identical samples, one critique (kept as its feedback); round 1: two
    # refinements from one prompt, tied, so the critic sees each; round 2: two more, the
    # winner is clear; no critique of draft 2: at the cap, with no draft tied with it on the
    # verifier, it could change nothing
    roles = [r.role for r in backend.requests]
    assert roles == ["generate", "generate", "feedback", "refine", "refine", "feedback", "feedback", "refine", "refine"]
    assert len({r.prompt for r in backend.requests[3:5]}) == 1


def test_a_round_whose_samples_echo_the_parent_is_rejected():
    engine, _ = commongen(["A dog runs.", "A dog."], ["A dog runs.", "A  dog runs."], samples=2, max_iterations=1)
    result = engine.run("dog, run, park")
    assert [it.accepted for it in result.iterations] == [True, False] and result.selected == 0


def test_k_samples_need_a_verifier_and_a_temperature():
    with pytest.raises(ConfigError, match="needs a task with a verifier or a judge.*its judge is off"):
        SelfRefine("dialogue", FakeBackend(), samples=2, judging=False)
    with pytest.raises(ConfigError, match="needs a task with a verifier or a judge.*has no verifier and no judge"):
        SelfRefine(
            Task("plain", generate="{{ input }}", feedback="{{ draft }}", refine="{{ draft }}"),
            FakeBackend(),
            samples=2,
        )
    with pytest.raises(ConfigError, match="temperature 0 makes every sample the same draft"):
        SelfRefine("commongen", FakeBackend(), samples=2, temperature=0)
    with pytest.raises(ConfigError, match="strategy auto spends a token budget"):
        SelfRefine("commongen", FakeBackend(), strategy="auto")


PROGRAMS = {
    "18a": "def solution():\n    return 18",
    "18b": "def solution():\n    x = 9\n    return 2 * x",
    "12": "def solution():\n    return 12",
    "crash": "def solution():\n    return 1 / 0",
}


def test_votes_score_answers_by_agreement_and_return_the_majority():
    replies = [PROGRAMS["12"], PROGRAMS["18a"], PROGRAMS["crash"], PROGRAMS["18b"]]
    backend = FakeBackend({"generate": replies})
    engine = SelfRefine("gsm8k", backend, samples=4, max_iterations=0)
    result = engine.run("Nine apples twice: how many?")
    cands = result.iterations[0].candidates
    assert [c.verification.answer for c in cands] == ["12", "18", None, "18"]
    assert [c.verification.score for c in cands] == [0.25, 0.5, 0.0, 0.5]
    assert [c.chosen for c in cands] == [False, True, False, False]  # the first of the majority
    assert result.answer == "18" and result.output == PROGRAMS["18a"]
    assert "# Votes: 2 samples return 18, 1 sample returns 12, 1 gives no answer" in cands[1].verification.text
    # samples tied at the top give the same answer: no critic is asked to choose among them
    assert all(c.feedback is None for c in cands)


def test_the_auto_strategy_widens_after_a_rejected_round_and_stops_within_its_budget():
    engine, backend = commongen(
        ["A dog.", "A dog."],  # 2 samples to start, both 1/3
        ["A dog.", "A dog."] + ["A dog runs in the park."] * 4,  # echoes: the next round is wider
        strategy="auto",
        max_total_tokens=100_000,
        max_iterations=2,
    )
    result = engine.run("dog, run, park")
    assert [len(it.candidates) for it in result.iterations] == [2, 2, 4]
    assert result.output == "A dog runs in the park."
    decisions = []
    engine2, _ = commongen(["A dog runs in the park.", "A dog."], strategy="auto", max_total_tokens=100_000)

    async def collect():
        async for step in engine2.astream("dog, run, park"):
            decisions.append(step)

    import asyncio

    asyncio.run(collect())
    final = decisions[-1].result
    assert final.stop_reason is StopReason.VERIFIED and len(final.iterations) == 1  # satisfied: no critique


def test_the_auto_strategy_stops_when_the_budget_pays_for_no_round():
    engine, _ = commongen(["A dog.", "A dog."], strategy="auto", max_total_tokens=60, max_iterations=3)
    result = engine.run("dog, run, park")
    assert result.stop_reason is StopReason.TOKEN_BUDGET and len(result.iterations) == 1


def test_the_stream_and_the_json_carry_every_candidate(tmp_path):
    engine, _ = commongen(["A dog.", "A dog runs in the park."], samples=2, max_iterations=0)
    steps = []

    async def go():
        async for step in engine.astream("dog, run, park"):
            steps.append(step)

    import asyncio

    asyncio.run(go())
    drafts = [s for s in steps if isinstance(s, DraftStep)]
    assert len(drafts) == 1 and len(drafts[0].candidates) == 2 and drafts[0].draft == "A dog runs in the park."
    replies = tmp_path / "r.json"
    replies.write_text(json.dumps({"generate": ["A dog.", "A dog runs in the park."], "default": FB}))
    out = CliRunner().invoke(
        cli,
        ["run", "commongen", "dog, run, park", "-m", f"fake:{replies}", "--samples", "2", "--max-iters", "0", "--json"],
    )
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert data["config"]["samples"] == 2 and data["config"]["select"] == "verified"
    assert [c["chosen"] for c in data["iterations"][0]["candidates"]] == [False, True]
    live = CliRunner().invoke(
        cli, ["run", "commongen", "dog, run, park", "-m", f"fake:{replies}", "--samples", "2", "--max-iters", "0"]
    )
    assert "best of 2 samples" in live.output and "lost" in live.output and "✓ chosen" in live.output


def test_preset_best_sets_the_tasks_best_options_and_explicit_ones_win():
    engine = SelfRefine("gsm8k", FakeBackend(), preset="best")
    assert (engine.config.samples, engine.max_iterations) == (1, 0)  # measured best on the default model
    engine = SelfRefine("commongen", FakeBackend(), preset="best", samples=2)
    assert (engine.config.samples, engine.max_iterations, engine.config.verifier_mode) == (2, 1, "hybrid")
    assert SelfRefine("commongen", FakeBackend(), preset="paper").config.samples == 1
    engine = SelfRefine("sentiment", FakeBackend(), preset="best")  # 4 rewrites, no round (measured)
    assert (engine.config.samples, engine.max_iterations, engine.config.verifier_mode) == (4, 0, "hybrid")


def test_the_critic_breaks_a_tie_at_the_top_and_its_critique_is_the_steps_feedback():
    done = json.dumps({"missing_concepts": [], "commonsense": "NONE"})
    odd = json.dumps({"missing_concepts": [], "commonsense": "A knife cannot be cut."})
    backend = FakeBackend(
        {
            "generate": ["The chef cut the knife in the kitchen.", "In the kitchen the chef cut bread with a knife."],
            "feedback": [odd, done],
        }
    )
    engine = SelfRefine("commongen", backend, samples=2, max_iterations=1, verifier_mode="hybrid", judging=False)
    result = engine.run("kitchen, knife, cut")
    first = result.iterations[0]
    assert [c.verification.score for c in first.candidates] == [1.0, 1.0]  # the verifier ties them
    assert [c.chosen for c in first.candidates] == [False, True]  # the critic finds the second done
    assert result.output == "In the kitchen the chef cut bread with a knife."
    assert result.stop_reason is StopReason.FEEDBACK  # its critique, reused: done, so no refinement
    assert [r.role for r in backend.requests] == ["generate", "generate", "feedback", "feedback"]


def test_at_the_cap_no_critique_is_paid_for_that_cannot_change_the_returned_draft():
    # best of 4 programs and no round: the critique of the chosen one changed nothing (a
    # gsm8k best-of-5 paid ~250 tokens an example for it)
    backend = FakeBackend({"generate": [PROGRAMS["18a"], PROGRAMS["12"], PROGRAMS["18b"], PROGRAMS["18a"]]})
    result = SelfRefine("gsm8k", backend, samples=4, max_iterations=0, verifier_mode="hybrid").run("Twice nine?")
    assert [r.role for r in backend.requests] == ["generate"] * 4
    assert result.answer == "18" and result.stop_reason is StopReason.MAX_ITERATIONS
    assert result.iterations[0].feedback is None
    # samples tied at the top of the last step go to the first, not to the critic (with the
    # judge off; on, the judge orders them: test_judged_loop.py)
    engine, backend = commongen(
        ["A dog runs in a park.", "In the park a dog runs."], samples=2, max_iterations=0, judging=False
    )
    result = engine.run("dog, run, park")
    assert [c.chosen for c in result.iterations[0].candidates] == [True, False]
    assert [r.role for r in backend.requests] == ["generate", "generate"]


def test_final_feedback_asks_for_the_critiques_at_the_cap():
    engine, backend = commongen(
        ["A dog runs in a park.", "In the park a dog runs."],
        samples=2,
        max_iterations=0,
        final_feedback=True,
        judging=False,
    )
    result = engine.run("dog, run, park")
    # the critic breaks the tie, and the chosen sample's critique is the step's feedback
    assert [r.role for r in backend.requests] == ["generate", "generate", "feedback", "feedback"]
    assert result.iterations[0].feedback is not None


def test_a_tie_with_another_draft_at_the_cap_still_gets_the_critique_that_breaks_it():
    # draft 1 ties draft 0 on the verifier: select verified reads the critic's score of both
    backend = FakeBackend({"generate": ["A dog runs."], "feedback": [FB] * 4, "refine": ["A dog is running."]})
    engine = SelfRefine(
        "commongen", backend, max_iterations=1, select="verified", verifier_mode="hybrid", judging=False
    )
    result = engine.run("dog, run, park")
    assert [r.role for r in backend.requests] == ["generate", "feedback", "refine", "feedback"]
    assert result.iterations[1].feedback is not None


def gsm8k_auto(programs: list[str], budget: int = 100_000) -> tuple:
    backend = FakeBackend({"generate": programs})
    engine = SelfRefine("gsm8k", backend, strategy="auto", max_total_tokens=budget, max_iterations=2)
    return engine.run("Nine apples twice: how many?"), backend


def test_auto_on_an_answer_task_stops_at_two_agreeing_votes():
    result, backend = gsm8k_auto([PROGRAMS["18a"], PROGRAMS["18b"], PROGRAMS["12"]])
    assert [r.role for r in backend.requests] == ["generate", "generate"]
    assert result.stop_reason is StopReason.VERIFIED and result.answer == "18"


def test_auto_on_an_answer_task_samples_more_votes_while_they_disagree():
    # 18 / 12 -> two more; 18, 12, 18, crash: 2-1 -> one more; 18: 3-1, settled
    programs = [PROGRAMS["18a"], PROGRAMS["12"], PROGRAMS["18b"], PROGRAMS["crash"], PROGRAMS["18a"], PROGRAMS["12"]]
    result, backend = gsm8k_auto(programs)
    first = result.iterations[0]
    assert [c.verification.answer for c in first.candidates] == ["18", "12", "18", None, "18"]
    assert [r.seed for r in backend.requests] == [0, 1, 2, 3, 4]  # each wave seeded on from the last
    assert result.stop_reason is StopReason.VERIFIED and result.answer == "18" and len(result.iterations) == 1
    # a budget that pays for three samples stops the waves there, and no critique follows
    per_sample = max(c.prompt_tokens + c.completion_tokens for c in result.calls)
    result, backend = gsm8k_auto(programs, budget=int(3.5 * per_sample))
    assert len(result.iterations[0].candidates) == 3 and [r.role for r in backend.requests] == ["generate"] * 3
    assert result.stop_reason is StopReason.TOKEN_BUDGET and result.answer == "18"


def test_at_the_cap_a_refinement_that_ties_its_parent_is_judged_by_the_critic():
    # "equal with a higher critic score": only a critique of the refinement can let it in
    done = json.dumps({"missing_concepts": [], "commonsense": "NONE"})
    odd = json.dumps({"missing_concepts": [], "commonsense": "A park cannot run."})
    backend = FakeBackend(
        {
            "generate": ["The park runs a dog.", "A dog."],
            "feedback": [odd, done],
            "refine": ["In the park a dog runs.", "A dog."],
        }
    )
    engine = SelfRefine("commongen", backend, samples=2, max_iterations=1, verifier_mode="hybrid", judging=False)
    result = engine.run("dog, run, park")
    assert [it.accepted for it in result.iterations] == [True, True]
    assert result.output == "In the park a dog runs." and result.iterations[1].feedback.done is True
    assert [r.role for r in backend.requests] == ["generate", "generate", "feedback", "refine", "refine", "feedback"]


def test_a_greedy_task_keeps_its_greedy_draft_as_the_first_sample():
    # gsm8k drafts at temperature 0: sample 1 is that draft, the others explore at 0.7, so the
    # best of K holds what the paper's single draft would have been
    backend = FakeBackend({"generate": [PROGRAMS["18a"], PROGRAMS["12"], PROGRAMS["18b"]]})
    SelfRefine("gsm8k", backend, samples=3, max_iterations=0, ways=("program",)).run("Twice nine?")
    assert [(r.temperature, r.seed) for r in backend.requests] == [(0.0, 0), (0.7, 1), (0.7, 2)]
    # written two ways in turn, the first of each way is its greedy draft
    backend = FakeBackend({"generate": [PROGRAMS["18a"], PROGRAMS["12"], PROGRAMS["18b"]]})
    SelfRefine("gsm8k", backend, samples=3, max_iterations=0, ways=("program", "steps")).run("Twice nine?")
    assert [(r.temperature, r.seed) for r in backend.requests] == [(0.0, 0), (0.0, 1), (0.7, 2)]
    backend = FakeBackend({"generate": [PROGRAMS["18a"], PROGRAMS["12"]]})
    SelfRefine("gsm8k", backend, samples=2, max_iterations=0, temperature=0.5).run("Twice nine?")
    assert [r.temperature for r in backend.requests] == [0.5, 0.5]  # a temperature asked for is used as is
    backend = FakeBackend({"generate": ["A dog.", "A dog runs."]})
    SelfRefine("commongen", backend, samples=2, max_iterations=0).run("dog, run")
    assert [r.temperature for r in backend.requests] == [1.0, 1.0]  # a sampling task samples every draft


def test_a_runs_model_seconds_count_a_batch_of_samples_once():
    # the K records of one batch share its time: summed, they are the batch's seconds, not K times it
    backend = FakeBackend({"generate": ["A dog.", "A dog runs.", "A dog runs in.", "A cat."]}, latency=0.2)
    start = time.perf_counter()
    result = SelfRefine("commongen", backend, samples=4, max_iterations=0).run("dog, run, park")
    wall = time.perf_counter() - start
    assert len(result.iterations[0].candidates) == 4 and 0.2 <= result.usage.seconds <= wall


@pytest.mark.parametrize(
    "drafts",
    [["A dog.", "A dog runs."], ["A dog.", "One dog."]],  # the second pair ties: two critiques to break it
    ids=["no-tie", "tie"],
)
def test_the_auto_strategy_starts_no_call_that_would_overrun_its_budget(drafts):
    # a refinement's prompt holds the drafts and critiques before it, so it costs more than
    # a first draft: the plan must price it so, or the run overshoots its budget (it did by
    # up to a quarter on commongen, when calls were priced at the mean of those made so far);
    # critiques that break a tie among the first drafts are priced too
    for budget in range(400, 4000, 150):
        engine, _ = commongen(drafts, ["A dog runs."] * 64, strategy="auto", max_total_tokens=budget, max_iterations=12)
        result = engine.run("dog, run, park, ball, tree, child")
        first = sum(c.call.prompt_tokens + c.call.completion_tokens for c in result.iterations[0].candidates)
        assert result.usage.total_tokens <= max(budget, first), (budget, result.usage.total_tokens)
        assert result.stop_reason is StopReason.TOKEN_BUDGET
