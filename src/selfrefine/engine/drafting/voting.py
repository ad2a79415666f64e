"""Best of K for an answer task (gsm8k): samples scored by agreement (self-consistency).

The votes themselves are the run's scoreboard's (:mod:`~selfrefine.engine.scoring.scoreboard`),
counted by the pure rules of :mod:`~selfrefine.engine.scoring.votes`.
"""

from __future__ import annotations

from ...core.records import Candidate, Feedback, Role
from ...core.seeds import way_seed
from ..context import RunContext
from .best_of import BestOfK, Requests


class Votes(BestOfK):
    """Best of K for an answer task: a sample's score is the share of the run's samples that
    give its answer (read from the board as samples arrive), so samples tied at the top share
    one answer and neither the judge nor the critic is asked to break the tie. The first
    draft's samples are written the run's ``ways`` in turn (gsm8k: a program, a step-by-step
    answer, ...), each way's first one greedy where the role drafts greedily: two ways of
    solving misread a question differently, where one way's samples repeat one misreading.
    A disputed draft's feedback shows the other answers' drafts (:meth:`feedback`)."""

    async def requests(
        self, run: RunContext, role: Role, index: int, prompt: str, samples: int, start: int
    ) -> Requests:
        sampling = run.settings.sampling
        ways = sampling.ways
        if role != "generate" or index != 0 or len(ways) < 2:
            return await super().requests(run, role, index, prompt, samples, start)
        out: Requests = []
        for j in range(start, start + samples):
            way = ways[j % len(ways)]
            first = way == run.task.declared.ways[0]
            text = prompt if first else await run.render(f"generate_{way}")
            greedy = sampling.greedy_first[role] and j < len(ways)
            request = run.request(role, text, None, 1).model_copy(
                update={
                    "temperature": 0.0 if greedy else sampling.temperature,
                    "seed": way_seed(run.settings.requests.seed, j),
                }
            )
            out.append((way, request, 1))
        return out

    def feedback(self, run: RunContext, t: int, feedback: Feedback) -> Feedback:
        """Draft t's feedback; when the samples disagree, with the other answers' drafts, so
        the refinement weighs the readings (not for a generic or absent feedback)."""
        if feedback.source in ("generic", "none"):
            return feedback
        check = run.board.of_iteration(t)
        rivals = run.board.rivals(check.answer if check is not None else None)
        return feedback.model_copy(update={"text": f"{feedback.text}\n{rivals}".strip()}) if rivals else feedback

    def _critic_decides(self, run: RunContext, index: int, cands: list[Candidate], tied: list[int]) -> bool:
        return False
