"""A streamed chat request says what the server is doing from its first reasoning chunk, in
words a reader can use (issue 46, items 19 and 23), on a real server on 127.0.0.1 over the
fake model: the derivation of the request's checks is announced as its call starts (it was
minutes of silence), is not made again for the same request text, and a critique the model
writes as JSON is shown read ("No issues."), never as the raw ``{"issues": []}``."""

from __future__ import annotations

import json

import test_serve

from selfrefine import FakeBackend

serve = test_serve.serve  # the real-server fixture
REQUEST = "Give me three tips for sleeping better as a bulleted list. Do not use any commas."
ANSWER = "* keep a schedule\n* dim the lights\n* skip late coffee"


def chat_model() -> FakeBackend:
    """Derives one check, answers ANSWER, and its critic (as JSON) finds no issue."""
    checks = json.dumps({"checks": [{"type": "count", "unit": "bullets", "relation": "exactly", "n": 3}]})

    # one derivation reply: a second derivation call would find none ('{"checks": []}')
    return FakeBackend({"checks": [checks]}, default=lambda r: '{"issues": []}' if r.role == "feedback" else ANSWER)


def streamed_reasoning(served, **options) -> list[str]:
    """The reasoning chunks of one streamed request for REQUEST, in order."""
    stream = served.client().chat.completions.create(
        model="selfrefine/chat",
        messages=[{"role": "user", "content": REQUEST}],
        stream=True,
        extra_body={"selfrefine": options},
    )
    return [
        c.choices[0].delta.reasoning_content
        for c in stream
        if c.choices and getattr(c.choices[0].delta, "reasoning_content", None)
    ]


def derivations(served) -> int:
    return sum(r.purpose == "checks" for r in served.fake.requests)


def test_the_first_reasoning_chunk_announces_the_derivation_and_a_repeat_reuses_it(serve):
    served = serve(chat_model())
    chunks = streamed_reasoning(served, max_iterations=1)
    assert chunks[0].startswith("deriving checks from the request…"), chunks[:3]
    assert "### Checks of every draft" in chunks[1]
    assert derivations(served) == 1
    # the same text with other options (another engine on the server): no second derivation call
    again = streamed_reasoning(served, max_iterations=0)
    assert derivations(served) == 1
    assert not any("deriving checks" in c for c in again)
    assert "derived before for the same request: no model call" in again[0]
    assert "3 bullet points" in again[0]  # the first request's derived check, reused


def test_a_json_critique_streams_read_not_raw(serve):
    served = serve(chat_model())
    thinking = "".join(streamed_reasoning(served, max_iterations=1))
    assert "### Feedback on draft 0\nNo issues.\n\n" in thinking, thinking
    assert '{"issues"' not in thinking and "[]}" not in thinking
