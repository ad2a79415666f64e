"""Votes as a verifier for answer tasks (self-consistency, Wang et al. 2022).

A task with an answer (gsm8k: the value ``solution()`` returns) can check a candidate
against the others without the reference: a candidate's vote is the share of all
candidates so far whose answer is the same. A candidate whose own check failed (the program
crashed or returned no number) gets no vote. The findings name the disagreement, so the
critic and the refiner see it ("4 samples return 18, 2 samples return 12"). Pure functions: the
loop keeps the answers, these count them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from ..core.records import Verification


def tally(answers: Sequence[str | None]) -> Counter[str]:
    """How many candidates give each answer (candidates without one are not counted)."""
    return Counter(a for a in answers if a is not None)


def disagreement(counts: Counter[str], total: int) -> str:
    """The vote in words: "4 samples return 18, 1 sample returns 12, 1 gives no answer"."""
    if not counts:
        return f"none of the {total} samples returns an answer"
    parts = [
        f"{n} sample{'s' if n != 1 else ''} return{'' if n != 1 else 's'} {answer}"
        for answer, n in counts.most_common()
    ]
    if len(counts) == 1 and sum(counts.values()) == total:
        parts = [f"all {total} samples return {next(iter(counts))}" if total > 1 else parts[0]]
    missing = total - sum(counts.values())
    if missing:
        parts.append(f"{missing} give{'s' if missing == 1 else ''} no answer")
    return ", ".join(parts)


def with_vote(check: Verification | None, answer: str | None, counts: Counter[str], total: int) -> Verification:
    """A candidate's check with its vote: the score is the share of the ``total`` candidates
    that give its answer (0 when its own check failed or it has no answer); the findings add
    the vote. It passes only when its own check passed and its answer has a strict majority."""
    own_ok = check is None or check.passed is not False
    share = counts[answer] / total if (own_ok and answer is not None and total) else 0.0
    majority = answer is not None and counts[answer] * 2 > total
    findings = "\n".join(t for t in ((check.text if check else ""), f"# Votes: {disagreement(counts, total)}") if t)
    judged = {"judged": check.judged, "judgments": check.judgments} if check is not None else {}
    return Verification(text=findings, passed=own_ok and majority, score=round(share, 6), answer=answer, **judged)


def majority_answer(counts: Counter[str]) -> str | None:
    """The most common answer; a tie goes to the answer seen first (Counter keeps that order)."""
    return counts.most_common(1)[0][0] if counts else None
