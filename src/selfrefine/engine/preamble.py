"""A draft's preamble about itself: a first line that announces the answer instead of being
part of it ("Sure! Here is the limerick about a cat that includes the word "moonlight":",
"Here is the improved reply:"), which the engine drops from every draft before the task
parses it (:func:`without_preamble`).

Conservative: only a whole first line, only when something follows it, and only one that
ends with a colon and announces what follows in one of two ways:

- it opens with an assent ("Sure", "Certainly", "Of course", "Absolutely", "Okay", "Great",
  "Alright", "Gladly", "Yes") and goes on with "here is / here's / here are / below is /
  below are / the following"; or
- it opens with "Here is / Here's / Here are / Below is / Below are / The following is /
  are" and names the reply itself: a revised one ("the improved reply", "an updated
  version"), the reply by name (reply, answer, response, draft, version, rewrite, revision),
  or the request ("as requested", "you asked for", "for you").

Anything else stays, a first line ending with a colon that is content included
("Ingredients:", "Here are the steps to follow:", "Dear Sam:", "Here's the thing:", "def
f():", "Day 1:"): a line about the topic is content, a line about the reply is not.
"""

from __future__ import annotations

import re

_ASSENT = r"(?:sure(?:\s+thing)?|certainly|of\s+course|absolutely|okay|ok|great|alright|all\s+right|gladly|yes)"
_HERE = r"(?:here\s+is|here['’]s|here\s+are|below\s+is|below\s+are|the\s+following\s+(?:is|are))"
_REVISED = r"(?:improved|revised|updated|rewritten|corrected|edited|final|new|requested|polished|refined)"
_REPLY = r"(?:reply|answer|response|draft|version|rewrite|revision)"
_MARKUP = r"[ \t*_#>]*"  # markdown around the line: **Here is…:**, ### Here is…:
_ASSENTED = re.compile(rf"{_ASSENT}\b[\s!.,;:\-–—]*(?:[^\n]*?\s)?{_HERE}\b[^\n]*", re.I)
_ABOUT_ITSELF = re.compile(
    rf"{_HERE}\b[^\n]*?\b(?:{_REVISED}\s+(?:\w+\s+){{0,2}}?{_REPLY}|{_REPLY}|as\s+requested|"
    r"you\s+(?:asked|requested)\s+for|for\s+you)\b[^\n]*",
    re.I,
)
_LINE = re.compile(rf"\A{_MARKUP}(?P<line>[^\n]*?):{_MARKUP}\r?\n")


def preamble(text: str) -> str | None:
    """The first line of ``text`` when it is a preamble about the reply (see the module), else
    None. Never the whole text: a preamble is followed by what it announces."""
    head = _LINE.match(text.lstrip())
    if head is None:
        return None
    line, rest = head.group("line").strip(), text.lstrip()[head.end() :]
    if not rest.strip() or not (_ASSENTED.fullmatch(line) or _ABOUT_ITSELF.fullmatch(line)):
        return None
    return head.group(0)


def without_preamble(text: str) -> str:
    """``text`` without a first line that announces it (:func:`preamble`); otherwise as it is."""
    found = preamble(text)
    return text if found is None else text.lstrip()[len(found) :].lstrip("\n")
