"""Where a chat reply puts the refinement trace (drafts, critiques, decisions), as
reasoning-model servers let the operator choose (llama-server's ``--reasoning-format``):

- ``reasoning_content``: the OpenAI-compatible reasoning field (the default); clients that
  ignore it (simonw's ``llm``) show none of the refinement;
- ``think``: ``<think>…</think>`` at the start of ``content``, which Open WebUI and many chat
  front-ends fold away and every other client shows as text;
- ``none``: no trace in the reply but its ``selfrefine`` field."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal, get_args

from ..core.records import (
    ChecksStep,
    DecisionStep,
    DraftStep,
    DroppedCheck,
    FeedbackStep,
    ResultStep,
    RunResult,
    Step,
)

ReasoningFormat = Literal["reasoning_content", "think", "none"]
REASONING_FORMATS: tuple[str, ...] = get_args(ReasoningFormat)
THINK_OPEN, THINK_CLOSE = "<think>\n", "</think>\n\n"


def dropped_note(dropped: list[DroppedCheck]) -> str:
    """The checks a run left out, each named with why, on one line (a finished run's record
    keeps them, not the live note)."""
    said = [d.said() for d in dropped[:5]]
    more = f"; and {len(dropped) - 5} more" if len(dropped) > 5 else ""
    return f"left out: {'; '.join(said)}{more}" if said else ""


def replay(result: RunResult, decisions: list[DecisionStep]) -> Iterator[Step]:
    """The trace's steps again, from a finished run: what a plain (not streamed) reply shows
    of it, in the order a stream sends them (failed calls aside)."""
    by_iteration: dict[int, list[DecisionStep]] = {}
    for decision in decisions:
        by_iteration.setdefault(decision.iteration, []).append(decision)
    if result.checks or result.checks_dropped:
        yield ChecksStep(checks=result.checks, dropped=result.checks_dropped, note=dropped_note(result.checks_dropped))
    for it in result.iterations:
        yield DraftStep(iteration=it.index, draft=it.draft, candidates=it.candidates)
        if it.feedback is not None:
            yield FeedbackStep(iteration=it.index, feedback=it.feedback)
        yield from by_iteration.get(it.index, [])
    yield ResultStep(result=result)  # the trace ends on the checks the output fails
