"""A run's token deltas merged into its steps (``SelfRefine.astream(..., deltas=True)``).

The loop awaits each model call; meanwhile the call's backend hands each piece of its reply
to the caller's sink (:class:`~.calls.Caller`), which queues it as a :class:`DeltaStep`.
The merged stream advances the loop one step at a time in a task of its own and yields the
queued pieces while that step is computed, then the step itself: every piece of a call
arrives before the step its call produced, and the steps are those of a run without deltas.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from ..core.records import DeltaStep, Role, Step

if TYPE_CHECKING:
    from .refinement import Refinement


async def with_deltas(run: Refinement) -> AsyncIterator[Step]:
    """``run``'s steps with a :class:`DeltaStep` for each piece of each streamed reply."""
    pieces: deque[DeltaStep] = deque()
    wake: asyncio.Future[None] | None = None  # resolved by the next piece

    def sink(role: Role, iteration: int, attempt: int, text: str, sample: int | None = None) -> None:
        pieces.append(DeltaStep(role=role, iteration=iteration, attempt=attempt, text=text, sample=sample))
        if wake is not None and not wake.done():
            wake.set_result(None)

    run.caller.sink = sink
    steps = run.stream()
    following: asyncio.Future[Step] | None = None
    try:
        while True:
            # the step is computed in a task that copies this context (a tracing span's round)
            following = asyncio.ensure_future(steps.__anext__())
            while True:
                while pieces:
                    yield pieces.popleft()
                if following.done():
                    break
                wake = asyncio.get_running_loop().create_future()
                await asyncio.wait({following, wake}, return_when=asyncio.FIRST_COMPLETED)
            try:
                step = following.result()
            except StopAsyncIteration:
                return
            yield step
    finally:
        # closed early (the client left): the call in progress stops too
        if following is not None and not following.done():
            following.cancel()
            await asyncio.gather(following, return_exceptions=True)
        await steps.aclose()
