"""Model specs (``embedded``, ``gguf:PATH``, ``openai:NAME``, ``fake``) → backends.

Plugins add schemes through the entry-point group ``selfrefine.backends``: the entry
point's name is the scheme and its object a factory ``(rest: str, **options) -> Backend``.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError, ModelNotFoundError
from .base import Backend

Factory = Callable[..., Backend]
DEFAULT_MODEL = "embedded"


@dataclass(frozen=True)
class Scheme:
    name: str
    usage: str
    help: str
    factory: Factory


def _embedded(rest: str, **options: Any) -> Backend:
    from .embedded import LlamaCppBackend

    # embedded: the catalogue default (falls back to SmolLM2 with a warning when it is not
    # installed); embedded:NAME: another catalogue entry (`selfrefine models` lists them)
    return LlamaCppBackend(None, model=f"embedded:{rest}" if rest else None, **_coerce(options))


def _gguf(rest: str, **options: Any) -> Backend:
    from .embedded import LlamaCppBackend

    if not rest:
        raise ConfigError("gguf: needs a file path, e.g. --model gguf:./model.gguf")
    return LlamaCppBackend(rest, **_coerce(options))


def _openai(rest: str, **options: Any) -> Backend:
    from .openai_compat import OpenAIBackend

    return OpenAIBackend(rest, **_coerce(options))


def _fake(rest: str, **options: Any) -> Backend:
    from .fake import FakeBackend

    if rest:
        return FakeBackend.from_file(rest)
    return FakeBackend(default=options.get("reply", "fake reply"))


BUILTIN: dict[str, Scheme] = {
    s.name: s
    for s in (
        Scheme("embedded", "embedded", "Qwen2.5-Coder-1.5B-Instruct in-process via llama.cpp (default); "
               "embedded:NAME for another catalogue model", _embedded),
        Scheme("gguf", "gguf:PATH", "any GGUF file in-process via llama.cpp", _gguf),
        Scheme(
            "openai",
            "openai:NAME",
            "an OpenAI-compatible server (OPENAI_BASE_URL/--base-url, OPENAI_API_KEY)",
            _openai,
        ),
        Scheme("fake", "fake[:REPLIES.json]", "deterministic test model", _fake),
    )
}

_INT_OPTIONS = {"n_ctx", "n_threads", "n_batch", "seed", "concurrency"}
_FLOAT_OPTIONS = {"timeout", "repeat_penalty", "prefix_cache_mb"}
_BOOL_OPTIONS = {"prefix_reuse", "cache_prompt"}
_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off"}


def _coerce(options: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in options.items():
        try:
            if key in _INT_OPTIONS and isinstance(value, str):
                value = int(value)
            elif key in _FLOAT_OPTIONS and isinstance(value, str):
                value = float(value)
            elif key in _BOOL_OPTIONS and isinstance(value, str):
                if value.lower() not in _TRUE | _FALSE:
                    raise ConfigError(f"option {key}={value!r} must be true or false")
                value = value.lower() in _TRUE
        except ValueError:
            raise ConfigError(f"option {key}={value!r} must be a number") from None
        out[key] = value
    return out


def plugin_schemes() -> dict[str, Scheme]:
    found: dict[str, Scheme] = {}
    for ep in importlib.metadata.entry_points(group="selfrefine.backends"):
        found[ep.name] = Scheme(ep.name, f"{ep.name}:...", f"plugin ({ep.value})", _lazy(ep))
    return found


def _lazy(ep: importlib.metadata.EntryPoint) -> Factory:
    def factory(rest: str, **options: Any) -> Backend:
        return ep.load()(rest, **options)

    return factory


def schemes() -> dict[str, Scheme]:
    return {**plugin_schemes(), **BUILTIN}


def get_backend(spec: str | Backend | None = None, **options: Any) -> Backend:
    """Build a backend from a model spec; a Backend instance passes through unchanged."""
    if isinstance(spec, Backend):
        return spec
    spec = (spec or DEFAULT_MODEL).strip()
    scheme, _, rest = spec.partition(":")
    table = schemes()
    if scheme not in table:
        known = ", ".join(s.usage for s in table.values())
        raise ModelNotFoundError(f"unknown model {spec!r}; use one of: {known}")
    try:
        return table[scheme].factory(rest, **options)
    except TypeError as exc:  # an option the backend does not take
        raise ConfigError(f"model {spec!r} does not accept these options: {exc}") from None
