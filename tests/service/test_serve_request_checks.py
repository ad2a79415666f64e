"""Request text that states a check which cannot be built, through ``selfrefine serve`` on
127.0.0.1 with the ``openai`` SDK (issue 46 item 7): "the 0th paragraph", a 70-character
keyword, 40 stated instructions each got a 500 ``task_failed``. Now the check is dropped and
said (the reasoning and the run's record name it, with why) and the request gets its reply,
plain and streamed. The model is the in-package fake."""

from __future__ import annotations

import pytest
import test_serve
from test_serve import user

from selfrefine import FakeBackend

serve = test_serve.serve  # the real-server fixture
CHAT = "selfrefine/chat"
REPLY = "A fine reply."
PAYLOADS = {
    "0th paragraph": (
        "Write two paragraphs about cats. The 0th paragraph must start with the word hello.",
        "paragraph_start: nth: Input should be greater than or equal to 1",
    ),
    "70-character keyword": (
        'Write a sentence that includes the keyword "' + "k" * 70 + '".',
        "keywords: words.0: String should have at most 60 characters",
    ),
    "40 instructions": (
        "Write a story. " + " ".join(f"Use the word w{i} at least {i + 1} times." for i in range(40)),
        "more than 32 checks: the first 32 are kept",
    ),
}


def fake() -> FakeBackend:
    """Draft ``REPLY``; the derivation lists nothing, the critic has nothing to fix."""
    return FakeBackend({"checks": ['{"checks": []}'], "generate": [REPLY]}, default='{"issues": []}')


@pytest.mark.parametrize("text, reason", PAYLOADS.values(), ids=PAYLOADS)
def test_a_check_that_cannot_be_built_is_dropped_and_named_not_a_500(serve, text, reason):
    client = serve(fake()).client()
    reply = client.chat.completions.create(
        model=CHAT, messages=user(text), extra_body={"selfrefine": {"max_iterations": 0}}
    )
    assert reply.choices[0].message.content == REPLY
    assert reply.selfrefine["stop_reason"] == "max_iterations"
    assert reason in [d["reason"] for d in reply.selfrefine["checks_dropped"]]  # the run's record
    assert reason in reply.choices[0].message.model_extra["reasoning_content"]  # the trace, in words


def test_a_streamed_request_names_the_dropped_check_too(serve):
    text, reason = PAYLOADS["0th paragraph"]
    client = serve(fake()).client()
    stream = client.chat.completions.create(
        model=CHAT, messages=user(text), stream=True, extra_body={"selfrefine": {"max_iterations": 0}}
    )
    chunks = [c for c in stream if c.choices]
    thinking = "".join(getattr(c.choices[0].delta, "reasoning_content", None) or "" for c in chunks)
    content = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert content == REPLY and reason in thinking and chunks[-1].choices[0].finish_reason == "stop"
