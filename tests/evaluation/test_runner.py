"""An eval over many examples (``selfrefine eval``'s run_eval): many at once, metric per
iteration, failures kept as rows."""

from __future__ import annotations

import pytest
from conftest import FB_DONE, FB_MISSING, eval_into

from selfrefine import FakeBackend, SelfRefine, get_task
from selfrefine.evaluation.datasets import Example


def test_summary_matches_hand_computed_numbers(tmp_path):
    backend = FakeBackend(
        table={  # first matching key wins: refine prompts also hold the other keys
            "Improved sentence:": "A dog chases a ball.",
            "Sentence: A dog sleeps.\nFeedback:": FB_MISSING.replace("frisbee", "ball"),
            "Sentence: A dog chases a ball.\nFeedback:": FB_DONE,
            "Sentence: A cat sits on a mat.\nFeedback:": FB_DONE,
            "Concepts: dog, ball\nSentence:": "A dog sleeps.",
            "Concepts: cat, mat\nSentence:": "A cat sits on a mat.",
        }
    )
    examples = [Example(id="a", input="dog, ball"), Example(id="b", input="cat, mat"), Example(id="c", input="  ")]
    summary, found = eval_into(
        tmp_path / "run", SelfRefine("commongen", backend, max_iterations=1), examples, concurrency=3
    )
    assert sorted(r.id for r in found) == ["a", "b", "c"]
    rows = sorted(found, key=lambda r: r.id)
    assert rows[0].metrics == [0.5, 1.0] and rows[1].metrics == [1.0]
    assert rows[2].result is None and "empty" in rows[2].error
    assert summary.by_iteration == [pytest.approx(0.75), 1.0]
    assert summary.final == 1.0 and summary.failed == 1 and summary.examples == 3
    assert summary.cumulative is None  # coverage is not a solved/unsolved metric
    # a: generate, feedback, refine (its critique skipped at the cap: select "last"); b: generate, feedback
    assert summary.calls_per_example == pytest.approx((3 + 2) / 2)
    assert summary.stop_reasons == {"max_iterations": 1, "feedback": 1}


def test_cumulative_solve_rate_for_binary_metrics(tmp_path):
    wrong = "def solution():\n    return 1"
    right = "def solution():\n    return 2"
    backend = FakeBackend({"generate": [wrong], "feedback": ["# it is wrong", "# it is wrong"], "refine": [right]})
    summary, rows = eval_into(
        tmp_path / "run", SelfRefine("gsm8k", backend, max_iterations=1), [Example(id="q", input="1+1?", reference=2)]
    )
    assert rows[0].metrics == [0.0, 1.0]
    assert summary.by_iteration == [0.0, 1.0] and summary.cumulative == 1.0


def test_tasks_without_a_code_metric_have_no_scores(tmp_path):
    backend = FakeBackend(default="Sounds fun! Which trail?")
    summary, rows = eval_into(
        tmp_path / "run",
        SelfRefine(get_task("dialogue"), backend, max_iterations=1),
        [Example(id="d", input="User: hi")],
    )
    assert rows[0].metrics == [None] * len(rows[0].result.iterations)
    assert summary.by_iteration == [None, None] and summary.final is None and summary.cumulative is None


def test_feedback_rows_written_before_the_done_rename_still_load():
    # run folders store Feedback.done as "stop" up to 0.1.0; resuming them must keep the signal
    from selfrefine.core.records import Feedback

    assert Feedback.model_validate_json('{"text": "ok", "stop": true}').done is True
    assert "done" in Feedback(text="ok", done=False).model_dump()


def test_run_config_is_a_typed_record_and_old_rows_load():
    # RunResult.config was a bare dict; rows written then (with keys since removed) must load
    from selfrefine import FakeBackend, RunResult, SelfRefine
    from selfrefine.core.records import RunConfig

    result = SelfRefine("commongen", FakeBackend(default="a dog runs"), max_iterations=0).run("dog, run")
    assert isinstance(result.config, RunConfig)
    assert result.config.models == {"generate": "fake", "feedback": "fake", "refine": "fake", "judge": "fake"}
    assert result.config.max_iterations == 0 and result.config["select"] == result.config.select
    old = result.model_dump(mode="json")
    old["config"]["a_key_from_an_old_version"] = 1
    assert RunResult.model_validate(old).config == result.config


def test_the_returned_drafts_metric_is_not_computed_a_second_time():
    # the loop scores the returned draft; the runner reuses that score (for codeopt a second
    # timing run) and scores each other distinct draft once
    import asyncio

    from selfrefine import FakeBackend, SelfRefine
    from selfrefine.evaluation.datasets import Example
    from selfrefine.evaluation.runner import evaluate_rows
    from selfrefine.tasks.commongen import CommonGen

    scored: list[str] = []

    class Counting(CommonGen):
        def metric(self, input, output, reference=None):
            scored.append(output)
            return super().metric(input, output, reference)

    fb = '{"missing_concepts": ["ball"], "commonsense": "NONE"}'
    backend = FakeBackend(
        {"generate": ["A dog."], "feedback": [fb, fb], "refine": ["A dog and a ball.", "A dog and a ball."]}
    )
    engine = SelfRefine(Counting(), backend, max_iterations=2, stop_on_no_change=False)
    [row] = asyncio.run(evaluate_rows(engine, [Example(id="1", input="dog, ball", reference=None)]))
    assert row.metrics == [0.5, 1.0, 1.0]
    assert scored == ["A dog and a ball.", "A dog."]  # the loop's, then draft 0's; the repeat is not scored
