"""Checks that count: units of a draft, words in capitals, a word's or a letter's occurrences,
and the first word of the nth paragraph."""

from __future__ import annotations

import re
from typing import ClassVar, Literal

from pydantic import Field, model_validator

from ...core.bans import TokenBan
from ...core.wording import plural
from . import measures
from .base import MAX_CHECK_CHARS, Instruction, Relation, amount, holds, quoted
from .grounding import UNIT_WORDS, says, says_number
from .sentences import sentences

Unit = Literal[
    "words", "sentences", "paragraphs", "lines", "bullets", "sections", "highlights", "placeholders", "characters"
]

# each unit: its noun (singular, plural) and how it is told apart, said in a finding
_NOUNS: dict[str, tuple[str, str, str]] = {
    "words": ("word", "words", ""),
    "sentences": ("sentence", "sentences", ""),
    "paragraphs": ("paragraph", "paragraphs", " separated by blank lines"),
    "lines": ("line", "lines", ""),
    "bullets": ("bullet point", "bullet points", " (lines starting with * or -)"),
    "sections": ("section", "sections", ""),
    "highlights": ("highlighted section", "highlighted sections", " (*like this*)"),
    "placeholders": ("placeholder", "placeholders", " in square brackets (like [name])"),
    "characters": ("character", "characters", " (letters, spaces and punctuation)"),
}


class Count(Instruction):
    """How many words, sentences, paragraphs, lines, bullet points, sections, highlighted spans,
    placeholders or characters a draft has. ``marker`` names what separates paragraphs (a divider such as
    ``***``; blank lines when empty) or what begins each section (``Section`` for "Section 1")."""

    type: Literal["count"] = "count"
    covers_groups: ClassVar[frozenset[str]] = frozenset({"count"})
    example: ClassVar[str] = (
        '{"type": "count", "unit": "words|sentences|paragraphs|lines|bullets|sections|highlights|placeholders", "relation": "at least|at most|exactly", "n": 3}'
    )
    example_at = (1, 0)
    unit: Unit
    relation: Relation
    n: int = Field(ge=0, le=100_000)
    marker: str = Field(default="", max_length=40)

    def covers(self) -> frozenset[str]:
        """Bullets, sections and highlights are said in a format's words too ("in markdown")."""
        return self.covers_groups | ({"format"} if self.unit in ("bullets", "sections", "highlights") else set())

    @model_validator(mode="after")
    def _marked(self) -> Count:
        if self.marker.strip() and self.unit not in ("paragraphs", "sections"):
            raise ValueError(f"marker applies to paragraphs and sections, not {self.unit}")
        return self

    def _measure(self, text: str) -> tuple[int, str | None]:
        """The count, and a finding that stands regardless (an empty paragraph between dividers)."""
        if self.unit == "sections":
            return measures.sections(text, self.marker.strip() or "Section"), None
        if self.unit == "paragraphs" and self.marker.strip():
            n, empty = measures.divided_paragraphs(text, self.marker.strip())
            return n, f"has an empty paragraph between two {self.marker.strip()} dividers" if empty else None
        if self.unit == "paragraphs":
            return len(measures.paragraphs(text)), None
        if self.unit == "sentences":
            return sentences(text), None
        return getattr(measures, self.unit)(text), None

    def _problem(self, text: str) -> str | None:
        n, standing = self._measure(text)
        if standing:
            return standing
        return None if holds(n, self.relation, self.n) else f"needs {self.describe()}, has {n}"

    def grounded(self, text: str) -> bool:
        return any(w in text for w in UNIT_WORDS[self.unit])

    def describe(self) -> str:
        one, many, how = _NOUNS[self.unit]
        marker = self.marker.strip()
        if self.unit == "sections":
            how = f" marked {quoted((marker or 'Section') + ' 1')}, {quoted((marker or 'Section') + ' 2')}, …"
        elif self.unit == "paragraphs" and marker:
            how = f" separated by the divider {marker}"
        return amount(self.relation, self.n, one, many) + how

    def extension(self, text: str) -> str | None:
        """Too few words or sentences, where more may follow: the count still missing (for "at
        least", a tenth more words as margin: a continuation that restates a little still reaches it)."""
        if self.unit not in ("words", "sentences") or self.relation == "at most" or len(text) > MAX_CHECK_CHARS:
            return None
        n, _ = self._measure(text)
        if n >= self.n:
            return None
        one, many, _ = _NOUNS[self.unit]
        missing = self.n - n
        more = missing + (-(-missing // 10) if self.unit == "words" and self.relation == "at least" else 0)
        return f"at least {plural(more, 'more ' + one, 'more ' + many)}"

    def _repair(self, text: str) -> str:
        n, standing = self._measure(text)
        if standing:
            return f"Remove the empty paragraph between two {self.marker.strip()} dividers; change nothing else."
        one, many, _ = _NOUNS[self.unit]
        asked = self.describe()
        has = f"It has {plural(n, one, many)}"
        if self.unit in ("words", "sentences", "characters"):
            if n > self.n:
                return f"{has}; shorten it to {asked}; keep the meaning."
            if self.relation == "at least":
                return f"{has}; lengthen it to {asked}: add detail, keep what is there."
            return f"{has}; rewrite it with {asked}; keep the meaning."
        return f"{has}; change it to have {asked}; keep the content."


class ParagraphStart(Instruction):
    """The ``nth`` paragraph (separated by blank lines) begins with ``word``."""

    type: Literal["paragraph_start"] = "paragraph_start"
    covers_groups: ClassVar[frozenset[str]] = frozenset({"startend", "words", "count"})
    example: ClassVar[str] = '{"type": "paragraph_start", "nth": 2, "word": "However"}'
    example_at = (5, 2)
    nth: int = Field(ge=1, le=1000)
    word: str = Field(min_length=1, max_length=60, pattern=r"\S")

    def _problem(self, text: str) -> str | None:
        found = measures.paragraphs(text)
        if len(found) < self.nth:
            return f"{self.describe()}; it has {plural(len(found), 'paragraph')} (separated by blank lines)"
        first = measures.first_word(found[self.nth - 1])
        if first == self.word.strip().lower():
            return None
        return f"{self.describe()}; it starts with {quoted(first)}"

    def grounded(self, text: str) -> bool:
        return says_number(text, self.nth) and says(text, self.word) and "paragraph" in text

    def describe(self) -> str:
        return f"paragraph {self.nth} must start with the word {quoted(self.word.strip())}"

    def _repair(self, text: str) -> str:
        start = f"Start paragraph {self.nth} with the word {quoted(self.word.strip())}"
        found = len(measures.paragraphs(text))
        if found < self.nth:
            return f"{start}: write at least {self.nth} paragraphs separated by blank lines (it has {found})."
        return f"{start}; change nothing else."


class CapitalWords(Instruction):
    """How many words are written all in capitals ("NASA")."""

    type: Literal["capital_words"] = "capital_words"
    covers_groups: ClassVar[frozenset[str]] = frozenset({"case", "count"})
    example: ClassVar[str] = '{"type": "capital_words", "relation": "at most", "n": 4}'
    example_at = (4, 0)
    kind_words = ("capital", "upper", "caps")
    relation: Relation
    n: int = Field(ge=0, le=100_000)

    def _problem(self, text: str) -> str | None:
        found = measures.capital_words(text)
        if holds(len(found), self.relation, self.n):
            return None
        shown = f" ({', '.join(quoted(w, 30) for w in found[:3])}{', …' if len(found) > 3 else ''})" if found else ""
        return f"needs {self.describe()}, has {len(found)}{shown}"

    def describe(self) -> str:
        return amount(self.relation, self.n, "word", "words") + " in all capital letters"

    def _repair(self, text: str) -> str:
        n = len(measures.capital_words(text))
        has = f"It has {plural(n, 'word')} in all capital letters"
        if n > self.n:
            return f"{has}; write the rest in normal case, keeping {self.describe()}."
        return f"{has}; write {self.describe()} (for emphasis, or names such as NASA)."


class WordFrequency(Instruction):
    """How often a word (or phrase) occurs, in any case, also inside longer words."""

    type: Literal["word_frequency"] = "word_frequency"
    covers_groups: ClassVar[frozenset[str]] = frozenset({"words", "count"})
    example: ClassVar[str] = '{"type": "word_frequency", "word": "data", "relation": "at least", "n": 2}'
    example_at = (3, 0)
    word: str = Field(min_length=1, max_length=60, pattern=r"\S")
    relation: Relation
    n: int = Field(ge=0, le=100_000)

    def _problem(self, text: str) -> str | None:
        n = text.lower().count(self.word.strip().lower())
        return None if holds(n, self.relation, self.n) else f"needs {self.describe()}, has {n}"

    def grounded(self, text: str) -> bool:
        return says(text, self.word)

    def describe(self) -> str:
        return f"the word {quoted(self.word.strip())} {amount(self.relation, self.n, 'time')}"

    def _repair(self, text: str) -> str:
        n = text.lower().count(self.word.strip().lower())
        word = quoted(self.word.strip())
        if n > self.n:
            return f"The word {word} occurs {plural(n, 'time')}; use it {amount(self.relation, self.n, 'time')}: replace the rest with other words."
        return f"The word {word} occurs {plural(n, 'time')}; use it {amount(self.relation, self.n, 'time')}, where it fits."


class LetterFrequency(Instruction):
    """How often a letter (or any one character: "#") occurs, in any case."""

    type: Literal["letter_frequency"] = "letter_frequency"
    covers_groups: ClassVar[frozenset[str]] = frozenset({"words", "count"})
    example: ClassVar[str] = '{"type": "letter_frequency", "letter": "z", "relation": "at least", "n": 5}'
    example_at = (3, 1)
    letter: str = Field(min_length=1, max_length=1, pattern=r"\S")
    relation: Relation
    n: int = Field(ge=0, le=1_000_000)

    def _problem(self, text: str) -> str | None:
        n = text.lower().count(self.letter.lower())
        return None if holds(n, self.relation, self.n) else f"needs {self.describe()}, has {n}"

    def grounded(self, text: str) -> bool:
        return re.search(rf"\b{re.escape(self.letter.lower())}\b", text) is not None and "letter" in text

    def describe(self) -> str:
        return f"the letter {quoted(self.letter.lower())} {amount(self.relation, self.n, 'time')}"

    def ban(self) -> TokenBan | None:
        if self.n == 0 and self.relation != "at least":  # "no letter e": counted in any case
            return TokenBan(chars="".join(dict.fromkeys(self.letter.lower() + self.letter.upper())))
        return None

    def _repair(self, text: str) -> str:
        n = text.lower().count(self.letter.lower())
        letter = quoted(self.letter.lower())
        want = amount(self.relation, self.n, "time")
        if n > self.n:
            return f"The letter {letter} occurs {plural(n, 'time')}; use words without it so it occurs {want}."
        return f"The letter {letter} occurs {plural(n, 'time')}; use words with it so it occurs {want}."
