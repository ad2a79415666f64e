"""Several samples per step (``RefineConfig.samples`` > 1, or ``strategy="auto"``): the
steps of a :class:`~.refinement.Refinement` that sample K drafts of one prompt, check each,
keep the best (ties: the earlier, or the critic's choice when a round follows), judge
whether a round's best earns its place over its parent, and let the auto strategy
(:mod:`.strategy`) choose each round's width and when the votes are settled.

A mixin: it reads the run's state (iterations, pool, log, caller) and calls the
refinement's prompt, critique and decision steps; the rules themselves are pure functions
in :mod:`.candidates`, :mod:`.strategy` and :mod:`.votes`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from ..core.errors import BackendError, ParseError
from ..core.records import (
    CallRecord,
    Candidate,
    DecisionStep,
    Feedback,
    FeedbackStep,
    Iteration,
    Role,
    Step,
    StopReason,
    Verification,
)
from .calls import BudgetExceeded
from .candidates import best, critic_rank, earns_place, score, ties
from .incomplete import demoted
from .selection import rejection_detail, score_text
from .strategy import Costs, RoundOutcome, affordable_width, lead, next_wave, plan_round, settled
from .votes import majority_answer, tally


class SampledSteps:
    """The sampling steps of one run, mixed into Refinement, whose state they read."""

    iterations: list[Iteration]
    current: int
    transcript: list[int]
    verified: set[int]
    stopped: bool
    width: int
    outcome: RoundOutcome | None
    planned: tuple[int, str] | None
    pool: Any  # candidates.Pool
    log: Any  # calls.CallLog
    caller: Any  # calls.Caller
    config: Any  # core.config.RefineConfig
    settings: Any  # settings.Settings
    task: Any  # task.Task
    input: str

    async def _checked(self, draft: str, finish_reason: str | None) -> Verification | None:
        """The task's check of a draft (in a thread), demoted when its reply was cut off."""
        return demoted(await asyncio.to_thread(self.task.verify, self.input, draft), finish_reason)

    async def _refine_sampled(self, t: int) -> AsyncIterator[Step]:
        """Refine draft t with several samples a round until the best earns its place (a
        higher verifier score than draft t) or a stop rule holds; ties keep draft t."""
        while not self.stopped:
            prompt = self._refine_prompt()
            n, width, why = len(self.iterations), *self._next_width(prompt=prompt)
            if width == 0:
                yield self._stop(DecisionStep(iteration=t, stop=True, reason=StopReason.TOKEN_BUDGET, detail=why))
                return
            it = await self._sampled("refine", n, prompt, width)
            self.iterations.append(it)
            self.pool.rescore(self.iterations)
            rejected = self._judge_round(t, it)  # before the draft is shown, so it shows as rejected
            for step in self._drafted(n, it.draft, chosen(it).call, it.candidates, accepted=not rejected):
                yield step
            if not rejected:
                self.transcript.append(t)
                self.current = n
                return
            yield FeedbackStep(iteration=n, feedback=it.feedback)
            self.transcript += [t, n]
            decision = self._stop(self._decide(n, None))
            yield decision.model_copy(update={"detail": rejection_detail(rejected, t, decision)})

    def _judge_round(self, t: int, it: Iteration) -> str:
        """Whether round ``it`` replaces draft t ("" ) or why not; a rejected round gets the
        verifier's findings as its feedback, and the outcome steers the auto strategy."""
        parent = self.iterations[t]
        echoed = all(same_text(c.draft, parent.draft) for c in it.candidates)
        accepted = not echoed and earns_place(it.verification, chosen(it).feedback, parent)
        self.outcome = RoundOutcome(accepted=accepted, echoed=echoed)
        if accepted:
            return ""
        it.accepted = False
        check = it.verification
        it.feedback = Feedback(text=check.text if check else "", source="verifier", verification=check)
        why = (
            f"all {len(it.candidates)} samples repeated draft {t}"
            if echoed
            else f"no sample scored higher than draft {t} ({score_text(check)} vs {score_text(parent.verification)}; "
            "a tie keeps the parent)"
        )
        return f"rejected: {why}"

    def _next_width(self, critique: bool = False, prompt: str | None = None) -> tuple[int, str]:
        """The samples of the next round: fixed, or the auto strategy's choice (planned with
        the critique before it is made, then priced again by the refinement ``prompt`` once
        it is rendered; a retry after a rejected round makes no critique)."""
        if self.config.strategy != "auto":
            return self.config.samples, ""
        remaining = self._remaining()
        costs = self._costs(prompt)
        if self.planned is not None:
            (planned, why), self.planned = self.planned, None
            fits = affordable_width(planned, remaining, costs, critique=False)
            if fits == 0:
                return 0, f"the budget left ({remaining:.0f} tokens) pays for no sample of this round's prompt"
            return fits, why if fits == planned else f"{why}; {fits} of {planned} samples fit in the budget left"
        width, why = plan_round(self.width, self.outcome, remaining, costs, critique=critique)
        self.width = width or self.width
        return width, why

    def _remaining(self) -> float:
        """Tokens the auto strategy's budget has left."""
        return (self.config.max_total_tokens or 0) - self.log.tokens()

    def _costs(self, prompt: str | None = None) -> Costs:
        """The next calls' tokens: the latest call of each kind plus what the history grew by
        since (the draft and critique a round adds); before a kind's first call, from the
        calls its prompt would hold (a critique reads a draft, a refinement the critique).
        A rendered refinement ``prompt`` is priced by its length, at the generate prompt's
        tokens per character (the refine template can be twice the generate one)."""
        ok = [c for c in self.log.calls if c.ok]
        latest = {c.role: c for c in ok}  # the last call of each role
        drafts = [c.completion_tokens for c in ok if c.role in ("generate", "refine")]
        written = sum(drafts) / len(drafts) if drafts else 0.0
        gen, fb, ref = latest.get("generate"), latest.get("feedback"), latest.get("refine")
        first = float(gen.prompt_tokens + gen.completion_tokens) if gen else 0.0
        said = fb.completion_tokens if fb else 0
        if fb is not None:
            critique = fb.prompt_tokens + fb.completion_tokens + written + said
        else:  # its prompt holds the draft; its reply is about a draft's length
            critique = first + written
        if ref is not None:
            sample = ref.prompt_tokens + ref.completion_tokens + written + said
        else:  # its prompt holds the critique's prompt and reply
            sample = critique + written
        if prompt is not None and gen is not None:
            per_char = gen.prompt_tokens / max(1, len(self.task.render("generate", self.input)))
            sample = max(sample, per_char * len(prompt) + written)
        return Costs(sample=sample, critique=critique, draft=first or None)

    def _satisfied(self, t: int) -> DecisionStep | None:
        """The auto strategy stops once the verifier passes the current draft (on an answer
        task: once the votes are settled and the draft carries the leading answer)."""
        check = self.iterations[t].verification
        if self.config.strategy != "auto" or check is None:
            return None
        if self.settings.votes:
            answers = [e.answer for e in self.pool.entries]
            if not (settled(answers) and check.passed is not False and check.answer == majority_answer(tally(answers))):
                return None
            detail = f"the votes are settled on draft {t}'s answer ({lead(answers)} ahead)"
        elif check.passed:
            detail = f"the task's verifier is satisfied with draft {t}"
        else:
            return None
        return DecisionStep(iteration=t, stop=True, reason=StopReason.VERIFIED, detail=detail)

    async def _sampled(self, role: Role, n: int, prompt: str, k: int) -> Iteration:
        """Iteration n from k samples of one prompt: each checked, the best chosen."""
        cands, last_call = await self._samples(role, n, prompt, k)
        if n == 0:
            cands += await self._more_votes(prompt, len(cands))
        if not cands:  # every sample empty: the step repeats the draft it refines (an echo)
            cands = [Candidate(draft=self.iterations[self.current].draft if self.iterations else "", call=last_call)]
            parent = self.iterations[self.current].finish_reason if self.iterations else None
            self.pool.add(cands[0], await self._checked(cands[0].draft, parent))
        cands[await self._break_ties(n, cands)].chosen = True
        self.verified.add(n)
        top = chosen_of(cands)
        finish = top.call.finish_reason if top.call is not None else None
        return Iteration(
            index=n, draft=top.draft, verification=top.verification, candidates=cands, finish_reason=finish
        )

    async def _samples(
        self, role: Role, n: int, prompt: str, k: int, start: int = 0
    ) -> tuple[list[Candidate], CallRecord]:
        """k samples of one prompt for step n (seeded from ``start`` on), each checked and
        added to the pool; an empty reply is no candidate. When the role drafts greedily
        (temperature 0, as gsm8k's), the step's first sample is that greedy draft, the one
        the paper's loop would keep, and the others explore at the sampling temperature: the
        best of K then holds what one sample would have given."""
        seed = (self.config.seed or 0) + 1000 * n + start
        request = self._request(role, prompt, None, 1).model_copy(
            update={"temperature": self.settings.sample_temperature, "seed": seed}
        )
        pairs = []
        if start == 0 and self.settings.temperature[role] == 0 and self.config.temperature is None:
            greedy = request.model_copy(update={"temperature": 0.0})
            pairs += await self.caller.call(role, n, greedy)
            request, k = request.model_copy(update={"seed": seed + 1}), k - 1
        if k > 0:
            pairs += await self.caller.call(role, n, request, n=k)
        cands = [c for c in (self._candidate(r.text, call) for r, call in pairs) if c is not None]
        checks = await asyncio.gather(*(self._checked(c.draft, c.call and c.call.finish_reason) for c in cands))
        for cand, check in zip(cands, checks):
            self.pool.add(cand, check)
        return cands, pairs[-1][1]

    async def _more_votes(self, prompt: str, have: int) -> list[Candidate]:
        """The auto strategy on an answer task: first drafts are sampled in waves while their
        answers are not settled (strategy.settled), up to MAX_WIDTH and what the budget pays
        for: disagreement among votes is answered by more independent votes before any
        critique (self-consistency, adaptively; the 1.5B critic approves wrong programs)."""
        more: list[Candidate] = []
        while self.config.strategy == "auto" and self.settings.votes:
            answers = [e.answer for e in self.pool.entries]
            remaining = self._remaining()
            wave = next_wave(answers, have + len(more), remaining, self._costs())
            if wave == 0:
                return more
            cands, _ = await self._samples("generate", 0, prompt, wave, start=have + len(more))
            more += cands
        return more

    async def _break_ties(self, n: int, cands: list[Candidate]) -> int:
        """The sample kept for step n: the verifier's best; among samples it ties at the top,
        the one the critic finds done (then scores higher), each distinct text critiqued once
        with the prompt it will have as step n's draft, so the kept one's critique is reused
        (at the refinement cap, only with ``final_feedback``: otherwise the first of the tie),
        and always when a refinement ties its parent on the verifier: then only the critic
        can let it earn its place (:func:`.candidates.earns_place`)."""
        tied = ties(cands)
        if not self._critic_decides(n, cands, tied):
            return best(cands)
        transcript = [*self.transcript, self.current] if n else []
        seen: dict[str, Feedback] = {}
        try:
            for i in tied:
                text = normal_text(cands[i].draft)
                if text not in seen:
                    seen[text] = await self._critique(n, cands[i].draft, transcript)
                cands[i].feedback = seen[text]
        except (BudgetExceeded, BackendError):
            # the samples are finished work: keep the verifier's choice, and let the run's
            # next call meet the spent budget or the failing backend and stop there
            return best(cands)
        return max(tied, key=lambda i: (*critic_rank(cands[i].feedback), -i))

    def _critic_decides(self, n: int, cands: list[Candidate], tied: list[int]) -> bool:
        """Whether the critic sees step n's samples tied at the top: to break the tie while a
        round follows (it reuses the critique), or to judge a refinement that ties its parent."""
        cfg = self.config
        if cfg.feedback_mode != "actionable" or cfg.verifier_mode == "verifier" or self.settings.votes:
            return False  # no critic; or, with votes, samples tied at the top share one answer
        if cfg.strategy == "auto":  # critiques the budget cannot pay for are not asked for
            texts = {normal_text(cands[i].draft) for i in tied}  # one critique per distinct text
            if self._remaining() < self._costs().critique * len(texts):
                return False
        parent = self.iterations[self.current] if n else None
        if parent is not None and all(same_text(cands[i].draft, parent.draft) for i in tied):
            return False  # the top repeats its parent, whose critique is known: nothing to judge
        if parent is not None and not (parent.feedback is not None and parent.feedback.done is True):
            if score(cands[tied[0]].verification) == score(parent.verification):
                return True
        return len(tied) >= 2 and (not self._at_cap(n) or cfg.final_feedback)

    def _candidate(self, text: str, call: CallRecord) -> Candidate | None:
        """A sample as a candidate: parsed, or its raw text with the call marked failed."""
        try:
            return Candidate(draft=self.task.parse_draft(text), call=call)
        except ParseError as exc:
            self.log.failed(call, f"parse: {exc}")
            raw = text.strip()
            return Candidate(draft=raw, call=call) if raw else None


def chosen_of(candidates: list[Candidate]) -> Candidate:
    return next(c for c in candidates if c.chosen)


def chosen(it: Iteration) -> Candidate:
    return chosen_of(it.candidates)


def normal_text(text: str) -> str:
    """A draft's text with its whitespace normalised: drafts that differ only there are one."""
    return " ".join(text.split())


def same_text(a: str, b: str) -> bool:
    return normal_text(a) == normal_text(b)
