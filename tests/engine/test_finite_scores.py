"""Issue 39 item 8: scores are finite numbers, wherever they come from.

On b6c03ab a critic's "Score: nan" was read as a score (a nan compares false with
everything, so it won "best" selection) and "Score: inf" met any threshold; a verify
function's ``Verification(score=nan)`` won selection too. Now the critic's non-finite score
is a parse error (the call is retried, as for any unreadable feedback), a verify function's
is a TaskError naming the function, and the records refuse one however they are built."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from selfrefine import FakeBackend, SelfRefine, StopReason, Task, TaskError
from selfrefine.core.errors import FeedbackParseError
from selfrefine.core.records import Feedback, Verification

TEMPLATES = dict(generate="Write about {{ input }}.", feedback="Rate: {{ draft }}", refine="Better: {{ draft }}")


def scored(**options) -> Task:
    return Task("scored", **TEMPLATES, score=r"Score:\s*(\S+)", **options)  # \S+ lets the critic write any word


@pytest.mark.parametrize("said", ["nan", "NaN", "inf", "-inf", "Infinity", "1e999"])
def test_a_critic_score_that_is_not_finite_is_a_parse_error(said):
    with pytest.raises(FeedbackParseError, match=f"score '{said}' is not a finite number"):
        scored().parse_feedback(f"Lovely.\nScore: {said}", input="x", draft="y")
    assert scored().parse_feedback("Lovely.\nScore: 8", input="x", draft="y").total == 8.0


def test_a_critic_nan_does_not_win_best_selection():
    # drafts d0 (5), d1 ("nan", three times: the call and its two retries), d2 (3): best is d0
    backend = FakeBackend(
        {
            "generate": ["d0"],
            "refine": ["d1", "d2"],
            "feedback": ["Score: 5", "Score: nan", "Score: nan", "Score: nan", "Score: 3"],
        }
    )
    result = SelfRefine(scored(select="best"), backend, max_iterations=2, retry_base_delay=0).run("rain")
    assert result.output == "d0", [(it.draft, it.feedback and it.feedback.total) for it in result.iterations]
    assert "not a finite number" in result.iterations[1].feedback.parse_error
    assert all(it.feedback.total is None or math.isfinite(it.feedback.total) for it in result.iterations)


def test_a_critic_inf_does_not_meet_the_threshold():
    backend = FakeBackend({"generate": ["d0"], "refine": ["d1", "d2"]}, default="Score: inf")
    result = SelfRefine(scored(score_threshold=9), backend, max_iterations=2, retry_base_delay=0).run("rain")
    assert result.stop_reason is not StopReason.SCORE and len(result.iterations) == 3


def test_a_verify_function_that_scores_nan_is_named():
    def nan_check(input: str, draft: str) -> Verification:
        return Verification(text="looks fine", passed=True, score=float("nan"))

    def built_unchecked(input: str, draft: str) -> Verification:
        return Verification.model_construct(text="ok", passed=True, score=math.inf)

    with pytest.raises(
        TaskError, match=r"verify function \S*nan_check raised ValidationError: Verification\.score: .*finite"
    ):
        Task("t", **TEMPLATES, verify=nan_check).verify("x", "y")
    with pytest.raises(
        TaskError, match=r"verify function \S*built_unchecked returned a Verification whose score is inf"
    ):
        Task("t", **TEMPLATES, verify=built_unchecked).verify("x", "y")
    backend = FakeBackend({"generate": ["a", "b"]}, default="fine")
    with pytest.raises(TaskError, match="nan_check"):  # in a run: the run stops, naming the function
        SelfRefine(Task("t", **TEMPLATES), backend, verify=nan_check, samples=2, max_iterations=0).run("x")


@pytest.mark.parametrize(
    "build",
    [
        lambda: Feedback(text="x", total=math.nan),
        lambda: Feedback(text="x", total=-math.inf),
        lambda: Feedback(text="x", scores={"clarity": math.inf}),
        lambda: Verification(text="x", score=math.nan),
        lambda: Verification(text="x", judged=math.inf),
        lambda: Feedback.model_validate_json('{"text": "x", "total": NaN}'),
    ],
)
def test_records_refuse_scores_that_are_not_finite(build):
    with pytest.raises(ValidationError, match="finite number"):
        build()
