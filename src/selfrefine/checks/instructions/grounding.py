"""Whether a request states a check: the words each kind's ``grounded`` looks for.

A check derived from a request is kept only where the request's text holds its numbers and
words and a word naming what it checks (:func:`selfrefine.engine.derivation.grounded`); each
kind says which in its own ``grounded``, with these helpers. ``text`` is the request,
lower-cased.
"""

from __future__ import annotations

import re

NUMBER_WORDS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty"
).split()
UNIT_WORDS = {
    "words": ("word",),
    "sentences": ("sentence",),
    "paragraphs": ("paragraph",),
    "lines": ("line",),
    "bullets": ("bullet", "point", "list", "item"),
    "sections": ("section", "part"),
    "highlights": ("highlight", "*"),
    "placeholders": ("placeholder", "["),
    "characters": ("character", "char"),
}
# what a request says when it asks for words in the reply, or forbids them (a topic's own
# words are no instruction: "a paragraph on the US elections" asks for no keyword)
ASKS_FOR_WORDS = ("include", "keyword", "mention", "use the word", "the words", "the word", "contain")
FORBIDS_WORDS = ("not use", "not include", "avoid", "without", "never", "exclude", "forbid", "don't use", "not contain")


def names(text: str, word: str) -> bool:
    """Whether ``text`` names ``word``: as a word of its own where it is one ("caps", not "capsule")."""
    if not word.isalnum():
        return word in text
    return re.search(rf"\b{re.escape(word)}", text) is not None


def asked_word(text: str, word: str, *, forbidden: bool) -> bool:
    """Whether the request asks for ``word`` in the reply (or forbids it): quoted, or said
    within a few words after a cue that asks (forbids) — a topic's own words are no instruction."""
    said = " ".join(text.split())
    word = " ".join(word.lower().split())
    for m in re.finditer(re.escape(word), said):
        before = said[max(0, m.start() - 60) : m.start()]
        quoted = m.start() > 0 and said[m.start() - 1] in "\"'“‘"
        cue = any(c in before for c in (FORBIDS_WORDS if forbidden else ASKS_FOR_WORDS))
        denied = any(c in before for c in FORBIDS_WORDS)
        if (cue or quoted) and denied == forbidden:
            return True
    return False


def forbidden_char(text: str, char: str) -> bool:
    """Whether the request forbids ``char`` (a comma by name): said after a negation."""
    names = ("comma", ",") if char == "," else (char,)
    for name in names:
        for m in re.finditer(re.escape(name), text):
            if any(c in text[max(0, m.start() - 60) : m.start()] for c in (*FORBIDS_WORDS, "no ", "free of")):
                return True
    return False


def says(text: str, phrase: str) -> bool:
    """Whether ``text`` (lower-cased) holds ``phrase``, whitespace and case aside."""
    return " ".join(phrase.lower().split()) in " ".join(text.split())


def says_number(text: str, n: int) -> bool:
    """Whether ``text`` states the number ``n`` (as digits, or as a word up to twenty)."""
    if re.search(rf"(?<![\d.]){n}(?!\d)", text.replace(",", "")):
        return True
    return n < len(NUMBER_WORDS) and re.search(rf"\b{NUMBER_WORDS[n]}\b", text) is not None
