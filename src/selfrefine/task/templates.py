"""Prompt templates: Jinja2, rendered strictly, checked for unknown variables up front.

Templates see ``input``, the current ``draft`` and ``feedback`` (plain text: the
feedback's raw text), ``history`` (earlier ``{draft, feedback}`` pairs before the current
one, per the history policy) and ``iteration``; a task may add its own variables (e.g.
``concepts``). A typo such as ``{{ drafts }}`` is reported when the task is loaded, not
halfway through a run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from importlib import resources
from typing import Any

import jinja2
from jinja2 import nodes

from ..core.errors import TemplateError
from .template_bounds import (
    BoundedEnvironment,
    BoundsError,
    Rendering,
    charge_bodies,
    refused_node,
    undeclared_variables,
)

BASE_VARIABLES = frozenset({"input", "draft", "feedback", "history", "iteration"})

# Task files come from users and API clients: a plain Environment lets
# ``{{ ''.__class__.__mro__ ... }}`` reach ``os`` and run commands on every render. The
# immutable sandbox refuses underscore attributes, function internals and mutating methods;
# the bounded one also caps what a render may cost (time, memory, output: template_bounds).
_ENV = BoundedEnvironment(
    undefined=jinja2.StrictUndefined,
    keep_trailing_newline=False,
    autoescape=False,
    trim_blocks=True,
    lstrip_blocks=True,
)


class Template:
    """One compiled prompt template with its name (for error messages)."""

    def __init__(self, name: str, source: str, allowed: Iterable[str] = BASE_VARIABLES) -> None:
        self.name = name
        self.source = source
        self.origin: str | None = None  # the task file it came from, for error messages
        try:
            ast = _ENV.parse(source)
        except jinja2.TemplateSyntaxError as exc:
            raise TemplateError(f"template {name!r} has a syntax error on line {exc.lineno}: {exc.message}") from None
        except RecursionError:  # the parser recurses once per nested expression
            raise TemplateError(f"template {name!r} nests its expressions too deeply") from None
        _refuse_unsafe_access(name, ast)
        allowed = frozenset(allowed)
        self.variables = undeclared_variables(ast)
        unknown = sorted(self.variables - allowed)
        if unknown:
            raise TemplateError(
                f"template {name!r} uses unknown variable(s) {', '.join(unknown)}; "
                f"available: {', '.join(sorted(allowed))}"
            )
        try:  # compiling evaluates nothing (template_bounds): bounded time and memory
            self._template = _ENV.from_string(charge_bodies(ast))
        except (RecursionError, jinja2.TemplateError) as exc:
            raise TemplateError(f"template {name!r} cannot be compiled: {_one_line(exc)}") from None

    def render(self, context: Mapping[str, Any]) -> str:
        try:
            with Rendering():
                return self._template.render(**context)
        except BoundsError as exc:
            raise self._error(exc, f"is over a bound: {exc}") from None
        except jinja2.exceptions.SecurityError as exc:
            raise self._error(exc, f"reaches for something templates may not use: {exc}") from None
        except jinja2.UndefinedError as exc:
            raise self._error(exc, f"failed to render: {exc.message}") from None
        except jinja2.TemplateError as exc:
            raise self._error(exc, f"failed to render: {exc}") from None
        except Exception as exc:  # OverflowError, RecursionError, MemoryError, TypeError...: one line, no traceback
            raise self._error(exc, f"failed to render: {type(exc).__name__}: {exc}") from None

    def _error(self, exc: BaseException, what: str) -> TemplateError:
        where = f"task file {self.origin}: " if self.origin else ""
        return TemplateError(f"{where}template {self.name!r} line {_template_line(exc)} {_one_line(what)}")


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def _refuse_unsafe_access(name: str, ast: nodes.Template) -> None:
    """Report, when the task is loaded, attribute access the sandbox would refuse at render,
    and templates that name other templates (there are none to reach)."""
    refused = refused_node(ast)
    if refused is not None:
        raise TemplateError(
            f"template {name!r} line {refused.lineno}: {type(refused).__name__.lower()} is not allowed in templates "
            "(a task's template stands alone)"
        )
    for node in ast.find_all((nodes.Getattr, nodes.Getitem, nodes.Filter)):
        attr = _accessed_name(node)
        if attr is not None and not _ENV.is_safe_attribute("", attr, None):
            raise TemplateError(
                f"template {name!r} line {node.lineno}: access to {attr!r} is not allowed in templates "
                "(they see only their variables, not Python internals)"
            )


def _accessed_name(node: nodes.Node) -> str | None:
    if isinstance(node, nodes.Getattr):
        return node.attr
    if isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const):
        return node.arg.value if isinstance(node.arg.value, str) else None
    if isinstance(node, nodes.Filter) and node.name == "attr" and node.args:
        arg = node.args[0]
        return arg.value if isinstance(arg, nodes.Const) and isinstance(arg.value, str) else None
    return None


def _template_line(exc: BaseException) -> int | str:
    """Jinja rewrites tracebacks so frames of ``<template>`` carry the template's line."""
    line: int | str = "?"
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<template>":
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def packaged_template(task: str, role: str) -> str | None:
    """Source of ``selfrefine/tasks/prompts/<task>/<role>.j2``, or None when absent."""
    path = resources.files("selfrefine.tasks").joinpath("prompts", task, f"{role}.j2")
    if not path.is_file():
        return None
    return path.read_text(encoding="utf-8")
