"""A deterministic in-package model for tests and dry runs (like DSPy's DummyLM).

Replies come, in this order of precedence, from:

1. ``table``: the first key that is a substring of the prompt wins (insertion order);
2. ``replies``: a list consumed in order, or a dict of per-role lists;
3. ``default``: a string, or a callable ``(request) -> str``.

A reply that is an exception instance is raised instead of returned, which lets tests
script failures (``TransientBackendError`` for retries, anything else for fatal errors).
Every request is recorded in ``self.requests`` with its role, in call order; one that the
caller cancelled while it waited out its ``latency`` (e.g. a time budget ran out) also in
``self.cancelled``.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Union

from ..engine.errors import BackendError, ModelNotFoundError
from .base import Backend, CompletionRequest, CompletionResponse

Reply = Union[str, BaseException]


def count_tokens(text: str) -> int:
    """A stable stand-in for tokenisation: whitespace-separated words."""
    return len(text.split())


class FakeBackend(Backend):
    max_concurrency = 64

    def __init__(
        self,
        replies: Iterable[Reply] | Mapping[str, Iterable[Reply]] | None = None,
        *,
        table: Mapping[str, Reply] | None = None,
        default: str | Callable[[CompletionRequest], str] | None = None,
        latency: float | Mapping[str, float] = 0.0,
        name: str = "fake",
    ) -> None:
        super().__init__(name)
        self._queues: dict[str | None, deque[Reply]] = {}
        if isinstance(replies, Mapping):
            for role, items in replies.items():
                self._queues[role] = deque(items)
        elif replies is not None:
            self._queues[None] = deque(replies)
        self.table = dict(table or {})
        self.default = default
        self.latency = latency  # seconds per call, or per role ({"refine": 5.0})
        self.requests: list[CompletionRequest] = []
        self.cancelled: list[CompletionRequest] = []

    @classmethod
    def from_file(cls, path: str | Path) -> "FakeBackend":
        """Load ``{"replies": [...] | {role: [...]}, "table": {...}, "default": "...", "latency": s}``."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ModelNotFoundError(f"fake reply file not found: {path}") from None
        except (OSError, ValueError) as exc:
            raise ModelNotFoundError(f"cannot read fake reply file {path}: {exc}") from None
        if not isinstance(data, dict):
            raise ModelNotFoundError(f"fake reply file {path} must hold a JSON object")
        return cls(
            data.get("replies"),
            table=data.get("table"),
            default=data.get("default"),
            latency=float(data.get("latency", 0.0)),
            name=f"fake:{path}",
        )

    def prompts(self, role: str | None = None) -> list[str]:
        """The prompts received so far, optionally only those of one role."""
        return [r.prompt for r in self.requests if role is None or r.role == role]

    def _next_reply(self, request: CompletionRequest) -> Reply:
        for key, reply in self.table.items():
            if key in request.prompt:
                return reply
        for key in (request.role, None):
            queue = self._queues.get(key)
            if queue:
                return queue.popleft()
        if callable(self.default):
            return self.default(request)
        if self.default is not None:
            return self.default
        raise BackendError(
            f"fake backend has no reply left for a {request.role!r} request; "
            "give it more replies, a table entry or a default"
        )

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        self.requests.append(request)
        delay = self.latency.get(request.role, 0.0) if isinstance(self.latency, Mapping) else self.latency
        if delay:
            try:
                await asyncio.sleep(delay)
            except asyncio.CancelledError:
                self.cancelled.append(request)  # lets tests see that a call was cut off mid-way
                raise
        reply = self._next_reply(request)
        if isinstance(reply, BaseException):
            raise reply
        return CompletionResponse(
            text=reply,
            prompt_tokens=count_tokens(request.system or "") + count_tokens(request.prompt),
            completion_tokens=count_tokens(reply),
            model=self.name,
            finish_reason="stop",
        )
