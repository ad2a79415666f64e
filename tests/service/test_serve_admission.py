"""Issue 46, items 5, 6, 10 and 15 and the streams' keep-alive, on a real ``selfrefine serve``
on 127.0.0.1 with the fake model.

- item 5: 30 hostile requests at once (each with a JSON Schema of its own to check, and
  checks to run), or 20 bodies of 900 KB to check for lone surrogates: ``/health``, asked by
  a process of its own, answers within a second or so throughout (0.1-0.4 s measured). On
  c3793c2 every request's body (its schema checked) was validated, its engine built and its
  echo test run on the event loop (/health up to 3-8 s), and the bodies walked there (6-8 s);
- item 6: a client that leaves stops its run's checks, which ran on in a thread for
  seconds while ``/health`` said ``running: 0``;
- item 10: a run whose budget ends before its first draft says so, not "no answer: None";
- item 15: an upstream's failure shows neither its address nor its host names nor the
  server's paths, in a stream's notes or in a plain error;
- a stream sends SSE comments while a model call takes long (first at once, then every
  ``keep_alive`` seconds), which the openai SDK skips."""

from __future__ import annotations

import json
import random
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx2
import openai
import pytest
import test_serve
from test_serve import COMMONGEN, user, writer
from test_serve_event_loop import _task_file, serving

from selfrefine.backends.base import CompletionRequest
from selfrefine.backends.fake import FakeBackend
from selfrefine.core.errors import BackendError

serve = test_serve.serve  # the real-server fixture (in this process)

LANGUAGES = ["en", "de", "fr", "es", "it", "nl", "pt", "sv"]
SLOW_CHECKS = [{"type": "language", "code": LANGUAGES[i % len(LANGUAGES)]} for i in range(32)]


# the issue asks /health within 1 s; here 0.2-0.5 s at worst, 1.1 s once on a box at load 10
LATENCY = 1.5


def _schema(n: int, tag: int) -> dict[str, object]:
    """A JSON Schema of ``n`` properties, its own for each ``tag`` (no cache answers it)."""
    props = {f"field_{tag}_{i}": {"type": "string", "maxLength": 50, "description": "a field"} for i in range(n)}
    return {"type": "object", "properties": props}


def _hostile_body(i: int) -> dict[str, object]:
    options = {"json_schema": _schema(150, i), "checks": SLOW_CHECKS[:8], "max_iterations": 1}
    return {"model": "selfrefine/hostile", "messages": user("rain"), "selfrefine": options}


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / 100  # utime, stime in clock ticks (USER_HZ)


# a client of its own (another process, as the audit's): /health every 0.1 s until told to stop
POLLER = """
import json, select, sys, time, httpx2
seconds = []
with httpx2.Client(timeout=120) as client:
    while not select.select([sys.stdin], [], [], 0.1)[0]:
        started = time.monotonic()
        assert client.get(sys.argv[1] + "/health").status_code == 200
        seconds.append(time.monotonic() - started)
print(json.dumps(seconds))
"""


def _health_while_sent(url: str, bodies: list[bytes]) -> tuple[list[float], list[int]]:
    """Each body POSTed at once to the chat route; how long each /health took meanwhile
    (asked by another process), and the statuses. The bodies are made first."""
    outcomes: list[int] = []
    senders = httpx2.Client(limits=httpx2.Limits(max_connections=40), timeout=240)
    headers = {"content-type": "application/json"}

    def send(body: bytes) -> None:
        try:
            outcomes.append(senders.post(f"{url}/v1/chat/completions", content=body, headers=headers).status_code)
        except httpx2.HTTPError:
            outcomes.append(0)

    clients = [threading.Thread(target=send, args=(body,), daemon=True) for body in bodies]
    poller = subprocess.Popen(
        [sys.executable, "-c", POLLER, url], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    with senders:
        time.sleep(0.5)  # its first answer is in: from here on, the requests run
        for client in clients:
            client.start()
        for client in clients:
            client.join(timeout=240)
    latencies = json.loads(poller.communicate("stop\n", timeout=120)[0])
    print(f"/health meanwhile: median {statistics.median(latencies):.3f} s, max {max(latencies):.3f} s")
    return latencies, outcomes


@pytest.mark.timeout(300)
def test_health_answers_within_a_second_while_30_hostile_requests_run(tmp_path):
    with serving(tmp_path, _task_file(tmp_path, max_tokens=8192), {"default": "{}"}) as (proc, port):
        assert proc.poll() is None, proc.stdout.read()
        bodies = [json.dumps(_hostile_body(i)).encode() for i in range(30)]
        latencies, outcomes = _health_while_sent(f"http://127.0.0.1:{port}", bodies)
    # c3793c2: each body's schema checked, its engine built, on the event loop: /health 7.9 s
    assert outcomes.count(200) == 30, outcomes
    assert max(latencies) < LATENCY, (
        f"/health took up to {max(latencies):.1f} s (median {statistics.median(latencies):.2f})"
    )


@pytest.mark.timeout(300)
def test_health_answers_within_a_second_while_big_bodies_are_checked_for_surrogates(tmp_path):
    # 900 KB of numbers and one escaped lone surrogate: the text check walks every item
    body = ("[" + ",".join(["1"] * 450_000) + ',"\\ud800"]').encode()
    with serving(tmp_path, _task_file(tmp_path), {"default": "fine"}) as (proc, port):
        assert proc.poll() is None, proc.stdout.read()
        latencies, outcomes = _health_while_sent(f"http://127.0.0.1:{port}", [body] * 20)
    # c3793c2: 0.7 s a body on the event loop
    assert outcomes == [400] * 20, outcomes
    assert max(latencies) < LATENCY, (
        f"/health took up to {max(latencies):.1f} s (median {statistics.median(latencies):.2f})"
    )


def _long_draft(seed: int) -> str:
    """~95,000 characters in 8,000 words (under the fake's cut at max_tokens words), with
    capitals: each capital_words check reads it all, ~50 ms of pure Python."""
    words = ["Alphabetical", "betatron", "Gammaray", "deltawing", "Epsilonic", "zetaform", "Etalon", "thetaform"]
    rng = random.Random(seed)
    return " ".join(rng.choice(words) + ("." if rng.random() < 0.1 else "") for _ in range(8000))


def _leave_after(url: str, body: dict[str, object], seconds: float) -> None:
    """Send ``body`` and go away ``seconds`` later (or after as long without a byte)."""
    started = time.monotonic()
    with pytest.raises((httpx2.TimeoutException, _Left)):
        with httpx2.stream("POST", url, json=body, timeout=seconds) as response:
            for _ in response.iter_lines():
                if time.monotonic() - started > seconds:
                    raise _Left


class _Left(Exception):
    pass


@pytest.mark.timeout(180)
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_a_client_that_leaves_stops_its_runs_checks(tmp_path, stream):
    # 8 samples, each checked in a thread by 32 checks: ~2 s of CPU a sample; the client
    # gives up after 2 s, while they run
    task = _task_file(tmp_path, max_tokens=8192)
    replies = {"generate": [_long_draft(seed) for seed in range(8)], "default": "fine"}
    capitals = [{"type": "capital_words", "relation": "at least", "n": n} for n in range(31)]
    checks = [{"type": "language", "code": "en"}, *capitals]  # the language first: ~1 s, then ~30 ms each
    with serving(tmp_path, task, replies) as (proc, port):
        assert proc.poll() is None, proc.stdout.read()
        url = f"http://127.0.0.1:{port}"
        options = {"checks": checks, "derive_checks": False, "samples": 8, "max_iterations": 1}
        body = {"model": "selfrefine/hostile", "messages": user("rain"), "selfrefine": options, "stream": stream}
        _leave_after(f"{url}/v1/chat/completions", body, 2.0)
        deadline = time.monotonic() + 20
        while httpx2.get(f"{url}/health").json()["running"]:  # the run's slot: held while it works
            assert time.monotonic() < deadline, "the run went on for 20 s after its client left"
            time.sleep(0.05)
        before = _cpu_seconds(proc.pid)
        time.sleep(2.0)
        spent = _cpu_seconds(proc.pid) - before
    # c3793c2: `running` was 0 at once, and the checks' threads went on burning both cores
    print(f"CPU in the 2 s after the run stopped: {spent:.2f} s")
    assert spent < 0.3, f"{spent:.2f} s of CPU in the 2 s after the run said it had stopped"


def test_a_budget_spent_before_the_first_draft_is_said_in_words(serve):
    served = serve()
    with pytest.raises(openai.APIStatusError) as refused:
        served.client().chat.completions.create(
            model=COMMONGEN, messages=user("dog, ball"), extra_body={"selfrefine": {"max_seconds": 1e-320}}
        )
    error = refused.value.response.json()["error"]
    message = error["message"]
    assert "None" not in message and "time_budget" in message and "max_seconds" in message, message
    # the request's own budget: a 4xx naming what to change, not the 502 of a failed model
    assert refused.value.status_code == 422 and error["code"] == "budget_too_small", error
    streamed = httpx2.post(
        f"{served.url}/v1/chat/completions",
        json={"model": COMMONGEN, "messages": user("dog, ball"), "stream": True, "selfrefine": {"max_seconds": 1e-320}},
        timeout=30,
    )
    assert '"code": "budget_too_small"' in streamed.text and "max_seconds" in streamed.text, streamed.text


LEAKS = ("gpu-7.lab.example", "/srv/models", "10.1.2.3", "http://", "secret.gguf")


FAILURE = (
    "openai:m: request refused (400): model /srv/models/secret.gguf is not loaded on gpu-7.lab.example:8000 "
    "(at http://10.1.2.3:8000/v1)"
)


def _upstream_failure(request: CompletionRequest) -> str:
    raise BackendError(FAILURE)


def test_an_upstreams_failure_shows_no_address_host_or_path(serve):
    # every call fails, the derivation of the request's checks first (a note in the stream)
    served = serve(FakeBackend({"checks": [BackendError(FAILURE)] * 3}, default=_upstream_failure))
    ask = {"model": "selfrefine/chat", "messages": user("Write one line about rain.")}
    plain = httpx2.post(f"{served.url}/v1/chat/completions", json=ask, timeout=30)
    ask = {**ask, "messages": user("Write one line about snow."), "stream": True}  # not derived before
    streamed = httpx2.post(f"{served.url}/v1/chat/completions", json=ask, timeout=30)
    native = httpx2.post(f"{served.url}/v1/refine", json={"task": "chat", "input": "rain", "stream": True}, timeout=30)
    assert plain.status_code == 502 and "request refused (400)" in plain.text, plain.text
    # the derivation's failure is a note in the stream's reasoning: c3793c2 sent it whole
    assert "the derivation failed" in streamed.text, streamed.text
    for text in (plain.text, streamed.text, native.text):
        assert not [leak for leak in LEAKS if leak in text], text
        assert "<server path>" in text and "<host>" in text, text


def _lines_with_times(url: str, body: dict[str, object]) -> list[tuple[float, str]]:
    started, lines = time.monotonic(), []
    with httpx2.stream("POST", url, json=body, timeout=60) as response:
        for line in response.iter_lines():
            if line:
                lines.append((time.monotonic() - started, line))
    return lines


def test_a_stream_sends_keep_alive_comments_while_a_model_call_takes_long(serve):
    served = serve(writer(latency=2.5), keep_alive=0.5)  # each call 2.5 s: draft, critique, refinement
    body = {"model": COMMONGEN, "messages": user("a1, b2, c3"), "stream": True}
    lines = _lines_with_times(f"{served.url}/v1/chat/completions", body)
    comments = [t for t, line in lines if line.startswith(":")]
    assert comments and comments[0] < 1.5, lines[:3]  # the first sign of progress, at once
    gaps = [b - a for (a, _), (b, _) in zip(lines, lines[1:])]
    assert max(gaps) < 2.0, f"a silence of {max(gaps):.1f} s"  # c3793c2: the whole 2.5 s call, each time
    assert lines[-1][1] == "data: [DONE]"
    # the SDK skips the comments: the same reply as without them
    stream = served.client().chat.completions.create(model=COMMONGEN, messages=user("a1, b2, c3"), stream=True)
    content = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert content == "Here a1 and b2 and c3 meet."


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/refine"])
def test_a_body_is_refused_in_words_when_read_off_the_event_loop(serve, path):
    # the routes parse their bodies in a thread now: the same 400s as FastAPI's own parsing
    served = serve()
    for raw, said in [(b"", "Field required"), (b'{"model": ', "not valid JSON"), (b"[" * 100_000, "not valid JSON")]:
        refused = httpx2.post(f"{served.url}{path}", content=raw, headers={"content-type": "application/json"})
        assert refused.status_code == 400 and said in refused.json()["error"]["message"], refused.text
    assert served.health()["running"] == 0


def test_the_run_record_of_a_schema_request_is_unchanged(serve):
    # the response_format path through the thread-parsed body: the schema reaches the run
    served = serve(FakeBackend(default='{"a": "x"}'))
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    reply = served.client().chat.completions.create(
        model="selfrefine/chat",
        messages=user("Give a."),
        response_format={"type": "json_schema", "json_schema": {"name": "t", "schema": schema}},
        extra_body={"selfrefine": {"derive_checks": False}},
    )
    assert json.loads(reply.choices[0].message.content) == {"a": "x"}
    assert reply.selfrefine["config"]["json_schema"] == schema


class _Closing(FakeBackend):
    """The fake model, saying on which thread its connections were closed."""

    closed_on: list[str] = []

    async def aclose(self) -> None:
        self.closed_on.append(threading.current_thread().name)


@pytest.mark.parametrize("asked", [False, True], ids=["idle", "after_a_run"])
def test_stopping_the_server_closes_its_backends(serve, asked):
    backend = _Closing(default="fine")
    backend.closed_on = []
    served = serve(backend)
    if asked:
        served.client().chat.completions.create(model="selfrefine/chat", messages=user("Say hi."))
    served.stop()
    assert len(backend.closed_on) == 1, backend.closed_on
    if asked:  # on the runs' own loop (offload.py), where the backend's connections were made
        assert backend.closed_on == ["selfrefine-runs"]
