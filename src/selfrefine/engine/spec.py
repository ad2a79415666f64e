"""One engine spec: what an engine is made of, as plain data.

``run``, ``eval``, ``serve`` and Ray's actors all describe their engine with an
:class:`EngineSpec` and build it with :meth:`SelfRefine.from_spec
<selfrefine.engine.loop.SelfRefine.from_spec>`: a task (a registered name or a task file's
path), the loop's :class:`~selfrefine.core.config.RefineConfig`, and a :class:`ModelSpec`
per role whose options are typed by the backend's own options model when the spec is made.
It pickles and serialises to JSON, so a Ray actor receives the spec itself: nothing is
re-parsed there and no function travels.

A :class:`BackendPool` opens each distinct model spec once and gives an engine its roles'
backends as one :class:`~selfrefine.backends.roles.RoleBackends`: every engine built with a
pool shares its backends, so one model file is loaded once and each backend's concurrency
limit holds across engines.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..backends.base import Backend
from ..backends.options import validate
from ..backends.registry import DEFAULT_MODEL, get_backend, scheme_of
from ..backends.roles import RoleBackends, Wrap
from ..core.config import RefineConfig


class ModelSpec(BaseModel):
    """A model (``embedded``, ``gguf:PATH``, ``openai:NAME``, ``fake``, a plugin's scheme) and
    that backend's options, checked and typed against its options model (``selfrefine models``
    lists them): ``ModelSpec(model="embedded", options={"n_threads": "2"})`` holds 2."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str = DEFAULT_MODEL
    options: dict[str, Any] = Field(default_factory=dict)

    @field_validator("model")
    @classmethod
    def _known(cls, value: str) -> str:
        value = (value or DEFAULT_MODEL).strip()
        scheme_of(value)  # an unknown scheme is a ModelNotFoundError naming the known ones
        return value

    @model_validator(mode="after")
    def _typed(self) -> ModelSpec:
        scheme = scheme_of(self.model)
        model = scheme.options_model()
        if model is not None:
            object.__setattr__(self, "options", validate(scheme.name, model, self.options))
        return self

    def with_options(self, **options: Any) -> ModelSpec:
        """This spec with more options (checked again)."""
        return ModelSpec(model=self.model, options={**self.options, **options})

    def key(self) -> str:
        return self.model_dump_json()

    def build(self) -> Backend:
        return get_backend(self.model, **self.options)


class EngineSpec(BaseModel):
    """Everything an engine is made of. A role's model None: the role shares another's backend
    (:data:`~selfrefine.backends.roles.SHARES`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    task: str
    config: RefineConfig = Field(default_factory=RefineConfig)
    model: ModelSpec = Field(default_factory=ModelSpec)
    feedback_model: ModelSpec | None = None
    refine_model: ModelSpec | None = None
    judge_model: ModelSpec | None = None

    def replace(self, **update: Any) -> EngineSpec:
        """A copy with some fields changed (and checked again)."""
        return EngineSpec.model_validate({**self.model_dump(), **update})


class BackendPool:
    """Each distinct model spec opened once and shared by every engine built with the pool.
    ``wrap`` is applied once to each backend it opens."""

    def __init__(self, wrap: Wrap | None = None) -> None:
        self.wrap = wrap
        self._open: dict[str, Backend] = {}

    def get(self, spec: ModelSpec) -> Backend:
        key = spec.key()
        if key not in self._open:
            backend = spec.build()
            self._open[key] = self.wrap(backend) if self.wrap is not None else backend
        return self._open[key]

    def roles(
        self,
        model: ModelSpec,
        feedback_model: ModelSpec | None = None,
        refine_model: ModelSpec | None = None,
        judge_model: ModelSpec | None = None,
    ) -> RoleBackends:
        """Each role's backend, as :class:`EngineSpec` names them (None: shared per
        :data:`~selfrefine.backends.roles.SHARES`); a spec already open is shared, not opened again."""
        main = self.get(model)  # opened first, as the roles come
        own = [self.get(spec) if spec is not None else None for spec in (feedback_model, refine_model, judge_model)]
        return RoleBackends.of(main, *own)

    def backends(self) -> list[Backend]:
        return list(self._open.values())

    async def aclose(self) -> None:
        for backend in self.backends():
            await backend.aclose()
        self._open.clear()
