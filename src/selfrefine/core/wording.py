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
    """``verifier score 0.59, fails``: the task's own check of a draft, as a short note; with
    the judge's verdict where it was asked (``judge 0.91: sense 0.91``; ``, sampled`` when the
    backend gave no probabilities and verdicts were sampled)."""
    if check is None or (check.score is None and check.judged is None):
        return "no verifier score"
    notes = []
    if check.score is not None:
        verdict = {True: ", passes", False: ", fails", None: ""}[check.passed]
        notes.append(f"verifier score {check.score:.2f}{verdict}")
    if check.judged is not None:
        notes.append(judge_note(check))
    return "; ".join(notes)


def judge_note(check: Verification) -> str:
    """``judge 0.91: sense 0.91``: the judge's mean P(yes) and each aspect's."""
    aspects = ", ".join(f"{j.question} {j.score:.2f}" for j in check.judgments)
    sampled = ", sampled" if any(j.method == "sampled" for j in check.judgments) else ""
    return f"judge {check.judged:.2f}: {aspects}{sampled}"
