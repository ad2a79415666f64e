"""A refused request body in words a client can act on: where malformed JSON breaks (line
and column, not a bare character offset as ``param``), and for an unknown field or option,
the one it likely meant (the option a CLI spelling such as ``max_iters`` names, else the
closest name) and the names that are valid there."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError

from ..core.config import did_you_mean
from .schemas import LoopOptions, RefineRequest

# the models that refuse unknown names, by where they sit in a body (chat requests allow
# extra top-level fields, as OpenAI-compatible servers do; /v1/refine does not)
_STRICT: dict[tuple[str, ...], tuple[type[BaseModel], str]] = {
    ("selfrefine",): (LoopOptions, "option"),
    ("options",): (LoopOptions, "option"),
    (): (RefineRequest, "field"),
}


M = TypeVar("M", bound=BaseModel)


def parsed_body(model: type[M], body: bytes) -> M:
    """A request body as ``model``, or the RequestValidationError FastAPI would raise for it
    (the routes parse it themselves, in a thread: a body's validation, a JSON Schema's check
    included, is CPU work the event loop must not do; service/offload.py)."""
    if not body.strip():
        raise RequestValidationError([{"type": "missing", "loc": ("body",), "msg": "Field required", "input": None}])
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        error = {
            "type": "json_invalid",
            "loc": ("body", exc.pos),
            "msg": "JSON decode error",
            "ctx": {"error": exc.msg},
        }
        raise RequestValidationError([error], body=exc.doc) from None
    except (RecursionError, UnicodeDecodeError) as exc:  # nested too deeply; not text (BodyLimit reads it first)
        error = {"type": "json_invalid", "loc": ("body",), "msg": "JSON decode error", "ctx": {"error": str(exc)}}
        raise RequestValidationError([error]) from None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = [{**e, "loc": ("body", *e["loc"])} for e in exc.errors(include_url=False)]
        raise RequestValidationError(errors, body=data) from None


@dataclass(frozen=True)
class Refusal:
    message: str
    code: str
    param: str | None


def describe(errors: Sequence[dict[str, Any]], body: Any) -> Refusal:
    """The one error a 400 reports: malformed JSON, else an unknown name (it also explains a
    'missing' one beside it, e.g. 'text' sent for 'input'), else pydantic's first error."""
    if not errors:
        return Refusal("invalid request body", "invalid_request", None)
    first = errors[0]
    if first.get("type") == "json_invalid":
        return _bad_json(first, body)
    unknown = next((e for e in errors if e.get("type") == "extra_forbidden"), None)
    if unknown is not None:
        return _unknown_name(unknown)
    where = _where(first)
    msg = str(first.get("msg", "invalid request")).removeprefix("Value error, ")  # a validator's own words
    return Refusal(f"{where}: {msg}" if where else msg, "invalid_request", where or None)


def _where(error: dict[str, Any]) -> str:
    return ".".join(str(p) for p in error.get("loc", ()) if p != "body")


def _bad_json(error: dict[str, Any], body: Any) -> Refusal:
    reason = (error.get("ctx") or {}).get("error") or "JSON decode error"
    position = ""
    offset = error.get("loc", ("body", None))[-1]
    if isinstance(body, str) and isinstance(offset, int):
        line = body.count("\n", 0, offset) + 1
        column = offset - (body.rfind("\n", 0, offset) + 1) + 1
        position = f" at line {line} column {column}"
    return Refusal(f"the request body is not valid JSON: {reason}{position}", "invalid_json", None)


def _unknown_name(error: dict[str, Any]) -> Refusal:
    path = tuple(str(p) for p in error.get("loc", ()) if p != "body")
    name, parent = path[-1], path[:-1]
    model, kind = _STRICT.get(parent, (None, "field"))
    names = list(model.model_fields) if model is not None else []
    valid = f"; valid {kind}s: {', '.join(names)}" if names else ""
    where = f" in {'.'.join(parent)}" if parent else ""
    hint = did_you_mean(name, names) if names else ""  # max_iters, budget_tokens: the option's name
    return Refusal(f"unknown {kind} {name!r}{where}{hint}{valid}", f"unknown_{kind}", ".".join(path))
