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

import hashlib
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from typing import Any
from urllib.parse import unquote

from .saferegex import MAX_REGEX_CHARS, MAX_REGEX_STEPS, bounded, regex_steps, shown

MAX_SCHEMA_CHARS = 64_000
MAX_COUNT = 10_000  # the most items, characters or properties a schema may ask for
MAX_ERRORS = 8  # errors named per draft; the rest are counted
MAX_MESSAGE_CHARS = 240  # one error's message (an instance's repr can be long)
MAX_STARTS = 16  # where in a reply a JSON value is looked for: its first brackets
MAX_CHECKED = 256  # schemas whose verdict is kept (a server meets one per client)
MAX_VALUE_DEPTH = 64  # a draft's nesting; validation recurses several frames per level
MAX_SCHEMA_DEPTH = 128  # a schema's nesting (its checks recurse too)
# the backtracking steps the pattern searches of one validation take together, at most (about):
# a search of n characters counts as n / MAX_REGEX_CHARS of its pattern's bound (saferegex)
MAX_SEARCH_STEPS = 4 * MAX_REGEX_STEPS
ANY_OBJECT: dict[str, Any] = {"type": "object"}  # response_format json_object
COUNTS = frozenset("minItems maxItems minLength maxLength minProperties maxProperties minContains maxContains".split())
REFS = ("$ref", "$dynamicRef", "$recursiveRef")
_FENCED = re.compile(r"```[ \t]*(?:json)?[ \t]*\n?(.*?)```", re.S | re.I)


def checked_schema(schema: Any) -> dict[str, Any]:
    """``schema`` unchanged once it is a JSON Schema this project will use (module
    docstring); otherwise a ValueError in one line that says what is wrong and where. The
    verdict on a schema is kept: the same schema again (a request's, its run's recorded
    config) is not checked again."""
    if not isinstance(schema, dict):
        raise ValueError(f"a JSON Schema is a JSON object, not {type(schema).__name__}")
    text = _canonical(schema)
    key = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
    with _CHECKED_LOCK:
        known = _CHECKED.get(key, False)
        if known is not False:
            _CHECKED.move_to_end(key)  # the least recently met is forgotten first
    if known is False:
        known = _verdict(schema)
        with _CHECKED_LOCK:
            _CHECKED[key] = known
            while len(_CHECKED) > MAX_CHECKED:
                _CHECKED.popitem(last=False)
    if known is not None:
        raise ValueError(known)
    return schema


# a schema's canonical text's digest -> why it is refused (None: it is not)
_CHECKED: OrderedDict[bytes, str | None] = OrderedDict()
_CHECKED_LOCK = threading.Lock()


def _canonical(schema: dict[str, Any]) -> str:
    """The schema's JSON text (the same schema sent again has the same text), once it is
    data of a bounded size: counted before it is written out, since shared values (YAML
    aliases) count each time they are written."""
    todo, nodes = [(schema, 1)], 0
    while todo:
        node, level = todo.pop()
        nodes += 1
        if nodes > MAX_SCHEMA_CHARS:  # each value takes at least a character
            raise ValueError(f"the schema is more than {MAX_SCHEMA_CHARS:,} characters of JSON")
        if level > MAX_SCHEMA_DEPTH:
            raise ValueError(f"the schema is nested too deeply (more than {MAX_SCHEMA_DEPTH} levels)")
        if isinstance(node, dict):
            todo.extend((child, level + 1) for child in node.values())
        elif isinstance(node, list):
            todo.extend((child, level + 1) for child in node)
    try:
        text = json.dumps(schema)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValueError(f"the schema is not JSON data: {exc}") from None
    if len(text) > MAX_SCHEMA_CHARS:
        raise ValueError(f"the schema is {len(text):,} characters of JSON; the limit is {MAX_SCHEMA_CHARS:,}")
    return text


def _verdict(schema: dict[str, Any]) -> str | None:
    """Why ``schema`` is refused, in one line; None when it is not."""
    from jsonschema import SchemaError
    from jsonschema.validators import validator_for

    try:
        validator_for(schema).check_schema(schema)
        for where, key, value in _keywords(schema, "$"):
            _check_keyword(where, key, value)
        _check_refs(schema)
    except SchemaError as exc:
        return f"not a valid JSON Schema: {exc.json_path}: {_short(exc.message)}"
    except ValueError as exc:
        return str(exc)
    except RecursionError:
        return "the schema is nested too deeply"
    return None


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


# keywords whose subschemas apply to the value itself, not to a part of it: a loop through
# them (and references) never reaches a smaller value, so validation would recurse forever
_IN_PLACE = ("allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas")


def _check_refs(schema: dict[str, Any]) -> None:
    """A ValueError for a local reference that points to nothing, or a loop of references
    that never descends into the value (``{"$ref": "#"}``); a recursive schema that does
    descend (a tree's ``children: {items: {$ref: "#"}}``) is fine. Skipped where a nested
    ``$id`` moves the base a reference is resolved against (validation then names it)."""
    nodes = list(_subschemas(schema))
    if any(_has_id(node) for node in nodes if node is not schema):
        return
    anchors = {n.get(k): n for n in nodes for k in ("$anchor", "$dynamicAnchor") if isinstance(n.get(k), str)}
    edges = {id(node): list(_applied_in_place(node, schema, anchors)) for node in nodes}
    _no_loop(schema, edges)


def _subschemas(schema: Any) -> Iterator[dict[str, Any]]:
    todo = [schema]
    while todo:
        node = todo.pop()
        if isinstance(node, dict):
            yield node
            todo.extend(node.values())
        elif isinstance(node, list):
            todo.extend(node)


def _has_id(node: dict[str, Any]) -> bool:
    return isinstance(node.get("$id"), str) or isinstance(node.get("id"), str)


def _applied_in_place(node: dict[str, Any], root: dict[str, Any], anchors: dict[Any, Any]) -> Iterator[tuple[str, Any]]:
    """(keyword, subschema) for each subschema applied to the same value as ``node``."""
    for key in REFS:
        ref = node.get(key)
        if isinstance(ref, str) and ref.startswith("#"):
            yield f"{key} {ref!r}", _pointed(root, ref, anchors)
    for key in _IN_PLACE:
        value = node.get(key)
        if key == "dependentSchemas" and isinstance(value, dict):
            value = list(value.values())
        yield from (
            (key, child) for child in (value if isinstance(value, list) else [value]) if isinstance(child, dict)
        )


def _pointed(root: dict[str, Any], ref: str, anchors: dict[Any, Any]) -> Any:
    """The subschema a local reference names (a JSON pointer or an anchor); a ValueError when none."""
    fragment = unquote(ref[1:])
    if fragment and not fragment.startswith("/"):
        if fragment in anchors:
            return anchors[fragment]
        raise ValueError(f"$ref {ref!r} names no $anchor in the schema")
    node: Any = root
    for part in fragment.split("/")[1:]:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise ValueError(f"$ref {ref!r} points to nothing in the schema")
    return node


def _no_loop(schema: dict[str, Any], edges: dict[int, list[tuple[str, Any]]]) -> None:
    """A ValueError naming a reference of a loop in ``edges`` (depth first, without recursion)."""
    done: set[int] = set()
    for start in edges:
        if start in done:
            continue
        path, on_path = [(start, iter(edges[start]))], {start}
        while path:
            node, children = path[-1]
            step = next(children, None)
            if step is None:
                path.pop()
                on_path.discard(node)
                done.add(node)
                continue
            keyword, child = step
            if id(child) in on_path:
                raise ValueError(
                    f"the schema's {keyword} loops back to itself without descending into the value; "
                    "validation would never end"
                )
            if isinstance(child, dict) and id(child) not in done and id(child) in edges:
                path.append((id(child), iter(edges[id(child)])))
                on_path.add(id(child))


def _bounded_pattern(where: str, pattern: str) -> None:
    try:
        bounded(pattern)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None


def schema_errors(schema: dict[str, Any], value: Any) -> list[str]:
    """Each way ``value`` breaks ``schema``, as "PATH: message", in document order; none
    when it validates. References resolve inside the schema only (nothing is fetched). A
    value too deep, a string too long for a pattern, or patterns past their shared bound are
    errors too (module docstring), never a RecursionError or a search without end."""
    from jsonschema.validators import validator_for
    from referencing import Registry
    from referencing.exceptions import Unresolvable

    too_deep = value_shape_error(value)
    if too_deep is not None:
        return [too_deep]
    validator = _bounded_validator(validator_for(schema))(schema, registry=Registry())
    budget = _SEARCHES.set(_Searches())
    try:
        found = sorted(validator.iter_errors(value), key=lambda e: [str(p) for p in e.absolute_path])
    except RecursionError:  # a loop of references checked_schema could not see (a nested $id)
        return ["$: the schema's references loop without descending into the value; it cannot be validated"]
    except Unresolvable as exc:
        return [f"$: the schema has a reference that cannot be resolved: {_short(str(exc))}"]
    finally:
        _SEARCHES.reset(budget)
    return [f"{e.json_path}: {_short(e.message)}" for e in found]


def value_shape_error(value: Any) -> str | None:
    """Why a draft's JSON value is not validated at all: nested deeper than
    :data:`MAX_VALUE_DEPTH`, or a property name longer than a pattern is matched against
    (``MAX_REGEX_CHARS``); None when neither."""
    todo: list[tuple[Any, tuple[Any, ...]]] = [(value, ())]
    while todo:
        node, where = todo.pop()
        if len(where) > MAX_VALUE_DEPTH:
            return f"$: the JSON is nested deeper than {MAX_VALUE_DEPTH} levels"
        if isinstance(node, dict):
            for key, child in node.items():
                if isinstance(key, str) and len(key) > MAX_REGEX_CHARS:
                    return f"{json_path(where)}: a property name is {len(key):,} characters; the limit is {MAX_REGEX_CHARS:,}"
                todo.append((child, (*where, key)))
        elif isinstance(node, list):
            todo.extend((child, (*where, i)) for i, child in enumerate(node))
    return None


class _Searches:
    """The backtracking steps the pattern searches of one validation may still take."""

    def __init__(self) -> None:
        self.steps = float(MAX_SEARCH_STEPS)


_SEARCHES: ContextVar[_Searches | None] = ContextVar("selfrefine_schema_searches", default=None)
_BOUNDED: dict[type, type] = {}


def _searched(pattern: str, text: str) -> bool | str:
    """Whether ``pattern`` matches in ``text``; a string saying why it was not searched: the
    text is longer than a pattern's bound assumes, or the validation's searches are spent (a
    search of n characters is counted as n/MAX_REGEX_CHARS of the pattern's bound)."""
    if len(text) > MAX_REGEX_CHARS:
        return (
            f"a string of {len(text):,} characters is longer than the {MAX_REGEX_CHARS:,} "
            f"a pattern is matched against; {shown(pattern)} was not tried"
        )
    compiled = bounded(pattern)
    budget = _SEARCHES.get()
    if budget is not None:
        cost = regex_steps(pattern) * max(len(text), 1) / MAX_REGEX_CHARS
        if cost > budget.steps:
            return f"{shown(pattern)} was not tried: the reply's strings are more than the schema's patterns may search"
        budget.steps -= cost
    return compiled.search(text) is not None


def _bounded_validator(base: type) -> type:
    """``base`` (a jsonschema validator class) with the keywords that search a regex
    searching through :func:`_searched`."""
    if base not in _BOUNDED:
        from jsonschema.validators import extend

        _BOUNDED[base] = extend(
            base,
            {"pattern": _pattern, "patternProperties": _pattern_properties, "additionalProperties": _additional},
        )
    return _BOUNDED[base]


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema import ValidationError

    if validator.is_type(instance, "string"):
        found = _searched(pattern, instance)
        if isinstance(found, str):
            yield ValidationError(found)
        elif not found:
            yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator: Any, patterns: dict[str, Any], instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema import ValidationError

    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            found = _searched(pattern, key)
            if isinstance(found, str):
                yield ValidationError(f"property {_shown(key)}: {found}")
            elif found:
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional(validator: Any, allowed: Any, instance: Any, schema: Any) -> Iterator[Any]:
    """jsonschema's ``additionalProperties``, its ``patternProperties`` searched bounded."""
    from jsonschema import ValidationError

    if not validator.is_type(instance, "object"):
        return
    properties, patterns = schema.get("properties", {}), schema.get("patternProperties", {})
    extras = [k for k in instance if k not in properties and not any(_searched(p, k) is True for p in patterns)]
    if validator.is_type(allowed, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], allowed, path=extra)
    elif not allowed and extras:
        names, one = ", ".join(repr(each) for each in sorted(extras)), len(extras) == 1
        if patterns:
            listed_patterns = ", ".join(repr(each) for each in sorted(patterns))
            yield ValidationError(f"{names} {'does' if one else 'do'} not match any of the regexes: {listed_patterns}")
        else:
            yield ValidationError(
                f"Additional properties are not allowed ({names} {'was' if one else 'were'} unexpected)"
            )


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
