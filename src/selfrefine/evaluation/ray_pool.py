"""``selfrefine eval --ray``: the examples run on a pool of Ray actors, the run folder stays here.

The driver (:func:`~.driver.run_eval`) is the same as in local mode: it skips finished
examples, writes every row durably as it arrives and writes the summary. Only the runner
differs: :class:`RayPool` hands the examples to actors, each of which builds its own engine
from an :class:`EngineRecipe` (picklable data: the engine spec and the evaluation judge's model), sized
to the CPUs it reserved (``n_threads`` of an embedded/gguf model) and, with
``--ray-base-url``, talking to its own server.

Failure semantics (the driver is the only writer, so nothing is written twice):

- an actor that dies (process killed, node gone) fails its in-flight calls with
  ``RayActorError``; those examples go back to the queue and run on another actor, and a
  replacement actor is started, which joins when the cluster has room for it (a node that
  left shrinks the pool; the run goes on with the actors left);
- an example whose actor died ``max_deaths`` times (a crash it causes) gets a failed row,
  which a rerun retries; no live actor for ``start_timeout`` seconds stops the run with the
  rows so far on disk, to resume later.

The response cache is answered on the driver's node: one :class:`CacheServer` actor, pinned
there, owns the SQLite file that a local eval uses, and actors ask it (SQLite's WAL does not
work over network filesystems, so sharing one file from several nodes is not an option).
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from ..backends.base import CompletionResponse
from ..backends.registry import scheme_of
from ..core.errors import BackendError, ConfigError, SelfRefineError, error_text
from ..engine.loop import SelfRefine
from ..engine.spec import EngineSpec, ModelSpec
from .datasets import Example
from .judge import DEFAULT_CRITERIA, PairwiseJudge
from .response_cache import CachedBackend, ResponseCache
from .runner import ExampleRow, evaluate_rows

INSTALL = "pip install 'selfrefine[ray]'"


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ConfigError(f"--ray needs Ray, which is not installed: {INSTALL}") from None
    return ray


# -- what an actor builds ------------------------------------------------------------------


@dataclass(frozen=True)
class EngineRecipe:
    """The run's engine as plain data: the :class:`EngineSpec` an actor builds with
    ``SelfRefine.from_spec`` (the loop's judge role included), and the model of the
    evaluation's judge (eval's --judge). It pickles; nothing is re-parsed in an actor and no
    function travels. Paths in the task and in ``fake:``/``gguf:`` model specs are made
    absolute by :meth:`portable` and must be readable on every node."""

    spec: EngineSpec
    judge: ModelSpec | None = None

    @classmethod
    def portable(cls, spec: EngineSpec, judge: ModelSpec | None = None) -> EngineRecipe:
        is_file = spec.task.endswith((".yaml", ".yml")) or "/" in spec.task  # else a task name, kept as is
        models = {key: _absolute(m) if m is not None else None for key, m in _models(spec).items()}
        task = _absolute_path(spec.task) if is_file else spec.task
        return cls(spec.replace(task=task, **models), _absolute(judge) if judge is not None else None)

    def in_process(self) -> bool:
        """Whether a role runs its model in the actor (embedded/gguf), so threads matter."""
        return any(_takes_threads(m) for m in [*_models(self.spec).values(), self.judge] if m is not None)

    def for_actor(self, threads: int, base_url: str | None) -> EngineRecipe:
        """This recipe with ``n_threads`` for in-process models that were not given one and,
        when given, the actor's own server for the main model."""
        models = {key: _with_threads(m, threads) if m is not None else None for key, m in _models(self.spec).items()}
        if base_url:
            models["model"] = models["model"].with_options(base_url=base_url)
        judge = _with_threads(self.judge, threads) if self.judge is not None else None
        return replace(self, spec=self.spec.replace(**models), judge=judge)


def _models(spec: EngineSpec) -> dict[str, ModelSpec | None]:
    return {
        "model": spec.model,
        "feedback_model": spec.feedback_model,
        "refine_model": spec.refine_model,
        "judge_model": spec.judge_model,
    }


def _takes_threads(model: ModelSpec) -> bool:
    options = scheme_of(model.model).options_model()
    return options is not None and "n_threads" in options.model_fields


def _with_threads(model: ModelSpec, threads: int) -> ModelSpec:
    if not _takes_threads(model) or model.options.get("n_threads") is not None:
        return model
    return model.with_options(n_threads=threads)


def _absolute_path(text: str) -> str:
    path = Path(text).expanduser()
    return str(path.resolve()) if path.exists() else text


def _absolute(model: ModelSpec) -> ModelSpec:
    scheme, sep, rest = model.model.partition(":")
    if sep and rest and scheme in ("fake", "gguf"):
        return ModelSpec(model=f"{scheme}:{_absolute_path(rest)}", options=model.options)
    return model


@dataclass(frozen=True)
class PoolOptions:
    """How the pool is laid out: ``--ray ADDRESS``, ``--ray-actors``, ``--ray-cpus-per-actor``,
    ``--ray-base-url`` and the examples each actor runs at once (``--concurrency``)."""

    address: str = "local"
    actors: int | None = None
    cpus_per_actor: float | None = None
    base_urls: tuple[str, ...] = ()
    in_flight: int = 4
    cache_path: str | None = None  # None: no response cache
    max_deaths: int = 3
    start_timeout: float = 300.0
    num_cpus: int | None = None  # of a local cluster started here (default: this machine's)


# -- the actors ----------------------------------------------------------------------------


class RefineWorker:
    """One engine in one Ray actor; runs examples as the local runner does."""

    def __init__(self, recipe: EngineRecipe, cache: Any = None) -> None:
        self.error: BaseException | None = None
        try:
            # every role's backend (one wrapper per backend) and the judge's ask the cache server
            wrap = (lambda backend: RemoteCachedBackend(backend, cache)) if cache is not None else None
            self.engine = SelfRefine.from_spec(recipe.spec, wrap=wrap)
            self.judge = _build_judge(recipe, self.engine, wrap)
        except Exception as exc:  # reported by ready(), so the driver can say it in one line
            self.error = exc

    async def ready(self) -> BaseException | None:
        return self.error

    async def run(self, example: Example) -> ExampleRow:
        rows = await evaluate_rows(self.engine, [example], concurrency=1, judge=self.judge)
        return rows[0]

    async def pid(self) -> int:
        return os.getpid()

    async def describe(self) -> list[str]:
        return [b.describe() for b in self.engine.backends.distinct()]


def _build_judge(recipe: EngineRecipe, engine: SelfRefine, wrap: Any) -> PairwiseJudge | None:
    if recipe.judge is None:
        return None
    backend = recipe.judge.build()
    return PairwiseJudge(
        wrap(backend) if wrap is not None else backend,
        seed=int(engine.settings.requests.seed or 0),
        criteria=engine.task.judge_criteria or DEFAULT_CRITERIA,
    )


class RemoteCachedBackend(CachedBackend):
    """The response cache, asked through the :class:`CacheServer` actor on the driver's node
    (``self.cache`` is that actor's handle)."""

    async def lookup(self, key: str) -> CompletionResponse | None:
        return await self.cache.get.remote(key)

    async def store(self, key: str, response: CompletionResponse) -> None:
        await self.cache.put.remote(key, response)


class CacheServer:
    """Owns the SQLite response cache on the driver's node; actors' lookups come here."""

    def __init__(self, path: str) -> None:
        self.cache = ResponseCache(path)

    def get(self, key: str) -> CompletionResponse | None:
        return self.cache.get(key)

    def put(self, key: str, response: CompletionResponse) -> None:
        self.cache.put(key, response)

    def dropped(self) -> int:
        return self.cache.dropped


# -- the pool ------------------------------------------------------------------------------


@dataclass
class PoolStats:
    """What happened, for the log and for tests."""

    actors: int = 0  # planned
    cpus_per_actor: float = 0.0
    started: int = 0  # actors that became ready, replacements included
    replaced: int = 0  # replacement actors asked for (each joins when the cluster has room)
    deaths: int = 0  # actors lost mid-run
    requeued: int = 0  # examples run again because their actor died
    gave_up: int = 0  # examples given a failed row after max_deaths deaths


class RayPool:
    """A runner for :func:`~.driver.run_eval`: ``await pool(todo, on_row)``."""

    def __init__(self, recipe: EngineRecipe, options: PoolOptions, console: Console | None = None) -> None:
        self.recipe = recipe
        self.options = options
        self.console = console or Console(stderr=True)
        self.stats = PoolStats()
        self.live: dict[int, Any] = {}  # actor number -> handle, actors that are ready
        self._handles: list[Any] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._deaths: Counter[str] = Counter()
        self._error: BaseException | None = None
        self._start_errors: list[str] = []
        self._pending = 0  # actors asked for that are not ready (or failed) yet
        self._spawned = 0  # actors asked for, replacements included (their numbers)
        self._started_here = False
        self.cache_dropped = 0  # damaged cache entries the cache server dropped (run_eval's summary)

    async def __call__(self, todo: Sequence[Example], on_row: Callable[[ExampleRow], None]) -> None:
        if not todo:
            return
        ray = self.connect()
        try:
            await self._run(ray, list(todo), on_row)
        finally:
            await self._stop(ray)

    # -- cluster -------------------------------------------------------------------------

    def connect(self) -> Any:
        """Join (or start) the cluster; a process that already joined one keeps it."""
        ray = import_ray()
        if ray.is_initialized():
            return ray
        address = self.options.address
        kwargs: dict[str, Any] = {"logging_level": logging.WARNING, "log_to_driver": True}
        if address == "local":
            kwargs.update(include_dashboard=False, num_cpus=self.options.num_cpus)
        try:
            ray.init(address=address, **kwargs)
        except (ConnectionError, ValueError, RuntimeError) as exc:
            raise ConfigError(
                f"cannot join the Ray cluster at {address!r}: {exc}; start one with "
                "`ray start --head`, or give --ray without an address for a local one"
            ) from None
        self._started_here = True
        return ray

    def plan(self, ray: Any) -> tuple[int, float]:
        """(actors, CPUs per actor): given, else from the cluster's CPUs. An in-process model
        gets up to 4 threads (the largest node's CPUs at most); a server model's actor mostly
        waits, so 1 CPU each, one actor per CPU."""
        total = float(ray.cluster_resources().get("CPU", 1.0))
        node_cpus = [float(n["Resources"].get("CPU", 0)) for n in ray.nodes() if n.get("Alive")]
        cpus = self.options.cpus_per_actor
        if cpus is None:
            cpus = float(min(4.0, max(node_cpus, default=total))) if self.recipe.in_process() else 1.0
        actors = self.options.actors or max(1, int(total // cpus))
        return actors, cpus

    async def _stop(self, ray: Any) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for handle in self._handles:
            ray.kill(handle, no_restart=True)
        if self._started_here:
            ray.shutdown()

    # -- the run -------------------------------------------------------------------------

    async def _run(self, ray: Any, todo: list[Example], on_row: Callable[[ExampleRow], None]) -> None:
        actors, cpus = self.plan(ray)
        self.stats.actors, self.stats.cpus_per_actor = actors, cpus
        self._ray, self._on_row = ray, on_row
        self._queue: asyncio.Queue[Example] = asyncio.Queue()
        for example in todo:
            self._queue.put_nowait(example)
        self._left = len(todo)
        self._finished = asyncio.Event()
        self._cache = await self._cache_server(ray)
        nodes = sum(1 for n in ray.nodes() if n.get("Alive"))
        self.console.print(
            f"Ray: {actors} actor(s) × {cpus:g} CPU on {nodes} node(s), "
            f"{self.options.in_flight} example(s) in flight each"
        )
        for _ in range(actors):
            self._spawn()
        self._empty_since = time.monotonic()
        while not self._finished.is_set():
            try:
                await asyncio.wait_for(self._finished.wait(), timeout=1.0)
            except TimeoutError:
                self._check_stalled()
        if self._cache is not None:
            self.cache_dropped = await self._cache.dropped.remote()
        if self._error is not None:
            raise self._error

    async def _cache_server(self, ray: Any) -> Any:
        """The response cache's actor, on this node (with ray://, the head node, where the
        driver runs); checked before any example is sent."""
        if self.options.cache_path is None:
            return None
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        path = str(Path(self.options.cache_path).expanduser().absolute())
        here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
        server = ray.remote(CacheServer).options(
            num_cpus=0, max_restarts=-1, max_task_retries=-1, scheduling_strategy=here
        )
        handle = server.remote(path)
        self._handles.append(handle)
        try:
            await handle.get.remote("")
        except ray.exceptions.RayError as exc:
            raise ConfigError(
                f"the response cache {path} cannot be opened on the driver's node "
                f"({_first_line(exc)}); give --cache a path there, or --no-cache"
            ) from None
        return handle

    def _spawn(self) -> int:
        number, self._spawned = self._spawned, self._spawned + 1
        urls = self.options.base_urls
        threads = max(1, int(self.stats.cpus_per_actor))
        recipe = self.recipe.for_actor(threads, urls[number % len(urls)] if urls else None)
        worker = self._ray.remote(RefineWorker).options(
            num_cpus=self.stats.cpus_per_actor,
            max_restarts=0,
            scheduling_strategy="SPREAD",
            max_concurrency=self.options.in_flight + 4,
        )
        handle = worker.remote(recipe, self._cache)
        self._handles.append(handle)
        self._pending += 1
        self._start(self._serve(number, handle))
        return number

    def _start(self, coro: Any) -> None:
        task = asyncio.ensure_future(self._guarded(coro))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _guarded(self, coro: Any) -> None:
        try:
            await coro
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # a bug or a full disk: stop the run, rows so far are kept
            self._fail(exc)

    def _fail(self, exc: BaseException) -> None:
        if self._error is None:
            self._error = exc
        self._finished.set()

    async def _serve(self, number: int, handle: Any) -> None:
        """Wait until the actor is up, then keep ``in_flight`` examples on it."""
        try:
            error = await handle.ready.remote()
        except self._ray.exceptions.RayActorError as exc:
            self._start_errors.append(_first_line(exc))
            return
        finally:
            self._pending -= 1
        if error is not None:
            self._fail(
                error
                if isinstance(error, SelfRefineError)
                else BackendError(f"a Ray actor could not build the engine: {error_text(error)}")
            )
            return
        self.live[number] = handle
        self.stats.started += 1
        await asyncio.gather(*(self._slot(number, handle) for _ in range(self.options.in_flight)))

    async def _slot(self, number: int, handle: Any) -> None:
        while number in self.live:
            example = await self._queue.get()
            if number not in self.live:  # died while this slot waited: hand the example on
                self._queue.put_nowait(example)
                return
            try:
                row = await handle.run.remote(example)
            except self._ray.exceptions.RayActorError as exc:
                self._lost(number, handle, example, exc)
                return
            self._done(row)

    def _done(self, row: ExampleRow) -> None:
        self._on_row(row)  # written durably before it counts
        self._left -= 1
        if self._left == 0:
            self._finished.set()

    def _lost(self, number: int, handle: Any, example: Example, exc: BaseException) -> None:
        """The actor died with ``example`` in flight: run it again elsewhere, replace the actor."""
        self._deaths[example.id] += 1
        if self._deaths[example.id] >= self.options.max_deaths:
            self.stats.gave_up += 1
            self._done(
                ExampleRow(
                    id=example.id,
                    error=f"ActorDiedError: the Ray actor running this example "
                    f"died {self._deaths[example.id]} times; last: {_first_line(exc)}",
                )
            )
        else:
            self.stats.requeued += 1
            self._queue.put_nowait(example)
        if self.live.pop(number, None) is None:
            return  # another slot of this actor already reported it
        self.stats.deaths += 1
        if not self.live:
            self._empty_since = time.monotonic()
        self._ray.kill(handle, no_restart=True)
        replacement = self._spawn()
        self.stats.replaced += 1
        self.console.print(
            escape(
                f"Ray actor {number} died ({_first_line(exc)}); its examples run again "
                f"elsewhere; actor {replacement} is starting in its place"
            ),
            soft_wrap=True,
        )

    def _check_stalled(self) -> None:
        """No live actor: fail on start errors once no start is pending, or after the timeout."""
        if self.live or self._finished.is_set():
            return
        waited = time.monotonic() - self._empty_since
        if self._start_errors and self._pending <= 0:
            self._fail(BackendError(f"no Ray actor could start: {self._start_errors[0]}"))
        elif waited > self.options.start_timeout:
            free = self._ray.available_resources().get("CPU", 0.0)
            self._fail(
                BackendError(
                    f"no Ray actor has run for {waited:.0f} s: each needs {self.stats.cpus_per_actor:g} CPU and the "
                    f"cluster has {free:g} free; lower --ray-cpus-per-actor or add nodes, then rerun to resume"
                )
            )


def _first_line(exc: BaseException, limit: int = 160) -> str:
    """The error on one short line (Ray's messages span lines and name internal ids)."""
    text = " ".join(re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).split())  # no colour codes
    return f"{type(exc).__name__}: {text[:limit]}{'…' if len(text) > limit else ''}"
