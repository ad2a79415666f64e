"""The pairwise judge: both orders, seeded order, tie rule, bias cancellation, parsing."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from selfrefine.backends.fake import FakeBackend
from selfrefine.evaluation.judge import (
    VERDICT_SCHEMA,
    Comparison,
    PairwiseJudge,
    parse_verdict,
    preference_rate,
)

ONE, TWO, TIE = (json.dumps({"winner": w}) for w in ("1", "2", "tie"))


def shown(prompt: str) -> tuple[str, str]:
    first = re.search(r"Output 1:\n(.*)\n\nOutput 2:", prompt, re.S).group(1)
    second = re.search(r"Output 2:\n(.*)\n\nWhich", prompt, re.S).group(1)
    return first, second


def fair(request) -> str:
    """A judge without position bias: prefers whichever output says GOOD."""
    first, second = shown(request.prompt)
    return ONE if "GOOD" in first else TWO if "GOOD" in second else TIE


def test_asks_both_orders_with_schema_on_feedback_role():
    backend = FakeBackend(default=fair)
    result = PairwiseJudge(backend, seed=3, criteria="Which is better?").compare("in", "bad", "GOOD")
    assert result.winner == "b"
    assert len(backend.requests) == 2 and sorted(result.orders) == ["ab", "ba"]
    assert [shown(r.prompt) for r in backend.requests] == [
        ("bad", "GOOD") if o == "ab" else ("GOOD", "bad") for o in result.orders
    ]
    assert all(r.role == "feedback" and r.json_schema == VERDICT_SCHEMA and r.seed == 3 for r in backend.requests)
    assert "Criteria: Which is better?" in backend.requests[0].prompt
    assert result.votes in (["1", "2"], ["2", "1"]) and result.preferred == ["b", "b"]
    assert result.parse_errors == [None, None] and result.prompt_tokens > 0


def test_first_order_is_seeded_per_comparison_and_varies():
    def orders(seed: int) -> list[str]:
        judge = PairwiseJudge(FakeBackend(default=TIE), seed=seed, criteria="c")
        return [judge.compare(f"i{k}", "x", "y").orders[0] for k in range(12)]

    assert orders(0) == orders(0)
    assert set(orders(0)) == {"ab", "ba"}  # both orders come first sometimes
    judge = PairwiseJudge(FakeBackend(default=TIE), seed=0, criteria="c")
    again = [judge.compare(f"i{k}", "x", "y").orders[0] for k in reversed(range(12))]
    assert again[::-1] == orders(0)  # independent of the order comparisons are made in


def test_position_biased_judge_yields_only_ties():
    for verdict in (ONE, TWO):
        judge = PairwiseJudge(FakeBackend(default=verdict), seed=1, criteria="c")
        results = [judge.compare("i", "x", "GOOD") for _ in range(6)]
        assert {r.winner for r in results} == {"tie"}
        assert all(sorted(r.preferred) == ["a", "b"] for r in results)


def test_split_or_tied_votes_are_ties_and_a_can_win():
    judge = PairwiseJudge(FakeBackend(default=fair), criteria="c")
    assert judge.compare("i", "GOOD", "bad").winner == "a"
    mixed = PairwiseJudge(FakeBackend([TIE, ONE]), criteria="c").compare("i", "x", "y")
    assert mixed.winner == "tie" and mixed.votes == ["tie", "1"]


def test_unparsable_verdict_is_a_recorded_tie():
    result = PairwiseJudge(FakeBackend(["I like both of them, kind of.", ONE]), criteria="c").compare("i", "x", "y")
    assert result.winner == "tie" and result.votes[0] == "?" and result.preferred[0] == "tie"
    assert "no single verdict" in result.parse_errors[0] and result.parse_errors[1] is None
    assert result.raw[0] == "I like both of them, kind of."


@pytest.mark.parametrize(
    "text, verdict",
    [
        ('{"winner": "2"}', "2"),
        ('Answer: {"winner": 1}', "1"),
        ('{"winner": "tie"}', "tie"),
        ("2", "2"),
        ("Tie.", "tie"),
        ("Output (1) is better.", "1"),
        ("Output (b)", "2"),
        ("I prefer Output 2 because it is specific.", "2"),
        ("Both are equally good.", "tie"),
    ],
)
def test_parse_verdict_forms(text, verdict):
    assert parse_verdict(text) == verdict


@pytest.mark.parametrize("text", ["", "Output 1 is fine but Output 2 is better", '{"winner": "3"}', "hmm"])
def test_parse_verdict_rejects_ambiguous(text):
    with pytest.raises(ValueError):
        parse_verdict(text)


def test_async_api_and_sync_guard():
    judge = PairwiseJudge(FakeBackend(default=fair), criteria="c")

    async def inside():
        first = await judge.acompare("i", "bad", "GOOD")
        with pytest.raises(Exception, match="acompare"):
            judge.compare("i", "a", "b")
        return first

    assert asyncio.run(inside()).winner == "b"


def test_preference_rate_shares():
    results = [Comparison(winner=w) for w in ("b", "b", "tie", "a")]
    assert preference_rate(results).model_dump() == {"win": 0.5, "tie": 0.25, "loss": 0.25, "n": 4}
    assert preference_rate([]).model_dump() == {"win": 0.0, "tie": 0.0, "loss": 0.0, "n": 0}


def test_empty_criteria_rejected():
    with pytest.raises(Exception, match="criteria"):
        PairwiseJudge(FakeBackend(default=TIE), criteria="  ")


@pytest.mark.integration
def test_judge_on_embedded_model(smollm):
    judge = PairwiseJudge(smollm, seed=0, criteria="Which review is more positive?")
    result = judge.compare(
        "Rewrite as positive: The room was dirty.",
        "The room was dirty and smelly.",
        "The room was spotless and lovely.",
    )
    assert result.winner in ("a", "b", "tie") and len(result.votes) == 2 and len(result.raw) == 2
    assert result.parse_errors == [None, None], result.raw  # constrained decoding parses
    assert result.prompt_tokens > 0 and result.completion_tokens > 0
