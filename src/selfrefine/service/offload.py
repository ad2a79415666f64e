"""Keeps the server's event loop for I/O alone (issue 46, item 5): whatever a request costs
in CPU (its body's validation, a JSON Schema's check, building its engine and checks, the
run's checks and echo test, rendering its reply) is done elsewhere, so ``/health`` and every
other client are answered while 30 hostile requests are in flight.

- a request's preparation (parsing and validating its body, its engine, its input) runs in
  a pool of two threads (``prepare``), after the request took its queue place (admission:
  beyond the queue, a 429 before any of this work);
- the runs themselves run on an event loop of their own, in a thread (``run``, ``stream``);
  their ``asyncio.to_thread`` work goes to a bounded pool of threads there;
- cancelling the caller (the client left) cancels the run on its loop, marks it cancelled
  for its work in threads (:mod:`~selfrefine.core.cancel`), which stops at its next step, and
  returns only once the run and its threads' jobs have stopped, so the run slot it holds (and
  ``/health``'s ``running``) stays taken for exactly as long as the run works.

Python's interpreter lock is still shared: pure-Python work in a thread yields it every few
milliseconds, so the server's loop waits milliseconds, not seconds. (A single call into C
that holds it, such as one ``re`` search, is bounded where the pattern is accepted.)"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import functools
import logging
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from typing import Any, TypeVar

from ..core.cancel import RunCancelledError, cancellable

T = TypeVar("T")
log = logging.getLogger("selfrefine.serve")
STOP_WAIT_SECONDS = 30.0  # the longest a cancelled run's threads are waited for (a step is bounded)
_POLL = 0.02
_END = object()


class _Run:
    """One run on the runs loop: its cancellation event and its jobs in threads."""

    def __init__(self) -> None:
        self.cancelled = threading.Event()
        self.jobs = 0
        self._lock = threading.Lock()

    def count(self, change: int) -> None:
        with self._lock:
            self.jobs += change


_RUN: contextvars.ContextVar[_Run | None] = contextvars.ContextVar("selfrefine_serve_run", default=None)


class _Jobs(concurrent.futures.ThreadPoolExecutor):
    """The runs loop's executor (``asyncio.to_thread``): bounded, and counting each run's jobs
    (``submit`` is called in the run's own context); a job whose run was cancelled while it
    waited for a thread does not start."""

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[T]:
        run = _RUN.get()
        if run is None:
            return super().submit(fn, *args, **kwargs)
        run.count(1)

        def job() -> T:
            if run.cancelled.is_set():
                raise RunCancelledError("the run was cancelled")
            return fn(*args, **kwargs)

        try:
            future = super().submit(job)
        except BaseException:
            run.count(-1)
            raise
        future.add_done_callback(lambda _: run.count(-1))
        return future


class _Remote:
    """A coroutine running on the runs loop, as the server's loop sees it."""

    def __init__(self, loop: asyncio.AbstractEventLoop, work: Callable[[], Awaitable[T]]) -> None:
        self.loop, self.run = loop, _Run()
        self.done: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._task: asyncio.Task[Any] | None = None
        context = contextvars.copy_context()  # the request's (its trace span): the run's own copy
        loop.call_soon_threadsafe(self._start, work, context)

    def _start(self, work: Callable[[], Awaitable[Any]], context: contextvars.Context) -> None:
        if not self.done.set_running_or_notify_cancel():  # stopped before it started
            return
        self._task = self.loop.create_task(self._body(work), context=context)
        self._task.add_done_callback(self._finished)

    async def _body(self, work: Callable[[], Awaitable[Any]]) -> Any:
        _RUN.set(self.run)
        cancellable(self.run.cancelled)  # the event the run's threads look at (stop() sets it)
        return await work()

    def _finished(self, task: asyncio.Task[Any]) -> None:
        if task.cancelled():  # only ever by stop()
            self.done.set_exception(RunCancelledError("the run was cancelled"))
        elif (exc := task.exception()) is not None:
            self.done.set_exception(exc)
        else:
            self.done.set_result(task.result())

    async def result(self) -> Any:
        """The run's value; cancelled, :meth:`stop` it before the cancellation goes on."""
        try:
            return await asyncio.shield(asyncio.wrap_future(self.done))
        except asyncio.CancelledError:
            await self.stop()
            raise

    async def stop(self) -> None:
        """Cancel the run and wait (at most STOP_WAIT_SECONDS) until it and its jobs in
        threads have stopped."""
        self.run.cancelled.set()
        if not self.done.cancel():  # started: cancel its task on its loop
            with contextlib.suppress(RuntimeError):  # the runs loop has closed
                self.loop.call_soon_threadsafe(self._cancel)
        deadline = time.monotonic() + STOP_WAIT_SECONDS
        while not self.done.done() or self.run.jobs > 0:
            if time.monotonic() > deadline:
                log.warning("a cancelled run's work still runs after %g s; its slot is freed", STOP_WAIT_SECONDS)
                return
            await asyncio.sleep(_POLL)

    def _cancel(self) -> None:
        if self._task is not None:
            self._task.cancel()


PREPARE_THREADS = 2  # pure-Python work gains nothing from more threads, and each more contends with the loop


class Offload:
    """The threads and the loop a server's requests do their work in (module docstring);
    ``runs``: the runs in flight at once, each with its jobs in threads (a check, a model
    call, samples' checks side by side)."""

    def __init__(self, runs: int) -> None:
        self.threads = max(4, runs)
        self._prepare = concurrent.futures.ThreadPoolExecutor(PREPARE_THREADS, thread_name_prefix="selfrefine-prepare")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    async def prepare(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in the preparation pool, in the caller's context."""
        call = functools.partial(contextvars.copy_context().run, fn, *args)
        return await asyncio.get_running_loop().run_in_executor(self._prepare, call)

    async def run(self, work: Callable[[], Awaitable[T]]) -> T:
        """``await work()`` on the runs loop; cancelling the caller stops it (module docstring)."""
        result: T = await _Remote(self.loop(), work).result()
        return result

    async def stream(self, work: Callable[[], AsyncIterator[T]]) -> AsyncIterator[T]:
        """``work()``'s items, computed on the runs loop; closing this stops it."""
        here = asyncio.get_running_loop()
        queue: asyncio.Queue[Any] = asyncio.Queue()

        def put(item: Any) -> None:
            with contextlib.suppress(RuntimeError):  # the server's loop has closed
                here.call_soon_threadsafe(queue.put_nowait, item)

        async def pump() -> None:
            async with aclosing(work()) as items:  # type: ignore[type-var]
                async for item in items:
                    put(item)

        remote = _Remote(self.loop(), pump)
        remote.done.add_done_callback(lambda _: put(_END))
        try:
            while (item := await queue.get()) is not _END:
                yield item
            remote.done.result()  # the run's own error, if any
        finally:
            if not remote.done.done() or remote.run.jobs:
                await remote.stop()

    def loop(self) -> asyncio.AbstractEventLoop:
        """The runs loop, started on first use."""
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                loop.set_default_executor(_Jobs(self.threads, thread_name_prefix="selfrefine-work"))
                self._thread = threading.Thread(target=loop.run_forever, name="selfrefine-runs", daemon=True)
                self._thread.start()
                self._loop = loop
            return self._loop

    async def aclose(self, closing: Callable[[], Awaitable[Any]] | None = None) -> None:
        """Run ``closing`` (the backends' close) on the runs loop (here, if no run started
        it: the backends were never used), then stop it and the pools."""
        if closing is not None:
            await (self.run(closing) if self._loop is not None else closing())
        with self._lock:
            loop, thread, self._loop = self._loop, self._thread, None
        if loop is not None and thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            await asyncio.to_thread(thread.join, 10)
            if not thread.is_alive():
                loop.close()
        self._prepare.shutdown(wait=False, cancel_futures=True)
