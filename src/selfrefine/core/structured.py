"""Structured output: a JSON Schema a run's drafts must validate against (``RefineConfig.json_schema``,
a request's ``response_format``, or a pydantic type's schema: ``response_model=``), checked
before any model call, and the errors of a draft against it, each named by its JSON path
("$.age: -3 is less than the minimum of 0").

A schema comes from untrusted authors (an HTTP request), so :func:`checked_schema` refuses
one that is not a JSON Schema, and also what would reach outside or run unbounded: a
``$ref`` that is not local (jsonschema and llama.cpp's grammar converter would fetch a URL),
a ``pattern`` whose backtracking is unbounded (:mod:`.saferegex`: Python's ``re`` runs it on
model output), a count past :data:`MAX_COUNT` (llama.cpp's grammar spells each repetition
out), a schema longer than :data:`MAX_SCHEMA_CHARS` or nested past the recursion limit.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from typing import Any

from .saferegex import bounded

MAX_SCHEMA_CHARS = 64_000
MAX_COUNT = 10_000  # the most items, characters or properties a schema may ask for
MAX_ERRORS = 8  # errors named per draft; the rest are counted
MAX_MESSAGE_CHARS = 240  # one error's message (an instance's repr can be long)
MAX_STARTS = 16  # where in a reply a JSON value is looked for: its first brackets
ANY_OBJECT: dict[str, Any] = {"type": "object"}  # response_format json_object
COUNTS = frozenset("minItems maxItems minLength maxLength minProperties maxProperties minContains maxContains".split())
REFS = ("$ref", "$dynamicRef", "$recursiveRef")
_FENCED = re.compile(r"```[ \t]*(?:json)?[ \t]*\n?(.*?)```", re.S | re.I)


def checked_schema(schema: Any) -> dict[str, Any]:
    """``schema`` unchanged once it is a JSON Schema this project will use (module
    docstring); otherwise a ValueError in one line that says what is wrong and where."""
    from jsonschema import SchemaError
    from jsonschema.validators import validator_for

    if not isinstance(schema, dict):
        raise ValueError(f"a JSON Schema is a JSON object, not {type(schema).__name__}")
    try:
        size = len(json.dumps(schema))
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValueError(f"the schema is not JSON data: {exc}") from None
    if size > MAX_SCHEMA_CHARS:
        raise ValueError(f"the schema is {size:,} characters of JSON; the limit is {MAX_SCHEMA_CHARS:,}")
    try:
        validator_for(schema).check_schema(schema)
        for where, key, value in _keywords(schema, "$"):
            _check_keyword(where, key, value)
    except SchemaError as exc:
        raise ValueError(f"not a valid JSON Schema: {exc.json_path}: {_short(exc.message)}") from None
    except RecursionError:
        raise ValueError("the schema is nested too deeply") from None
    return schema


def _keywords(node: Any, where: str) -> Iterator[tuple[str, str, Any]]:
    """Every (path, keyword, value) of a schema, in every subschema (and in data such as
    ``enum`` and ``const``, where a keyword's name is only a value: harmless to check too)."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield where, key, value
            yield from _keywords(value, f"{where}.{key}")
    elif isinstance(node, list):
        for i, item in enumerate(node):
            yield from _keywords(item, f"{where}[{i}]")


def _check_keyword(where: str, key: str, value: Any) -> None:
    if key in REFS and isinstance(value, str) and not value.startswith("#"):
        raise ValueError(f"{where}.{key}: only local references ('#/$defs/...') are allowed, not {value!r}")
    if key == "pattern" and isinstance(value, str):
        _bounded_pattern(f"{where}.pattern", value)
    if key == "patternProperties" and isinstance(value, dict):
        for pattern in value:
            _bounded_pattern(f"{where}.patternProperties", pattern)
    if key in COUNTS and isinstance(value, int) and not isinstance(value, bool) and value > MAX_COUNT:
        raise ValueError(f"{where}.{key}: {value} is over {MAX_COUNT:,}, more than any reply holds")


def _bounded_pattern(where: str, pattern: str) -> None:
    try:
        bounded(pattern)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None


def schema_errors(schema: dict[str, Any], value: Any) -> list[str]:
    """Each way ``value`` breaks ``schema``, as "PATH: message", in document order; none
    when it validates. References resolve inside the schema only (nothing is fetched)."""
    from jsonschema.validators import validator_for
    from referencing import Registry

    validator = validator_for(schema)(schema, registry=Registry())
    found = sorted(validator.iter_errors(value), key=lambda e: [str(p) for p in e.absolute_path])
    return [f"{e.json_path}: {_short(e.message)}" for e in found]


def json_path(location: Sequence[Any]) -> str:
    """A location (keys and indexes) as a JSON path: ``("items", 0, "age")`` -> ``$.items[0].age``."""
    path = "$"
    for part in location:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def listed(errors: list[str]) -> list[str]:
    """At most :data:`MAX_ERRORS` errors, the rest counted in one more line."""
    if len(errors) <= MAX_ERRORS:
        return errors
    return [*errors[:MAX_ERRORS], f"and {len(errors) - MAX_ERRORS} more error(s)"]


def json_text(reply: str) -> str:
    """The JSON of a reply: the whole reply when it parses, else a fenced block that does
    (```json ... ```), else the first JSON object or array in it (starting at one of its
    first :data:`MAX_STARTS` brackets), as written; the reply itself (stripped) when none
    parses (its check then says why)."""
    text = reply.strip()
    if _parses(text):
        return text
    for match in _FENCED.finditer(text):
        if _parses(match.group(1).strip()):
            return match.group(1).strip()
    decoder = json.JSONDecoder()
    starts = [i for i, c in enumerate(text) if c in "{["][:MAX_STARTS]  # a hostile reply of brackets stays linear
    for start in starts:
        try:
            _, end = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):
            continue
        return text[start:end]
    return text


def _parses(text: str) -> bool:
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True


def parse_error(text: str) -> str | None:
    """Why ``text`` is not JSON ("Expecting ',' delimiter at line 1 column 12"); None when it is."""
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        return f"{exc.msg} at line {exc.lineno} column {exc.colno}" if text.strip() else "the reply is empty"
    except RecursionError:
        return "the JSON is nested too deeply"
    return None


def schema_note(schema: dict[str, Any]) -> str:
    """What a draft's prompt says of the shape asked for (the system message's addition)."""
    if schema == ANY_OBJECT:
        return "Reply with one JSON object only: no other text before or after it, no code fence."
    shape = json.dumps(schema, ensure_ascii=False, separators=(",", ":"))
    return (
        "Reply with one JSON value only: no other text before or after it, no code fence. "
        f"It must validate against this JSON Schema:\n{shape}"
    )


def _short(message: str) -> str:
    one_line = " ".join(message.split())
    return one_line if len(one_line) <= MAX_MESSAGE_CHARS else one_line[: MAX_MESSAGE_CHARS - 1] + "…"


def pydantic_errors(errors: Sequence[Any]) -> list[str]:
    """pydantic's errors (``ValidationError.errors()``) as "PATH: message (got VALUE)": a
    custom validator's own words without pydantic's "Value error, " in front."""
    lines = []
    for error in errors:
        location = error.get("loc", ())
        message = str(error.get("msg", "invalid")).removeprefix("Value error, ").removeprefix("Assertion failed, ")
        got = "" if error.get("type") == "missing" or not location else f" (got {_shown(error.get('input'))})"
        lines.append(f"{json_path(location)}: {_short(message + got)}")
    return lines


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 80 else text[:79] + "…"
