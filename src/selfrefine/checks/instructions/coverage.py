"""Which of a request's instruction-like sentences code's phrase reading leaves uncovered:
the model's derivation call is asked for only where one is (issue 45: the call cost ~920
tokens per request, 3.4× one step's reply, and on most requests the code had read all of it).

A sentence is instruction-like when it says something in a checkable instruction's wording
(a number beside a unit, a quoted word to use or avoid, letter case, commas, how the reply
starts or ends, a format, a language): each such wording belongs to a *group*. The request's
code-read checks account for the groups their kinds name (each kind's ``covers``); a group
the wording has and no check covers leaves its sentence uncovered. The test is per group
over the whole request (a rule such as "repeat the request" reads across sentences), so a
second instruction of a group the code already read is not asked for again: the price of
skipping the call (measured on IFEval's report rows, docs/ifeval.md).

Linear-time patterns over a bounded text, no nested repeats (the request is untrusted).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import NamedTuple

from .base import Instruction
from .language import LANGUAGES

MAX_READ = 6_000  # as phrases.MAX_READ: instructions come early
_NUM = (
    r"(?:\d{1,5}|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|forty|fifty|"
    r"hundred|a single|once|twice|at least|at most|exactly|less than|more than|fewer than|no more than|"
    r"no less than|under|over)"
)
_UNIT = (
    r"(?:words?|sentences?|paragraphs?|lines?|bullet\w*|sections?|highlight\w*|italic\w*|placeholders?|"
    r"characters?|times)"
)
_LANGS = "|".join(re.escape(name.split(" (")[0].lower()) for name in LANGUAGES.values())
# group -> the wording that names an instruction of it
GROUPS: dict[str, re.Pattern[str]] = {
    "count": re.compile(rf"\b{_NUM}\b[^.\n]{{0,30}}?\b{_UNIT}\b|\bwords? long\b"),
    "words": re.compile(
        r"keywords?|\bthe (?:words?|terms?|phrases?)\s{0,3}[\"'\u201c]|"
        r"\b(?:include|mention|use|using|contain|say)\w{0,4}\s{1,3}[\"'\u201c]|\bletter\s{1,3}[\"']?[a-z]\b"
    ),
    "case": re.compile(r"capital|\bupper ?case|\blower ?case|\ball caps"),
    "chars": re.compile(r"\bcommas?\b"),
    "startend": re.compile(
        r"\b(?:start|begin|end|finish)\w{0,3}\s{1,3}(?:your|the|it|with|each|every)\b|"
        r"\bwrap\w{0,4}\s{1,3}(?:your|the)\s{1,3}(?:entire|whole)|\brepeat\w{0,3}\s{1,3}(?:the|this|my)\b|"
        r"\b(?:first|last) word\b"
    ),
    "format": re.compile(
        r"\bjson\b|quotation|double quotes|<<|\btitle\b|p\.s\.|postscript|markdown|\*\*\*|separated by|"
        r"\bmy answer is\b|\boptions\b|\bsection [x\d]|\bbullet(?:ed)? (?:list|points?)|\bnumbered list"
    ),
    "language": re.compile(rf"\blanguage\b|\bin (?:the )?(?:{_LANGS})\b"),
}
_SENTENCE = re.compile(r"(?<=[.?!:;])\s+|\n+")


class Uncovered(NamedTuple):
    """An instruction-like sentence, and the groups of its wording no code-read check covers."""

    sentence: str
    groups: tuple[str, ...]


def wording_groups(sentence: str) -> set[str]:
    """The groups whose instruction wording ``sentence`` uses."""
    low = sentence.lower()
    return {group for group, pattern in GROUPS.items() if pattern.search(low)}


def uncovered(request: str, read: Iterable[Instruction]) -> list[Uncovered]:
    """The request's instruction-like sentences with a group no check in ``read`` (the
    checks code read from it) covers, in order; empty: the model has nothing to add."""
    covered: set[str] = set()
    for check in read:
        covered |= check.covers()
    found = []
    for sentence in _SENTENCE.split(request[:MAX_READ]):
        left = wording_groups(sentence) - covered
        if sentence.strip() and left:
            found.append(Uncovered(sentence.strip(), tuple(sorted(left))))
    return found
