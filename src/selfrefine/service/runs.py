"""One request's run: the loop's steps guarded against a client that leaves, and the steps
turned into OpenAI chat replies (whole, or as server-sent chunks) or native SSE events."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Literal, TypeVar

from starlette.requests import Request

from ..checks.incomplete import cut_off
from ..core.records import (
    CallStep,
    ChecksStep,
    DecisionStep,
    DeltaStep,
    DraftStep,
    FeedbackStep,
    ProgressStep,
    ResultStep,
    RunResult,
    Step,
    StopReason,
)
from ..core.wording import feedback_text, output_standing, score_note, typed_reply, verifier_note
from .reasoning import THINK_CLOSE, THINK_OPEN, ReasoningFormat, replay
from .schemas import (
    AssistantMessage,
    ChatCompletion,
    ChatCompletionChunk,
    Choice,
    ChunkChoice,
    Delta,
    UsageOut,
)

T = TypeVar("T")


class ClientGone(Exception):
    """The client closed the connection; its run was cancelled."""


async def _disconnected(request: Request) -> None:
    """Returns once the client has closed the connection (the body is already read)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


async def until_disconnected(request: Request, steps: AsyncIterator[T]) -> AsyncIterator[T]:
    """The steps (or events), until the client leaves: then the step in progress (a model call) is
    cancelled, the loop's generator is closed, so no further call starts, and ClientGone is
    raised. Server-sent writes alone would notice only at the next write, after the call."""
    watcher = asyncio.ensure_future(_disconnected(request))
    following: asyncio.Future[T] | None = None
    try:
        while True:
            following = asyncio.ensure_future(steps.__anext__())
            await asyncio.wait({following, watcher}, return_when=asyncio.FIRST_COMPLETED)
            if not following.done():
                raise ClientGone("the client disconnected; the run was cancelled")
            try:
                step = following.result()
            except StopAsyncIteration:
                return
            yield step
    finally:
        watcher.cancel()
        # however this ends, the step in progress stops too: Starlette may see the disconnect
        # first and cancel the response's task here, which would leave that task running on
        # (its call finished, unasked for); the cancel reaches it even if the wait below is cut
        if following is not None and not following.done():
            following.cancel()
            await asyncio.gather(following, return_exceptions=True)
        await steps.aclose()


async def cancel_on_disconnect(request: Request, work: Callable[[], Awaitable[T]]) -> T:
    """Await ``work()``; if the client leaves first, cancel it and raise ClientGone."""
    task = asyncio.ensure_future(work())
    watcher = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            raise ClientGone("the client disconnected; the run was cancelled")
        return task.result()
    finally:
        watcher.cancel()
        task.cancel()  # a no-op once done; else (this handler was cancelled) the run stops too


KEEP_ALIVE = ": keep-alive\n\n"  # an SSE comment: clients skip it (the openai SDK, EventSource)
FIRST_KEEP_ALIVE_SECONDS = 1.0  # the longest a stream waits for its first sign of progress


async def detached(events: AsyncIterator[str], keep_alive: float | None = None) -> AsyncIterator[str]:
    """``events`` computed in a task of their own, apart from their sending: a run goes on,
    ends and frees its slot while a client that stopped reading has a full socket (its
    events wait here, bounded by the run's own limits, until the connection's send deadline
    drops that client). Closing this generator (the client left) cancels the run.

    With ``keep_alive`` (seconds), a comment is sent whenever the events have been silent
    that long, and one at once after the first event (the role chunk, which says nothing of
    progress) or after a second without one (the run waits for a slot), so that a client, a
    proxy or a person sees the request is alive while a model call takes minutes."""
    queue: asyncio.Queue[str | None] = asyncio.Queue()

    async def pump() -> None:
        try:
            async for event in events:
                queue.put_nowait(event)
        finally:
            queue.put_nowait(None)

    task = asyncio.ensure_future(pump())
    try:
        if keep_alive is None:
            while (event := await queue.get()) is not None:
                yield event
        else:
            async for event in _kept_alive(queue, keep_alive):
                yield event
        await task  # pump's own failure, if any
    finally:
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def _kept_alive(queue: asyncio.Queue[str | None], interval: float) -> AsyncIterator[str]:
    """The queue's events, with a KEEP_ALIVE comment in each silence (``detached``)."""
    wait, started = min(interval, FIRST_KEEP_ALIVE_SECONDS), False
    while True:
        try:
            event = await asyncio.wait_for(queue.get(), wait)
        except TimeoutError:
            yield KEEP_ALIVE
            wait = interval
            continue
        if event is None:
            return
        yield event
        if not started and queue.empty():  # the role chunk: the run's first progress may be minutes away
            yield KEEP_ALIVE
        started, wait = True, interval


# -- the trajectory ---------------------------------------------------------------------------


def trajectory(result: RunResult, decisions: list[DecisionStep]) -> dict[str, Any]:
    """What the ``selfrefine`` field of a reply carries: drafts with their feedback, the
    decisions in order, which draft was returned, why the loop stopped, and the costs."""
    data = result.model_dump(mode="json", exclude={"input", "calls"})
    data["decisions"] = [d.model_dump(mode="json", exclude={"kind"}) for d in decisions]
    return data


def output_finish(result: RunResult) -> Literal["stop", "length"]:
    """The answer's finish reason for API clients: "length" when the returned draft was cut
    off at the token limit, as a plain chat completion says of a reply cut there."""
    if result.selected is not None and cut_off(result.iterations[result.selected].finish_reason):
        return "length"
    return "stop"


def refusal(result: RunResult) -> str | None:
    """Under a response_format, why the returned output does not validate against its schema
    (its last check's errors); None where it does, or where there is no schema."""
    if result.config.json_schema is None or result.parsed is not None or (result.output or "").strip() == "null":
        return None
    check = result.iterations[result.selected].verification if result.selected is not None else None
    errors = " ".join(check.text.split()) if check is not None else "no draft was checked"
    drafts = sum(it.accepted for it in result.iterations)
    return f"the reply does not validate against the response_format's schema after {drafts} draft(s): {errors}"


def usage_of(result: RunResult) -> UsageOut:
    u = result.usage
    return UsageOut(prompt_tokens=u.prompt_tokens, completion_tokens=u.completion_tokens, total_tokens=u.total_tokens)


def reasoning_text(step: Step) -> str | None:
    """A step as the 'thinking' a chat UI shows; None for steps that are not shown."""
    if isinstance(step, ProgressStep):  # work that takes a while has started: said at once
        return f"{step.text}\n\n"
    if isinstance(step, ChecksStep):
        if not step.checks and not step.note:  # nothing to check and nothing to say: as a whole reply shows it
            return None
        said = "\n".join(f"- {c.says} ({c.source})" for c in step.checks) or "- none: no instruction code can check"
        note = f"\n({step.note})" if step.note else ""
        return f"### Checks of every draft\n{said}{note}\n\n"
    if isinstance(step, DraftStep):
        title = "Draft 0 (first answer)" if step.iteration == 0 else f"Draft {step.iteration} (refined)"
        if len(step.candidates) > 1:
            title += f", best of {len(step.candidates)} samples"
        if not step.accepted:
            title += ", rejected: not better than the draft it refines"
        return f"### {title}\n{step.draft.strip()}\n\n{_samples_text(step)}"
    if isinstance(step, FeedbackStep):
        fb = step.feedback
        if fb.source == "none":
            return None
        score = f" ({score_note(fb)})" if fb.total is not None else ""
        # a typed (JSON) critique reads as its fields, one per line, as in the CLI's live view
        return f"### Feedback on draft {step.iteration}{score}\n{feedback_text(fb).strip()}\n\n"
    if isinstance(step, DecisionStep):
        if step.stop:
            reason = step.reason.value if step.reason is not None else "stop"
            return f"→ stop ({reason}){': ' + step.detail if step.detail else ''}\n\n"
        detail = "" if step.detail in ("", "refine") else f": {step.detail}"  # "refine" says nothing more
        return f"→ refine draft {step.iteration}{detail}\n\n"
    if isinstance(step, CallStep) and not step.call.ok:
        return f"(a {step.call.role} call failed: {step.call.error})\n\n"
    if isinstance(step, ResultStep) and step.result.fails is not None:  # the run had checks: its last word
        return f"{output_standing(step.result.fails)}\n\n"
    return None


def _samples_text(step: DraftStep) -> str:
    """The losing samples of a step under the chosen one, each with its verifier score."""
    lines = []
    for i, cand in enumerate(step.candidates, 1):
        if cand.chosen:
            continue
        note = verifier_note(cand.verification, cand.way)
        lines.append(f"- sample {i} ({note}, not chosen): {' '.join(cand.draft.split())}")
    return "\n".join(lines) + "\n\n" if lines else ""


class StreamedTrace:
    """The reasoning text of a streamed reply, step by step: a draft or critique whose call
    streamed is sent piece by piece as it is written, under the header its whole step has;
    its step then adds only what the pieces did not say (a critique's score, the losing
    samples, a verifier's findings combined with the critique). Other steps: as whole."""

    def __init__(self) -> None:
        self.open: tuple[str, int, int] | None = None  # the call whose pieces are being sent
        self.streamed: tuple[str, int] | None = None  # (draft|feedback, iteration) sent in pieces
        self.pieces = ""
        self.sent = 0  # the characters of a critique's pieces sent (a JSON one's are held back)

    def text(self, step: Step) -> str | None:
        if isinstance(step, DeltaStep):
            key = (step.role, step.iteration, step.attempt)
            head = ""
            if key != self.open:  # a new call, or a retry of one: a block of its own
                head = self._close() + _delta_header(step)
                self.open, self.pieces, self.sent = key, "", 0
                # a step's samples are each shown whole as they come; the step then says which was kept
                what = "feedback" if step.role == "feedback" else "draft"
                self.streamed = (what, step.iteration) if step.sample is None else None
            self.pieces += step.text
            if step.role != "feedback":
                return head + step.text
            # a critique written as JSON is held back: its step sends it read as its fields
            if typed_reply(self.pieces) is not False:
                return head or None
            sent, self.sent = self.sent, len(self.pieces)
            return head + self.pieces[sent:]
        close = self._close()
        if isinstance(step, CallStep):  # a failed attempt, reported before its step's retry ends
            return close + (reasoning_text(step) or "")
        streamed, self.streamed = self.streamed, None
        if isinstance(step, DraftStep) and streamed == ("draft", step.iteration):
            return close + self._rest(step.draft) + _samples_text(step)
        if isinstance(step, FeedbackStep) and streamed == ("feedback", step.iteration):
            fb = step.feedback
            score = f"({score_note(fb)})\n\n" if fb.total is not None else ""
            read = feedback_text(fb)  # a typed (JSON) critique, held back as written, is read as text
            if typed_reply(self.pieces) is not False:  # nothing of it sent yet but its header
                return f"{read.strip()}\n\n{score}"
            rest = self._rest(fb.text) if read == fb.text else f"Read as:\n{read.strip()}\n\n"
            return close + rest + score
        return close + (reasoning_text(step) or "")

    def _close(self) -> str:
        """The end of the block being streamed, if one is."""
        if self.open is None:
            return ""
        self.open = None
        return "\n\n"

    def _rest(self, text: str) -> str:
        """What the whole step says beyond what its pieces said (the pieces are the raw
        reply, the step its parsed text: a parsed draft that differs adds nothing)."""
        whole, said = text.strip(), self.pieces.strip()
        rest = whole[len(said) :].strip() if whole.startswith(said) else ""
        return f"{rest}\n\n" if rest else ""


def _delta_header(step: DeltaStep) -> str:
    again = f", attempt {step.attempt}" if step.attempt > 1 else ""
    if step.sample is not None:  # one of the step's samples, not a retry
        again = f", sample {step.sample}"
    if step.role == "feedback":
        return f"### Feedback on draft {step.iteration}{again}\n"
    title = "Draft 0 (first answer)" if step.iteration == 0 else f"Draft {step.iteration} (refined)"
    return f"### {title}{again}\n"


async def collect(steps: AsyncIterator[Step]) -> tuple[RunResult, list[DecisionStep]]:
    """Run to the end: the result and the decisions taken on the way."""
    decisions: list[DecisionStep] = []
    result = None
    async for step in steps:
        if isinstance(step, DecisionStep):
            decisions.append(step)
        elif isinstance(step, ResultStep):
            result = step.result
    if result is None:  # astream always ends with a ResultStep; guard the invariant loudly
        raise RuntimeError("the run ended without a result")
    return result, decisions


class Completion:
    """Builds the replies of one chat completion request."""

    def __init__(self, model: str, reasoning_format: ReasoningFormat = "reasoning_content") -> None:
        self.model = model
        self.id = f"chatcmpl-{uuid.uuid4().hex}"
        self.created = int(time.time())
        self.reasoning_format = reasoning_format

    def whole(self, result: RunResult, decisions: list[DecisionStep]) -> ChatCompletion:
        trace = (
            ""
            if self.reasoning_format == "none"
            else "".join(filter(None, map(reasoning_text, replay(result, decisions))))
        )
        if self.reasoning_format == "think":
            message = AssistantMessage(content=f"{THINK_OPEN}{trace}{THINK_CLOSE}{result.output}")
        elif self.reasoning_format == "reasoning_content":
            message = AssistantMessage(content=result.output, reasoning_content=trace or None)
        else:
            message = AssistantMessage(content=result.output)
        message.refusal = refusal(result)
        return ChatCompletion(
            id=self.id,
            created=self.created,
            model=self.model,
            choices=[Choice(message=message, finish_reason=output_finish(result))],
            usage=usage_of(result),
            selfrefine=trajectory(result, decisions),
        )

    def chunk(self, delta: Delta, **fields: Any) -> str:
        finish = fields.pop("finish_reason", None)
        choices = [] if fields.pop("no_choices", False) else [ChunkChoice(delta=delta, finish_reason=finish)]
        chunk = ChatCompletionChunk(id=self.id, created=self.created, model=self.model, choices=choices, **fields)
        return sse(chunk.model_dump_json(exclude_none=True))

    async def stream(self, steps: AsyncIterator[Step], include_usage: bool) -> AsyncIterator[str]:
        """Reasoning deltas as the loop runs, then the returned output as content, the
        finish chunk (with the trajectory), the usage chunk if asked, and [DONE]."""
        think = self.reasoning_format == "think"
        yield self.chunk(Delta(role="assistant", content=THINK_OPEN if think else ""))
        decisions: list[DecisionStep] = []
        trace = StreamedTrace()
        async for step in steps:
            if isinstance(step, DecisionStep):
                decisions.append(step)
            if isinstance(step, ResultStep):
                result = step.result
                if result.output is None:  # not even a first draft: the plain reply's error, in-band
                    yield error_event(no_answer(result, decisions), *no_answer_kind(result)[1:])
                    break
                said = trace.text(step) if self.reasoning_format != "none" else None
                if said:  # the checks the output still fails, the trace's last word
                    yield self.chunk(Delta(content=said) if think else Delta(reasoning_content=said))
                yield self.chunk(Delta(content=f"{THINK_CLOSE}{result.output}" if think else result.output))
                if (refused := refusal(result)) is not None:
                    yield self.chunk(Delta(refusal=refused))
                yield self.chunk(Delta(), finish_reason=output_finish(result), selfrefine=trajectory(result, decisions))
                if include_usage:
                    yield self.chunk(Delta(), no_choices=True, usage=usage_of(result))
                break
            text = trace.text(step) if self.reasoning_format != "none" else None
            if text:
                yield self.chunk(Delta(content=text) if think else Delta(reasoning_content=text))
        yield sse("[DONE]")


# the request's option that bounds each budget a run can stop on before its first draft
_BUDGET_OPTIONS = {StopReason.TIME_BUDGET: "max_seconds", StopReason.TOKEN_BUDGET: "max_total_tokens"}


def no_answer(result: RunResult, decisions: list[DecisionStep]) -> str:
    """Why a run returned no draft at all, in words: its error, else its stop and the stop's
    detail (a budget spent before draft 0 has no error: it was a bare None), and which
    option to raise when a budget stopped it."""
    stop = next((d for d in reversed(decisions) if d.stop), None)
    why = result.error or (stop.detail if stop is not None else "") or "no draft was made"
    option = _BUDGET_OPTIONS.get(result.stop_reason)
    hint = f"; give the run more room (selfrefine.{option}, capped by the server)" if option else ""
    return f"the run produced no answer: it stopped ({result.stop_reason.value}) before a first draft: {why}{hint}"


def no_answer_kind(result: RunResult) -> tuple[int, str, str]:
    """The status, error type and code of a run with no draft: a budget the request set (or
    the server capped) spent before draft 0 is the request's to change (422, the option named
    in the message); anything else failed on the model's side (502)."""
    if result.error is None and result.stop_reason in _BUDGET_OPTIONS:
        return 422, "invalid_request_error", "budget_too_small"
    return 502, "backend_error", "no_output"


def sse(data: str) -> str:
    return f"data: {data}\n\n"


def error_event(message: str, type_: str, code: str) -> str:
    """An error after the stream started (the status is already 200): OpenAI's shape."""
    return sse(json.dumps({"error": {"message": message, "type": type_, "code": code}}))


async def step_events(steps: AsyncIterator[Step]) -> AsyncIterator[str]:
    """``/v1/refine`` streaming: every typed step as one JSON event, then [DONE]."""
    async for step in steps:
        yield sse(step.model_dump_json())
    yield sse("[DONE]")
