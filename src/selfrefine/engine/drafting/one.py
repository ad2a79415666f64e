"""One call per step: the paper's loop (``strategy="fixed"``, ``samples`` 1)."""

from __future__ import annotations

from ...core.records import Iteration
from ..context import RunContext
from ..judge import code_ties, judge_iterations
from ..scoring.scoreboard import same_text
from ..scoring.selection import rejection
from .base import Acceptance, Drafted, Drafter


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

    async def accept(self, run: RunContext, parent: Iteration, new: Iteration) -> Acceptance:
        settings = run.settings
        unchanged = same_text(new.draft, parent.draft)
        if run.verify_every_draft:
            check = await run.verify(new.index)
            old = run.board.of_iteration(parent.index)
            if settings.accept == "not_worse" and not unchanged and settings.judge.on and code_ties(check, old):
                await judge_iterations(run, [parent.index, new.index])
                check, old = run.board.of_iteration(new.index), run.board.of_iteration(parent.index)
            why = rejection(settings.accept, unchanged, settings.refine_samples, check, old)
            if why is not None:
                return Acceptance(rejected=why, echoed=unchanged)
        return Acceptance(echoed=unchanged, stops=unchanged and settings.stops.on_no_change)
