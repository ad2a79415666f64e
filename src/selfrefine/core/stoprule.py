"""When a critique's words stop the loop: stop phrases and stop patterns.

A stop phrase (``stop_contains``, YAML ``stop: {contains: [...]}``, ``--stop-contains``)
matches as whole words, case-insensitively, with any run of spaces between its words, and
never when it is negated: a phrase preceded, within :data:`NEGATION_WINDOW` words of the
same clause, by "not", "n't", "never", "no longer", "hardly", "almost", ... does not count,
nor does one in a question. So ``done`` stops on "Done." and "The haiku is done." but not on
"It is not done: line 2 needs 7 syllables", "It isn't yet done", "Is it done? No" or "Line 2
is abandoned".

A stop pattern (``stop_matches``, YAML ``stop: {matches: [...]}``, ``--stop-matches``) is a
regular expression taken as written (case-insensitive, ``^``/``$`` at line ends): the
escape hatch for a rule the phrase form cannot say, e.g. ``^DONE$``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .saferegex import MAX_REGEX_CHARS, bounded

NEGATION_WINDOW = 4  # words before a phrase in which a negation cancels it
MAX_PATTERN_CHARS = 500

_NEGATION = re.compile(
    r"\b(?:not|never|no\s+longer|hardly|barely|scarcely|almost|nearly|cannot|nor|neither|without|far\s+from|"
    r"\w+n't|(?:is|are|was|were|do|does|did|ca|could|wo|would|should|has|have|had)nt)\b",
    re.IGNORECASE,
)
# where a sentence or clause ends: a negation before it does not reach the phrase
_CLAUSE_END = re.compile(r"[.!?;:,()\n\u2014]|\bbut\b|\bhowever\b", re.IGNORECASE)
# the rest of a sentence that is a question ("Is it done? No."): it asserts nothing
_QUESTION = re.compile(r"[^.!?;:\n]*\?")
_WORD = re.compile(r"[\w']+")


def phrase_pattern(phrase: str) -> re.Pattern[str]:
    """A phrase as a whole-word, case-insensitive pattern (its words any spaces apart); a
    hyphenated word ("half-done", "done-ish") is another word."""
    words = [re.escape(w) for w in phrase.split()]
    return re.compile(r"(?<!\w)(?<!\w-)" + r"\s+".join(words) + r"(?!\w)(?!-\w)", re.IGNORECASE)


def compile_pattern(pattern: str) -> re.Pattern[str]:
    """A stop pattern compiled; a bad one (invalid, or backtracking unbounded, since a task
    file is untrusted: :mod:`selfrefine.core.saferegex`) raises ValueError naming it."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise ValueError(f"stop pattern is {len(pattern)} characters; the limit is {MAX_PATTERN_CHARS}")
    try:
        return bounded(pattern, re.IGNORECASE | re.MULTILINE)
    except ValueError as exc:
        raise ValueError(f"stop pattern: {exc}") from None


def checked_patterns(patterns: list[str]) -> list[str]:
    """``patterns`` unchanged once each compiles as a bounded stop pattern (a field
    validator's check; a bad one raises ValueError naming it)."""
    for pattern in patterns:
        compile_pattern(pattern)
    return patterns


def negated(before: str) -> bool:
    """Whether the text just before a phrase negates it (same clause, a few words back)."""
    clause = _CLAUSE_END.split(before.replace("\u2019", "'"))[-1]
    window = " ".join(_WORD.findall(clause)[-NEGATION_WINDOW:])
    return _NEGATION.search(window) is not None


def phrase_hit(text: str, phrase: str) -> bool:
    """Whether ``text`` says ``phrase``: a whole-word match that no negation precedes."""
    if not phrase.strip():
        return False
    return any(
        not negated(text[: m.start()]) and not _QUESTION.match(text, m.end())
        for m in phrase_pattern(phrase).finditer(text)
    )


def stop_hit(text: str, contains: Iterable[str] = (), matches: Iterable[str | re.Pattern[str]] = ()) -> str | None:
    """The first stop rule ``text`` meets, described (``contains 'done'``); None: none."""
    for phrase in contains:
        if phrase_hit(text, phrase):
            return f"contains {phrase!r}"
    for pattern in matches:
        rx = pattern if isinstance(pattern, re.Pattern) else compile_pattern(pattern)
        if rx.search(text[:MAX_REGEX_CHARS]):  # a bounded pattern's bound holds up to this length
            return f"matches {rx.pattern!r}"
    return None
