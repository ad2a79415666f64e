"""Checks derived from the request: before the first draft, the request's explicit,
checkable instructions become checks (:mod:`.instructions`), so code can rank and refine
what it can verify (Divide-Verify-Refine's first step, on the loop's own model). Two readers:

- code reads the common phrasings ("at least 300 words", "no commas", "end with …":
  :mod:`.instructions.phrases`), which a small model lists unreliably (on the default model
  it copied its prompt's examples);
- the model lists the request's instructions, decoded under the checks' JSON schema, for
  what no phrasing covers; where it states a check code already read (the same kind of
  check of the same thing), the code's stands.

A check the request does not state would fail good drafts, so a derived check is kept only
when the request grounds it (:func:`grounded`): its numbers and words are in the request's
text, and so is a word naming what it counts ("words", "bullet", "comma", "JSON", a
language's name, ...): each kind says which in its own ``grounded``. The prompt lists the
kinds registered, each by its ``example``. The derivation never sees a reference, a dataset's instruction list
or a draft: only the request. Its call is the critic's (the feedback role's model), recorded
with ``purpose="checks"``; an unparsable reply after the retries, or a failing call, leaves
the run without derived checks (it says so in its checks step) and never ends it.
"""

from __future__ import annotations

import hashlib
import json
import threading
import weakref
from collections import OrderedDict
from collections.abc import AsyncIterator
from functools import lru_cache
from importlib import resources
from typing import Any

from ..backends.base import Backend
from ..checks.instructions import Instruction, build_checks, checks_schema, examples, kinds
from ..checks.instructions.coverage import uncovered
from ..checks.instructions.grounding import says_number
from ..checks.instructions.phrases import stated
from ..core.errors import BackendError, ParseError
from ..core.records import CallRecord, ChecksStep, DroppedCheck, ProgressStep, dropped_said
from ..task.templates import Template
from .context import RunContext

PURPOSE = "checks"
MAX_DERIVED = 12
MAX_REQUEST_CHARS = 6_000  # the request text the derivation reads (its instructions come early)
SOURCE = resources.files("selfrefine.engine").joinpath("prompts/derive_checks.j2").read_text(encoding="utf-8")


@lru_cache(maxsize=4)
def _template(kinds: tuple[type[Instruction], ...]) -> Template:
    """The derivation prompt, its list of kinds their examples (code's text, not the request's)."""
    return Template("derive checks", SOURCE.replace("{{ kinds }}", examples()), {"input"})


def template() -> Template:
    """The derivation prompt over every kind registered now (a kind defined later joins it)."""
    return _template(kinds())


TEMPLATE = template()  # the built-in kinds' prompt


CODE_READ_ALL = "code read every instruction the request states in words it knows: no model call"
ANNOUNCED = "deriving checks from the request… (one call to the critic's model, before the first draft)"
CACHE_SIZE = 512  # requests whose derived checks a process keeps


@lru_cache(maxsize=4)
def _version(source: str) -> str:
    return hashlib.sha256(f"{source}\n{MAX_DERIVED}".encode()).hexdigest()[:16]


def prompt_version() -> str:
    """What the derivation asks, as a digest: a changed prompt, kind or limit derives again."""
    return _version(template().source)


PROMPT_VERSION = prompt_version()  # the built-in kinds' digest
Key = tuple[int, str, str, bool]  # (the critic's backend, request text, prompt version, constrained)
Derived = tuple[list[Instruction], list[DroppedCheck]]  # the checks kept, and the ones dropped with why


class DerivedCache:
    """Checks derived per (the critic's backend, request text, derivation prompt, constrained
    decoding), shared by every engine of the process: a server makes one engine per set of
    options over the same backends, and a repeated request took the derivation's minutes again.
    A backend is named by its identity, held weakly (a new backend at a reused address misses);
    least recently used entries go first."""

    def __init__(self, size: int = CACHE_SIZE) -> None:
        self.size = size
        self.entries: OrderedDict[Key, tuple[weakref.ref[Backend], Derived]] = OrderedDict()
        self.lock = threading.Lock()  # engines on several threads (sync run() per thread) share it

    def get(self, backend: Backend, request: str, constrained: bool) -> Derived | None:
        key = (id(backend), request, prompt_version(), constrained)
        with self.lock:
            entry = self.entries.get(key)
            if entry is None or entry[0]() is not backend:
                return None
            self.entries.move_to_end(key)
            return list(entry[1][0]), list(entry[1][1])

    def put(self, backend: Backend, request: str, constrained: bool, checks: Derived) -> None:
        try:
            ref = weakref.ref(backend)
        except TypeError:  # a backend that cannot be held weakly is not cached
            return
        key = (id(backend), request, prompt_version(), constrained)
        with self.lock:
            self.entries[key] = (ref, (list(checks[0]), list(checks[1])))
            self.entries.move_to_end(key)
            while len(self.entries) > self.size:
                self.entries.popitem(last=False)


DERIVED = DerivedCache()


async def run_checks(run: RunContext) -> AsyncIterator[ChecksStep | ProgressStep]:
    """The run's checks besides the task's own, stated before the first draft: the given
    ones and the run's JSON Schema (the engine's, which the run's state holds), and the ones
    derived from the request (once per request and critic: :data:`DERIVED`), set on its
    state, as one ChecksStep; a ProgressStep first when the
    derivation calls the model, so the wait is announced. Nothing: the run has none to set."""
    policy, checks = run.settings.checks, run.state.checks
    if not policy.on:
        return
    call, note = None, ""
    if policy.derive:
        request, critic = await request_text(run), run.caller.backends["feedback"]
        constrained = run.settings.requests.constrained
        known = DERIVED.get(critic, request, constrained)
        read, unusable = build_checks(stated(request)) if known is None else ([], [])  # a known request: read before
        if known is not None:
            (checks.derived, checks.dropped), note = known, "derived before for the same request: no model call"
        elif not uncovered(request, read):  # code read every instruction-like wording: the model would add none
            said = CODE_READ_ALL if read else ""  # no instruction at all: nothing to say
            checks.derived, checks.dropped, note = read, unusable, _with_unusable(said, unusable)
        else:
            yield ProgressStep(what="checks", text=ANNOUNCED)
            checks.derived, call, note, checks.dropped = await _derive_safely(run, read, unusable)
            if call is not None and call.ok:
                DERIVED.put(critic, request, constrained, (checks.derived, checks.dropped))
    if policy.schema is not None and checks.derived:  # the schema's JSON is the reply: no wording check fits it
        checks.derived, unfit = json_fit(checks.derived)
        checks.dropped = [
            *checks.dropped,
            *(DroppedCheck(check=c.model_dump(mode="json"), reason=UNFIT) for c in unfit),
        ]
        note = "; ".join(
            filter(None, [note, f"{len(unfit)} wording check(s) no JSON reply can pass were dropped" if unfit else ""])
        )
    yield ChecksStep(checks=checks.records(), call=call, note=note, dropped=checks.dropped)


async def _derive_safely(
    run: RunContext, read: list[Instruction], unusable: list[DroppedCheck]
) -> tuple[list[Instruction], CallRecord | None, str, list[DroppedCheck]]:
    """:func:`derive`; a failing backend leaves the run with the checks code read (its next
    call meets the same failure and ends the run there, with its drafts kept)."""
    try:
        return await derive(run, read, unusable)
    except BackendError as exc:
        note = f"the derivation failed ({exc}); the run goes on with the {len(read)} check(s) read from the wording"
        return read, None, _with_unusable(note, unusable), unusable


async def request_text(run: RunContext) -> str:
    """The text the checks are derived from: the request itself, or the rendered generate
    prompt for a task whose template states the instructions."""
    text = run.state.input if run.settings.checks.source == "input" else await run.render("generate")
    return text[:MAX_REQUEST_CHARS]


async def derive(
    run: RunContext, read: list[Instruction], unusable: list[DroppedCheck]
) -> tuple[list[Instruction], CallRecord | None, str, list[DroppedCheck]]:
    """The request's checks: ``read`` (code's, from its wording; ``unusable``: those it
    could not build) and the model's, the derivation's call, a note (how many were dropped,
    or why there are none) and the dropped checks, each with why. A check that cannot be
    built (the wording's "0th paragraph", a 70-character keyword; the model's malformed one)
    or one past the cap is dropped and said, never ending the run."""
    request = await request_text(run)
    prompt = template().render({"input": request}).strip()
    schema = {"type": "object", "properties": {"checks": checks_schema(MAX_DERIVED)}, "required": ["checks"]}
    found, call, error = await run.parsed_call(
        "feedback", 0, prompt, schema if run.settings.requests.constrained else None, _parse, purpose=PURPOSE
    )
    unusable = list(unusable)
    if error is not None:
        note = f"the model gave no usable checks ({error}); {len(read)} read from the request's wording"
        return read, call, _with_unusable(note, unusable), unusable
    listed_all, malformed = found
    unusable += malformed
    kept = [c for c in listed_all if grounded(c, request)]
    ungrounded = [c for c in listed_all if c not in kept]
    listed = [c for c in kept if _subject(c) not in {_subject(r) for r in read}]
    dropped = [DroppedCheck(check=c.model_dump(mode="json"), reason=NOT_STATED) for c in ungrounded]
    return [*read, *listed], call, _with_unusable(dropped_note(ungrounded), unusable), [*unusable, *dropped]


NOT_STATED = "the request does not state it"


def _with_unusable(note: str, unusable: list[DroppedCheck]) -> str:
    """``note``, and the checks that could not be used, each named with why."""
    if not unusable:
        return note
    said = f"{len(unusable)} check(s) read from the request could not be used: {dropped_said(unusable)}"
    return f"{note}; {said}" if note else said


def dropped_note(dropped: list[Instruction]) -> str:
    """The derived checks left out, named: a reader can tell whether the request meant them."""
    if not dropped:
        return ""
    what = "a check" if len(dropped) == 1 else f"{len(dropped)} checks"
    return f"the model also proposed {what} the request does not state, dropped: " + "; ".join(
        c.describe() for c in dropped
    )


# the derived checks a JSON reply can pass as such: the rest (start and end phrases, keywords,
# counts of words or lines, a title, ...) read the request's wording, often text it quotes, and
# no JSON value can pass them (a first draft that validates would still be refined)
JSON_FIT = ("json", "forbidden_words")
UNFIT = "under a JSON Schema: no JSON reply can pass a wording check"


def json_fit(checks: list[Instruction]) -> tuple[list[Instruction], list[Instruction]]:
    """The checks that fit a reply under a JSON Schema, and those left out."""
    fit = [c for c in checks if c.model_dump()["type"] in JSON_FIT]
    return fit, [c for c in checks if c not in fit]


def _subject(check: Instruction) -> tuple[Any, ...]:
    """What a check is about, whatever its numbers: its kind and what it counts or names."""
    data = check.model_dump()
    return (data["type"], data.get("unit"), data.get("word"), data.get("letter"), data.get("letters"))


def _parse(reply: str) -> tuple[list[Instruction], list[DroppedCheck]]:
    """The checks of a reply: ``{"checks": [...]}`` (or a bare list), and the ones left out
    with why (invalid, or past ``MAX_DERIVED``); a reply with no list at all is a ParseError
    (the call is asked again)."""
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
    return build_checks(data, MAX_DERIVED)  # one malformed check is dropped, not the others


def grounded(check: Instruction, request: str) -> bool:
    """Whether the request states the check: its numbers and words are in the request's
    text, with a word naming what it checks (each kind's ``grounded`` says which). A regex
    never is: a request's checks are never regexes (a model's pattern would search each draft
    beside the run's own, past their shared bound: core/saferegex.py)."""
    if not check.from_request:
        return False
    text = request.lower()
    data = check.model_dump()
    if "n" in data and not says_number(text, data["n"]):
        return False
    return check.grounded(text)
