"""Issue 46, item 6: a run cancelled while the embedded model writes (its client left the
server) stops the model at its next token, in the thread llama.cpp runs in; on c3793c2 a
reply that was not streamed was written to its end, holding the model for nobody."""

from __future__ import annotations

import asyncio

from selfrefine.backends.base import CompletionRequest
from selfrefine.core.cancel import cancellable

PROMPT = "Write a long story about a cat named Tom who lives in Paris."


async def _written(backend, cancel: bool, stream: bool) -> int:
    event = cancellable()  # this task's run; a server's stop() sets it
    if cancel:
        event.set()
    request = CompletionRequest(role="generate", prompt=PROMPT, max_tokens=40, temperature=0.0)
    reply = await (backend.stream(request, lambda _: None) if stream else backend.complete(request))
    return reply.completion_tokens


def test_a_cancelled_run_stops_the_model_at_its_next_token(smollm):
    for stream in (False, True):
        assert asyncio.run(_written(smollm, cancel=False, stream=stream)) > 20
        assert asyncio.run(_written(smollm, cancel=True, stream=stream)) <= 2
