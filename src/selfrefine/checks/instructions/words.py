"""Checks of what a draft must or must not contain: words, characters, regexes."""

from __future__ import annotations

import re
from typing import Annotated, ClassVar, Literal

from pydantic import Field, PrivateAttr, StringConstraints, field_validator

from ...core.bans import TokenBan
from ...core.saferegex import MAX_REGEX_CHARS, bounded, shown
from ...core.wording import plural
from .base import Instruction, quoted
from .grounding import asked_word, forbidden_char

REGEX_FLAGS = re.MULTILINE  # a regex check's: ^ and $ match at each line
Word = Annotated[str, StringConstraints(min_length=1, max_length=60, pattern=r"\S")]  # a word or a short phrase


class Keywords(Instruction):
    """Each word (or phrase) occurs, in any case; inside longer words too ("cat" in "cats")
    unless ``whole``."""

    type: Literal["keywords"] = "keywords"
    covers_groups: ClassVar[frozenset[str]] = frozenset({"words"})
    example: ClassVar[str] = '{"type": "keywords", "words": ["ocean"]}'
    example_at = (2, 0)
    words: list[Word] = Field(min_length=1, max_length=20)
    whole: bool = False

    def _problem(self, text: str) -> str | None:
        lower = text.lower()
        missing = [w for w in self.words if not (_has_word(text, w) if self.whole else w.strip().lower() in lower)]
        if not missing:
            return None
        return f"needs the {'word' if len(missing) == 1 else 'words'} {', '.join(quoted(w) for w in missing)}"

    def grounded(self, text: str) -> bool:
        return all(asked_word(text, w, forbidden=False) for w in self.words)

    def describe(self) -> str:
        return f"include the {'word' if len(self.words) == 1 else 'words'} {', '.join(quoted(w) for w in self.words)}"

    def _repair(self, text: str) -> str:
        lower = text.lower()
        missing = [w for w in self.words if not (_has_word(text, w) if self.whole else w.strip().lower() in lower)]
        missing = missing or list(self.words)
        one = len(missing) == 1
        return f"Add the {'word' if one else 'words'} {_listed(missing)} where {'it fits' if one else 'they fit'}; keep the rest."


class ForbiddenWords(Instruction):
    """None of the words occurs as a whole word, in any case."""

    type: Literal["forbidden_words"] = "forbidden_words"
    covers_groups: ClassVar[frozenset[str]] = frozenset({"words"})
    example: ClassVar[str] = '{"type": "forbidden_words", "words": ["very"]}'
    example_at = (2, 1)
    words: list[Word] = Field(min_length=1, max_length=20)

    def _problem(self, text: str) -> str | None:
        found = [(w, _count_word(text, w)) for w in self.words]
        found = [f"{quoted(w)} ({plural(n, 'time')})" for w, n in found if n]
        return f"remove the {'word' if len(found) == 1 else 'words'} {', '.join(found)}" if found else None

    def grounded(self, text: str) -> bool:
        return all(asked_word(text, w, forbidden=True) for w in self.words)

    def describe(self) -> str:
        return (
            f"do not use the {'word' if len(self.words) == 1 else 'words'} {', '.join(quoted(w) for w in self.words)}"
        )

    def _repair(self, text: str) -> str:
        found = [w for w in self.words if _count_word(text, w)] or self.words
        return f"Remove the {'word' if len(found) == 1 else 'words'} {_listed(found)}: use other words in their place."


_CHAR_NAMES = {",": "comma", "!": "exclamation mark", "?": "question mark", ";": "semicolon", ":": "colon",
               ".": "period", "-": "hyphen", "*": "asterisk", "#": "hash sign", '"': "double quote",
               "'": "apostrophe", "—": "em dash", "–": "en dash", "&": "ampersand"}  # fmt: skip


class ForbiddenChars(Instruction):
    """None of the characters occurs (``,`` for "do not use any commas")."""

    type: Literal["forbidden_chars"] = "forbidden_chars"
    covers_groups: ClassVar[frozenset[str]] = frozenset({"chars"})
    example: ClassVar[str] = '{"type": "forbidden_chars", "chars": ","}'
    example_at = (4, 2)
    chars: str = Field(min_length=1, max_length=10, pattern=r"\S")

    def _problem(self, text: str) -> str | None:
        found = [(c, text.count(c)) for c in dict.fromkeys(self.chars) if not c.isspace()]
        found = [f"the {plural(n, *_char_name(c))}" for c, n in found if n]
        return f"remove {' and '.join(found)}" if found else None

    def grounded(self, text: str) -> bool:
        return all(forbidden_char(text, c) for c in self.chars)

    def ban(self) -> TokenBan:
        return TokenBan(chars="".join(c for c in dict.fromkeys(self.chars) if not c.isspace()))

    def describe(self) -> str:
        return "use no " + " and no ".join(_char_name(c)[1] for c in dict.fromkeys(self.chars) if not c.isspace())

    def _repair(self, text: str) -> str:
        found = [c for c in dict.fromkeys(self.chars) if not c.isspace() and c in text] or list(self.chars.strip())
        names = " and every ".join(_char_name(c)[0] for c in found)
        instead = ": use periods or 'and' instead" if found == [","] else ""
        return f"Remove every {names}{instead}; change nothing else."


def _char_name(char: str) -> tuple[str, str]:
    name = _CHAR_NAMES.get(char)
    return (name, name + "s") if name else (f"{char!r} character", f"{char!r} characters")


class Regex(Instruction):
    """A regular expression must (or must not) match somewhere; ``^`` and ``$`` match at each
    line, ``(?i)`` ignores case. A pattern whose backtracking could run long is refused when
    the check is made, and a draft longer than ``MAX_REGEX_CHARS`` fails it unsearched
    (:mod:`selfrefine.core.saferegex`). ``says``: the rule in words, which the finding gives
    (the pattern itself is never shown to the model). For task files' ``must_match``; not
    derived from a request."""

    type: Literal["regex"] = "regex"
    from_request: ClassVar[bool] = False  # a model's pattern would search each draft past the run's regex bound
    pattern: str = Field(min_length=1, max_length=500)
    present: bool = True
    says: str = Field(default="", max_length=300)
    # which check a finding names ("check must_match 2"): set for a task file's mapping, whose
    # regexes are known by their key and place (from_checks); not part of the record's data
    _where: str = PrivateAttr(default="")

    @field_validator("pattern")
    @classmethod
    def _bounded(cls, pattern: str) -> str:
        bounded(pattern, REGEX_FLAGS)  # a ValueError naming the pattern when it is unsafe or invalid
        return pattern

    def _problem(self, text: str) -> str | None:
        if len(text) > MAX_REGEX_CHARS:
            return f"is {len(text):,} characters; the regex checks read at most {MAX_REGEX_CHARS:,}"
        hit = bounded(self.pattern, REGEX_FLAGS).search(text)
        where = self._where or ("check must_match" if self.present else "check must_not_match")
        if self.present:
            return None if hit else regex_finding(" ".join(self.says.split()), True, where)
        return None if hit is None else regex_finding(" ".join(self.says.split()), False, where, hit.group(0))

    def grounded(self, text: str) -> bool:
        return False

    def describe(self) -> str:
        if self.says.strip():
            return " ".join(self.says.split())
        return f"{'match' if self.present else 'do not match'} {shown(self.pattern)}"

    def _repair(self, text: str) -> str:
        """In words, as the finding: the rule where the check states one, else the text found;
        never the pattern (the model cannot act on a regex)."""
        says = " ".join(self.says.split())
        if self.present:
            rule = f"this rule: {says}" if says else "the form the task asks for"
            return f"Rewrite the text so that it follows {rule}; change nothing else."
        hit = bounded(self.pattern, REGEX_FLAGS).search(text[:MAX_REGEX_CHARS])
        found = hit.group(0) if hit is not None and hit.group(0).strip() else ""
        cut = found if len(found) <= 40 else found[:39] + "…"
        remove = f"Remove {cut!r}" if cut else "Remove what the task does not allow"
        return f"{remove}{f' (rule: {says})' if says else ''}; change nothing else."


def _listed(words: list[str]) -> str:
    """'a', 'b' and 'c': words quoted and listed as a sentence says them."""
    said = [quoted(w) for w in words]
    return said[0] if len(said) == 1 else ", ".join(said[:-1]) + " and " + said[-1]


def regex_finding(says: str, present: bool, where: str, found: str | None = None) -> str:
    """A failed regex check in words: its rule where the check states one, else what kind of
    check failed; the pattern itself is never shown (the model cannot act on it)."""
    cut = None if found is None else found if len(found) <= 40 else found[:39] + "…"
    seen = f" (found {cut!r})" if cut is not None else ""
    if says:
        return f"{'does not follow' if present else 'breaks'} the rule: {says}{seen}"
    return f"{'does not have the required form' if present else 'has a form that is not allowed'} ({where}){seen}"


def _word_pattern(word: str) -> re.Pattern[str]:
    # a literal between non-word characters: linear, whatever the word holds
    return re.compile(rf"(?<!\w){re.escape(word.strip())}(?!\w)", re.IGNORECASE)


def _has_word(text: str, word: str) -> bool:
    return _word_pattern(word).search(text) is not None


def _count_word(text: str, word: str) -> int:
    return sum(1 for _ in _word_pattern(word).finditer(text))
