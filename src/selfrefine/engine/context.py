"""What the loop and its drafting parts share for one run: the task, the resolved settings,
the run's state (:class:`~.state.RunState`) and its calls (:class:`~.calls.Caller`); and the
steps every way of drafting uses: a request, a parsed call with its retries, a draft, a
critique, the task's check.

- an unparsable draft or feedback is re-requested at that step only (resampled with a new
  seed), never by restarting the example; after the retries the raw text is kept and the
  feedback carries ``parse_error``;
- a draft's first line that announces it ("Sure! Here is the limerick:") is dropped before
  the task parses it (:mod:`.preamble`);
- draft 0 of a task that answers a conversation as it is (``Task.conversation``: chat) is
  asked with the conversation's own messages (:class:`Conversation`), through the model's
  chat template, without the task's system prompt: what the plain model replies.
- under a JSON Schema (``json_schema``, ``response_model``) a draft's request (generate,
  refine) is decoded under it where the backend can, and its system message says the shape
  asked for (the prompts themselves are the task's, so each stays a prefix of the next); a
  draft is the JSON of its reply (a code fence or a preamble around it is dropped).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from functools import cached_property
from typing import Any, TypeVar

from ..backends.base import CompletionRequest, Turn
from ..checks.incomplete import demoted, echo_check
from ..checks.instructions import Instruction, InstructionChecks
from ..core.bans import TokenBan, joined
from ..core.errors import ParseError, TaskError
from ..core.records import CallRecord, Candidate, Feedback, Role, Verification
from ..core.seeds import attempt_seed
from ..core.structured import json_text, schema_note
from ..task.preamble import without_preamble
from ..task.task import Task
from .calls import Caller
from .run_checks import combined
from .scoring.scoreboard import Scoreboard
from .settings import Settings
from .state import RunState
from .verify_threads import verify_in_thread

T = TypeVar("T")
DRAFT_ROLES = ("generate", "refine")  # the roles whose replies are drafts


class Conversation(str):
    """Draft 0's prompt where the task answers a conversation as it is: as a str, the
    ``generate`` template's prompt (what a drafter passes on and a budget prices); its
    ``turns`` and ``last`` (the last user message) are what the request sends."""

    turns: list[Turn]
    last: str

    @classmethod
    def of(cls, text: str, messages: list[dict[str, str]]) -> Conversation:
        """``messages`` (``{"role", "content"}``, the last a user message) behind ``text``; a
        TaskError names a conversation that cannot be sent."""
        try:
            turns = [Turn.model_validate(m) for m in messages]
        except ValueError as exc:
            raise TaskError(f"Task.conversation gave a message that is not {{'role', 'content'}}: {exc}") from None
        if not turns or turns[-1].role != "user":
            raise TaskError("Task.conversation must end with a user message, the one draft 0 answers")
        prompt = cls(text)
        prompt.turns, prompt.last = turns[:-1], turns[-1].content
        return prompt


class RunContext:
    """One run's task, settings, state and caller, and the model steps on them."""

    def __init__(self, task: Task, settings: Settings, state: RunState, caller: Caller) -> None:
        self.task, self.settings, self.state, self.caller = task, settings, state, caller
        # whether each draft is verified as it arrives: set by the run from what its parts need
        self.verify_every_draft = False

    def at_cap(self, refinements: int) -> bool:
        """Whether ``refinements`` reach the refinement cap."""
        return refinements >= self.settings.stops.max_iterations

    # -- prompts ---------------------------------------------------------------------------

    async def render(self, template: str, **variables: Any) -> str:
        """The task's template rendered for this run's input. A task file's template renders in
        a thread: it is bounded (template_bounds.py), and its work never holds the event loop.
        A packaged template (or one the library's caller wrote) renders here: its work is linear
        in the bounded texts it is given, and a thread hop per render cost ~0.2 ms a call."""
        found = self.task.declared.templates.get(template)
        if found is not None and found.origin is None:
            return self.task.render(template, self.state.input, **variables)
        return await asyncio.to_thread(self.task.render, template, self.state.input, **variables)

    async def first_prompt(self) -> str:
        """Draft 0's prompt: the ``generate`` template's, or the task's conversation (a
        :class:`Conversation`) where the task answers one as it is."""
        text = await self.render("generate")
        messages = self.task.conversation(self.state.input)
        return text if messages is None else Conversation.of(text, messages)

    @cached_property
    def asked(self) -> str:
        """What the input asks, as an echo is measured against it: the conversation's last
        user message, or the input."""
        messages = self.task.conversation(self.state.input)
        return messages[-1]["content"] if messages else self.state.input

    async def refine_prompt(self) -> str:
        """The prompt that refines the current draft with its feedback and the history."""
        state, t = self.state, self.state.current
        current = state.iterations[t]
        role = "refine"
        if self.settings.feedback_mode == "none" and "refine_nofeedback" in self.task.declared.templates:
            role = "refine_nofeedback"
        feedback = current.feedback.text if current.feedback else ""
        history = state.history(self.settings.history)
        return await self.render(role, draft=current.draft, feedback=feedback, history=history, iteration=t)

    def request(
        self, role: Role, prompt: str, schema: dict[str, Any] | None, attempt: int, reseed: int = 0
    ) -> CompletionRequest:
        """The request of one attempt: a parse retry resamples (a deterministic model would
        repeat itself), a ``reseed`` > 0 seeds that much further on (:mod:`~selfrefine.core.seeds`)."""
        requests = self.settings.requests
        temperature = requests.temperature[role]
        if attempt > 1:
            temperature = max(temperature, 0.7)
        system, note = self.task.declared.system, ""
        if role in DRAFT_ROLES and self.settings.checks.schema is not None:  # a draft under the run's schema
            note = schema_note(self.settings.checks.schema.schema)
            system, schema = f"{system}\n\n{note}" if system else note, self.settings.draft_schema()
        asked: dict[str, Any] = {"prompt": prompt, "system": system}
        if isinstance(prompt, Conversation):  # the conversation as it is, with no system prompt of ours
            asked = {"prompt": prompt.last, "turns": with_system_note(prompt.turns, note)}
        return CompletionRequest(
            role=role,
            **asked,
            max_tokens=requests.max_tokens[role],
            temperature=temperature,
            seed=attempt_seed(requests.seed, attempt, reseed),
            stop=requests.stop_sequences[role],
            json_schema=schema,
            ban=self.ban() if role in DRAFT_ROLES and self.settings.requests.ban_tokens else None,
        )

    def ban(self) -> TokenBan | None:
        """What the run's checks forbid outright, refused at a draft's decoding (core/bans.py)."""
        return joined(c.ban() for c in self._start_checks())

    # -- calls -----------------------------------------------------------------------------

    async def draft(self, role: Role, t: int, prompt: str) -> tuple[str, CallRecord]:
        """A parsed draft; after the parse retries, the raw reply, or when that is empty the
        draft being refined (an empty refinement then counts as unchanged: "no change").
        Each refine call is seeded one further per rejected refinement, so a sampled retry
        of the same draft is a new sample (0 keeps the paper's seeds)."""
        state = self.state
        reseed = state.rejections() if role == "refine" else 0  # a retried refinement is a new sample
        draft, call, error = await self.parsed_call(role, t, prompt, None, self.parse_draft, reseed, stream=True)
        if error is None:
            return draft, call
        return raw_reply(call) or (state.parent().draft if state.iterations else ""), call

    async def critique(self, t: int, draft: str | None = None, transcript: list[int] | None = None) -> Feedback:
        """The critic on draft t (or on ``draft``, a sample for step t, with the transcript the
        prompt will have once it is step t's draft: its critique is then reused as is).
        A sample's critique is not streamed: it may never be the step's feedback."""
        state, task = self.state, self.task
        own = draft is None
        text = state.iterations[t].draft if draft is None else draft
        history = state.history(self.settings.history, transcript)
        prompt = await self.render("feedback", draft=text, history=history, iteration=t)
        schema = task.declared.defaults.feedback_schema if self.settings.requests.constrained else None

        def parse(reply: str) -> Feedback:
            return task.parse_feedback(whole_sentences(reply, schema), input=state.input, draft=text)

        feedback, call, error = await self.parsed_call("feedback", t, prompt, schema, parse, stream=own)
        if error is None:
            return feedback
        raw = raw_reply(call)
        return Feedback(text=raw, done=task.says_done(raw), parse_error=error)

    async def parsed_call(
        self,
        role: Role,
        t: int,
        prompt: str,
        schema: dict[str, Any] | None,
        parse: Callable[[str], T],
        reseed: int = 0,
        *,
        stream: bool = False,
        purpose: str | None = None,
    ) -> tuple[Any, CallRecord, str | None]:
        """Call, parse; on a parse error re-ask this step only. Returns (value, call, error);
        ``stream``: each attempt's reply goes to the caller's sink as it is written;
        ``purpose``: what the call is for besides its role's step (the derivation's "checks")."""
        error = None
        for attempt in range(1, self.settings.requests.parse_retries + 2):
            request = self.request(role, prompt, schema, attempt, reseed).model_copy(update={"purpose": purpose})
            [(response, call)] = await self.caller.call(role, t, request, stream=stream, purpose=purpose)
            try:
                return parse(response.text), call, None
            except ParseError as exc:
                error = str(exc)
                self.state.log.failed(call, f"parse: {error}")  # an unusable reply is a failed attempt
        return None, call, error

    def parse_draft(self, text: str, way: str | None = None) -> str:
        """A reply as a draft: its preamble dropped (:mod:`.preamble`), then parsed by the task
        (as written its ``way``, where the run's ways drew it); under a JSON Schema, the JSON in it."""
        text = without_preamble(text, self._start_checks())
        draft = self.task.parse_draft(text) if way is None else self.task.parse_way(way, text)
        return json_text(draft) if self.settings.checks.schema is not None else draft

    def _start_checks(self) -> list[Instruction]:
        """The checks a draft's first line may be asked for by (:mod:`.preamble` keeps it):
        the run's, and a task file's own list of checks."""
        own = getattr(
            self.task.declared.verifier, "fn", None
        )  # a task file's list: FunctionVerifier(InstructionChecks)
        return [*self.state.checks.all, *(own.checks if isinstance(own, InstructionChecks) else ())]

    # -- checks ----------------------------------------------------------------------------

    @property
    def board(self) -> Scoreboard:
        """The run's scores (:mod:`.scoreboard`)."""
        return self.state.board

    async def verify(self, t: int) -> Verification | None:
        """The task's check of draft t: computed once per distinct draft, shown on its record."""
        it = self.state.iterations[t]
        key = await self.board.check(it.draft, it.finish_reason, self.checked)
        self.board.placed(t, key)
        return self.board.verification(key)

    async def scored(self, candidates: list[Candidate], finish_reasons: list[str | None]) -> None:
        """Samples checked (at once, each distinct draft once) and counted on the board in order."""
        keys = await asyncio.gather(
            *(self.board.check(c.draft, f, self.checked) for c, f in zip(candidates, finish_reasons))
        )
        for candidate, key in zip(candidates, keys):
            self.board.cast(candidate, key)

    async def checked(self, draft: str, finish_reason: str | None) -> Verification | None:
        """The code's check of a draft: the task's verifier (in a thread of its own, within the
        run's time budget: :mod:`.verify_threads`) and the run's own checks (:mod:`.run_checks`),
        demoted when its reply was cut off, failed when it echoes the request
        (:func:`~.incomplete.echo_check`, by the task's ``echo``)."""
        budget = self.settings.calls.max_seconds
        own = await verify_in_thread(self.task, self.state.input, draft, budget, self.state.log)
        checks = self.state.checks
        requested = await asyncio.to_thread(checks.verify, draft) if checks.active else None
        check = demoted(combined(own, requested), finish_reason)
        echo = self.task.declared.defaults.echo
        if len(draft) + len(self.asked) <= INLINE_ECHO_CHARS:  # microseconds: a thread hop costs more
            return echo_check(check, draft, self.asked, echo)
        # linear, but on a long draft still milliseconds of Python: off the event loop
        return await asyncio.to_thread(echo_check, check, draft, self.asked, echo)


# texts up to this many characters are checked for an echo on the loop (~0.4 ms at most,
# measured); longer ones in a thread (8,000 words took 0.1 s)
INLINE_ECHO_CHARS = 4_000


def whole_sentences(reply: str, schema: dict[str, Any] | None) -> str:
    """A critique decoded under ``schema`` with each string the grammar cut at its
    ``maxLength`` ended at its last whole sentence (or word), so no feedback field stops
    mid-sentence; any other reply as it came."""
    if schema is None or not reply.lstrip().startswith("{"):
        return reply
    try:
        data = json.loads(reply)
    except ValueError:
        return reply
    if not isinstance(data, dict):
        return reply
    mended = _mended(data, schema)
    return reply if mended == data else json.dumps(mended, ensure_ascii=False)


def _mended(value: Any, schema: Any) -> Any:
    if not isinstance(schema, dict):
        return value
    if isinstance(value, dict):
        props = schema.get("properties", {})
        return {k: _mended(v, props.get(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [_mended(v, schema.get("items")) for v in value]
    limit = schema.get("maxLength")
    if isinstance(value, str) and isinstance(limit, int) and len(value) >= limit:
        return _sentence_cut(value)
    return value


def _sentence_cut(text: str) -> str:
    """A text cut at a length limit, back to its last sentence end (or, with none, its last
    whole word followed by "…")."""
    ends = [i for i, ch in enumerate(text) if ch in ".!?" and (i + 1 == len(text) or text[i + 1].isspace())]
    if ends and ends[-1] >= len(text) // 3:
        return text[: ends[-1] + 1]
    head = text.rsplit(None, 1)[0] if " " in text.strip() else text
    return head.rstrip(" ,;:") + "…"


def with_system_note(turns: list[Turn], note: str) -> list[Turn]:
    """A conversation's turns with ``note`` (the schema's shape) ending its system turn, or
    as a system turn of its own ahead of the rest; unchanged without a note."""
    if not note:
        return turns
    if turns and turns[0].role == "system":
        return [Turn(role="system", content=f"{turns[0].content}\n\n{note}"), *turns[1:]]
    return [Turn(role="system", content=note), *turns]


def raw_reply(call: CallRecord) -> str:
    return (call.response or "").strip()


def verifier_feedback(check: Verification | None) -> Feedback:
    """The verifier's findings as a draft's feedback (a rejected refinement's)."""
    return Feedback(text=check.text if check is not None else "", source="verifier", verification=check)
