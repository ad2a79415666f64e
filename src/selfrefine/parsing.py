"""Small parsers shared by the tasks: JSON objects in model replies, fenced code blocks."""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from .errors import FeedbackParseError, InputError

# ```python … ``` (the closing fence may be missing: a stop sequence or max_tokens cut it)
FENCE = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)(?:```|$)", re.S | re.I)


def fenced_blocks(text: str) -> list[str]:
    """The non-empty fenced code blocks of a reply, in order."""
    return [block for block in FENCE.findall(text) if block.strip()]


def parses(code: str) -> bool:
    """Whether the text is syntactically valid Python."""
    try:
        ast.parse(code)
    except (SyntaxError, ValueError):
        return False
    return True


def json_object(raw: str, *, cut_off_is_error: bool = False) -> dict[str, Any] | None:
    """The JSON object between the first "{" and the last "}" of a reply, or None.

    None when there is no object or it does not parse (the caller may try a text form).
    With ``cut_off_is_error``, an object opened but never closed (max_tokens ran out)
    raises FeedbackParseError saying so, which makes the engine re-ask that one call.
    """
    start, end = raw.find("{"), raw.rfind("}")
    if start < 0:
        return None
    if end <= start:
        if cut_off_is_error:
            raise FeedbackParseError("feedback JSON is cut off (raise max_tokens for the feedback role)")
        return None
    try:
        data = json.loads(raw[start : end + 1])
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def json_input(text: str, task: str) -> dict[str, Any] | None:
    """A task input given as a JSON object, or None when the text is not JSON-shaped."""
    if not text.startswith("{"):
        return None
    try:
        data = json.loads(text)
    except ValueError:
        raise InputError(f"{task} input looks like JSON but does not parse") from None
    return data if isinstance(data, dict) else None
