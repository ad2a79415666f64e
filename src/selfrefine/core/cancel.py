"""A run's cancellation as the threads doing its work can see it.

Python cannot stop a thread: a check that runs in one (``asyncio.to_thread``) goes on after
its run is cancelled (a client of ``selfrefine serve`` left), burning CPU for a reply nobody
reads. The run's owner marks it with :func:`cancellable` and sets the event it returns when
it cancels the run; the work in threads (which inherit the caller's context) calls
:func:`checkpoint` between its steps, which raises :class:`RunCancelledError` once the
event is set, so the thread returns at its next step instead of running to the end."""

from __future__ import annotations

import threading
from contextvars import ContextVar

from .errors import SelfRefineError

_CANCELLED: ContextVar[threading.Event | None] = ContextVar("selfrefine_cancelled", default=None)


class RunCancelledError(SelfRefineError):
    """The run this work belongs to was cancelled (raised in its threads, seen by nobody)."""


def cancellable(event: threading.Event | None = None) -> threading.Event:
    """Mark the current context's run (an asyncio task's own context: set it at the task's
    start) as cancellable by ``event`` (a new one if None); set it to cancel the run's work
    in threads."""
    event = event if event is not None else threading.Event()
    _CANCELLED.set(event)
    return event


def cancelled() -> bool:
    """Whether the current context's run has been cancelled."""
    event = _CANCELLED.get()
    return event is not None and event.is_set()


def checkpoint() -> None:
    """Raise RunCancelledError if the current context's run has been cancelled."""
    if cancelled():
        raise RunCancelledError("the run was cancelled")
