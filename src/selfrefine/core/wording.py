"""Small helpers for the words the CLI, the service and reports print."""

from __future__ import annotations

from .records import Feedback, Verification


def plural(n: int, noun: str, many: str | None = None) -> str:
    """``1 example``, ``2 examples``: a count with its noun in the right number."""
    return f"{n} {noun if n == 1 else many or noun + 's'}"


def score_note(fb: Feedback) -> str:
    """What a feedback's score is: the verifier's, or the critic's (from how many per-aspect
    ratings, where it gave them; the panel or text shows each)."""
    if fb.verification is not None and fb.total == fb.verification.score:
        return verifier_note(fb.verification)
    total = fb.total if fb.total is not None else float("nan")
    ratings = f", from its {plural(len(fb.scores), 'rating')}" if fb.scores else ""
    return f"feedback score {total:g} (the critic's{ratings})"


def verifier_note(check: Verification | None) -> str:
    """``verifier score 0.59, fails``: the task's own check of a draft, as a short note."""
    if check is None or check.score is None:
        return "no verifier score"
    verdict = {True: ", passes", False: ", fails", None: ""}[check.passed]
    return f"verifier score {check.score:.2f}{verdict}"
