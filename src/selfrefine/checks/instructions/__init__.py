"""Instructions a request states that code can check, declared as data.

A check is a small record with a ``type`` (the discriminator of a pydantic union), e.g.
``{"type": "count", "unit": "bullets", "relation": "exactly", "n": 3}``. It covers what
IFEval's verifiers check by code (Zhou et al. 2023): letter case, forbidden characters and
words, counts of words, sentences, paragraphs, lines, bullet points, sections, highlighted
spans and placeholders, words in capitals, a word's or a letter's frequency, required words,
start and end phrases, quotes, JSON, a title, a postscript, two responses, one of given
answers, the response's language. A task file's regexes are checks too (``regex``), and
:func:`from_checks` states a task file's ``checks:`` in this vocabulary.

- :func:`parse_checks` validates a list of checks (a TaskError naming the first problem);
  :func:`build_checks` builds each on its own, for checks read from a request: one that
  cannot be built is dropped with its reason, never failing the others;
- :func:`checks_schema` is the compact JSON schema of such a list, for decoding a model's
  checks under a grammar (``regex`` left out: a request's checks are never regexes);
- each check's ``check(text)`` gives an :class:`Outcome`: passed, and a finding that says what
  to change, with numbers ("needs exactly 3 bullet points (lines starting with * or -), has 5";
  "remove the 4 commas"); ``describe()`` states the instruction itself, and ``repair(text)``
  the short instruction that repairs a failure ("Remove every comma: use periods or 'and'
  instead; change nothing else."), for a focused refinement;
- :class:`InstructionChecks` is a task's verifier over a list of checks: the share passed.

A kind is one class: defining a subclass of :class:`Instruction` with its ``type`` registers
it (:data:`KINDS`), and the union that parses checks, the derivation's schema and its prompt's
list of kinds (:func:`examples`) are built from the kinds registered; each kind says itself
whether a request states it (``grounded``, with :mod:`.grounding`'s words).

Drafts are untrusted: each check reads at most ``MAX_CHECK_CHARS`` characters in linear time;
no pattern from a check's author is run except a ``regex`` bounded by
:mod:`selfrefine.core.saferegex`.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from functools import lru_cache
from typing import Annotated, Any, Union

from pydantic import Field, TypeAdapter, ValidationError

from ...core.errors import TaskError
from ...core.records import DroppedCheck, Verification
from ...core.saferegex import within_budget
from .base import KINDS, MAX_CHECK_CHARS, Instruction, Outcome, Relation

# the built-in kinds: importing their modules defines them, and defining a kind registers it
from .counts import CapitalWords, Count, LetterFrequency, ParagraphStart, WordFrequency
from .form import Case, EndsWith, Json, Language, OneOf, Postscript, Quoted, StartsWith, Title, TwoResponses
from .words import REGEX_FLAGS, ForbiddenChars, ForbiddenWords, Keywords, Regex

__all__ = [
    "CHECK_TYPES",
    "MAX_CHECK_CHARS",
    "Case",
    "CapitalWords",
    "Check",
    "Count",
    "EndsWith",
    "ForbiddenChars",
    "ForbiddenWords",
    "Instruction",
    "InstructionChecks",
    "KINDS",
    "Json",
    "Keywords",
    "Language",
    "LetterFrequency",
    "OneOf",
    "Outcome",
    "ParagraphStart",
    "Postscript",
    "Quoted",
    "Regex",
    "Relation",
    "StartsWith",
    "Title",
    "TwoResponses",
    "WordFrequency",
    "build_checks",
    "checks_schema",
    "examples",
    "from_checks",
    "kinds",
    "parse_checks",
    "regexes",
    "schema_size",
]

# the built-in kinds, in the order they are defined (a schema lists them so); a request's checks
# are all but the regex. A kind defined later (a plugin's, a test's) joins :func:`kinds`.
CHECK_TYPES: tuple[type[Instruction], ...] = tuple(KINDS.values())
Check = Annotated[Union[CHECK_TYPES], Field(discriminator="type")]  # noqa: UP007 - a tuple of types


def kinds() -> tuple[type[Instruction], ...]:
    """Every registered kind, built-in or not, in the order defined."""
    return tuple(KINDS.values())


@lru_cache(maxsize=4)
def _adapter_of(known: tuple[type[Instruction], ...]) -> TypeAdapter[list[Instruction]]:
    union = Annotated[Union[known], Field(discriminator="type")]  # noqa: UP007 - a tuple of types
    return TypeAdapter(list[union])  # type: ignore[valid-type]


def _checks() -> TypeAdapter[list[Instruction]]:
    """The validator of a list of checks of every kind registered now."""
    return _adapter_of(kinds())


MAX_CHECKS = 32


def parse_checks(data: Any) -> list[Instruction]:
    """Checks from JSON-like data (a list of mappings, or checks already made); a TaskError
    naming the first problem ("check 2 (count): n: Input should be greater than or equal to 0")."""
    if isinstance(data, (str, bytes)):
        raise TaskError("checks are a list of mappings, each with a type; got a string")
    if not isinstance(data, Sequence) or len(data) > MAX_CHECKS:
        raise TaskError(f"checks are a list of at most {MAX_CHECKS} mappings, each with a type")
    try:
        checks = _checks().validate_python(list(data))
    except ValidationError as exc:
        raise TaskError(_first_problem(exc)) from None
    try:  # each regex is bounded alone; all of them search each draft, so together too
        within_budget(regexes(checks), "regex checks")
    except ValueError as exc:
        raise TaskError(str(exc)) from None
    return checks


def regexes(checks: Sequence[Instruction]) -> list[tuple[str, int]]:
    """The regexes of ``checks``, each with the flags it searches with (for
    :func:`selfrefine.core.saferegex.within_budget`)."""
    return [(c.pattern, REGEX_FLAGS) for c in checks if isinstance(c, Regex)]


def build_checks(data: Sequence[Any], limit: int = MAX_CHECKS) -> tuple[list[Instruction], list[DroppedCheck]]:
    """Checks read from a request (its wording, or the model's list), each built on its own:
    one that cannot be built is dropped with its reason ("nth: Input should be greater than or
    equal to 1"), and past the first ``limit`` that can, the rest are dropped as too many."""
    kept: list[Instruction] = []
    dropped: list[DroppedCheck] = []
    for item in data:
        shown = item if isinstance(item, dict) else {"value": repr(item)[:200]}
        try:
            [check] = _checks().validate_python([item])
        except ValidationError as exc:
            dropped.append(DroppedCheck(check=shown, reason=_first_problem(exc, labelled=False)))
            continue
        if len(kept) < limit:
            kept.append(check)
        else:
            dropped.append(DroppedCheck(check=shown, reason=f"more than {limit} checks: the first {limit} are kept"))
    return kept, dropped


def _first_problem(exc: ValidationError, *, labelled: bool = True) -> str:
    first = exc.errors()[0]
    where = list(first["loc"])
    index = where.pop(0) if where and isinstance(where[0], int) else None
    kind = where.pop(0) if where and isinstance(where[0], str) and index is not None else None
    known = ", ".join(KINDS)
    message = {
        "union_tag_invalid": f"unknown type; known: {known}",
        "union_tag_not_found": f"no type; give one of {known}",
        "string_pattern_mismatch": "must not be blank",
        "extra_forbidden": "is not an argument of this check",
    }.get(first["type"], first["msg"].removeprefix("Value error, "))
    field = ".".join(str(p) for p in where)
    if not labelled:  # one check on its own: its kind and the field at fault
        return f"{kind + ': ' if kind else ''}{field + ': ' if field else ''}{message}"
    label = f"check {index + 1}" + (f" ({kind})" if kind else "") if index is not None else "checks"
    return f"{label}: {field + ': ' if field else ''}{message}"


def checks_schema(max_items: int = 12, kinds: Sequence[type[Instruction]] | None = None) -> dict[str, Any]:
    """The JSON schema of a list of checks of ``kinds`` (by default every kind a request's
    checks may be: all but ``regex``), compact
    for grammar-constrained decoding: one ``anyOf`` of inlined objects, each naming its
    ``type``; no titles, descriptions, defaults, patterns or string lengths (the records
    validate those; a length bound becomes a grammar rule nested as deep as the bound)."""
    items = []
    for kind in [k for k in KINDS.values() if k.from_request] if kinds is None else kinds:
        schema = _compact(copy.deepcopy(kind.model_json_schema()))
        schema["required"] = ["type", *schema.get("required", [])]
        items.append(schema)
    return {"type": "array", "items": {"anyOf": items}, "maxItems": max_items}


def examples() -> str:
    """Each kind's example, for the derivation prompt's list of kinds: a line per
    ``example_at`` line, its examples in place order; a kind placed nowhere on a line of its own."""
    lines: dict[int, list[tuple[int, str]]] = {}
    for i, kind in enumerate(KINDS.values()):
        if kind.example:
            line, place = kind.example_at
            lines.setdefault(line if line < 1_000 else 1_000 + i, []).append((place, kind.example))
    return "\n".join("   ".join(e for _, e in sorted(found)) for _, found in sorted(lines.items()))


def _compact(node: Any) -> Any:
    if isinstance(node, dict):
        for key in ("title", "description", "default", "pattern", "minLength", "maxLength"):
            node.pop(key, None)
        if "const" in node or "enum" in node:
            node.pop("type", None)
        for value in node.values():
            _compact(value)
    elif isinstance(node, list):
        for value in node:
            _compact(value)
    return node


def schema_size(**kwargs: Any) -> int:
    """How many characters :func:`checks_schema` takes as compact JSON."""
    return len(json.dumps(checks_schema(**kwargs), separators=(",", ":")))


class InstructionChecks:
    """A task's verifier over checks: the score is the share that pass, the findings say what
    failed, one per failed check ("needs at most 99 words, has 120; remove the 2 commas")."""

    def __init__(self, checks: Sequence[Instruction] | Any) -> None:
        self.checks = list(checks) if all(isinstance(c, Instruction) for c in checks) else parse_checks(checks)
        if not self.checks:
            raise TaskError("no checks given: declare at least one")

    def regexes(self) -> list[tuple[str, int]]:
        """Its regexes, each with its flags."""
        return regexes(self.checks)

    def outcomes(self, draft: str) -> list[Outcome]:
        return [check.check(draft) for check in self.checks]

    def findings(self, draft: str) -> list[str]:
        """One line per failed check."""
        return [o.finding for o in self.outcomes(draft) if not o.passed]

    def __call__(self, input: str, draft: str) -> Verification:
        found = [c.finding(draft, o) for c, o in zip(self.checks, self.outcomes(draft)) if not o.passed]
        problems = [f.text for f in found]
        score = (len(self.checks) - len(problems)) / len(self.checks)
        text = "; ".join(problems) or "all checks pass"
        return Verification(text=text, passed=not problems, score=score, findings=found)


def from_checks(checks: Any) -> list[Instruction]:
    """A task file's ``checks:`` mapping (:class:`selfrefine.checks.declared.Checks`) in this
    vocabulary, which is how the mapping checks a draft: its keys are spellings of these kinds.
    ``min_words`` / ``max_words`` are a count of words (counted as IFEval counts them: runs of
    letters and digits, "don't" is two words), ``min_chars`` / ``max_chars`` of characters,
    ``min_lines`` / ``max_lines`` of lines (blank ones not counted) -- a ``min_`` and a ``max_``
    bound are two checks, equal bounds one (``exactly``) --; a whole-word keyword per
    ``required_words`` item; a regex per ``must_match`` / ``must_not_match`` item, its finding
    naming it by key and place ("check must_match 2") where it states no rule in words."""
    found: list[Instruction] = []
    for unit, key in (("words", "words"), ("characters", "chars"), ("lines", "lines")):
        low, high = getattr(checks, f"min_{key}"), getattr(checks, f"max_{key}")
        if low is not None and low == high:
            found.append(Count(unit=unit, relation="exactly", n=low))
            continue
        found += [Count(unit=unit, relation="at least", n=low)] if low is not None else []
        found += [Count(unit=unit, relation="at most", n=high)] if high is not None else []
    found += [Keywords(words=[w], whole=True) for w in checks.required_words]
    for key, present in (("must_match", True), ("must_not_match", False)):
        items = getattr(checks, key)
        for i, item in enumerate(items):
            found.append(_regex(item, present, f"check {key}" if len(items) == 1 else f"check {key} {i + 1}"))
    return found


def _regex(item: Any, present: bool, where: str) -> Regex:
    """A ``must_match`` item (a pattern, or a :class:`selfrefine.checks.declared.Pattern` with its
    rule in words), named ``where`` in its finding."""
    if isinstance(item, str):
        check = Regex(pattern=item, present=present)
    else:
        check = Regex(pattern=item.pattern, present=present, says=item.says)
    check._where = where
    return check
