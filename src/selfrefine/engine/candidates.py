"""Several samples per step (``RefineConfig.samples`` > 1): the pool of every candidate of
a run, their checks (with votes for answer tasks), which one a step keeps, and whether a
refinement earns its place over its parent.

- a step's best candidate is the one the task's verifier scores highest; a tie goes to the
  earlier sample;
- a refinement replaces its parent only when the verifier scores it strictly higher, or
  equal with a strictly higher critic score; a tie keeps the parent, so a refinement that
  adds nothing measurable never replaces what it refined;
- for a task with an answer (gsm8k), a candidate's score is the share of all candidates so
  far that give its answer (:mod:`.votes`); the scores are recounted as samples arrive, so
  the returned draft carries the majority answer. The reference answer never enters.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..core.records import Candidate, Feedback, Iteration, Verification
from .votes import tally, with_vote


@dataclass
class Entry:
    """One candidate of the run, with its own check before votes."""

    candidate: Candidate
    check: Verification | None
    answer: str | None


@dataclass
class Pool:
    """Every candidate of one run; ``votes``: score answer tasks by agreement."""

    votes: bool
    entries: list[Entry] = field(default_factory=list)

    def add(self, candidate: Candidate, check: Verification | None) -> None:
        answer = check.answer if check is not None and check.passed is not False else None
        self.entries.append(Entry(candidate, check, answer))
        self.recount()

    def recount(self) -> None:
        """Each candidate's verification: its own check, with the vote of all candidates so far."""
        if not self.votes:
            for e in self.entries:
                e.candidate.verification = e.check
            return
        counts, total = tally([e.answer for e in self.entries]), len(self.entries)
        for e in self.entries:
            e.candidate.verification = with_vote(e.check, e.answer, counts, total)

    def rescore(self, iterations: list[Iteration]) -> None:
        """Each iteration's verification from its chosen candidate (votes move as samples arrive)."""
        for it in iterations:
            chosen = next((c for c in it.candidates if c.chosen), None)
            if chosen is not None:
                it.verification = chosen.verification


def score(check: Verification | None) -> float:
    return check.score if check is not None and check.score is not None else float("-inf")


def best(candidates: list[Candidate]) -> int:
    """The index of the highest verifier score; a tie goes to the earlier sample."""
    return max(range(len(candidates)), key=lambda i: (score(candidates[i].verification), -i))


def ties(candidates: list[Candidate]) -> list[int]:
    """The indices of the samples that share the highest verifier score."""
    top = max(score(c.verification) for c in candidates)
    return [i for i, c in enumerate(candidates) if score(c.verification) == top]


def critic_rank(feedback: Feedback | None) -> tuple[bool, float]:
    """How the critic ranks a draft: done first, then its score (unknown: lowest)."""
    if feedback is None:
        return (False, float("-inf"))
    return (feedback.done is True, feedback.total if feedback.total is not None else float("-inf"))


def earns_place(new: Verification | None, critique: Feedback | None, parent: Iteration) -> bool:
    """Whether a refinement replaces its parent: a strictly higher verifier score, or an
    equal one that the critic finds done where it did not find the parent done (a critic
    that did not see the refinement never decides: ties keep the parent)."""
    ours, theirs = score(new), score(parent.verification)
    if ours != theirs:
        return ours > theirs
    parent_done = parent.feedback is not None and parent.feedback.done is True
    return critique is not None and critique.done is True and not parent_done
