"""The ways to produce a step's draft: parts with one interface, chosen once per run from
the resolved settings (:func:`~.refinement.drafter_for`).

A :class:`Drafter` makes the first draft and each refinement of the current draft, and
judges whether a refinement replaces the draft it refined. The loop (:mod:`.refinement`)
does the rest the same way for every part: the critique, the stop rules, what a rejected
refinement's prompt shows, the records.

- :class:`OneDraft`: one call per step, the paper's loop (``samples`` 1);
- :class:`~.sampling.BestOfK`: K samples of each step, the verifier's best kept;
  :class:`~.sampling.Votes`: the same for an answer task, scored by agreement;
- :class:`~.budgeted.Budgeted`: the auto strategy, which picks each round's K and its
  stop from a token budget and drafts with a best of K.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

from ..core.records import CallRecord, DecisionStep, Iteration
from .context import RunContext
from .judged import code_ties, judge_iterations, judging
from .selection import rejection
from .state import normal_text, same_text

__all__ = ["Drafted", "Drafter", "OneDraft", "Verdict", "normal_text", "same_text"]


@dataclass(frozen=True)
class Drafted:
    """A step's draft: its iteration, and the call that wrote the kept draft."""

    iteration: Iteration
    call: CallRecord | None


@dataclass(frozen=True)
class Verdict:
    """Whether a refinement replaces the draft it refined."""

    rejected: str = ""  # why it does not ("": it does)
    echoed: bool = False  # it (every sample of it) repeats its parent
    stops: bool = False  # it repeats its parent, and the run stops on no change


class Drafter(ABC):
    """A way to produce drafts; one per run (a part may keep its own state across steps)."""

    @abstractmethod
    async def first(self, run: RunContext, prompt: str) -> Drafted:
        """Draft 0."""

    @abstractmethod
    async def refinement(self, run: RunContext, index: int, prompt: str) -> Drafted | DecisionStep:
        """Draft ``index``, a refinement of the current draft; or the decision to stop."""

    @abstractmethod
    async def judge(self, run: RunContext, parent: Iteration, new: Iteration) -> Verdict:
        """Whether ``new`` (already among the run's iterations) replaces ``parent``."""

    def before_round(self, run: RunContext, t: int) -> DecisionStep | None:
        """A stop before draft t is critiqued (None: the round goes on)."""
        return None


class OneDraft(Drafter):
    """One call per step. Under ``accept="not_worse"`` a refinement the verifier scores
    lower than its parent (or a sampling refiner's echo) is rejected; an unchanged one
    stops the run when ``stop_on_no_change``."""

    async def first(self, run: RunContext, prompt: str) -> Drafted:
        draft, call = await run.draft("generate", 0, prompt)
        return Drafted(Iteration(index=0, draft=draft, finish_reason=call.finish_reason), call)

    async def refinement(self, run: RunContext, index: int, prompt: str) -> Drafted:
        draft, call = await run.draft("refine", index, prompt)
        return Drafted(Iteration(index=index, draft=draft, finish_reason=call.finish_reason), call)

    async def judge(self, run: RunContext, parent: Iteration, new: Iteration) -> Verdict:
        settings = run.settings
        unchanged = same_text(new.draft, parent.draft)
        if settings.verify_every_draft:
            check = await run.verify(new.index)
            if (
                settings.accept == "not_worse"
                and not unchanged
                and judging(run)
                and code_ties(check, parent.verification)
            ):
                await judge_iterations(run, [parent.index, new.index])
                check = new.verification
            why = rejection(settings.accept, unchanged, settings.refine_samples, check, parent.verification)
            if why is not None:
                return Verdict(rejected=why, echoed=unchanged)
        return Verdict(echoed=unchanged, stops=unchanged and settings.stop_on_no_change)
