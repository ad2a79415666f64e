"""Dialogue response (FED): input forms, prompts, 10-aspect feedback parsing (JSON and text)."""

from __future__ import annotations

import json

import pytest

from selfrefine import InputError
from selfrefine.core.errors import DraftParseError, FeedbackParseError
from selfrefine.tasks.dialogue import FEEDBACK_SCHEMA, KEYS, Dialogue

CONV = "User: I adopted a puppy today!\nSystem: Congratulations! What breed?\nUser: A beagle. He chews everything."
ALL3 = {key: 3 for key in KEYS}


@pytest.fixture
def task() -> Dialogue:
    return Dialogue()


def parse(task, raw):
    return task.parse_feedback(raw, input=CONV, draft="Beagles love to chew!")


def test_inputs_text_and_json(task):
    assert task.prepare_input("  User: hi \n\n  System:   hello there\n") == "User: hi\nSystem: hello there"
    assert task.prepare_input(json.dumps({"context": CONV, "response": "x"})) == CONV
    for bad, message in [("", "empty"), ('{"context": 3}', "context"), ("{oops", "does not parse")]:
        with pytest.raises(InputError, match=message):
            task.prepare_input(bad)


def test_prompts_render_and_refine_extends_byte_for_byte(task):
    assert task.render("generate", CONV).endswith(f"Conversation:\n{CONV}\nResponse:")
    assert task.render("feedback", CONV, draft="Nice.").endswith("Response: Nice.\nFeedback:")
    one = task.render("refine", CONV, draft="d0", feedback="f0", history=[])
    two = task.render("refine", CONV, draft="d1", feedback="f1", history=[{"draft": "d0", "feedback": "f0"}])
    assert two.startswith(one)
    assert two.endswith(
        "Improved response: d1\nFeedback: f1\nNow improve it: fix every aspect rated below 3 and follow the reason.\nImproved response:"
    )
    assert task.render("refine_nofeedback", CONV, draft="d0").endswith("Response: d0\nImproved response:")
    assert task.defaults.max_iterations == 3 and task.metric(CONV, "anything") is None
    assert not task.has_verifier and task.says_done("all 3") is None


def test_draft_strips_speaker_and_rejects_user_turn(task):
    assert task.parse_draft("System: Beagles love shoes!\nUser: ha") == "Beagles love shoes!"
    assert task.parse_draft("Response: Try chew toys.") == "Try chew toys."
    assert task.parse_draft("Improved response: Try chew toys!") == "Try chew toys!"
    for bad, label in [("User: what do I do?", "user"), ("Feedback: This is great.", "feedback")]:
        with pytest.raises(DraftParseError, match=f"'{label}' line"):
            task.parse_draft(bad)


def test_draft_drops_a_sentence_cut_by_max_tokens(task):
    assert task.parse_draft("Beagles chew. Get him toys! And maybe a") == "Beagles chew. Get him toys!"
    assert task.parse_draft("Beagles chew when they are") == "Beagles chew when they are"  # nothing whole to keep
    assert task.parse_draft('He said "stop." Then he') == 'He said "stop."'


def test_schema_has_every_aspect_as_1_to_3():
    props = FEEDBACK_SCHEMA["properties"]
    assert len(KEYS) == 10 and "user_understanding" in KEYS
    assert all(props[k]["enum"] == [1, 2, 3] for k in KEYS)
    assert set(FEEDBACK_SCHEMA["required"]) == {*KEYS, "reason"}


def test_json_feedback_full(task):
    data = {**ALL3, "helpful": 1, "specific": 2, "reason": "Suggest chew toys."}
    fb = parse(task, "Feedback: " + json.dumps(data))
    assert fb.scores == {**{k: 3.0 for k in KEYS}, "helpful": 1.0, "specific": 2.0}
    assert fb.total == 27.0
    assert fb.fields["aspects_parsed"] == "10" and fb.fields["reasons"] == ["Suggest chew toys."]
    assert "stated_total" not in fb.fields and "missing_aspects" not in fb.fields


def test_json_feedback_nested_reasons_and_wrong_total(task):
    data = {k: {"score": 2, "reason": f"{k} ok"} for k in KEYS[:6]}
    fb = parse(task, json.dumps({**data, "total": 30}))
    assert fb.total == 12.0 and fb.fields["stated_total"] == "30"
    assert fb.fields["aspects_parsed"] == "6" and fb.fields["missing_aspects"] == list(KEYS[6:])
    assert fb.fields["reasons"][0] == "relevant: relevant ok"


TEXT = """Relevant: 3 - it answers about the beagle.
Informative: 2 - could suggest chew toys.
Interesting: 2/3 - a bit plain.
Consistent: 3 - no contradiction.
- Helpful (1): no advice.
Engaging: 2 - no question.
Specific: 2 - generic.
Safe: 3 - harmless.
User understanding: 3 - gets the worry.
Fluent: 3 - fine.
Total: 25/30"""


def test_text_feedback_full_with_model_arithmetic_error(task):
    fb = parse(task, TEXT)
    assert fb.scores["helpful"] == 1.0 and fb.scores["user_understanding"] == 3.0
    assert fb.total == 24.0 and fb.fields["stated_total"] == "25"  # the sum wins
    assert "informative: could suggest chew toys." in fb.fields["reasons"]


def test_partial_text_feedback_keeps_raw_sum(task):
    partial = "\n".join(TEXT.splitlines()[:5])  # five aspects, no total
    fb = parse(task, partial)
    assert len(fb.scores) == 5 and fb.total == 11.0  # not rescaled to /30
    assert fb.fields["aspects_parsed"] == "5"
    assert fb.fields["missing_aspects"] == ["engaging", "specific", "safe", "user_understanding", "fluent"]


@pytest.mark.parametrize(
    "raw, message",
    [
        ("", "empty"),
        ("The response is nice.", "only 0 of 10"),
        ("\n".join(TEXT.splitlines()[:4]), "only 4 of 10"),
        ("Relevant: 5\nInformative: 0\nInteresting: 9\nConsistent: 4\nHelpful: 7\nSafe: 3", "only 1 of 10"),
        ('{"relevant": 3, "informative": 2, "reason": "cut', "cut off"),
        ('{"relevant": 3, "informative": 2}', "only 2 of 10"),
    ],
)
def test_malformed_feedback(task, raw, message):
    with pytest.raises(FeedbackParseError, match=message):
        parse(task, raw)


# issue 46 item 18: a score the critique gives but that cannot be read (NaN, infinity, off the
# scale) was dropped silently; now it is said in the feedback's fields, and in the parse error
@pytest.mark.parametrize(
    "value, said",
    [
        ("NaN", "relevant: NaN is not a finite number"),  # Python's json reads NaN, Infinity and 1e999
        ("Infinity", "relevant: infinity is not a finite number"),
        ("-1e999", "relevant: -infinity is not a finite number"),
        ("7", "relevant: 7 is not a score of 1, 2 or 3"),
        ('{"score": NaN, "reason": "odd"}', "relevant: NaN is not a finite number"),
    ],
)
def test_an_unreadable_aspect_score_is_said_not_dropped_silently(task, value, said):
    rest = {k: 3 for k in KEYS[1:]}
    fb = parse(task, '{"relevant": ' + value + ", " + json.dumps(rest)[1:])
    assert fb.scores == {k: 3.0 for k in KEYS[1:]} and fb.total == 27.0  # the rest is read
    assert fb.fields["unread_scores"] == [said] and fb.fields["missing_aspects"] == ["relevant"]


def test_a_non_finite_total_is_said_and_too_few_aspects_name_what_was_unread(task):
    fb = parse(task, json.dumps({**ALL3, "total": float("nan")}))
    assert fb.total == 30.0 and "stated_total" not in fb.fields
    assert fb.fields["unread_scores"] == ["total: NaN is not a finite number"]
    nans = ", ".join(f'"{k}": NaN' for k in KEYS[:6])
    with pytest.raises(FeedbackParseError, match=r"only 4 of 10 aspects .*\(relevant: NaN is not a finite number;"):
        parse(task, "{" + nans + ", " + json.dumps({k: 3 for k in KEYS[6:]})[1:])
    text = parse(task, TEXT.replace("Relevant: 3", "Relevant: 5"))
    assert text.fields["unread_scores"] == ["relevant: 5 is not a score of 1, 2 or 3"]
