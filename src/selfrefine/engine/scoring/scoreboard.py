"""One run's scores, each stored once: the task's code check of every distinct draft, the
judge's verdicts on every distinct text, and the vote of every sample. A draft's
verification is computed from them when it is read, so nothing is copied and nothing needs
to be kept in step.

- a **draft** is its text and whether its reply was cut off at the token limit (a cut-off
  draft's check is demoted: :mod:`.incomplete`); its check runs once per run, however many
  samples or iterations repeat it;
- the **judge's verdicts** (:mod:`.judge`) belong to a text with its whitespace normalised:
  a draft that differs only there was already judged;
- a **vote** is cast by each sample of an answer task (:mod:`.votes`): two samples with the
  same program are two votes. A sample's score is then the share of the votes its answer
  has, which moves as samples arrive; reading it gives the share now;
- the records a run streams and returns (``Candidate.verification``,
  ``Iteration.verification``) receive their verification from here when a step is shown
  and once more when the run ends (:meth:`Scoreboard.publish`); the engine never reads
  them back. Other sources of scores (checks derived from the request) are one more field
  of the board, read by :meth:`Scoreboard.verification`.

The reference answer never enters.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from ...checks.incomplete import cut_off
from ...core.records import Candidate, Iteration, Judgment, Verification
from .votes import disagreement, rivals_text, tally, way_weights, with_vote

Key = tuple[str, bool]  # a draft: its text, and whether its reply was cut off
Check = Callable[[str, "str | None"], Awaitable["Verification | None"]]


def key_of(draft: str, finish_reason: str | None) -> Key:
    return (draft, cut_off(finish_reason))


@dataclass
class Ballot:
    """One sample's vote: the draft it wrote (its key), the way it was written, the record."""

    candidate: Candidate
    key: Key
    way: str | None


@dataclass
class Scoreboard:
    """Every score of one run. ``votes``: an answer task's samples are scored by agreement."""

    votes: bool
    checks: dict[Key, Verification | None] = field(default_factory=dict)
    judgments: dict[str, list[Judgment]] = field(default_factory=dict)  # by normal text; []: none readable
    ballots: list[Ballot] = field(default_factory=list)
    drafts: dict[int, Key] = field(default_factory=dict)  # iteration index -> its checked draft
    pending: dict[Key, asyncio.Future[Verification | None]] = field(default_factory=dict)

    # -- writing -----------------------------------------------------------------------------

    async def check(self, draft: str, finish_reason: str | None, run_check: Check) -> Key:
        """Draft's key, its check computed once (``run_check``; a check already running for
        the same draft is awaited, not repeated)."""
        key = key_of(draft, finish_reason)
        if key in self.checks:
            return key
        if key not in self.pending:
            self.pending[key] = asyncio.ensure_future(run_check(draft, finish_reason))
        try:
            self.checks[key] = await self.pending[key]
        finally:
            self.pending.pop(key, None)
        return key

    def cast(self, candidate: Candidate, key: Key) -> None:
        """A sample of the run, scored by the board (on an answer task, its vote)."""
        self.ballots.append(Ballot(candidate, key, candidate.way))

    def placed(self, index: int, key: Key) -> None:
        """Iteration ``index``'s draft is ``key`` (checked): its record shows the score."""
        self.drafts[index] = key

    def judged(self, text: str, found: list[Judgment]) -> None:
        """The judge's verdicts on a text (empty: it gave none readable)."""
        self.judgments[normal_text(text)] = found

    # -- reading ------------------------------------------------------------------------------

    def verification(self, key: Key) -> Verification | None:
        """A draft's verification now: its check, the judge's verdicts on its text, and on an
        answer task its share of the votes."""
        check = self.checks.get(key)
        found = self.judgments.get(normal_text(key[0]))
        if found is not None:
            check = with_judgments(check, found)
        if not self.votes:
            return check
        weights, answers = self.weights(), self.answers()
        counts, total = tally(answers, weights), sum(weights)
        return with_vote(check, answer_of(check), counts, total, self.said())

    def of(self, candidate: Candidate) -> Verification | None:
        return self.verification(self.ballot(candidate).key)

    def of_iteration(self, index: int) -> Verification | None:
        """Iteration ``index``'s verification (None: its draft was not checked)."""
        key = self.drafts.get(index)
        return self.verification(key) if key is not None else None

    def has_judged(self, text: str) -> bool:
        return normal_text(text) in self.judgments

    def was_checked(self, index: int) -> bool:
        return index in self.drafts

    def ballot(self, candidate: Candidate) -> Ballot:
        return next(b for b in self.ballots if b.candidate is candidate)

    def key(self, candidate: Candidate) -> Key:
        return self.ballot(candidate).key

    # -- votes --------------------------------------------------------------------------------

    def answers(self) -> list[str | None]:
        """Each sample's answer (none where its own check failed)."""
        return [answer_of(self.checks.get(b.key)) for b in self.ballots]

    def weights(self) -> list[float]:
        """Each sample's vote weight (its way's agreement with the other ways)."""
        return way_weights([b.way for b in self.ballots], self.answers())

    def counts(self) -> Counter[str]:
        """The weighted votes for each answer."""
        return tally(self.answers(), self.weights())

    def said(self) -> str:
        """The vote in words, counted one each ("2 samples return 18, 1 sample returns 12")."""
        return disagreement(tally(self.answers()), len(self.ballots))

    def rivals(self, answer: str | None, most: int = 2) -> str:
        """The other answers' drafts in words, for refining a draft whose answer is ``answer``
        ("" when every sample agrees): one draft per answer, the most voted ``most`` answers."""
        others = [a for a, _ in self.counts().most_common() if a != answer][:most]
        answers = self.answers()
        drafts = [(a, next(b.candidate.draft for b, x in zip(self.ballots, answers) if x == a)) for a in others]
        return rivals_text(answer, drafts, self.said())

    # -- the records ------------------------------------------------------------------------

    def publish(self, iterations: list[Iteration]) -> None:
        """Each iteration's and sample's record receives its verification as it stands."""
        for it in iterations:
            if it.index in self.drafts:
                it.verification = self.of_iteration(it.index)
            for cand in it.candidates:
                cand.verification = self.of(cand)


def answer_of(check: Verification | None) -> str | None:
    """A draft's answer as a vote: none where its own check failed."""
    return check.answer if check is not None and check.passed is not False else None


def with_judgments(check: Verification | None, found: list[Judgment]) -> Verification:
    """A draft's verification with the judge's verdicts (a task without code checks: the
    judge's alone, its text the aspects the judge doubts, for a rejected refinement's prompt)."""
    if not found:
        return check if check is not None else Verification(text="")
    mean = sum(j.score for j in found) / len(found)
    base = check or Verification(text=judged_text(found))
    return base.model_copy(update={"judged": round(mean, 6), "judgments": found})


def judged_text(found: list[Judgment]) -> str:
    doubted = [j.question for j in found if j.score < 0.5]
    return f"the judge doubts: {', '.join(doubted)}" if doubted else "the judge finds no problem"


def normal_text(text: str) -> str:
    """A draft's text with its whitespace normalised: drafts that differ only there are one."""
    return " ".join(text.split())


def same_text(a: str, b: str) -> bool:
    return normal_text(a) == normal_text(b)
