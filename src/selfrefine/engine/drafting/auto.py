"""``strategy="auto"``: :class:`Budgeted` chooses each round's samples and when to stop
from the token budget and what the verifier saw (the rule: :mod:`.auto_rule`), and drafts
each step with a best of K (:mod:`.best_of`, :mod:`.voting`) of that width.
"""

from __future__ import annotations

from ...core.config import RefineConfig
from ...core.errors import ConfigError
from ...core.records import Candidate, Feedback, Iteration, StopReason
from ...task.task import Task
from ..context import RunContext
from ..scoring.ranking import score
from ..scoring.votes import majority_answer
from ..settings import Settings, check_sampling
from ..stopping import Stop
from .auto_rule import (
    FIRST_WIDTH,
    MAX_WIDTH,
    MIN_ROUND,
    START_WIDTH,
    RoundOutcome,
    affordable_width,
    lead,
    next_draft_wave,
    next_wave,
    plan_round,
    settled,
)
from .base import Acceptance, Drafted, Drafter, Strategy
from .best_of import BestOfK
from .budget import TokenBudget
from .voting import Votes


class Auto(Strategy):
    """``strategy="auto"``: spend ``max_total_tokens`` between samples per step and rounds."""

    name = "auto"
    summary = (
        "spend --budget-tokens between samples per step and rounds by what the verifier sees: the first draft "
        "in waves (1, then doubling while the samples' scores spread; an answer task starts with 2), a stop "
        "when the verifier is satisfied, wider after echoes or rejections, deeper after an accepted refinement; "
        "at most 8 drafts a step, or --samples K when given"
    )

    def several(self, config: RefineConfig) -> bool:
        return True

    def check(self, config: RefineConfig, task: Task) -> None:
        check_sampling("strategy auto", config, task)
        if config.max_total_tokens is None:
            raise ConfigError("strategy auto spends a token budget: give one (--budget-tokens N, max_total_tokens)")

    def drafter(self, settings: Settings) -> Drafter:
        given = settings.sampling.samples
        most = given if given > 1 else MAX_WIDTH  # samples K > 1 caps every width at K
        return Budgeted(min(START_WIDTH, most), settings.sampling.votes, most)


class Budgeted(Drafter):
    """The auto strategy: a width per round, priced in tokens; an answer task's first draft
    sampled in waves until its votes are settled."""

    def __init__(self, width: int, votes: bool, most: int = MAX_WIDTH) -> None:
        self.budget = TokenBudget()
        self.votes, self.most = votes, most
        self.inner: BestOfK = (Votes if votes else BestOfK)(width, self.budget)
        self.width = width  # the last round's width
        self.outcome: RoundOutcome | None = None  # what the verifier saw in the last round
        self.planned: tuple[int, str] | None = None  # the width planned for the round begun
        self.waves_why = ""  # why the first draft's waves stopped, in words

    async def first(self, run: RunContext, prompt: str) -> Drafted:
        """Draft 0 from samples in waves (:mod:`.auto_rule` rule 1): on a task the verifier
        scores, one sample, then doubling while the samples' scores spread and the budget
        pays; on an answer task, ``width`` samples, then more while their answers are not
        settled: disagreement is answered by more independent votes before any critique
        (self-consistency, adaptively; the 1.5B critic approves wrong programs)."""
        drawn = self.width if self.votes else 1
        cands, last_call = await self.inner.gather(run, "generate", 0, prompt, drawn)
        while True:
            # counted by samples drawn, not drafts kept: an empty reply is no draft, and a wave
            # seeded where it was would repeat it until the budget ran out
            wave = min(self._next_wave(run, cands), self.most - drawn)
            if wave <= 0:
                break
            more, last_call = await self.inner.gather(run, "generate", 0, prompt, wave, start=drawn)
            cands, drawn = cands + more, drawn + wave
        self.width = max(1, min(len(cands), FIRST_WIDTH, self.most))  # the first round's width
        return await self.inner.choose(run, 0, cands, last_call)

    def _next_wave(self, run: RunContext, cands: list[Candidate]) -> int:
        """How many more first drafts the rule asks for (0: no more)."""
        remaining, costs = self.budget.remaining(run), self.budget.costs(run)
        if self.votes:
            return next_wave(run.board.answers(), len(cands), remaining, costs, self.most)
        checks = [run.board.of(c) for c in cands]
        round_cost = (costs.critique if run.settings.critic else 0.0) + MIN_ROUND * costs.sample
        passed = any(v is not None and v.passed for v in checks)
        scores = [score(v) for v in checks]
        wave, self.waves_why = next_draft_wave(scores, passed, remaining, costs, round_cost, self.most)
        return wave

    def before_round(self, run: RunContext, t: int) -> Stop | None:
        """Stop when the current draft satisfies the verifier, or when the budget cannot pay
        for the round's critique (where the critic makes one) and one sample; otherwise plan
        the round's width."""
        satisfied = self._satisfied(run, t)
        if satisfied is not None:
            return self._with_waves(t, satisfied)
        # a round without the critic (verifier_mode "verifier", a focused repair) makes no critique
        self.planned = self._plan(run, critique=run.settings.critic)
        if self.planned[0] == 0:
            return self._with_waves(t, Stop(StopReason.TOKEN_BUDGET, self.planned[1]))
        return None

    def _with_waves(self, t: int, stop: Stop) -> Stop:
        """A stop before any round says why the first draft's waves ended (rule 1)."""
        if t != 0 or not self.waves_why:
            return stop
        return Stop(stop.reason, f"{stop.detail}; first drafts: {self.waves_why}")

    async def refinement(self, run: RunContext, index: int, prompt: str) -> Drafted | Stop:
        width, why = self._width(run, prompt)
        if width == 0:
            return Stop(StopReason.TOKEN_BUDGET, why)
        return await self.inner.step(run, "refine", index, prompt, width)

    async def accept(self, run: RunContext, parent: Iteration, new: Iteration) -> Acceptance:
        acceptance = await self.inner.accept(run, parent, new)
        self.outcome = RoundOutcome(accepted=not acceptance.rejected, echoed=acceptance.echoed)
        return acceptance

    def known_critique(self, run: RunContext, t: int) -> Feedback | None:
        return self.inner.known_critique(run, t)

    def feedback(self, run: RunContext, t: int, feedback: Feedback) -> Feedback:
        return self.inner.feedback(run, t, feedback)

    def _width(self, run: RunContext, prompt: str) -> tuple[int, str]:
        """The width of the round's next samples: the one planned with the critique, priced
        again by the rendered refinement ``prompt``; a retry after a rejected round makes
        no critique, and is planned anew."""
        if self.planned is None:
            return self._plan(run, critique=False, prompt=prompt)
        (planned, why), self.planned = self.planned, None
        remaining = self.budget.remaining(run)
        fits = affordable_width(planned, remaining, self.budget.costs(run, prompt), critique=False)
        if fits == 0:
            return 0, f"the budget left ({remaining:.0f} tokens) pays for no sample of this round's prompt"
        return fits, why if fits == planned else f"{why}; {fits} of {planned} samples fit in the budget left"

    def _plan(self, run: RunContext, critique: bool, prompt: str | None = None) -> tuple[int, str]:
        remaining, costs = self.budget.remaining(run), self.budget.costs(run, prompt)
        width, why = plan_round(self.width, self.outcome, remaining, costs, critique=critique, most=self.most)
        self.width = width or self.width
        return width, why

    def _satisfied(self, run: RunContext, t: int) -> Stop | None:
        """Whether the verifier passes draft t (on an answer task: whether the votes are
        settled and draft t carries the leading answer)."""
        check = run.board.of_iteration(t)
        if check is None:
            return None
        if self.votes:
            answers = run.board.answers()
            settled_here = settled(answers) and check.passed is not False
            if not (settled_here and check.answer == majority_answer(run.board.counts())):
                return None
            detail = f"the votes are settled on draft {t}'s answer ({lead(answers)} ahead)"
        elif check.passed:
            detail = f"the task's verifier is satisfied with draft {t}"
        else:
            return None
        return Stop(StopReason.VERIFIED, detail)
