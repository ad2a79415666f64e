"""Any OpenAI-compatible server through the official ``openai`` SDK.

Covers OpenAI itself, vLLM, SGLang, Ollama, llama.cpp's ``llama-server`` and
``python -m llama_cpp.server``. The SDK's own retries are switched off: the loop retries
transient failures itself so that every attempt is recorded alike for all backends.

Constrained output: the standard ``response_format={"type": "json_schema", ...}`` is sent
first; servers that only know the older ``{"type": "json_object", "schema": ...}`` form
(``llama_cpp.server``) refuse it (400/422, or a 500 naming response_format), and the
backend then switches to that form for good.

A conversation (a request's ``turns``) goes as its own chat messages; the completion API
(``api=completion``) gets it as one transcript ending with ``Assistant:`` (:func:`~.base.flat_prompt`).

Token probabilities: a request with ``top_logprobs=k`` sends ``logprobs=True,
top_logprobs=k`` (chat) or ``logprobs=k`` (completion endpoint) and maps what comes back
into :class:`~.base.TokenChoices`. A server that returns none answers with
``top_logprobs=None``; one that refuses the parameter (400/422 naming logprobs, or a 500
naming them) is asked again without it, and not asked for probabilities again: its answers
carry none either.

A 200 whose body is not the API's shape (cut off by a proxy, empty, no ``choices``) is
transient like a 5xx: the SDK parses bodies leniently and raises ``JSONDecodeError`` or
hands back a half-built object, so the reply is checked here before it is used.
"""

from __future__ import annotations

import importlib
import json
import os
import re
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import ValidationError

from ..core.errors import (
    BackendError,
    ConfigError,
    ModelNotFoundError,
    TransientBackendError,
)
from .base import (
    Backend,
    CompletionRequest,
    CompletionResponse,
    TextSink,
    TokenChoices,
    chat_messages,
    flat_prompt,
    nth_sample,
)

PLACEHOLDER_KEY = "sk-no-key-required"  # the SDK refuses an empty key, local servers ignore it


class OpenAIBackend(Backend):
    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        api: str = "chat",
        timeout: float = 600.0,
        concurrency: int = 4,
        json_format: str = "auto",
        cache_prompt: bool | None = None,
        request_n: str = "auto",
    ) -> None:
        super().__init__(f"openai:{model}")
        if not model:
            raise ConfigError("openai: needs a model name, e.g. --model openai:gpt-4o-mini")
        if api not in ("chat", "completion"):
            raise ConfigError(f"api must be 'chat' or 'completion', not {api!r}")
        if json_format not in ("auto", "json_schema", "json_object", "off"):
            raise ConfigError("json_format must be auto, json_schema, json_object or off")
        try:
            import openai
        except ImportError:
            raise BackendError("the openai package is not installed: pip install openai") from None
        self.model = model
        self.api = api
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        key = api_key or os.environ.get("OPENAI_API_KEY")
        if not key:
            if self.base_url is None:
                raise ConfigError(
                    "OPENAI_API_KEY is not set; export it, or point --base-url at a local "
                    "OpenAI-compatible server (no key needed there)"
                )
            key = PLACEHOLDER_KEY
        self.max_concurrency = max(1, int(concurrency))
        if request_n not in ("auto", "on", "off"):
            raise ConfigError("request_n must be auto, on or off")
        # auto: ask for K samples with one request (n=K) until the server refuses n or
        # returns fewer choices (llama-server and llama_cpp.server do), then one per sample
        self.request_n = request_n
        self.supports_n = request_n != "off"
        self.json_format = json_format
        # llama-server's own switch for its prompt (prefix) cache; None leaves the server's
        # default. Off only makes sense to measure what the cache saves.
        self.cache_prompt = cache_prompt
        self._client = openai.AsyncOpenAI(api_key=key, base_url=self.base_url, max_retries=0, timeout=float(timeout))
        # False once the server streamed a reply without its usage: later calls come whole
        self.stream_usage = True
        # True once the server refused logprobs: later calls do not ask for them
        self.logprobs_refused = False

    def cache_identity(self) -> str:
        return f"{self.name}@{self.base_url or 'api.openai.com'}/{self.api}"

    def describe(self) -> str:
        where = self.base_url or "api.openai.com"
        return f"{self.name} ({self.api} endpoint at {where})"

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        call = self._completion if self.api == "completion" else self._chat
        return (await self._answered(request, lambda: call(request)))[0]

    async def _answered(
        self, request: CompletionRequest, call: Callable[[], Awaitable[list[CompletionResponse]]]
    ) -> list[CompletionResponse]:
        """:meth:`_mapped` of ``call()``; where the server refuses logprobs, ``call()`` again
        without them (its answers then carry none)."""
        try:
            return await self._mapped(call())
        except BackendError as exc:
            if request.top_logprobs is None or self.logprobs_refused or not _refuses_logprobs(exc):
                raise
            self.logprobs_refused = True
            return await self._mapped(call())

    async def complete_n(self, request: CompletionRequest, n: int) -> list[CompletionResponse]:
        """K samples: one request with ``n=K`` where the server honours it; where it refuses
        ``n`` (400) or returns fewer choices, the rest one request each, and n is not asked
        for again (with ``request_n="on"`` a refusal is an error instead)."""
        if n <= 1 or not self.supports_n or self.api == "completion":
            return await super().complete_n(request, n)
        try:
            got = await self._answered(request, lambda: self._chat(request, n))
        except BackendError as exc:
            if self.request_n == "on" or isinstance(exc, TransientBackendError) or "(400)" not in str(exc):
                raise
            got = []
        if len(got) < n:
            if self.request_n == "on":
                raise BackendError(
                    f"{self.name}: asked for n={n} samples, the server returned {len(got)}; "
                    "use request_n=auto or off for a server without n"
                )
            self.supports_n = False
            got += [await self.complete(nth_sample(request, i)) for i in range(len(got), n)]
        return got

    async def stream(self, request: CompletionRequest, on_text: TextSink) -> CompletionResponse:
        """The reply as the server writes it (``stream=True``), its token counts from the
        usage the stream ends with (``stream_options.include_usage``). A server that sends
        no usage in a stream (``llama_cpp.server``) has that call counted as 0 tokens and
        is asked for whole replies from then on, so the counts stay right."""
        if not self.stream_usage:
            return await super().stream(request, on_text)
        return (await self._answered(request, lambda: self._streamed(request, on_text)))[0]

    async def _streamed(self, request: CompletionRequest, on_text: TextSink) -> list[CompletionResponse]:
        import openai

        pieces: list[str] = []
        tops: list[TokenChoices] | None = None
        finish, usage, last = None, None, None
        try:
            async with await self._open_stream(request) as chunks:
                async for last in chunks:
                    for choice in getattr(last, "choices", None) or []:
                        piece = _piece(choice)
                        if piece:
                            pieces.append(piece)
                            on_text(piece)
                        more = self._token_choices(choice)
                        tops = tops if more is None else [*(tops or []), *more]
                        finish = getattr(choice, "finish_reason", None) or finish
                    usage = last if getattr(last, "usage", None) is not None else usage
        except _transport_errors() as exc:  # the connection broke off mid-stream
            raise TransientBackendError(f"{self.name}: the stream broke off: {exc!r}") from exc
        except openai.APIError as exc:
            if isinstance(exc, openai.APIStatusError | openai.APIConnectionError | openai.APIResponseValidationError):
                raise
            raise TransientBackendError(
                f"{self.name}: the server ended the stream with an error: {exc.message}"
            ) from exc
        if last is None:
            raise TransientBackendError(f"{self.name}: {MALFORMED}: the stream held no reply")
        self.stream_usage = usage is not None
        return self._responses([("".join(pieces), finish, tops)], usage or last)

    async def _open_stream(self, request: CompletionRequest) -> Any:
        """The streamed call; the json_schema fallback as :meth:`_chat` does it."""
        import openai

        kwargs = {**self._sampling(request), "stream": True, "stream_options": {"include_usage": True}}
        if self.api == "completion":
            return await self._client.completions.create(model=self.model, prompt=flat_prompt(request), **kwargs)
        fmt = self._response_format(request)
        messages = chat_messages(request)
        try:
            return await self._client.chat.completions.create(
                model=self.model, messages=messages, **kwargs, **({"response_format": fmt} if fmt else {})
            )
        except openai.APIStatusError as exc:
            if not self._schema_form_refused(fmt, exc):
                raise
            self.json_format = "json_object"
            return await self._client.chat.completions.create(
                model=self.model, messages=messages, response_format=self._response_format(request), **kwargs
            )

    async def _mapped(self, call: Any) -> list[CompletionResponse]:
        """Await one API call, its errors mapped onto the package's (transient or not)."""
        import openai

        try:
            return await call
        except (openai.APIConnectionError, openai.APITimeoutError) as exc:
            # name the URL: a wrong --base-url (port, missing /v1) is the usual cause
            raise TransientBackendError(
                f"{self.name}: cannot reach server: {exc} (at {self.base_url or self._client.base_url})"
            ) from exc
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:  # e.g. a body cut off in transit
            raise TransientBackendError(f"{self.name}: {MALFORMED}: the body is not valid JSON ({exc})") from exc
        except openai.APIResponseValidationError as exc:
            raise TransientBackendError(f"{self.name}: {MALFORMED}: {exc}") from exc
        except openai.RateLimitError as exc:
            raise TransientBackendError(f"{self.name}: rate limited (429)") from exc
        except openai.AuthenticationError as exc:
            raise BackendError(f"{self.name}: authentication failed; check OPENAI_API_KEY") from exc
        except openai.NotFoundError as exc:
            raise ModelNotFoundError(f"{self.name}: not found on the server: {_message(exc)}") from exc
        except openai.APIStatusError as exc:
            if exc.status_code >= 500 or exc.status_code in (408, 409):
                raise TransientBackendError(f"{self.name}: server error {exc.status_code}: {_message(exc)}") from exc
            raise BackendError(f"{self.name}: request refused ({exc.status_code}): {_message(exc)}") from exc

    async def _chat(self, request: CompletionRequest, n: int = 1) -> list[CompletionResponse]:
        import openai

        kwargs = self._sampling(request)
        if n > 1:
            kwargs["n"] = n
        fmt = self._response_format(request)
        if fmt is not None:
            kwargs["response_format"] = fmt
        try:
            resp = await self._client.chat.completions.create(
                model=self.model, messages=chat_messages(request), **kwargs
            )
        except openai.APIStatusError as exc:
            if not self._schema_form_refused(fmt, exc):
                raise
            self.json_format = "json_object"  # an older server: use its schema form from now on
            kwargs["response_format"] = self._response_format(request)
            resp = await self._client.chat.completions.create(
                model=self.model, messages=chat_messages(request), **kwargs
            )
        _first_choice(self.name, resp)  # a body without choices is malformed
        texts = []
        for choice in resp.choices[:n]:
            message = getattr(choice, "message", None)
            content = getattr(message, "content", None)
            if message is None or not isinstance(content, (str, type(None))):
                raise TransientBackendError(f"{self.name}: {MALFORMED}: the choice has no message text")
            texts.append((content or "", choice.finish_reason, self._token_choices(choice)))
        return self._responses(texts, resp)

    async def _completion(self, request: CompletionRequest) -> list[CompletionResponse]:
        resp = await self._client.completions.create(
            model=self.model, prompt=flat_prompt(request), **self._sampling(request)
        )
        choice = _first_choice(self.name, resp)
        text = getattr(choice, "text", None)
        if not isinstance(text, str):
            raise TransientBackendError(f"{self.name}: {MALFORMED}: the choice has no text")
        return self._responses([(text, choice.finish_reason, self._token_choices(choice))], resp)

    def _schema_form_refused(self, fmt: dict[str, Any] | None, exc: Any) -> bool:
        """Did a server refuse the standard json_schema form? (llama_cpp.server says 500.)"""
        if fmt is None or self.json_format != "auto" or fmt.get("type") != "json_schema":
            return False
        return exc.status_code in (400, 422) or "response_format" in _message(exc)

    def _sampling(self, request: CompletionRequest) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"max_tokens": request.max_tokens, "temperature": request.temperature}
        if request.seed is not None:
            kwargs["seed"] = request.seed
        if request.stop:
            kwargs["stop"] = request.stop[:4]  # the API caps stop sequences at 4
        if self.cache_prompt is not None:
            kwargs["extra_body"] = {"cache_prompt": self.cache_prompt}
        if request.top_logprobs is not None and not self.logprobs_refused:
            if self.api == "completion":
                kwargs["logprobs"] = request.top_logprobs
            else:
                kwargs.update(logprobs=True, top_logprobs=request.top_logprobs)
        return kwargs

    def _token_choices(self, choice: Any) -> list[TokenChoices] | None:
        """The token probabilities of a choice (or a streamed chunk's), None where it has
        none; a value of the wrong shape is a malformed response."""
        try:
            return token_choices(getattr(choice, "logprobs", None))
        except (TypeError, ValueError, ValidationError) as exc:
            raise TransientBackendError(f"{self.name}: {MALFORMED}: bad logprobs: {str(exc)[:200]}") from exc

    def _response_format(self, request: CompletionRequest) -> dict[str, Any] | None:
        """The request's JSON schema as the API's ``response_format``: a critic's reply (role
        feedback) strictly under the task's schema; a draft under the run's, strictly where the
        schema is in the strict subset (:func:`strict_subset`), and any JSON object as
        ``json_object``."""
        schema = request.json_schema
        if schema is None or self.json_format == "off":
            return None
        if self.json_format == "json_object":
            return {"type": "json_object", "schema": schema}
        if request.role == "feedback":
            return {"type": "json_schema", "json_schema": {"name": "feedback", "schema": schema, "strict": True}}
        if schema == {"type": "object"}:
            return {"type": "json_object"}
        return {
            "type": "json_schema",
            "json_schema": {"name": "draft", "schema": schema, "strict": strict_subset(schema)},
        }

    def _responses(
        self, texts: list[tuple[str, Any, list[TokenChoices] | None]], resp: Any
    ) -> list[CompletionResponse]:
        """One response per choice. The usage covers all of them: the prompt is counted once
        (on the first), the completion tokens shared out evenly (the API gives no split)."""
        usage = getattr(resp, "usage", None)
        try:
            cached = cached_prompt_tokens(resp)
        except (TypeError, ValueError) as exc:
            raise TransientBackendError(f"{self.name}: {MALFORMED}: bad cached token count: {exc}") from exc
        prompt = _count(self.name, getattr(usage, "prompt_tokens", 0))
        completion = _count(self.name, getattr(usage, "completion_tokens", 0))
        share, extra = divmod(completion, len(texts))
        model = str(getattr(resp, "model", None) or self.name)
        return [
            CompletionResponse(
                text=text,
                prompt_tokens=prompt if i == 0 else 0,
                completion_tokens=share + (extra if i == 0 else 0),
                model=model,
                finish_reason=finish if isinstance(finish, str) else None,
                cached_prompt_tokens=cached if i == 0 else (None if cached is None else 0),
                top_logprobs=tops or None,
            )
            for i, (text, finish, tops) in enumerate(texts)
        ]

    async def aclose(self) -> None:
        await self._client.close()


MALFORMED = "server sent a malformed response"


def _first_choice(name: str, resp: Any) -> Any:
    """The first choice of a reply; a body without one (``choices`` missing, null or empty,
    or not an object at all) is a malformed response, retried like a 5xx."""
    choices = getattr(resp, "choices", None)
    if not isinstance(choices, list) or not choices or isinstance(choices[0], (str, int, float, list, dict)):
        raise TransientBackendError(f"{name}: {MALFORMED}: no usable choice in {_preview(resp)}")
    return choices[0]


def _field(obj: Any, name: str) -> Any:
    """``obj.name``, or ``obj[name]`` where the SDK left a part of the body a plain dict."""
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def token_choices(logprobs: Any) -> list[TokenChoices] | None:
    """A choice's ``logprobs`` as records: the chat API's ``content`` (a list of tokens,
    each with its ``top_logprobs``), or the completion API's parallel lists ``tokens``,
    ``token_logprobs`` and ``top_logprobs`` (a ``{token: logprob}`` per token)."""
    if logprobs is None:
        return None
    content = _field(logprobs, "content")
    if content is not None:
        return [
            TokenChoices(
                token=_field(item, "token"),
                logprob=_field(item, "logprob"),
                top={_field(t, "token"): _field(t, "logprob") for t in _field(item, "top_logprobs") or []},
            )
            for item in content
        ] or None
    tokens, chosen, tops = (_field(logprobs, k) for k in ("tokens", "token_logprobs", "top_logprobs"))
    if tokens is None:
        return None
    tops = tops if tops is not None else [None] * len(tokens)
    if chosen is None or len(chosen) != len(tokens) or len(tops) != len(tokens):
        raise ValueError("tokens, token_logprobs and top_logprobs differ in length")
    return [
        TokenChoices(token=t, logprob=lp, top=dict(top or {})) for t, lp, top in zip(tokens, chosen, tops, strict=True)
    ] or None


def _refuses_logprobs(exc: BackendError) -> bool:
    """A 400/422 whose message names logprobs: a server without them; or a 500 naming them
    (``llama_cpp.server`` run with ``logits_all=False`` fails so on every such request)."""
    text = str(exc)
    return bool(re.search(r"\((400|422)\)|server error 500:", text)) and "logprob" in text.lower()


def _transport_errors() -> tuple[type[BaseException], ...]:
    """The connection errors of the HTTP library the SDK reads its streams with (httpx, or
    httpx2 in newer SDKs): raised as they are while a stream is read."""
    errors = []
    for name in ("httpx2", "httpx"):
        try:
            errors.append(importlib.import_module(name).TransportError)
        except (ImportError, AttributeError):
            continue
    return tuple(errors)


def _piece(choice: Any) -> str:
    """The text a streamed chunk's choice adds: a chat delta's content, a completion's text."""
    delta = getattr(choice, "delta", None)
    text = getattr(delta, "content", None) if delta is not None else getattr(choice, "text", None)
    return text if isinstance(text, str) else ""


def _count(name: str, value: Any) -> int:
    """A token count from ``usage``; absent is 0, anything but a number is malformed."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TransientBackendError(f"{name}: {MALFORMED}: token count {value!r} is not a number")
    return int(value)


def _preview(resp: Any) -> str:
    if hasattr(resp, "model_dump"):  # an SDK object built from the body without validation
        try:
            resp = resp.model_dump(exclude_unset=True, warnings=False)
        except Exception:  # the dump is only for the message; never hide the real error
            pass
    text = repr(resp)
    return text if len(text) <= 200 else text[:200] + "..."


def cached_prompt_tokens(resp: Any) -> int | None:
    """Prompt tokens the server reused from its prefix cache, where it says so: the standard
    ``usage.prompt_tokens_details.cached_tokens`` (OpenAI, vLLM, SGLang) or llama-server's
    ``timings.cache_n``."""
    details = getattr(getattr(resp, "usage", None), "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None)
    if cached is not None:
        return int(cached)
    timings = (getattr(resp, "model_extra", None) or {}).get("timings")
    if isinstance(timings, dict) and timings.get("cache_n") is not None:
        return int(timings["cache_n"])
    return None


def strict_subset(schema: Any) -> bool:
    """Whether a JSON Schema is in the subset OpenAI's strict mode takes: every object lists
    all its properties as required and allows no others (a schema outside it is sent with
    ``strict`` false: a strict server would refuse it; the drafts are validated either way)."""
    if isinstance(schema, list):
        return all(strict_subset(item) for item in schema)
    if not isinstance(schema, dict):
        return True
    properties = schema.get("properties", {})
    if (schema.get("type") == "object" or "properties" in schema) and (
        schema.get("additionalProperties") is not False
        or not isinstance(properties, dict)
        or set(schema.get("required", ())) != set(properties)
    ):
        return False
    return all(strict_subset(v) for k, v in schema.items() if k not in ("enum", "const", "default", "examples"))


def _message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:300]
        if isinstance(err, str):
            return err[:300]
    return str(getattr(exc, "message", exc))[:300]
