"""Story generation: input forms, prompts, rating feedback, the code checks and verifier."""

from __future__ import annotations

import json

import pytest

from selfrefine import InputError, SelfRefine
from selfrefine.backends.fake import FakeBackend
from selfrefine.core.errors import FeedbackParseError
from selfrefine.evaluation.datasets import load_examples
from selfrefine.tasks import get_task, task_names
from selfrefine.tasks.story import Story, repetition_loops, story_checks, word_count
from selfrefine.tasks.toxicity import DATA

PREMISE = "A baker discovers that one loaf of bread goes missing every morning."
SPEC = json.dumps({"premise": PREMISE, "elements": ["cat", "oven"], "min_words": 20, "max_words": 80})
GOOD = (
    "Every morning Ada counted her loaves and found one missing. She hid behind the warm oven one night "
    "and waited. At dawn a thin grey cat slipped through the vent, dragged a loaf to the alley and shared "
    "it with three kittens. Ada left the vent open after that."
)
RATINGS = {
    "coherence": {"reason": "clear", "score": 4},
    "constraints": {"reason": "all used", "score": 5},
    "interest": {"reason": "flat end", "score": 3},
    "premise": {"reason": "followed", "score": 5},
}


@pytest.fixture
def task() -> Story:
    return Story()


def test_registered_and_listed_with_its_metric():
    assert "story" in task_names() and isinstance(get_task("story"), Story)
    assert "judge" in get_task("story").summary()["metric"]


def test_input_forms_and_errors(task):
    assert task.prepare_input(f"  {PREMISE} ") == PREMISE  # a bare premise stays text
    spec = json.loads(task.prepare_input(SPEC))
    assert spec == {"premise": PREMISE, "elements": ["cat", "oven"], "min_words": 20, "max_words": 80}
    assert task.context(task.prepare_input(SPEC))["elements"] == ["cat", "oven"]
    for bad in (
        '{"premise": ""}',
        '{"premise": "x", "elements": "cat"}',
        '{"premise": "x", "min_words": 50, "max_words": 10}',
        '{"premise": "x", "max_words": "many"}',
        "{broken",
    ):
        with pytest.raises(InputError):
            task.prepare_input(bad)


def test_code_checks_elements_length_and_loops(task):
    spec = task.context(task.prepare_input(SPEC))
    good = story_checks(spec, GOOD)
    assert good["coverage"] == 1.0 and good["length_ok"] and good["loops"] == [] and task.metric(SPEC, GOOD) == 1.0
    no_cat = GOOD.replace("cat", "fox")
    assert story_checks(spec, no_cat)["missing"] == ["cat"]
    assert task.metric(SPEC, no_cat) == round((0.5 + 1 + 1) / 3, 4)
    loop = "The cat sat by the oven. " * 4
    assert repetition_loops(loop) and word_count(loop) == 24
    assert task.metric(SPEC, loop) == round((1 + 1 + 0) / 3, 4)


def test_verifier_names_what_code_found(task):
    check = task.verify(SPEC, "The dog slept. " * 3)
    assert check.passed is False
    assert "Missing required elements: cat, oven." in check.text and "Length 9 words: write 20 to 80" in check.text
    assert "Repeated text" in check.text
    assert task.verify(SPEC, GOOD).passed is True and task.has_verifier


def test_rating_feedback_parses_and_stops_only_at_all_fives(task):
    fb = task.parse_feedback(json.dumps(RATINGS), input=SPEC, draft=GOOD)
    assert fb.scores == {"coherence": 4, "constraints": 5, "interest": 3, "premise": 5} and fb.total == 17
    assert fb.done is False and fb.fields["interest_reason"] == "flat end"
    fives = {k: {"reason": "ok", "score": 5} for k in RATINGS}
    assert task.parse_feedback(json.dumps(fives), input=SPEC, draft=GOOD).done is True
    for raw in ("", "The story is nice.", json.dumps({"coherence": {"reason": "x", "score": 4}})):
        with pytest.raises(FeedbackParseError):
            task.parse_feedback(raw, input=SPEC, draft=GOOD)


def test_a_run_on_the_fake_model(task):
    replies = {
        "generate": "Story: The dog slept. The dog slept. The dog slept.",
        "feedback": json.dumps(RATINGS),
        "refine": GOOD,
    }
    backend = FakeBackend(default=lambda r: replies[r.role])
    result = SelfRefine(task, backend, max_iterations=1).run(SPEC)
    assert result.drafts == ["The dog slept. The dog slept. The dog slept.", GOOD] and result.output == GOOD
    assert "Required elements: cat, oven\nLength: 20 to 80 words\nStory:" in backend.prompts("generate")[0]


def test_shipped_premises_load_for_eval():
    dev, held = (load_examples("story", DATA / f"story.{s}.jsonl") for s in ("dev", "heldout"))
    assert len(dev) == len(held) == 8 and not {e.input for e in dev} & {e.input for e in held}
    assert all(Story().prepare_input(e.input) for e in dev + held)
