"""``strategy="auto"`` as a drafting part: :class:`Budgeted` chooses each round's samples
and when to stop from the token budget and what the verifier saw (the rule:
:mod:`.strategy`), and drafts each step with a best of K (:mod:`.sampling`) of that width.
"""

from __future__ import annotations

from ..core.records import Candidate, DecisionStep, Iteration, StopReason
from .budget import TokenBudget
from .context import RunContext
from .drafting import Drafted, Drafter, Verdict
from .ranking import score
from .sampling import BestOfK, Votes
from .strategy import (
    FIRST_WIDTH,
    MIN_ROUND,
    RoundOutcome,
    affordable_width,
    lead,
    next_draft_wave,
    next_wave,
    plan_round,
    settled,
)
from .votes import majority_answer


class Budgeted(Drafter):
    """The auto strategy: a width per round, priced in tokens; an answer task's first draft
    sampled in waves until its votes are settled."""

    def __init__(self, width: int, votes: bool) -> None:
        self.budget = TokenBudget()
        self.votes = votes
        self.inner: BestOfK = (Votes if votes else BestOfK)(width, self.budget)
        self.width = width  # the last round's width
        self.outcome: RoundOutcome | None = None  # what the verifier saw in the last round
        self.planned: tuple[int, str] | None = None  # the width planned for the round begun
        self.waves_why = ""  # why the first draft's waves stopped, in words

    async def first(self, run: RunContext, prompt: str) -> Drafted:
        """Draft 0 from samples in waves (:mod:`.strategy` rule 1): on a task the verifier
        scores, one sample, then doubling while the samples' scores spread and the budget
        pays; on an answer task, ``width`` samples, then more while their answers are not
        settled: disagreement is answered by more independent votes before any critique
        (self-consistency, adaptively; the 1.5B critic approves wrong programs)."""
        cands, last_call = await self.inner.gather(run, "generate", 0, prompt, self.width if self.votes else 1)
        while True:
            wave = self._next_wave(run, cands)
            if wave == 0:
                break
            more, last_call = await self.inner.gather(run, "generate", 0, prompt, wave, start=len(cands))
            cands += more
        self.width = max(1, min(len(cands), FIRST_WIDTH))  # the first round's width
        return await self.inner.choose(run, 0, cands, last_call)

    def _next_wave(self, run: RunContext, cands: list[Candidate]) -> int:
        """How many more first drafts the rule asks for (0: no more)."""
        remaining, costs = self.budget.remaining(run), self.budget.costs(run)
        if self.votes:
            pool = run.state.pool
            answers = [e.answer for e in pool.entries]
            return next_wave(answers, len(cands), remaining, costs)
        checks = [c.verification for c in cands]
        round_cost = (costs.critique if run.settings.critic else 0.0) + MIN_ROUND * costs.sample
        passed = any(v is not None and v.passed for v in checks)
        wave, self.waves_why = next_draft_wave([score(v) for v in checks], passed, remaining, costs, round_cost)
        return wave

    def before_round(self, run: RunContext, t: int) -> DecisionStep | None:
        """Stop when the current draft satisfies the verifier, or when the budget cannot pay
        for the round's critique and one sample; otherwise plan the round's width."""
        satisfied = self._satisfied(run, t)
        if satisfied is not None:
            return self._with_waves(satisfied)
        self.planned = self._plan(run, critique=True)
        if self.planned[0] == 0:
            stop = DecisionStep(iteration=t, stop=True, reason=StopReason.TOKEN_BUDGET, detail=self.planned[1])
            return self._with_waves(stop)
        return None

    def _with_waves(self, decision: DecisionStep) -> DecisionStep:
        """A stop before any round says why the first draft's waves ended (rule 1)."""
        if decision.iteration != 0 or not self.waves_why:
            return decision
        return decision.model_copy(update={"detail": f"{decision.detail}; first drafts: {self.waves_why}"})

    async def refinement(self, run: RunContext, index: int, prompt: str) -> Drafted | DecisionStep:
        width, why = self._width(run, prompt)
        if width == 0:
            return DecisionStep(iteration=run.state.current, stop=True, reason=StopReason.TOKEN_BUDGET, detail=why)
        return await self.inner.step(run, "refine", index, prompt, width)

    async def judge(self, run: RunContext, parent: Iteration, new: Iteration) -> Verdict:
        verdict = await self.inner.judge(run, parent, new)
        self.outcome = RoundOutcome(accepted=not verdict.rejected, echoed=verdict.echoed)
        return verdict

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
        width, why = plan_round(self.width, self.outcome, remaining, costs, critique=critique)
        self.width = width or self.width
        return width, why

    def _satisfied(self, run: RunContext, t: int) -> DecisionStep | None:
        """Whether the verifier passes draft t (on an answer task: whether the votes are
        settled and draft t carries the leading answer)."""
        check = run.state.iterations[t].verification
        if check is None:
            return None
        if self.votes:
            pool = run.state.pool
            answers = [e.answer for e in pool.entries]
            settled_here = settled(answers) and check.passed is not False
            if not (settled_here and check.answer == majority_answer(pool.counts())):
                return None
            detail = f"the votes are settled on draft {t}'s answer ({lead(answers)} ahead)"
        elif check.passed:
            detail = f"the task's verifier is satisfied with draft {t}"
        else:
            return None
        return DecisionStep(iteration=t, stop=True, reason=StopReason.VERIFIED, detail=detail)
