"""Counting what a draft contains: words, sentences, paragraphs, bullets, sections, highlighted
spans, placeholders, lines, words in capitals.

Each measure follows the definition IFEval's official verifiers use (Zhou et al. 2023), so a
check agrees with the benchmark's verdict (benchmarks/ifeval_checks.py measures how often),
and each runs in time linear in the draft: no pattern here can backtrack over more than one
run of characters, and none comes from the check's author.
"""

from __future__ import annotations

import re
import unicodedata

_WORD = re.compile(r"\w+")
_HIGHLIGHT = re.compile(r"\*[^\n*]*\*")  # *span*: a failing start scans one run up to a newline
_BOLD = re.compile(r"\*\*[^\n*]*\*\*")


def words(text: str) -> int:
    """Runs of letters, digits and underscores ("don't" is two words, as IFEval counts them);
    a letter's combining marks belong to its word (as in NLTK, which matches with ``regex``)."""
    if text.isascii():
        return sum(1 for _ in _WORD.finditer(text))
    count, inside = 0, False
    for char in text:
        word = char.isalnum() or char == "_" or char in "\u200c\u200d"
        if char.isalnum() or not word:
            category = unicodedata.category(char)
            word = (word and category != "No") or category in ("Mn", "Mc", "Me", "Pc")
        count += word and not inside
        inside = word
    return count


def characters(text: str) -> int:
    """Every character, spaces and punctuation included (what "at most 280 characters" counts)."""
    return len(text)


def lines(text: str) -> int:
    """Lines with something on them."""
    return sum(1 for line in text.splitlines() if line.strip())


def bullets(text: str) -> int:
    """Markdown bullet points: lines starting with ``*`` (not ``**``) or ``-``."""
    rows = text.split("\n")
    count = 0
    for i, row in enumerate(rows):
        line = row.lstrip()
        if line.startswith("-"):
            count += 1
        elif line.startswith("*") and line[1:2] != "*" and (len(line) > 1 or i < len(rows) - 1):
            count += 1
    return count


def highlights(text: str) -> int:
    """Spans highlighted in markdown: ``*like this*`` or ``**like this**``, not empty."""
    single = sum(1 for m in _HIGHLIGHT.finditer(text) if m.group().strip("*").strip())
    double = sum(1 for m in _BOLD.finditer(text) if m.group()[2:-2].strip())
    return single + double


def placeholders(text: str) -> int:
    """Placeholders in square brackets, ``[like this]``, on one line each."""
    count = 0
    for line in text.split("\n"):
        start = line.find("[")
        while start >= 0:
            end = line.find("]", start + 1)
            if end < 0:
                break
            count += 1
            start = line.find("[", end + 1)
    return count


def sections(text: str, marker: str) -> int:
    """Section headings: ``marker`` followed by a number ("SECTION 1", "Day 2"), case as given."""
    return sum(1 for _ in re.finditer(re.escape(marker) + r"\s?\d+", text))


def divided_paragraphs(text: str, divider: str) -> tuple[int, bool]:
    """Paragraphs separated by ``divider`` (e.g. the markdown divider ``***``), and whether an
    empty one stands between two dividers."""
    parts = re.split(r"\s?" + re.escape(divider) + r"\s?", text)
    empty = [i for i, part in enumerate(parts) if not part.strip()]
    inner = any(0 < i < len(parts) - 1 for i in empty)
    return len(parts) - len(empty), inner


def paragraphs(text: str) -> list[str]:
    """Paragraphs separated by an empty line (two line breaks), without the empty ones."""
    return [part.strip() for part in text.split("\n\n") if part.strip()]


def first_word(paragraph: str) -> str:
    """A paragraph's first word, lowercase, without leading quotes or trailing punctuation."""
    word = paragraph.split()[0].lstrip("'").lstrip('"') if paragraph.split() else ""
    for i, letter in enumerate(word):
        if letter in ".,?!'\"":
            return word[:i].lower()
    return word.lower()


# where NLTK's word tokenizer splits a word off: spaces, quotes, brackets, ;@#$%&?!*`, a comma
# or colon before a non-digit, an ellipsis, a double dash (one class or literal each: linear)
_SPLIT = re.compile(r"[\s\"\[\](){}<>;@#$%&?!*`\u2018\u2019\u201c\u201d]+|[,:](?!\d)|\.\.\.|--")
_CONTRACTIONS = ("n't", "'s", "'m", "'d", "'ll", "'re", "'ve")


def capital_words(text: str) -> list[str]:
    """Words written all in capitals ("NASA", "I"), as NLTK's word tokenizer splits them
    ("DON'T" is "DO" and "N'T"; "P(X" is "P" and "X")."""
    found = []
    for token in _SPLIT.split(text):
        lower = token.lower()
        end = next((e for e in _CONTRACTIONS if lower.endswith(e) and len(token) > len(e)), "")
        parts = (token[: len(token) - len(end)], token[len(token) - len(end) :]) if end else (token,)
        found += [p.rstrip(".") or p for p in parts if p.isupper()]  # NLTK splits a final period off
    return found
