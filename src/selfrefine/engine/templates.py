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
from jinja2 import meta, nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

from ..core.errors import TemplateError

BASE_VARIABLES = frozenset({"input", "draft", "feedback", "history", "iteration"})

# Task files come from users and API clients: a plain Environment lets
# ``{{ ''.__class__.__mro__ ... }}`` reach ``os`` and run commands on every render. The
# immutable sandbox refuses underscore attributes, function internals and mutating methods.
_ENV = ImmutableSandboxedEnvironment(
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
        try:
            ast = _ENV.parse(source)
            self._template = _ENV.from_string(source)
        except jinja2.TemplateSyntaxError as exc:
            raise TemplateError(f"template {name!r} has a syntax error on line {exc.lineno}: {exc.message}") from None
        _refuse_unsafe_access(name, ast)
        allowed = frozenset(allowed)
        unknown = sorted(meta.find_undeclared_variables(ast) - allowed)
        if unknown:
            raise TemplateError(
                f"template {name!r} uses unknown variable(s) {', '.join(unknown)}; "
                f"available: {', '.join(sorted(allowed))}"
            )
        self.variables = frozenset(meta.find_undeclared_variables(ast))

    def render(self, context: Mapping[str, Any]) -> str:
        try:
            return self._template.render(**context)
        except jinja2.exceptions.SecurityError as exc:
            raise TemplateError(
                f"template {self.name!r} line {_template_line(exc)} reaches for something templates may not use: {exc}"
            ) from None
        except jinja2.UndefinedError as exc:
            raise TemplateError(f"template {self.name!r} failed to render: {exc.message}") from None
        except jinja2.TemplateError as exc:
            raise TemplateError(f"template {self.name!r} failed to render: {exc}") from None


def _refuse_unsafe_access(name: str, ast: nodes.Template) -> None:
    """Report, when the task is loaded, attribute access the sandbox would refuse at render."""
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
