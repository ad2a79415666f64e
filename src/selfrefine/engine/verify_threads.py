"""A task's checks in threads of their own, under the run's time budget.

``Task.verify`` (a user's function, a sandboxed program, a scorer) is sync code the event
loop must not wait on, so each check runs in a thread. Python cannot stop a thread, so:

- a check still running when its run's time budget runs out is left running, and the run
  stops with ``time_budget``, its detail naming the function (a check started with less
  than ``MIN_SECONDS`` of budget left gets that long);
- such a check (or one whose run was cancelled) is *stuck*: while one of a task's checks
  is, that task's next check waits for it to return before it starts, under its own run's
  budget, and a run that cannot wait longer stops the same way. A function that never
  returns holds no more threads than the checks in flight when their runs gave up, instead
  of one more per call; the threads are daemons, so none holds up the process's exit;
- ``KeyboardInterrupt`` or ``SystemExit`` raised by the function (Ctrl-C, ``sys.exit()``)
  comes back as :class:`~selfrefine.core.errors.RunInterrupted`, which asyncio passes on as
  any error: the interrupt itself would break out of the event loop, leaving the run's
  tasks on it for the next run to meet. ``SelfRefine.run()`` raises the interrupt itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
import time
from collections.abc import Callable
from typing import Any

from ..core.errors import RunInterrupted
from ..core.records import StopReason, Verification
from ..task.task import Task
from .calls import BudgetExceeded, CallLog

MIN_SECONDS = 1.0  # the least time a check is given, however little of the budget is left
POLL_SECONDS = 0.05  # how often a check waiting for a stuck one looks again

# the stuck checks' threads, by the id of their task (an entry goes once they all return)
_STUCK: dict[int, list[threading.Thread]] = {}
_STUCK_LOCK = threading.Lock()


async def verify_in_thread(
    task: Task, input: str, draft: str, max_seconds: float | None, log: CallLog
) -> Verification | None:
    """``task.verify(input, draft)`` in a thread of its own, once no earlier check of the task
    is stuck, within the run's time budget (``max_seconds`` since ``log`` started; module
    docstring)."""
    if not task.has_verifier:  # Task.verify says None: no thread for that
        return None
    who = checker_name(task)
    budget = _Budget(max_seconds, log)
    await _wait_for_stuck(task, who, budget)
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Verification | None] = loop.create_future()
    work = contextvars.copy_context().run  # as asyncio.to_thread: the caller's context
    thread = threading.Thread(
        target=work, args=(_check, loop, future, task.verify, input, draft, who), name="selfrefine-verify", daemon=True
    )
    thread.start()
    try:
        await asyncio.wait({future}, timeout=budget.left())
    finally:
        if not future.done():  # out of time, or the run was cancelled: the thread runs on
            future.cancel()
            with _STUCK_LOCK:
                _STUCK.setdefault(id(task), []).append(thread)
    if future.cancelled():
        raise budget.spent(f"{who} has not returned")
    return future.result()


def checker_name(task: Task) -> str:
    """The check in words, for a stop's detail: a verify function's name, else the method."""
    who = getattr(task.declared.verifier, "who", None)
    return who if isinstance(who, str) else f"{type(task).__name__}.verify"


def stuck_checks(task: Task) -> int:
    """How many of ``task``'s checks are stuck (still running after their run gave up)."""
    with _STUCK_LOCK:
        alive = [t for t in _STUCK.get(id(task), []) if t.is_alive()]
        if alive:
            _STUCK[id(task)] = alive
        else:
            _STUCK.pop(id(task), None)
        return len(alive)


async def _wait_for_stuck(task: Task, who: str, budget: _Budget) -> None:
    while stuck := stuck_checks(task):
        if budget.left() == 0:
            raise budget.spent(f"{stuck} check(s) of {who} from earlier runs have not returned")
        await asyncio.sleep(POLL_SECONDS)


class _Budget:
    """The time one check has: the run's budget left, at least ``MIN_SECONDS`` (None: no budget)."""

    def __init__(self, max_seconds: float | None, log: CallLog) -> None:
        self.max_seconds, self.log = max_seconds, log
        left = None if max_seconds is None else max(max_seconds - log.elapsed(), MIN_SECONDS)
        self.deadline = None if left is None else time.monotonic() + left

    def left(self) -> float | None:
        return None if self.deadline is None else max(0.0, self.deadline - time.monotonic())

    def spent(self, what: str) -> BudgetExceeded:
        return BudgetExceeded(
            StopReason.TIME_BUDGET,
            f"time budget ran out: {self.log.elapsed():.1f}s of {self.max_seconds:g}s; {what} "
            "(Python cannot stop a thread: it runs on, and this task's next check waits for it)",
        )


def _check(
    loop: asyncio.AbstractEventLoop,
    future: asyncio.Future[Any],
    verify: Callable[[str, str], Verification | None],
    input: str,
    draft: str,
    who: str,
) -> None:
    """The thread's work: the check, its outcome handed to ``future`` on ``loop``."""
    try:
        outcome: tuple[Callable[[Any], None], Any] = (future.set_result, verify(input, draft))
    except Exception as exc:  # noqa: BLE001 - handed on whole, as asyncio.to_thread would
        outcome = (future.set_exception, exc)
    except BaseException as exc:  # KeyboardInterrupt, SystemExit: must not break the loop
        interrupted = RunInterrupted(f"{type(exc).__name__} in {who}: the run stopped", exc)
        outcome = (future.set_exception, interrupted.with_traceback(exc.__traceback__))
    with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits any more
        loop.call_soon_threadsafe(_settle, future, *outcome)


def _settle(future: asyncio.Future[Any], setter: Callable[[Any], None], value: Any) -> None:
    if not future.done():  # not given up on (out of time, cancelled)
        setter(value)
