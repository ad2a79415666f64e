"""What a model's token probabilities say about a closed question's answer.

A judgment asks a question whose answer is one token ("Yes"/"No", a rating "1".."5", "A"/"B")
and reads the probabilities of the answers at the first generated token
(:attr:`~.base.CompletionResponse.top_logprobs`) instead of the one answer sampled.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Sequence

from .base import TokenChoices


def answer_key(text: str) -> str:
    """A token or an answer as it is compared: without surrounding whitespace and
    punctuation, case-folded (" Yes", "YES", "yes." -> "yes")."""
    text = text.strip()
    start, end = 0, len(text)
    while start < end and unicodedata.category(text[start]).startswith("P"):
        start += 1
    while end > start and unicodedata.category(text[end - 1]).startswith("P"):
        end -= 1
    return text[start:end].strip().casefold()


def answer_probabilities(choices: TokenChoices, answers: Sequence[str]) -> dict[str, float] | None:
    """The probability of each answer at this token, normalised over the answers found
    among its alternatives (P(Yes) / (P(Yes) + P(No))); an answer not found gets 0.

    Several alternatives that read as the same answer (" Yes", "yes", "YES") add up. None
    when no answer is among the alternatives, or all that are have probability 0: nothing
    to normalise, so no verdict (the caller falls back, e.g. to sampled verdicts)."""
    keys = [answer_key(a) for a in answers]
    if not keys or "" in keys or len(set(keys)) != len(keys):
        raise ValueError(f"answers must be distinct, non-empty words, got {list(answers)!r}")
    alternatives = dict(choices.top)
    alternatives.setdefault(choices.token, choices.logprob)
    mass = dict.fromkeys(keys, 0.0)
    found = False
    for token, logprob in alternatives.items():
        key = answer_key(token)
        if key in mass and not math.isnan(logprob):
            mass[key] += math.exp(min(logprob, 0.0))
            found = True
    total = sum(mass.values())
    if not found or total <= 0.0:
        return None
    return {answer: mass[key] / total for answer, key in zip(answers, keys, strict=True)}
