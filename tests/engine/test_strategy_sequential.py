"""``strategy="sequential"`` (engine/drafting/sequential.py) on the fake model: first drafts
one at a time until one passes every check, at most ``samples``; a prompt whose first draft
passes costs one draft (issue 45 item 3)."""

from __future__ import annotations

import pytest

from selfrefine import ConfigError, FakeBackend, SelfRefine

ASK = "Give me three sleep tips. Do not use any commas."  # code reads the comma check: no derivation call
GOOD = "Keep a schedule.\nDim the lights.\nSkip late coffee."
BAD = "Sure, here are tips: keep a schedule, dim the lights."
WORSE = "Sure, here, are, tips."


def run(generated, request=ASK, **options):
    backend = FakeBackend({"generate": generated, "judge": ["A"]}, default='{"issues": []}')
    result = SelfRefine("chat", backend, strategy="sequential", max_iterations=0, **options).run(request)
    return backend, result


def test_drafts_stop_at_the_first_that_passes_every_check():
    backend, result = run([BAD, BAD, GOOD, BAD])
    assert len(backend.prompts("generate")) == 3 and result.output == GOOD
    assert [c.draft for c in result.iterations[0].candidates] == [BAD, BAD, GOOD]


def test_a_first_draft_that_passes_costs_one_draft_and_nothing_else():
    backend, result = run([GOOD, BAD])
    assert [r.role for r in backend.requests] == ["generate"] and result.output == GOOD


def test_a_request_with_no_checks_is_one_draft():
    backend, result = run(["Because of Rayleigh scattering.", "x"], request="Why is the sky blue?")
    assert len(backend.prompts("generate")) == 1 and result.output == "Because of Rayleigh scattering."


def test_no_draft_passes_then_samples_drafts_and_the_best_by_the_checks_is_kept():
    two = ASK + " Write in lowercase letters only."
    mid = "sure, keep a schedule."  # lowercase: passes one of the two checks
    backend, result = run([WORSE, mid, WORSE, WORSE, GOOD.lower()], request=two, samples=4)
    assert len(backend.prompts("generate")) == 4  # never the fifth
    assert result.output == mid
    assert not backend.prompts("judge")  # the checks decided


def test_empty_replies_count_as_samples_asked():
    backend, result = run(["", "", "", "", "", GOOD])
    assert len(backend.prompts("generate")) == 4 and result.error is None


def test_a_focused_round_repairs_the_kept_draft_when_no_sample_passes():
    backend = FakeBackend({"generate": [BAD, BAD], "refine": [GOOD]}, default='{"issues": []}')
    engine = SelfRefine("chat", backend, strategy="sequential", samples=2, max_iterations=2, refine_form="focused")
    result = engine.run(ASK)
    assert result.output == GOOD and result.iterations[-1].focus.kept
    assert len(backend.prompts("generate")) == 2 and len(backend.prompts("refine")) == 1
    assert not [r for r in backend.requests if r.role == "feedback"]  # the checks are the feedback


def test_sequential_needs_sampling():
    with pytest.raises(ConfigError, match="strategy sequential needs sampling"):
        SelfRefine("chat", FakeBackend(default="x"), strategy="sequential", temperature=0)
