"""The one ranking rule: how two drafts (or samples) compare, and when a refinement
replaces the draft it refined.

A draft ranks by its verifier score (the code checks), then by the task's judge (where it was
asked: :mod:`.judge`), then by the critic: done before not done, then the critic's score.
A missing score of any kind ranks lowest, everywhere (a step's best sample, the returned
draft, whether a refinement fell below its parent); lower still, a draft whose check failed
it without a score (an echo of the request on a task without a verifier: :mod:`.incomplete`).
Among equals, the earlier draft wins: a refinement that adds nothing measurable never
replaces what it refined, and judged scores closer than ``MARGIN`` are equal when a
refinement meets its parent. The reference answer never enters.
"""

from __future__ import annotations

import sys

from ...core.records import Feedback, Iteration, Verification

LOWEST = float("-inf")
UNSCORED = -sys.float_info.max  # a draft without a verifier score: below every scored draft
MARGIN = 0.05  # judged scores closer than this are a tie between a refinement and its parent


def score(check: Verification | None) -> float:
    """A verifier score; a missing one ranks below every score, and a check that failed the
    draft without scoring it lower still (:data:`LOWEST`)."""
    if check is None or check.score is None:
        return LOWEST if check is not None and check.passed is False else UNSCORED
    return check.score


def judged(check: Verification | None) -> float:
    """The judge's score of a draft; unjudged ranks lowest."""
    return check.judged if check is not None and check.judged is not None else LOWEST


def judged_diff(new: Verification | None, old: Verification | None) -> int:
    """+1 / -1 when the judge scores ``new`` more than MARGIN above / below ``old``; 0 for a
    tie, or when either was not judged."""
    a, b = judged(new), judged(old)
    if LOWEST in (a, b) or abs(a - b) <= MARGIN:
        return 0
    return 1 if a > b else -1


def critic_rank(feedback: Feedback | None) -> tuple[bool, float]:
    """How the critic ranks a draft: done first, then its score (unknown: lowest)."""
    if feedback is None:
        return (False, LOWEST)
    return (feedback.done is True, feedback.total if feedback.total is not None else LOWEST)


def rank(check: Verification | None, feedback: Feedback | None) -> tuple[float, float, bool, float]:
    """A draft's rank: its verifier score, the judge's, then the critic's (higher is better)."""
    return (score(check), judged(check), *critic_rank(feedback))


def best_iteration(iterations: list[Iteration]) -> Iteration:
    """The highest-ranked draft; among equals, the earlier. A draft the judge scores within
    MARGIN of the best, on the same verifier score, is its equal: the earliest such is returned."""
    top = max(iterations, key=lambda it: (*rank(it.verification, it.feedback), -it.index))
    if judged(top.verification) == LOWEST:
        return top
    for it in sorted(iterations, key=lambda it: it.index):
        same_code = score(it.verification) == score(top.verification)
        if same_code and judged(it.verification) != LOWEST and judged_diff(top.verification, it.verification) == 0:
            return it
    return top


def best(checks: list[Verification | None]) -> int:
    """The index of the highest verifier score, then judged score; a tie goes to the earlier
    sample. Among samples the code ties, a later one replaces the earliest only when the
    judge scores both and it more than MARGIN higher (as a refinement must beat its parent):
    the earliest is the greedy draft where the step has one."""
    top = max(range(len(checks)), key=lambda i: (score(checks[i]), judged(checks[i]), -i))
    first = next(i for i, c in enumerate(checks) if score(c) == score(checks[top]))
    if first != top and judged(checks[first]) != LOWEST and judged_diff(checks[top], checks[first]) == 0:
        return first
    return top


def ties(checks: list[Verification | None]) -> list[int]:
    """The indices of the samples that share the highest verifier score."""
    top = max(score(c) for c in checks)
    return [i for i, c in enumerate(checks) if score(c) == top]


def best_of_tie(checks: list[Verification | None], critiques: list[Feedback | None], tied: list[int]) -> int:
    """Among samples tied on the verifier, the critic's highest; among equals, the earlier."""
    return max(tied, key=lambda i: (*rank(checks[i], critiques[i]), -i))


def worse(new: Verification | None, old: Verification | None) -> bool:
    """Whether a refinement's verifier score fell below the draft it refined (or, equal, the
    judge's fell by more than MARGIN)."""
    return score(new) < score(old) or (score(new) == score(old) and judged_diff(new, old) < 0)


def earns_place(
    new: Verification | None, critique: Feedback | None, parent: Verification | None, parent_critique: Feedback | None
) -> bool:
    """Whether a refinement replaces its parent: a strictly higher verifier score; an equal
    one that the judge scores more than MARGIN higher; or, the judge tied or not asked, one
    that the critic finds done where it did not find the parent done (a critic that did not
    see the refinement never decides: ties keep the parent)."""
    ours, theirs = score(new), score(parent)
    if ours != theirs:
        return ours > theirs
    if (verdict := judged_diff(new, parent)) != 0:
        return verdict > 0
    parent_done = parent_critique is not None and parent_critique.done is True
    return critique is not None and critique.done is True and not parent_done
