"""The extend form of ``refine_form="by_kind"`` (engine/focused.py ``EXTEND``) on the fake model:
a draft too short for its count is continued, not rewritten: the prompt shows the draft and asks
for what follows its end, the reply is appended, and the result is judged as any repair is."""

from __future__ import annotations

import pytest

from selfrefine import FakeBackend, SelfRefine
from selfrefine.checks.instructions import parse_checks

WORDS = {"type": "count", "unit": "words", "relation": "at least", "n": 12}
ENDS = {"type": "ends_with", "phrase": "Bye."}
DRAFT = "Cats sleep a lot. Bye."  # 5 words


def engine(model: FakeBackend, checks: list[dict]) -> SelfRefine:
    return SelfRefine(
        "chat", model, checks=checks, derive_checks=False, refine_form="by_kind", repair_samples=1, max_iterations=2
    )


def test_a_short_draft_is_continued_and_the_continuation_appended():
    more = "They also purr when they are happy and warm in the sun."
    model = FakeBackend({"generate": ["Cats sleep a lot."], "refine": [more]})
    result = engine(model, [WORDS]).run("Tell me about cats in at least 12 words.")
    [prompt] = [r.prompt for r in model.requests if r.role == "refine"]
    assert "Reply so far:\nCats sleep a lot." in prompt
    assert "write at least 9 more words" in prompt  # 8 missing, and a tenth more as margin
    focus = result.iterations[1].focus
    assert focus is not None and focus.kept and (focus.form, focus.kind) == ("extend", "count")
    assert result.output == f"Cats sleep a lot.\n\n{more}"


def test_a_continuation_that_breaks_a_passing_check_is_rejected():
    model = FakeBackend({"generate": [DRAFT], "refine": ["They purr and play and nap all afternoon long."]})
    result = engine(model, [WORDS, ENDS]).run("About cats, at least 12 words, ending with Bye.")
    focus = result.iterations[1].focus
    assert focus is not None and focus.form == "extend" and focus.fixed and not focus.kept
    assert focus.why == "it breaks a check that passed: end with the phrase 'Bye.', with nothing after it"
    assert result.output == DRAFT  # never worse by the same checks


def test_a_continuation_cut_at_the_token_limit_ends_at_its_last_whole_sentence():
    # the fake model counts a word a token: 10 tokens cut the reply mid-sentence ("length")
    cut = "They purr when warm. They also chase small mice around the old house all day."
    model = FakeBackend({"generate": ["Cats sleep a lot."], "refine": [cut]})
    checks = [{**WORDS, "n": 8}]
    engine = SelfRefine(
        "chat", model, checks=checks, derive_checks=False, refine_form="by_kind", repair_samples=1,
        max_iterations=1, max_tokens=10,
    )  # fmt: skip
    result = engine.run("Cats, at least 8 words.")
    assert result.calls[-1].finish_reason == "length"  # the call says it was cut
    repaired = result.iterations[1]
    assert repaired.draft == "Cats sleep a lot.\n\nThey purr when warm." and repaired.focus.kept
    assert result.output == repaired.draft  # whole: not demoted as a reply cut off


def test_an_empty_continuation_changes_nothing():
    model = FakeBackend({"generate": ["Cats sleep a lot."], "refine": ["  "] * 3})  # the parse retries too
    result = engine(model, [WORDS]).run("Cats, at least 12 words.")
    focus = result.iterations[1].focus
    assert focus is not None and not focus.kept and focus.why == "the repair changed nothing"
    assert result.output == "Cats sleep a lot."


@pytest.mark.parametrize(
    ("check", "text", "extend"),
    [
        (WORDS, "one two three", "at least 10 more words"),
        ({**WORDS, "relation": "exactly"}, "one two three", "at least 9 more words"),
        (
            {"type": "count", "unit": "sentences", "relation": "at least", "n": 3},
            "One. Two.",
            "at least 1 more sentence",
        ),
        ({**WORDS, "relation": "at most"}, "one two three", None),
        (WORDS, " ".join(["w"] * 12), None),
        ({"type": "count", "unit": "bullets", "relation": "at least", "n": 3}, "* a", None),
    ],
    ids=["at-least", "exactly", "sentences", "at-most", "enough", "bullets"],
)
def test_only_a_draft_too_short_in_words_or_sentences_is_continued(check, text, extend):
    [parsed] = parse_checks([check])
    assert parsed.extension(text) == extend
