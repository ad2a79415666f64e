"""The upstream model a request chooses (as optillm does by a model-name prefix): with
``selfrefine serve --model openai:NAME --upstream-model OTHER``, the model id
``selfrefine/<task>@OTHER`` (or ``"selfrefine": {"model": "OTHER"}``) runs the loop on OTHER,
on the same OpenAI-compatible server with the server's own key. Only the models the operator
allowed may be chosen: the client never reaches the upstream by any other name."""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from dataclasses import dataclass, field

from ..backends.base import Backend
from ..core.errors import ConfigError
from ..core.records import CallRecord, CallStep, DecisionStep, ResultStep, RunResult, Step

UPSTREAM_SEPARATOR = "@"
_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s()\[\]'\"<>]+")
log = logging.getLogger("selfrefine.serve")


def public_message(message: str) -> str:
    """What an API client may read of a model failure: the message without any URL (the
    upstream's address, e.g. ``cannot reach server ... (at http://10.0.0.5:8000/v1)``).
    The server's log keeps the whole message."""
    redacted = _URL.sub("<upstream>", message)
    if redacted != message:
        log.warning("%s", message)
    return redacted


def _public_call(call: CallRecord) -> CallRecord:
    return call.model_copy(update={"error": public_message(call.error)}) if call.error else call


def _public_result(result: RunResult) -> RunResult:
    error = public_message(result.error) if result.error else result.error
    return result.model_copy(update={"error": error, "calls": [_public_call(c) for c in result.calls]})


async def public_steps(steps: AsyncIterator[Step]) -> AsyncIterator[Step]:
    """A run's steps as a client may see them: failed calls, a decision's detail and the
    run's error without the upstream's address (:func:`public_message`). Closing this
    closes ``steps`` at once (a client that leaves cancels the run's calls)."""
    async with aclosing(steps):  # type: ignore[type-var]
        async for step in steps:
            if isinstance(step, ResultStep):
                step = step.model_copy(update={"result": _public_result(step.result)})
            elif isinstance(step, CallStep) and step.call.error:
                step = step.model_copy(update={"call": _public_call(step.call)})
            elif isinstance(step, DecisionStep) and step.detail:  # "stop (error): ..."
                step = step.model_copy(update={"detail": public_message(step.detail)})
            yield step


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
