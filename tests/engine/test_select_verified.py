"""select="verified" and accept="not_worse": refinement that never ends worse than it started.

A small task with a deterministic verifier (a score per draft text, every call counted)
drives the loop on the fake backend, so each trajectory below is exact."""

from __future__ import annotations

import asyncio
import json
import re

import pytest
from click.testing import CliRunner
from conftest import ROOT, eval_into, scored_task

from selfrefine import ConfigError, FakeBackend, SelfRefine, StopReason, Task
from selfrefine.cli.commands import cli
from selfrefine.core.records import (
    DecisionStep,
    Feedback,
    FeedbackStep,
    Iteration,
    Verification,
)
from selfrefine.engine.scoring.selection import select_index
from selfrefine.evaluation.datasets import Example
from selfrefine.evaluation.runner import summarize
from selfrefine.task.task import Capabilities

# prefix-stable like the built-in prompts: each history item is rendered like the current
# draft and ends with the cue the next draft follows
REFINE = (
    "Topic: {{ input }}\n"
    "{% for h in history %}{{ h.draft }}\nFB: {{ h.feedback }}\nBetter: {% endfor %}"
    "{{ draft }}\nFB: {{ feedback }}\nBetter:"
)


class Checked(Task):
    """Verifier score of a draft = ``scores[draft]``; the metric is the same number."""

    capabilities = Capabilities(verifier=True)

    def __init__(self, scores: dict[str, float | None], **kw):
        params = dict(generate="Write about {{ input }}.", feedback="Critique: {{ draft }}", refine=REFINE)
        params.update(kw)
        super().__init__("checked", **params)
        self.scores = scores
        self.verified: list[str] = []  # every verify() call, in order

    def parse_feedback(self, text, *, input, draft):
        match = re.search(r"score:\s*(\d+)", text)  # no score: total None (no parse error)
        return Feedback(text=text.strip(), total=float(match.group(1)) if match else None)

    def verify(self, input, draft):
        self.verified.append(draft)
        score = self.scores.get(draft)
        return Verification(text=f"check {draft}: {score}", passed=None, score=score)

    def metric(self, input, output, reference=None):
        return self.scores.get(output)


def fake(feedback=(), refine=()) -> FakeBackend:
    return FakeBackend({"generate": ["d0"], "feedback": list(feedback), "refine": list(refine)})


def run(task, backend, **options):
    options.setdefault("retry_base_delay", 0.0)
    return SelfRefine(task, backend, **options).run("cats")


def steps(task, backend, **options):
    engine = SelfRefine(task, backend, retry_base_delay=0.0, **options)

    async def collect():
        return [s async for s in engine.astream("cats")]

    return asyncio.run(collect())


# --- select="verified" ---------------------------------------------------------------------


def test_verified_returns_the_best_verified_draft_not_the_last_or_best_scored():
    scores = {"d0": 0.2, "d1": 0.9, "d2": 0.5, "d3": 0.1}
    feedback = ["score: 1", "score: 2", "score: 9", "score: 3"]
    backend = fake(feedback, ["d1", "d2", "d3"])
    result = run(Checked(scores), backend, max_iterations=3, select="verified")
    assert result.drafts == ["d0", "d1", "d2", "d3"] and result.stop_reason is StopReason.MAX_ITERATIONS
    assert result.selected == 1 and result.output == "d1" and result.metric == 0.9
    assert [it.verification.score for it in result.iterations] == [0.2, 0.9, 0.5, 0.1]
    assert result.config["select"] == "verified"
    # the same trajectory under the other policies returns other drafts
    assert run(Checked(scores), fake(feedback, ["d1", "d2", "d3"]), max_iterations=3).output == "d3"
    assert run(Checked(scores), fake(feedback, ["d1", "d2", "d3"]), max_iterations=3, select="best").output == "d2"


def test_verified_tie_goes_to_the_higher_feedback_score():
    scores = {"d0": 0.2, "d1": 0.9, "d2": 0.9}
    result = run(
        Checked(scores), fake(["score: 1", "score: 8", "score: 5"], ["d1", "d2"]), max_iterations=2, select="verified"
    )
    assert result.selected == 1 and result.output == "d1"


def test_verified_tie_with_equal_feedback_keeps_the_earlier_draft():
    # a refinement that adds nothing measurable never replaces what it refined
    scores = {"d0": 0.2, "d1": 0.9, "d2": 0.9}
    result = run(
        Checked(scores), fake(["score: 1", "score: 5", "score: 5"], ["d1", "d2"]), max_iterations=2, select="verified"
    )
    assert result.selected == 1 and result.output == "d1"


def test_verified_tie_missing_feedback_score_ranks_lowest():
    scores = {"d0": 0.2, "d1": 0.9, "d2": 0.9}
    result = run(
        Checked(scores),
        fake(["score: 1", "score: 0", "no number here"], ["d1", "d2"]),
        max_iterations=2,
        select="verified",
    )
    assert result.iterations[2].feedback.total is None
    assert result.selected == 1  # a score of 0 beats no score, even for an earlier draft


def test_select_index_ranking_rules():
    def it(i, score, total, accepted=True):
        return Iteration(
            index=i,
            draft=f"d{i}",
            accepted=accepted,
            verification=None if score == "none" else Verification(text="", score=score),
            feedback=Feedback(text="", total=total),
        )

    assert select_index([it(0, 0.5, 9), it(1, 0.7, 1), it(2, 0.6, 9)], "verified") == 1
    assert select_index([it(0, 0.7, 2), it(1, 0.7, 1)], "verified") == 0
    assert select_index([it(0, 0.7, None), it(1, 0.7, None)], "verified") == 0  # a full tie: the parent
    assert select_index([it(0, 0.1, None), it(1, None, 9), it(2, "none", 9)], "verified") == 0
    # a rejected draft is never returned, whatever the policy
    iterations = [it(0, 0.5, 1), it(1, 0.9, 9, accepted=False)]
    assert [select_index(iterations, p) for p in ("last", "best", "verified")] == [0, 0, 0]


def test_verified_without_a_verifier_is_a_config_error():
    with pytest.raises(ConfigError, match="no verifier.*verified"):
        SelfRefine(scored_task(), fake(), select="verified")


def test_verified_in_the_cli(tmp_path):
    replies = tmp_path / "r.json"
    replies.write_text(
        json.dumps(
            {
                "replies": {
                    "generate": ["A dog runs."],
                    "feedback": [json.dumps({"missing_concepts": ["frisbee"], "commonsense": "NONE"})] * 2,
                    "refine": ["A dog runs and runs."],
                }
            }
        )
    )
    args = [
        "run",
        "commongen",
        "dog, frisbee, run",
        "-m",
        f"fake:{replies}",
        "--json",
        "--max-iters",
        "1",
        "--select",
        "verified",
        "--accept",
        "not-worse",
        "--no-judging",  # the critic path; the judge's: test_judged_loop.py
    ]
    out = CliRunner().invoke(cli, args)
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert data["config"]["select"] == "verified" and data["config"]["accept"] == "not_worse"
    assert [it["verification"]["score"] for it in data["iterations"]] == [pytest.approx(2 / 3)] * 2
    assert data["selected"] == 0  # equal coverage and feedback: the parent is kept
    tagline = ROOT / "examples" / "tagline.yaml"
    bad = CliRunner().invoke(cli, ["run", str(tagline), "tea", "-m", f"fake:{replies}", "--select", "verified"])
    assert bad.exit_code != 0 and "no verifier" in bad.output


# --- accept="not_worse" ----------------------------------------------------------------------


def test_worse_refinement_is_rejected_and_the_better_draft_refined_again():
    task = Checked({"d0": 0.8, "d1": 0.6, "d2": 0.9})
    backend = fake(["fb0 score: 1", "fb2 score: 2"], ["d1", "d2"])
    result = run(task, backend, max_iterations=2, accept="not_worse", record_prompts=True, final_feedback=True)
    assert result.drafts == ["d0", "d1", "d2"]
    assert [it.accepted for it in result.iterations] == [True, False, True]
    assert result.output == "d2" and result.selected == 2
    assert result.stop_reason is StopReason.MAX_ITERATIONS  # 2 refinements attempted
    # the rejected draft's feedback is the verifier's finding: no critic call on it
    assert [c.role for c in result.calls] == ["generate", "feedback", "refine", "refine", "feedback"]
    fb1 = result.iterations[1].feedback
    assert fb1.source == "verifier" and fb1.text == "check d1: 0.6" and fb1.verification.score == 0.6
    first, second = backend.prompts("refine")
    assert first == "Topic: cats\nd0\nFB: fb0 score: 1\nBetter:"
    # history in order: the refined draft, the rejected attempt with its findings; then
    # the better draft again as the current one, so the prompt extends the previous one
    # followed by the rejected reply (prefix caches keep working)
    assert second == (
        "Topic: cats\nd0\nFB: fb0 score: 1\nBetter: d1\nFB: check d1: 0.6\nBetter: d0\nFB: fb0 score: 1\nBetter:"
    )
    assert second.startswith(first + " d1")
    assert backend.prompts("feedback") == ["Critique: d0", "Critique: d2"]


def test_every_refine_prompt_extends_the_previous_one_across_a_rejection():
    task = Checked({"d0": 0.8, "d1": 0.6, "d2": 0.9, "d3": 0.95})
    backend = fake(["fb0 score: 1", "fb2 score: 2", "fb3 score: 3"], ["d1", "d2", "d3"])
    result = run(task, backend, max_iterations=3, accept="not_worse")
    assert [it.accepted for it in result.iterations] == [True, False, True, True] and result.output == "d3"
    prompts = backend.prompts("refine")
    replies = ["d1", "d2"]
    for before, after, reply in zip(prompts, prompts[1:], replies):
        assert after.startswith(f"{before} {reply}\n")
    assert prompts[2].endswith("Better: d0\nFB: fb0 score: 1\nBetter: d2\nFB: fb2 score: 2\nBetter:")


def test_rejection_is_reported_in_a_decision_step():
    task = Checked({"d0": 0.8, "d1": 0.6, "d2": 0.9})
    got = steps(
        task, fake(["score: 1", "score: 2"], ["d1", "d2"]), max_iterations=2, accept="not_worse", final_feedback=True
    )
    decisions = [s for s in got if isinstance(s, DecisionStep)]
    assert decisions[1].iteration == 1 and not decisions[1].stop
    assert decisions[1].detail.startswith("rejected: verifier score fell 0.80 → 0.60")
    feedbacks = [s for s in got if isinstance(s, FeedbackStep)]
    assert [f.iteration for f in feedbacks] == [0, 1, 2] and feedbacks[1].feedback.source == "verifier"


def test_rejected_drafts_are_never_the_output():
    task = Checked({"d0": 0.8, "d1": 0.6, "d2": 0.5})
    backend = fake(["score: 1"], ["d1", "d2"])
    result = run(task, backend, max_iterations=2, accept="not_worse")
    assert result.drafts == ["d0", "d1", "d2"] and [it.accepted for it in result.iterations] == [True, False, False]
    assert result.output == "d0" and result.selected == 0 and result.metric == 0.8
    assert result.stop_reason is StopReason.MAX_ITERATIONS
    assert len(backend.prompts("refine")) == 2 and len(backend.prompts("feedback")) == 1
    for policy in ("best", "verified"):
        again = run(
            Checked(task.scores), fake(["score: 1"], ["d1", "d2"]), max_iterations=2, accept="not_worse", select=policy
        )
        assert again.output == "d0"
    # without not_worse the last (worse) draft is returned
    assert run(Checked(task.scores), fake(["score: 1"] * 3, ["d1", "d2"]), max_iterations=2).output == "d2"


def test_equal_score_is_accepted():
    result = run(Checked({"d0": 0.5, "d1": 0.5}), fake(["score: 1"] * 2, ["d1"]), max_iterations=1, accept="not_worse")
    assert [it.accepted for it in result.iterations] == [True, True] and result.output == "d1"


def test_an_echo_is_rejected_and_the_draft_refined_again_with_a_new_seed():
    # the refiner repeating its draft (a small model's usual failure) is a failed attempt under
    # not_worse, not the end of the run: the next attempt gets another seed and another prompt
    task = Checked({"d0": 0.5, "d1": 0.9})
    backend = fake(["score: 1"] * 2, [" d0 ", "d1"])
    result = run(task, backend, max_iterations=2, accept="not_worse", seed=7, temperature=0.7)
    assert result.drafts == ["d0", "d0", "d1"] and [it.accepted for it in result.iterations] == [True, False, True]
    assert [r.seed for r in backend.requests if r.role == "refine"] == [7, 8]
    assert result.output == "d1" and result.stop_reason is StopReason.MAX_ITERATIONS


def test_echoes_stop_at_the_refinement_cap():
    backend = fake(["score: 1"], ["d0", "d0"])
    result = run(Checked({"d0": 0.5}), backend, max_iterations=2, accept="not_worse", temperature=0.7)
    assert result.drafts == ["d0", "d0", "d0"] and result.stop_reason is StopReason.MAX_ITERATIONS
    assert result.output == "d0" and len(backend.prompts("refine")) == 2


def test_a_greedy_echo_stops_the_run_even_under_not_worse():
    # at temperature 0 a new seed cannot change the reply: retrying would only repeat it
    backend = fake(["score: 1"], ["d0", "d0"])
    result = run(Checked({"d0": 0.5}), backend, max_iterations=3, accept="not_worse", temperature=0.0)
    assert result.stop_reason is StopReason.NO_CHANGE and result.drafts == ["d0", "d0"]


def test_without_not_worse_an_echo_still_stops_the_run():
    result = run(Checked({"d0": 0.5}), fake(["score: 1"], ["d0"]), max_iterations=3, select="verified", temperature=0.7)
    assert result.stop_reason is StopReason.NO_CHANGE and result.drafts == ["d0", "d0"]


def test_no_change_compares_with_the_draft_refined():
    # after a worse attempt is rejected, repeating the draft being refined is still an echo
    task = Checked({"d0": 0.8, "d1": 0.6})
    backend = fake(["score: 1"], ["d1", "  d0 "])
    result = run(task, backend, max_iterations=2, accept="not_worse", temperature=0.7)
    assert result.drafts == ["d0", "d1", "d0"] and [it.accepted for it in result.iterations] == [True, False, False]
    assert result.output == "d0" and result.stop_reason is StopReason.MAX_ITERATIONS


def test_last_history_after_a_rejection_shows_the_rejected_attempt():
    backend = fake(["fb0 score: 1", "fb2 score: 1"], ["d1", "d2"])
    run(Checked({"d0": 0.8, "d1": 0.6, "d2": 0.9}), backend, max_iterations=2, accept="not_worse", history="last")
    assert backend.prompts("refine")[1] == "Topic: cats\nd1\nFB: check d1: 0.6\nBetter: d0\nFB: fb0 score: 1\nBetter:"


def test_not_worse_without_a_verifier_is_a_config_error():
    with pytest.raises(ConfigError, match="no verifier.*not_worse"):
        SelfRefine(scored_task(), fake(), accept="not_worse")


def test_accept_rejects_unknown_values():
    with pytest.raises(ConfigError, match="accept"):
        SelfRefine(Checked({}), fake(), accept="sometimes")


# --- one verification per draft, reused ------------------------------------------------------


def test_verification_once_per_draft_and_reused_by_hybrid_feedback():
    task = Checked({"d0": 0.2, "d1": 0.9, "d2": 0.5})
    result = run(
        task,
        fake(["score: 1"] * 3, ["d1", "d2"]),
        max_iterations=2,
        select="verified",
        verifier_mode="hybrid",
        accept="not_worse",
    )
    assert task.verified == ["d0", "d1", "d2"]
    for it in result.iterations:
        assert it.feedback.verification == it.verification
        assert it.verification.text in it.feedback.text


def test_verifier_mode_alone_verifies_each_draft_once():
    task = Checked({"d0": 0.2, "d1": 0.9})
    result = run(task, fake(refine=["d1"]), max_iterations=1, verifier_mode="verifier", final_feedback=True)
    assert task.verified == ["d0", "d1"]
    assert result.iterations[0].verification.score == 0.2 and result.iterations[0].feedback.total == 0.2


def test_paper_mode_never_verifies_in_the_loop():
    task = Checked({"d0": 0.2, "d1": 0.9})
    result = run(task, fake(["score: 1"] * 2, ["d1"]), max_iterations=1)
    assert all(it.verification is None for it in result.iterations)
    # only the returned output is checked, once, after the loop: the result names what it fails
    assert task.verified == ["d1"] and result.fails is not None


# --- the eval summary ---------------------------------------------------------------------------


def test_summary_follows_accepted_drafts_and_counts_rejections(tmp_path):
    task = Checked({"d0": 0.8, "d1": 0.6, "d2": 0.9})
    engine = SelfRefine(
        task, fake(["score: 1", "score: 2"], ["d1", "d2"]), max_iterations=2, accept="not_worse", retry_base_delay=0.0
    )
    summary, rows = eval_into(tmp_path / "run", engine, [Example(id="a", input="cats")])
    assert rows[0].metrics == [0.8, 0.6, 0.9]
    assert summary.by_iteration == [0.8, 0.8, 0.9]  # after the rejected refinement: still d0
    assert summary.final == 0.9 and summary.rejected_per_example == 1.0


def test_summary_final_of_a_verified_run(tmp_path):
    task = Checked({"d0": 0.2, "d1": 0.9, "d2": 0.5})
    engine = SelfRefine(
        task, fake(["score: 1"] * 3, ["d1", "d2"]), max_iterations=2, select="verified", retry_base_delay=0.0
    )
    summary, rows = eval_into(tmp_path / "run", engine, [Example(id="a", input="cats")])
    assert rows[0].result.selected == 1
    assert summary.final == 0.9 and summary.by_iteration == [0.2, 0.9, 0.5]
    assert summary.rejected_per_example == 0.0
    assert summarize("checked", rows, 2).final == 0.9


# --- every built-in verifier gives a number to rank by ---------------------------------------


def _ranked(task_name, input, good, bad):
    from selfrefine import get_task

    task = get_task(task_name)
    hi, lo = task.verify(task.prepare_input(input), good), task.verify(task.prepare_input(input), bad)
    assert isinstance(hi.score, float) and isinstance(lo.score, float)
    assert hi.score > lo.score
    return hi.score, lo.score


def test_commongen_verifier_score_is_coverage():
    assert _ranked("commongen", "dog, frisbee, catch", "The dog catches the frisbee.", "The dog runs.") == (
        1.0,
        pytest.approx(1 / 3),
    )


def test_gsm8k_verifier_score_is_one_when_solution_returns_a_number():
    hi, lo = _ranked(
        "gsm8k", "How much is 2 + 2?", "def solution():\n    return 2 + 2", "def solution():\n    return 1 / 0"
    )
    assert (hi, lo) == (1.0, 0.0)
    from selfrefine import get_task

    assert get_task("gsm8k").verify("q", "def solution():\n    return 'four'").score == 0.0


def test_sentiment_verifier_score_is_oriented_vader():
    neg, pos = "The soup was cold and the staff was rude.", "The soup was delicious and the staff was wonderful."
    hi, lo = _ranked("sentiment", f"positive: {neg}", pos, neg)
    assert hi > 0 > lo
    assert _ranked("sentiment", f"negative: {pos}", neg, pos)[0] == pytest.approx(-lo, abs=1e-3)


def test_acronym_verifier_score_is_share_of_checks():
    assert _ranked("acronym", "Scalable Tree Boosting for Accurate Ranking", "STAR", "XQZ") == (
        1.0,
        pytest.approx(1 / 3, abs=1e-4),
    )


def test_readability_verifier_combines_the_static_numbers():
    bad = "a = int(input())\nb = a * 2\nprint(b)"
    names_only = "count = int(input())\ndoubled = count * 2\nprint(doubled)"
    good = (
        "def read_count():\n    # one number on the first line\n    return int(input())\n\n\n"
        "def double(value):\n    # twice the value\n    return value * 2\n\n\n"
        "print(double(read_count()))"
    )
    hi, lo = _ranked("readability", bad, names_only, bad)
    assert lo == 0.0 and hi == pytest.approx(1 / 3, abs=1e-4)
    assert _ranked("readability", bad, good, names_only)[0] == 1.0
    assert _ranked("readability", bad, names_only, "def f(:\n  pass")[1] == 0.0


def test_codeopt_verifier_score_without_tests():
    from selfrefine.tasks.codeopt import CodeOpt

    task = CodeOpt(use_benchmark=False)
    slow = "n = int(input())\ntotal = 0\nfor i in range(n):\n    total += i\nprint(total)"
    runs = task.verify(slow, "n = int(input())\nprint(n * (n - 1) // 2)")
    broken = task.verify(slow, "print(undefined_name)")
    syntax = task.verify(slow, "print(")
    assert (runs.score, broken.score, syntax.score) == (1.0, 0.0, 0.0)


def test_codeopt_verifier_score_with_tests_is_zero_when_wrong():
    from selfrefine.tasks.codeopt import CodeOpt

    slow = "n = int(input())\ntotal = 0\nfor i in range(n):\n    total += i\nprint(total)"
    task = CodeOpt(tests={slow: [{"input": "4\n", "output": "6"}]}, repeats=4)
    wrong = task.verify(slow, "n = int(input())\nprint(n * n)")
    right = task.verify(slow, "n = int(input())\nprint(n * (n - 1) // 2)")
    assert wrong.score == 0.0 and isinstance(right.score, float) and right.score > 0.0
