"""Sequential sampling + focused repair (issue 45 items 3 and 4) on the fake model:
``strategy="auto"`` draws the first draft in waves and stops at the first that passes every
check (a request the first draft passes costs one draft), then repairs one failed check at a
time; the judge is asked only where the checks tie different texts and its answer can change
what is kept: never when the checks' scores differ, one draft passes, there is one candidate,
the tied drafts are one text, a focused repair is decided, or a round is rejected whatever it
says."""

from __future__ import annotations

import math
from collections import Counter

from selfrefine import FakeBackend, SelfRefine
from selfrefine.backends.base import CompletionRequest
from selfrefine.core.records import RunResult

LOWER = {"type": "case", "letters": "lower"}
NO_COMMA = {"type": "forbidden_chars", "chars": ","}
CHECKS = [LOWER, NO_COMMA]
# phrases the code reads as checks (lowercase, no commas, English), and one only the model reads
REQUEST = (
    "Write one sentence about a cat. Your entire response should be in English, and in all lowercase "
    "letters. Do not use any commas. Make it sound like a pirate said it."
)
SEQUENTIAL = {
    "strategy": "auto",
    "samples": 4,
    "refine_form": "focused",
    "repair_samples": 2,
    "max_iterations": 3,
}


def verdict(p_yes: float) -> dict:
    return {
        "text": "Yes" if p_yes >= 0.5 else "No",
        "top_logprobs": [{"Yes": math.log(p_yes), "No": math.log(1 - p_yes)}],
    }


def judge_or_empty(request: CompletionRequest) -> str | dict:
    """The judge says yes (P 0.6) to every question; any other call left over gets an empty reply."""
    return verdict(0.6) if request.role == "judge" else ""


def model(generate: list[str], refine: list[str] = ()) -> FakeBackend:
    return FakeBackend({"generate": generate, "refine": list(refine)}, default=judge_or_empty)


def calls(result: RunResult) -> Counter:
    """The run's calls by role, a call made for a purpose of its own (the derivation) by that."""
    return Counter(c.purpose or c.role for c in result.calls)


def sequential(backend: FakeBackend, budget: int = 20_000, **options) -> RunResult:
    options = {**SEQUENTIAL, "checks": CHECKS, "derive_checks": False, **options}
    return SelfRefine("chat", backend, max_total_tokens=budget, **options).run(REQUEST)


# --- chat with derived checks, end to end ---------------------------------------------------


def test_a_request_whose_first_draft_passes_costs_one_draft_and_no_judge_or_critique():
    backend = model(["the cat sleeps on the warm mat."])
    result = SelfRefine("chat", backend, max_total_tokens=20_000, derive_checks=True, **SEQUENTIAL).run(REQUEST)
    assert result.output == "the cat sleeps on the warm mat." and result.stop_reason == "verified"
    assert {c.says for c in result.checks} >= {"use only lowercase letters", "use no commas"}
    assert calls(result) == {"generate": 1, "checks": 1}  # the draft and the derivation: no judge, no critique


def test_drafts_that_fail_alike_go_to_a_focused_repair_that_the_budget_pays_for():
    # the derivation's long prompt is not what a repair costs: priced as the round's critique
    # and sample (and a critique priced where none is made), it stopped this run at
    # token_budget before the repair that fits (a repair costs about 150 tokens here)
    backend = model(["The Cat sleeps on the warm mat."] * 4, ["the cat sleeps on the warm mat."])
    result = SelfRefine("chat", backend, max_total_tokens=1_000, derive_checks=True, **SEQUENTIAL).run(REQUEST)
    assert calls(result)["checks"] == 1 and result.calls[0].prompt_tokens > 300  # a derivation with a long prompt
    assert result.output == "the cat sleeps on the warm mat." and result.stop_reason == "verified"
    focus = result.iterations[1].focus
    assert focus is not None and focus.kept and focus.check == "use only lowercase letters"
    # two drafts alike (one text: nothing for the judge), then one repair; no critique
    assert calls(result) == {"checks": 1, "generate": 2, "refine": 1}
    assert result.usage.total_tokens <= 1_000


def test_a_task_files_checks_get_the_same_path_and_no_critique_is_priced_where_none_is_made(tmp_path):
    from selfrefine import load_task

    (tmp_path / "tagline.yaml").write_text(
        "name: tagline\ngenerate: 'Tagline for {{ input }}:'\nfeedback: 'Fix: {{ draft }}'\n"
        "refine: 'Better: {{ draft }}'\nchecks:\n  max_words: 5\n  required_words: [lamp]\n"
    )
    backend = FakeBackend({"generate": ["A bright solar light for every desk"] * 4, "refine": ["A bright solar lamp"]})
    product = "Lumo, " + " ".join(["a desk light"] * 30)  # a long prompt: a critique would cost 100 tokens more
    options = {**SEQUENTIAL, "max_total_tokens": 350}  # 200 for the two drafts; the repair costs about 140
    result = SelfRefine(load_task(tmp_path / "tagline.yaml"), backend, **options).run(product)
    assert result.output == "A bright solar lamp" and result.stop_reason == "verified"  # was: token_budget
    assert calls(result) == {"generate": 2, "refine": 1}  # the drafts alike, then a focused repair, no critique


# --- (a) waves stop at the first passing draft ----------------------------------------------


def test_waves_stop_at_the_first_draft_that_passes_every_check():
    backend = model(["The Cat sleeps.", "the cat sleeps.", "never drawn.", "never drawn."])
    result = sequential(backend)
    assert result.output == "the cat sleeps." and result.stop_reason == "verified"
    assert calls(result) == {"generate": 2}  # a wave of one, then one more: it passes, nothing else is asked
    assert [c.verification.score for c in result.iterations[0].candidates] == [0.5, 1.0]


def test_spread_drafts_widen_and_the_wave_that_holds_a_passing_draft_ends_the_sampling():
    backend = model(["The Cat, sleeps.", "The Cat sleeps.", "the cat sleeps.", "The Dog, sleeps.", "never drawn."])
    result = sequential(backend)
    assert result.output == "the cat sleeps." and result.stop_reason == "verified"
    assert calls(result) == {"generate": 4}  # waves of 1, 1, 2: one passes, no judge, no repair


# --- (b) no judge call where the checks decide ----------------------------------------------


def test_no_judge_when_the_drafts_checks_score_differently():
    backend = model(
        ["The Cat, sleeps.", "The Cat sleeps.", "The Dog, sleeps.", "The Cow, sleeps."], ["the cat sleeps."]
    )
    result = sequential(backend)
    assert [c.verification.score for c in result.iterations[0].candidates] == [0.0, 0.5, 0.0, 0.0]
    assert result.iterations[0].draft == "The Cat sleeps." and result.output == "the cat sleeps."
    assert calls(result) == {"generate": 4, "refine": 1}


def test_no_judge_when_the_tied_drafts_are_one_text():
    backend = model(["The Cat sleeps.", "The  Cat sleeps. "], ["the cat sleeps."])
    result = sequential(backend)
    assert calls(result) == {"generate": 2, "refine": 1} and result.output == "the cat sleeps."


def test_a_lone_draft_among_empty_replies_is_kept_unjudged_and_the_waves_end_at_the_cap():
    # empty replies are no drafts: the waves count the samples drawn, so they end at samples=4
    # (counted by drafts, each next wave was seeded where the last began and ran to the budget)
    backend = model(["The Cat sleeps."], ["the cat sleeps."])
    result = sequential(backend)
    assert calls(result) == {"generate": 4, "refine": 1} and result.output == "the cat sleeps."
    seeds = [r.seed for r in backend.requests if r.role == "generate"]
    assert len(set(seeds)) == 4  # each sample its own seed


def test_the_judge_still_ranks_different_texts_the_checks_tie_and_never_a_focused_repair():
    backend = model(["The Cat sleeps.", "The Dog sleeps."], ["the cat sleeps."])
    result = sequential(backend)
    assert calls(result) == {"generate": 2, "judge": 4, "refine": 1}  # two texts, two aspects each
    roles = [r.role for r in backend.requests]
    assert max(i for i, r in enumerate(roles) if r == "judge") < roles.index("refine")  # (c): checks alone
    assert result.output == "the cat sleeps." and result.iterations[1].focus.kept


def test_a_rejected_focused_repair_is_decided_by_the_checks_without_the_judge():
    backend = model(["The Cat sleeps.", "The Dog sleeps."], ["The Cat, sleeps.", "the cat, sleeps."])
    result = sequential(backend, max_iterations=2)
    assert [it.focus.kept for it in result.iterations[1:]] == [False, False]
    assert calls(result) == {"generate": 2, "judge": 4, "refine": 2}  # the judge on the first tie only


# --- (c) no judge call where its answer cannot change the result ----------------------------

HISTORY = {"strategy": "auto", "samples": 2, "verifier_mode": "verifier", "max_iterations": 1}


def history(backend: FakeBackend) -> RunResult:
    """The paper's refine form under auto: rounds of two samples, ranked and accepted by the checks."""
    return SelfRefine("chat", backend, checks=CHECKS, derive_checks=False, max_total_tokens=20_000, **HISTORY).run(
        REQUEST
    )


def test_no_judge_among_refinements_the_checks_score_below_their_parent():
    backend = model(["the cat sleeps, on the mat.", "The Cat, sleeps."], ["The Dog, sleeps.", "The Cow, sleeps."])
    result = history(backend)
    assert [c.verification.score for c in result.iterations[1].candidates] == [0.0, 0.0]  # below 0.5: rejected
    assert result.iterations[1].accepted is False and result.output == "the cat sleeps, on the mat."
    assert calls(result) == {"generate": 2, "refine": 2}  # was: the judge asked of both texts, 4 calls


def test_no_judge_when_the_kept_refinement_is_its_parents_text():
    backend = model(
        ["the cat sleeps, on the mat.", "The Cat, sleeps."], ["the cat sleeps, on the mat.", "The Dog, sleeps."]
    )
    result = history(backend)
    assert result.iterations[1].draft == result.iterations[0].draft and result.iterations[1].accepted is False
    assert calls(result) == {"generate": 2, "refine": 2}  # was: the parent's text judged, 2 calls


def test_the_judge_still_decides_a_refinement_that_ties_its_parent_with_another_text():
    backend = model(
        ["the cat sleeps, on the mat.", "The Cat, sleeps."], ["the dog sleeps, on the mat.", "The Dog, sleeps."]
    )
    result = history(backend)
    assert calls(result)["judge"] == 4  # parent and refinement, two aspects each
