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
from jinja2 import meta

from .errors import TemplateError

BASE_VARIABLES = frozenset({"input", "draft", "feedback", "history", "iteration"})

_ENV = jinja2.Environment(
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
            raise TemplateError(
                f"template {name!r} has a syntax error on line {exc.lineno}: {exc.message}"
            ) from None
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
        except jinja2.UndefinedError as exc:
            raise TemplateError(f"template {self.name!r} failed to render: {exc.message}") from None
        except jinja2.TemplateError as exc:
            raise TemplateError(f"template {self.name!r} failed to render: {exc}") from None


def packaged_template(task: str, role: str) -> str | None:
    """Source of ``selfrefine/tasks/prompts/<task>/<role>.j2``, or None when absent."""
    path = resources.files("selfrefine.tasks").joinpath("prompts", task, f"{role}.j2")
    if not path.is_file():
        return None
    return path.read_text(encoding="utf-8")
