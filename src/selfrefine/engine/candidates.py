"""Several samples per step (``RefineConfig.samples`` > 1): the pool of every candidate of
a run and their checks, with votes for answer tasks (how they rank: :mod:`.ranking`).

- for a task with an answer (gsm8k), a candidate's score is the share of all candidates so
  far that give its answer (:mod:`.votes`); the scores are recounted as samples arrive, so
  the returned draft carries the majority answer. The reference answer never enters.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ..core.records import Candidate, Iteration, Verification
from .votes import disagreement, rivals_text, tally, way_weights, with_vote


@dataclass
class Entry:
    """One candidate of the run, with its own check before votes."""

    candidate: Candidate
    check: Verification | None
    answer: str | None

    @property
    def way(self) -> str | None:
        return self.candidate.way


@dataclass
class Pool:
    """Every candidate of one run; ``votes``: score answer tasks by agreement."""

    votes: bool
    entries: list[Entry] = field(default_factory=list)

    def add(self, candidate: Candidate, check: Verification | None) -> None:
        answer = check.answer if check is not None and check.passed is not False else None
        self.entries.append(Entry(candidate, check, answer))
        self.recount()

    def check(self, candidate: Candidate) -> Verification | None:
        """A candidate's own check (before votes)."""
        return self._entry(candidate).check

    def judged(self, candidate: Candidate, check: Verification) -> None:
        """A candidate's check, now with the judge's verdicts."""
        self._entry(candidate).check = check
        self.recount()

    def _entry(self, candidate: Candidate) -> Entry:
        return next(e for e in self.entries if e.candidate is candidate)

    def recount(self) -> None:
        """Each candidate's verification: its own check, with the vote of all candidates so far."""
        if not self.votes:
            for e in self.entries:
                e.candidate.verification = e.check
            return
        weights = self.weights()
        counts, total, said = tally([e.answer for e in self.entries], weights), sum(weights), self.said()
        for e in self.entries:
            e.candidate.verification = with_vote(e.check, e.answer, counts, total, said)

    def weights(self) -> list[float]:
        """Each candidate's vote weight (its way's agreement with the other ways)."""
        return way_weights([e.way for e in self.entries], [e.answer for e in self.entries])

    def said(self) -> str:
        """The vote in words, counted one each ("2 samples return 18, 1 sample returns 12")."""
        return disagreement(tally([e.answer for e in self.entries]), len(self.entries))

    def counts(self) -> Counter[str]:
        """The weighted votes for each answer."""
        return tally([e.answer for e in self.entries], self.weights())

    def rescore(self, iterations: list[Iteration]) -> None:
        """Each iteration's verification from its chosen candidate (votes move as samples arrive)."""
        for it in iterations:
            chosen = next((c for c in it.candidates if c.chosen), None)
            if chosen is not None:
                it.verification = chosen.verification

    def rivals(self, answer: str | None, most: int = 2) -> str:
        """The other answers' drafts in words, for refining a draft whose answer is ``answer``
        ("" when every sample agrees): one draft per answer, the most voted ``most`` answers."""
        counts = self.counts()
        others = [a for a, _ in counts.most_common() if a != answer][:most]
        drafts = [(a, next(e.candidate.draft for e in self.entries if e.answer == a)) for a in others]
        return rivals_text(answer, drafts, self.said())
