"""Story generation: a premise (and optional constraints) in, a short story out.

Input: a premise as plain text, or a JSON object ``{"premise": ..., "elements": [...],
"min_words": N, "max_words": M}`` (elements: words or phrases the story must use; the
length defaults to 60-200 words, and at most ``MAX_WORDS_LIMIT`` fit the draft's token
limit). The input is normalised to that JSON object.

Feedback rates four aspects 1-5 with a reason (coherence, premise followed, constraints
met, interest), constrained to JSON where the backend supports it; the loop stops when
every aspect is 5. The verifier checks what code can: required elements present (by
lemma, as commongen), length within bounds, and no repetition loop (a 4-word sequence
three or more times, or a sentence repeated). The metric is the mean of those three checks
(element coverage, length ok, no loop), 0..1; story quality itself is judged pairwise
against the one-step story with ``eval --judge`` (the quality benchmark does this).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from ..checks.incomplete import INCOMPLETE_METRIC, is_refusal, refusal_check
from ..core.errors import FeedbackParseError, InputError
from ..core.records import Feedback, Verification
from ..task.task import LOOP_BEST, Capabilities, Task, TaskDefaults, system_message
from .commongen import concept_coverage, missing_concepts
from .parsing import json_aspect_ratings, json_input

ASPECTS = {
    "coherence": "coherence",
    "constraints": "constraints met",
    "interest": "interest",
    "premise": "premise followed",
}
MIN_WORDS, MAX_WORDS = 60, 200
# The word range must fit the draft's token limit with room to spare: English prose takes
# about 1.3-1.4 tokens a word in the catalogue models' tokenizers, and a small model
# overshoots the range by up to half (273 words asked for at most 200). The limit holds
# MAX_WORDS_LIMIT words with that margin; a longer range is refused at the input.
TOKENS_PER_WORD, OVERSHOOT = 1.4, 1.5
DRAFT_TOKENS = 480
MAX_WORDS_LIMIT = int(DRAFT_TOKENS / (TOKENS_PER_WORD * OVERSHOOT))
LOOP_NGRAM, LOOP_REPEATS = 4, 3
FEEDBACK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        key: {
            "type": "object",
            "properties": {
                "reason": {"type": "string", "maxLength": 80},
                "score": {"type": "integer", "enum": [1, 2, 3, 4, 5]},
            },
            "required": ["reason", "score"],
        }
        for key in ASPECTS
    },
    "required": list(ASPECTS),
}
_WORD = re.compile(r"[a-z0-9']+")
_SENTENCE = re.compile(r"[^.!?]+[.!?]?")
_LABEL = re.compile(r"^\s*(story|improved story|revised story)\s*:\s*", re.I)


def parse_story_input(text: str) -> dict[str, Any]:
    """{"premise", "elements", "min_words", "max_words"} from text or JSON; InputError otherwise."""
    text = text.strip()
    data: dict[str, Any] = {"premise": text}
    if text.startswith("{"):
        parsed = json_input(text, "story")
        if parsed is None or not isinstance(parsed.get("premise"), str) or not parsed["premise"].strip():
            raise InputError('story JSON input needs a non-empty "premise" string')
        data = parsed
    elements = data.get("elements", [])
    if not isinstance(elements, list) or not all(isinstance(e, str) and e.strip() for e in elements):
        raise InputError('story "elements" must be a list of non-empty strings')
    low, high = data.get("min_words", MIN_WORDS), data.get("max_words", MAX_WORDS)
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in (low, high)) or not 1 <= low <= high:
        raise InputError('story "min_words"/"max_words" must be whole numbers with 1 <= min_words <= max_words')
    if high > MAX_WORDS_LIMIT:
        raise InputError(
            f'story "max_words" {high} does not fit the {DRAFT_TOKENS}-token draft limit with margin; '
            f"at most {MAX_WORDS_LIMIT} words"
        )
    return {
        "premise": " ".join(data["premise"].split()),
        "elements": [e.strip().lower() for e in elements],
        "min_words": low,
        "max_words": high,
    }


def word_count(story: str) -> int:
    return len(_WORD.findall(story.lower()))


def repetition_loops(story: str) -> list[str]:
    """4-word sequences used three or more times, and sentences repeated word for word."""
    words = _WORD.findall(story.lower())
    grams = Counter(" ".join(words[i : i + LOOP_NGRAM]) for i in range(len(words) - LOOP_NGRAM + 1))
    sentences = Counter(" ".join(_WORD.findall(s.lower())) for s in _SENTENCE.findall(story))
    loops = [g for g, n in grams.items() if n >= LOOP_REPEATS]
    return loops + [s for s, n in sentences.items() if n >= 2 and len(s.split()) >= 3 and s not in loops]


def story_checks(spec: dict[str, Any], story: str) -> dict[str, Any]:
    """The code checks of one story: element coverage, length, repetition."""
    n = word_count(story)
    elements = spec["elements"]
    return {
        "coverage": concept_coverage(elements, story) if elements else 1.0,
        "missing": missing_concepts(elements, story) if elements else [],
        "words": n,
        "length_ok": spec["min_words"] <= n <= spec["max_words"],
        "loops": repetition_loops(story),
    }


def checks_score(checks: dict[str, Any]) -> float:
    return round((checks["coverage"] + checks["length_ok"] + (not checks["loops"])) / 3, 4)


class Story(Task):
    name = "story"
    description = "Story generation: a short story from a premise, with optional required elements and length"
    prompt_dir = "story"
    metric_name = "constraint checks: elements, length, no loops (code) + judge preference"
    judge_criteria = (
        "Which story follows the premise more faithfully and is more coherent, vivid and interesting to read?"
    )
    stop_description = "every aspect rated 5"
    extra_variables = frozenset({"premise", "elements", "min_words", "max_words"})
    defaults = TaskDefaults(
        system=system_message(
            "a skilled fiction writer and editor. Each message asks you to write, critique or improve a short story for a given premise"
        ),
        generic_feedback="Make the story more coherent and interesting, and follow the premise closely.",
        temperature={"generate": 0.7, "feedback": 0.7, "refine": 0.7},
        max_tokens={"generate": DRAFT_TOKENS, "feedback": 200, "refine": DRAFT_TOKENS},
        feedback_schema=FEEDBACK_SCHEMA,
        stop_sequences={
            "generate": ["\nPremise:", "\nRatings:"],
            "feedback": ["\n\n", "\nPremise:", "\nStory:"],
            "refine": ["\nPremise:", "\nRatings:", "\nImproved story:"],
        },
        max_iterations=3,
        best=LOOP_BEST,  # not measured on this task: the loop measured on commongen and acronym
    )
    capabilities = Capabilities(verifier=True)
    judge_aspects = ("coherent", "premise", "interesting")

    def prepare_input(self, text: str) -> str:
        spec = parse_story_input(super().prepare_input(text))
        if not spec["elements"] and (spec["min_words"], spec["max_words"]) == (MIN_WORDS, MAX_WORDS):
            return spec["premise"]
        return json.dumps(spec, ensure_ascii=False)

    def context(self, input: str) -> dict[str, Any]:
        return parse_story_input(input)

    def parse_draft(self, text: str) -> str:
        text = _LABEL.sub("", text.strip())
        return super().parse_draft("\n".join(ln.rstrip() for ln in text.strip().splitlines()).strip())

    def parse_feedback(self, text: str, *, input: str, draft: str) -> Feedback:
        raw = text.strip()
        if not raw:
            raise FeedbackParseError("the model returned empty feedback")
        parsed = json_aspect_ratings(raw, _aspect_key, _score, cut_off_is_error=True)
        if parsed is None:
            raise FeedbackParseError("the feedback holds no JSON rating object")
        ratings = {key: parsed[0][key] for key in ASPECTS if key in parsed[0]}
        if len(ratings) < len(ASPECTS):
            raise FeedbackParseError(
                f"the feedback rates {len(ratings)} of {len(ASPECTS)} aspects: {', '.join(ratings) or 'none'}"
            )
        scores = {key: float(score) for key, (score, _) in ratings.items()}
        fields = {f"{key}_reason": reason for key, (_, reason) in ratings.items() if reason}
        return Feedback(
            text=raw, scores=scores, total=sum(scores.values()), done=min(scores.values()) >= 5, fields=fields
        )

    def metric(self, input: str, output: str, reference: Any = None) -> float:
        if is_refusal(output):  # it misses no element only because it tells no story
            return INCOMPLETE_METRIC
        return checks_score(story_checks(parse_story_input(input), output))

    def verify(self, input: str, draft: str) -> Verification:
        refused = refusal_check(draft)
        if refused is not None:
            return refused
        spec = parse_story_input(input)
        checks = story_checks(spec, draft)
        lines = []
        if checks["missing"]:
            lines.append("Missing required elements: " + ", ".join(checks["missing"]) + ".")
        if not checks["length_ok"]:
            lines.append(f"Length {checks['words']} words: write {spec['min_words']} to {spec['max_words']} words.")
        if checks["loops"]:
            lines.append("Repeated text (a loop): " + "; ".join(f'"{g}"' for g in checks["loops"][:3]) + ".")
        passed = not lines
        text = " ".join(lines) or f"All code checks pass: elements present, {checks['words']} words, no repetition."
        return Verification(text=text, passed=passed, score=checks_score(checks))


def _aspect_key(name: str) -> str | None:
    low = name.strip().lower()
    return next((key for key, label in ASPECTS.items() if low in (key, label) or low.startswith(key[:6])), None)


def _score(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return int(number) if number.is_integer() and 1 <= number <= 5 else None
