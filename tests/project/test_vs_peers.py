"""benchmarks/vs_peers.py's own logic, without DSPy or a model: the rewards DSPy optimises
must be our tasks' verifiers, and crashed examples must count as 0 and be counted."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

from _peers import Record, commongen_reward, gsm8k_reward, normalise, ratio, summarise

from selfrefine.tasks import get_task

CONCEPTS = "kitchen, knife, onion, cut, cry"


@pytest.mark.parametrize(
    "reply",
    [
        "The chef cried while cutting an onion with a knife in the kitchen.",
        "Sentence: In the kitchen she cut the onion.",
        "A knife lay in the kitchen.\nHe cut an onion and cried.",  # only the first line counts
        "",
    ],
)
def test_commongen_reward_is_the_task_verifier(reply: str) -> None:
    task = get_task("commongen")
    draft = normalise("commongen", reply)
    expected = task.verify(CONCEPTS, draft).score if draft else 0.0
    assert commongen_reward({"concepts": CONCEPTS}, SimpleNamespace(sentence=reply)) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("reply", "passes"),
    [
        ("```python\ndef solution():\n    pens = 4\n    return pens * 3\n```\nThe answer is 12.", True),
        ("def solution():\n    return 1 / 0", False),
        ("def solution():\n    return 'twelve'", False),
        ("The answer is 12.", False),
    ],
)
def test_gsm8k_reward_is_the_task_verifier(reply: str, passes: bool) -> None:
    task = get_task("gsm8k")
    reward = gsm8k_reward({"question": "?"}, SimpleNamespace(program=reply))
    assert reward == (1.0 if passes else 0.0)
    program = normalise("gsm8k", reply)
    if program:
        assert task.verify("?", program).score == reward


def rec(id: str, system: str, metric: float, tokens: int, seconds: float, crashed: bool = False) -> Record:
    return Record(
        id=id,
        task="commongen",
        system=system,
        metric=metric,
        one_step_metric=metric,
        crashed=crashed,
        error="boom" if crashed else None,
        prompt_tokens=tokens,
        seconds=seconds,
        output="" if crashed else "x y",
    )


def test_crashed_examples_count_as_zero_and_are_counted() -> None:
    s = summarise(
        "commongen",
        "dspy-refine",
        [rec("a", "dspy-refine", 1.0, 100, 10), rec("b", "dspy-refine", 0.0, 50, 5, crashed=True)],
    )
    assert s.n == 2 and s.crashed == 1 and s.errors == 0
    assert s.returned is not None and s.returned.estimate == pytest.approx(0.5)
    assert s.tokens == pytest.approx(75) and s.words == pytest.approx(1)


def test_ratio_uses_only_examples_both_systems_finished() -> None:
    ours = [rec("a", "selfrefine-best", 0.5, 10, 1), rec("b", "selfrefine-best", 1.0, 10, 1)]
    theirs = [rec("a", "dspy-refine", 1.0, 100, 4), rec("c", "dspy-refine", 0.0, 999, 99)]
    r = ratio("commongen", ours, theirs)
    assert (r.ours, r.theirs, r.n) == ("selfrefine-best", "dspy-refine", 1)
    assert r.tokens == pytest.approx(0.1) and r.seconds == pytest.approx(0.25) and r.metric == pytest.approx(0.5)
    assert r.diff is not None and r.diff.estimate == pytest.approx(-0.5)


def test_commongen_first_sentence_coverage_ignores_later_sentences() -> None:
    from selfrefine.evaluation.datasets import Example

    example = Example(id="a", input=CONCEPTS)
    paragraph = "The chef cut an onion. In the kitchen the knife made him cry."
    s = summarise(
        "commongen",
        "dspy-predict",
        [rec("a", "dspy-predict", 1.0, 1, 1).model_copy(update={"output": paragraph})],
        [example],
    )
    assert s.first_sentence is not None and s.first_sentence.estimate == pytest.approx(2 / 5)  # cut, onion
