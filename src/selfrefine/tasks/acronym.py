"""Acronym generation: a paper title in, one short acronym out.

The feedback rates five aspects 1-5 with a short reason (total /25), as in the paper; the
loop runs a fixed number of rounds (4) and ``select="best"`` can use the total. Feedback is
constrained to a small JSON object where the backend supports it; a plain text form
("Ease of pronunciation: 4/5 - easy to say") is parsed too, and partial feedback with at
least three aspects is accepted.

The metric is code, never the model's own ratings (see :func:`acronym_checks`):

* letters: the acronym's characters are aligned, in order, to the title's characters;
  a character matched to a word initial scores 1, to another character of the title 0.5,
  unmatched 0 (best alignment by dynamic programming); the score is the mean. Word
  initials are the first character of each alphanumeric run and capitals inside a
  camel-case word ("PixelCNN" → P, C). The check *passes* when every character matched.
* pronounceable (0 or 1): a phonotactic heuristic on the letters: at least one vowel
  (a e i o u, and y after the first letter), no run of more than 3 consonants, at most
  2 consonants before the first vowel unless they form a common English onset (str, spr,
  scr, spl, thr, shr, chr, sch, phr), and no letter three times in a row.
* length (0 or 1): 2 to 10 letters or digits.

``metric()`` is the mean of the three (0..1); the title is all it needs.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, Field

from ..core.errors import DraftParseError, FeedbackParseError, InputError
from ..core.records import Feedback, Verification
from ..task.task import LOOP_BEST, Capabilities, Task, TaskDefaults, system_message
from .parsing import json_aspect_ratings

# key → label. Alphabetical, like every other key in the feedback JSON: the embedded
# backend builds its grammar from the schema with sorted keys, so the few-shot example
# shows keys in the order the model is forced to write them.
ASPECTS: dict[str, str] = {
    "ease_of_pronunciation": "Ease of pronunciation",
    "ease_of_spelling": "Ease of spelling",
    "positive_connotation": "Positive connotation",
    "relation_to_title": "Relation to title",
    "well_known": "Well-known",
}
MIN_ASPECTS = 3
MIN_LENGTH, MAX_LENGTH = 2, 10
VOWELS = set("aeiou")
ONSETS3 = frozenset({"str", "spr", "scr", "spl", "thr", "shr", "chr", "sch", "phr"})

FEEDBACK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        key: {
            "type": "object",
            "properties": {
                # the reason comes first, so the score follows from it;
                # its cap keeps a tiny model from running past max_tokens and cutting the JSON
                "reason": {"type": "string", "maxLength": 30},
                "score": {"type": "integer", "enum": [1, 2, 3, 4, 5]},
            },
            "required": ["reason", "score"],
        }
        for key in ASPECTS
    },
    "required": list(ASPECTS),
}

# aspect names as a model is likely to write them (JSON keys or text labels)
_ASPECT_WORDS: dict[str, str] = {
    "ease_of_pronunciation": r"(?:ease[\s_]+of[\s_]+)?(?:pronunc|pronounc)\w*",
    "ease_of_spelling": r"(?:ease[\s_]+of[\s_]+)?spell\w*",
    "relation_to_title": r"relat\w*(?:[\s_]+to[\s_]+(?:the[\s_]+)?title)?",
    "positive_connotation": r"positiv\w*(?:[\s_]+connotation)?|connotation",
    "well_known": r"well[\s_-]*known",
}
_ASPECT_RX = {key: re.compile(words, re.I) for key, words in _ASPECT_WORDS.items()}
# in free text a label must open a line, a list item or a JSON key, so that "related" in
# another aspect's reason is not taken for the "relation to title" label
_LABEL_RX = {
    key: re.compile(r'(?:^|(?<=[{,.;"]))[ \t\-*\u2022"\d.)#]*(?:' + words + r")", re.I | re.M)
    for key, words in _ASPECT_WORDS.items()
}
_TOTAL = re.compile(r"^\W*total", re.I | re.M)
_OUT_OF = re.compile(r"(?<![\d/])(?<!\d\.)([1-5])\s*(?:/|out\s+of)\s*5(?!\d|\.\d)", re.I)
_SCORE = re.compile(r"(?<![\d/])(?<!\d\.)([1-5])(?!\d|\.\d|\s*/\s*\d)")
_TOKEN = re.compile(r"[A-Za-z0-9]+")
_LABEL = re.compile(r"^\s*(?:better\s+|improved\s+|new\s+)?acronym\s*:\s*", re.I)


class AcronymChecks(BaseModel):
    """The three code checks of one acronym (see the module docstring)."""

    acronym: str
    letters_score: float = 0.0  # 1 per letter matched to a word initial, 0.5 elsewhere
    letters_ok: bool = False  # every letter found in the title, in order
    unmatched: list[str] = Field(default_factory=list)
    pronounceable: bool = False
    pronounce_problems: list[str] = Field(default_factory=list)
    length: int = 0
    length_ok: bool = False

    @property
    def score(self) -> float:
        return round((self.letters_score + self.pronounceable + self.length_ok) / 3, 4)

    @property
    def passed(self) -> bool:
        return self.letters_ok and self.pronounceable and self.length_ok


# --- the checks ---------------------------------------------------------------------------


def title_chars(title: str) -> list[tuple[str, bool]]:
    """(lower-cased character, is a word initial) for each letter/digit of the title."""
    out: list[tuple[str, bool]] = []
    prev = ""
    for ch in title:
        if ch.isalnum() and ch.isascii():
            initial = not (prev.isalnum() and prev.isascii()) or (ch.isupper() and prev.islower())
            out.append((ch.lower(), initial))
        prev = ch
    return out


def align_letters(acronym: str, title: str) -> tuple[float, list[str]]:
    """Best in-order alignment of the acronym's characters to the title's.

    Returns (mean weight per character, unmatched characters); weights 1 for a word
    initial, 0.5 for any other title character, 0 unmatched (a weighted LCS). Among
    alignments of equal weight the one matching more characters wins."""
    letters = [c.lower() for c in acronym if c.isalnum()]
    chars = title_chars(title)
    if not letters:
        return 0.0, []
    n, m = len(letters), len(chars)
    # best[i][j] = (half-points, matches) for letters[i:] against chars[j:]; integers, so
    # comparisons are exact (an initial is 2 half-points, another character 1)
    best = [[(0, 0)] * (m + 1) for _ in range(n + 1)]

    def take(i: int, j: int) -> tuple[int, int] | None:
        ch, initial = chars[j]
        if ch != letters[i]:
            return None
        points, matches = best[i + 1][j + 1]
        return points + (2 if initial else 1), matches + 1

    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            best[i][j] = max(best[i + 1][j], best[i][j + 1], take(i, j) or (0, 0))
    unmatched, i, j = [], 0, 0
    while i < n:  # walk an optimal path to name the characters that found no match
        if j < m and take(i, j) == best[i][j]:
            i, j = i + 1, j + 1
        elif j < m and best[i][j + 1] == best[i][j]:
            j += 1
        else:
            unmatched.append(letters[i])
            i += 1
    return round(best[0][0][0] / (2 * n), 4), unmatched


def pronounce_problems(acronym: str) -> list[str]:
    """Why an acronym is hard to say as a word; empty when the heuristic finds nothing."""
    word = "".join(c for c in acronym.lower() if c.isalpha())
    if not word:
        return ["it has no letters"]
    vowel = [c in VOWELS or (c == "y" and i > 0) for i, c in enumerate(word)]
    problems = []
    if not any(vowel):
        return ["it has no vowel"]
    runs = re.findall(r"c+", "".join("v" if v else "c" for v in vowel))
    if any(len(r) > 3 for r in runs):
        problems.append("more than 3 consonants in a row")
    lead = vowel.index(True)
    if lead > 3 or (lead == 3 and word[:3] not in ONSETS3):
        problems.append(f"it starts with {lead} consonants ({word[:lead]})")
    if re.search(r"(.)\1\1", word):
        problems.append("a letter three times in a row")
    return problems


def acronym_checks(title: str, acronym: str) -> AcronymChecks:
    """All three checks of an acronym for a title, with details for the verifier."""
    chars = [c for c in acronym if c.isalnum()]
    score, unmatched = align_letters(acronym, title)
    problems = pronounce_problems(acronym)
    return AcronymChecks(
        acronym=acronym,
        letters_score=score,
        letters_ok=bool(chars) and not unmatched,
        unmatched=unmatched,
        pronounceable=not problems,
        pronounce_problems=problems,
        length=len(chars),
        length_ok=MIN_LENGTH <= len(chars) <= MAX_LENGTH,
    )


def extract_acronym(text: str) -> str:
    """The acronym from a reply: on the first non-empty line, the first all-capitals word
    of 2+ characters, else the first word; punctuation removed ("B.E.R.T." → "BERT")."""
    line = next((ln for ln in text.splitlines() if ln.strip()), "")
    line = _LABEL.sub("", line)
    words = ["".join(_TOKEN.findall(w)) for w in line.split()]
    words = [w for w in words if w]
    caps = [w for w in words if len(w) >= 2 and w.upper() == w and any(c.isalpha() for c in w)]
    return (caps or words or [""])[0]


# --- the task -----------------------------------------------------------------------------


class Acronym(Task):
    name = "acronym"
    description = "Acronym generation: a short, pronounceable acronym for a paper title"
    prompt_dir = "acronym"
    metric_name = "letters-from-title, pronounceable, length checks (code) + judge preference"
    judge_criteria = "Which acronym is better for the title: easier to pronounce and spell, clearly related to the title, positive and memorable?"
    stop_description = "none: fixed rounds (4)"
    max_input_chars = 400
    defaults = TaskDefaults(
        system=system_message(
            "an expert at naming research projects. Each message asks you to create, rate or improve an acronym for a paper title"
        ),
        generic_feedback="Improve the acronym.",
        temperature={"generate": 0.7, "feedback": 0.7, "refine": 0.7},  # the paper's text-task default
        max_tokens={"generate": 16, "feedback": 160, "refine": 16},
        max_iterations=4,
        select="best",  # the paper returns the best-scored acronym
        feedback_schema=FEEDBACK_SCHEMA,
        stop_sequences={
            "generate": ["\n", "Title:"],
            "feedback": ["\nTitle:", "\nAcronym:"],
            "refine": ["\n", "Title:"],
        },
        best=LOOP_BEST,  # measured on this task (docs/frontier.md)
    )
    capabilities = Capabilities(verifier=True)
    judge_aspects = ("memorable",)
    one_line_input = True  # `run` refuses several lines: eval --data FILE takes one input a line

    def prepare_input(self, text: str) -> str:
        title = " ".join(super().prepare_input(text).split())  # one line: it sits in "Title: …"
        if not _TOKEN.search(title):
            raise InputError("an acronym needs a title with letters, e.g. 'Generative Adversarial Networks'")
        return title

    def parse_draft(self, text: str) -> str:
        acronym = extract_acronym(text)
        if not acronym:
            raise DraftParseError("the model returned no acronym")
        return acronym

    def parse_feedback(self, text: str, *, input: str, draft: str) -> Feedback:
        raw = text.strip()
        if not raw:
            raise FeedbackParseError("the model returned empty feedback")
        parsed = _parse_json(raw)
        if parsed is None:
            parsed = _parse_text(raw)
        parsed = {key: parsed[key] for key in ASPECTS if key in parsed}  # canonical order
        if len(parsed) < MIN_ASPECTS:
            found = ", ".join(parsed) or "none"
            raise FeedbackParseError(
                f"feedback rates {len(parsed)} of 5 aspects (found: {found}); at least {MIN_ASPECTS} are needed"
            )
        scores = {key: float(score) for key, (score, _) in parsed.items()}
        fields: dict[str, str | list[str]] = {"aspects_parsed": list(parsed)}
        fields.update({f"{key}_reason": reason for key, (_, reason) in parsed.items() if reason})
        # partial feedback is scaled to /25 so totals stay comparable for "best" selection
        total = round(sum(scores.values()) * len(ASPECTS) / len(scores), 2)
        return Feedback(text=raw, scores=scores, total=total, done=None, fields=fields)

    def metric(self, input: str, output: str, reference: Any = None) -> float:
        # re-extract: a draft that failed to parse reaches here as the model's raw reply
        return acronym_checks(input, extract_acronym(output) or output).score

    def verify(self, input: str, draft: str) -> Verification:
        checks = acronym_checks(input, extract_acronym(draft) or draft)
        failed = []
        if not checks.letters_ok:
            missing = ", ".join(c.upper() for c in checks.unmatched) or "all"
            failed.append(f"Letters not found in the title in order: {missing}.")
        if not checks.pronounceable:
            failed.append("Hard to pronounce: " + "; ".join(checks.pronounce_problems) + ".")
        if not checks.length_ok:
            failed.append(f"Length {checks.length}: use {MIN_LENGTH} to {MAX_LENGTH} letters.")
        text = "\n".join(failed) or "All checks pass: letters from the title, pronounceable, good length."
        return Verification(text=text, passed=checks.passed, score=checks.score)


def _parse_json(raw: str) -> dict[str, tuple[int, str]] | None:
    """Aspect → (score, reason) from a JSON object; None when the text has no JSON."""
    parsed = json_aspect_ratings(raw, _aspect_key, _score)
    # none or cut off: the text parser may still find 3+ "aspect: N" pairs
    return None if parsed is None else {key: (int(score), reason) for key, (score, reason) in parsed[0].items()}


def _parse_text(raw: str) -> dict[str, tuple[int, str]]:
    """Aspect → (score, reason) from 'Label: … N/5 …' text; the first 1-5 after a label."""
    hits = sorted((m.start(), m.end(), key) for key, rx in _LABEL_RX.items() for m in rx.finditer(raw))
    out: dict[str, tuple[int, str]] = {}
    for n, (_, end, key) in enumerate(hits):
        if key in out:
            continue
        stop = hits[n + 1][0] if n + 1 < len(hits) else len(raw)
        segment = _TOTAL.split(raw[end:stop].split("\n\n")[0])[0]
        match = _OUT_OF.search(segment) or _SCORE.search(segment)
        if match is None:
            continue
        reason = (segment[: match.start()] + segment[match.end() :]).strip(" \t\n:-*,.()")
        out[key] = (int(match.group(1)), " ".join(reason.split())[:120])
    return out


def _aspect_key(name: str) -> str | None:
    norm = re.sub(r"[\s-]+", "_", name.strip().lower())
    if norm in ASPECTS:
        return norm
    return next((key for key, rx in _ASPECT_RX.items() if rx.search(name)), None)


def _score(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)) and float(value).is_integer():
        number = int(value)
    else:
        match = _OUT_OF.search(str(value)) or _SCORE.search(str(value))
        if match is None:
            return None
        number = int(match.group(1))
    return number if 1 <= number <= 5 else None
