"""Dialogue response generation (FED): the next turn of a conversation.

Input: the conversation, one turn per line (``User: …`` / ``System: …`` prefixes are kept
as given), or a JSON object with a ``context`` key (a FED row). Output: the next response.

Feedback rates the response on ten aspects, each 1–3, with a total out of 30. It is asked
as a small JSON object (one integer per aspect plus a short reason) so that constrained
decoding makes even a tiny model's feedback parse; a plain text form ("Relevant: 3 - …",
one aspect per line, "Total: 27/30") is parsed as well for backends without constraints.
The paper runs fixed rounds (≤3) and keeps the best-scored response (``select="best"``).
There is no code metric: quality is a pairwise preference against the one-step response,
measured by :class:`selfrefine.evaluation.judge.PairwiseJudge`.
"""

from __future__ import annotations

import math
import re
from typing import Any

from ..core.errors import DraftParseError, FeedbackParseError, InputError
from ..core.records import Feedback
from ..task.task import JUDGED_BEST, Capabilities, Task, TaskDefaults, system_message
from .parsing import json_aspect_ratings, json_input

ASPECTS = (
    "Relevant",
    "Informative",
    "Interesting",
    "Consistent",
    "Helpful",
    "Engaging",
    "Specific",
    "Safe",
    "User understanding",
    "Fluent",
)
KEYS = tuple(a.lower().replace(" ", "_") for a in ASPECTS)
MIN_ASPECTS = 5  # fewer parsed aspects than this: the feedback is re-asked

FEEDBACK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        **{key: {"type": "integer", "enum": [1, 2, 3]} for key in KEYS},
        # a length cap keeps a tiny model from running past max_tokens and cutting the JSON
        "reason": {"type": "string", "maxLength": 100},
    },
    "required": [*KEYS, "reason"],
}

_SPEAKER = re.compile(r"^\s*(system|response|improved response|assistant|bot|next response|reply)\s*:\s*", re.I)
_NOT_A_REPLY = re.compile(r"^(user|feedback|conversation)\s*:", re.I)
_SENTENCE_END = re.compile(r"[.!?][\"')\]]?(?=\s)")
_TOTAL = re.compile(r"\btotal(?:\s+score)?\s*[:=]?\s*(\d{1,2})(?:\s*/\s*30)?", re.I)


def _aspect_pattern(aspect: str) -> re.Pattern[str]:
    name = r"[\s_-]*".join(re.escape(w) for w in aspect.split())
    # "Relevant: 3 - reason", "- relevant (2/3): reason", "user_understanding = 1"
    return re.compile(
        rf"^[\s*\-#\d.]*\"?{name}\"?\s*(?:\(|:|=|-)\s*(\d+)(?:\s*/\s*3)?\)?\s*[-:,.)]*\s*(.*)$", re.I | re.M
    )


_PATTERNS = {key: _aspect_pattern(aspect) for key, aspect in zip(KEYS, ASPECTS)}


def parse_conversation(text: str) -> str:
    """The conversation as turns separated by newlines, from text or a JSON ``context``."""
    text = text.strip()
    if text.startswith("{"):
        data = json_input(text, "dialogue")
        if data is None or not isinstance(data.get("context"), str):
            raise InputError('dialogue JSON input needs a "context" string (turns separated by newlines)')
        text = data["context"].replace("\\n", "\n")
    turns = [" ".join(line.split()) for line in text.splitlines()]
    turns = [t for t in turns if t]
    if not turns:
        raise InputError("the conversation is empty")
    return "\n".join(turns)


class Dialogue(Task):
    name = "dialogue"
    description = "Dialogue response: the next turn of a conversation, rated on 10 aspects (FED)"
    prompt_dir = "dialogue"
    metric_name = "judge preference vs one-step (eval --judge MODEL)"  # no code metric: Task.metric is None
    judge_criteria = "Which response is the better next turn of the conversation: more relevant, informative, engaging, specific and fluent?"
    stop_description = "fixed rounds (no stop signal); the paper keeps the best-scored response"
    capabilities = Capabilities(judge_only=True)
    judge_aspects = ("relevant", "specific", "interesting")
    defaults = TaskDefaults(
        best=JUDGED_BEST,  # the judge ranks the samples (docs/judges.md)
        system=system_message(
            "a friendly, knowledgeable conversational assistant. Each message asks you to write, rate or improve the System's next response in a conversation"
        ),
        generic_feedback="Make the response more relevant, specific and engaging.",
        temperature={"generate": 0.7, "feedback": 0.7, "refine": 0.7},
        max_tokens={"generate": 80, "feedback": 200, "refine": 80},
        feedback_schema=FEEDBACK_SCHEMA,
        stop_sequences={
            "generate": ["\nUser:", "\nConversation:"],
            "feedback": ["\nConversation:", "\nResponse:"],
            "refine": ["\nUser:", "\nConversation:", "\nFeedback:", "\nResponse:"],
        },
        max_iterations=3,
        select="best",  # the paper returns the best-scored response for dialogue
    )

    def prepare_input(self, text: str) -> str:
        return parse_conversation(super().prepare_input(text))

    def parse_draft(self, text: str) -> str:
        lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
        first = _SPEAKER.sub("", lines[0]).strip() if lines else ""
        label = _NOT_A_REPLY.match(first)
        if label:
            raise DraftParseError(f"the model wrote a {label.group(1).lower()!r} line instead of a response")
        return super().parse_draft(_drop_cut_sentence(first))

    def parse_feedback(self, text: str, *, input: str, draft: str) -> Feedback:
        raw = text.strip()
        if not raw:
            raise FeedbackParseError("the model returned empty feedback")
        parsed = _parse_json(raw)
        scores, reasons, stated, unread = parsed if parsed is not None else _parse_text(raw)
        if len(scores) < MIN_ASPECTS:
            said = f" ({'; '.join(unread[:3])})" if unread else ""
            raise FeedbackParseError(
                f"only {len(scores)} of 10 aspects have a 1-3 score (need {MIN_ASPECTS}){said}; "
                "write one 'Aspect: N - reason' line per aspect"
            )
        total = float(sum(scores.values()))
        fields: dict[str, str | list[str]] = {"aspects_parsed": str(len(scores))}
        missing = [k for k in KEYS if k not in scores]
        if missing:
            fields["missing_aspects"] = missing
        if unread:  # a score given but not read (NaN, infinity, off the scale): said, not dropped silently
            fields["unread_scores"] = unread
        if reasons:
            fields["reasons"] = reasons
        if stated is not None and stated != total:
            fields["stated_total"] = f"{stated:g}"  # the model's arithmetic, kept for inspection
        return Feedback(text=raw, scores=scores, total=total, fields=fields)


def _drop_cut_sentence(text: str) -> str:
    """Drop a trailing fragment cut off by max_tokens, when a whole sentence precedes it."""
    if re.search(r"[.!?][\"')\]]?$", text):
        return text
    ends = list(_SENTENCE_END.finditer(text))
    return text[: ends[-1].end()] if ends else text


def _valid(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if number in (1.0, 2.0, 3.0) else None


Parsed = tuple[dict[str, float], list[str], float | None, list[str]]  # scores, reasons, stated total, unread


def _parse_json(raw: str) -> Parsed | None:
    parsed = json_aspect_ratings(raw, _key, _valid, cut_off_is_error=True)
    if parsed is None:
        return None  # no JSON, or text feedback that happens to contain braces
    ratings, data = parsed
    scores = {key: score for key, (score, _) in ratings.items()}
    reasons = [f"{key}: {reason}" for key, (_, reason) in ratings.items() if reason]
    norm = {_norm(k): v for k, v in data.items()}
    if isinstance(norm.get("reason"), str) and norm["reason"].strip():
        reasons.append(norm["reason"].strip())
    unread = [_unread(key, value) for key, value in _rated(data) if key not in scores]
    stated = norm.get("total")
    if isinstance(stated, bool) or not isinstance(stated, (int, float)):
        stated = None
    elif not math.isfinite(stated):  # json reads NaN, Infinity and 1e999
        unread.append(_unread("total", stated))
        stated = None
    return scores, reasons, None if stated is None else float(stated), unread


def _rated(data: dict[str, Any]) -> list[tuple[str, Any]]:
    """The aspects a JSON critique rates, each once (its first mention), with the value given."""
    found: dict[str, Any] = {}
    for name, value in data.items():
        key = _key(str(name))
        if key is not None and key not in found:
            found[key] = value.get("score") if isinstance(value, dict) else value
    return list(found.items())


def _unread(key: str, value: Any) -> str:
    """Why a critique's score for ``key`` is not read, in words: "relevant: NaN is not a finite number"."""
    if isinstance(value, float) and not math.isfinite(value):
        shown = "NaN" if math.isnan(value) else ("-" if value < 0 else "") + "infinity"
        return f"{key}: {shown} is not a finite number"
    shown = repr(value) if not isinstance(value, str) else repr(value[:40])
    return f"{key}: {shown} is not a score of 1, 2 or 3"


def _norm(name: str) -> str:
    return str(name).strip().lower().replace(" ", "_")


def _key(name: str) -> str | None:
    return _norm(name) if _norm(name) in KEYS else None


def _parse_text(raw: str) -> Parsed:
    scores: dict[str, float] = {}
    reasons: list[str] = []
    unread: list[str] = []
    for key, pattern in _PATTERNS.items():
        match = pattern.search(raw)
        number = _valid(match.group(1)) if match else None
        if number is None:
            unread += [f"{key}: {match.group(1)[:12]} is not a score of 1, 2 or 3"] if match else []
            continue
        scores[key] = number
        if match.group(2).strip():
            reasons.append(f"{key}: {match.group(2).strip()}")
    total = _TOTAL.search(raw)
    return scores, reasons, float(total.group(1)) if total else None, unread
