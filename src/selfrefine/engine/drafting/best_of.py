"""Several samples per step (``samples`` > 1): :class:`BestOfK` samples K drafts of one
prompt, checks each, keeps the best (ties: the task's judge, or with ``judging`` off the
earlier, or the critic's choice when a round follows), and lets a refinement replace its
parent only when it earns its place.

The rules are pure functions in :mod:`~selfrefine.engine.scoring.ranking`; every sample's score is
on the run's scoreboard (:mod:`~selfrefine.engine.scoring.scoreboard`).
"""

from __future__ import annotations

import asyncio

from ...backends.base import CompletionRequest
from ...core.errors import BackendError, ParseError
from ...core.records import CallRecord, Candidate, Feedback, Iteration, Role, Verification
from ...core.seeds import sample_seed
from ..calls import BudgetExceeded
from ..context import RunContext
from ..judge import code_ties, judge_candidates, judge_iterations
from ..scoring.ranking import best, best_of_tie, earns_place, score, ties
from ..scoring.scoreboard import normal_text, same_text
from ..scoring.selection import score_text
from .base import Acceptance, Drafted, Drafter
from .budget import TokenBudget

Requests = list[tuple["str | None", CompletionRequest, int]]  # (way, request, samples)


class BestOfK(Drafter):
    """K samples a step, the verifier's best kept. ``budget``: judgments and critiques that
    break ties must fit in it (the auto strategy's)."""

    def __init__(self, samples: int, budget: TokenBudget | None = None) -> None:
        self.samples, self.budget = samples, budget

    async def first(self, run: RunContext, prompt: str) -> Drafted:
        return await self.step(run, "generate", 0, prompt, self.samples)

    async def refinement(self, run: RunContext, index: int, prompt: str) -> Drafted:
        return await self.step(run, "refine", index, prompt, self.samples)

    async def step(self, run: RunContext, role: Role, index: int, prompt: str, samples: int) -> Drafted:
        """Step ``index`` from ``samples`` samples of one prompt: each checked, the best kept."""
        cands, last_call = await self.gather(run, role, index, prompt, samples)
        return await self.choose(run, index, cands, last_call)

    async def accept(self, run: RunContext, parent: Iteration, new: Iteration) -> Acceptance:
        """A round replaces its parent when its best earns its place (a higher verifier score;
        an equal one only with the judge's or the critic's done); a round whose every sample
        repeats its parent never does."""
        board = run.board
        echoed = all(same_text(c.draft, parent.draft) for c in new.candidates)
        if (
            not echoed
            and run.settings.judge.on
            and not same_text(new.draft, parent.draft)  # one text, one verdict: the judge cannot tell them apart
            and code_ties(board.of_iteration(new.index), board.of_iteration(parent.index))
        ):
            await judge_iterations(run, [parent.index, new.index])
        mine, theirs = board.of_iteration(new.index), board.of_iteration(parent.index)
        if not echoed and earns_place(mine, chosen(new).feedback, theirs, parent.feedback):
            return Acceptance()
        t = parent.index
        why = (
            f"all {len(new.candidates)} samples repeated draft {t}"
            if echoed
            else f"no sample scored higher than draft {t} ({score_text(mine)} vs "
            f"{score_text(theirs)}; a tie keeps the parent)"
        )
        return Acceptance(rejected=why, echoed=echoed)

    def known_critique(self, run: RunContext, t: int) -> Feedback | None:
        """The kept sample's critique, made when it broke a tie with the prompt it has now."""
        kept = next((c for c in run.state.iterations[t].candidates if c.chosen), None)
        return kept.feedback if kept is not None else None

    async def gather(
        self, run: RunContext, role: Role, index: int, prompt: str, samples: int, start: int = 0
    ) -> tuple[list[Candidate], CallRecord]:
        """``samples`` samples of one prompt for step ``index`` (seeded from ``start`` on), each
        checked and counted on the board; an empty reply is no candidate. When the role drafts
        greedily (temperature 0, as gsm8k's), the step's first sample is that greedy draft,
        the one the paper's loop would keep, and the others explore at the sampling
        temperature: the best of K then holds what one sample would have given."""
        requests = await self.requests(run, role, index, prompt, samples, start)
        firsts = [start + 1 + sum(n for _, _, n in requests[:k]) for k in range(len(requests))]  # samples numbered 1…
        batches = await asyncio.gather(
            *(
                run.caller.call(role, index, r, n, stream=True, sample=first)
                for (_, r, n), first in zip(requests, firsts)
            )
        )
        written = [(way, r.text, call) for (way, _, _), batch in zip(requests, batches) for r, call in batch]
        cands = [c for c in (self._candidate(run, text, call, way) for way, text, call in written) if c is not None]
        await run.scored(cands, [c.call and c.call.finish_reason for c in cands])
        return cands, batches[-1][-1][1]

    async def requests(
        self, run: RunContext, role: Role, index: int, prompt: str, samples: int, start: int
    ) -> Requests:
        """The step's calls as (way, request, samples): the greedy draft first where the role
        drafts greedily, then the samples at the sampling temperature, seeded from ``start``."""
        sampling = run.settings.sampling
        seed = sample_seed(run.settings.requests.seed, index, start)
        request = run.request(role, prompt, None, 1).model_copy(
            update={"temperature": sampling.temperature, "seed": seed}
        )
        out: Requests = []
        if start == 0 and sampling.greedy_first[role]:
            out.append((None, request.model_copy(update={"temperature": 0.0}), 1))
            request, samples = request.model_copy(update={"seed": seed + 1}), samples - 1
        if samples > 0:
            out.append((None, request, samples))
        return out

    async def choose(self, run: RunContext, index: int, cands: list[Candidate], last_call: CallRecord) -> Drafted:
        """Step ``index``'s iteration from its samples, the kept one marked chosen; no sample
        at all (every reply empty): the step repeats the draft it refines (an echo)."""
        state, board = run.state, run.board
        if not cands:
            parent = state.parent() if state.iterations else None
            cands = [Candidate(draft=parent.draft if parent else "", call=last_call)]
            await run.scored(cands, [parent.finish_reason if parent else None])
        top = cands[await self._break_ties(run, index, cands)]
        top.chosen = True
        board.placed(index, board.key(top))
        finish = top.call.finish_reason if top.call is not None else None
        return Drafted(Iteration(index=index, draft=top.draft, candidates=cands, finish_reason=finish), top.call)

    async def _break_ties(self, run: RunContext, index: int, cands: list[Candidate]) -> int:
        """The sample kept for step ``index``: the verifier's best; among samples it ties at
        the top, the judge's best (with ``judging`` off: the one the critic ranks first, each
        distinct text critiqued once with the prompt it will have as the step's draft, so the
        kept one's critique is reused)."""
        tied = ties(checks(run, cands))
        if run.settings.judge.on:
            return await self._judge_ties(run, index, cands, tied)
        if not self._critic_decides(run, index, cands, tied):
            return best(checks(run, cands))
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
            return best(checks(run, cands))
        return best_of_tie(checks(run, cands), [c.feedback for c in cands], tied)

    async def _judge_ties(self, run: RunContext, index: int, cands: list[Candidate], tied: list[int]) -> int:
        """The sample kept for step ``index`` when the task's judge ranks: among the samples the
        code ties at the top (distinct texts only), the judge's best; at the cap too. Not asked
        where its answer cannot change what the step keeps: one distinct text, or refinements
        that the code checks score below their parent (the round is rejected whichever is kept)."""
        distinct = len({normal_text(cands[i].draft) for i in tied})
        if distinct < 2 or self._below_parent(run, index, cands[tied[0]]):
            return best(checks(run, cands))
        if self.budget is not None and not self.budget.affords_judgments(run, distinct * len(run.task.declared.judges)):
            return best(checks(run, cands))  # judgments the budget cannot pay for are not asked for
        try:
            await judge_candidates(run, index, cands, tied)
        except (BudgetExceeded, BackendError):
            pass  # finished samples: keep what is judged, and let the next call stop the run
        return best(checks(run, cands))

    @staticmethod
    def _below_parent(run: RunContext, index: int, top: Candidate) -> bool:
        """Whether step ``index`` refines a draft that the code checks score above the step's
        best sample (:func:`~..scoring.ranking.earns_place` then rejects it, judged or not)."""
        if not index:
            return False
        return score(run.board.of(top)) < score(run.board.of_iteration(run.state.parent().index))

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
            if score(run.board.of(cands[tied[0]])) == score(run.board.of_iteration(parent.index)):
                return True
        return len(tied) >= 2 and (not run.at_cap(index) or settings.stops.final_feedback)

    @staticmethod
    def _candidate(run: RunContext, text: str, call: CallRecord, way: str | None = None) -> Candidate | None:
        """A sample as a candidate: parsed (as written its ``way``), or its raw text with the
        call marked failed."""
        try:
            return Candidate(draft=run.parse_draft(text, way), call=call, way=way)
        except ParseError as exc:
            run.state.log.failed(call, f"parse: {exc}")
            raw = text.strip()
            return Candidate(draft=raw, call=call, way=way) if raw else None


def checks(run: RunContext, cands: list[Candidate]) -> list[Verification | None]:
    """The samples' verifications as they stand on the board."""
    return [run.board.of(c) for c in cands]


def chosen(it: Iteration) -> Candidate:
    return next(c for c in it.candidates if c.chosen)
