"""A draft's preamble about itself: a first line that only announces the answer instead of
being part of it ("Sure! Here is the limerick about a cat that includes the word "moonlight":",
"Here is the improved reply:"), which the engine drops from every draft before the task
parses it (:func:`without_preamble`).

Conservative: only a whole first line, only when something follows it, only one that ends
with a colon, says nothing but the announcement, and announces what follows in one of two ways:

- it opens with a plain assent ("Sure", "Certainly", "Of course", "Absolutely", "Okay",
  "Great", "Alright", "Gladly"), at most a courtesy after it ("I'd be happy to help"), then
  "here is / here's / here are / below is / below are / the following"; or
- it opens with "Here is / Here's / Here are / Below is / Below are / The following is /
  are" (or "Yes, here is …") and names the reply itself: a revised one ("the improved
  reply", "an updated version"), the reply by name (reply, answer, response, draft,
  version, rewrite, revision), or the request ("as requested", "you asked for", "for you").

A line that says more than that is content, and stays: an answer ("Yes, here are the
reasons:", "Certainly not! Here is why:", "Okay, the answer is 42, and here are the
steps:"), what it announces said in the line ("Here is why the answer is yes:", "Sure!
Here is the answer: Paris. Here is why:"), a heading or a line about the topic
("Ingredients:", "Here are the steps to follow:", "Dear Sam:", "Here's the thing:", "def
f():", "Day 1:"). And a line a check asks for stays whatever it says: a ``starts_with``
check ("start your reply with 'Here is my answer:'") or a check of the first paragraph's
first word that the draft passes with the line and fails without it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..checks.instructions import Instruction, ParagraphStart, StartsWith

_ASSENT = r"(?:sure(?:\s+thing)?|certainly|of\s+course|absolutely|okay|ok|great|alright|all\s+right|gladly)"
_COURTESY = (
    r"(?:i(?:['’]d|\s+would)\s+be\s+(?:happy|glad)\s+to(?:\s+help)?|happy\s+to\s+help|no\s+problem|with\s+pleasure)"
)
_SEP = r"[\s!.,;:\-–—]*"
_HERE = r"(?:here\s+is|here['’]s|here\s+are|below\s+is|below\s+are|the\s+following\s+(?:is|are))"
_REVISED = r"(?:improved|revised|updated|rewritten|corrected|edited|final|new|requested|polished|refined)"
_REPLY = r"(?:reply|answer|response|draft|version|rewrite|revision)"
_MARKUP = r"[ \t*_#>]*"  # markdown around the line: **Here is…:**, ### Here is…:
# the opening: a plain assent (not "certainly not") and a courtesy, or "yes", then "here is"
_OPENING = re.compile(
    rf"(?:(?P<assent>{_ASSENT})(?![\s,!.]*not\b){_SEP}(?:{_COURTESY}{_SEP})?|(?P<yes>yes){_SEP})?{_HERE}\s+(?P<what>.+)",
    re.I,
)
# what the line announces names the reply: "the improved reply", "my answer", "a revised version of …"
_NAMES_REPLY = re.compile(
    rf"(?:(?:the|my|a|an|your|this|our)\s+)?(?:{_REVISED}\s+)?(?:[\w'’-]+\s+){{0,2}}?{_REPLY}s?\b"
    r"|.*\b(?:as\s+requested|you\s+(?:asked|requested)\s+for|for\s+you)\b",
    re.I,
)
# what says more than an announcement: another clause or sentence, a stated fact, a question word
_SAYS_MORE = re.compile(
    r"[.!?:;]|\b(?:is|are|was|were|isn['’]t|aren['’]t|means|because)\b|\A(?:why|how|what|when|where|who|whether|which)\b",
    re.I,
)
_LINE = re.compile(rf"\A{_MARKUP}(?P<line>[^\n]*?):{_MARKUP}\r?\n")


def preamble(text: str, checks: Sequence[Instruction] = ()) -> str | None:
    """The first line of ``text`` when it only announces the reply (see the module) and no
    check in ``checks`` asks for it, else None. Never the whole text: a preamble is followed
    by what it announces."""
    head = _LINE.match(text.lstrip())
    if head is None:
        return None
    line, rest = head.group("line").strip(), text.lstrip()[head.end() :]
    if not rest.strip() or not _announces(line) or _asked_for(text, rest, checks):
        return None
    return head.group(0)


def _announces(line: str) -> bool:
    """Whether ``line`` (without its colon) says nothing but that the reply follows."""
    opening = _OPENING.fullmatch(line)
    if opening is None or _SAYS_MORE.search(opening.group("what")):
        return False
    return opening.group("assent") is not None or _NAMES_REPLY.match(opening.group("what")) is not None


def _asked_for(text: str, rest: str, checks: Sequence[Instruction]) -> bool:
    """Whether a check of how the reply starts passes with the line and fails without it."""
    starts = [c for c in checks if isinstance(c, StartsWith) or isinstance(c, ParagraphStart) and c.nth == 1]
    return any(c.check(text).passed and not c.check(rest).passed for c in starts)


def without_preamble(text: str, checks: Sequence[Instruction] = ()) -> str:
    """``text`` without a first line that only announces it (:func:`preamble`, which keeps a
    line one of ``checks`` asks for); otherwise as it is."""
    found = preamble(text, checks)
    return text if found is None else text.lstrip()[len(found) :].lstrip("\n")
