"""Issue 46's "Done when" for streams, at the server's default settings: a streamed
``selfrefine/chat`` request sends its first progress (a reasoning chunk or an SSE comment)
within 2 s and is never silent for as long as a model call, when every call is slow (the
derivation of the request's checks first). On a real server on 127.0.0.1 over the fake
model, each call 8 s (the audit's 20 s, shortened: the bar is the same, a silence shorter
than a call). On c3793c2 the first byte after the role chunk came when the derivation call
ended, and each call was a silence of its own length. ``benchmarks/audit46.py`` runs the
audit's 20 s version with the issue's other payloads."""

from __future__ import annotations

import json
import time

import httpx2
import test_serve
from test_serve import user

from selfrefine import FakeBackend

serve = test_serve.serve  # the real-server fixture
CALL_SECONDS = 8.0


def _progress(line: str) -> bool:
    """An SSE comment, or a chunk that says something (not the role chunk)."""
    if line.startswith(":"):
        return True
    if not line.startswith("data: {"):
        return False
    delta = (json.loads(line[6:]).get("choices") or [{}])[0].get("delta") or {}
    return bool(delta.get("reasoning_content") or delta.get("content"))


def test_a_stream_says_it_is_alive_at_once_and_is_never_silent_for_a_slow_model_call(serve):
    served = serve(FakeBackend(default="A fine reply.", latency=CALL_SECONDS))  # the default keep-alive
    # a bulleted list: wording code reads no check from, so the model's derivation is asked first
    body = {
        "model": "selfrefine/chat",
        "messages": user("Write a haiku about rain as a bulleted list."),
        "stream": True,
    }
    started, seen = time.monotonic(), []
    with httpx2.stream("POST", f"{served.url}/v1/chat/completions", json=body, timeout=30) as response:
        assert response.status_code == 200
        for line in response.iter_lines():  # the derivation's call and the draft's: 1.5 calls
            if line:
                seen.append((time.monotonic() - started, line))
            if time.monotonic() - started > 1.5 * CALL_SECONDS:
                break
    progress = [t for t, line in seen if _progress(line)]
    assert progress and progress[0] < 2.0, seen[:3]  # c3793c2: after the 8 s derivation call
    times = [0.0, *(t for t, _ in seen)]
    silence = max(b - a for a, b in zip(times, times[1:], strict=False))
    assert silence < CALL_SECONDS - 1.5, f"a silence of {silence:.1f} s: {seen}"  # 5 s apart (keep-alive)
    assert served.fake.requests[0].purpose == "checks"  # the slow first call was the derivation
