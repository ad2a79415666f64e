"""General chat: answer a conversation's last user message, critique the answer, refine it.

The task behind ``selfrefine/chat`` on the OpenAI-compatible endpoint, and usable from the
CLI (``selfrefine run chat "question"``). Input: a plain request, a transcript whose lines
start with ``System:`` / ``User:`` / ``Assistant:`` (what :func:`conversation_text`
renders from :class:`ChatMessage` records), or a JSON list of ``{"role", "content"}``
messages (or ``{"messages": [...]}``, e.g. a dataset row).

The first draft is the model's own reply: the conversation goes to it as its own messages
(:meth:`Chat.conversation`: the user's system turn kept, the history as turns) through the
model's chat template, with no prompt of the task around it and no system message of the
task's, so one step is exactly what the plain model answers. The critique and the
refinement prompts show the conversation as a transcript ending with the User turn to
answer. An echo is only a word-for-word repeat of the last user message (a request may ask
to rewrite a text it holds, whose answer rightly stays close to it).

Feedback lists concrete problems with their fixes (correctness, completeness, following
the instructions, clarity), asked as ``{"issues": [...]}`` so constrained decoding makes a
small model's critique parse; a plain-text list, or "No issues.", is parsed as well. An
empty list is the stop signal. There is no reference-free verifier. The metric needs a
dataset row's instruction checks as its reference (``{"max_words": 49, "must_not_match":
","}``, :class:`~selfrefine.checks.declared.Checks`; ``benchmarks/data/chat_requests.jsonl``):
the share of them an answer passes. Without checks quality is a judge's call
(``eval --judge``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from ..checks.declared import Checks
from ..core.errors import FeedbackParseError, InputError, TaskError
from ..core.records import Feedback, Verification
from ..task.task import REPAIR_BEST, Capabilities, Task, TaskDefaults, system_message
from .parsing import json_object

Role = Literal["system", "user", "assistant"]
LABELS: dict[str, str] = {"system": "System", "user": "User", "assistant": "Assistant"}
NO_ISSUES = "No issues."
MAX_ISSUES = 6
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"  # a reasoning model's trace in an assistant turn

FEEDBACK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        # caps keep a small critic from rambling past max_tokens and cutting the JSON
        "issues": {"type": "array", "items": {"type": "string", "maxLength": 300}, "maxItems": MAX_ISSUES},
    },
    "required": ["issues"],
    "additionalProperties": False,
}

_TURN = re.compile(r"^(system|user|assistant)[ \t]*:", re.I | re.M)
_USER_LINE = re.compile(r"^user[ \t]*:", re.I | re.M)
# a sentence that says there is nothing to fix ("No issues.", "There are no problems."); not
# "No other issues.", which follows a problem
_NONE_SAID = re.compile(
    r"^\W*(?:verdict\W*)?(?:there\s+(?:are|is)\s+)?no\s+(?:real\s+)?"
    r"(?:issues?|problems?)(?:\s+(?:found|detected|left))?"
    r"(?:\s+(?:in|with)\s+(?:the|this)\s+(?:answer|reply|response))?\W*$|^\W*none\W*$",
    re.I,
)
_SENTENCE_END = re.compile(r"(?<=[.!])\s+|\n")
_ITEM = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")
_FEEDBACK_LABEL = re.compile(r"^\s*(?:feedback|issues?|critique|review)\s*:\s*", re.I)
_DRAFT_LABEL = re.compile(
    r"\A\s*(?:\*\*)?(?:improved\s+answer|answer|assistant|reply|response)(?:\*\*)?\s*:(?:\*\*)?[ \t]*\n?", re.I
)


class ChatMessage(BaseModel):
    """One message of a conversation, as an OpenAI-style client sends it."""

    role: Role
    content: str


def conversation_text(messages: Sequence[ChatMessage]) -> str:
    """The chat task's input text for a conversation.

    One user message (and nothing else): its content. Several messages: a transcript,
    one ``System: …`` / ``User: …`` / ``Assistant: …`` turn per message, turns separated
    by a blank line, the last user turn last. Messages with empty content are left out.
    Raises InputError when no user message remains or the conversation does not end with
    one (the task answers the last user message). An assistant turn's ``<think>`` blocks
    are left out (:func:`without_reasoning`)."""
    messages = [
        m.model_copy(update={"content": without_reasoning(m.content)}) if m.role == "assistant" else m for m in messages
    ]
    turns = [m for m in messages if m.content.strip()]
    if not turns:
        raise InputError("the conversation is empty: send at least one user message with some content")
    if not any(m.role == "user" for m in turns):
        raise InputError("the conversation has no user message: add one for the assistant to answer")
    last = turns[-1].role
    if last != "user":
        raise InputError(
            f"the conversation ends with {_article(last)} {last} message: the chat task answers "
            "the last user message, so end the conversation with it"
        )
    if len(turns) == 1:
        return turns[0].content.strip()
    return "\n\n".join(f"{LABELS[m.role]}: {m.content.strip()}" for m in turns)


def without_reasoning(text: str) -> str:
    """An assistant turn without its reasoning, as reasoning servers drop it from the history:
    every ``<think>…</think>`` block, a leading unterminated ``<think>`` (the rest is
    reasoning), and what precedes a ``</think>`` whose opening tag was the prompt's. Linear in
    the text (``str.find``, no backtracking), whatever a client sends."""
    kept: list[str] = []
    pos = 0
    while (start := text.find(THINK_OPEN, pos)) >= 0:
        end = text.find(THINK_CLOSE, start)
        if end < 0:  # unterminated: all reasoning when it leads, else text that says "<think>"
            if not "".join(kept).strip() and not text[pos:start].strip():
                return ""
            break
        kept.append(text[pos:start])
        pos = end + len(THINK_CLOSE)
    answer = "".join(kept) + text[pos:]
    return answer.rpartition(THINK_CLOSE)[2].strip()


def messages_from_json(text: str) -> list[ChatMessage] | None:
    """Messages from a JSON list of ``{"role", "content"}`` (or ``{"messages": [...]}``);
    None when the text is not that shape (a request that merely contains JSON)."""
    if not text.startswith(("[", "{")):
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if isinstance(data, dict):
        data = data.get("messages")
    if not isinstance(data, list) or not data or not all(isinstance(m, dict) and "role" in m for m in data):
        return None
    try:
        return [ChatMessage.model_validate(m) for m in data]
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise InputError(f"chat messages: {where}: {first['msg']} (roles are system, user, assistant)") from None


def is_transcript(text: str) -> bool:
    """Whether the text is a labelled transcript: its first line starts with a role label
    and some line is a ``User:`` turn (so "System: Linux. How do I …?" stays a request)."""
    return bool(_TURN.match(text)) and bool(_USER_LINE.search(text))


def last_turn_role(text: str) -> str:
    """The role label of a transcript's last turn, lower-cased."""
    return [m.group(1).lower() for m in _TURN.finditer(text)][-1]


def _article(role: str) -> str:
    return "an" if role[0] in "aeiou" else "a"


def prompt_conversation(input: str) -> str:
    """The conversation as the prompts show it: always a transcript ending with a User turn."""
    return input if is_transcript(input) else f"User: {input}"


def transcript_messages(text: str) -> list[ChatMessage]:
    """A prepared input as the conversation's messages: a transcript's turns (a turn begins
    at a line that starts with its label, ``System:`` / ``User:`` / ``Assistant:``, any case;
    it runs to the next such line), a JSON list of messages, or else one user message. Empty
    turns are left out."""
    messages = messages_from_json(text)
    if messages is None and not is_transcript(text):
        messages = [ChatMessage(role="user", content=text)]
    if messages is None:
        starts = list(_TURN.finditer(text))
        ends = [m.start() for m in starts[1:]] + [len(text)]
        messages = [ChatMessage(role=m.group(1).lower(), content=text[m.end() : end]) for m, end in zip(starts, ends)]
    return [m.model_copy(update={"content": m.content.strip()}) for m in messages if m.content.strip()]


class Chat(Task):
    name = "chat"
    description = "General chat: answer a conversation's last user message (the OpenAI-compatible endpoint's task)"
    prompt_dir = "chat"
    metric_name = "share of the row's checks passed (code); rows without checks: eval --judge"
    judge_criteria = (
        "Which reply better answers the last user message of the conversation: more correct, "
        "complete, faithful to every instruction, and clear?"
    )
    stop_description = "feedback lists no issues"
    extra_variables = frozenset({"conversation"})
    # a transcript of about 4,000 tokens: with the drafts and critiques of a few rounds it
    # still fits an 8k context; longer conversations should drop their earliest turns
    max_input_chars = 16_000
    capabilities = Capabilities()  # a metric, from the row's checks; no verifier
    judge_aspects = ("follows", "correct")
    defaults = TaskDefaults(
        # measured best (docs/ifeval.md, issue 45): first drafts one at a time until one passes
        # the request's derived checks (at most 3), decoded under their bans, then one failed
        # check's repair at a time, within 2,000 tokens
        best=REPAIR_BEST,
        best_measured=(
            "IFEval, 120 report prompts: every instruction followed 0.350 -> 0.575 "
            "(29 better, 2 worse) at 3.9x one step's tokens, docs/ifeval.md"
        ),
        system=system_message(
            "a helpful, knowledgeable and careful assistant. Each message shows a conversation between a User "
            "and an Assistant and asks you to write, review or improve the Assistant's reply to the last User message"
        ),
        generic_feedback="Improve the answer: make it correct, complete and clear, and follow every instruction in the conversation.",
        temperature={"generate": 0.7, "feedback": 0.0, "refine": 0.7},
        max_tokens={"generate": 600, "feedback": 300, "refine": 600},
        feedback_schema=FEEDBACK_SCHEMA,
        # a refinement that goes on with the prompt's own pattern (its critique of itself, the
        # next cue) ends there: labels a reply's own text does not use
        stop_sequences={"refine": ["\nFeedback on this version:", "\nNow write the whole improved reply"]},
        max_iterations=3,
        # the request's own instructions become checks (engine/derivation.py), so the drafts
        # are ranked and refined by what code can verify; their findings sit beside the issues
        derive_checks=True,
        checks_from="input",
        verifier_mode="hybrid",
        echo="exact",  # a request may ask to rewrite a text it holds: only a word-for-word repeat is an echo
    )

    def prepare_input(self, text: str) -> str:
        text = super().prepare_input(text)
        messages = messages_from_json(text)
        if messages is not None:
            return super().prepare_input(conversation_text(messages))
        last = last_turn_role(text) if is_transcript(text) else "user"
        if last != "user":
            raise InputError(
                f"the conversation ends with {_article(last)} {last.capitalize()} turn: the chat task "
                "answers the last User turn, so end the conversation with it"
            )
        return text

    def context(self, input: str) -> dict[str, Any]:
        return {"conversation": prompt_conversation(input)}

    def conversation(self, input: str) -> list[dict[str, str]]:
        """The conversation as the model's own messages: draft 0 is the plain model's reply."""
        return [m.model_dump() for m in transcript_messages(input)]

    def parse_draft(self, text: str) -> str:
        # a small model sometimes repeats the prompt's cue ("Improved answer:") first
        return super().parse_draft(_DRAFT_LABEL.sub("", text.strip(), count=1))

    def parse_feedback(self, text: str, *, input: str, draft: str) -> Feedback:
        raw = text.strip()
        if not raw:
            raise FeedbackParseError("the model returned empty feedback")
        issues = _json_issues(raw)
        if issues is None:
            issues = _text_issues(raw)
        issues = [i for i in dict.fromkeys(issues) if not _NONE_SAID.match(_SENTENCE_END.split(i)[0])][:MAX_ISSUES]
        # the refiner and the trace see the cleaned list; the raw reply stays in the call record
        return Feedback(
            text="\n".join(f"- {i}" for i in issues) if issues else NO_ISSUES,
            done=not issues,
            fields={"issues": issues},
        )

    def combine(self, critique: Feedback, check: Verification, *, input: str, draft: str) -> Feedback:
        """The critic's issues and each failed check's finding as one list (an echo's finding
        never stands beside "No issues."): the refiner sees what code found wrong in the
        critic's own format; done only when both agree. A critique that did not parse is
        combined as every task combines one."""
        issues = critique.fields.get("issues")
        if not isinstance(issues, list):
            return super().combine(critique, check, input=input, draft=draft)
        found = [*issues, *_failed_lines(check)]
        text = "\n".join(f"- {i}" for i in found) if found else critique.text
        done = bool(critique.done) and check.passed is not False
        update = {"text": text, "done": done, "source": "hybrid", "verification": check}
        return critique.model_copy(update={**update, "fields": {**critique.fields, "issues": found}})

    def metric(self, input: str, output: str, reference: Any = None) -> float | None:
        """The share of the row's instruction checks (the reference) the answer passes; None
        without checks. Only the metric sees them: the critic and the verifier never do."""
        if reference is None:
            return None
        return instruction_checks(reference)(input, output).score

    def says_done(self, text: str) -> bool:
        """For feedback that failed to parse: done only when it plainly says "no issues"
        and lists nothing."""
        return _says_none(text) and not any(_ITEM.match(ln) for ln in text.splitlines())


def instruction_checks(reference: Any) -> Checks:
    """A chat row's checks (a mapping such as ``{"max_words": 49}``) as :class:`Checks`; a
    TaskError naming the first problem otherwise."""
    if isinstance(reference, Checks):
        return reference
    if not isinstance(reference, Mapping):
        raise TaskError(
            f"chat's reference is a mapping of checks such as {{'max_words': 49}}, not {type(reference).__name__}"
        )
    return Checks.parse(reference)


def _failed_lines(check: Verification) -> list[str]:
    """The findings of the failed checks, one per line (the run's checks write "- finding")."""
    if check.passed is not False:
        return []
    return [ln.strip().removeprefix("- ").strip() for ln in check.text.splitlines() if ln.strip()]


def _json_issues(raw: str) -> list[str] | None:
    """The issues of a JSON critique; None when the reply holds no JSON object."""
    if "{" not in raw:
        return None
    data = json_object(raw, cut_off_is_error=True)
    if data is None:
        raise FeedbackParseError('feedback JSON does not parse; reply with {"issues": ["problem and fix", ...]}')
    if "issues" not in data:
        raise FeedbackParseError('feedback JSON lacks "issues"; reply with {"issues": ["problem and fix", ...]}')
    items = data["issues"]
    if isinstance(items, str):
        items = items.splitlines()
    if not isinstance(items, list):
        raise FeedbackParseError('"issues" must be a list of strings')
    return [_item_text(i) for i in items if _item_text(i)]


def _item_text(item: Any) -> str:
    """One issue as one line; an object form ({"problem": …, "fix": …}) is joined."""
    if isinstance(item, dict):
        item = ": ".join(str(v).strip() for v in item.values() if str(v).strip())
    return " ".join(str(item).split())


def _text_issues(raw: str) -> list[str]:
    """Issues of a plain-text critique: its list items; without any, none when a sentence
    says "No issues", else the whole critique as one issue."""
    lines = [_FEEDBACK_LABEL.sub("", ln).strip() for ln in raw.splitlines()]
    lines = [ln for ln in lines if ln]
    items = [_ITEM.sub("", ln).strip() for ln in lines if _ITEM.match(ln)]
    if items:
        return items
    return [] if _says_none(raw) else [" ".join(lines)]


def _says_none(text: str) -> bool:
    """Whether one sentence of the text is a plain "no issues" verdict."""
    return any(_NONE_SAID.match(s) for s in _SENTENCE_END.split(text.strip()) if s.strip())
