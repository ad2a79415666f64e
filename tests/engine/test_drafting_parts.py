"""The drafting parts alone (engine/drafting/): each driven
through a RunContext over a stub caller that answers from a script, with no engine, no
backend and no loop around it."""

from __future__ import annotations

import asyncio

from selfrefine import Task
from selfrefine.backends.base import CompletionRequest, CompletionResponse
from selfrefine.core.config import RefineConfig
from selfrefine.core.records import CallRecord, Feedback, Iteration
from selfrefine.engine.calls import CallLog
from selfrefine.engine.context import RunContext
from selfrefine.engine.drafting.auto import Budgeted
from selfrefine.engine.drafting.best_of import BestOfK
from selfrefine.engine.drafting.one import OneDraft
from selfrefine.engine.drafting.registry import find_strategy
from selfrefine.engine.drafting.voting import Votes
from selfrefine.engine.refinement import verifies_every_draft
from selfrefine.engine.scoring.scoreboard import Scoreboard
from selfrefine.engine.settings import Settings
from selfrefine.engine.state import RunState
from selfrefine.engine.stopping import StopRules


class StubCaller:
    """Answers each call from ``replies`` in order and keeps every request it was sent."""

    def __init__(self, log: CallLog, replies: list[str]) -> None:
        self.log, self.replies, self.requests = log, list(replies), []

    async def call(
        self, role, t, request: CompletionRequest, samples: int = 1, *, stream=False, purpose=None, sample=0
    ):
        out = []
        for _ in range(samples):
            self.requests.append(request)
            call = CallRecord(role=role, iteration=t, attempt=1, model="stub", prompt_tokens=10, completion_tokens=5)
            self.log.calls.append(call)
            call.response = self.replies.pop(0)
            out.append((CompletionResponse(text=call.response, prompt_tokens=10, completion_tokens=5), call))
        return out


def length_task() -> Task:
    """A task whose verifier scores a draft by its word count (4 words and more pass)."""
    task = Task(
        "words", generate="Write about {{ input }}.", feedback="Critique: {{ draft }}", refine="Better: {{ draft }}"
    )
    return task.with_verifier(lambda _input, draft: min(1.0, len(draft.split()) / 4))


def context(task: Task, replies: list[str], **options) -> tuple[RunContext, StubCaller]:
    settings = Settings.resolve(RefineConfig.build(**options), task, find_strategy)
    state = RunState(input="cats", reference=None, board=Scoreboard(votes=settings.sampling.votes))
    caller = StubCaller(state.log, replies)
    run = RunContext(task, settings, state, caller)  # type: ignore[arg-type]
    run.verify_every_draft = verifies_every_draft(settings, find_strategy(settings.sampling.strategy), StopRules(run))
    return run, caller


def test_one_draft_makes_one_call_and_keeps_its_reply():
    run, caller = context(length_task(), ["a cat"])
    made = asyncio.run(OneDraft().first(run, "Write about cats."))
    assert (made.iteration.index, made.iteration.draft, made.iteration.candidates) == (0, "a cat", [])
    assert made.call is run.state.log.calls[0] and len(caller.requests) == 1


def test_one_draft_rejects_a_worse_refinement_under_not_worse():
    run, _ = context(length_task(), [], accept="not_worse")
    parent, worse = Iteration(index=0, draft="one two three four"), Iteration(index=1, draft="one")
    run.state.iterations += [parent, worse]
    asyncio.run(run.verify(0))  # the parent's score is on the board, as the loop leaves it
    acceptance = asyncio.run(OneDraft().accept(run, parent, worse))
    assert acceptance.rejected == "verifier score fell 1.00 → 0.25" and not acceptance.stops


def test_one_draft_stops_on_an_unchanged_refinement():
    run, _ = context(length_task(), [])
    parent, same = Iteration(index=0, draft="a  cat"), Iteration(index=1, draft="a cat")
    run.state.iterations += [parent, same]
    acceptance = asyncio.run(OneDraft().accept(run, parent, same))
    assert (acceptance.rejected, acceptance.echoed, acceptance.stops) == ("", True, True)


def test_best_of_k_keeps_the_verifiers_best_and_the_earlier_of_a_tie():
    run, caller = context(length_task(), ["one", "one two three four", "a b c d"], samples=3, feedback_mode="none")
    made = asyncio.run(BestOfK(3).first(run, "Write about cats."))
    assert made.iteration.draft == "one two three four"
    assert [c.chosen for c in made.iteration.candidates] == [False, True, False]
    assert run.board.of_iteration(0).score == 1.0 and made.iteration.verification is None  # published by the loop
    # this task drafts greedily: its greedy draft first, then samples at the sampling temperature
    assert [(r.temperature, r.seed) for r in caller.requests] == [(0.0, 0), (0.7, 1), (0.7, 1)]


def test_best_of_k_samples_every_draft_when_the_run_sets_a_temperature():
    run, caller = context(length_task(), ["x", "y"], samples=2, feedback_mode="none", temperature=0.5)
    asyncio.run(BestOfK(2).first(run, "p"))
    assert [(r.temperature, r.seed) for r in caller.requests] == [(0.5, 0), (0.5, 0)]


def test_best_of_k_rejects_a_round_that_only_ties_its_parent():
    run, _ = context(length_task(), ["one two", "one two"], samples=2, feedback_mode="none")
    parent = Iteration(index=0, draft="a b")
    run.state.iterations.append(parent)
    asyncio.run(run.verify(0))  # 0.50: two words of four
    made = asyncio.run(BestOfK(2).refinement(run, 1, "p"))
    run.state.iterations.append(made.iteration)
    acceptance = asyncio.run(BestOfK(2).accept(run, parent, made.iteration))
    assert acceptance.rejected == "no sample scored higher than draft 0 (0.50 vs 0.50; a tie keeps the parent)"


def test_best_of_k_asks_the_critic_to_break_a_tie_and_keeps_its_choice():
    critique_wins = '{"done": true}'
    task = length_task()
    task.parse_feedback = lambda text, **_: Feedback(text=text, done="done" in text)  # type: ignore[method-assign]
    run, caller = context(task, ["a b", "c d", "no", critique_wins], samples=2)
    made = asyncio.run(BestOfK(2).first(run, "p"))
    assert made.iteration.draft == "c d"  # the critic found the second done
    assert [c.feedback.text for c in made.iteration.candidates] == ["no", critique_wins]
    assert [r.role for r in caller.requests] == ["generate", "generate", "feedback", "feedback"]


def test_votes_never_ask_the_critic():
    assert Votes(2)._critic_decides(None, 1, [], [0, 1]) is False  # type: ignore[arg-type]


def test_the_settings_choose_one_part_per_run():
    task = length_task()

    def part(**options):
        settings = Settings.resolve(RefineConfig.build(**options), task, find_strategy)
        return type(find_strategy(settings.sampling.strategy).drafter(settings)).__name__

    assert part() == "OneDraft"
    assert part(samples=3) == "BestOfK"
    assert part(strategy="auto", max_total_tokens=500) == "Budgeted"


def test_budgeted_stops_before_a_round_the_budget_cannot_pay_for():
    run, _ = context(length_task(), [], strategy="auto", max_total_tokens=20)
    run.state.iterations.append(Iteration(index=0, draft="a"))
    asyncio.run(run.verify(0))  # 0.25, not passed
    run.state.log.calls.append(CallRecord(role="generate", iteration=0, attempt=1, model="s", prompt_tokens=15))
    stop = Budgeted(2, votes=False).before_round(run, 0)
    assert stop is not None and stop.reason == "token_budget" and "pays for no critique" in stop.detail


def test_budgeted_stops_once_the_verifier_is_satisfied():
    run, _ = context(length_task(), [], strategy="auto", max_total_tokens=5000)
    run.state.iterations.append(Iteration(index=0, draft="a b c d"))
    asyncio.run(run.verify(0))  # 1.0, passed
    stop = Budgeted(2, votes=False).before_round(run, 0)
    assert stop is not None and stop.reason == "verified"
