"""The task's judge in the loop: where drafts are ranked and the code checks cannot tell them
apart, the model is asked the task's yes/no questions and its probabilities decide.

A task declares judged aspects (``Task.judges``: commongen's "does it make sense", a story's
coherence, premise and interest, chat's instruction following; a user's task ``judge=``).
The judge of a draft is the mean P(yes) over them (:class:`~.judging.Judge`: one prefill and
one decoded token a question, the draft before the question, so the aspects of one draft
share their prefix). It is asked only where it can decide something, with ``judging`` on:

- samples of one step that tie at the top on the code checks (or all of them, on a task with
  no code checks) are ordered by the judge, never by their position; at the refinement cap too;
- a refinement that ties its parent on the code checks replaces it only when the judge
  scores it more than :data:`~.ranking.MARGIN` (0.05) higher (a smaller difference is a tie, and a tie keeps
  the parent); under ``accept="not_worse"`` one scored more than MARGIN lower is rejected;
- ``select="verified"`` returns, among the drafts tied on the code checks, the judge's best.

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
from .judging import Judge, Question
from .ranking import score
from .state import normal_text

JUDGE_ROLE: Role = "judge"


def judging(run: RunContext) -> bool:
    """Whether this run's drafts are ranked by the task's judge where the code ties them
    (``Settings.judging``: on, and the task has a judge); never on an answer task's votes,
    whose tied samples share one answer."""
    return run.settings.judging and not run.settings.votes


async def judgments(run: RunContext, t: int, draft: str) -> list[Judgment]:
    """The judge's verdict on each aspect of ``draft`` (asked once per distinct text); empty
    when it gave no readable verdict."""
    key = normal_text(draft)
    if key not in run.state.judged:
        judge, task, found = Judge(run.caller, JUDGE_ROLE), run.task, []
        for aspect in task.judges:
            prompt = task.render_judge(aspect, run.state.input, draft)
            try:
                found.append(await judge.ask(t, Question(aspect, prompt)))
            except ParseError:
                break  # the call is in the log; an unjudged draft ranks below the judged
        run.state.judged[key] = found if len(found) == len(task.judges) else []
    return run.state.judged[key]


def with_judgments(check: Verification | None, found: list[Judgment]) -> Verification:
    """A draft's verification with the judge's verdicts (a task without code checks: the
    judge's alone, its text the aspects the judge doubts, for a rejected refinement's prompt)."""
    if not found:
        return check if check is not None else Verification(text="")
    mean = sum(j.score for j in found) / len(found)
    base = check or Verification(text=judged_text(found))
    return base.model_copy(update={"judged": round(mean, 6), "judgments": found})


def judged_text(found: list[Judgment]) -> str:
    doubted = [j.question for j in found if j.score < 0.5]
    return f"the judge doubts: {', '.join(doubted)}" if doubted else "the judge finds no problem"


async def judge_candidates(run: RunContext, t: int, cands: list[Candidate], indices: list[int]) -> None:
    """The judge on samples ``indices`` of step t, kept on each sample's check (in the pool,
    so votes and rescoring keep them)."""
    for i in indices:
        cand = cands[i]
        if cand.verification is None or cand.verification.judged is None:
            found = await judgments(run, t, cand.draft)
            run.state.pool.judged(cand, with_judgments(run.state.pool.check(cand), found))


async def judge_iterations(run: RunContext, indices: list[int]) -> None:
    """The judge on drafts ``indices``: a sampled step's through its kept sample, another's
    on its own verification."""
    state = run.state
    for t in indices:
        it = state.iterations[t]
        kept = next((c for c in it.candidates if c.chosen), None)
        if kept is not None:
            await judge_candidates(run, t, it.candidates, [it.candidates.index(kept)])
            it.verification = kept.verification
        elif it.verification is None or it.verification.judged is None:
            check = await run.verify(t)
            it.verification = with_judgments(check, await judgments(run, t, it.draft))


def code_ties(a: Verification | None, b: Verification | None) -> bool:
    """Whether the code checks cannot tell two drafts apart (equal scores, or none)."""
    return score(a) == score(b)
