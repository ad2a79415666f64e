"""Toxicity removal: input forms, prompts, feedback parsing, the classifier metric and verifier."""

from __future__ import annotations

import pytest

from selfrefine import InputError, SelfRefine
from selfrefine.backends.fake import FakeBackend
from selfrefine.core.errors import FeedbackParseError
from selfrefine.evaluation.datasets import load_examples
from selfrefine.tasks import get_task, task_names
from selfrefine.tasks.toxicity import (
    DATA,
    Toxicity,
    classifier_accuracy,
    load_labelled,
    metric_parts,
    offending_words,
    p_toxic,
    preservation,
)

RUDE = "Shut up, you stupid idiot, the bus is late again and the driver is a moron."
POLITE = "Please be patient, the bus is late again and the driver seems overwhelmed."


@pytest.fixture
def task() -> Toxicity:
    return Toxicity()


def test_registered_and_listed_with_its_metric():
    assert "toxicity" in task_names() and isinstance(get_task("toxicity"), Toxicity)
    assert "p_toxic" in get_task("toxicity").summary()["metric"]


def test_input_forms(task):
    assert task.prepare_input(f"  {RUDE}\n") == RUDE
    assert task.prepare_input('{"input": "you  idiot"}') == "you idiot"
    assert task.prepare_input('{"text": "you idiot"}') == "you idiot"
    for bad in ("", '{"input": 3}', "{not json"):
        with pytest.raises(InputError):
            task.prepare_input(bad)


def test_classifier_scores_and_names_offending_words():
    assert p_toxic(RUDE) > 0.9 > 0.1 > p_toxic(POLITE)
    assert {"stupid", "idiot", "moron"} <= set(offending_words(RUDE))
    assert offending_words(POLITE) == []


def test_preservation_ignores_the_offensive_words_and_stop_words():
    assert preservation(RUDE, RUDE) == 1.0
    # content words: bus, late, driver (+ "shut" flagged); the polite rewrite keeps bus, late, driver
    assert preservation(RUDE, POLITE) >= 0.75
    assert preservation(RUDE, "Have a nice day.") == 0.0


def test_metric_combines_the_two_parts(task):
    parts = metric_parts(RUDE, POLITE)
    assert parts["non_toxic"] == 1.0 and parts["combined"] == round((1 - parts["p_toxic"]) * parts["preservation"], 4)
    assert task.metric(RUDE, POLITE) == parts["combined"] > 0.7
    assert task.metric(RUDE, RUDE) < 0.1  # unchanged: still toxic
    assert task.metric(RUDE, "Have a nice day.") == 0.0  # polite but the point is gone


def test_verifier_gives_probability_and_offending_words(task):
    check = task.verify(RUDE, "The bus is late again, you stupid idiot.")
    assert check.passed is False
    assert "p(offensive) = " in check.text and '"stupid"' in check.text and '"idiot"' in check.text
    good = task.verify(RUDE, POLITE)
    assert good.passed is True and "NONE" in good.text and task.has_verifier


def test_feedback_parsing(task):
    fb = task.parse_feedback('Feedback: Still rude. "idiot" is an insult: say "the driver".', input=RUDE, draft=RUDE)
    assert fb.fields["phrases"] == ["idiot", "the driver"] and fb.done is False
    assert task.parse_feedback("NONE", input=RUDE, draft=POLITE).done is True
    # a critic that restates the rewrite before its verdict (seen from Qwen2.5-1.5B)
    restated = task.parse_feedback(f"Rewritten Comment: {POLITE}\nFeedback: None", input=RUDE, draft=POLITE)
    assert restated.done is True and restated.text == "NONE"
    for raw in ("", "rude"):
        with pytest.raises(FeedbackParseError):
            task.parse_feedback(raw, input=RUDE, draft=RUDE)


def test_hybrid_drops_a_none_that_the_classifier_contradicts(task):
    draft = "Only an idiot would schedule the meeting at 7 am."
    critique = task.parse_feedback("NONE", input=RUDE, draft=draft)
    fb = task.combine(critique, task.verify(RUDE, draft), input=RUDE, draft=draft)
    assert fb.done is False and not fb.text.startswith("NONE") and '"idiot"' in fb.text
    clean = task.combine(critique, task.verify(RUDE, POLITE), input=RUDE, draft=POLITE)
    assert clean.done is True


def test_a_run_removes_the_toxicity_on_the_fake_model(task):
    replies = {
        "generate": "Rewrite: Shut up, the bus is late again and the driver is a moron.",
        "feedback": 'Still rude. "Shut up" and "moron" are insults.',
        "refine": POLITE,
    }
    result = SelfRefine(task, FakeBackend(default=lambda r: replies[r.role]), max_iterations=1).run(RUDE)
    assert result.drafts == ["Shut up, the bus is late again and the driver is a moron.", POLITE]
    assert result.output == POLITE


def test_shipped_splits_load_for_eval_and_the_labelled_set_is_balanced():
    dev, held = (load_examples("toxicity", DATA / f"toxicity.{s}.jsonl") for s in ("dev", "heldout"))
    assert len(dev) == len(held) == 12 and not {e.input for e in dev} & {e.input for e in held}
    assert all(Toxicity().prepare_input(e.input) for e in dev + held)
    labels = [y for _, y in load_labelled()]
    assert labels.count(True) == labels.count(False) == 20


def test_classifier_accuracy_on_the_labelled_set():
    """The number docs/quality.md quotes: 36 of 40 right, no clean sentence flagged."""
    scores = classifier_accuracy()
    assert scores["n"] == 40 and scores["accuracy"] == 0.9 and scores["precision"] == 1.0 and scores["recall"] == 0.8
