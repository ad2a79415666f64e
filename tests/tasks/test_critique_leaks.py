"""Critiques that leak their examples (issue 20, item 6): the commongen critic copies words
of its prompt's examples ("cut", "goggles") or names "missing concepts" the input does not
have; the parser keeps such words from the refiner, and benchmarks/critique_leaks.py counts
them."""

from __future__ import annotations

import json
import sys

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

from critique_leaks import leaks

from selfrefine.tasks import get_task
from selfrefine.tasks.commongen import example_words

INPUT = "sun, beach, towel"
DRAFT = "The sun warmed the towel on the beach."


@pytest.fixture(scope="module")
def task():
    return get_task("commongen")


def critique(missing: list[str], commonsense: str) -> str:
    return json.dumps({"missing_concepts": missing, "commonsense": commonsense})


def test_the_example_words_are_read_from_the_prompts_own_examples():
    words = example_words(
        ['Any form counts ("cut" is used by "cutting").\nConcepts: ski, goggles\n{"commonsense": "NONE"}']
    )
    assert words == {"cut", "cutting", "ski", "goggles"}  # not the JSON example's field names


def test_the_packaged_prompts_quote_no_example_word_in_their_instructions(task):
    # the critic asked a "sun, beach, towel" sentence for "cut", quoted in its instructions
    assert "cut" not in task.example_words and {"leash", "bench", "bridge"} <= task.example_words
    assert not {"and", "while"} & task.example_words  # quoted in an instruction, but no example


def test_a_verdict_that_names_an_example_word_is_dropped(task):
    fb = task.parse_feedback(critique([], "Put a leash on the towel by the beach."), input=INPUT, draft=DRAFT)
    assert json.loads(fb.text) == {"missing_concepts": [], "commonsense": "NONE"}
    assert fb.fields["copied_from_examples"] == ["leash"] and fb.done is True
    assert fb.fields["dropped_commonsense"] == "Put a leash on the towel by the beach."


def test_a_verdict_about_a_concept_the_input_does_not_have_is_dropped(task):
    raw = critique(["decoration"], "The sentence lacks a decoration: add one to the towel.")
    fb = task.parse_feedback(raw, input=INPUT, draft=DRAFT)
    assert json.loads(fb.text)["commonsense"] == "NONE" and fb.fields["not_concepts"] == ["decoration"]


def test_a_verdict_in_words_of_the_input_and_the_draft_is_kept(task):
    verdict = "A towel cannot warm the sun; the sun warms the towel."
    fb = task.parse_feedback(critique([], verdict), input=INPUT, draft=DRAFT)
    assert json.loads(fb.text)["commonsense"] == verdict and fb.done is False
    assert "copied_from_examples" not in fb.fields
    # an example word is no leak where the input itself has it
    fb = task.parse_feedback(
        critique([], "The boat should row on the river."), input="boat, river, row", draft="A boat."
    )
    assert json.loads(fb.text)["commonsense"] == "The boat should row on the river."


def test_the_benchmark_counts_raw_leaks_and_those_the_refiner_would_see(task):
    row = {
        "input": INPUT,
        "draft": DRAFT,
        "raw": critique(["goggles", "towel"], "Add goggles."),
        "examples": ["cut", "goggles", "ski"],  # the old prompts' example words
    }
    assert leaks(row) == {"raw": ["goggles"], "seen": [], "old parser": ["goggles"]}
    row["raw"] = critique([], "The towel should be cut in half.")  # the old prompts' quoted word
    assert leaks(row) == {"raw": ["cut"], "seen": [], "old parser": ["cut"]}
    row["raw"] = critique(["towel"], "NONE")
    assert leaks(row) == {"raw": [], "seen": [], "old parser": []}


@pytest.mark.parametrize(
    ("verdict", "approval"),
    [
        ("The sentence is correct and does not require any improvement.", True),
        ("The sentence makes sense.", True),
        ("A knife cannot cry; the chef cries while cutting the onion.", False),
        ("The sentence is correct but an onion cannot cut.", False),
        ("It is logical, though the knife should be in the chef's hand.", False),
    ],
)
def test_a_verdict_that_approves_in_prose_reads_as_none(task, verdict, approval):
    # read as a problem, "The sentence is correct ..." sent a sound sentence to the refiner
    fb = task.parse_feedback(critique([], verdict), input=INPUT, draft=DRAFT)
    assert (json.loads(fb.text)["commonsense"] == "NONE") is approval
    assert fb.done is approval


def test_a_verdict_that_only_repeats_the_sentence_reads_as_none(task):
    fb = task.parse_feedback(critique([], DRAFT + " "), input=INPUT, draft=DRAFT)
    assert json.loads(fb.text)["commonsense"] == "NONE" and fb.done is True
