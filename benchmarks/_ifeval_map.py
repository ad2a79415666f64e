"""IFEval's instruction ids and kwargs as our checks, for MEASUREMENT only.

``checks_for("length_constraints:number_words", {"relation": "at least", "num_words": 300})``
is ``[Count(unit="words", relation="at least", n=300)]``: the checks that state what the
official verifier of that instruction checks, so that benchmarks/ifeval_checks.py can compare
verdicts on the same texts. Nothing in src/ may use this table: a request's checks are derived
from the request alone, never from IFEval's instruction lists.
"""

from __future__ import annotations

from typing import Any

from selfrefine.checks.instructions import Instruction, parse_checks

CONSTRAINED_RESPONSES = ["My answer is yes.", "My answer is no.", "My answer is maybe."]


def _relation(relation: str, n: int) -> dict[str, Any]:
    """IFEval's "less than N" is our "at most N-1"; "at least N" is the same."""
    if relation == "less than":
        return {"relation": "at most", "n": n - 1}
    return {"relation": relation, "n": n}


def _count(unit: str, relation: str, n: int, marker: str = "") -> dict[str, Any]:
    return {"type": "count", "unit": unit, **_relation(relation, n), "marker": marker}


def _records(instruction_id: str, kw: dict[str, Any]) -> list[dict[str, Any]]:
    kind = instruction_id.split(":", 1)[1]
    table: dict[str, Any] = {
        "no_comma": lambda: [{"type": "forbidden_chars", "chars": ","}],
        "number_words": lambda: [_count("words", kw["relation"], kw["num_words"])],
        "number_sentences": lambda: [_count("sentences", kw["relation"], kw["num_sentences"])],
        "number_paragraphs": lambda: [_count("paragraphs", "exactly", kw["num_paragraphs"], "***")],
        "nth_paragraph_first_word": lambda: [
            _count("paragraphs", "exactly", kw["num_paragraphs"]),
            {"type": "paragraph_start", "nth": kw["nth_paragraph"], "word": kw["first_word"]},
        ],
        "forbidden_words": lambda: [{"type": "forbidden_words", "words": kw["forbidden_words"]}],
        "existence": lambda: [{"type": "keywords", "words": kw["keywords"]}],
        "frequency": lambda: [
            {"type": "word_frequency", "word": kw["keyword"], **_relation(kw["relation"], kw["frequency"])}
        ],
        "letter_frequency": lambda: [
            {"type": "letter_frequency", "letter": kw["letter"], **_relation(kw["let_relation"], kw["let_frequency"])}
        ],
        "number_highlighted_sections": lambda: [_count("highlights", "at least", kw["num_highlights"])],
        "number_bullet_lists": lambda: [_count("bullets", "exactly", kw["num_bullets"])],
        "multiple_sections": lambda: [_count("sections", "at least", kw["num_sections"], kw["section_spliter"])],
        "number_placeholders": lambda: [_count("placeholders", "at least", kw["num_placeholders"])],
        "title": lambda: [{"type": "title"}],
        "json_format": lambda: [{"type": "json"}],
        "constrained_response": lambda: [{"type": "one_of", "options": CONSTRAINED_RESPONSES}],
        "postscript": lambda: [{"type": "postscript", "marker": kw["postscript_marker"]}],
        "repeat_prompt": lambda: [{"type": "starts_with", "phrase": kw["prompt_to_repeat"]}],
        "two_responses": lambda: [{"type": "two_responses"}],
        "end_checker": lambda: [{"type": "ends_with", "phrase": kw["end_phrase"]}],
        "quotation": lambda: [{"type": "quoted"}],
        "english_lowercase": lambda: [{"type": "case", "letters": "lower"}, {"type": "language", "code": "en"}],
        "english_capital": lambda: [{"type": "case", "letters": "upper"}, {"type": "language", "code": "en"}],
        "capital_word_frequency": lambda: [
            {"type": "capital_words", **_relation(kw["capital_relation"], kw["capital_frequency"])}
        ],
        "response_language": lambda: [{"type": "language", "code": kw["language"]}],
    }
    if kind not in table:
        raise KeyError(f"no checks for IFEval instruction {instruction_id!r}")
    return table[kind]()


class Random(Exception):
    """The official verifier does not check what the kwargs say but something drawn at random
    (IFEval's letter_frequency with a letter outside a-z, e.g. "#": a random letter instead)."""


def checks_for(instruction_id: str, kwargs: dict[str, Any]) -> list[Instruction]:
    """Our checks for one IFEval instruction; the instruction holds when all of them pass.
    Raises :class:`Random` where the official verifier checks a thing drawn at random."""
    letter = str(kwargs.get("letter", "a")).lower()
    if instruction_id == "keywords:letter_frequency" and not (len(letter) == 1 and "a" <= letter <= "z"):
        raise Random(f"the official verifier counts a random letter, not {kwargs['letter']!r}")
    return parse_checks(_records(instruction_id, {k: v for k, v in kwargs.items() if v is not None}))


def follows(checks: list[Instruction], text: str) -> bool:
    """Our verdict, as IFEval scores one (an empty response follows nothing)."""
    return bool(text.strip()) and all(check.check(text).passed for check in checks)
