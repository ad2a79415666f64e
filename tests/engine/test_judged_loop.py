"""The task's judge in the loop, on the fake model: where the code checks tie drafts, the
judge's P(yes) orders them (samples, a refinement against its parent, the returned draft),
its verdicts are recorded with their probabilities, and a judge without probabilities or
without a readable verdict is said so and never loses the run."""

from __future__ import annotations

import asyncio
import json
import math

import pytest
from click.testing import CliRunner

from selfrefine import FakeBackend, SelfRefine, Task
from selfrefine.cli.commands import cli
from selfrefine.core.errors import TaskError, TemplateError
from selfrefine.core.records import DecisionStep

ODD = json.dumps({"missing_concepts": [], "commonsense": "It is odd."})  # never done: the loop refines
SENSIBLE = "In the kitchen the chef cut an onion with a knife."
NONSENSE = "The chef cut an onion and the knife cried in the kitchen."


def verdict(p_yes: float) -> dict:
    """A judge's reply with its token probabilities: P(Yes) = p_yes."""
    return {
        "text": "Yes" if p_yes >= 0.5 else "No",
        "top_logprobs": [{"Yes": math.log(p_yes), "No": math.log(1 - p_yes)}],
    }


def judged(table: dict[str, float]) -> dict[str, dict]:
    """Fake replies to the commongen judge's question about each sentence."""
    return {f"Answer Yes or No.\n\nSentence: {sentence}": verdict(p) for sentence, p in table.items()}


def test_samples_the_code_ties_are_ordered_by_the_judge_not_their_position():
    backend = FakeBackend({"generate": [NONSENSE, SENSIBLE]}, table=judged({NONSENSE: 0.1, SENSIBLE: 0.9}), default=ODD)
    result = SelfRefine("commongen", backend, samples=2, max_iterations=0).run("chef, onion, knife, cut, kitchen")
    first = result.iterations[0]
    assert [c.verification.score for c in first.candidates] == [1.0, 1.0]  # the code ties them
    assert [c.chosen for c in first.candidates] == [False, True] and result.output == SENSIBLE
    assert [round(c.verification.judged, 3) for c in first.candidates] == [0.1, 0.9]
    sense = first.candidates[1].verification.judgments[0]
    assert sense.question == "sense" and sense.method == "probabilities" and round(sense.answers["Yes"], 3) == 0.9
    # at the cap: one question a distinct text, one decoded token each, no critique
    judge_calls = [r for r in backend.requests if r.max_tokens == 1]
    assert len(judge_calls) == 2 and all(r.top_logprobs for r in judge_calls)
    assert [r.role for r in backend.requests if r.max_tokens != 1] == ["generate", "generate"]


def test_a_draft_the_code_does_not_tie_is_never_judged():
    backend = FakeBackend({"generate": ["A chef cut an onion.", SENSIBLE]}, default=ODD)
    result = SelfRefine("commongen", backend, samples=2, max_iterations=0).run("chef, onion, knife, cut, kitchen")
    assert result.output == SENSIBLE and all(r.max_tokens != 1 for r in backend.requests)
    assert "judged" not in result.model_dump(mode="json")["iterations"][0]["verification"]  # the record as before


def test_a_refinement_that_ties_its_parent_replaces_it_only_when_the_judge_scores_it_clearly_higher():
    better = "In the kitchen a chef used a knife to cut an onion."
    slightly = "A chef in the kitchen cut an onion with a knife."
    scores = {NONSENSE: 0.2, better: 0.8, slightly: 0.22}
    for refined, accepted in ((better, True), (slightly, False)):
        backend = FakeBackend(
            {"generate": [NONSENSE], "feedback": [ODD] * 4, "refine": [refined]},
            table=judged(scores),
            default=ODD,
        )
        engine = SelfRefine("commongen", backend, max_iterations=1, accept="not_worse", select="verified")
        result = engine.run("chef, onion, knife, cut, kitchen")
        assert [it.accepted for it in result.iterations][1] is True  # not worse: kept as a draft
        assert (result.output == refined) is accepted, refined  # 0.8 vs 0.2 wins; 0.22 vs 0.2 is a tie
        assert result.iterations[result.selected].verification.judged is not None


def test_a_refinement_the_judge_scores_clearly_lower_is_rejected_under_not_worse():
    backend = FakeBackend(
        {"generate": [SENSIBLE], "feedback": [ODD] * 4, "refine": [NONSENSE, SENSIBLE + " "]},
        table=judged({SENSIBLE: 0.9, NONSENSE: 0.1}),
        default=ODD,
    )
    engine = SelfRefine("commongen", backend, max_iterations=1, accept="not_worse")
    steps = asyncio.run(collect(engine.astream("chef, onion, knife, cut, kitchen")))
    result = steps[-1].result
    rejected = result.iterations[1]
    assert rejected.accepted is False and rejected.verification.judged == 0.1
    assert result.output == SENSIBLE
    said = [s.detail for s in steps if isinstance(s, DecisionStep) and s.iteration == 1]
    assert said and said[0].startswith("rejected: the judge's score fell 0.90 → 0.10"), said


async def collect(stream):
    return [step async for step in stream]


def test_a_task_without_code_checks_samples_and_selects_by_its_judge():
    request = "Name a fruit. Answer in one word."
    follows = "Conversation:\nUser: " + request + "\n\nAssistant reply:\n{reply}\n\nDoes the reply follow"
    table = {
        follows.format(reply="Apple, which is a sweet and crunchy fruit."): verdict(0.2),
        follows.format(reply="Apple"): verdict(0.9),
        "Assistant reply:\nApple\n\nIs the reply correct": verdict(0.9),
        "Assistant reply:\nApple, which is a sweet and crunchy fruit.\n\nIs the reply correct": verdict(0.8),
    }
    backend = FakeBackend({"generate": ["Apple, which is a sweet and crunchy fruit.", "Apple"]}, table=table)
    result = SelfRefine("chat", backend, samples=2, max_iterations=0).run(request)
    assert result.output == "Apple"
    kept = result.iterations[0].verification
    assert kept.score is None and kept.judged == 0.9 and [j.question for j in kept.judgments] == ["follows", "correct"]
    assert SelfRefine("chat", FakeBackend(), preset="best").config.samples == 3  # chat has a best now


def test_without_probabilities_the_judge_samples_verdicts_and_says_so():
    replies = {"generate": [NONSENSE, SENSIBLE]}
    table = {f"No.\n\nSentence: {NONSENSE}": "No", f"No.\n\nSentence: {SENSIBLE}": "Yes"}  # no top_logprobs
    backend = FakeBackend(replies, table=table, default=ODD)
    result = SelfRefine("commongen", backend, samples=2, max_iterations=0).run("chef, onion, knife, cut, kitchen")
    assert result.output == SENSIBLE
    sense = result.iterations[0].verification.judgments[0]
    assert sense.method == "sampled" and sense.samples == 5 and "no token probabilities" in sense.note


def test_a_judge_with_no_readable_verdict_leaves_the_tie_to_the_first_sample():
    backend = FakeBackend({"generate": [NONSENSE, SENSIBLE]}, default="Perhaps.")
    result = SelfRefine("commongen", backend, samples=2, max_iterations=0).run("chef, onion, knife, cut, kitchen")
    assert result.error is None and result.output == NONSENSE  # unjudged: the earlier sample
    assert all(c.verification.judged is None for c in result.iterations[0].candidates)


def test_votes_never_ask_the_judge():
    programs = ["def solution():\n    return 18", "def solution():\n    x = 9\n    return 2 * x"]
    backend = FakeBackend({"generate": programs})
    SelfRefine("gsm8k", backend, samples=2, max_iterations=0).run("Nine apples twice: how many?")
    assert [r.role for r in backend.requests] == ["generate", "generate"]


HAIKU = {
    "name": "haiku",
    "generate": "Write a haiku about {{ input }}.",
    "feedback": "Critique: {{ draft }}",
    "refine": "Improve: {{ draft }}",
    "judge": "Haiku:\n{{ draft }}\n\nIs this a vivid haiku? Answer Yes or No.",
}


def test_a_task_file_with_a_judge_prompt_samples_from_the_cli(tmp_path):
    (tmp_path / "haiku.yaml").write_text(json.dumps(HAIKU))
    replies = {
        "generate": ["moon moon moon", "pale moon on the lake"],
        "table": {"Haiku:\nmoon moon moon": verdict(0.3), "Haiku:\npale moon on the lake": verdict(0.85)},
    }
    (tmp_path / "r.json").write_text(json.dumps(replies))
    args = ["run", str(tmp_path / "haiku.yaml"), "moon", "-m", f"fake:{tmp_path / 'r.json'}", "--json"]
    out = CliRunner().invoke(cli, [*args, "--samples", "2", "--max-iters", "0"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert data["output"] == "pale moon on the lake"
    assert data["iterations"][0]["verification"]["judgments"][0]["question"] == "judge"
    off = CliRunner().invoke(cli, [*args, "--samples", "2", "--no-judging"])
    assert off.exit_code == 2 and "its judge is off" in off.output and len(off.output.strip().splitlines()) == 1


def test_a_judge_template_is_checked_when_the_task_loads():
    with pytest.raises(TemplateError, match="drafts"):
        Task("t", generate="{{ input }}", feedback="{{ draft }}", refine="{{ draft }}", judge="{{ drafts }}?")
    with pytest.raises(TaskError, match="judge 'sense' needs"):
        Task("t", generate="{{ input }}", feedback="{{ draft }}", refine="{{ draft }}", judge={"sense": " "})


def test_the_judges_verdicts_are_shown_in_the_live_view_the_api_trace_and_the_report():
    from selfrefine.core.wording import verifier_note
    from selfrefine.evaluation.report import trajectory
    from selfrefine.evaluation.runner import ExampleRow

    backend = FakeBackend({"generate": [NONSENSE, SENSIBLE]}, table=judged({NONSENSE: 0.1, SENSIBLE: 0.9}), default=ODD)
    result = SelfRefine("commongen", backend, samples=2, max_iterations=0).run("chef, onion, knife, cut, kitchen")
    kept = result.iterations[0].verification
    # the CLI's live view and the API's trace both write a sample's check with verifier_note
    assert verifier_note(kept) == "verifier score 1.00, passes; judge 0.90: sense 0.90"
    view = trajectory(ExampleRow(id="1", result=result))
    assert view["drafts"][0]["judge"] == "judge 0.90: sense 0.90"
    assert [s["judge"] for s in view["drafts"][0]["samples"]] == ["judge 0.10: sense 0.10", "judge 0.90: sense 0.90"]
