"""Unit tests of the loop with the deterministic fake backend."""

from __future__ import annotations

import asyncio
import time

import pytest
from conftest import FB_DONE, FB_MISSING, scored_task

from selfrefine import (
    BackendError,
    ConfigError,
    FakeBackend,
    RunResult,
    SelfRefine,
    StopReason,
    TransientBackendError,
    get_task,
)
from selfrefine.core.records import (
    CallStep,
    DecisionStep,
    DraftStep,
    FeedbackStep,
    ResultStep,
)
from selfrefine.task.task import Capabilities


def fake(generate=("d0",), feedback=(), refine=()) -> FakeBackend:
    return FakeBackend({"generate": list(generate), "feedback": list(feedback), "refine": list(refine)})


def run(task, backend, text="cats", **options) -> RunResult:
    options.setdefault("retry_base_delay", 0.0)
    return SelfRefine(task, backend, **options).run(text)


# --- stop rules ---------------------------------------------------------------------------


def test_stops_on_feedback_signal():
    backend = fake(feedback=[FB_MISSING, FB_DONE], refine=["A dog can catch a frisbee."])
    result = run("commongen", backend, "dog, frisbee, catch")
    assert result.stop_reason is StopReason.FEEDBACK
    assert result.output == "A dog can catch a frisbee."
    assert [c.role for c in result.calls] == ["generate", "feedback", "refine", "feedback"]


def test_stop_on_feedback_can_be_disabled(task):
    backend = fake(feedback=["done score: 1"] * 3, refine=["d1", "d2"])
    result = run(scored_task(stop_contains=["done"]), backend, max_iterations=2, stop_on_feedback=False)
    assert result.stop_reason is StopReason.MAX_ITERATIONS
    assert result.drafts == ["d0", "d1", "d2"]


def test_stop_contains_from_config(task):
    backend = fake(feedback=["meh score: 1", "LGTM score: 2"], refine=["d1"])
    result = run(task, backend, stop_contains=["lgtm"])
    assert result.stop_reason is StopReason.FEEDBACK
    assert len(result.iterations) == 2


def test_stops_on_score_threshold(task):
    backend = fake(feedback=["score: 3", "score: 8"], refine=["d1", "d2"])
    result = run(task, backend, score_threshold=8)
    assert result.stop_reason is StopReason.SCORE
    assert result.drafts == ["d0", "d1"]
    assert result.iterations[1].feedback.total == 8


def test_task_score_threshold_is_default():
    backend = fake(feedback=["score: 9"])
    result = run(scored_task(score_threshold=9), backend)
    assert result.stop_reason is StopReason.SCORE


def test_max_iterations_counts_refinements(task):
    backend = fake(feedback=["score: 1"] * 5, refine=["d1", "d2", "d3", "d4"])
    result = run(task, backend)  # default: 4 refinements
    assert result.stop_reason is StopReason.MAX_ITERATIONS
    assert result.drafts == ["d0", "d1", "d2", "d3", "d4"]
    assert result.config["max_iterations"] == 4


def test_zero_iterations_is_one_step_generation(task):
    backend = fake(feedback=["score: 1"])
    result = run(task, backend, max_iterations=0)
    assert result.drafts == ["d0"] and result.stop_reason is StopReason.MAX_ITERATIONS


def test_stops_when_refinement_changes_nothing(task):
    backend = fake(feedback=["score: 1"], refine=["  d0 "])
    result = run(task, backend)
    assert result.stop_reason is StopReason.NO_CHANGE
    assert len(result.iterations) == 2 and result.iterations[1].feedback is None


def test_token_budget(task):
    backend = fake(feedback=["score: 1"] * 5, refine=["d1", "d2", "d3"])
    result = run(task, backend, max_total_tokens=10)
    assert result.stop_reason is StopReason.TOKEN_BUDGET
    assert result.usage.total_tokens >= 10
    assert result.output is not None


def test_time_budget_interrupts_a_slow_call(task):
    # the refine call would take 10 s: the budget must cut it off mid-call, not wait for it
    # and notice afterwards (the budget check before each call alone would pass the rest)
    backend = FakeBackend({"generate": ["d0"], "feedback": ["score: 1"], "refine": ["d1"]}, latency={"refine": 10.0})
    start = time.perf_counter()
    result = run(task, backend, max_seconds=0.3)
    elapsed = time.perf_counter() - start
    assert result.stop_reason is StopReason.TIME_BUDGET
    assert elapsed < 3.0, f"the slow call was waited out ({elapsed:.1f} s)"
    assert [r.role for r in backend.cancelled] == ["refine"]  # cancelled while in flight
    last = result.calls[-1]
    assert last.role == "refine" and not last.ok and "time budget ran out" in last.error and "of 0.3s" in last.error
    assert result.drafts == ["d0"]  # finished drafts survive the budget


def test_result_names_exactly_one_stop_reason(task):
    backend = fake(feedback=["score: 9"], refine=[])
    result = run(task, backend, score_threshold=5, max_iterations=0, final_feedback=True)
    assert result.stop_reason is StopReason.SCORE  # the feedback-based reason wins over the cap


# --- history policies ---------------------------------------------------------------------


def _refine_prompts(history: str) -> list[str]:
    backend = fake(feedback=["fb0 score: 1", "fb1 score: 1", "fb2 score: 1"], refine=["d1", "d2"])
    run(scored_task(), backend, max_iterations=2, history=history)
    return backend.prompts("refine")


def test_full_history_shows_every_earlier_pair():
    first, second = _refine_prompts("full")
    assert "CUR[d0|fb0 score: 1]" in first and "OLD[" not in first
    assert "OLD[d0|fb0 score: 1]" in second and "CUR[d1|fb1 score: 1]" in second


def test_last_history_shows_only_previous_pair():
    backend = fake(feedback=["fb0 score: 1", "fb1 score: 1", "fb2 score: 1", "fb3"], refine=["d1", "d2", "d3"])
    run(scored_task(), backend, max_iterations=3, history="last")
    third = backend.prompts("refine")[2]
    assert "OLD[d1|fb1 score: 1]" in third and "OLD[d0" not in third
    assert "CUR[d2|fb2 score: 1]" in third


def test_no_history_shows_only_current_pair():
    _, second = _refine_prompts("none")
    assert "OLD[" not in second and "CUR[d1|fb1 score: 1]" in second


def test_refine_prompt_extends_previous_one_with_full_history():
    backend = fake(feedback=[FB_MISSING, FB_MISSING, FB_MISSING], refine=["s1", "s2"])
    run("commongen", backend, "dog, frisbee, catch", max_iterations=2)
    first, second = backend.prompts("refine")
    stem = first.rsplit("Improved sentence:", 1)[0]
    assert second.startswith(stem)  # prefix-stable: the KV cache of round t serves round t+1


# --- selection ----------------------------------------------------------------------------


def test_select_best_prefers_highest_score_ties_to_later(task):
    backend = fake(feedback=["score: 5", "score: 7", "score: 7", "score: 2"], refine=["d1", "d2", "d3"])
    result = run(task, backend, max_iterations=3, select="best")
    assert result.selected == 2 and result.output == "d2"


def test_select_last_returns_final_draft(task):
    backend = fake(feedback=["score: 9", "score: 1"], refine=["d1"])
    result = run(task, backend, max_iterations=1)
    assert result.output == "d1" and result.selected == 1


def test_select_best_without_scores_falls_back_to_last():
    backend = fake(feedback=["a", "b"], refine=["d1"])
    result = run(scored_task(score=None), backend, max_iterations=1, select="best")
    assert result.output == "d1"


# --- ablation modes -----------------------------------------------------------------------


def test_generic_feedback_mode_makes_no_critic_calls(task):
    backend = fake(refine=["d1", "d2"])
    result = run(scored_task(generic_feedback="Make it better."), backend, max_iterations=2, feedback_mode="generic")
    assert [c.role for c in result.calls] == ["generate", "refine", "refine"]
    assert all(it.feedback.source == "generic" for it in result.iterations)
    assert "CUR[d0|Make it better.]" in backend.prompts("refine")[0]


def test_no_feedback_mode_uses_the_nofeedback_template():
    backend = fake(refine=["A dog jumps.", "A dog can catch a frisbee."])
    result = run("commongen", backend, "dog, frisbee, catch", max_iterations=2, feedback_mode="none")
    assert [c.role for c in result.calls] == ["generate", "refine", "refine"]
    assert "Feedback:" not in backend.prompts("refine")[0]
    assert result.stop_reason is StopReason.MAX_ITERATIONS


def test_no_feedback_mode_without_dedicated_template_renders_empty_feedback(task):
    backend = fake(refine=["d1"])
    run(task, backend, max_iterations=1, feedback_mode="none")
    assert "CUR[d0|]" in backend.prompts("refine")[0]


# --- parse retries and backend errors -------------------------------------------------------


def test_feedback_parse_error_is_retried_at_that_step_only(task):
    backend = fake(feedback=["no number here", "score: 6"])
    result = run(task, backend, max_iterations=0, final_feedback=True)
    assert [c.role for c in result.calls] == ["generate", "feedback", "feedback"]
    assert result.calls[1].error.startswith("parse:")
    assert result.iterations[0].feedback.total == 6
    assert result.iterations[0].feedback.parse_error is None


def test_parse_retry_resamples(task):
    backend = fake(feedback=["nope", "score: 6"])
    run(task, backend, max_iterations=0, seed=3, final_feedback=True)
    first, second = [r for r in backend.requests if r.role == "feedback"]
    assert (first.seed, first.temperature) == (3, 0.0)
    assert second.seed == 4 and second.temperature >= 0.7


def test_exhausted_parse_retries_keep_raw_feedback_and_continue(task):
    backend = fake(feedback=["bad", "bad", "bad", "score: 2"], refine=["d1"])
    result = run(task, backend, max_iterations=1, parse_retries=2)
    fb0 = result.iterations[0].feedback
    assert fb0.text == "bad" and fb0.parse_error and fb0.total is None
    assert result.drafts == ["d0", "d1"]
    assert len([c for c in result.calls if c.role == "generate"]) == 1


def test_empty_draft_is_retried():
    backend = fake(generate=["", "d0"], feedback=["score: 1"])
    result = run(scored_task(), backend, max_iterations=0)
    assert result.drafts == ["d0"]


def test_transient_errors_are_retried_and_never_reach_prompts(task):
    boom = TransientBackendError("503 from server")
    backend = fake(generate=[boom, "d0"], feedback=[boom, "score: 2", "score: 3"], refine=["d1"])
    result = run(task, backend, max_iterations=1)
    assert result.drafts == ["d0", "d1"]
    failed = [c for c in result.calls if not c.ok]
    assert len(failed) == 2 and all("503" in c.error for c in failed)
    assert not any("503" in p for p in backend.prompts())


def test_backend_that_keeps_failing_ends_run_with_drafts_kept(task):
    boom = TransientBackendError("connection refused")
    backend = fake(feedback=["score: 1"], refine=[boom] * 3)
    result = run(task, backend, backend_retries=2)
    assert result.stop_reason is StopReason.ERROR
    assert "failed 3 times" in result.error
    assert result.output == "d0" and result.drafts == ["d0"]


def test_fatal_backend_error_is_not_retried(task):
    backend = fake(feedback=[BackendError("bad request")])
    result = run(task, backend)
    assert result.stop_reason is StopReason.ERROR and result.error == "bad request"
    assert len([c for c in result.calls if c.role == "feedback"]) == 1


def test_error_on_first_call_gives_no_output(task):
    result = run(task, fake(generate=[BackendError("down")]))
    assert result.output is None and result.stop_reason is StopReason.ERROR


# --- records, streaming, roles --------------------------------------------------------------


def test_run_result_json_round_trip(task):
    backend = fake(feedback=["score: 3", "score: 9"], refine=["d1"])
    result = run(task, backend, score_threshold=9, record_prompts=True)
    again = RunResult.model_validate_json(result.model_dump_json())
    assert again == result
    assert again.calls[0].prompt.startswith("Write about cats")
    assert again.usage.calls == len(result.calls) == 4


def test_stream_yields_typed_steps_in_order(task):
    backend = fake(generate=[TransientBackendError("x"), "d0"], feedback=["score: 9"])
    engine = SelfRefine(task, backend, score_threshold=9, retry_base_delay=0)

    async def collect():
        return [step async for step in engine.astream("cats")]

    kinds = [type(s) for s in asyncio.run(collect())]
    assert kinds == [CallStep, DraftStep, FeedbackStep, DecisionStep, ResultStep]


def test_roles_can_use_different_backends(task):
    main, critic = fake(refine=["d1"]), fake(generate=[], feedback=["score: 1", "score: 2"])
    result = SelfRefine(task, main, feedback_model=critic, max_iterations=1, final_feedback=True).run("cats")
    assert critic.prompts("feedback") and not main.prompts("feedback")
    assert result.config["models"] == {"generate": "fake", "feedback": "fake", "refine": "fake", "judge": "fake"}
    assert [r.role for r in critic.requests] == ["feedback", "feedback"]


def test_usage_sums_calls(task):
    result = run(task, fake(feedback=["score: 1"], refine=["d1"]), max_iterations=0, final_feedback=True)
    assert result.usage.calls == 2
    assert result.usage.prompt_tokens == sum(c.prompt_tokens for c in result.calls)


def test_concurrent_loops_match_serial_runs(task):
    def backend():
        return FakeBackend(default=lambda r: f"{r.role} of {r.prompt.splitlines()[0][-12:]} score: 1")

    inputs = [f"topic {i}" for i in range(8)]
    serial = [SelfRefine(task, backend(), max_iterations=2).run(x) for x in inputs]
    engine = SelfRefine(task, backend(), max_iterations=2)

    async def together():
        return await asyncio.gather(*(engine.arun(x) for x in inputs))

    concurrent = asyncio.run(together())
    assert [r.drafts for r in concurrent] == [r.drafts for r in serial]


def test_bad_config_names_the_option(task):
    with pytest.raises(ConfigError, match="history"):
        SelfRefine(task, fake(), history="everything")
    with pytest.raises(ConfigError, match="max_iterations"):
        SelfRefine(task, fake(), max_iterations=-1)


def test_sync_run_inside_event_loop_says_use_arun(task):
    engine = SelfRefine(task, fake(feedback=["score: 1"]))

    async def inside():
        engine.run("cats")

    with pytest.raises(ConfigError, match="arun"):
        asyncio.run(inside())


# --- verifier modes -----------------------------------------------------------------------


def test_verifier_mode_replaces_the_critic_with_code_checks():
    backend = fake(generate=["A dog runs."], refine=["A dog can catch a frisbee."])
    result = run("commongen", backend, "dog, frisbee, catch", verifier_mode="verifier")
    assert [c.role for c in result.calls] == ["generate", "refine"]
    fb0, fb1 = (it.feedback for it in result.iterations)
    assert fb0.source == "verifier" and "frisbee, catch" in fb0.text and fb0.done is False
    assert fb1.done is True and result.stop_reason is StopReason.FEEDBACK
    assert "Missing concepts (checked by code): frisbee, catch" in backend.prompts("refine")[0]


def test_hybrid_mode_appends_findings_and_needs_both_to_stop():
    # gsm8k keeps the default combination: the critique, then the tool findings
    broken, fixed = "def solution():\n    return 1 / 0", "def solution():\n    return 2"
    backend = fake(generate=[broken], feedback=["# it is correct", "# it is correct"], refine=[fixed])
    result = run("gsm8k", backend, "What is 1 + 1?", verifier_mode="hybrid")
    fb0 = result.iterations[0].feedback
    assert fb0.source == "hybrid" and fb0.text.startswith("# it is correct") and "ZeroDivisionError" in fb0.text
    assert fb0.done is False  # the critic said done, the code check did not
    assert result.iterations[1].feedback.done is True and result.stop_reason is StopReason.FEEDBACK


def test_commongen_hybrid_takes_the_missing_concepts_from_the_code_check():
    backend = fake(generate=["A dog runs."], feedback=[FB_DONE, FB_MISSING], refine=["A dog can catch a frisbee."])
    result = run("commongen", backend, "dog, frisbee, catch", verifier_mode="hybrid")
    fb0, fb1 = (it.feedback for it in result.iterations)
    assert fb0.source == "hybrid" and fb0.fields["missing_concepts"] == ["frisbee", "catch"]
    assert fb0.done is False  # the critic said nothing was missing; the code found two
    assert '{"missing_concepts": ["frisbee", "catch"], "commonsense": "NONE"}' in backend.prompts("refine")[0]
    # the critic's false "frisbee" on the fixed sentence is overruled by the count
    assert fb1.fields["missing_concepts"] == [] and fb1.fields["critic_missing"] == ["frisbee"]
    assert fb1.done is True and result.stop_reason is StopReason.FEEDBACK


def test_verifier_mode_needs_a_task_with_a_verifier(task):
    with pytest.raises(ConfigError, match="no verifier"):
        SelfRefine(task, fake(), verifier_mode="hybrid")


def test_gsm8k_verifier_reports_execution_errors():
    task = get_task("gsm8k")
    bad = task.verify("q", "def solution():\n    return 1 / 0")
    assert bad.passed is False and "ZeroDivisionError" in bad.text
    good = task.verify("q", "def solution():\n    return 2 + 2")
    assert good.passed is True and "returned 4" in good.text


def test_empty_refinement_after_retries_keeps_the_previous_draft(task):
    backend = fake(feedback=["score: 1"], refine=["", "", ""])
    result = run(task, backend)
    assert result.drafts == ["d0", "d0"] and result.stop_reason is StopReason.NO_CHANGE
    assert result.output == "d0"


def test_a_raising_metric_or_answer_hook_is_recorded_not_a_bare_none():
    # the run is kept (drafts are finished work), and the reason is in the result
    class Broken(type(scored_task())):
        capabilities = Capabilities(answer=True)

        def metric(self, input, output, reference):
            raise ZeroDivisionError("metric blew up")

        def answer(self, output):
            raise ValueError("no answer in it")

    task = scored_task()
    task.__class__ = Broken
    result = SelfRefine(task, fake(feedback=["score: 9"]), max_iterations=0).run("cats", reference="x")
    assert result.output == "d0" and result.metric is None and result.answer is None
    assert result.metric_error == "ZeroDivisionError: metric blew up"
    assert result.answer_error == "ValueError: no answer in it"
    ok = SelfRefine(scored_task(), fake(feedback=["score: 9"]), max_iterations=0).run("cats")
    assert ok.metric_error is None and ok.answer_error is None


# --- call records: attempts numbered per step, ok false beside an error (issue 22 item 5) --


def test_every_attempt_of_a_step_is_numbered_and_failed_ones_are_not_ok(task):
    boom = TransientBackendError("503 from server")
    backend = fake(feedback=["no number", boom, "still none", "score: 6"])
    result = run(task, backend, max_iterations=0, parse_retries=2, final_feedback=True)
    feedback = [c for c in result.calls if c.role == "feedback"]
    assert [c.attempt for c in feedback] == [1, 2, 3, 4]
    assert [c.ok for c in feedback] == [False, False, False, True]
    assert all(c.error is None for c in result.calls if c.ok)
    assert all(c.error for c in result.calls if not c.ok)
    assert result.iterations[0].feedback.total == 6


def test_exhausted_parse_retries_are_failed_attempts(task):
    backend = fake(feedback=["bad"] * 3)
    result = run(task, backend, max_iterations=0, parse_retries=2, final_feedback=True)
    feedback = [c for c in result.calls if c.role == "feedback"]
    assert [(c.attempt, c.ok) for c in feedback] == [(1, False), (2, False), (3, False)]
    assert result.iterations[0].feedback.parse_error


# --- a final critique that cannot change the result is skipped (issue 22 item 8) -----------


def test_final_critique_is_skipped_when_select_last_reaches_the_cap(task):
    backend = fake(feedback=["score: 1", "score: 2"], refine=["d1"])
    got = list(_steps(task, backend, max_iterations=1, select="last"))
    result = got[-1].result
    assert [c.role for c in result.calls] == ["generate", "feedback", "refine"]
    assert result.output == "d1" and result.iterations[1].feedback is None
    assert result.stop_reason is StopReason.MAX_ITERATIONS
    stop = [s for s in got if isinstance(s, DecisionStep)][-1]
    assert stop.stop and stop.iteration == 1 and "the last draft is not critiqued" in stop.detail


def test_final_feedback_asks_for_the_last_critique(task):
    backend = fake(feedback=["score: 1", "score: 2"], refine=["d1"])
    result = run(task, backend, max_iterations=1, select="last", final_feedback=True)
    assert [c.role for c in result.calls] == ["generate", "feedback", "refine", "feedback"]
    assert result.iterations[1].feedback.total == 2


def test_final_critique_is_kept_when_it_can_change_the_returned_draft(task):
    # select "best" ranks drafts by their critique: the last one's score decides
    backend = fake(feedback=["score: 5", "score: 2"], refine=["d1"])
    result = run(task, backend, max_iterations=1, select="best")
    assert [c.role for c in result.calls] == ["generate", "feedback", "refine", "feedback"]
    assert result.output == "d0"


def test_no_refinements_and_select_last_make_one_call(task):
    result = run(task, fake(feedback=["score: 1"]), max_iterations=0)
    assert [c.role for c in result.calls] == ["generate"] and result.output == "d0"


def _steps(task, backend, **options):
    options.setdefault("retry_base_delay", 0.0)
    engine = SelfRefine(task, backend, **options)

    async def collect():
        return [s async for s in engine.astream("cats")]

    return asyncio.run(collect())


def test_no_feedback_field_is_cut_mid_sentence():
    # a critic's string cut by its schema's maxLength ends at its last whole sentence
    import json

    from selfrefine.engine.context import whole_sentences

    schema = {"type": "object", "properties": {"commonsense": {"type": "string", "maxLength": 60}}}
    cut = "The knife cannot cry. A person cries, so say who cries inste"
    assert len(cut) == 60  # what a grammar with maxLength 60 lets through
    mended = whole_sentences(json.dumps({"commonsense": cut}), schema)
    assert json.loads(mended) == {"commonsense": "The knife cannot cry."}
    whole = json.dumps({"commonsense": "Fine."})
    assert whole_sentences(whole, schema) == whole  # under the limit: as it came
    no_end = json.dumps({"commonsense": "word " * 12})
    assert json.loads(whole_sentences(no_end, schema))["commonsense"] == "word " * 10 + "word…"
