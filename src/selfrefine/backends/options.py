"""Typed options of each built-in backend (``-o KEY=VALUE`` on the command line).

Each scheme declares a pydantic model, as ``llm`` gives each model an ``Options`` class:
field types coerce the strings the CLI passes ("8192", "false"), unknown names are refused
with the list of valid ones, and ``selfrefine models`` shows them. Defaults equal the
backends' own keyword defaults (a test holds them to it); only the options given are
passed on, so the Python API and the CLI build the same backend.

A plugin factory may declare its options the same way, as an ``Options`` attribute.
"""

from __future__ import annotations

import types
import typing
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..core.config import Finite
from ..core.errors import ConfigError


class BackendOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LlamaCppOptions(BackendOptions):
    """``embedded`` and ``gguf:PATH`` (llama.cpp in-process)."""

    n_ctx: int = Field(4096, description="context window in tokens (at least 256)")
    n_threads: int | None = Field(None, description="CPU threads (default: all cores)")
    n_batch: int = Field(512, description="prompt tokens evaluated per batch")
    seed: int = Field(0, description="llama.cpp sampling seed")
    repeat_penalty: Finite = Field(1.0, description="1.0 is off; above 1 makes output depend on the KV cache")
    chat_format: str | None = Field(None, description="llama.cpp chat format (default: the GGUF's template)")
    prefix_reuse: bool = Field(True, description="reuse each role's shared prompt prefix (false: recompute)")
    prefix_cache_mb: Finite = Field(512, description="memory for KV snapshots of earlier prompts (0: off)")
    use_mmap: bool = Field(
        False, description="map the model file, not read it (shared by processes; repacked weights twice)"
    )


class OpenAIOptions(BackendOptions):
    """``openai:NAME`` (any OpenAI-compatible server)."""

    base_url: str | None = Field(None, description="server URL (default: OPENAI_BASE_URL, else api.openai.com)")
    api_key: str | None = Field(None, description="API key (default: OPENAI_API_KEY)")
    api: Literal["chat", "completion"] = Field("chat", description="which endpoint")
    timeout: Finite = Field(600.0, description="seconds per request")
    concurrency: int = Field(4, description="requests sent at once (match the server's slots)")
    json_format: Literal["auto", "json_schema", "json_object", "off"] = Field(
        "auto", description="how constrained feedback is asked for"
    )
    cache_prompt: bool | None = Field(None, description="llama-server's prompt cache switch (default: the server's)")
    request_n: Literal["auto", "on", "off"] = Field(
        "auto", description="K samples of one prompt as one request with n=K (auto: until the server refuses it)"
    )


class FakeOptions(BackendOptions):
    """``fake`` (deterministic test model); ``fake:FILE`` takes everything from the file."""

    reply: str = Field("fake reply", description="the reply to every request")
    latency: Finite = Field(0.0, description="seconds each call waits")


def validate(backend: str, model: type[BaseModel], options: dict[str, Any]) -> dict[str, Any]:
    """The options given, checked and typed against ``model``; ConfigError names ``backend``."""
    fields = model.model_fields
    unknown = [key for key in options if key not in fields]
    if unknown:
        names = ", ".join(repr(k) for k in unknown)
        valid = ", ".join(fields) or "none"
        raise ConfigError(
            f"{backend} does not accept option{'s' if len(unknown) > 1 else ''} {names}; valid options: {valid}"
        )
    try:
        checked = model.model_validate(options)
    except ValidationError as exc:
        error = exc.errors()[0]
        key = str(error["loc"][0]) if error["loc"] else "?"
        expected = type_name(fields[key].annotation) if key in fields else None
        # a type error says the type; any other check (a range, say) keeps pydantic's words
        why = f"must be {expected}" if expected and _is_type_error(error["type"]) else error["msg"]
        raise ConfigError(f"{backend} option {key}={options.get(key)!r}: {why}") from None
    return checked.model_dump(exclude_unset=True)


def _is_type_error(kind: str) -> bool:
    return kind.endswith(("_parsing", "_type", "_from_float")) or kind == "literal_error"


def type_name(annotation: Any) -> str:
    """How a field's type reads in a message: 'an integer', 'one of 'chat', 'completion''."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(annotation) if a is not type(None)]
        return " or ".join(type_name(a) for a in inner)
    if typing.get_origin(annotation) is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(annotation))
    return {int: "an integer", float: "a number", bool: "true or false", str: "text"}.get(
        annotation, getattr(annotation, "__name__", str(annotation))
    )


def describe(model: type[BaseModel]) -> list[dict[str, Any]]:
    """One row per option (name, type, default, description), for ``selfrefine models``."""
    return [
        {"name": name, "type": short_type(f.annotation), "default": f.default, "description": f.description or ""}
        for name, f in model.model_fields.items()
    ]


def short_type(annotation: Any) -> str:
    """A field's type for a table: int, float, bool, str, chat|completion."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return "|".join(short_type(a) for a in typing.get_args(annotation) if a is not type(None))
    if typing.get_origin(annotation) is Literal:
        return "|".join(str(a) for a in typing.get_args(annotation))
    return getattr(annotation, "__name__", str(annotation))
