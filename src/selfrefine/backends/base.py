"""The backend contract: one async method taking a typed request, returning a typed response.

A backend turns a rendered prompt into text. It knows nothing about Self-Refine: the loop
tells it which role is calling (so a backend can keep a warm cache per role) and whether
the answer must follow a JSON schema (constrained decoding where the engine supports it).

Backends raise :class:`~selfrefine.core.errors.TransientBackendError` for failures worth
retrying (connection, 429, 5xx, timeouts) and other :class:`BackendError`s otherwise; the
loop owns the retry policy so every attempt is recorded the same way for all backends.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..core.bans import TokenBan
from ..core.records import (  # ModelInfo: re-exported, backends return it
    ModelInfo,
    Role,
)
from ..core.seeds import reply_seed


class Turn(BaseModel):
    """One message of a conversation a request continues (OpenAI's ``{"role", "content"}``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    role: Literal["system", "user", "assistant"]
    content: str


class CompletionRequest(BaseModel):
    """One call. Two forms: a prompt (the user turn) under the task's ``system`` message; or
    a conversation sent as it is, the prompt its last user turn and ``turns`` the messages
    before it (the conversation's own system turn among them; ``system`` then stays None),
    which a chat model renders through its own chat template: what the plain model answers."""

    role: Role
    prompt: str  # the user turn (chat) or the whole prompt (completion endpoints)
    system: str | None = None
    # the conversation's messages before the prompt, its last user turn ([]: the prompt
    # alone, without any system message); None: the prompt form
    turns: list[Turn] | None = None
    max_tokens: int = 300
    temperature: float = 0.0
    seed: int | None = None
    stop: list[str] = Field(default_factory=list)
    json_schema: dict[str, Any] | None = None  # constrain output where supported
    # characters no token of the reply may hold (a check's "use no commas", core/bans.py):
    # refused at decoding by the llama.cpp backend (token_bans.py); another backend ignores it
    # and the checks alone hold the reply to what the request forbids
    ban: TokenBan | None = None
    # ask for the k most likely alternatives of each generated token with their log
    # probabilities (OpenAI's top_logprobs); None asks for none
    top_logprobs: int | None = Field(default=None, ge=0, le=20)
    # what the call is for besides its role's step ("checks": deriving the request's checks);
    # a backend answers it as any request (the fake model scripts it apart)
    purpose: str | None = None

    @model_validator(mode="after")
    def _one_form(self) -> CompletionRequest:
        if self.turns is not None and self.system is not None:
            raise ValueError("a conversation carries its own system turn among its turns: give turns or system")
        return self


class TokenChoices(BaseModel):
    """One generated token, its log probability, and the most likely alternatives at its
    position (the token itself among them where it is one of the k): text -> logprob."""

    token: str
    logprob: float
    top: dict[str, float] = Field(default_factory=dict)


class CompletionResponse(BaseModel):
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model: str = ""
    finish_reason: str | None = None
    cached: bool = False  # answered from the response cache
    # prompt tokens the engine took from its prefix/KV cache instead of computing them;
    # None when the engine does not say (benchmark 3 reads this)
    cached_prompt_tokens: int | None = None
    # one entry per generated token where the request asked for top_logprobs and the
    # backend returned them; None where it returned none (never a guess)
    top_logprobs: list[TokenChoices] | None = None


#: receives each piece of a reply as it is generated (in the event loop's thread, in order)
TextSink = Callable[[str], None]


class Backend(abc.ABC):
    """Subclass this (or register an entry point in ``selfrefine.backends``) to add models."""

    #: how many requests this backend can usefully serve at once
    max_concurrency: int = 1
    #: one request can return several samples of its prompt (the OpenAI API's ``n``); False:
    #: :meth:`complete_n` sends one request per sample
    supports_n: bool = False

    def __init__(self, name: str) -> None:
        self.name = name

    @abc.abstractmethod
    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        """Answer one request. Must be safe to call from concurrent tasks."""

    async def stream(self, request: CompletionRequest, on_text: TextSink) -> CompletionResponse:
        """Answer one request as :meth:`complete` does, handing each piece of the reply to
        ``on_text`` as it is generated; the pieces concatenate to the response's text, and
        the response (text, token counts) is what :meth:`complete` would have returned.

        This default sends the whole reply as one piece once it is complete; a backend that
        can do better (llama.cpp in-process, the ``openai`` SDK, the fake) overrides it."""
        response = await self.complete(request)
        if response.text:
            on_text(response.text)
        return response

    async def complete_n(self, request: CompletionRequest, n: int) -> list[CompletionResponse]:
        """``n`` samples of one prompt (the loop asks for them at a temperature above 0).

        This default sends ``n`` requests one after the other, seeded ``seed``, ``seed + 1``, …
        so each is a different sample; they share the whole prompt, which a backend with a
        prefix cache (llama.cpp in-process, llama-server) computes once. A backend whose API
        returns several samples per request overrides this (``supports_n``)."""
        return [await self.complete(nth_sample(request, i)) for i in range(max(1, n))]

    async def aclose(self) -> None:  # noqa: B027 - optional: most backends hold nothing to release
        """Release connections or native resources. Safe to call twice."""

    def describe(self) -> str:
        return self.name

    def cache_identity(self) -> str:
        """What, besides the request, decides the answer (model, endpoint): the cache key."""
        return self.name

    def model_info(self) -> ModelInfo | None:
        """The local model file this backend runs, if it runs one."""
        return None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


def nth_sample(request: CompletionRequest, i: int) -> CompletionRequest:
    """The request of sample ``i`` of a prompt sent one request per sample: the seed moved on."""
    if i == 0 or request.seed is None:
        return request
    return request.model_copy(update={"seed": reply_seed(request.seed, i)})


def chat_messages(request: CompletionRequest) -> list[dict[str, str]]:
    """The request as OpenAI-style chat messages: optional system, then the prompt; a
    conversation's turns as they are, then the prompt as its last user turn."""
    messages = [] if request.turns is None else [t.model_dump() for t in request.turns]
    if request.system:
        messages.append({"role": "system", "content": request.system})
    messages.append({"role": "user", "content": request.prompt})
    return messages


#: how a conversation's roles read in one text (a completion endpoint's prompt, a record)
LABELS = {"system": "System", "user": "User", "assistant": "Assistant"}


def flat_prompt(request: CompletionRequest) -> str:
    """The request as one text for completion endpoints; system text comes first. A
    conversation of several messages is a transcript (``System: …``, ``User: …``,
    ``Assistant: …`` turns, a blank line apart) ending with the cue ``Assistant:``; a
    conversation of its prompt alone is the prompt."""
    if request.turns:
        lines = [f"{LABELS[m['role']]}: {m['content']}" for m in chat_messages(request)]
        return "\n\n".join([*lines, f"{LABELS['assistant']}:"])
    if request.system:
        return f"{request.system}\n\n{request.prompt}"
    return request.prompt


def shown_prompt(request: CompletionRequest) -> str:
    """The request's prompt as records show it (``record_prompts``, the fake model's
    ``prompts``): the prompt; a conversation whole (:func:`flat_prompt`)."""
    return request.prompt if request.turns is None else flat_prompt(request)
