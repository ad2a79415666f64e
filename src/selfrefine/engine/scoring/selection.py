"""Which draft a run returns, and when a refinement is rejected as worse than its parent.

Pure functions of the iterations so far: the loop calls them, and reports re-apply them to
stored rows (``select_index`` with another policy shows what it would have returned).
"""

from __future__ import annotations

from ...core.records import DecisionStep, Iteration, Verification
from ..settings import Settings
from .ranking import best_iteration, score, worse


def selection_needs_verification(settings: Settings) -> bool:
    """Whether the returned draft is chosen by the drafts' checks (``select="verified"``
    ranks every returnable draft by them), so each draft is verified as it arrives."""
    return settings.select == "verified"


def acceptance_needs_verification(settings: Settings) -> bool:
    """Whether a refinement is accepted by its checks (``accept="not_worse"`` compares its
    score with its parent's), so each draft is verified as it arrives."""
    return settings.accept == "not_worse"


def select_index(iterations: list[Iteration], policy: str) -> int | None:
    """Index of the returned draft among the accepted ones (a refinement rejected by
    ``accept="not_worse"`` is never returned):

    - ``last``: the last accepted draft;
    - ``best``: the highest feedback score, ties → later (no scores: the last);
    - ``verified``: the highest rank (:mod:`.ranking`): the verifier score, then the critic's
      done, then its score, then the earlier draft.
    """
    candidates = [it for it in iterations if it.accepted]
    if not candidates:
        return None
    if policy == "best":
        scored = [(it.feedback.total, it.index) for it in candidates if it.feedback and it.feedback.total is not None]
        if scored:
            return max(scored)[1]
    if policy == "verified":
        return best_iteration(candidates).index
    return candidates[-1].index


def rejection_detail(rejected: str, t: int, decision: DecisionStep) -> str:
    """What the loop does after rejecting a refinement of draft t: refine draft t again, or
    stop (the decision's reason) instead."""
    if decision.stop:
        return f"{rejected}; the run stops instead of refining draft {t} again ({decision.detail})"
    return f"{rejected}; draft {t} is refined again"


def score_text(check: Verification | None) -> str:
    """A verifier score as the records say it; with the judge's where the judge was asked."""
    code = "none" if check is None or check.score is None else f"{check.score:.2f}"
    return code if check is None or check.judged is None else f"{code}, judge {check.judged:.2f}"


def judged_text(check: Verification | None) -> str:
    return "none" if check is None or check.judged is None else f"{check.judged:.2f}"


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
    if unchanged:
        return "the refinement changed nothing"
    if score(new) == score(old):  # the code checks tie: the judge's score fell
        return f"the judge's score fell {judged_text(old)} → {judged_text(new)}"
    return f"verifier score fell {score_text(old)} → {score_text(new)}"
