"""Output that explains itself (issue 39, item 17): every number the CLI and the server's trace
print says what it is, which model judged, and a token budget overspent says so."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from conftest import FB_DONE, FB_MISSING

from selfrefine.cli.commands import cli
from selfrefine.core.records import Candidate, DraftStep, Feedback, FeedbackStep, Verification
from selfrefine.core.wording import score_note, verifier_note
from selfrefine.service.runs import reasoning_text

CONCEPTS = "dog, frisbee, catch"


def _model(tmp_path: Path, replies: dict) -> str:
    path = tmp_path / "replies.json"
    path.write_text(json.dumps(replies))
    return f"fake:{path}"


def _run(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args), env={"COLUMNS": "400"})  # rich's width: a line stays a line
    assert result.exit_code == 0, result.output
    return result.output


def _help(*command: str) -> str:
    return " ".join(CliRunner().invoke(cli, [*command, "--help"], terminal_width=400).output.split())


# --- 17: output that explains itself ----------------------------------------------------------

PROGRAMS = ["def solution():\n    return 12", "def solution():\n    return 12", "def solution():\n    return 18"]


def test_a_voted_sample_says_its_answer_and_vote_share(tmp_path):
    # was: "verifier score 1.00, passes", where the score is the share of the votes
    crash = "def solution():\n    raise ValueError('no')"
    model = _model(tmp_path, {"generate": [*PROGRAMS, crash], "feedback": ["It is correct."]})
    out = _run("run", "gsm8k", "A pen costs 3 dollars. How much do 4 pens cost?", "-m", model, "--samples", "4",
               "--max-iters", "0")  # fmt: skip
    assert "sample 1 (answer 12: vote share 0.50, no majority)" in out
    assert "sample 3 (answer 18: vote share 0.25, no majority)" in out
    assert "sample 4 (no answer, no vote: Running solution() failed: ValueError: no)" in out
    assert "verifier score" not in out


def test_a_voted_sample_names_its_way():
    check = Verification(text="# Running solution() returned 18\n# Votes: 3 samples return 18", passed=True,
                         score=0.75, answer="18")  # fmt: skip
    assert verifier_note(check, "steps") == "answer 18 (steps): vote share 0.75, majority"
    step = DraftStep(iteration=0, draft="x", candidates=[Candidate(draft="x", verification=check, way="program"),
                                                          Candidate(draft="y", verification=check, way="steps")])  # fmt: skip
    assert "answer 18 (steps): vote share 0.75" in reasoning_text(step)


def test_a_failing_sample_says_what_its_check_found(tmp_path):
    model = _model(tmp_path, {"generate": ["A dog runs.", "A dog can catch a frisbee."], "feedback": [FB_DONE]})
    out = _run("run", "commongen", CONCEPTS, "-m", model, "--max-iters", "0", "--samples", "2")
    assert "sample 1 (verifier score 0.33, fails: Missing concepts (checked by code): frisbee, catch)" in out


def test_a_task_files_one_judge_question_is_not_named_twice():
    # was: "judge 0.85: judge 0.85"
    check = Verification(text="", passed=True, score=1.0, judged=0.85,
                         judgments=[{"question": "judge", "answers": {"yes": 0.85, "no": 0.15}, "score": 0.85}])  # fmt: skip
    assert verifier_note(check) == "verifier score 1.00, passes; judge 0.85"


def test_a_critics_score_says_its_scale():
    # was: "feedback score 8" with no scale
    assert score_note(Feedback(text="Fine. Score: 8/10", total=8)) == "feedback score 8/10 (the critic's)"
    assert score_note(Feedback(text="Total: 27 / 30", total=27)) == "feedback score 27/30 (the critic's)"
    rated = Feedback(text="{}", total=16, scores={"a": 4, "b": 4, "c": 4, "d": 4})
    assert score_note(rated) == "feedback score 16 (the critic's, sum of its 4 ratings)"
    assert score_note(Feedback(text="{}", total=0.6667)) == "the critic's score 0.667 (0 to 1, higher is better)"
    assert score_note(Feedback(text="Score: 8", total=8)) == "feedback score 8 (the critic's, no scale stated)"


def test_a_draft_panels_tokens_are_its_steps_calls_and_the_roles_add_up(tmp_path):
    # was: a best-of-2 panel showed one sample's tokens, a number found nowhere else
    model = _model(tmp_path, {"generate": ["A dog runs.", "A dog can catch a frisbee."], "feedback": [FB_DONE]})
    ran = CliRunner().invoke(cli, ["run", "commongen", CONCEPTS, "-m", model, "--max-iters", "0", "--samples", "2",
                                   "--json"])  # fmt: skip
    result = json.loads(ran.output)
    calls = [c for c in result["calls"] if c["role"] == "generate"]
    prompt, completion = sum(c["prompt_tokens"] for c in calls), sum(c["completion_tokens"] for c in calls)
    out = _run("run", "commongen", CONCEPTS, "-m", model, "--max-iters", "0", "--samples", "2")
    assert f"2 samples: {prompt} prompt + {completion} completion tokens" in out
    assert f"by role: generate 2 calls, {prompt + completion} tokens (fake:" in out


def test_the_run_says_which_model_judged(tmp_path):
    yes = {"text": "Yes", "top_logprobs": [{"Yes": -0.1, "No": -2.4}]}
    model = _model(tmp_path, {"generate": ["A dog can catch a frisbee.", "A dog can catch a frisbee!"],
                              "feedback": [FB_DONE], "judge": [yes, yes]})  # fmt: skip
    (tmp_path / "judge.json").write_text(json.dumps({"default": yes}))
    judge = f"fake:{tmp_path / 'judge.json'}"
    out = _run("run", "commongen", CONCEPTS, "-m", model, "--max-iters", "0", "--samples", "2", "--judge-model", judge)
    assert "judge 0.91: sense 0.91" in out
    assert "judge 2 calls, " in out and f"({judge})" in out.partition("judge 2 calls, ")[2].partition("\n")[0]


def test_the_servers_trace_reads_a_json_critique_as_text():
    # was: the critique's raw JSON in the reasoning trace
    fb = Feedback(text=FB_MISSING, total=0.67, fields={"missing_concepts": ["frisbee"]})
    text = reasoning_text(FeedbackStep(iteration=0, feedback=fb))
    assert "missing concepts: frisbee" in text and '"missing_concepts"' not in text


def test_an_overspent_token_budget_is_said(tmp_path):
    # was: --budget-tokens 10 used 155 tokens without a word
    model = _model(tmp_path, {"generate": ["A dog runs."], "feedback": [FB_MISSING], "refine": ["x"]})
    out = _run("run", "commongen", CONCEPTS, "-m", model, "--budget-tokens", "10")
    used = int(out.partition("token budget used up: ")[2].split()[0])
    assert used > 10
    assert f"The token budget was 10 and the run used {used} ({used / 10:.1f}× the budget)" in out
    assert "the call in flight when it ran out finished and counts whole" in " ".join(out.split())
