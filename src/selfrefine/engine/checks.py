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
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..core.errors import TaskError
from ..core.records import Finding, Verification
from ..core.saferegex import MAX_REGEX_CHARS, bounded, bounded_together
from ..core.wording import plural
from .instructions.words import regex_finding

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


class Pattern(BaseModel):
    """A check regex with the rule it stands for in words (``says``), which is what a failed
    check's finding tells the model: a raw regex is nothing a model can act on."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    pattern: str = Field(min_length=1)
    says: str = Field(default="", max_length=300)  # "start with a capital letter, at most 50 characters"


def pattern_of(item: str | Pattern) -> str:
    return item if isinstance(item, str) else item.pattern


def says_of(item: str | Pattern) -> str:
    return "" if isinstance(item, str) else " ".join(item.says.split())


class Checks(BaseModel):
    """Simple checks of a draft, declared without code. Each regex, each required word, the
    word count and the line count (blank lines not counted) is one check; the score is the
    share that pass and the findings say what failed ("needs 3 lines, has 4"). A regex may
    carry its rule in words (``{pattern: ..., says: ...}``), which its finding gives. Strict: a
    count is an integer ("40" and true are refused, naming the key)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    # regexes (re syntax, ^/$ per line; (?i) ignores case), each a pattern or {pattern, says}
    must_match: list[str | Pattern] = Field(default_factory=list)
    must_not_match: list[str | Pattern] = Field(default_factory=list)
    min_words: int | None = Field(default=None, ge=0)
    max_words: int | None = Field(default=None, ge=0)
    min_chars: int | None = Field(default=None, ge=0)  # characters, spaces and punctuation included
    max_chars: int | None = Field(default=None, ge=0)
    min_lines: int | None = Field(default=None, ge=0)
    max_lines: int | None = Field(default=None, ge=0)
    required_words: list[str] = Field(default_factory=list)  # whole words, any case

    @field_validator("must_match", "must_not_match", "required_words", mode="before")
    @classmethod
    def _listed(cls, value: Any) -> Any:
        return [value] if isinstance(value, (str, dict)) else value

    @field_validator("must_match", "must_not_match")
    @classmethod
    def _bounded(cls, patterns: list[str | Pattern]) -> list[str | Pattern]:
        for pattern in patterns:
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
        if not self.count():
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

    def regexes(self) -> list[tuple[str, int]]:
        """Its regexes, each with its flags (for :func:`selfrefine.core.saferegex.within_budget`)."""
        return [(pattern_of(p), re.MULTILINE) for p in (*self.must_match, *self.must_not_match)]

    def count(self) -> int:
        """How many checks a draft is scored on."""
        counts = (self.min_words, self.max_words), (self.min_lines, self.max_lines), (self.min_chars, self.max_chars)
        ranges = sum(any(v is not None for v in pair) for pair in counts)
        return len(self.must_match) + len(self.must_not_match) + len(self.required_words) + ranges

    def __call__(self, input: str, draft: str) -> Verification:
        problems = self.findings(draft)
        score = (self.count() - len(problems)) / self.count()
        text = "; ".join(problems) or "all checks pass"
        return Verification(text=text, passed=not problems, score=score, findings=self.repairs(draft, problems))

    def repairs(self, draft: str, problems: list[str]) -> list[Finding]:
        """Each failed check with its repair (engine/focused.py), in the order of ``problems``
        (:meth:`findings`: the counts, the required words, the regexes)."""
        counts = [
            (len(draft.split()), self.min_words, self.max_words, "word"),
            (len(draft), self.min_chars, self.max_chars, "character"),
            (sum(1 for line in draft.splitlines() if line.strip()), self.min_lines, self.max_lines, "line"),
        ]
        found = [_count_repair(*count) for count in counts if _count_problem(*count)]
        found += [
            (f"use the word {w!r}", f"Add the word {w!r} where it fits; keep the rest.")
            for w in self.required_words
            if not _has_word(draft, w)
        ]
        if len(draft) <= MAX_REGEX_CHARS:  # a longer draft fails the regexes unsearched (its findings say so)
            rules = [(says_of(p), None) for p in self.must_match if not bounded_regex(pattern_of(p)).search(draft)]
            hits = [(says_of(p), bounded_regex(pattern_of(p)).search(draft)) for p in self.must_not_match]
            rules += [(says, hit[0]) for says, hit in hits if hit is not None]
            found += [_rule_repair(says, hit) for says, hit in rules]
        if len(found) != len(problems):  # a draft too long for the regexes: its findings say so, no repair
            return [Finding(check="the task file's checks", text=p) for p in problems]
        return [Finding(check=check, text=text, repair=repair) for (check, repair), text in zip(found, problems)]

    def findings(self, draft: str) -> list[str]:
        """One line per failed check."""
        words = len(draft.split())
        lines = sum(1 for line in draft.splitlines() if line.strip())
        found = [
            _count_problem(words, self.min_words, self.max_words, "word"),
            _count_problem(len(draft), self.min_chars, self.max_chars, "character"),
            _count_problem(lines, self.min_lines, self.max_lines, "line"),
        ]
        found += [f"needs the word {w!r}" for w in self.required_words if not _has_word(draft, w)]
        found += self._regex_findings(draft)
        return [f for f in found if f]

    def _regex_findings(self, draft: str) -> list[str]:
        if not (self.must_match or self.must_not_match):
            return []
        if len(draft) > MAX_REGEX_CHARS:
            n = len(self.must_match) + len(self.must_not_match)
            return [f"is {len(draft):,} characters; the regex checks read at most {MAX_REGEX_CHARS:,}"] * n
        found = [
            regex_finding(says_of(p), True, _where("must_match", i, self.must_match))
            for i, p in enumerate(self.must_match)
            if not bounded_regex(pattern_of(p)).search(draft)
        ]
        for i, p in enumerate(self.must_not_match):
            hit = bounded_regex(pattern_of(p)).search(draft)
            if hit is not None:
                found.append(regex_finding(says_of(p), False, _where("must_not_match", i, self.must_not_match), hit[0]))
        return found


def _where(key: str, i: int, items: list[str | Pattern]) -> str:
    """A regex check named by its key (and its place, where the key lists several)."""
    return f"check {key}" if len(items) == 1 else f"check {key} {i + 1}"


def _count_repair(n: int, low: int | None, high: int | None, unit: str) -> tuple[str, str]:
    """A failed count's check in words and its repair, with the number measured."""
    bounds = f"{low} to {high}" if low is not None and high is not None and low != high else None
    if bounds is None:
        bounds = (
            f"exactly {low}"
            if low is not None and low == high
            else f"at least {low}"
            if low is not None
            else f"at most {high}"
        )
    check = f"{bounds} {unit}s"
    verb = "shorten it to" if high is not None and n > high else "lengthen it to"
    verb = "rewrite it with" if low is not None and low == high and n < low else verb
    return check, f"It has {plural(n, unit)}; {verb} {check}; keep the meaning."


def _rule_repair(says: str, hit: str | None) -> tuple[str, str]:
    """A failed regex's check and its repair in words (never the pattern): ``hit`` None for a
    ``must_match`` that does not match, else what a ``must_not_match`` found."""
    rule = " ".join(says.split())
    if hit is not None and hit.strip():
        cut = hit if len(hit) <= 40 else hit[:39] + "…"
        return (
            rule or "a form that is not allowed",
            f"Remove {cut!r}{f' (rule: {rule})' if rule else ''}; change nothing else.",
        )
    if hit is None:
        return (
            rule or "the required form",
            f"Rewrite the text so that it follows {f'this rule: {rule}' if rule else 'the form the task asks for'}; change nothing else.",
        )
    return (
        rule or "a form that is not allowed",
        f"Remove what breaks {f'this rule: {rule}' if rule else 'the form the task allows'}; change nothing else.",
    )


def _count_problem(n: int, low: int | None, high: int | None, unit: str) -> str | None:
    if (low is None or n >= low) and (high is None or n <= high):
        return None
    have = f"has {n}"
    if low is not None and low == high:
        return f"needs {plural(low, unit)}, {have}"
    if low is not None and high is not None:
        return f"needs {low} to {high} {unit}s, {have}"
    if low is not None:
        return f"needs at least {plural(low, unit)}, {have}"
    return f"needs at most {plural(high or 0, unit)}, {have}"


def _has_word(text: str, word: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(word.strip())}(?!\w)", text, re.IGNORECASE) is not None


def _excerpt(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def bounded_regex(pattern: str) -> re.Pattern[str]:
    """The compiled check regex, or a TaskError naming it (invalid, or its backtracking
    unbounded: :func:`selfrefine.core.saferegex.bounded`)."""
    try:
        return bounded(pattern, re.MULTILINE)
    except ValueError as exc:
        raise TaskError(str(exc)) from None
