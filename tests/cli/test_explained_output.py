"""Output that explains itself (issue 30, item 13): the metric and each score say what they
measure, internal field names are not shown as they are, counts are pluralised right, and a
rejected refinement says it was rejected and whether the run stops."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from conftest import FB_DONE, FB_MISSING

from selfrefine.cli.commands import cli
from selfrefine.core.records import DraftStep, Feedback, FeedbackStep, Verification
from selfrefine.service.runs import reasoning_text
from selfrefine.tasks import get_task

CONCEPTS = "dog, frisbee, catch"
RATINGS = json.dumps(
    {
        "coherence": {"reason": "clear", "score": 4},
        "constraints": {"reason": "fine", "score": 5},
        "interest": {"reason": "flat", "score": 3},
        "premise": {"reason": "followed", "score": 4},
    }
)


def _model(tmp_path: Path, replies: dict) -> str:
    path = tmp_path / "replies.json"
    path.write_text(json.dumps(replies))
    return f"fake:{path}"


def _live(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args), terminal_width=200)
    assert result.exit_code == 0, result.output
    return result.output


def test_the_metric_says_what_it_measures(tmp_path):
    model = _model(
        tmp_path, {"generate": ["A dog runs."], "feedback": [FB_MISSING], "refine": ["A dog can catch a frisbee."]}
    )
    out = _live("run", "commongen", CONCEPTS, "-m", model, "--max-iters", "1")
    assert "metric — concept coverage (code): 1" in out
    assert "\nmetric: " not in out


def test_a_feedback_score_says_whose_it_is_and_of_what(tmp_path):
    model = _model(tmp_path, {"generate": ["A keeper finds a bottle. " * 3], "feedback": [RATINGS], "refine": ["x"]})
    out = _live(
        "run", "story", "A lighthouse keeper finds a bottle.", "-m", model, "--max-iters", "0", "--final-feedback"
    )
    assert "feedback score 16 (the critic's, sum of its 4 ratings)" in out


def test_a_sample_score_says_it_is_the_verifiers(tmp_path):
    model = _model(
        tmp_path,
        {"generate": ["A dog runs.", "A dog can catch a frisbee."], "feedback": [FB_DONE], "refine": ["x"]},
    )
    out = _live("run", "commongen", CONCEPTS, "-m", model, "--max-iters", "0", "--samples", "2")
    assert "sample 2 (verifier score 1.00, passes)" in out and "sample 1 (verifier score 0.33, fails: " in out


def test_counts_are_pluralised_right(tmp_path):
    model = _model(tmp_path, {"generate": ["A dog can catch a frisbee."], "feedback": [FB_DONE]})
    out = _live("run", "commongen", CONCEPTS, "-m", model, "--max-iters", "0")
    assert "; 1 draft; 1 call, " in out and "draft(s)" not in out
    data = tmp_path / "one.txt"
    data.write_text(f"{CONCEPTS}\n")
    ran = CliRunner().invoke(
        cli,
        ["eval", "commongen", "--data", str(data), "--out", str(tmp_path / "run"), "-m", model, "--no-cache"],
        terminal_width=200,
    )
    assert ran.exit_code == 0, ran.output
    assert "commongen: 1 example →" in ran.output and "1 examples" not in ran.output


def test_eval_summary_names_its_metric(tmp_path):
    model = _model(tmp_path, {"generate": ["A dog can catch a frisbee."], "feedback": [FB_DONE]})
    data = tmp_path / "two.txt"
    data.write_text(f"{CONCEPTS}\ncat, hat\n")
    ran = CliRunner().invoke(
        cli,
        ["eval", "commongen", "--data", str(data), "--out", str(tmp_path / "run"), "-m", model, "--no-cache"],
        terminal_width=200,
    )
    assert ran.exit_code == 0, ran.output
    assert "commongen: 2 examples →" in ran.output
    assert "concept coverage (code)" in ran.output


def test_a_rejected_refinement_says_so_and_that_the_run_stops(tmp_path):
    # draft 0 has "dog"; the refinement has no concept at all: not_worse rejects it, and at
    # the refinement cap the run stops instead of refining draft 0 again
    model = _model(tmp_path, {"generate": ["A dog runs."], "feedback": [FB_MISSING], "refine": ["A cat sleeps."]})
    out = _live("run", "commongen", CONCEPTS, "-m", model, "--max-iters", "1", "--accept", "not_worse")
    assert "draft 1 (refine), rejected: not better than the draft it refines" in out
    said = " ".join(out.split())
    assert "the run stops instead of refining draft 0 again (stopped after 1 refinement: max_iterations is 1)" in said
    assert "draft 0 is refined again" not in out


def test_a_rejected_refinement_goes_on_with_its_parent_while_rounds_are_left(tmp_path):
    model = _model(
        tmp_path,
        {
            "generate": ["A dog runs."],
            "feedback": [FB_MISSING],
            "refine": ["A cat sleeps.", "A dog can catch a frisbee."],
        },
    )
    out = _live("run", "commongen", CONCEPTS, "-m", model, "--max-iters", "2", "--accept", "not_worse")
    assert "draft 0 is refined again" in " ".join(out.split())
    assert "draft 2 (refine)," not in out  # the accepted refinement is an ordinary box


def test_commongen_keeps_no_empty_internal_field_for_the_playground():
    task = get_task("commongen")
    fb = task.parse_feedback(FB_MISSING, input=CONCEPTS, draft="A dog runs.")
    assert "not_concepts" not in fb.fields  # shown as "not concepts: none" before
    named = task.parse_feedback(
        json.dumps({"missing_concepts": ["frisbee", "leash"], "commonsense": "NONE"}), input=CONCEPTS, draft="A dog."
    )
    assert named.fields["not_concepts"] == ["leash"]


def test_the_playground_page_labels_internal_fields_and_scores():
    from importlib import resources

    page = resources.files("selfrefine.service").joinpath("playground.html").read_text(encoding="utf-8")
    assert 'not_concepts: "named, but not concepts of the input"' in page
    assert '"verifier score "' in page and '"feedback score "' in page


def test_the_service_reasoning_names_scores_and_rejections():
    check = Verification(text="Missing concepts: catch", passed=False, score=0.67)
    fb = Feedback(text="{}", total=0.67, source="hybrid", verification=check)
    assert "(verifier score 0.67, fails)" in reasoning_text(FeedbackStep(iteration=0, feedback=fb))
    critic = Feedback(text="{}", total=16, scores={"coherence": 4, "interest": 12})
    assert "(feedback score 16 (the critic's, sum of its 2 ratings))" in reasoning_text(
        FeedbackStep(iteration=0, feedback=critic)
    )
    rejected = reasoning_text(DraftStep(iteration=1, draft="A cat.", accepted=False))
    assert rejected.startswith("### Draft 1 (refined), rejected: not better than the draft it refines")


def test_a_step_with_one_sample_is_not_the_best_of_1_samples():
    from rich.console import Console

    from selfrefine.cli.display import StepPrinter
    from selfrefine.core.records import Candidate

    one = DraftStep(iteration=0, draft="A dog.", candidates=[Candidate(draft="A dog.", chosen=True)])
    console = Console(record=True, width=120)
    StepPrinter(console)(one)
    assert "best of 1 samples" not in console.export_text()
    assert "best of 1 samples" not in reasoning_text(one)
    two = one.model_copy(update={"candidates": [*one.candidates, Candidate(draft="A cat.")]})
    StepPrinter(console)(two)
    assert "best of 2 samples" in console.export_text() and "best of 2 samples" in reasoning_text(two)
