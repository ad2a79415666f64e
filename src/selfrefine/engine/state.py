"""One run's state, as one explicit record: the drafts, what the prompts show, the pool of
samples and the call log. The loop (:mod:`.refinement`) and its drafting parts
(:mod:`.drafting`) read and write it; nothing else of a run is kept anywhere.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..core.records import DecisionStep, Iteration, Judgment
from .calls import CallLog
from .candidates import Pool


@dataclass
class RunState:
    """The state of one input's run."""

    input: str
    reference: Any
    pool: Pool  # every sample, when a step samples several
    log: CallLog = field(default_factory=CallLog)
    iterations: list[Iteration] = field(default_factory=list)
    current: int = 0  # index of the draft the next refinement starts from
    # the (draft, feedback) pairs the prompts show before the current draft, in the order
    # they were shown: earlier current drafts and rejected refinements (prefix-stable)
    transcript: list[int] = field(default_factory=list)
    verified: set[int] = field(default_factory=set)  # drafts whose verify() already ran
    judged: dict[str, list[Judgment]] = field(default_factory=dict)  # the judge's verdicts by text
    stopped: bool = False

    def parent(self) -> Iteration:
        """The draft the next refinement starts from."""
        return self.iterations[self.current]

    def decided(self, decision: DecisionStep) -> DecisionStep:
        """A decision taken: one that stops ends the run's rounds."""
        self.stopped = self.stopped or decision.stop
        return decision

    def accepted(self, t: int, n: int) -> None:
        """Refinement n replaces draft t: t joins what the prompts show before it."""
        self.transcript.append(t)
        self.current = n

    def rejected(self, t: int, n: int) -> None:
        """Refinement n of draft t is rejected: the next prompt shows draft t, then the
        rejected attempt and its findings, then draft t again as the current one."""
        self.transcript += [t, n]

    def rejections(self) -> int:
        """Refinements rejected so far."""
        return sum(not it.accepted for it in self.iterations)

    def history(self, policy: str, transcript: list[int] | None = None) -> list[dict[str, str]]:
        """The {draft, feedback} pairs shown before the current draft, per the history policy.

        Without rejected refinements these are drafts 0..t-1; a rejected refinement adds the
        draft it refined and itself (with the verifier's findings), in the order shown, so
        each refine prompt extends the previous one."""
        transcript = self.transcript if transcript is None else transcript
        if policy == "none" or not transcript:
            return []
        shown = transcript if policy == "full" else transcript[-1:]
        earlier = [self.iterations[i] for i in shown]
        return [{"draft": it.draft, "feedback": it.feedback.text if it.feedback else ""} for it in earlier]


def normal_text(text: str) -> str:
    """A draft's text with its whitespace normalised: drafts that differ only there are one."""
    return " ".join(text.split())


def same_text(a: str, b: str) -> bool:
    return normal_text(a) == normal_text(b)
