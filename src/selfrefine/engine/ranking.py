"""The one ranking rule: how two drafts (or samples) compare, and when a refinement
replaces the draft it refined.

A draft ranks by its verifier score, then by the critic: done before not done, then the
critic's score. A missing score of either kind ranks lowest, everywhere (a step's best
sample, the returned draft, whether a refinement fell below its parent). Among equals, the
earlier draft wins: a refinement that adds nothing measurable never replaces what it refined.
The reference answer never enters.
"""

from __future__ import annotations

from ..core.records import Candidate, Feedback, Iteration, Verification

LOWEST = float("-inf")


def score(check: Verification | None) -> float:
    """A verifier score; a missing one ranks lowest."""
    return check.score if check is not None and check.score is not None else LOWEST


def critic_rank(feedback: Feedback | None) -> tuple[bool, float]:
    """How the critic ranks a draft: done first, then its score (unknown: lowest)."""
    if feedback is None:
        return (False, LOWEST)
    return (feedback.done is True, feedback.total if feedback.total is not None else LOWEST)


def rank(check: Verification | None, feedback: Feedback | None) -> tuple[float, bool, float]:
    """A draft's rank: its verifier score, then the critic's (higher is better)."""
    return (score(check), *critic_rank(feedback))


def best_iteration(iterations: list[Iteration]) -> Iteration:
    """The highest-ranked draft; among equals, the earlier."""
    return max(iterations, key=lambda it: (*rank(it.verification, it.feedback), -it.index))


def best(candidates: list[Candidate]) -> int:
    """The index of the highest verifier score; a tie goes to the earlier sample."""
    return max(range(len(candidates)), key=lambda i: (score(candidates[i].verification), -i))


def ties(candidates: list[Candidate]) -> list[int]:
    """The indices of the samples that share the highest verifier score."""
    top = max(score(c.verification) for c in candidates)
    return [i for i, c in enumerate(candidates) if score(c.verification) == top]


def best_of_tie(candidates: list[Candidate], tied: list[int]) -> int:
    """Among samples tied on the verifier, the critic's highest; among equals, the earlier."""
    return max(tied, key=lambda i: (*rank(candidates[i].verification, candidates[i].feedback), -i))


def worse(new: Verification | None, old: Verification | None) -> bool:
    """Whether a refinement's verifier score fell below the draft it refined."""
    return score(new) < score(old)


def earns_place(new: Verification | None, critique: Feedback | None, parent: Iteration) -> bool:
    """Whether a refinement replaces its parent: a strictly higher verifier score, or an
    equal one that the critic finds done where it did not find the parent done (a critic
    that did not see the refinement never decides: ties keep the parent)."""
    ours, theirs = score(new), score(parent.verification)
    if ours != theirs:
        return ours > theirs
    parent_done = parent.feedback is not None and parent.feedback.done is True
    return critique is not None and critique.done is True and not parent_done
