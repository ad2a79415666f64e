"""Verifiers without subclassing: a plain function, or checks declared as data.

A task's verifier checks a draft without the reference (``Task.verify``). Besides a subclass
that overrides ``verify``, a task takes ``verify=`` (``Task(..., verify=fn)``,
``SelfRefine(task, verify=fn)``): a function ``(input, draft)`` returning a score in [0, 1]
(or True/False), a ``(score, findings)`` pair (findings: a string or a list of strings,
empty when nothing failed) or a :class:`~selfrefine.core.records.Verification`; or
:class:`Checks`, what a YAML
task's ``checks:`` declares (regexes that must or must not match, word and line counts,
required words), scored as the share of checks that pass, with findings saying what failed.

Check regexes run on model output, which is untrusted: Python's ``re`` has no timeout, so a
pattern is refused when it is loaded if its backtracking could grow past a bound on a
draft of ``MAX_REGEX_CHARS`` (nested repeats, backreferences, more than one unbounded
repeat), and a longer draft fails the regex checks instead of being searched.
"""

from __future__ import annotations

import math
import re
import reprlib
from collections.abc import Callable, Sequence
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from ..core.errors import TaskError
from ..core.records import Verification
from ..core.saferegex import MAX_REGEX_CHARS as MAX_REGEX_CHARS  # the longest draft a check regex searches
from ..core.saferegex import bounded, bounded_together
from .instructions import Instruction, InstructionChecks, from_checks
from .instructions.words import Word

Verifier = Callable[[str, str], "float | tuple[float, str | Sequence[str]] | Verification"]
"""A verify function: ``(input, draft)`` -> a score in [0, 1], ``(score, findings)`` or a Verification."""


# --- a verify function's reply as a Verification -----------------------------------------


def as_verification(value: Any, who: str) -> Verification:
    """What a verify function returned, as the record the engine keeps; a reply of another
    shape, or a score outside [0, 1], is a TaskError naming the function."""
    if isinstance(value, Verification):
        for name in ("score", "judged"):  # model_construct skips the record's own check
            number = getattr(value, name)
            if number is not None and not (isinstance(number, (int, float)) and math.isfinite(number)):
                raise TaskError(f"{who} returned a Verification whose {name} is {number!r}; give a finite number")
        return value
    if isinstance(value, tuple) and len(value) == 2:
        score, findings = value
        problems = [findings] if isinstance(findings, str) else findings
        if not isinstance(problems, (list, tuple)) or not all(isinstance(p, str) for p in problems):
            raise TaskError(f"{who} returned findings {shown_value(findings)}; give a string or a list of strings")
        problems = [p for p in problems if p.strip()]
        score = _score(score, who)
        return Verification(text="; ".join(problems) or "ok", passed=not problems, score=score)
    if isinstance(value, bool):  # a pass/fail check
        return Verification(text="ok" if value else "fails the check", passed=value, score=float(value))
    score = _score(value, who)
    return Verification(text="ok" if score >= 1 else f"score {score:.2f} of 1", passed=score >= 1, score=score)


_SHAPES = "a verify function returns a score in [0, 1], a (score, findings) pair or a Verification"


def _score(value: Any, who: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise TaskError(f"{who} returned {shown_value(value)}; {_SHAPES}")
    return float(value)


class FunctionVerifier:
    """A verify function as a task's verifier: its replies checked, its errors named."""

    def __init__(self, fn: Verifier) -> None:
        if not callable(fn):
            raise TaskError(f"verify must be a function (input, draft) -> score, not {type(fn).__name__}")
        self.fn = fn
        name = getattr(fn, "__qualname__", None)
        self.who = f"verify function {_cut(name) if isinstance(name, str) and name else type(fn).__name__}"

    def __call__(self, input: str, draft: str) -> Verification:
        """The function's check of ``draft`` as a Verification; whatever it raises or returns,
        an error is a TaskError with a message of bounded length."""
        try:
            value = self.fn(input, draft)
        except TaskError:
            raise
        except ValidationError as exc:  # a record it built, e.g. Verification(score=nan): one line
            first = exc.errors()[0]
            where = ".".join(map(str, (exc.title, *first["loc"])))
            raise TaskError(f"{self.who} raised ValidationError: {where}: {first['msg']}") from None
        except Exception as exc:
            raise TaskError(f"{self.who} raised {type(exc).__name__}: {_said(exc)}") from None
        try:
            return as_verification(value, self.who)
        except TaskError:
            raise
        except Exception as exc:  # a reply whose own methods fail (__len__, comparisons, ...)
            raise TaskError(
                f"{self.who} returned a {type(value).__name__} that cannot be read "
                f"({type(exc).__name__}: {_said(exc)}); {_SHAPES}"
            ) from None


# a verify function's reply or error in a message: at most this many characters of it
SHOWN_CHARS = 200


class _Shown(reprlib.Repr):
    """reprlib's short repr; an object whose repr raises is named by its type."""

    def repr_instance(self, x: Any, level: int) -> str:
        try:
            return _cut(repr(x))
        except Exception as exc:  # noqa: BLE001 - any repr may raise; the message must still be written
            return f"<{type(x).__name__} whose repr() raised {type(exc).__name__}>"


_REPR = _Shown()
_REPR.maxstring = _REPR.maxother = _REPR.maxlong = SHOWN_CHARS
_REPR.maxlevel = 3


def shown_value(value: Any) -> str:
    """``repr(value)`` for an error message, at most ``SHOWN_CHARS`` characters (a long
    sequence shows its first items); a repr that raises is named by the type instead."""
    try:
        return _cut(_REPR.repr(value))
    except Exception as exc:  # noqa: BLE001 - any repr may raise; the message must still be written
        return f"<{type(value).__name__} whose repr() raised {type(exc).__name__}>"


def _said(exc: BaseException) -> str:
    """What an exception says, cut to ``SHOWN_CHARS``, even when its ``str()`` raises."""
    try:
        return _cut(" ".join(str(exc).split()))
    except Exception as failed:  # noqa: BLE001 - as for repr: the message must still be written
        return f"(its message cannot be shown: str() raised {type(failed).__name__})"


def _cut(text: str) -> str:
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 1] + "…"


# --- checks declared as data (a YAML task's ``checks:``) ----------------------------------


MAX_PATTERN_CHARS = 500  # a check regex's longest pattern (the regex check kind's)


class Pattern(BaseModel):
    """A check regex with the rule it stands for in words (``says``), which is what a failed
    check's finding tells the model: a raw regex is nothing a model can act on."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    pattern: str = Field(min_length=1, max_length=MAX_PATTERN_CHARS)
    says: str = Field(default="", max_length=300)  # "start with a capital letter, at most 50 characters"


def pattern_of(item: str | Pattern) -> str:
    return item if isinstance(item, str) else item.pattern


def says_of(item: str | Pattern) -> str:
    return "" if isinstance(item, str) else " ".join(item.says.split())


Bound = Annotated[int, Field(ge=0, le=100_000)]  # as a count check's n


class Checks(BaseModel):
    """Simple checks of a draft, declared without code: a task file's ``checks:`` mapping. Its
    keys are spellings of the instruction checks a ``checks:`` list declares
    (:func:`~selfrefine.checks.instructions.from_checks`), which check every draft: one word
    count, one line count for both forms. Each regex, each required word and each count bound
    (a ``min_`` and a ``max_``: two; equal ones: one) is one check; the score is the share that
    pass and the findings say what failed ("needs at most 3 lines, has 4"). A regex may carry
    its rule in words (``{pattern: ..., says: ...}``), which its finding gives. Strict: a count
    is an integer ("40" and true are refused, naming the key)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    # regexes (re syntax, ^/$ per line; (?i) ignores case), each a pattern or {pattern, says}
    must_match: list[str | Pattern] = Field(default_factory=list)
    must_not_match: list[str | Pattern] = Field(default_factory=list)
    min_words: Bound | None = None  # words as IFEval counts them: runs of letters and digits
    max_words: Bound | None = None
    min_chars: Bound | None = None  # characters, spaces and punctuation included
    max_chars: Bound | None = None
    min_lines: Bound | None = None  # lines with something on them
    max_lines: Bound | None = None
    required_words: list[Word] = Field(default_factory=list)  # whole words, any case
    # the checks these keys spell, built once when it is validated (a tuple of records: equal
    # mappings stay equal); model_copy(update=...) skips validation: make a new Checks instead
    _held: tuple[Instruction, ...] = PrivateAttr(default=())

    @field_validator("must_match", "must_not_match", "required_words", mode="before")
    @classmethod
    def _listed(cls, value: Any) -> Any:
        return [value] if isinstance(value, (str, dict)) else value

    @field_validator("must_match", "must_not_match")
    @classmethod
    def _bounded(cls, patterns: list[str | Pattern]) -> list[str | Pattern]:
        for pattern in patterns:
            if not 0 < len(pattern_of(pattern)) <= MAX_PATTERN_CHARS:  # as a regex check's pattern
                raise ValueError(f"a regex is 1 to {MAX_PATTERN_CHARS} characters, not {len(pattern_of(pattern))}")
            try:
                bounded_regex(pattern_of(pattern))
            except TaskError as exc:
                raise ValueError(str(exc)) from None
        return patterns

    @model_validator(mode="after")
    def _coherent(self) -> Checks:
        # all the regexes search each draft: together they stay within one pattern's bound
        patterns = [pattern_of(p) for p in (*self.must_match, *self.must_not_match)]
        bounded_together(patterns, re.MULTILINE, what="check regexes")
        for what in ("words", "lines", "chars"):
            low, high = getattr(self, f"min_{what}"), getattr(self, f"max_{what}")
            if low is not None and high is not None and low > high:
                raise ValueError(f"min_{what} {low} is more than max_{what} {high}")
        self._held = tuple(from_checks(self))
        if not self._held:
            raise ValueError("no checks given: declare at least one of " + ", ".join(type(self).model_fields))
        return self

    @classmethod
    def parse(cls, values: Any) -> Checks:
        """Checks from a mapping (``Task(..., verify={"max_words": 8})``); a TaskError naming
        the first problem otherwise."""
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "checks"
            if first["type"] == "extra_forbidden":
                raise TaskError(f"unknown check {where!r}; known: {', '.join(cls.model_fields)}") from None
            raise TaskError(f"check {where}: {first['msg'].removeprefix('Value error, ')}") from None

    @property
    def instructions(self) -> list[Instruction]:
        """The instruction checks its keys spell, in the order they check a draft."""
        return list(self._stated().checks)

    def _stated(self) -> InstructionChecks:
        if not self._held:  # model_construct skips the validator that builds them
            self._held = tuple(from_checks(self))
        return InstructionChecks(self._held)  # checked by the list form's code

    def regexes(self) -> list[tuple[str, int]]:
        """Its regexes, each with its flags (for :func:`selfrefine.core.saferegex.within_budget`)."""
        return [(pattern_of(p), re.MULTILINE) for p in (*self.must_match, *self.must_not_match)]

    def count(self) -> int:
        """How many checks a draft is scored on."""
        return len(self._stated().checks)

    def __call__(self, input: str, draft: str) -> Verification:
        return self._stated()(input, draft)

    def findings(self, draft: str) -> list[str]:
        """One line per failed check."""
        return self._stated().findings(draft)


def bounded_regex(pattern: str) -> re.Pattern[str]:
    """The compiled check regex, or a TaskError naming it (invalid, or its backtracking
    unbounded: :func:`selfrefine.core.saferegex.bounded`)."""
    try:
        return bounded(pattern, re.MULTILINE)
    except ValueError as exc:
        raise TaskError(str(exc)) from None
