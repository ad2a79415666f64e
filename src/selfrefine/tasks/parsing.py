"""Small parsers shared by the tasks and the judge: JSON objects in model replies, fenced code blocks."""

from __future__ import annotations

import ast
import json
import re
import threading
from collections.abc import Callable
from typing import Any

from ..core.errors import DraftParseError, FeedbackParseError, InputError

# ```python … ``` (the closing fence may be missing: a stop sequence or max_tokens cut it)
FENCE = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)(?:```|$)", re.S | re.I)


def fenced_blocks(text: str) -> list[str]:
    """The non-empty fenced code blocks of a reply, in order."""
    return [block for block in FENCE.findall(text) if block.strip()]


# CPython 3.11 keeps ast.parse's recursion counter in state shared by threads, so two
# threads parsing at once can fail with "SystemError: AST constructor recursion depth
# mismatch" (python/cpython#106905); drafts are parsed in worker threads, so parse one at a time.
_AST_LOCK = threading.Lock()


def parse_python(code: str) -> ast.Module:
    """``ast.parse``, safe to call from several threads at once."""
    with _AST_LOCK:
        return ast.parse(code)


def parses(code: str) -> bool:
    """Whether the text is syntactically valid Python."""
    try:
        parse_python(code)
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


def extract_program(text: str) -> str:
    """The program in a model reply: the first fenced block (or the text), minus trailing prose.

    A reply cut by max_tokens or followed by prose does not parse; trailing lines are then
    dropped until it does, keeping at least half of it (else the text is returned as is
    and the verifier or the metric reports the syntax error). One rule for every task
    whose drafts are programs (codeopt, readability). A program before the first fence
    wins: a stop sequence may have cut the reply's opening fence, leaving only the closing
    one and whatever followed it."""
    code = _code_before_fence(text)
    if code is None:
        fenced = fenced_blocks(text)
        # no usable fenced block: drop stray fence lines, keep the rest
        code = fenced[0] if fenced else "\n".join(ln for ln in text.splitlines() if not ln.lstrip().startswith("```"))
    code = code.strip("\n")
    code = "\n".join(line.rstrip() for line in code.splitlines()).strip("\n")
    if not code.strip():
        raise DraftParseError("the model returned no code")
    if parses(code):
        return code
    lines = code.splitlines()
    for end in range(len(lines) - 1, max(0, len(lines) // 2) - 1, -1):
        head = "\n".join(lines[:end]).rstrip()
        if head.strip() and parses(head):
            return head
    return code


def _code_before_fence(text: str) -> str | None:
    """The text before the first fence when it is a program (not a word or a sentence)."""
    before = text.split("```", 1)[0].strip("\n").rstrip()
    if "```" not in text or not before.strip() or not parses(before):
        return None
    body = parse_python(before).body
    if all(isinstance(n, ast.Expr) and isinstance(n.value, (ast.Name, ast.Constant)) for n in body):
        return None  # "Solution" or a docstring parses too, but is prose
    return before


def json_aspect_ratings(
    raw: str,
    key_of: Callable[[str], str | None],
    score_of: Callable[[Any], float | None],
    *,
    cut_off_is_error: bool = False,
) -> tuple[dict[str, tuple[float, str]], dict[str, Any]] | None:
    """Aspect → (score, reason) from a JSON rating object, and the object itself.

    The one reader of rating feedback for every task that rates aspects (acronym, dialogue):
    a key is an aspect when ``key_of`` names one, its value a score or
    ``{"score": N, "reason": "..."}``, kept when ``score_of`` accepts it (first mention
    wins). None when the reply holds no JSON object (the task may read its text form)."""
    data = json_object(raw, cut_off_is_error=cut_off_is_error)
    if data is None:
        return None
    ratings: dict[str, tuple[float, str]] = {}
    for name, value in data.items():
        key = key_of(str(name))
        if key is None or key in ratings:
            continue
        reason = ""
        if isinstance(value, dict):
            reason = str(value.get("reason", "") or "").strip()
            value = value.get("score")
        score = score_of(value)
        if score is not None:
            ratings[key] = (score, reason)
    return ratings, data
