"""Judgments from token probabilities (engine/scoring/questions.py), on a stub caller whose replies
carry scripted top alternatives: P(yes), a rating's expected value, both orders of a
comparison with a flip as a tie, and the sampled fallback where no probabilities come."""

from __future__ import annotations

import asyncio
import math

import pytest

from selfrefine.backends.base import CompletionRequest, CompletionResponse, TokenChoices
from selfrefine.core.errors import ParseError
from selfrefine.core.records import CallRecord
from selfrefine.engine.scoring.questions import Question, Questions


class StubCaller:
    """Answers every request with ``reply(request)`` -> (text, {token: probability} | None)."""

    def __init__(self, reply) -> None:
        self.reply, self.requests = reply, []

    async def call(self, role, t, request: CompletionRequest, samples: int = 1, *, stream: bool = False):
        out = []
        for i in range(samples):
            self.requests.append(request)
            text, top = self.reply(request, i)
            steps = None
            if top is not None and request.top_logprobs:
                logs = {tok: math.log(p) for tok, p in top.items()}
                steps = [TokenChoices(token=text, logprob=logs.get(text, -30.0), top=logs)]
            call = CallRecord(role=role, iteration=t, attempt=1, model="stub")
            out.append((CompletionResponse(text=text, top_logprobs=steps), call))
        return out

    def tokens_left(self) -> float:
        return float("inf")  # no token budget


def judge(reply) -> tuple[Questions, StubCaller]:
    caller = StubCaller(reply)
    return Questions(caller), caller  # type: ignore[arg-type]


def test_yes_no_is_the_probability_of_yes_from_one_token():
    j, caller = judge(lambda r, i: ("Yes", {"Yes": 0.6, " yes": 0.1, "No": 0.1, "Maybe": 0.2}))
    got = asyncio.run(j.ask(0, Question("sense", "Does it make sense?")))
    assert got.method == "probabilities" and got.samples == 1
    assert got.score == pytest.approx(0.7 / 0.8) and got.answers["No"] == pytest.approx(0.1 / 0.8)
    [request] = caller.requests
    assert (request.max_tokens, request.temperature, request.top_logprobs) == (1, 0.0, 20)


def test_a_rating_is_its_expected_value():
    j, _ = judge(lambda r, i: ("4", {"3": 0.25, "4": 0.5, "5": 0.25}))
    got = asyncio.run(j.ask(0, Question.rating("engaging", "Rate 1-5.")))
    assert got.score == pytest.approx(4.0) and got.answers["1"] == 0.0


def test_without_probabilities_the_share_of_sampled_verdicts_is_the_judgment_and_says_so():
    j, caller = judge(lambda r, i: (["Yes", "No.", "yes", "Hmm", "Yes"][i], None))
    got = asyncio.run(j.ask(0, Question("sense", "Does it make sense?")))
    assert got.method == "sampled" and got.samples == 5
    assert got.score == pytest.approx(3 / 4)  # the reply that answers neither is no vote
    assert "returned no token probabilities" in got.note and "4 of 5 sampled verdicts" in got.note
    sampled = caller.requests[-1]
    assert (sampled.temperature, sampled.top_logprobs) == (1.0, None)


def test_no_readable_verdict_is_an_error_not_a_guess():
    j, _ = judge(lambda r, i: ("Perhaps", None))
    with pytest.raises(ParseError, match="answered none of Yes/No"):
        asyncio.run(j.ask(0, Question("sense", "?")))


def test_a_comparison_averages_both_orders():
    # X is shown first in the first prompt, second in the other; the judge prefers X both times
    j, caller = judge(
        lambda r, i: ("A", {"A": 0.8, "B": 0.2}) if "X first" in r.prompt else ("B", {"A": 0.3, "B": 0.7})
    )
    got = asyncio.run(j.compare(0, "sense", "X first", "Y first"))
    assert got.score == pytest.approx((0.8 + 0.7) / 2) and got.note == ""
    assert [r.prompt for r in caller.requests] == ["X first", "Y first"]


def test_a_verdict_that_flips_with_the_order_is_a_tie():
    j, _ = judge(lambda r, i: ("A", {"A": 0.9, "B": 0.1}))  # always the first shown
    got = asyncio.run(j.compare(0, "sense", "X first", "Y first"))
    assert got.score == 0.5 and "flipped with the order" in got.note


@pytest.mark.integration
def test_the_default_model_judges_the_demos_crying_knife_below_a_sensible_sentence(embedded):
    """Both orders, on the default embedded model: the README demo's old answer against a
    sentence with the same concepts that a reader accepts."""
    from selfrefine.backends.roles import RoleBackends
    from selfrefine.core.config import RefineConfig
    from selfrefine.engine.calls import Caller, CallLog
    from selfrefine.engine.settings import CallPolicy

    nonsense = "The chef chopped an onion, and the knife cried loudly as it was cut, causing chaos in the kitchen."
    sensible = "In the kitchen, the chef used a knife to cut the onion, while the family members cried about the mess."
    ask = "Which sentence describes something that makes more sense and could really happen?\nA: {}\nB: {}\nAnswer A or B."
    caller = Caller(CallPolicy.of(RefineConfig()), RoleBackends.of(embedded), CallLog())
    got = asyncio.run(
        Questions(caller).compare(0, "sense", ask.format(sensible, nonsense), ask.format(nonsense, sensible))
    )
    assert got.method == "probabilities" and got.score > 0.5, got
    assert [c.completion_tokens for c in caller.log.calls] == [1, 1]  # one decoded token a judgment
