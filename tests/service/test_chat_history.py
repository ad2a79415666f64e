"""A follow-up's history reaches the model without the earlier replies' ``<think>`` traces.

Issue 30 item 10: with ``serve --reasoning-format think`` a reply's content starts with the
refinement trace in ``<think>…</think>``; a client that continues the conversation
(``llm -c``) sends that content back as the assistant turn, and the trace went into the
next prompt (259 vs 182 prompt tokens for one follow-up). Reasoning servers drop it from
the history; so does ``conversation_text``. Checked on a real server on 127.0.0.1 whose
fake model records every prompt, and on the function itself."""

from __future__ import annotations

import pytest
import test_serve

from selfrefine import FakeBackend
from selfrefine.tasks.chat import ChatMessage, conversation_text, without_reasoning

serve = test_serve.serve  # the real-server fixture
ANSWER = "Sunlight scatters off air molecules, blue light the most."
QUESTION, FOLLOW_UP = "Why is the sky blue?", "And why is it red at sunset?"


def chat_model() -> FakeBackend:
    """Answers every prompt with ANSWER; its critic finds no issue (one draft, one critique)."""
    return FakeBackend(default=lambda r: '{"issues": []}' if r.role == "feedback" else ANSWER)


def test_a_follow_up_prompt_has_no_think_trace(serve):
    served = serve(chat_model(), reasoning_format="think")
    client = served.client()
    first = client.chat.completions.create(model="selfrefine/chat", messages=[{"role": "user", "content": QUESTION}])
    shown = first.choices[0].message.content
    assert shown.startswith("<think>\n### Draft 0") and shown.endswith(f"</think>\n\n{ANSWER}"), shown
    asked = len(served.fake.requests)

    def follow_up(assistant: str) -> int:
        messages = [
            {"role": "user", "content": QUESTION},
            {"role": "assistant", "content": assistant},
            {"role": "user", "content": FOLLOW_UP},
        ]
        # derivation off: its memo would skip the second follow-up's derivation call and its tokens
        options = {"selfrefine": {"derive_checks": False}}
        reply = client.chat.completions.create(model="selfrefine/chat", messages=messages, extra_body=options)
        return reply.usage.prompt_tokens

    with_trace = follow_up(shown)  # what `llm -c` sends: the content as it was shown
    prompts = served.fake.prompts()[asked:]  # the first draft's: the conversation as it was sent
    assert prompts and all(FOLLOW_UP in p and ANSWER in p for p in prompts)
    leaked = [p for p in prompts if "<think>" in p or "</think>" in p or "### Draft 0" in p]
    assert not leaked, leaked[0]  # was: the whole trace, in every prompt of the follow-up
    assert with_trace == follow_up(ANSWER)  # the trace costs no prompt token


@pytest.mark.parametrize(
    "content, kept",
    [
        ("<think>\nDraft 0 …\n</think>\n\nThe answer.", "The answer."),
        ("Before. <think>a</think> Middle <think>b</think> After.", "Before.  Middle  After."),
        ("<think>cut off mid-trace, never closed", ""),  # a leading unterminated trace: all reasoning
        ("a trace whose opening tag was the prompt's</think>\n\nThe answer.", "The answer."),
        ("Use the <think> tag to show reasoning.", "Use the <think> tag to show reasoning."),
        ("No reasoning at all.", "No reasoning at all."),
    ],
)
def test_without_reasoning(content, kept):
    assert without_reasoning(content) == kept


def test_only_assistant_turns_lose_their_think_blocks():
    text = conversation_text(
        [
            ChatMessage(role="user", content="What does <think>x</think> mean?"),
            ChatMessage(role="assistant", content="<think>\nlong trace\n</think>\n\nA tag."),
            ChatMessage(role="assistant", content="<think>only a trace, cut off"),  # left out: nothing remains
            ChatMessage(role="user", content="Thanks"),
        ]
    )
    assert text == "User: What does <think>x</think> mean?\n\nAssistant: A tag.\n\nUser: Thanks"


def test_many_unclosed_tags_take_linear_time():
    import time

    hostile = "answer " + "<think>" * 200_000
    started = time.perf_counter()
    assert without_reasoning(hostile) == hostile.strip()
    assert time.perf_counter() - started < 1.0
