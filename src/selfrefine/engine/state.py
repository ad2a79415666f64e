"""One run's state, as one explicit record: the drafts, what the prompts show, the scores
and the call log. The loop (:mod:`.refinement`) writes the drafts and what the prompts
show; the scores are the scoreboard's (:mod:`.scoreboard`), which the drafting parts
(:mod:`.drafting`) and the stop rules read; nothing else of a run is kept anywhere.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..core.records import DecisionStep, Iteration
from .calls import CallLog
from .run_checks import RunChecks
from .scoring.scoreboard import Scoreboard


@dataclass
class RunState:
    """The state of one input's run."""

    input: str
    reference: Any
    board: Scoreboard  # every draft's check and judgment, every sample's vote
    checks: RunChecks = field(default_factory=RunChecks)  # the run's checks besides the task's own
    log: CallLog = field(default_factory=CallLog)
    iterations: list[Iteration] = field(default_factory=list)
    current: int = 0  # index of the draft the next refinement starts from
    # the (draft, feedback) pairs the prompts show before the current draft, in the order
    # they were shown: earlier current drafts and rejected refinements (prefix-stable)
    transcript: list[int] = field(default_factory=list)
    stopped: bool = False
    first_prompt_chars: int = 0  # the length of the generate prompt (the auto strategy's token price per char)

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
