"""What the server shares between requests: the backends, one engine per (task, options),
and the admission gate (runs in flight, a bounded queue, 429 beyond it)."""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import ClassVar

from ..backends.roles import RoleBackends, Wrap
from ..core.config import RefineConfig, upper_bound
from ..core.errors import ConfigError, SelfRefineError
from ..engine.loop import SelfRefine
from ..engine.spec import EngineSpec
from ..task.task import Task
from .schemas import LoopOptions
from .upstream import Upstream, no_upstream

MAX_ENGINES = 64  # distinct (task, options) engines kept; an engine is cheap, backends are shared


class QueueFullError(SelfRefineError):
    """Every run slot and every queue place is taken; the client should retry later."""

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


@dataclass(frozen=True)
class Caps:
    """The server's limits on what one request may ask for. A budget set here (``serve
    --max-iters/--budget-tokens/--budget-seconds``) is both the cap and the default; unset,
    ``LIMITS`` still caps what a request asks (a request that asks nothing gets the task's
    default), so no request can ask for 10**9 refinements."""

    LIMITS: ClassVar[dict[str, float]] = {
        "max_iterations": 10,
        "max_total_tokens": 200_000,
        "max_seconds": 600.0,
        "max_tokens": 8192,
        # the server's policy, under the option's own cap (RefineConfig.samples): each sample is
        # a model call per step; asking more gets this many (README: "8 samples per step")
        "samples": 8,
    }
    MAX_TEMPERATURE: ClassVar[float] = 2.0  # OpenAI's range; a request above it is refused

    max_iterations: int | None = None
    max_total_tokens: int | None = None
    max_seconds: float | None = None

    def __post_init__(self) -> None:
        checked_limits(self.LIMITS)

    def apply(self, options: LoopOptions) -> LoopOptions:
        """The request's options with each budget at most the server's; unset ones get the
        server's own budget, where it has one. A temperature over 2 is a ConfigError."""
        if options.temperature is not None and options.temperature > self.MAX_TEMPERATURE:
            raise ConfigError(
                f"temperature {options.temperature:g} is over the server's limit of {self.MAX_TEMPERATURE:g}"
            )
        update: dict[str, float] = {}
        for name, limit in self.LIMITS.items():
            cap, asked = getattr(self, name, None), getattr(options, name)
            if asked is not None:
                update[name] = min(asked, limit if cap is None else cap)
            elif cap is not None:
                update[name] = cap
        return options.model_copy(update=update)


def checked_limits(limits: dict[str, float]) -> None:
    """A ConfigError naming the policy where one of ``limits`` is over its option's own cap (a
    server's policy may only lower one)."""
    for name, limit in limits.items():
        cap = upper_bound(name)
        if cap is not None and limit > cap:
            raise ConfigError(
                f"the server's limit Caps.LIMITS[{name!r}] = {limit:g} is over the option's own cap of {cap:g} "
                "(RefineConfig): a server's policy may only lower it"
            )


@dataclass
class EnginePool:
    """One :class:`SelfRefine` per (task, options), all over the same backends, so each
    backend's own concurrency limit holds across every engine (see ``backend_semaphore``).
    ``wrap`` (the server's tracer) is given each backend once: the served ones here, an
    upstream model's when a request first chooses it."""

    backends: RoleBackends
    tasks: dict[str, Task]
    caps: Caps = field(default_factory=Caps)
    upstream: Upstream | None = None  # the models a request may choose (options.model)
    wrap: Wrap | None = None
    _chosen: dict[str, RoleBackends] = field(default_factory=dict)  # an upstream model's, wrapped
    _engines: OrderedDict[tuple[str, str], SelfRefine] = field(default_factory=OrderedDict)
    # requests are prepared in threads (offload.py): one builds or finds an engine at a time
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.backends = self.backends.map(self.wrap)

    def get(self, task_name: str, options: LoopOptions) -> SelfRefine:
        """The engine for a task and a request's options; a bad option is a ConfigError."""
        options = self.caps.apply(options)
        key = (task_name, options.model_dump_json())
        with self._lock:
            engine = self._engines.get(key)
        if engine is None:  # built outside the lock: a big schema's check takes a while
            config = RefineConfig.build(**options.model_dump(exclude_none=True, exclude={"model"}))
            spec = EngineSpec(task=task_name, config=config)
            with self._lock:
                backends = self._backends(options.model)
            built = SelfRefine.from_spec(spec, backends=backends, task=self.tasks[task_name])
            with self._lock:
                engine = self._engines.setdefault(key, built)
                if len(self._engines) > MAX_ENGINES:
                    self._engines.popitem(last=False)  # backends stay open: they are shared
        with self._lock:
            if key in self._engines:
                self._engines.move_to_end(key)
        return engine

    def _backends(self, upstream_model: str | None) -> RoleBackends:
        """The server's backends, or a chosen upstream model for every role."""
        if upstream_model is None:
            return self.backends
        if self.upstream is None:
            raise no_upstream(upstream_model)
        if upstream_model not in self._chosen:
            self._chosen[upstream_model] = RoleBackends.of(self.upstream.backend(upstream_model)).map(self.wrap)
        return self._chosen[upstream_model]

    async def aclose(self) -> None:
        await self.backends.aclose()
        for backend in self.upstream.opened() if self.upstream is not None else []:
            await backend.aclose()


class Reservation:
    """A queue place taken before the response starts; released when its run ends, or by
    :meth:`release_if_unused` when the run never started (the client left first)."""

    def __init__(self, admission: Admission) -> None:
        self.admission = admission
        self.used = False
        self.released = False

    def release_if_unused(self) -> bool:
        """Give the place back if no run used it; True if it did so."""
        if self.used or self.released:
            return False
        self.released = True
        self.admission.waiting -= 1
        return True


class Admission:
    """At most ``running`` runs at once and ``queued`` more waiting; beyond that a request is
    refused at once (429 with Retry-After) instead of piling up behind a slow model."""

    def __init__(self, running: int, queued: int) -> None:
        self.running, self.queued = max(1, running), max(0, queued)
        self._slots = asyncio.Semaphore(self.running)
        self.active = 0
        self.waiting = 0
        self._recent: list[float] = []  # seconds of the last runs, for Retry-After

    def reserve(self) -> Reservation:
        """Take a queue place now (before the response starts) or raise QueueFullError."""
        if self.active + self.waiting >= self.running + self.queued:
            raise QueueFullError(
                f"the server is busy: {self.active} runs in flight and {self.waiting} queued "
                f"(limits {self.running} and {self.queued}); retry later",
                self.retry_after(),
            )
        self.waiting += 1
        return Reservation(self)

    @asynccontextmanager
    async def slot(self, reservation: Reservation) -> AsyncIterator[None]:
        """Run under a slot, using ``reservation``'s queue place."""
        reservation.used = True
        try:
            await self._slots.acquire()
        finally:
            self.waiting -= 1
        self.active += 1
        start = time.monotonic()
        try:
            yield
        finally:
            self.active -= 1
            self._slots.release()
            self._recent = [*self._recent[-19:], time.monotonic() - start]

    def retry_after(self) -> int:
        """Seconds until a place is likely free: a typical run's length, at least 1."""
        if not self._recent:
            return 1
        return max(1, math.ceil(sorted(self._recent)[len(self._recent) // 2]))
