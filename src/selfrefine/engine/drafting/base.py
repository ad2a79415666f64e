"""The interfaces of a way to draft: a :class:`Strategy` (registered by name, resolved once
per engine) makes one :class:`Drafter` per run, which owns everything the loop does
differently for it.

The loop (:mod:`~selfrefine.engine.refinement`) asks the drafter for the first draft and
each refinement, whether a refinement replaces the draft it refined (:meth:`Drafter.accept`),
and at its points of choice: a stop before a round (:meth:`Drafter.before_round`, turned
into the run's decision by :class:`~selfrefine.engine.stopping.StopRules`), a critique it
already has (:meth:`Drafter.known_critique`), what it adds to a draft's feedback
(:meth:`Drafter.feedback`) and what it does before the result (:meth:`Drafter.finish`).
Everything else — the critique, the stop rules, a rejected refinement's prompt, the
records — the loop does the same for every drafter.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

from ...core.records import CallRecord, Feedback, Iteration
from ..context import RunContext
from ..settings import Settings, StrategyRules
from ..stopping import Stop


@dataclass(frozen=True)
class Drafted:
    """A step's draft: its iteration, and the call that wrote the kept draft."""

    iteration: Iteration
    call: CallRecord | None


@dataclass(frozen=True)
class Acceptance:
    """Whether a refinement replaces the draft it refined."""

    rejected: str = ""  # why it does not ("": it does)
    echoed: bool = False  # it (every sample of it) repeats its parent
    stops: bool = False  # it repeats its parent, and the run stops on no change


class Drafter(ABC):
    """A way to produce drafts; one per run (a drafter may keep its own state across steps)."""

    @abstractmethod
    async def first(self, run: RunContext, prompt: str) -> Drafted:
        """Draft 0."""

    @abstractmethod
    async def refinement(self, run: RunContext, index: int, prompt: str) -> Drafted | Stop:
        """Draft ``index``, a refinement of the current draft; or a stop instead."""

    @abstractmethod
    async def accept(self, run: RunContext, parent: Iteration, new: Iteration) -> Acceptance:
        """Whether ``new`` (already among the run's iterations) replaces ``parent``."""

    def before_round(self, run: RunContext, t: int) -> Stop | None:
        """A stop before draft t is critiqued (None: the round goes on)."""
        return None

    def known_critique(self, run: RunContext, t: int) -> Feedback | None:
        """A critique of draft t the drafter already made (None: the loop asks the critic)."""
        return None

    def feedback(self, run: RunContext, t: int, feedback: Feedback) -> Feedback:
        """Draft t's feedback as the refinement sees it (default: as given)."""
        return feedback

    async def finish(self, run: RunContext) -> None:  # noqa: B027 - optional: most drafters leave nothing
        """Before the run's result is made (the returned draft is chosen after)."""


class Strategy(StrategyRules, ABC):
    """A way to spend a run's calls, chosen by name (``strategy=NAME``, ``--strategy NAME``)
    and registered in the ``selfrefine.strategies`` group (:mod:`.registry`): what it needs of
    the options and the task (``several``, ``check``, ``needs_verification``: the rules
    :class:`~selfrefine.engine.settings.StrategyRules` states with their defaults), and the
    drafter each run gets. A subclass is instantiated with no arguments."""

    @abstractmethod
    def drafter(self, settings: Settings) -> Drafter:
        """A new drafter for one run."""
