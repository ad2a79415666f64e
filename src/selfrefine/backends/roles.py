"""The backend of each role of a run (``generate``, ``feedback``, ``refine``, ``judge``), as one value.

Roles may share a backend (one model for every role is the usual case): :class:`RoleBackends`
keeps that sharing, so a backend shared by two roles is one object with one concurrency
limit. The judge (the closed questions of :mod:`~selfrefine.engine.scoring.questions`) is the
critic's backend unless it is given its own. The engine reads it by role
(``backends["feedback"]``); a :class:`~selfrefine.engine.spec.BackendPool` produces it from
an engine spec's models; the server gives one to every engine it builds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from ..core.records import MODEL_ROLES, Role
from .base import Backend

Wrap = Callable[[Backend], Backend]
"""A backend wrapper (a response cache, a tracer): given each distinct backend once."""


# The one rule for a role without a backend of its own: it shares this role's (the critic
# and the refiner the generator's; the judge, whose closed questions are a critic's, the
# critic's). Everything that opens or describes a run's backends follows it.
SHARES: dict[Role, Role] = {"feedback": "generate", "refine": "generate", "judge": "feedback"}


@dataclass(frozen=True)
class RoleBackends(Mapping[Role, Backend]):
    """Each role's backend, indexed by role: ``backends["refine"].name``."""

    generate: Backend
    feedback: Backend
    refine: Backend
    judge: Backend = None  # type: ignore[assignment]  # None: shared as SHARES says

    def __post_init__(self) -> None:
        if self.judge is None:
            object.__setattr__(self, "judge", getattr(self, SHARES["judge"]))

    @classmethod
    def of(
        cls,
        model: Backend,
        feedback: Backend | None = None,
        refine: Backend | None = None,
        judge: Backend | None = None,
    ) -> RoleBackends:
        """``model`` generates; a role given no backend of its own shares another's (:data:`SHARES`;
        ``of(b)``: one backend serves every role)."""
        given: dict[Role, Backend | None] = {"generate": model, "feedback": feedback, "refine": refine, "judge": judge}
        for role in MODEL_ROLES:  # in order: the judge's fallback, the critic, is resolved first
            given[role] = given[role] if given[role] is not None else given[SHARES[role]]
        return cls(*(given[role] for role in MODEL_ROLES))  # type: ignore[arg-type]

    @property
    def model(self) -> Backend:
        """The main backend (as ``--model`` and ``EngineSpec.model``): the one that generates."""
        return self.generate

    def __getitem__(self, role: Role) -> Backend:
        if role not in MODEL_ROLES:
            raise KeyError(role)
        backend: Backend = getattr(self, role)
        return backend

    def __iter__(self) -> Iterator[Role]:
        return iter(MODEL_ROLES)

    def __len__(self) -> int:
        return len(MODEL_ROLES)

    def distinct(self) -> list[Backend]:
        """Each backend once, however many roles share it (in role order)."""
        return list({id(b): b for b in self.values()}.values())

    def map(self, wrap: Wrap | None) -> RoleBackends:
        """Each distinct backend wrapped once: roles that shared a backend share its wrapper
        (``wrap`` None: these backends as they are)."""
        if wrap is None:
            return self
        wrapped = {id(backend): wrap(backend) for backend in self.distinct()}
        return RoleBackends(*(wrapped[id(self[role])] for role in MODEL_ROLES))

    async def aclose(self) -> None:
        """Close each distinct backend once."""
        for backend in self.distinct():
            await backend.aclose()
