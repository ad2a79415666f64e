"""The upstream model a request chooses (as optillm does by a model-name prefix): with
``selfrefine serve --model openai:NAME --upstream-model OTHER``, the model id
``selfrefine/<task>@OTHER`` (or ``"selfrefine": {"model": "OTHER"}``) runs the loop on OTHER,
on the same OpenAI-compatible server with the server's own key. Only the models the operator
allowed may be chosen: the client never reaches the upstream by any other name."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..backends.base import Backend
from ..core.errors import ConfigError

UPSTREAM_SEPARATOR = "@"


class UpstreamModelError(ConfigError):
    """A request chose an upstream model this server does not allow (or has no upstream)."""


@dataclass
class Upstream:
    """The operator's allowed upstream models and how to reach one (``make``: a backend for
    a model name on the upstream server, with the server's base URL and key)."""

    allowed: tuple[str, ...]
    make: Callable[[str], Backend]
    _made: dict[str, Backend] = field(default_factory=dict)

    def backend(self, name: str) -> Backend:
        """The backend of an allowed model, built once and shared by every engine using it."""
        if name not in self.allowed:
            raise UpstreamModelError(
                f"upstream model {name!r} is not allowed on this server; allowed: {', '.join(self.allowed)}"
            )
        if name not in self._made:
            self._made[name] = self.make(name)
        return self._made[name]

    def opened(self) -> list[Backend]:
        return list(self._made.values())


def split_model_id(model: str) -> tuple[str, str | None]:
    """``selfrefine/commongen@gpt-4o`` -> (``selfrefine/commongen``, ``gpt-4o``); the first
    ``@`` splits, so an upstream name may hold one (``org/model@v2``)."""
    base, sep, upstream = model.partition(UPSTREAM_SEPARATOR)
    return (base, upstream or None) if sep else (model, None)


def no_upstream(name: str) -> UpstreamModelError:
    return UpstreamModelError(
        f"upstream model {name!r} was asked for, but this server has no upstream to choose on "
        "(the operator allows models with 'selfrefine serve --model openai:NAME --upstream-model OTHER')"
    )
