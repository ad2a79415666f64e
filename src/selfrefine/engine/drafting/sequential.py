"""``strategy="sequential"``: the first draft sampled one at a time until one passes every
check, at most ``samples`` drafts (4 when the run gives none); each round then refines the
kept draft with one sample (with a repair ``refine_form``, "focused", "rewrite" or "by_kind",
one failed check's repair at a time: engine/focused.py).

Why (issue 45, docs/ifeval.md): the best of 4 drew four full replies on every prompt, also
on the ~40% whose first draft already passes, and at fixed compute drawing until a draft
passes beats best-of-N (rejection sampling). A prompt the first draft passes costs one
draft; one no sample passes costs ``samples`` and keeps the best by the checks (the
judge among drafts they tie, as :class:`~.best_of.BestOfK`).
"""

from __future__ import annotations

from ...core.config import RefineConfig
from ...core.records import CallRecord, Candidate
from ...task.task import Task
from ..context import RunContext
from ..settings import Settings, check_sampling
from .base import Drafted, Drafter, Strategy
from .best_of import BestOfK

DEFAULT_MOST = 4  # drafts of the first step when the run gives no samples


class Sequential(Strategy):
    """``strategy="sequential"``: draw first drafts one at a time until one passes."""

    name = "sequential"
    summary = (
        "the first draft sampled one at a time until one passes every check (at most --samples K, "
        f"{DEFAULT_MOST} by default), then rounds of one sample; a prompt whose first draft passes costs one draft"
    )

    def several(self, config: RefineConfig) -> bool:
        return True

    def check(self, config: RefineConfig, task: Task) -> None:
        check_sampling("strategy sequential", config, task)

    def drafter(self, settings: Settings) -> Drafter:
        given = settings.sampling.samples
        return UntilPass(given if given > 1 else DEFAULT_MOST)


class UntilPass(BestOfK):
    """First drafts one at a time until one passes every check (or ``most`` were asked for);
    each refinement one sample, accepted as :class:`BestOfK` accepts one."""

    def __init__(self, most: int) -> None:
        super().__init__(1)
        self.most = most

    async def first(self, run: RunContext, prompt: str) -> Drafted:
        cands: list[Candidate] = []
        last: CallRecord | None = None
        for asked in range(self.most):  # counted by samples asked: an empty reply is no draft, yet costs one
            more, last = await self.gather(run, "generate", 0, prompt, 1, start=asked)
            cands += more
            if any(passes(run, c) for c in more):
                break
        assert last is not None  # most >= 1
        return await self.choose(run, 0, cands, last)


def passes(run: RunContext, cand: Candidate) -> bool:
    """Whether the sample passes every check (the task's verifier and the run's checks); a
    draft nothing checks passes: another sample could not be told better."""
    check = run.board.of(cand)
    return check is None or check.passed is not False
