"""The acronym task: prompts, 5-aspect feedback parsing, fixed rounds, code checks (the real model: test_default_model.py)."""

from __future__ import annotations

import json

import pytest

from selfrefine import (
    FakeBackend,
    FeedbackParseError,
    InputError,
    SelfRefine,
    StopReason,
)
from selfrefine.core.errors import DraftParseError
from selfrefine.tasks.acronym import (
    ASPECTS,
    FEEDBACK_SCHEMA,
    Acronym,
    acronym_checks,
    align_letters,
    extract_acronym,
    pronounce_problems,
)

BERT_TITLE = "Bidirectional Encoder Representations from Transformers"
TITLE = "Scalable Tree Boosting for Accurate Ranking"


def ratings(**scores: int) -> str:
    return json.dumps({k: {"score": v, "reason": "ok"} for k, v in scores.items()})


FULL = ratings(ease_of_pronunciation=4, ease_of_spelling=5, relation_to_title=3, positive_connotation=4, well_known=2)
TEXT_FORM = """\
* Ease of pronunciation: easy to say as one word. 4/5
* Ease of spelling: 5/5 - short
* Relation to title: 3 out of 5, the R is a guess
* Positive connotation: neutral, 3
* Well-known: 1/5, not related to a known word
* Total score: 16/25"""


@pytest.fixture
def task() -> Acronym:
    return Acronym()


# --- prompts ------------------------------------------------------------------------------


def test_prompts_render(task):
    assert task.render("generate", TITLE).endswith(f"Title: {TITLE}\nAcronym:")
    fb = task.render("feedback", TITLE, draft="STAR")
    assert fb.endswith(f"Title: {TITLE}\nAcronym: STAR\nRatings:")
    nofb = task.render("refine_nofeedback", TITLE, draft="STAR", history=[])
    assert nofb.endswith("Acronym: STAR\nBetter acronym:")


def test_refine_prompt_extends_the_previous_one_byte_for_byte(task):
    first = task.render("refine", TITLE, draft="STB", feedback=FULL, history=[], iteration=0)
    second = task.render(
        "refine", TITLE, draft="STAR", feedback="fb2", history=[{"draft": "STB", "feedback": FULL}], iteration=1
    )
    assert second.startswith(first)
    assert second.endswith(
        "Better acronym: STAR\nRatings: fb2\nNow write a different acronym that scores higher on the low-rated aspects.\nBetter acronym:"
    )


def test_fewshot_feedback_matches_the_schema(task):
    source = task.declared.templates["feedback"].source
    line = next(ln for ln in source.splitlines() if ln.startswith("Ratings: {"))
    example = json.loads(line.removeprefix("Ratings: "))
    assert list(example) == list(FEEDBACK_SCHEMA["properties"]) == list(ASPECTS)
    assert all(len(v["reason"]) <= 30 and v["score"] in (1, 2, 3, 4, 5) for v in example.values())


def test_input_is_one_line_title(task):
    assert task.prepare_input("  Deep\n Nets  ") == "Deep Nets"
    with pytest.raises(InputError):
        task.prepare_input("?!")


# --- drafts -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw, acronym",
    [
        (" STAR\n", "STAR"),
        ("Better acronym: B.E.R.T.", "BERT"),
        ("The acronym is STAR.", "STAR"),
        ("GloVe is nice", "GloVe"),
        ("\n\nYOLO-v2, maybe", "YOLOv2"),
    ],
)
def test_parse_draft(task, raw, acronym):
    assert task.parse_draft(raw) == acronym == extract_acronym(raw)


def test_empty_draft_is_an_error(task):
    with pytest.raises(DraftParseError):
        task.parse_draft(" ... \n")


# --- feedback -----------------------------------------------------------------------------


def test_json_feedback_parses_to_scores_and_total(task):
    fb = task.parse_feedback(FULL, input=TITLE, draft="STAR")
    assert fb.scores == {
        "ease_of_pronunciation": 4,
        "ease_of_spelling": 5,
        "relation_to_title": 3,
        "positive_connotation": 4,
        "well_known": 2,
    }
    assert fb.total == 18 and fb.done is None
    assert fb.fields["aspects_parsed"] == list(ASPECTS) and fb.fields["well_known_reason"] == "ok"


def test_text_feedback_parses(task):
    fb = task.parse_feedback(TEXT_FORM, input=TITLE, draft="STAR")
    assert fb.scores == {
        "ease_of_pronunciation": 4,
        "ease_of_spelling": 5,
        "relation_to_title": 3,
        "positive_connotation": 3,
        "well_known": 1,
    }
    assert fb.total == 16
    assert fb.fields["ease_of_pronunciation_reason"] == "easy to say as one word"


def test_partial_feedback_with_three_aspects_is_scaled(task):
    fb = task.parse_feedback(ratings(ease_of_pronunciation=4, ease_of_spelling=4, well_known=4), input=TITLE, draft="S")
    assert fb.fields["aspects_parsed"] == ["ease_of_pronunciation", "ease_of_spelling", "well_known"]
    assert fb.total == 20  # 12 of 15 → 20 of 25


def test_cut_off_json_falls_back_to_the_text_parser(task):
    cut = FULL[:-40]  # the last aspect is lost
    fb = task.parse_feedback(cut, input=TITLE, draft="STAR")
    assert len(fb.fields["aspects_parsed"]) >= 3 and fb.scores["ease_of_pronunciation"] == 4


@pytest.mark.parametrize(
    "raw, message",
    [
        ("", "empty"),
        ("It is a fine acronym.", "0 of 5"),
        (ratings(ease_of_pronunciation=4, well_known=2), "2 of 5"),
        ('{"ease_of_pronunciation": {"score": 9}, "ease_of_spelling": 0, "well_known": "great"}', "0 of 5"),
        ("Ease of pronunciation: 4/5\nEase of spelling: good", "1 of 5"),
    ],
)
def test_malformed_feedback_is_retryable(task, raw, message):
    with pytest.raises(FeedbackParseError, match=message):
        task.parse_feedback(raw, input=TITLE, draft="STAR")


def test_a_word_in_a_reason_is_not_taken_for_a_label(task):
    raw = (
        "Ease of pronunciation: 4/5\nEase of spelling: 4/5\nWell-known: not related to the title, 2/5\n"
        "Positive connotation: 5/5"
    )
    fb = task.parse_feedback(raw, input=TITLE, draft="STAR")
    assert "relation_to_title" not in fb.scores and fb.scores["well_known"] == 2


# --- stop rule ----------------------------------------------------------------------------


def test_fixed_rounds_end_at_max_iterations(task):
    assert task.declared.defaults.max_iterations == 4
    backend = FakeBackend({"generate": ["STB"], "feedback": [FULL] * 3, "refine": ["STBR", "STAR"]})
    result = SelfRefine(task, backend, max_iterations=2, retry_base_delay=0.0).run(TITLE)
    assert result.stop_reason is StopReason.MAX_ITERATIONS
    assert result.drafts == ["STB", "STBR", "STAR"]
    assert result.metric == 1.0  # code checks, not the critic's constant 18/25
    assert backend.requests[1].json_schema == FEEDBACK_SCHEMA


# --- metric -------------------------------------------------------------------------------


def test_bert_passes_the_initials_check():
    checks = acronym_checks(BERT_TITLE, "BERT")
    assert checks.letters_score == 1.0 and checks.letters_ok and checks.passed and checks.score == 1.0


def test_xqz_fails_pronounceability_and_letters():
    checks = acronym_checks(TITLE, "XQZ")
    assert not checks.pronounceable and checks.pronounce_problems == ["it has no vowel"]
    assert checks.letters_score == 0.0 and checks.unmatched == ["x", "q", "z"]
    assert checks.length_ok and checks.score == pytest.approx(1 / 3, abs=1e-4)


def test_letters_score_weights_initials_over_inner_letters():
    assert align_letters("GANET", "Generative Adversarial Networks") == (0.8, [])  # E, T inside "Networks"
    assert align_letters("PCNN", "PixelCNN for Images") == (0.75, [])  # camel-case C is an initial
    assert align_letters("TSR", TITLE) == (0.8333, [])  # T, then the s inside "Boosting", then R
    assert align_letters("AZ", TITLE) == (0.5, ["z"])
    assert align_letters("ZS", TITLE) == (0.5, ["z"])
    # a tie (R initial + S unmatched, or r in "Tree" + s in "Boosting") prefers matching all
    assert align_letters("RS", TITLE) == (0.5, [])
    assert align_letters("", TITLE) == (0.0, [])


@pytest.mark.parametrize(
    "acronym, ok",
    [
        ("STAR", True),
        ("strap", True),
        ("GAN", True),
        ("ACLJ", True),
        ("XKCD", False),
        ("STBAR", False),
        ("PSPNet", False),
        ("AAAI", False),
        ("42", False),
    ],
)
def test_pronounceability_heuristic(acronym, ok):
    assert (not pronounce_problems(acronym)) is ok


def test_length_check():
    assert not acronym_checks("A b", "A").length_ok
    assert not acronym_checks(TITLE, "STARSTARSTAR").length_ok
    assert acronym_checks(TITLE, "ST").length_ok


def test_verifier_reports_failed_checks(task):
    check = task.verify(TITLE, "XQZ")
    assert "Letters not found in the title in order: X, Q, Z" in check.text
    assert "Hard to pronounce: it has no vowel" in check.text and check.passed is False
    ok = task.verify(TITLE, "STAR")
    assert ok.passed is True and ok.score == 1.0 and "All checks pass" in ok.text
