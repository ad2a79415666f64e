"""A deterministic in-package model for tests and dry runs (like DSPy's DummyLM).

Replies come, in this order of precedence, from:

1. ``table``: the first key that is a substring of the prompt wins (insertion order);
2. ``replies``: a list consumed in order, or a dict of per-role lists;
3. ``default``: a string, or a callable ``(request) -> str``.

A reply that is an exception instance is raised instead of returned, which lets tests
script failures (``TransientBackendError`` for retries, anything else for fatal errors).
A reply can carry token probabilities: ``{"text": "Yes", "top_logprobs": [{"Yes": -0.1,
"No": -2.4}]}`` (one ``{token: logprob}`` per token; the likeliest is the token chosen),
in Python and in a replies file alike, and from a ``default`` callable. A request that asks
for ``top_logprobs=k`` gets them (each cut to its k likeliest); a reply without them, or a
request that does not ask, gets ``top_logprobs=None``, as from a server that returns none.
A reply longer than the request's ``max_tokens`` (counted in words) is cut there and
finishes with ``"length"``, as a real model's would; others finish with ``"stop"``. A reply
that holds one of the request's ``stop`` sequences ends before it, as a server's does.
Every request is recorded in ``self.requests`` with its role, in call order (a
conversation's with its ``turns``: table keys are looked up in the whole conversation, and
every message's words count as prompt tokens); one that the caller cancelled while it waited out its ``latency`` (e.g. a time budget ran out) also in
``self.cancelled``.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..core.errors import BackendError, ModelNotFoundError
from ..core.records import MODEL_ROLES
from .base import Backend, CompletionRequest, CompletionResponse, TextSink, TokenChoices, shown_prompt

Reply = str | BaseException | Mapping[str, Any]  # a mapping: {"text": ..., "top_logprobs": [...]}

ROLE_KEYS = MODEL_ROLES
# what the fake model says to a call of a purpose its script does not answer: the
# derivation of a request's checks finds none (engine/derivation.py)
PURPOSE_DEFAULTS = {"checks": '{"checks": []}'}
FILE_KEYS = ("replies", "table", "default", "latency", *ROLE_KEYS)
SEE_FORMAT = "`selfrefine models` and the README (The fake model) give the format"
REPLIES_FILE_FORMAT = (
    'a JSON object with any of: "replies": [REPLY, ...] (used in order by every role) or '
    '{ROLE: [REPLY, ...]}; a role key at the top level ("generate"/"feedback"/"refine"/"judge": [REPLY, ...]); '
    '"table": {PROMPT_SUBSTRING: REPLY} (checked first); "default": REPLY (when nothing else is left); '
    '"latency": SECONDS or {ROLE: SECONDS}. A bare JSON list is the "replies" list. REPLY is a string, '
    'or {"text": STRING, "top_logprobs": [{TOKEN: LOGPROB, ...}, ...]} to give the token probabilities '
    "that a request asking for top_logprobs gets (one object per token)."
)


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
        default: Reply | Callable[[CompletionRequest], Reply] | None = None,
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
    def from_file(cls, path: str | Path) -> FakeBackend:
        """A fake model from a replies file (format: ``REPLIES_FILE_FORMAT``)."""
        data = _read_replies_file(path)
        replies, table, default, latency = _check_replies_file(data, f"fake reply file {path}")
        return cls(replies, table=table, default=default, latency=latency, name=f"fake:{path}")

    def prompts(self, role: str | None = None, purpose: str | None = None) -> list[str]:
        """The prompts received so far (a conversation whole, as a transcript:
        :func:`~.base.shown_prompt`), optionally only those of one role's own steps (or, with
        ``purpose``, of the calls made for it: "checks")."""
        if role is None and purpose is None:
            return [shown_prompt(r) for r in self.requests]
        return [shown_prompt(r) for r in self.requests if (role is None or r.role == role) and r.purpose == purpose]

    def _next_reply(self, request: CompletionRequest) -> Reply:
        prompt = shown_prompt(request)
        for key, reply in self.table.items():
            if key in prompt:
                return reply
        if request.purpose is not None:  # scripted under its purpose ("checks"), else none found
            queue = self._queues.get(request.purpose)
            return queue.popleft() if queue else PURPOSE_DEFAULTS.get(request.purpose, "")
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
        await self._wait(request, self._delay(request))
        return self._response(request, self._next_reply(request))

    async def stream(self, request: CompletionRequest, on_text: TextSink) -> CompletionResponse:
        """The reply in pieces (a word and the space after it), its latency spread over them:
        half before the first piece, the rest between pieces, so the call takes as long as
        :meth:`complete` and its first piece arrives while it is still running."""
        self.requests.append(request)
        delay = self._delay(request)
        await self._wait(request, delay / 2)
        reply = self._next_reply(request)
        if isinstance(reply, BaseException):
            raise reply
        pieces = text_pieces(cut_at(reply_text(reply), request.max_tokens)[0])  # what _response records
        gap = delay / 2 / max(1, len(pieces))
        for piece in pieces:
            on_text(piece)
            await self._wait(request, gap)
        if not pieces:
            await self._wait(request, gap)
        return self._response(request, reply)

    def _delay(self, request: CompletionRequest) -> float:
        return self.latency.get(request.role, 0.0) if isinstance(self.latency, Mapping) else self.latency

    async def _wait(self, request: CompletionRequest, delay: float) -> None:
        if not delay:
            return
        try:
            await asyncio.sleep(delay)
        except asyncio.CancelledError:
            self.cancelled.append(request)  # lets tests see that a call was cut off mid-way
            raise

    def _response(self, request: CompletionRequest, reply: Reply) -> CompletionResponse:
        if isinstance(reply, BaseException):
            raise reply
        text, finish = cut_at(before_stop(reply_text(reply), request.stop), request.max_tokens)
        return CompletionResponse(
            text=text,
            prompt_tokens=count_tokens(request.system or "")
            + count_tokens(request.prompt)
            + sum(count_tokens(t.content) for t in request.turns or ()),
            completion_tokens=count_tokens(text),
            model=self.name,
            finish_reason=finish,
            top_logprobs=scripted_choices(reply, request),
        )


def reply_text(reply: Reply) -> str:
    """The text of a reply, given as a string or as ``{"text": ..., "top_logprobs": ...}``."""
    if isinstance(reply, Mapping):
        text = reply.get("text")
        if not isinstance(text, str):
            raise BackendError(f'a fake reply object needs a "text" string, got {reply!r:.80}')
        return text
    return str(reply)


def scripted_choices(reply: Reply, request: CompletionRequest) -> list[TokenChoices] | None:
    """The token probabilities a reply object scripts, as a request asking for the top
    ``k`` gets them: each token the likeliest of its alternatives, the top cut to ``k``."""
    scripted = reply.get("top_logprobs") if isinstance(reply, Mapping) else None
    if request.top_logprobs is None or not scripted:
        return None
    try:
        return [_choices(dict(alternatives), request.top_logprobs) for alternatives in scripted[: request.max_tokens]]
    except (TypeError, ValueError, ValidationError) as exc:
        raise BackendError(f"a fake reply's top_logprobs must be [{{TOKEN: LOGPROB}}, ...]: {exc}") from None


def _choices(alternatives: dict[str, float], k: int) -> TokenChoices:
    ranked = sorted(alternatives.items(), key=lambda item: -item[1])
    token, logprob = ranked[0]
    return TokenChoices(token=token, logprob=logprob, top=dict(ranked[:k]))


def before_stop(reply: str, stop: Iterable[str]) -> str:
    """A reply as a server returns it under these stop sequences: the text before the first
    one it holds (the sequence itself not included)."""
    ends = [i for i in (reply.find(s) for s in stop if s) if i >= 0]
    return reply[: min(ends)] if ends else reply


def cut_at(reply: str, max_tokens: int) -> tuple[str, str]:
    """A reply as a model with this token limit writes it: whole (finish reason "stop"), or
    cut after ``max_tokens`` tokens (words here) with finish reason "length", as a real
    model's reply that runs into the limit."""
    if count_tokens(reply) <= max_tokens:
        return reply, "stop"
    return " ".join(reply.split()[:max_tokens]), "length"


def text_pieces(text: str) -> list[str]:
    """``text`` as the pieces the fake streams: each word with the whitespace after it (the
    leading whitespace on its own); they concatenate to ``text``."""
    return re.findall(r"^\s+|\S+\s*", text)


def _read_replies_file(path: str | Path) -> object:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ModelNotFoundError(f"fake reply file not found: {path}") from None
    except RecursionError:  # json's own limit on nesting, reached by a hostile or broken file
        raise ModelNotFoundError(f"fake reply file {path} is nested too deeply to read; {SEE_FORMAT}") from None
    except (OSError, ValueError) as exc:
        raise ModelNotFoundError(f"cannot read fake reply file {path}: {exc}") from None


def _check_replies_file(data: object, where: str) -> tuple[object, object, object, object]:
    """(replies, table, default, latency) of a replies file, each of the right type, or an
    error naming the key and the format: a wrong key would otherwise be silently ignored."""
    if isinstance(data, list):
        data = {"replies": data}
    if not isinstance(data, dict):
        raise ModelNotFoundError(f"{where} must hold a JSON object (or a list of replies); {SEE_FORMAT}")
    unknown = [k for k in data if k not in FILE_KEYS]
    if unknown:
        raise ModelNotFoundError(
            f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; the valid keys are "
            f"{', '.join(FILE_KEYS)}; {SEE_FORMAT}"
        )
    replies = data.get("replies")
    roles = {k: data[k] for k in ROLE_KEYS if k in data}
    if roles and isinstance(replies, list):
        raise ModelNotFoundError(
            f'{where}: give "replies" as a list for every role or per role, not both '
            f"with {', '.join(roles)} at the top level"
        )
    if roles:
        replies = {**(replies if isinstance(replies, dict) else {}), **roles}
    if isinstance(replies, dict):
        for role, items in replies.items():
            _check_strings(items, f'{where}: "{role}"', role in ROLE_KEYS)
    elif replies is not None:
        _check_strings(replies, f'{where}: "replies"', True)
    table = data.get("table")
    if table is not None and not (isinstance(table, dict) and all(_is_reply(v) for v in table.values())):
        raise ModelNotFoundError(f'{where}: "table" must be an object {{PROMPT_SUBSTRING: REPLY string}}')
    default = data.get("default")
    if default is not None and not _is_reply(default):
        raise ModelNotFoundError(
            f'{where}: "default" must be a string (or a reply object), got {type(default).__name__}'
        )
    return replies, table, default, _check_latency(data.get("latency", 0.0), where)


def _check_strings(items: object, where: str, known_role: bool) -> None:
    if not known_role:
        raise ModelNotFoundError(f"{where} is not a role; the roles are {', '.join(ROLE_KEYS)}")
    if not isinstance(items, list) or not all(_is_reply(i) for i in items):
        raise ModelNotFoundError(
            f"{where} must be a list of reply strings (or reply objects), got {json.dumps(items)[:60]}"
        )


def _is_reply(value: object) -> bool:
    """A string, or ``{"text": STRING, "top_logprobs": [{TOKEN: LOGPROB, ...}, ...]}``."""
    if isinstance(value, str):
        return True
    if not isinstance(value, dict) or not isinstance(value.get("text"), str) or set(value) - {"text", "top_logprobs"}:
        return False
    tops = value.get("top_logprobs", [])
    return isinstance(tops, list) and all(
        isinstance(top, dict)
        and top
        and all(isinstance(lp, (int, float)) and not isinstance(lp, bool) for lp in top.values())
        for top in tops
    )


def _check_latency(value: object, where: str) -> float | dict[str, float]:
    def seconds(v: object) -> float:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < 86_400:
            raise ModelNotFoundError(
                f'{where}: "latency" must be seconds (a number from 0), or {{ROLE: seconds}}; got {json.dumps(v)[:60]}'
            )
        return float(v)

    if isinstance(value, dict):
        for role in value:
            if role not in ROLE_KEYS:
                raise ModelNotFoundError(
                    f'{where}: "latency" has no role {role!r}; the roles are {", ".join(ROLE_KEYS)}'
                )
        return {role: seconds(v) for role, v in value.items()}
    return seconds(value)
