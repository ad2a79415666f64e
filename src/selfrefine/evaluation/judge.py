"""A pairwise judge: which of two outputs for the same input is better?

The paper scores sentiment reversal, dialogue and acronyms by preference (human or GPT-4)
of the Self-Refine output over the one-step output. This judge runs on any selfrefine
backend. LLM judges favour whichever output they see first (or second), so every
comparison is asked twice, once in each order; a sample wins only if it wins both orders,
anything else is a tie. A judge that always answers "1" therefore yields only ties. The
order asked first is drawn from a ``random.Random`` seeded by the seed and the comparison
itself, so results are reproducible even when many examples are judged concurrently.

Verdicts are requested as ``{"winner": "1" | "2" | "tie"}`` (constrained decoding where the
backend supports it); plain answers such as "Output (2)" or "tie" are parsed too. An
unparsable verdict counts as a tie and its error is recorded.
"""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel, Field

from ..backends.base import Backend, CompletionRequest
from ..core.errors import ConfigError
from ..tasks.parsing import json_object

Winner = Literal["a", "b", "tie"]
Verdict = Literal["1", "2", "tie"]

VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"winner": {"type": "string", "enum": ["1", "2", "tie"]}},
    "required": ["winner"],
}
DEFAULT_CRITERIA = "Which output is the better answer to the input: more correct, relevant, specific and fluent?"

_PROMPT = """Compare two outputs written for the same input.
Criteria: {criteria}

Input:
{input}

Output 1:
{first}

Output 2:
{second}

Which output is better? Answer with {{"winner": "1"}}, {{"winner": "2"}} or {{"winner": "tie"}}."""

_OUTPUT_N = re.compile(r"\boutput\s*\(?\s*([12ab])\s*\)?", re.I)
_BARE = re.compile(r"^\W*([12]|tie)\W*$", re.I)


class Comparison(BaseModel):
    """One comparison: the winner after both orders, and what each order said."""

    winner: Winner
    votes: list[str] = Field(default_factory=list)  # raw verdicts per order: "1" / "2" / "tie" / "?"
    preferred: list[Winner] = Field(default_factory=list)  # each vote mapped to 'a'/'b'/'tie'
    orders: list[str] = Field(default_factory=list)  # "ab": a shown as output 1; "ba": swapped
    raw: list[str] = Field(default_factory=list)  # the judge's texts, in asking order
    parse_errors: list[str | None] = Field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0


def parse_verdict(text: str) -> Verdict:
    """'1', '2' or 'tie' from a judge reply; ValueError when it names no single verdict."""
    raw = text.strip()
    data = json_object(raw)
    if data is not None and "winner" in data:
        value = str(data["winner"]).strip().lower()
        value = {"a": "1", "b": "2", "output 1": "1", "output 2": "2"}.get(value, value)
        if value in ("1", "2", "tie"):
            return value  # type: ignore[return-value]
        raise ValueError(f"judge JSON names an unknown winner {data['winner']!r}")
    bare = _BARE.match(raw)
    if bare:
        return bare.group(1).lower()  # type: ignore[return-value]
    named = {({"a": "1", "b": "2"}.get(m.lower(), m)) for m in _OUTPUT_N.findall(raw)}
    if len(named) == 1:
        return named.pop()  # type: ignore[return-value]
    if not named and re.search(r"\b(tie|equal(ly)?|same)\b", raw, re.I):
        return "tie"
    raise ValueError(f"no single verdict in judge reply {raw[:80]!r}")


class PairwiseJudge:
    """Position-debiased pairwise preference between two outputs, on any backend."""

    def __init__(
        self,
        backend: Backend,
        *,
        seed: int = 0,
        criteria: str = DEFAULT_CRITERIA,
        max_tokens: int = 20,
        temperature: float = 0.0,
        system: str | None = None,
        constrained: bool = True,
    ) -> None:
        if not criteria or not criteria.strip():
            raise ConfigError("the judge needs criteria, e.g. 'Which review is more positive?'")
        self.backend = backend
        self.seed = seed
        self.criteria = criteria.strip()
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.system = system
        self.constrained = constrained

    def prompt(self, input: str, first: str, second: str) -> str:
        return _PROMPT.format(criteria=self.criteria, input=input.strip(), first=first.strip(), second=second.strip())

    async def acompare(self, input: str, a: str, b: str) -> Comparison:
        """Ask in both orders (which first: seeded coin); 'a'/'b' only if both orders agree."""
        # the coin is seeded by the comparison itself, so results do not depend on the
        # order in which concurrent examples happen to reach the judge
        coin = random.Random(f"{self.seed}\x00{input}\x00{a}\x00{b}").random()
        orders = ["ab", "ba"] if coin < 0.5 else ["ba", "ab"]
        result = Comparison(winner="tie", orders=orders)
        for order in orders:  # sequential: keeps scripted and cached backends deterministic
            first, second = (a, b) if order == "ab" else (b, a)
            response = await self.backend.complete(
                CompletionRequest(
                    role="feedback",
                    prompt=self.prompt(input, first, second),
                    system=self.system,
                    max_tokens=self.max_tokens,
                    temperature=self.temperature,
                    seed=self.seed,
                    json_schema=VERDICT_SCHEMA if self.constrained else None,
                )
            )
            result.raw.append(response.text)
            result.prompt_tokens += response.prompt_tokens
            result.completion_tokens += response.completion_tokens
            try:
                verdict: str = parse_verdict(response.text)
                result.parse_errors.append(None)
            except ValueError as exc:
                verdict = "?"
                result.parse_errors.append(str(exc))
            result.votes.append(verdict)
            result.preferred.append(_to_sample(verdict, order))
        if result.preferred[0] == result.preferred[1] and result.preferred[0] != "tie":
            result.winner = result.preferred[0]
        return result

    def compare(self, input: str, a: str, b: str) -> Comparison:
        """Sync wrapper around :meth:`acompare` (not usable inside a running event loop)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.acompare(input, a, b))
        raise ConfigError("PairwiseJudge.compare() was called inside an event loop; use `await acompare()`")


def _to_sample(verdict: str, order: str) -> Winner:
    """Map a positional verdict ('1'/'2') back to the sample ('a'/'b') shown there."""
    if verdict not in ("1", "2"):
        return "tie"
    shown_first = order[0]
    if verdict == "1":
        return shown_first  # type: ignore[return-value]
    return "b" if shown_first == "a" else "a"


class Preference(BaseModel):
    """Shares of comparisons that the Self-Refine output ('b') wins, ties and loses against
    the one-step output ('a'), and how many comparisons there were."""

    win: float = 0.0
    tie: float = 0.0
    loss: float = 0.0
    n: int = 0

    def __str__(self) -> str:
        return f"win {self.win:.2f} / tie {self.tie:.2f} / loss {self.loss:.2f} (n={self.n})"


def preference_rate(results: Iterable[Comparison]) -> Preference:
    """Pass the one-step output as ``a`` and the Self-Refine output as ``b``: ``win`` is then
    the paper's "Self-Refine preferred" rate."""
    winners = [r.winner for r in results]
    n = len(winners)
    if n == 0:
        return Preference()
    return Preference(win=winners.count("b") / n, tie=winners.count("tie") / n, loss=winners.count("a") / n, n=n)
