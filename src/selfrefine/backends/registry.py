"""Model specs (``embedded``, ``gguf:PATH``, ``openai:NAME``, ``fake``) → backends.

Plugins add schemes through the entry-point group ``selfrefine.backends``: the entry
point's name is the scheme and its object a factory ``(rest: str, **options) -> Backend``.

Options belong to one backend: each built-in scheme declares a pydantic model of them
(:mod:`.options`) that types and checks what ``get_backend`` is given. A plugin factory
may declare one as its ``Options`` attribute; without it, option names are checked against
the factory's keyword parameters (a ``**kwargs`` factory gets everything, as strings).
"""

from __future__ import annotations

import importlib.metadata
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from ..core.entrypoints import entry_points
from ..core.errors import ConfigError, ModelNotFoundError
from .base import Backend
from .options import FakeOptions, LlamaCppOptions, OpenAIOptions, validate

Factory = Callable[..., Backend]
DEFAULT_MODEL = "embedded"


@dataclass(frozen=True)
class Scheme:
    name: str
    usage: str
    help: str
    factory: Factory
    options: type[BaseModel] | None = None  # built-ins; a plugin's factory may carry ``Options``

    def _loaded(self) -> Factory:
        return self.factory.load() if isinstance(self.factory, _Plugin) else self.factory

    def options_model(self) -> type[BaseModel] | None:
        """The typed options, or None for a plugin that declares none (loads a plugin)."""
        if self.options is not None:
            return self.options
        model = getattr(self._loaded(), "Options", None)
        return model if isinstance(model, type) and issubclass(model, BaseModel) else None

    def build(self, rest: str, options: dict[str, Any]) -> Backend:
        factory, model = self._loaded(), self.options_model()
        if model is not None:
            return factory(rest, **validate(self.name, model, options))
        return factory(rest, **_check_names(self.name, factory, options))


def _check_names(scheme: str, factory: Factory, options: dict[str, Any]) -> dict[str, Any]:
    """A plugin without an ``Options`` model: names checked against its signature, values as given."""
    params = list(inspect.signature(factory).parameters.values())[1:]  # after ``rest``
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return options  # takes anything: the plugin checks its own options
    names = [p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]
    unknown = [key for key in options if key not in names]
    if unknown:
        raise ConfigError(
            f"plugin backend {scheme} does not accept option(s) "
            f"{', '.join(map(repr, unknown))}; valid options: {', '.join(names) or 'none'}"
        )
    return options


def _embedded(rest: str, **options: Any) -> Backend:
    from .embedded import LlamaCppBackend

    # embedded: the catalogue default (falls back to SmolLM2 with a warning when it is not
    # installed); embedded:NAME: another catalogue entry (`selfrefine models` lists them)
    return LlamaCppBackend(None, model=f"embedded:{rest}" if rest else None, **options)


def _gguf(rest: str, **options: Any) -> Backend:
    from .embedded import LlamaCppBackend

    if not rest:
        raise ConfigError("gguf: needs a file path, e.g. --model gguf:./model.gguf")
    return LlamaCppBackend(rest, **options)


def _openai(rest: str, **options: Any) -> Backend:
    from .openai_compat import OpenAIBackend

    return OpenAIBackend(rest, **options)


def _fake(rest: str, **options: Any) -> Backend:
    from .fake import FakeBackend

    if rest:
        if options:
            raise ConfigError(
                f"fake:{rest} takes its replies and latency from the file, not from options "
                f"({', '.join(options)}); use plain `fake` for -o reply=TEXT"
            )
        return FakeBackend.from_file(rest)
    return FakeBackend(default=options.get("reply", "fake reply"), latency=options.get("latency", 0.0))


BUILTIN: dict[str, Scheme] = {
    s.name: s
    for s in (
        Scheme(
            "embedded",
            "embedded",
            "Qwen2.5-Coder-1.5B-Instruct in-process via llama.cpp (default); embedded:NAME for another catalogue model",
            _embedded,
            LlamaCppOptions,
        ),
        Scheme("gguf", "gguf:PATH", "any GGUF file in-process via llama.cpp", _gguf, LlamaCppOptions),
        Scheme(
            "openai",
            "openai:NAME",
            "an OpenAI-compatible server (base_url option or OPENAI_BASE_URL, OPENAI_API_KEY)",
            _openai,
            OpenAIOptions,
        ),
        Scheme("fake", "fake[:REPLIES.json]", "deterministic test model", _fake, FakeOptions),
    )
}


def plugin_schemes() -> dict[str, Scheme]:
    found: dict[str, Scheme] = {}
    for ep in entry_points("selfrefine.backends").values():
        found[ep.name] = Scheme(ep.name, f"{ep.name}:...", f"plugin ({ep.value})", _Plugin(ep))
    return found


@dataclass(frozen=True)
class _Plugin:
    """A plugin's factory, imported only when used (listing the schemes imports no plugin)."""

    ep: importlib.metadata.EntryPoint

    def load(self) -> Factory:
        return self.ep.load()

    def __call__(self, rest: str, **options: Any) -> Backend:
        return self.load()(rest, **options)


def schemes() -> dict[str, Scheme]:
    return {**plugin_schemes(), **BUILTIN}


def scheme_of(spec: str | None) -> Scheme:
    """The scheme of a model spec (``openai:gpt-4o`` -> openai); unknown ones say what exists."""
    spec = (spec or DEFAULT_MODEL).strip()
    table = schemes()
    scheme = table.get(spec.partition(":")[0])
    if scheme is None:
        known = ", ".join(s.usage for s in table.values())
        raise ModelNotFoundError(f"unknown model {spec!r}; use one of: {known}")
    return scheme


def get_backend(spec: str | Backend | None = None, **options: Any) -> Backend:
    """Build a backend from a model spec and that backend's options (``selfrefine models``
    lists them); a Backend instance passes through unchanged."""
    if isinstance(spec, Backend):
        if options:
            raise ConfigError(
                f"options ({', '.join(options)}) apply to a model spec, not to a "
                f"ready backend ({spec.name}); set them when you construct it"
            )
        return spec
    spec = (spec or DEFAULT_MODEL).strip()
    return scheme_of(spec).build(spec.partition(":")[2], options)
