"""Issue 39 items 4-7 as the audit ran them: an operator's task file, or a model's output,
must never freeze ``selfrefine serve``.

Each test starts the real command (``selfrefine serve --task FILE`` on 127.0.0.1, the fake
model replying from a file) and, while a request runs, another client polls ``/health``.
On b6c03ab Python's ``re`` (which holds the interpreter while it searches) and filters that
loop in Python ran on the server's event loop for seconds to minutes: a stop phrase over an
8,192-token critique 10-18 s, ``wordwrap`` 18-45 s, an unbounded score regex forever
(SIGTERM ignored). Now a task file that could do that is refused when the server starts, and what is
allowed answers ``/health`` within a second or two while it runs (on a busy machine)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx2
import openai
import pytest
from conftest import ROOT

TEMPLATES = {"generate": "Write about {{ input }}.", "feedback": "Rate: {{ draft }}", "refine": "Better: {{ draft }}"}


def _port() -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


def _task_file(tmp_path: Path, **keys: object) -> Path:
    path = tmp_path / "hostile.yaml"
    path.write_text(json.dumps({"name": "hostile", **TEMPLATES, "max_iterations": 1, **keys}))
    return path


@contextmanager
def serving(tmp_path: Path, task: Path, replies: dict[str, object]) -> Iterator[tuple[subprocess.Popen, int]]:
    """``selfrefine serve --task TASK`` on a free port; yields (process, port) once it
    answers /health, or once it has exited (a refused task file)."""
    (tmp_path / "replies.json").write_text(json.dumps(replies))
    port = _port()
    command = [sys.executable, "-m", "selfrefine", "serve", "--task", str(task), "--port", str(port)]
    command += ["--model", f"fake:{tmp_path / 'replies.json'}", "--log-level", "warning"]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "SELFREFINE_API_KEY": ""}
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        while proc.poll() is None:
            try:
                if httpx2.get(f"http://127.0.0.1:{port}/health").status_code == 200:
                    break
            except httpx2.TransportError:
                pass
            assert time.monotonic() < deadline, "selfrefine serve neither started nor stopped"
            time.sleep(0.2)
        yield proc, port
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=20)


def _health_while(port: int, request: threading.Thread) -> list[float]:
    """How long each /health took while ``request`` ran (polled every 50 ms)."""
    seconds = []
    request.start()
    while request.is_alive():
        started = time.monotonic()
        assert httpx2.get(f"http://127.0.0.1:{port}/health", timeout=120).status_code == 200
        seconds.append(time.monotonic() - started)
        time.sleep(0.05)
    return seconds


def _request(port: int, outcome: dict[str, object]) -> threading.Thread:
    def run() -> None:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0, timeout=90)
        started = time.monotonic()
        try:
            reply = client.chat.completions.create(
                model="selfrefine/hostile", messages=[{"role": "user", "content": "rain"}]
            )
            outcome["reply"] = reply.choices[0].message.content
        except openai.APIError as exc:
            outcome["error"] = str(exc)
        outcome["seconds"] = time.monotonic() - started

    return threading.Thread(target=run, daemon=True)


@pytest.mark.timeout(180)
@pytest.mark.parametrize(
    ("keys", "why"),
    [
        ({"score": "(a+)+b"}, "score regex /(a+)+b/"),  # item 4: hung forever on a critique of 60 a's
        ({"checks": {"must_match": [rf"\w+{c}" for c in "ABCDEFGHIJKLMNOPQRST"]}}, "together"),  # item 6
    ],
    ids=["score_regex", "twenty_check_regexes"],
)
def test_a_task_file_whose_regexes_could_freeze_the_server_is_refused_at_start(tmp_path, keys, why):
    with serving(tmp_path, _task_file(tmp_path, **keys), {"default": "a" * 60}) as (proc, port):
        if proc.poll() is None:
            pytest.fail("selfrefine serve started with the task file: its regexes would run on the event loop")
        output = proc.stdout.read()
    assert proc.returncode != 0 and why in output and "hostile.yaml" in output, output


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    ("keys", "critique"),
    [
        # item 5: a critique of 8,192 tokens, the most a request may ask (the fake model's
        # tokens are words): 'not done ' * 4096 held the loop 10-18 s on b6c03ab
        ({"stop": {"contains": "done"}, "max_tokens": 8192}, "not done " * 4096),
        ({"feedback": "Rate: {{ (draft * 50000)|wordwrap(1) }}"}, "a" * 20),  # item 7: 18-45 s
    ],
    ids=["stop_phrase_8192_tokens", "wordwrap_render"],
)
def test_health_answers_while_a_hostile_request_runs(tmp_path, keys, critique):
    with serving(tmp_path, _task_file(tmp_path, **keys), {"default": critique}) as (proc, port):
        assert proc.poll() is None, proc.stdout.read()
        outcome: dict[str, object] = {}
        latencies = _health_while(port, _request(port, outcome))
    assert outcome["seconds"] < 10, outcome.get("error", "")
    assert max(latencies) < 2.0, f"/health took {max(latencies):.1f} s while the request ran"
