"""Which draft a run returns, and when a refinement is rejected as worse than its parent.

Pure functions of the iterations so far: the loop calls them, and reports re-apply them to
stored rows (``select_index`` with another policy shows what it would have returned).
"""

from __future__ import annotations

from ..core.records import DecisionStep, Iteration, Verification


def select_index(iterations: list[Iteration], policy: str) -> int | None:
    """Index of the returned draft among the accepted ones (a refinement rejected by
    ``accept="not_worse"`` is never returned):

    - ``last``: the last accepted draft;
    - ``best``: the highest feedback score, ties → later (no scores: the last);
    - ``verified``: the highest verifier score, ties → the draft the critic found done, then
      the higher feedback score, then the earlier draft (a refinement that adds nothing
      measurable never replaces what it refined); a missing score of either kind ranks lowest.
    """
    candidates = [it for it in iterations if it.accepted]
    if not candidates:
        return None
    if policy == "best":
        scored = [(it.feedback.total, it.index) for it in candidates if it.feedback and it.feedback.total is not None]
        if scored:
            return max(scored)[1]
    if policy == "verified":
        return max(candidates, key=_verified_rank).index
    return candidates[-1].index


def _verified_rank(it: Iteration) -> tuple[bool, float, bool, bool, float, int]:
    score = it.verification.score if it.verification is not None else None
    total = it.feedback.total if it.feedback is not None else None
    done = it.feedback is not None and it.feedback.done is True
    return (score is not None, score or 0.0, done, total is not None, total or 0.0, -it.index)


def worse(new: Verification | None, old: Verification | None) -> bool:
    """Whether a refinement's verifier score fell below the draft it refined (a missing
    score counts as the lowest; nothing to compare with: not worse)."""
    old_score = old.score if old is not None else None
    new_score = new.score if new is not None else None
    if old_score is None:
        return False
    return new_score is None or new_score < old_score


def rejection_detail(rejected: str, t: int, decision: DecisionStep) -> str:
    """What the loop does after rejecting a refinement of draft t: refine draft t again, or
    stop (the decision's reason) instead."""
    if decision.stop:
        return f"{rejected}; the run stops ({decision.detail}) instead of refining draft {t} again"
    return f"{rejected}; draft {t} is refined again"


def score_text(check: Verification | None) -> str:
    return "none" if check is None or check.score is None else f"{check.score:.2f}"


def rejection(
    accept: str, unchanged: bool, sampled: bool, new: Verification | None, old: Verification | None
) -> str | None:
    """Why ``accept`` rejects a refinement (None: it is kept). Under ``not_worse`` a refinement
    is rejected when its verifier score fell below its parent's, or when a sampling refiner
    repeated its parent (the retry, seeded anew, is a new sample; greedy, it would repeat)."""
    if accept != "not_worse":
        return None
    echo = unchanged and sampled
    if not (echo or worse(new, old)):
        return None
    return (
        "the refinement changed nothing" if unchanged else f"verifier score fell {score_text(old)} → {score_text(new)}"
    )
