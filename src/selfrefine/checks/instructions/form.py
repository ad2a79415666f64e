"""Checks of a draft's form: case, how it starts and ends, quotes, JSON, a title, a
postscript, two responses, one of given answers, its language."""

from __future__ import annotations

import json
import re
from typing import Annotated, ClassVar, Literal

from pydantic import Field, StringConstraints

from ...core.bans import TokenBan
from .base import Instruction, quoted
from .grounding import says
from .language import LANGUAGES, LanguageCode, detect

Phrase = Field(min_length=1, max_length=2000, pattern=r"\S")


class Case(Instruction):
    """Every letter lowercase (``lower``) or every letter capital (``upper``)."""

    type: Literal["case"] = "case"
    covers_groups: ClassVar[frozenset[str]] = frozenset({"case"})
    example: ClassVar[str] = '{"type": "case", "letters": "lower|upper"}'
    example_at = (4, 1)
    letters: Literal["lower", "upper"]

    def _problem(self, text: str) -> str | None:
        if self.letters == "lower" and text.islower() or self.letters == "upper" and text.isupper():
            return None
        wrong = [c for c in text if (c.isupper() if self.letters == "lower" else c.islower()) or c.istitle()]
        if not wrong:
            return f"{self.describe()}, and has no letters"
        kind = "capital" if self.letters == "lower" else "lowercase"
        first = next(w for w in text.split() if any(c in w for c in wrong[:1]))
        return (
            f"{self.describe()}: has {len(wrong)} {kind} letter{'s' * (len(wrong) != 1)} (first in {quoted(first, 40)})"
        )

    def grounded(self, text: str) -> bool:
        return any(w in text for w in (("lower",) if self.letters == "lower" else ("upper", "capital", "caps")))

    def describe(self) -> str:
        return "use only lowercase letters" if self.letters == "lower" else "use only capital letters"

    def ban(self) -> TokenBan:
        return TokenBan(letters="upper" if self.letters == "lower" else "lower")

    def _repair(self, text: str) -> str:
        letters = "lowercase" if self.letters == "lower" else "capital"
        return f"Rewrite the text entirely in {letters} letters; change nothing else."


class StartsWith(Instruction):
    """The draft begins with ``phrase``, in any case (leading spaces aside)."""

    type: Literal["starts_with"] = "starts_with"
    covers_groups: ClassVar[frozenset[str]] = frozenset({"startend"})
    example: ClassVar[str] = '{"type": "starts_with", "phrase": "Dear team"}'
    example_at = (5, 0)
    phrase: str = Phrase

    def _problem(self, text: str) -> str | None:
        return None if text.strip().lower().startswith(self.phrase.strip().lower()) else self.describe()

    def grounded(self, text: str) -> bool:
        return says(text, self.phrase)

    def describe(self) -> str:
        return f"start with {quoted(self.phrase.strip(), 300)} word for word, with nothing before it"

    def _repair(self, text: str) -> str:
        return f"Begin the text with {quoted(self.phrase.strip(), 300)} word for word, with nothing before it; keep the rest."


class EndsWith(Instruction):
    """The draft ends with ``phrase``, in any case, with nothing after it (a closing quote and
    spaces aside)."""

    type: Literal["ends_with"] = "ends_with"
    covers_groups: ClassVar[frozenset[str]] = frozenset({"startend"})
    example: ClassVar[str] = '{"type": "ends_with", "phrase": "See you soon."}'
    example_at = (5, 1)
    phrase: str = Phrase

    def _problem(self, text: str) -> str | None:
        return None if text.strip().strip('"').lower().endswith(self.phrase.strip().lower()) else self.describe()

    def grounded(self, text: str) -> bool:
        return says(text, self.phrase)

    def describe(self) -> str:
        return f"end with the phrase {quoted(self.phrase.strip(), 300)}, with nothing after it"

    def _repair(self, text: str) -> str:
        phrase = quoted(self.phrase.strip(), 300)
        return f"End the text with {phrase} word for word, on the last line, with nothing after it; keep the rest."


class Quoted(Instruction):
    """The whole draft is wrapped in double quotes."""

    type: Literal["quoted"] = "quoted"
    covers_groups: ClassVar[frozenset[str]] = frozenset({"format", "startend"})
    example: ClassVar[str] = '{"type": "quoted"}'
    example_at = (6, 0)
    kind_words = ("quot",)

    def _problem(self, text: str) -> str | None:
        text = text.strip()
        return None if len(text) > 1 and text[0] == '"' and text[-1] == '"' else self.describe()

    def describe(self) -> str:
        return 'wrap the whole response in double quotes ("…")'

    def _repair(self, text: str) -> str:
        return (
            'Wrap the whole text in double quotes: put " at its very start and " at its very end; change nothing else.'
        )


class Json(Instruction):
    """The whole draft is JSON (inside a ```json block or not)."""

    type: Literal["json"] = "json"
    covers_groups: ClassVar[frozenset[str]] = frozenset({"format", "startend"})
    example: ClassVar[str] = '{"type": "json"}'
    example_at = (6, 1)
    kind_words = ("json",)

    def _problem(self, text: str) -> str | None:
        body = text.strip()
        for fence in ("```json", "```Json", "```JSON", "```"):
            body = body.removeprefix(fence)
        body = body.removesuffix("```").strip()
        try:
            json.loads(body)
        except json.JSONDecodeError as exc:
            return f"{self.describe()}: {exc.msg} at line {exc.lineno} column {exc.colno}"
        except (ValueError, RecursionError):
            return f"{self.describe()}: it is nested too deeply"
        return None

    def describe(self) -> str:
        return "make the whole response valid JSON (a ```json block is fine), with nothing around it"

    def _repair(self, text: str) -> str:
        problem = self._problem(text) or ""
        error = problem.split(": ", 1)[1] if ": " in problem else "it does not parse"
        return f"Make the whole text valid JSON with nothing around it (now: {error}); keep its content."


class Title(Instruction):
    """A title in double angle brackets, ``<<like this>>``, on one line."""

    type: Literal["title"] = "title"
    covers_groups: ClassVar[frozenset[str]] = frozenset({"format"})
    example: ClassVar[str] = '{"type": "title"}'
    example_at = (6, 2)
    kind_words = ("title", "<<")

    def _problem(self, text: str) -> str | None:
        for line in text.split("\n"):
            start, end = line.find("<<"), line.rfind(">>")
            if start >= 0 and end >= start + 3 and line[start : end + 2].lstrip("<").rstrip(">").strip():
                return None
        return self.describe()

    def describe(self) -> str:
        return "add a title in double angle brackets, like <<Title>>"

    def _repair(self, text: str) -> str:
        return "Add a title in double angle brackets on the first line, like <<Title>>; change nothing else."


class Postscript(Instruction):
    """A postscript starting with ``marker`` (``P.S.``, ``P.P.S``), in any case."""

    type: Literal["postscript"] = "postscript"
    covers_groups: ClassVar[frozenset[str]] = frozenset({"format", "startend"})
    example: ClassVar[str] = '{"type": "postscript", "marker": "P.S."}'
    example_at = (6, 3)
    kind_words = ("p.s", "postscript")
    marker: str = Field(default="P.S.", min_length=1, max_length=20, pattern=r"\S")

    def _problem(self, text: str) -> str | None:
        pieces = [re.escape(c) + (r"\s?" if c == "." else "") for c in self.marker.strip().lower()]
        pattern = "".join(pieces).removesuffix(r"\s?")
        return None if re.search(pattern, text.lower()) else self.describe()  # literal pieces: linear

    def describe(self) -> str:
        return f"end with a postscript starting with {self.marker.strip()}"

    def _repair(self, text: str) -> str:
        return (
            f"Add a postscript at the end: a last paragraph starting with {self.marker.strip()}; change nothing else."
        )


class TwoResponses(Instruction):
    """Two different responses, separated by six asterisks (``******``)."""

    type: Literal["two_responses"] = "two_responses"
    covers_groups: ClassVar[frozenset[str]] = frozenset({"format", "count"})
    example: ClassVar[str] = '{"type": "two_responses"}'
    example_at = (6, 4)
    kind_words = ("two", "2", "******")

    def _problem(self, text: str) -> str | None:
        parts = text.split("******")
        if any(not p.strip() for p in parts[1:-1]):
            return f"{self.describe()}: has an empty response between two ****** separators"
        found = [p.strip() for p in parts if p.strip()]
        if len(found) != 2:
            return f"{self.describe()}: has {len(found)}"
        return None if found[0] != found[1] else f"{self.describe()}: the two are the same"

    def describe(self) -> str:
        return "give exactly 2 different responses separated by ******"

    def _repair(self, text: str) -> str:
        return "Give exactly 2 different responses, separated by a line of six asterisks: ******."


class OneOf(Instruction):
    """The draft contains one of the given answers ("My answer is yes.")."""

    type: Literal["one_of"] = "one_of"
    covers_groups: ClassVar[frozenset[str]] = frozenset({"format"})
    example: ClassVar[str] = '{"type": "one_of", "options": ["Yes.", "No."]}'
    example_at = (7, 0)
    options: list[Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=r"\S")]] = Field(
        min_length=1, max_length=10
    )

    def _problem(self, text: str) -> str | None:
        return None if any(o in text.strip() for o in self.options) else self.describe()

    def grounded(self, text: str) -> bool:
        return all(says(text, o) for o in self.options)

    def describe(self) -> str:
        return "answer with one of: " + ", ".join(quoted(o) for o in self.options)

    def _repair(self, text: str) -> str:
        return "Answer with exactly one of these, word for word: " + ", ".join(quoted(o) for o in self.options) + "."


class Language(Instruction):
    """The draft is written in the language ``code`` (ISO 639-1, as ``langdetect`` names it:
    ``en``, ``de``, ``zh-cn``). A draft with nothing to tell its language by passes."""

    type: Literal["language"] = "language"
    covers_groups: ClassVar[frozenset[str]] = frozenset({"language"})
    example: ClassVar[str] = '{"type": "language", "code": "de"}'
    example_at = (7, 1)
    code: LanguageCode

    def _problem(self, text: str) -> str | None:
        found = detect(text)
        if found is None or found == self.code:
            return None
        return f"{self.describe()}; it reads as {LANGUAGES.get(found, found)}"

    def grounded(self, text: str) -> bool:
        return LANGUAGES[self.code].lower().split()[0] in text

    def describe(self) -> str:
        return f"write the whole response in {LANGUAGES[self.code]}"

    def _repair(self, text: str) -> str:
        return f"Rewrite the whole text in {LANGUAGES[self.code]}, and nothing else; keep the meaning."
