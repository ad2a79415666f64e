"""The task's judge in the loop: where drafts are ranked and the code checks cannot tell them
apart, the model is asked the task's yes/no questions and its probabilities decide.

A task declares judged aspects (``Declaration.judges``: commongen's "does it make sense", a story's
coherence, premise and interest, chat's instruction following; a user's task ``judge=``).
The judge of a draft is the mean P(yes) over them (:class:`~.questions.Questions`: one prefill and
one decoded token a question, the draft before the question, so the aspects of one draft
share their prefix). It is asked only where it can decide something, with ``judging`` on:

- samples of one step that tie at the top on the code checks (or all of them, on a task with
  no code checks) are ordered by the judge, never by their position; at the refinement cap too;
- a refinement that ties its parent on the code checks replaces it only when the judge
  scores it more than :data:`~.ranking.MARGIN` (0.05) higher (a smaller difference is a tie, and a tie keeps
  the parent); under ``accept="not_worse"`` one scored more than MARGIN lower is rejected;
- ``select="verified"`` returns, among the drafts tied on the code checks, the judge's best.

It is not asked where the code checks decide, or where its answer cannot change what is kept:
drafts the checks score differently (one passing among failing ones), a lone candidate, tied
drafts that are one text (as is a refinement that keeps its parent's text), refinements the
checks score below their parent (the round is rejected whichever is kept), and a focused
repair (kept or rejected by its checks alone: :mod:`.focused`).

Pointwise, not A-vs-B: on the default model, asked in both orders, the A-vs-B question
flipped with the order on 26 of 53 sense pairs (0.47 accurate), where P(yes) put the sensible
sentence first on 51 of 53 (docs/judges.md). Each distinct text is judged once per run. A
judge that gives no readable verdict leaves the draft unjudged (ranked below judged ones; its
calls are in the run's log).
"""

from __future__ import annotations

from ..core.errors import ParseError
from ..core.records import Candidate, Judgment, Role, Verification
from .context import RunContext
from .scoring.questions import Question, Questions
from .scoring.ranking import score
from .scoring.scoreboard import normal_text

JUDGE_ROLE: Role = "judge"


async def judgments(run: RunContext, t: int, draft: str) -> list[Judgment]:
    """The judge's verdict on each aspect of ``draft``, asked once per distinct text and kept
    on the run's scoreboard; empty when it gave no readable verdict."""
    board = run.board
    if not board.has_judged(draft):
        questions, task, found = Questions(run.caller, JUDGE_ROLE), run.task, []
        aspects = task.declared.judges
        for aspect in aspects:
            prompt = await run.render(f"judge_{aspect}", draft=draft)
            try:
                found.append(await questions.ask(t, Question(aspect, prompt)))
            except ParseError:
                break  # the call is in the log; an unjudged draft ranks below the judged
        board.judged(draft, found if len(found) == len(aspects) else [])
    return board.judgments[normal_text(draft)]


async def judge_candidates(run: RunContext, t: int, cands: list[Candidate], indices: list[int]) -> None:
    """The judge on samples ``indices`` of step t (their texts: the board keeps the verdicts)."""
    for i in indices:
        await judgments(run, t, cands[i].draft)


async def judge_iterations(run: RunContext, indices: list[int]) -> None:
    """The judge on drafts ``indices`` (checked first, where they were not: their record
    shows what the judge ranked)."""
    for t in indices:
        it = run.state.iterations[t]
        if not run.board.was_checked(t):
            await run.verify(t)
        await judgments(run, t, it.draft)


def code_ties(a: Verification | None, b: Verification | None) -> bool:
    """Whether the code checks cannot tell two drafts apart (equal scores, or none)."""
    return score(a) == score(b)
