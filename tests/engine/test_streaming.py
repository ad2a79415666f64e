"""Token streaming (issue 30, item 11): each draft and critique arrives piece by piece as the
model writes it, in the engine's step stream (``astream(..., deltas=True)``), the service's
chat stream (``reasoning_content`` deltas, then ``content``) and the CLI's live view, while
the run's records stay exactly what they are without streaming."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import openai
import pytest
from conftest import FB_DONE, FB_MISSING, ROOT, SMOLLM, require_smollm

from selfrefine import SelfRefine
from selfrefine.backends.base import CompletionRequest
from selfrefine.backends.fake import FakeBackend
from selfrefine.core.records import DraftStep, FeedbackStep, RunResult

CONCEPTS = "dog, frisbee, catch, throw"
DRAFT0 = "The dog runs to catch the ball you throw in the park."
DRAFT1 = "The dog leaps to catch the frisbee you throw across the park."


def fake(latency: float | dict[str, float] = 0.0) -> FakeBackend:
    return FakeBackend({"generate": [DRAFT0], "feedback": [FB_MISSING, FB_DONE], "refine": [DRAFT1]}, latency=latency)


async def steps_of(engine: SelfRefine, deltas: bool) -> list[Any]:
    try:
        return [step async for step in engine.astream(CONCEPTS, deltas=deltas)]
    finally:
        await engine.aclose()


def timeless(result: RunResult) -> Any:
    """A result without its clock readings (the only thing two runs may differ in)."""

    def clean(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: 0 if k in ("seconds", "wait_seconds") else clean(v) for k, v in value.items()}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value

    return clean(result.model_dump(mode="json"))


# -- the backends ---------------------------------------------------------------------------


def test_fake_streams_its_reply_in_pieces_that_make_the_reply():
    backend = FakeBackend([DRAFT0, DRAFT0])
    request = CompletionRequest(role="generate", prompt="write")
    pieces: list[str] = []
    streamed = asyncio.run(backend.stream(request, pieces.append))
    whole = asyncio.run(backend.complete(request))
    assert len(pieces) == len(DRAFT0.split()) > 3
    assert "".join(pieces) == streamed.text == DRAFT0
    assert streamed == whole  # the same response: text, token counts, finish reason


def test_a_cached_reply_is_streamed_whole_and_a_miss_is_stored(tmp_path):
    from selfrefine.evaluation.response_cache import CachedBackend, ResponseCache

    cache = ResponseCache(tmp_path / "cache.sqlite")
    backend = CachedBackend(FakeBackend([DRAFT0]), cache)
    request = CompletionRequest(role="generate", prompt="write")
    first: list[str] = []
    miss = asyncio.run(backend.stream(request, first.append))
    again: list[str] = []
    hit = asyncio.run(backend.stream(request, again.append))  # the fake has no reply left
    assert len(first) > 3 and "".join(first) == DRAFT0 and not miss.cached
    assert again == [DRAFT0] and hit.cached and hit.text == DRAFT0
    assert (backend.hits, backend.misses) == (1, 1)


class StreamingServer:
    """An OpenAI-compatible server on 127.0.0.1 (a threaded ``http.server``) that answers a
    chat request whole, or with ``stream: true`` as server-sent chunks of ``PIECES``, ending
    with the usage chunk when the request asks for it (``usage`` False: never, as
    ``llama_cpp.server``); ``error``: an error event in place of the finish chunk."""

    PIECES = ["The ", "dog ", "runs ", "to ", "the ", "park."]
    USAGE = {"prompt_tokens": 7, "completion_tokens": 6, "prompt_tokens_details": {"cached_tokens": 3}}

    def __init__(self, usage: bool = True, error: bool = False) -> None:
        self.bodies: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
                server.bodies.append(body)
                if not body.get("stream"):
                    reply = {
                        **server.head("chat.completion"),
                        "choices": [
                            {
                                "index": 0,
                                "finish_reason": "stop",
                                "message": {"role": "assistant", "content": "".join(server.PIECES)},
                            }
                        ],
                        "usage": server.USAGE,
                    }
                    data = json.dumps(reply).encode()
                    self.send_response(200)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.end_headers()
                for event in server.events(body):
                    self.wfile.write(f"data: {event}\n\n".encode())
                    self.wfile.flush()

            def log_message(self, *args: object) -> None:
                pass

        self.usage, self.error = usage, error
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @staticmethod
    def head(kind: str) -> dict[str, Any]:
        return {"id": "x", "object": kind, "created": 1, "model": "m"}

    def events(self, body: dict[str, Any]) -> list[str]:
        chunk = self.head("chat.completion.chunk")
        out = [json.dumps({**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})]
        out += [json.dumps({**chunk, "choices": [{"index": 0, "delta": {"content": p}}]}) for p in self.PIECES]
        if self.error:
            return [*out, json.dumps({"error": {"message": "the model crashed", "type": "server_error"}})]
        out.append(json.dumps({**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}))
        if self.usage and (body.get("stream_options") or {}).get("include_usage"):
            out.append(json.dumps({**chunk, "choices": [], "usage": self.USAGE}))
        return [*out, "[DONE]"]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _openai_stream(server: StreamingServer, times: int = 1) -> tuple[list[list[str]], list[Any], Any]:
    from selfrefine.backends.openai_compat import OpenAIBackend

    backend = OpenAIBackend("m", base_url=server.base_url)
    request = CompletionRequest(role="generate", prompt="write")

    async def run() -> tuple[list[list[str]], list[Any], Any]:
        pieces: list[list[str]] = []
        responses = []
        try:
            for _ in range(times):
                pieces.append([])
                responses.append(await backend.stream(request, pieces[-1].append))
            return pieces, responses, await backend.complete(request)
        finally:
            await backend.aclose()

    try:
        return asyncio.run(run())
    finally:
        server.close()


def test_openai_backend_streams_with_the_usage_the_server_reports():
    server = StreamingServer()
    [pieces], [streamed], whole = _openai_stream(server)
    assert pieces == StreamingServer.PIECES
    assert server.bodies[0]["stream"] is True and server.bodies[0]["stream_options"] == {"include_usage": True}
    assert streamed.text == "".join(pieces) == whole.text
    assert (streamed.prompt_tokens, streamed.completion_tokens, streamed.cached_prompt_tokens) == (7, 6, 3)
    assert (whole.prompt_tokens, whole.completion_tokens, whole.cached_prompt_tokens) == (7, 6, 3)
    assert streamed.finish_reason == "length"


def test_openai_backend_asks_whole_replies_of_a_server_that_streams_no_usage():
    server = StreamingServer(usage=False)
    pieces, responses, _ = _openai_stream(server, times=2)
    assert pieces[0] == StreamingServer.PIECES and responses[0].completion_tokens == 0
    # from then on the replies come whole, counted: one piece, the server's usage
    assert pieces[1] == ["".join(StreamingServer.PIECES)] and responses[1].completion_tokens == 6
    assert [b.get("stream", False) for b in server.bodies] == [True, False, False]


def test_an_error_event_in_the_stream_is_a_transient_backend_error():
    from selfrefine import TransientBackendError

    with pytest.raises(TransientBackendError, match="the model crashed"):
        _openai_stream(StreamingServer(error=True))


# -- the engine -----------------------------------------------------------------------------


def test_deltas_come_in_order_before_their_step_and_make_each_calls_reply():
    from selfrefine.core.records import DeltaStep

    steps = asyncio.run(steps_of(SelfRefine("commongen", fake(), max_iterations=2), deltas=True))
    result = steps[-1].result
    calls = {(c.role, c.iteration, c.attempt): c for c in result.calls}
    pieces: dict[tuple[str, int, int], list[str]] = {}
    for i, step in enumerate(steps):
        if isinstance(step, DeltaStep):
            key = (step.role, step.iteration, step.attempt)
            assert key in calls and calls[key].ok
            pieces.setdefault(key, []).append(step.text)
            # every piece comes before the step its call produced
            made = next(s for s in steps[i:] if isinstance(s, DraftStep | FeedbackStep))
            assert made.iteration == step.iteration
            assert isinstance(made, FeedbackStep) == (step.role == "feedback")
    # every call streamed, in the order the calls were made, its pieces making its reply
    assert list(pieces) == list(calls) == [("generate", 0, 1), ("feedback", 0, 1), ("refine", 1, 1), ("feedback", 1, 1)]
    for key, texts in pieces.items():
        assert len(texts) > 1 and "".join(texts) == calls[key].response
    assert [s.draft for s in steps if isinstance(s, DraftStep)] == [DRAFT0, DRAFT1]


def test_records_are_the_same_with_and_without_deltas():
    plain = asyncio.run(steps_of(SelfRefine("commongen", fake(), max_iterations=2), deltas=False))
    streamed = asyncio.run(steps_of(SelfRefine("commongen", fake(), max_iterations=2), deltas=True))
    assert not any(step.kind == "delta" for step in plain)
    assert [s.kind for s in streamed if s.kind != "delta"] == [s.kind for s in plain]
    assert timeless(streamed[-1].result) == timeless(plain[-1].result)
    assert streamed[-1].result.usage.total_tokens > 0


def test_a_retried_call_streams_again_as_its_next_attempt():
    from selfrefine.core.records import DeltaStep

    backend = FakeBackend({"generate": [DRAFT0], "feedback": ["not a critique", FB_DONE]})
    steps = asyncio.run(steps_of(SelfRefine("commongen", backend, max_iterations=1), deltas=True))
    result = steps[-1].result
    feedback_calls = [c for c in result.calls if c.role == "feedback"]
    assert [(c.attempt, c.ok) for c in feedback_calls] == [(1, False), (2, True)]
    for call in feedback_calls:
        text = "".join(
            s.text for s in steps if isinstance(s, DeltaStep) and s.role == "feedback" and s.attempt == call.attempt
        )
        assert text == call.response


def test_samples_are_shown_as_they_come_and_their_records_do_not_change():
    def engine() -> SelfRefine:
        backend = FakeBackend(default=lambda r: DRAFT1 if r.role != "feedback" else FB_DONE)
        return SelfRefine("commongen", backend, samples=3, max_iterations=1, seed=1)

    plain = asyncio.run(steps_of(engine(), deltas=False))
    streamed = asyncio.run(steps_of(engine(), deltas=True))
    samples = [s.sample for s in streamed if s.kind == "delta" and s.role == "generate"]
    assert samples == [1, 2, 3]  # the first draft is a best of 3: each sample shown as it ends (issue 39)
    assert timeless(streamed[-1].result) == timeless(plain[-1].result)


# -- the service: `selfrefine serve` on 127.0.0.1 -------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Serve:
    """``selfrefine serve`` in a child process."""

    def __init__(self, tmp: Path, *args: str) -> None:
        self.port = _free_port()
        self.log = tmp / f"serve-{self.port}.log"
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PYTHONUNBUFFERED": "1"}
        env.pop("SELFREFINE_API_KEY", None)
        cmd = [sys.executable, "-m", "selfrefine", "serve", "--port", str(self.port), *args]
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        self.client = openai.OpenAI(base_url=f"http://127.0.0.1:{self.port}/v1", api_key="unused", max_retries=0)
        deadline = time.monotonic() + 120
        while True:
            try:
                self.client.models.list()
                return
            except openai.APIConnectionError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"serve did not start: {self.log.read_text(errors='replace')[-2000:]}") from None
                time.sleep(0.1)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def replies_file(tmp: Path, **extra: Any) -> Path:
    path = tmp / "replies.json"
    data = {"generate": [DRAFT0], "feedback": [FB_MISSING, FB_DONE], "refine": [DRAFT1], **extra}
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def timed_chunks(stream: Any) -> list[tuple[float, str, str]]:
    """(seconds since the request, reasoning text, content text) of each chunk with a choice."""
    start, out = time.monotonic(), []
    for chunk in stream:
        if chunk.choices:
            delta = chunk.choices[0].delta
            out.append((time.monotonic() - start, getattr(delta, "reasoning_content", None) or "", delta.content or ""))
    return out


@pytest.fixture
def served(tmp_path):
    # the first draft's call takes 2 s: its pieces are spread over its second half
    server = Serve(tmp_path, "--model", f"fake:{replies_file(tmp_path, latency={'generate': 2.0})}")
    yield server
    server.stop()


def test_served_chat_streams_each_draft_token_by_token_before_its_call_ends(served):
    stream = served.client.chat.completions.create(
        model="selfrefine/commongen", messages=[{"role": "user", "content": CONCEPTS}], stream=True
    )
    chunks = timed_chunks(stream)
    reasoning = [(t, r) for t, r, _ in chunks if r]
    content = [i for i, (_, _, c) in enumerate(chunks) if c]
    # the draft arrives in several reasoning chunks, while its call is still running
    said, first, whole = "", None, None
    for t, text in reasoning:
        said += text
        if first is None and "dog" in said:
            first = t
        if whole is None and DRAFT0 in said:
            whole = t
    assert first is not None and whole is not None
    draft_chunks = [r for t, r in reasoning if first <= t <= whole]
    assert len(draft_chunks) >= 5, draft_chunks
    # the call lasts 2 s, its pieces spread over its second half: the first came long before it ended
    assert first < 1.6 and whole >= 1.5 and whole - first >= 0.6, (first, whole)
    # then the critiques and the refinement, and only then the answer as content
    assert DRAFT1 in said and "missing concepts: frisbee" in said  # a JSON critique shown read, not raw
    assert '"missing_concepts"' not in said
    assert len(reasoning) > 20 and content and all(chunks[i][1] == "" for i in content)
    assert max(i for i, (_, r, _) in enumerate(chunks) if r) < min(content)
    assert "".join(chunks[i][2] for i in content) == DRAFT1


def test_served_chat_streams_tokens_inside_think_with_that_reasoning_format(served):
    stream = served.client.chat.completions.create(
        model="selfrefine/commongen",
        messages=[{"role": "user", "content": CONCEPTS}],
        stream=True,
        extra_body={"reasoning_format": "think"},
    )
    content = [c for _, r, c in timed_chunks(stream) if c]
    text = "".join(content)
    assert text.startswith("<think>\n") and text.endswith(f"</think>\n\n{DRAFT1}")
    closing = next(i for i, c in enumerate(content) if "</think>" in c)
    assert closing > 20  # the trace came in pieces before the answer
    assert DRAFT0 in text.split("</think>")[0]


def refine_events(server: Serve, **body: Any) -> list[dict[str, Any]]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{server.port}/v1/refine",
        data=json.dumps({"task": "commongen", "input": CONCEPTS, "stream": True, **body}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as reply:
        lines = reply.read().decode().splitlines()
    data = [line.removeprefix("data: ") for line in lines if line.startswith("data: ")]
    assert data[-1] == "[DONE]"
    return [json.loads(d) for d in data[:-1]]


def test_native_stream_sends_delta_events_when_asked(served):
    events = refine_events(served, deltas=True)
    kinds = [e["kind"] for e in events]
    first_draft = kinds.index("draft")
    pieces = [e["text"] for e in events[:first_draft] if e["kind"] == "delta"]
    assert len(pieces) > 5 and "".join(pieces) == DRAFT0 == events[first_draft]["draft"]
    assert {e["role"] for e in events if e["kind"] == "delta"} == {"generate", "feedback", "refine"}
    assert "delta" not in [e["kind"] for e in refine_events(served)]  # not asked: steps only


# -- the CLI's live view --------------------------------------------------------------------


def test_cli_live_view_prints_each_draft_while_it_is_written(tmp_path):
    replies = replies_file(tmp_path, latency={"generate": 2.0})
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PYTHONUNBUFFERED": "1", "COLUMNS": "120"}
    cmd = [sys.executable, "-m", "selfrefine", "run", "commongen", CONCEPTS, "--model", f"fake:{replies}", "--live"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    start, seen = time.monotonic(), []  # (seconds, bytes read)
    assert proc.stdout is not None
    while chunk := os.read(proc.stdout.fileno(), 4096):
        seen.append((time.monotonic() - start, chunk))
    assert proc.wait(timeout=60) == 0
    out = b"".join(c for _, c in seen).decode()
    assert "draft 0 (generate), writing…" in out and "feedback 1, writing…" in out
    written = out.split("draft 0 (generate), writing…", 1)[1]
    assert written.lstrip().startswith(DRAFT0)  # the pieces as they came, then the panel
    # the first words were on the terminal a while before the draft was finished
    said, first, whole = b"", None, None
    for t, chunk in seen:
        said += chunk
        if first is None and b"writing\xe2\x80\xa6\n" + DRAFT0.split()[0].encode() in said:
            first = t
        if whole is None and DRAFT0.encode() in said:
            whole = t
    assert first is not None and whole is not None and whole - first >= 0.5, (first, whole)


def test_cli_without_live_prints_only_the_finished_steps(tmp_path):
    replies = replies_file(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    cmd = [sys.executable, "-m", "selfrefine", "run", "commongen", CONCEPTS, "--model", f"fake:{replies}"]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "writing…" not in out.stdout and DRAFT1 in out.stdout  # piped: the live view is off


def test_live_view_on_a_terminal_gives_way_to_the_steps_panel():
    import io

    from rich.console import Console

    from selfrefine.cli.display import StepPrinter
    from selfrefine.core.records import DeltaStep

    buffer = io.StringIO()
    printer = StepPrinter(Console(file=buffer, force_terminal=True, width=80, height=20), live=True)
    for word in DRAFT0.split(" "):
        printer(DeltaStep(role="generate", iteration=0, text=word + " "))
    printer(DraftStep(iteration=0, draft=DRAFT0))
    out = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", buffer.getvalue())  # no terminal codes
    growing, final = out.split("─ draft 0 (generate) ─", 1)
    assert "draft 0 (generate), writing…" in growing and "The dog runs" in growing
    assert DRAFT0 in final
    assert printer.writing is None


# -- the embedded model ---------------------------------------------------------------------


@pytest.mark.integration
def test_embedded_model_streams_the_same_records(smollm):
    from selfrefine.core.records import DeltaStep

    def engine() -> SelfRefine:
        return SelfRefine("commongen", smollm, max_iterations=1, final_feedback=True)

    plain = asyncio.run(_steps_open(engine(), deltas=False))
    streamed = asyncio.run(_steps_open(engine(), deltas=True))
    # the same texts and token counts; the second run only reuses more of its prompts' prefix
    warm = {"cached_prompt_tokens": 0}
    same = [
        timeless(r.model_copy(update={"calls": [c.model_copy(update=warm) for c in r.calls]}))
        for r in (plain[-1].result, streamed[-1].result)
    ]
    for data in same:
        data["usage"]["cached_prompt_tokens"] = 0
    assert same[0] == same[1]
    result = streamed[-1].result
    for call in result.calls:
        pieces = [
            s.text
            for s in streamed
            if isinstance(s, DeltaStep)
            and (s.role, s.iteration, s.attempt) == (call.role, call.iteration, call.attempt)
        ]
        assert "".join(pieces) == call.response
        assert len(pieces) > 1 or call.completion_tokens <= 2
    assert result.usage.completion_tokens > 0


async def _steps_open(engine: SelfRefine, deltas: bool) -> list[Any]:
    """The steps of one run on a shared backend (not closed: the session fixture owns it)."""
    return [step async for step in engine.astream(CONCEPTS, deltas=deltas)]


@pytest.mark.integration
def test_served_embedded_model_streams_reasoning_before_the_answer(tmp_path):
    require_smollm()
    server = Serve(tmp_path, "--model", SMOLLM)
    try:
        stream = server.client.chat.completions.create(
            model="selfrefine/commongen",
            messages=[{"role": "user", "content": CONCEPTS}],
            stream=True,
            extra_body={"selfrefine": {"max_iterations": 1}},
        )
        chunks = timed_chunks(stream)
    finally:
        server.stop()
    reasoning = [i for i, (_, r, _) in enumerate(chunks) if r]
    content = [i for i, (_, _, c) in enumerate(chunks) if c]
    assert len(reasoning) > 10 and content and max(reasoning) < min(content)
    assert "### Draft 0 (first answer)" in "".join(chunks[i][1] for i in reasoning)
