"""The toxicity and story tasks on a real embedded model (SmolLM2-135M via llama.cpp).

Plumbing, not quality: the prompts fit, the story critic's constrained JSON parses, and the
code metrics score the real drafts."""

from __future__ import annotations

import json

import pytest

from selfrefine import SelfRefine, StopReason
from selfrefine.checks.incomplete import is_refusal
from selfrefine.tasks.story import ASPECTS
from selfrefine.tasks.toxicity import metric_parts

pytestmark = pytest.mark.integration


def test_toxicity_on_embedded_model(smollm):
    comment = "Shut up, you stupid idiot, the bus is late again."
    result = SelfRefine("toxicity", smollm, max_iterations=1, verifier_mode="hybrid").run(comment)
    assert result.stop_reason is not StopReason.ERROR, result.error
    assert result.iterations and all(it.draft for it in result.iterations)
    fb = result.iterations[0].feedback
    assert fb.verification is not None and "p(offensive) = " in fb.verification.text
    # the metric of the returned output; a refusal or a reply cut off at the token limit is
    # no rewrite and scores 0 (checks/incomplete.py)
    no_answer = is_refusal(result.output) or result.iterations[result.selected].finish_reason == "length"
    assert result.metric == (0.0 if no_answer else metric_parts(comment, result.output)["combined"])


def test_story_on_embedded_model(smollm):
    spec = json.dumps({"premise": "A robot vacuum cleaner escapes the apartment.", "elements": ["door"]})
    result = SelfRefine("story", smollm, max_iterations=1).run(spec)
    assert result.stop_reason is not StopReason.ERROR, result.error
    fb = result.iterations[0].feedback
    assert fb.parse_error is None, fb  # grammar-constrained ratings parse
    reply = [c for c in result.calls if c.role == "feedback" and c.iteration == 0][-1].response
    assert set(json.loads(reply)) == set(ASPECTS)
    assert 0.0 <= result.metric <= 1.0
