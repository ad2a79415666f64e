"""Sentiment reversal: input forms, prompts, feedback parsing, the VADER metric and verifier."""

from __future__ import annotations

import json

import pytest

from selfrefine import InputError
from selfrefine.core.errors import DraftParseError, FeedbackParseError
from selfrefine.tasks.sentiment import (
    Sentiment,
    compound_score,
    has_sentiment,
    opposite_words,
    oriented_score,
    parse_sentiment_input,
)

NEG = "The soup was cold and the staff was rude."
POS = "The soup was delicious and the staff was wonderful."


@pytest.fixture
def task() -> Sentiment:
    return Sentiment()


def test_input_forms_normalise_to_text_form(task):
    assert task.prepare_input(f"positive: {NEG}") == f"positive: {NEG}"
    assert task.prepare_input(f"  Negative :  {POS}") == f"negative: {POS}"
    assert task.prepare_input(json.dumps({"review": NEG, "target": "positive"})) == f"positive: {NEG}"
    yelp = {
        "review": "bad food...\\n\\nnever again.",
        "sentiment": "Very negative",
        "target_sentiment": "Very positive",
    }
    assert task.prepare_input(json.dumps(yelp)) == "positive: bad food... never again."
    assert parse_sentiment_input("negative: Great!") == ("Great!", "negative")


@pytest.mark.parametrize(
    "bad, message",
    [
        ("make this happier: the food was bad", "must be"),
        ('{"review": "x"}', "target"),
        ('{"text": "x", "target": "positive"}', "review"),
        ('{"review": "x", "target": "neutral"}', "neither"),
        ('{"review": ', "does not parse"),
        ("positive:   ", "must be|empty"),
        ("", "empty"),
    ],
)
def test_bad_inputs_are_rejected(task, bad, message):
    with pytest.raises(InputError, match=message):
        task.prepare_input(bad)


def test_context_exposes_review_and_target(task):
    assert task.context(f"positive: {NEG}") == {"review": NEG, "target": "positive"}


def test_prompts_render_and_refine_extends_byte_for_byte(task):
    inp = task.prepare_input(f"positive: {NEG}")
    gen = task.render("generate", inp)
    assert gen.endswith(f"Review: {NEG}\nTarget: positive\nRewrite:")
    fb = task.render("feedback", inp, draft="ok soup")
    assert fb.endswith("Review: ok soup\nTarget: positive\nFeedback:")
    one = task.render("refine", inp, draft="d0", feedback="f0", history=[])
    two = task.render("refine", inp, draft="d1", feedback="f1", history=[{"draft": "d0", "feedback": "f0"}])
    assert two.startswith(one)
    assert two.endswith(
        "Rewrite: d1\nFeedback: f1\nNow improve it: change every phrase the feedback quotes, so the whole review is clearly positive.\nRewrite:"
    )
    nofb = task.render("refine_nofeedback", inp, draft="d0", history=[])
    assert "Feedback: f0" not in nofb and nofb.endswith(
        "Original review: " + NEG + "\nTarget: positive\nRewrite: d0\nRewrite:"
    )
    assert task.defaults.max_iterations == 4 and task.says_done("anything") is None


def test_draft_is_first_line_without_label(task):
    assert task.parse_draft("Rewrite: Lovely soup.\nReview: next") == "Lovely soup."
    with pytest.raises(DraftParseError):
        task.parse_draft("Rewrite:   ")


def test_feedback_extracts_quoted_phrases(task):
    raw = 'Feedback: Not fully positive. "cold" is negative and "was rude" too. Praise the staff.'
    fb = task.parse_feedback(raw, input=f"positive: {NEG}", draft=NEG)
    assert fb.text.startswith("Not fully positive")
    assert fb.fields["phrases"] == ["cold", "was rude"]
    assert fb.done is None and fb.total is None


@pytest.mark.parametrize("raw", ["", "   ", "Feedback:", "ok"])
def test_empty_or_degenerate_feedback_is_a_parse_error(task, raw):
    with pytest.raises(FeedbackParseError):
        task.parse_feedback(raw, input=f"positive: {NEG}", draft=NEG)


def test_vader_metric_known_answers(task):
    assert compound_score(POS) > 0.05 > -0.05 > compound_score(NEG)
    assert task.metric(f"positive: {NEG}", POS) == 1.0
    assert task.metric(f"positive: {NEG}", NEG) == 0.0
    assert task.metric(f"negative: {POS}", NEG) == 1.0
    assert task.metric(f"negative: {POS}", "The soup was served at noon.") == 0.0  # neutral
    assert oriented_score(NEG, "negative") == -compound_score(NEG)
    assert has_sentiment(POS, "Very positive")


def test_verifier_names_score_and_wrong_words(task):
    check = task.verify(f"positive: {NEG}", NEG)
    assert check.passed is False and check.score < 0
    assert "VADER compound score: -" in check.text
    assert 'Words with the opposite polarity: "rude" (-2.0).' in check.text
    assert opposite_words("Terrible, awful, bad but nice.", "positive") == [
        ("bad", -2.5),
        ("terrible", -2.1),
        ("awful", -2.0),
    ]
    assert opposite_words(NEG, "negative") == []
    neutral = task.verify(f"negative: {POS}", "The soup was served at noon.")
    assert neutral.passed is False and "add clearly negative words" in neutral.text
    good = task.verify(f"positive: {NEG}", POS)
    assert good.passed is True and good.score > 0.05 and "reads as positive" in good.text
    assert task.has_verifier


def test_graded_parts_move_where_the_binary_metric_is_saturated(task):
    """Both rewrites reach the target sign (binary 1.0); only the graded parts tell them apart."""
    mild, strong = "The soup was fine.", "The soup was absolutely delicious and wonderful, the best ever!"
    weak, very = task.metric_parts(f"positive: {NEG}", mild), task.metric_parts(f"positive: {NEG}", strong)
    assert weak["reached"] == very["reached"] == 1.0 == task.metric(f"positive: {NEG}", mild)
    assert 0.05 <= weak["toward_target"] < 0.5 <= very["toward_target"]
    assert (weak["very"], very["very"]) == (0.0, 1.0)
    # signed toward the target: a negative target flips the sign
    assert task.metric_parts(f"negative: {POS}", NEG)["toward_target"] == round(-compound_score(NEG), 4) > 0
