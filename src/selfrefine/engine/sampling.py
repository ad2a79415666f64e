"""Several samples per step (``samples`` > 1): :class:`BestOfK` samples K drafts of one
prompt, checks each, keeps the best (ties: the earlier, or the critic's choice when a round
follows), and lets a refinement replace its parent only when it earns its place;
:class:`Votes` does the same for an answer task, whose samples are scored by agreement.

The rules are pure functions in :mod:`.ranking` and :mod:`.votes`; the samples of a run are
kept in its pool (:class:`~.candidates.Pool`).
"""

from __future__ import annotations

import asyncio

from ..backends.base import CompletionRequest
from ..core.errors import BackendError, ParseError
from ..core.records import CallRecord, Candidate, DecisionStep, Feedback, Iteration, Role
from .budget import TokenBudget
from .calls import BudgetExceeded
from .context import RunContext
from .drafting import Drafted, Drafter, Verdict, normal_text, same_text
from .judged import code_ties, judge_candidates, judge_iterations, judging
from .ranking import best, best_of_tie, earns_place, score, ties
from .selection import score_text


class BestOfK(Drafter):
    """K samples a step, the verifier's best kept. ``budget``: critiques that break ties
    must fit in it (the auto strategy's)."""

    def __init__(self, samples: int, budget: TokenBudget | None = None) -> None:
        self.samples, self.budget = samples, budget

    async def first(self, run: RunContext, prompt: str) -> Drafted:
        return await self.step(run, "generate", 0, prompt, self.samples)

    async def refinement(self, run: RunContext, index: int, prompt: str) -> Drafted | DecisionStep:
        return await self.step(run, "refine", index, prompt, self.samples)

    async def step(self, run: RunContext, role: Role, index: int, prompt: str, samples: int) -> Drafted:
        """Step ``index`` from ``samples`` samples of one prompt: each checked, the best kept."""
        cands, last_call = await self.gather(run, role, index, prompt, samples)
        return await self.choose(run, index, cands, last_call)

    async def judge(self, run: RunContext, parent: Iteration, new: Iteration) -> Verdict:
        """A round replaces its parent when its best earns its place (a higher verifier score;
        an equal one only with the critic's done); a round whose every sample repeats its
        parent never does."""
        run.state.pool.rescore(run.state.iterations)  # the votes moved with the new samples
        kept = chosen(new)
        echoed = all(same_text(c.draft, parent.draft) for c in new.candidates)
        if not echoed and judging(run) and code_ties(new.verification, parent.verification):
            await judge_iterations(run, [parent.index, new.index])
        if not echoed and earns_place(new.verification, kept.feedback, parent):
            return Verdict()
        t = parent.index
        why = (
            f"all {len(new.candidates)} samples repeated draft {t}"
            if echoed
            else f"no sample scored higher than draft {t} ({score_text(new.verification)} vs "
            f"{score_text(parent.verification)}; a tie keeps the parent)"
        )
        return Verdict(rejected=why, echoed=echoed)

    async def gather(
        self, run: RunContext, role: Role, index: int, prompt: str, samples: int, start: int = 0
    ) -> tuple[list[Candidate], CallRecord]:
        """``samples`` samples of one prompt for step ``index`` (seeded from ``start`` on), each
        checked and added to the pool; an empty reply is no candidate. When the role drafts
        greedily (temperature 0, as gsm8k's), the step's first sample is that greedy draft,
        the one the paper's loop would keep, and the others explore at the sampling
        temperature: the best of K then holds what one sample would have given."""
        requests = self.requests(run, role, index, prompt, samples, start)
        batches = await asyncio.gather(*(run.caller.call(role, index, r, n) for _, r, n in requests))
        written = [(way, r.text, call) for (way, _, _), batch in zip(requests, batches) for r, call in batch]
        cands = [c for c in (self._candidate(run, text, call, way) for way, text, call in written) if c is not None]
        checks = await asyncio.gather(*(run.checked(c.draft, c.call and c.call.finish_reason) for c in cands))
        for cand, check in zip(cands, checks):
            run.state.pool.add(cand, check)
        return cands, batches[-1][-1][1]

    def requests(
        self, run: RunContext, role: Role, index: int, prompt: str, samples: int, start: int
    ) -> list[tuple[str | None, CompletionRequest, int]]:
        """The step's calls as (way, request, samples): the greedy draft first where the role
        drafts greedily, then the samples at the sampling temperature, seeded from ``start``."""
        settings = run.settings
        seed = (settings.seed or 0) + 1000 * index + start
        request = run.request(role, prompt, None, 1).model_copy(
            update={"temperature": settings.sample_temperature, "seed": seed}
        )
        out: list[tuple[str | None, CompletionRequest, int]] = []
        if start == 0 and settings.greedy_first[role]:
            out.append((None, request.model_copy(update={"temperature": 0.0}), 1))
            request, samples = request.model_copy(update={"seed": seed + 1}), samples - 1
        if samples > 0:
            out.append((None, request, samples))
        return out

    async def choose(self, run: RunContext, index: int, cands: list[Candidate], last_call: CallRecord) -> Drafted:
        """Step ``index``'s iteration from its samples, the kept one marked chosen; no sample
        at all (every reply empty): the step repeats the draft it refines (an echo)."""
        state = run.state
        if not cands:
            parent = state.parent() if state.iterations else None
            cands = [Candidate(draft=parent.draft if parent else "", call=last_call)]
            state.pool.add(cands[0], await run.checked(cands[0].draft, parent.finish_reason if parent else None))
        cands[await self._break_ties(run, index, cands)].chosen = True
        state.verified.add(index)
        top = chosen_of(cands)
        finish = top.call.finish_reason if top.call is not None else None
        it = Iteration(
            index=index, draft=top.draft, verification=top.verification, candidates=cands, finish_reason=finish
        )
        return Drafted(it, top.call)

    async def _break_ties(self, run: RunContext, index: int, cands: list[Candidate]) -> int:
        """The sample kept for step ``index``: the verifier's best; among samples it ties at
        the top, the one the critic ranks first, each distinct text critiqued once with the
        prompt it will have as the step's draft, so the kept one's critique is reused."""
        tied = ties(cands)
        if judging(run):
            return await self._judge_ties(run, index, cands, tied)
        if not self._critic_decides(run, index, cands, tied):
            return best(cands)
        state = run.state
        transcript = [*state.transcript, state.current] if index else []
        seen: dict[str, Feedback] = {}
        try:
            for i in tied:
                text = normal_text(cands[i].draft)
                if text not in seen:
                    seen[text] = await run.critique(index, cands[i].draft, transcript)
                cands[i].feedback = seen[text]
        except (BudgetExceeded, BackendError):
            # the samples are finished work: keep the verifier's choice, and let the run's
            # next call meet the spent budget or the failing backend and stop there
            return best(cands)
        return best_of_tie(cands, tied)

    async def _judge_ties(self, run: RunContext, index: int, cands: list[Candidate], tied: list[int]) -> int:
        """The sample kept for step ``index`` when the task's judge ranks: among the samples the
        code ties at the top (distinct texts only), the judge's best; at the cap too."""
        distinct = len({normal_text(cands[i].draft) for i in tied})
        if distinct < 2:
            return best(cands)
        if self.budget is not None and not self.budget.affords_judgments(run, distinct * len(run.task.judges)):
            return best(cands)  # judgments the budget cannot pay for are not asked for
        try:
            await judge_candidates(run, index, cands, tied)
        except (BudgetExceeded, BackendError):
            pass  # finished samples: keep what is judged, and let the next call stop the run
        return best(cands)

    def _critic_decides(self, run: RunContext, index: int, cands: list[Candidate], tied: list[int]) -> bool:
        """Whether the critic sees the samples tied at the top: to break the tie while a round
        follows (at the refinement cap only with ``final_feedback``; the critique is reused),
        or to judge a refinement that ties its parent (only the critic can then let it earn
        its place)."""
        settings = run.settings
        if not settings.critic:
            return False  # no critic
        if self.budget is not None:  # critiques the budget cannot pay for are not asked for
            if not self.budget.affords_critiques(run, len({normal_text(cands[i].draft) for i in tied})):
                return False
        parent = run.state.parent() if index else None
        if parent is not None and all(same_text(cands[i].draft, parent.draft) for i in tied):
            return False  # the top repeats its parent, whose critique is known: nothing to judge
        if parent is not None and not (parent.feedback is not None and parent.feedback.done is True):
            if score(cands[tied[0]].verification) == score(parent.verification):
                return True
        return len(tied) >= 2 and (not run.at_cap(index) or settings.final_feedback)

    @staticmethod
    def _candidate(run: RunContext, text: str, call: CallRecord, way: str | None = None) -> Candidate | None:
        """A sample as a candidate: parsed (as written its ``way``), or its raw text with the
        call marked failed."""
        try:
            draft = run.task.parse_draft(text) if way is None else run.task.parse_way(way, text)
            return Candidate(draft=draft, call=call, way=way)
        except ParseError as exc:
            run.state.log.failed(call, f"parse: {exc}")
            raw = text.strip()
            return Candidate(draft=raw, call=call, way=way) if raw else None


class Votes(BestOfK):
    """Best of K for an answer task: a sample's score is the share of the run's samples that
    give its answer (the pool recounts as samples arrive), so samples tied at the top share
    one answer and neither the judge nor the critic is asked to break the tie. The first
    draft's samples are written the run's ``ways`` in turn (gsm8k: a program, a step-by-step
    answer, ...), each way's first one greedy where the role drafts greedily: two ways of
    solving misread a question differently, where one way's samples repeat one misreading."""

    def requests(
        self, run: RunContext, role: Role, index: int, prompt: str, samples: int, start: int
    ) -> list[tuple[str | None, CompletionRequest, int]]:
        ways = run.settings.ways
        if role != "generate" or index != 0 or len(ways) < 2:
            return super().requests(run, role, index, prompt, samples, start)
        settings, out = run.settings, []
        for j in range(start, start + samples):
            way = ways[j % len(ways)]
            text = prompt if way == run.task.ways[0] else run.task.render_way(way, run.state.input)
            greedy = settings.greedy_first[role] and j < len(ways)
            request = run.request(role, text, None, 1).model_copy(
                update={"temperature": 0.0 if greedy else settings.sample_temperature, "seed": (settings.seed or 0) + j}
            )
            out.append((way, request, 1))
        return out

    def _critic_decides(self, run: RunContext, index: int, cands: list[Candidate], tied: list[int]) -> bool:
        return False


def chosen_of(candidates: list[Candidate]) -> Candidate:
    return next(c for c in candidates if c.chosen)


def chosen(it: Iteration) -> Candidate:
    return chosen_of(it.candidates)
