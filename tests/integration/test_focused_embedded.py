"""Focused refinement on the default embedded model (Qwen2.5-Coder-1.5B via llama.cpp, issue 45
item 2): a first draft fixed by the fake model fails one check, and one focused repair by the
real model passes it (the lowercase repair, and the word-limit repair with the count measured).
Two short model calls in all: the repair's first try, greedy (repair_samples 1)."""

from __future__ import annotations

import pytest

from selfrefine import FakeBackend, SelfRefine

pytestmark = pytest.mark.integration

DRAFT = (
    "The Lumo desk lamp runs on sunlight. Its panel charges during the day, and its warm LED glows "
    "for up to eight hours at night. It folds flat, weighs under a kilogram, and needs no cable, "
    "so it suits small desks, dorm rooms and camping trips alike."
)  # 46 words, with capitals
REQUEST = "Describe the Lumo solar desk lamp for a shop page."


@pytest.mark.parametrize(
    "check",
    [
        {"type": "case", "letters": "lower"},
        {"type": "count", "unit": "words", "relation": "at most", "n": 30},
    ],
    ids=["lowercase", "word-limit"],
)
def test_a_focused_repair_passes_its_check(embedded, check):
    engine = SelfRefine(
        "chat",
        FakeBackend({"generate": [DRAFT]}),
        refine_model=embedded,
        checks=[check],
        derive_checks=False,
        refine_form="focused",
        repair_samples=1,
        max_iterations=1,
        temperature=0,
        max_tokens=160,
    )
    result = engine.run(REQUEST)
    repaired = result.iterations[1]
    assert repaired.focus is not None and repaired.focus.kept, (repaired.focus, repaired.draft)
    assert result.output == repaired.draft and repaired.verification.passed
    assert [c.role for c in result.calls] == ["generate", "refine"]  # one real call: the repair
