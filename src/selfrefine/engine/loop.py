"""The engine: one task over one or more backends, reusable across inputs.

:class:`SelfRefine` builds (or is given) its backends, resolves its settings once
(:mod:`.settings`) and runs each input as a :class:`~.refinement.Refinement`, whose steps
it streams (:mod:`selfrefine.core.records`); :meth:`SelfRefine.run` is the sync wrapper.
It is a context manager (``with`` / ``async with``) that closes its backends on exit; a
closed engine refuses to run.
"""

from __future__ import annotations

import asyncio
import atexit
import threading
from collections.abc import AsyncIterator, Coroutine, Mapping
from types import TracebackType
from typing import Any, TypeVar, Unpack

from ..backends.base import Backend
from ..backends.registry import get_backend
from ..backends.roles import RoleBackends
from ..checks.declared import Checks, Verifier
from ..core.config import RefineConfig, RunOptions
from ..core.errors import ConfigError, EngineClosedError, RunInterrupted
from ..core.records import ResultStep, RunResult, Step
from ..task.plugins import find_task
from ..task.task import Task, prepared_input
from .deltas import with_deltas
from .drafting.registry import find_strategy
from .refinement import Refinement
from .settings import Settings
from .spec import BackendPool, EngineSpec, Wrap

__all__ = ["SelfRefine", "refine"]

T = TypeVar("T")


class SelfRefine:
    """One task on one or more backends. Reusable across inputs; close it when done.

    ``model`` serves every role unless ``feedback_model``/``refine_model``/``judge_model``
    name a different backend for that role (e.g. a cheap critic and a larger refiner; the
    judge answers the loop's closed yes/no, rating and A-or-B questions from token
    probabilities); a role without its own shares another's as
    :data:`~selfrefine.backends.roles.SHARES` says (the judge: the critic's); ``model`` may also be a
    :class:`~selfrefine.backends.roles.RoleBackends` that gives each role's. ``wrap`` is given
    each distinct backend once (roles that share a backend share its wrapper). ``verify``: a verifier
    for a task without one, a function ``(input, draft) -> score``, or
    :class:`~.checks.Checks` or their dict (see :mod:`.checks`). ``response_model``: a
    pydantic type (a ``BaseModel``, ``list[Item]``, ...) every draft must be the JSON of: its
    schema is the run's ``json_schema``, pydantic validates the drafts (custom validators
    included), and ``RunResult.parsed`` is the output's JSON value. The run options are
    :class:`~selfrefine.core.config.RefineConfig`'s fields, as keywords or as ``config``;
    an unknown name is a ConfigError that lists the valid ones.
    """

    def __init__(
        self,
        task: Task | str,
        model: Backend | RoleBackends | str | None = None,
        *,
        feedback_model: Backend | str | None = None,
        refine_model: Backend | str | None = None,
        judge_model: Backend | str | None = None,
        config: RefineConfig | None = None,
        wrap: Wrap | None = None,
        verify: Verifier | Checks | Mapping[str, Any] | None = None,
        response_model: Any = None,
        **options: Unpack[RunOptions],
    ) -> None:
        self.closed = False
        self.task = find_task(task)
        if verify is not None:
            self.task = self.task.with_verifier(verify)
        if config is not None and options:
            raise ConfigError("pass either config= or keyword options, not both")
        self.response_model = response_model  # a pydantic type the drafts validate as (structured output)
        # run option over task default, resolved once (a bad combination fails here)
        self.settings = Settings.resolve(
            config or RefineConfig.build(**options), self.task, find_strategy, response_model
        )
        self.backends = _role_backends(model, feedback_model, refine_model, judge_model).map(wrap)

    @classmethod
    def from_spec(
        cls,
        spec: EngineSpec,
        *,
        pool: BackendPool | None = None,
        wrap: Wrap | None = None,
        task: Task | None = None,
        backends: RoleBackends | None = None,
    ) -> SelfRefine:
        """The engine an :class:`EngineSpec` describes: the one way ``run``, ``eval``, ``serve``
        and Ray build theirs. With a ``pool``, backends are shared with the pool's other
        engines (and wrapped by the pool's ``wrap``); ``task``: ``spec.task`` already loaded;
        ``backends``: the roles' backends already open (a server's, shared by all its
        engines), used instead of opening the spec's models."""
        if pool is not None and wrap is not None:
            raise ConfigError("pass wrap to the BackendPool, which wraps each backend it opens once")
        if backends is not None and (pool is not None or wrap is not None):
            raise ConfigError("pass either backends (already open) or a pool/wrap to open the spec's models")
        if backends is None:
            models = (spec.model, spec.feedback_model, spec.refine_model, spec.judge_model)
            backends = (pool or BackendPool(wrap)).roles(*models)
        return cls(task or spec.task, backends, config=spec.config)

    # -- public API ----------------------------------------------------------------------

    @property
    def config(self) -> RefineConfig:
        return self.settings.config

    @config.setter
    def config(self, config: RefineConfig) -> None:
        self.settings = Settings.resolve(config, self.task, find_strategy, self.response_model)

    @property
    def max_iterations(self) -> int:
        return self.settings.stops.max_iterations

    @property
    def history(self) -> str:
        return self.settings.history

    @property
    def select(self) -> str:
        return self.settings.select

    async def arun(self, input: str, reference: Any = None) -> RunResult:
        result = None
        async for step in self.astream(input, reference):
            if isinstance(step, ResultStep):
                result = step.result
        assert result is not None
        return result

    def run(self, input: str, reference: Any = None) -> RunResult:
        """Sync wrapper around :meth:`arun` (not usable inside a running event loop). An
        interrupt raised in a check (``KeyboardInterrupt``, ``SystemExit``) reaches the
        caller as itself, and nothing of the run is left for the next one to meet."""
        if _loop_running():
            raise ConfigError("SelfRefine.run() was called inside an event loop; use `await arun()`")
        return _on_thread_loop(self.arun(input, reference))

    async def astream(self, input: str, reference: Any = None, *, deltas: bool = False) -> AsyncIterator[Step]:
        """Run the loop, yielding each draft, feedback and decision as it happens; with
        ``deltas``, also each piece of each draft and critique as the model writes it
        (:class:`~selfrefine.core.records.DeltaStep`; the other steps and the result are
        the same). Samples (``samples`` > 1) arrive whole, in their draft step."""
        if self.closed:
            raise EngineClosedError(
                "this SelfRefine engine is closed (its backends are shut); make a new one, "
                "or use `with SelfRefine(...) as engine:` around the runs"
            )
        input = prepared_input(self.task, input)
        run = Refinement(self.task, self.settings, self.backends, input, reference)
        steps = with_deltas(run) if deltas else run.stream()
        try:
            async for step in steps:
                yield step
        finally:
            await steps.aclose()

    async def aclose(self) -> None:
        """Close the backends; later runs raise EngineClosedError. Closing twice is harmless."""
        if self.closed:
            return
        self.closed = True
        await self.backends.aclose()

    def close(self) -> None:
        """Sync :meth:`aclose`, on the loop ``run()`` uses (not inside a running event loop)."""
        if _loop_running():
            raise ConfigError("SelfRefine.close() was called inside an event loop; use `await aclose()`")
        return _on_thread_loop(self.aclose())

    def __enter__(self) -> SelfRefine:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    async def __aenter__(self) -> SelfRefine:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    def examples_in_flight(self) -> int:
        """How many examples to run at once so no backend idles: each example has at most
        one call in flight, and between calls it parses, scores and renders, so four
        examples per request a backend takes at once keep its queue full."""
        limits = [b.max_concurrency for b in self.backends.distinct()]
        return max(4, 4 * max(limits, default=1))


def refine(
    task: Task | str,
    input: str,
    model: Backend | str | None = None,
    *,
    verify: Verifier | Checks | Mapping[str, Any] | None = None,
    response_model: Any = None,
    **options: Unpack[RunOptions],
) -> RunResult:
    """One-shot sync helper: ``refine("commongen", "dog, ball, park")``; ``response_model``:
    the pydantic type the output must be the JSON of (``result.parsed``)."""
    with SelfRefine(task, model, verify=verify, response_model=response_model, **options) as engine:
        return engine.run(input)


def _role_backends(model: Backend | RoleBackends | str | None, *own: Backend | str | None) -> RoleBackends:
    """Each role's backend from SelfRefine's arguments: ``model``, then the feedback, refine
    and judge roles' own (a name is opened here)."""
    if isinstance(model, RoleBackends):
        if any(backend is not None for backend in own):
            raise ConfigError(
                "model is a RoleBackends, which gives every role's backend: pass no feedback/refine/judge_model"
            )
        return model
    return RoleBackends.of(get_backend(model), *(get_backend(b) if b is not None else None for b in own))


_RUNNERS = threading.local()


def _thread_runner() -> asyncio.Runner:
    """One event loop per thread, kept across sync ``run()`` calls: a fresh loop per call
    (``asyncio.run``) cost ~2 ms per call in setup and executor teardown, and dropped the
    backends' pooled connections and warm worker threads every time."""
    runner = getattr(_RUNNERS, "runner", None)
    if runner is None:
        runner = _RUNNERS.runner = asyncio.Runner()
        atexit.register(runner.close)
    return runner


def _loop_running() -> bool:
    """Whether this thread runs an event loop (checked outside an ``except``, so that an
    error of the run is not shown as raised while handling "no running event loop")."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _on_thread_loop(work: Coroutine[Any, Any, T]) -> T:
    """``work`` on this thread's loop (:func:`_thread_runner`). However it ends, no task it
    started is left on the loop (one there would resume, or raise, in the next run), and a
    check's interrupt (:class:`~selfrefine.core.errors.RunInterrupted`) is raised as itself."""
    runner, box = _thread_runner(), []
    try:
        runner.run(_kept(work, box))
        return box[0]
    except RunInterrupted as exc:
        raise exc.interrupt from None
    finally:
        _clear(runner.get_loop())


async def _kept(work: Coroutine[Any, Any, T], box: list[T]) -> None:
    """``work``'s value put in ``box``, not left as the task's result: the Runner's SIGINT
    handler holds the finished task, and swapping handlers next run reprs it (Python's enum
    lookup of the old handler), a whole RunResult each time: ~1 ms per run."""
    box.append(await work)


def _clear(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel the tasks a finished run left on ``loop`` (samples still in flight when another
    failed, a Ctrl-C's leftovers) and wait for them, their errors retrieved."""
    left = asyncio.all_tasks(loop)
    if left:
        for task in left:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
