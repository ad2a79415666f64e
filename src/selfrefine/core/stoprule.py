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
from bisect import bisect_left, bisect_right
from collections.abc import Iterable

from .saferegex import MAX_PATTERNS, MAX_REGEX_CHARS, bounded, bounded_together

STOP_FLAGS = re.IGNORECASE | re.MULTILINE
NEGATION_WINDOW = 4  # words before a phrase in which a negation cancels it
WORD_TAIL = 64  # of a longer word, the characters a negation is looked for in
MAX_PATTERN_CHARS = 500

_NEGATION = re.compile(
    r"\b(?:not|never|no\s+longer|hardly|barely|scarcely|almost|nearly|cannot|nor|neither|without|far\s+from|"
    r"\w+n't|(?:is|are|was|were|do|does|did|ca|could|wo|would|should|has|have|had)nt)\b",
    re.IGNORECASE,
)
# where a sentence or clause ends: a negation before it does not reach the phrase
_CLAUSE_END = re.compile(r"[.!?;:,()\n\u2014]|\bbut\b|\bhowever\b", re.IGNORECASE)
# where a sentence ends: the rest of one that ends in "?" ("Is it done? No.") asserts nothing
_SENTENCE_END = re.compile(r"[.!?;:\n]")
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
        return bounded(pattern, STOP_FLAGS)
    except ValueError as exc:
        raise ValueError(f"stop pattern: {exc}") from None


def checked_patterns(patterns: list[str]) -> list[str]:
    """``patterns`` unchanged once each compiles as a bounded stop pattern and all of them
    together stay within one pattern's bound (a field validator's check; a bad one raises
    ValueError naming it)."""
    if len(patterns) > MAX_PATTERNS:
        raise ValueError(f"{len(patterns)} stop patterns; the limit is {MAX_PATTERNS}")
    for pattern in patterns:
        compile_pattern(pattern)
    try:
        bounded_together(patterns, STOP_FLAGS, what="stop patterns")
    except ValueError as exc:
        raise ValueError(f"stop patterns: {exc}") from None
    return patterns


def negated(before: str) -> bool:
    """Whether the text just before a phrase negates it (same clause, a few words back)."""
    clause = _CLAUSE_END.split(before.replace("\u2019", "'"))[-1]
    window = " ".join(_WORD.findall(clause)[-NEGATION_WINDOW:])
    return _NEGATION.search(window) is not None


class _Reading:
    """A text's clause ends, words and sentence ends, found once, so that each phrase match
    looks up its clause and its last few words instead of reading the text before it again
    (which made matching quadratic: ``'not done ' * 4000`` took seconds). Agrees with
    :func:`negated` on the text before a match, except that a negation more than
    :data:`WORD_TAIL` characters from the end of one long run of letters and apostrophes
    (``not'xxxx...``) is not seen."""

    def __init__(self, text: str) -> None:
        self.text = text.replace("\u2019", "'")
        self.clause_ends = [m.end() for m in _CLAUSE_END.finditer(self.text)]
        words = list(_WORD.finditer(self.text))
        self.word_starts = [m.start() for m in words]
        self.word_ends = [m.end() for m in words]
        self.sentence_ends = [m.start() for m in _SENTENCE_END.finditer(self.text)]

    def negated(self, start: int) -> bool:
        """:func:`negated` of the text before ``start``, without reading it all."""
        i = bisect_right(self.clause_ends, start)
        clause = self.clause_ends[i - 1] if i else 0  # where the phrase's clause starts
        last = bisect_left(self.word_starts, start)
        words = []
        for i in range(max(0, last - NEGATION_WINDOW), last):
            begin, end = max(self.word_starts[i], clause), min(self.word_ends[i], start)
            if end > begin:
                words.append(_tail(self.text, begin, end))
        return _NEGATION.search(" ".join(words)) is not None

    def question(self, end: int) -> bool:
        """Whether the sentence from ``end`` on is a question: the next sentence end is "?"."""
        i = bisect_left(self.sentence_ends, end)
        return i < len(self.sentence_ends) and self.text[self.sentence_ends[i]] == "?"


def _tail(text: str, begin: int, end: int) -> str:
    """The word ``text[begin:end]``, or of a longer one its last WORD_TAIL characters after
    a character of the same kind as the one before them (so a match at the cut is found, or
    not, as in the whole word)."""
    if end - begin <= WORD_TAIL:
        return text[begin:end]
    cut = end - WORD_TAIL
    return ("'" if text[cut - 1] == "'" else "x") + text[cut:end]


def phrase_hit(text: str, phrase: str, reading: _Reading | None = None) -> bool:
    """Whether ``text`` says ``phrase``: a whole-word match that no negation precedes.
    Linear in the text: its clauses and words are read once (``reading``, shared by the
    phrases of one text)."""
    if not phrase.strip():
        return False
    for m in phrase_pattern(phrase).finditer(text):
        reading = reading or _Reading(text)
        if not reading.negated(m.start()) and not reading.question(m.end()):
            return True
    return False


def stop_hit(text: str, contains: Iterable[str] = (), matches: Iterable[str | re.Pattern[str]] = ()) -> str | None:
    """The first stop rule ``text`` meets, described (``contains 'done'``); None: none."""
    reading = _Reading(text) if contains else None
    for phrase in contains:
        if phrase_hit(text, phrase, reading):
            return f"contains {phrase!r}"
    for pattern in matches:
        rx = pattern if isinstance(pattern, re.Pattern) else compile_pattern(pattern)
        if rx.search(text[:MAX_REGEX_CHARS]):  # a bounded pattern's bound holds up to this length
            return f"matches {rx.pattern!r}"
    return None
