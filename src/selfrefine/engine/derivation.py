"""Checks derived from the request: before the first draft, the model turns the request's
explicit, checkable instructions into checks (:mod:`.instructions`), decoded under their
JSON schema, so code can rank and refine what it can verify (Divide-Verify-Refine's first
step, on the loop's own model).

A check the request does not state would fail good drafts, so a derived check is kept only
when the request grounds it (:func:`grounded`): its numbers and words are in the request's
text, and so is a word naming what it counts ("words", "bullet", "comma", "JSON", a
language's name, ...). The derivation never sees a reference, a dataset's instruction list
or a draft: only the request. Its call is the critic's (the feedback role's model), recorded
with ``purpose="checks"``; an unparsable reply after the retries, or a failing call, leaves
the run without derived checks (it says so in its checks step) and never ends it.
"""

from __future__ import annotations

import json
import re
from importlib import resources
from typing import Any

from pydantic import ValidationError

from ..core.errors import BackendError, ParseError, TaskError
from ..core.records import CallRecord, ChecksStep
from .context import RunContext
from .instructions import Instruction, checks_schema, parse_checks
from .instructions.form import Language
from .instructions.language import LANGUAGES
from .templates import Template

PURPOSE = "checks"
MAX_DERIVED = 12
MAX_REQUEST_CHARS = 6_000  # the request text the derivation reads (its instructions come early)
NUMBER_WORDS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty"
).split()
UNIT_WORDS = {
    "words": ("word",),
    "sentences": ("sentence",),
    "paragraphs": ("paragraph",),
    "lines": ("line",),
    "bullets": ("bullet", "point", "list", "item"),
    "sections": ("section", "part"),
    "highlights": ("highlight", "*"),
    "placeholders": ("placeholder", "["),
}
KIND_WORDS = {
    "capital_words": ("capital", "upper", "caps"),
    "quoted": ("quot",),
    "json": ("json",),
    "title": ("title", "<<"),
    "postscript": ("p.s", "postscript"),
    "two_responses": ("two", "2", "******"),
}


def _template() -> Template:
    source = resources.files("selfrefine.engine").joinpath("prompts/derive_checks.j2").read_text(encoding="utf-8")
    return Template("derive checks", source, {"input"})


TEMPLATE = _template()


Memo = dict[str, list[Instruction]]  # derived checks by request text (an engine's, across its runs)
MEMO_SIZE = 512


async def run_checks(run: RunContext, memo: Memo) -> ChecksStep | None:
    """The run's checks besides the task's own, set on its state before the first draft: the
    given ones, the run's JSON Schema, and the ones derived from the request (once per
    request: ``memo``). None: the run has none to set."""
    policy, checks = run.settings.checks, run.state.checks
    if not policy.on:
        return None
    checks.given, checks.schema = policy.given, policy.schema
    call, note = None, ""
    if policy.derive:
        request = request_text(run)
        if request in memo:
            checks.derived, note = list(memo[request]), "derived before for the same request"
        else:
            checks.derived, call, note = await _derive_safely(run)
            if call is not None and call.ok:
                memo[request] = list(checks.derived)
                while len(memo) > MEMO_SIZE:
                    memo.pop(next(iter(memo)))
    return ChecksStep(checks=checks.records(), call=call, note=note)


async def _derive_safely(run: RunContext) -> tuple[list[Instruction], CallRecord | None, str]:
    """:func:`derive`; a failing backend leaves the run without derived checks (its next
    call meets the same failure and ends the run there, with its drafts kept)."""
    try:
        return await derive(run)
    except BackendError as exc:
        return [], None, f"the derivation failed ({exc}); the run goes on without derived checks"


def request_text(run: RunContext) -> str:
    """The text the checks are derived from: the request itself, or the rendered generate
    prompt for a task whose template states the instructions."""
    text = run.state.input if run.settings.checks.source == "input" else run.task.render("generate", run.state.input)
    return text[:MAX_REQUEST_CHARS]


async def derive(run: RunContext) -> tuple[list[Instruction], CallRecord | None, str]:
    """The request's checks, the derivation's call and a note: what was dropped, or why
    there are none."""
    request = request_text(run)
    prompt = TEMPLATE.render({"input": request}).strip()
    schema = {"type": "object", "properties": {"checks": checks_schema(MAX_DERIVED)}, "required": ["checks"]}
    found, call, error = await run.parsed_call(
        "feedback", 0, prompt, schema if run.settings.requests.constrained else None, _parse, purpose=PURPOSE
    )
    if error is not None:
        return [], call, f"the derivation gave no usable checks ({error})"
    kept = [c for c in found if grounded(c, request)]
    dropped = len(found) - len(kept)
    note = f"{dropped} derived check(s) the request does not state were dropped" if dropped else ""
    return kept, call, note


def _parse(reply: str) -> list[Instruction]:
    """The checks of a reply: ``{"checks": [...]}`` (or a bare list); each invalid check is
    left out, a reply with no list at all is a ParseError (the call is asked again)."""
    text = reply.strip()
    start = min((i for i in (text.find("{"), text.find("[")) if i >= 0), default=-1)
    try:
        data: Any = json.loads(text[start:]) if start >= 0 else None
    except ValueError:
        data = None
    if isinstance(data, dict):
        data = data.get("checks")
    if not isinstance(data, list):
        raise ParseError('no list of checks; reply with {"checks": [...]}')
    kept = []
    for item in data[:MAX_DERIVED]:
        try:
            kept += parse_checks([item])
        except (TaskError, ValidationError, TypeError):
            continue  # one malformed check is dropped, not the others
    return kept


def grounded(check: Instruction, request: str) -> bool:
    """Whether the request states the check: its numbers and words are in the request's
    text, with a word naming what it checks."""
    text = request.lower()
    data = check.model_dump()
    kind = data["type"]
    if "n" in data and not _says_number(text, data["n"]):
        return False
    if kind == "count":
        return any(w in text for w in UNIT_WORDS[data["unit"]])
    if kind == "paragraph_start":
        return _says_number(text, data["nth"]) and _says(text, data["word"]) and "paragraph" in text
    if kind in ("keywords", "forbidden_words"):
        return all(_says(text, w) for w in data["words"])
    if kind == "word_frequency":
        return _says(text, data["word"])
    if kind == "letter_frequency":
        return re.search(rf"\b{re.escape(data['letter'].lower())}\b", text) is not None and "letter" in text
    if kind == "forbidden_chars":
        return all(c in text or (c == "," and "comma" in text) for c in data["chars"])
    if kind == "case":
        return any(w in text for w in (("lower",) if data["letters"] == "lower" else ("upper", "capital", "caps")))
    if kind in ("starts_with", "ends_with"):
        return _says(text, data["phrase"])
    if kind == "one_of":
        return all(_says(text, o) for o in data["options"])
    if kind == "language":
        return isinstance(check, Language) and LANGUAGES[check.code].lower().split()[0] in text
    return any(w in text for w in KIND_WORDS.get(kind, (kind,)))


def _says(text: str, phrase: str) -> bool:
    """Whether ``text`` (lower-cased) holds ``phrase``, whitespace and case aside."""
    return " ".join(phrase.lower().split()) in " ".join(text.split())


def _says_number(text: str, n: int) -> bool:
    """Whether ``text`` states the number ``n`` (as digits, or as a word up to twenty)."""
    if re.search(rf"(?<![\d.]){n}(?!\d)", text.replace(",", "")):
        return True
    return n < len(NUMBER_WORDS) and re.search(rf"\b{NUMBER_WORDS[n]}\b", text) is not None
