"""Whether a commongen output reads as one scene, or lists its concepts one after another.

On CommonGen-Hard's 20-30 concepts a small model often gives up on a scene and lists: a line
or a numbered item per concept, a run of short comma-separated fragments that each carry one
concept ("a mower falls on a playground, surfers fix their surfboards, ingredients are added
to a recipe, the chainsaw locks the fence, ..."), the bare concepts after "using" ("the
catcher, screen, cigarette, punch, lasso, gum, ..."), or many short sentences. Coverage counts
words, so such a list scores as well as a scene (docs/judges.md: none of 20 returned sentences
read as a scene). This module says, by code and deterministically, which of those forms an
output has; the task turns it into a failed check with its repair (tasks/commongen.py).

The definition, precisely (``scene_problem``):

- **layout**: a line that starts with a list marker ("-", "*", "•", "1.", "2)", "a.") or
  three or more non-empty lines;
- **sentences**: more than :data:`MAX_SENTENCES` sentences (a sentence ends at ".", "!" or "?"
  before a space and a capital letter, a digit or a quote; "Mr." and the like end none);
- **a chain**: one sentence cut into more than :data:`MAX_PIECES` pieces by commas,
  semicolons, colons or spaced dashes (clause after clause, "..., the roof is repaired,
  snowballs are thrown, a cellphone is repaired, ...");
- **a run of fragments**: within one sentence, :data:`MIN_RUN` or more consecutive such pieces
  that are short (at most :data:`FRAGMENT_WORDS` words, a leading "and", "or", "while", ...
  not counted) and each use a concept (a list of six concepts or more, bare or in short clauses).

The thresholds are set on human text, not on the model's outputs, with room to spare: of
6,219 human sentences (the Yelp reviews, GSM8K questions and FED turns of the dev sets, run-ons
and all, each with its own content words as concepts) none has more than 8 pieces, and one
has a run of six short fragments (a review's list of eight things bought); the only others
flagged are 10 list items ("1) ...", "- ..."). Natural sentences list three to five short
items ("paint, metal, and steel"; "woke up, showered, dressed and left"). A sentence without
a list marker, of at most nine pieces and no such run, is never flagged, however long, so a
good one-sentence output passes (``benchmarks/scene_check.py`` counts both sides).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

MAX_SENTENCES = 2  # "one or two sentences": the task asks for one; a second one is allowed
MAX_PIECES = 9  # more pieces than this in one sentence make a chain (human sentences: at most 8)
MIN_RUN = 6  # consecutive short concept fragments that make a list
FRAGMENT_WORDS = 6  # at most this many words is a short fragment ("a toothbrush dries the skin")
# runs are sought in a sentence's first this many characters: each short fragment is matched
# against every concept (a hostile 70,000-character draft of "a dog, a dog, ..." took 3.2 s
# whole; an output of one or two sentences shows its list well before this)
RUN_CHARS = 5_000

# "- x", "* x", "• x", "1. x", "2) x", "a) x" (a capital with a period is an initial: "A. Smith")
_MARKER = re.compile(r"^\s*(?:[-*•·–—]|\(?\d{1,3}[.)]|\(?[a-z][.)]|\(?[A-Z]\))\s+\S")
_WORDS = re.compile(r"[A-Za-z0-9]+(?:['’][A-Za-z]+)?")
# a sentence ends at . ! ? (and any closing quote or bracket) before a space and what starts one
_SENTENCE_END = re.compile(r"""(?<=[.!?])["'’”)\]]*\s+(?=["'‘“(\[]?[A-Z0-9])""")
_ABBREVIATIONS = frozenset("mr mrs ms dr st jr sr prof mt vs etc e.g i.e no fig approx a.m p.m u.s inc ltd co".split())
_SEPARATORS = re.compile(r"[,;:]|\s[–—-]\s")
_LEADING = frozenset("and or but while as then so nor plus also with".split())


@dataclass(frozen=True)
class SceneProblem:
    """How an output fails to read as one scene: ``kind`` is "layout", "sentences", "chain"
    or "fragments"; ``text`` says what was found, in words."""

    kind: str
    text: str


def sentences(text: str) -> list[str]:
    """The text's sentences (those with a word in them), split where one ends (see the
    module's definition); an abbreviation's period ends none."""
    pieces: list[str] = []
    start = 0
    for end in _SENTENCE_END.finditer(text):
        before = text[start : end.start()].rstrip("\"'’”)]").rstrip(".!?")
        last = before.split()[-1].lower() if before.split() else ""
        if last.rstrip(".") in _ABBREVIATIONS or last in _ABBREVIATIONS:
            continue
        pieces.append(text[start : end.start()])
        start = end.end()
    pieces.append(text[start:])
    return [p.strip() for p in pieces if _WORDS.search(p)]


def fragments(sentence: str) -> list[list[str]]:
    """A sentence's pieces between commas, semicolons, colons and dashes, as their words, a
    leading coordinator ("and", "while", ...) dropped."""
    pieces = []
    for piece in _SEPARATORS.split(sentence):
        words = _WORDS.findall(piece)
        while words and words[0].lower() in _LEADING:
            words = words[1:]
        pieces.append(words)
    return pieces


def longest_run(sentence: str, uses_concept: Callable[[str], bool]) -> list[str]:
    """The longest run of consecutive short fragments of a sentence that each use a concept."""
    best: list[str] = []
    run: list[str] = []
    for words in fragments(sentence):
        if 0 < len(words) <= FRAGMENT_WORDS and uses_concept(" ".join(words)):
            run.append(" ".join(words))
            best = run if len(run) > len(best) else best
        else:
            run = []
    return best


def scene_problem(text: str, uses_concept: Callable[[str], bool]) -> SceneProblem | None:
    """How ``text`` fails to read as one scene, or None when it reads as one (one or two
    sentences, no list). ``uses_concept(fragment)``: whether a fragment uses one of the
    concepts (the task's lemma matcher)."""
    lines = [line for line in text.splitlines() if line.strip()]
    marked = [line for line in lines if _MARKER.match(line)]
    if marked:
        return SceneProblem("layout", f"it is written as list items ({_cut(marked[0].strip())!r})")
    if len(lines) >= 3:
        return SceneProblem("layout", f"it is written on {len(lines)} lines, not as one or two sentences")
    said = [s for line in lines for s in sentences(line)]
    if len(said) > MAX_SENTENCES:
        return SceneProblem("sentences", f"it has {len(said)} sentences, not one or two")
    for sentence in said:
        run = longest_run(sentence[:RUN_CHARS], uses_concept)
        if len(run) >= MIN_RUN:
            shown = ", ".join(run[:3])
            return SceneProblem(
                "fragments", f"it lists {len(run)} short fragments one after another ({_cut(shown)}, ...)"
            )
        pieces = [words for words in fragments(sentence) if words]
        if len(pieces) > MAX_PIECES:
            return SceneProblem(
                "chain", f"it chains {len(pieces)} clauses and phrases one after another in one sentence"
            )
    return None


def _cut(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
