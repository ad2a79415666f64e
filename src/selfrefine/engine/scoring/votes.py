"""Votes as a verifier for answer tasks (self-consistency, Wang et al. 2022).

A task with an answer (gsm8k: the value ``solution()`` returns) can check a candidate
against the others without the reference: a candidate's vote is the share of all
candidates so far whose answer is the same. A candidate whose own check failed (the program
crashed or returned no number) gets no vote. The findings name the disagreement, so the
critic and the refiner see it ("4 samples return 18, 2 samples return 12"). Pure functions: the
loop keeps the answers, these count them.

When the samples are written more than one way (a task's ``ways``: gsm8k's programs and
step-by-step answers), each vote is weighted by how often its way agrees with the others
(:func:`way_weights`): an answer two ways reach outweighs one that only one way repeats.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from ...core.records import Verification


def tally(answers: Sequence[str | None], weights: Sequence[float] | None = None) -> Counter[str]:
    """How many candidates give each answer (candidates without one are not counted); with
    ``weights``, each candidate's vote counts its weight."""
    if weights is None:
        return Counter(a for a in answers if a is not None)
    counts: Counter[str] = Counter()
    for answer, weight in zip(answers, weights, strict=True):
        if answer is not None:
            counts[answer] += weight
    return counts


def way_weights(ways: Sequence[str | None], answers: Sequence[str | None]) -> list[float]:
    """Each candidate's vote weight: ``(1 + a) / 2``, where ``a`` is the share of its way's
    answers that some candidate written another way also gives (1 for all when the
    candidates are written one way, or when no way answers yet)."""
    kinds = {w for w in ways}
    if len(kinds) < 2:
        return [1.0] * len(ways)
    agree: dict[str | None, float] = {}
    for way in kinds:
        own = [a for w, a in zip(ways, answers) if w == way and a is not None]
        others = {a for w, a in zip(ways, answers) if w != way and a is not None}
        agree[way] = sum(a in others for a in own) / len(own) if own and others else 1.0
    return [(1 + agree[w]) / 2 for w in ways]


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


def with_vote(
    check: Verification | None, answer: str | None, counts: Counter[str], total: float, said: str | None = None
) -> Verification:
    """A candidate's check with its vote: the score is the share of the ``total`` votes
    (weighted, :func:`way_weights`) that give its answer (0 when its own check failed or it
    has no answer); the findings add the vote in words (``said``; default from ``counts``).
    It passes only when its own check passed and its answer has a strict majority."""
    own_ok = check is None or check.passed is not False
    share = counts[answer] / total if (own_ok and answer is not None and total) else 0.0
    majority = answer is not None and counts[answer] * 2 > total
    said = said if said is not None else disagreement(counts, int(total))
    findings = "\n".join(t for t in ((check.text if check else ""), f"# Votes: {said}") if t)
    judged = {"judged": check.judged, "judgments": check.judgments} if check is not None else {}
    found = {"findings": check.findings} if check is not None else {}  # a focused repair acts on them
    return Verification(
        text=findings, passed=own_ok and majority, score=round(share, 6), answer=answer, **judged, **found
    )


def majority_answer(counts: Counter[str]) -> str | None:
    """The most common answer; a tie goes to the answer seen first (Counter keeps that order)."""
    return counts.most_common(1)[0][0] if counts else None


def rivals_text(answer: str | None, others: Sequence[tuple[str, str]], said: str) -> str:
    """What a refinement of a disputed draft is shown: the vote in words (``said``) and one
    draft for each other answer (``others``: (answer, draft)), then the question to settle."""
    if not others:
        return ""
    shown = "\n".join(f"# A sample that returns {a}:\n{draft}" for a, draft in others)
    mine = f"this draft returns {answer}" if answer is not None else "this draft gives no answer"
    return (
        f"# The samples disagree ({said}); {mine}.\n{shown}\n"
        "# Which reading of the question is right? Check each quantity against the question, "
        "then solve it that way."
    )
