"""Issue 46 items 1 and 2 through the real ``selfrefine serve`` (127.0.0.1, the fake model
replying from a file), with a client polling ``/health`` while the request runs.

1. 32 ``regex`` checks, each within the bound alone, in one API request: on c3793c2 a run
   of one draft took 8-12 s of regex search (the audit's longer run: 77.8 s, /health 9.0 s);
   in a task file's ``checks:`` list the server started and ran them. Now the request is a
   400 at once, and the task file stops the server at start.
2. An 8,000-word request and its near echo: the echo check took 30 s on the event loop
   (/health 29.8 s; the audit: 21.6 s and 22.9 s). Now it takes milliseconds, in a thread."""

from __future__ import annotations

import random
import threading
import time

import httpx2
import pytest
from test_serve_event_loop import _health_while, _task_file, serving

HEAVY = [rf"(?:\w+\W){{0,3}}{chr(ord('A') + i % 26)}{i // 26}" for i in range(32)]  # each within the bound
DRAFT = "a" * 4999 + " "  # the draft that makes each of them slowest


def _post(port: int, content: str, options: dict, outcome: dict) -> threading.Thread:
    def run() -> None:
        started = time.monotonic()
        body = {
            "model": "selfrefine/hostile",
            "messages": [{"role": "user", "content": content}],
            "selfrefine": options,
        }
        reply = httpx2.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=body, timeout=120)
        outcome.update(status=reply.status_code, body=reply.json(), seconds=time.monotonic() - started)

    return threading.Thread(target=run, daemon=True)


@pytest.mark.timeout(240)
def test_32_regex_checks_in_one_request_are_refused_at_once(tmp_path):
    with serving(tmp_path, _task_file(tmp_path, max_iterations=0), {"default": DRAFT}) as (proc, port):
        assert proc.poll() is None, proc.stdout.read()
        outcome: dict = {}
        checks = [{"type": "regex", "pattern": p} for p in HEAVY]
        latencies = _health_while(port, _post(port, "rain", {"checks": checks}, outcome))
    assert outcome["status"] == 400, outcome
    message = outcome["body"]["error"]["message"]
    assert "these 32 regex checks together could backtrack too long" in message, message
    assert outcome["seconds"] < 5, outcome["seconds"]  # a refusal, not a search (8-12 s on c3793c2)
    assert max(latencies) < 2.0, latencies


@pytest.mark.timeout(240)
def test_a_request_regex_check_shares_the_budget_with_the_task_files(tmp_path):
    task = _task_file(tmp_path, max_iterations=0, checks={"must_match": HEAVY[:1]})
    with serving(tmp_path, task, {"default": DRAFT}) as (proc, port):
        assert proc.poll() is None, proc.stdout.read()
        outcome: dict = {}
        request = _post(port, "rain", {"checks": [{"type": "regex", "pattern": HEAVY[1]}]}, outcome)
        request.start()
        request.join(60)
    assert outcome["status"] == 400 and outcome["seconds"] < 5, outcome
    assert "together could backtrack too long" in outcome["body"]["error"]["message"], outcome


@pytest.mark.timeout(180)
def test_a_task_files_checks_list_of_32_regexes_stops_the_server_at_start(tmp_path):
    task = _task_file(tmp_path, checks=[{"type": "regex", "pattern": p} for p in HEAVY])
    with serving(tmp_path, task, {"default": DRAFT}) as (proc, port):
        if proc.poll() is None:
            pytest.fail("selfrefine serve started with the task file: its 32 regex checks would search each draft")
        output = proc.stdout.read()
    assert proc.returncode != 0 and "these 32 regex checks together" in output and "hostile.yaml" in output, output


@pytest.mark.timeout(240)
def test_an_8000_word_echo_is_checked_without_holding_the_server(tmp_path):
    rng = random.Random(7)
    vocab = list("abcdefghijklmnopqrstuvwxyz") + "to of in is it on at by an be or".split()
    asked = [rng.choice(vocab) for _ in range(8_000)]
    echo = " ".join(w if i % 40 else "q" for i, w in enumerate(asked))  # a near echo: one word in 40 changed
    task = _task_file(tmp_path, generate="{{ input }}", max_iterations=0)
    with serving(tmp_path, task, {"default": echo}) as (proc, port):
        assert proc.poll() is None, proc.stdout.read()
        outcome: dict = {}
        latencies = _health_while(port, _post(port, " ".join(asked), {"max_tokens": 8192}, outcome))
    assert outcome["status"] == 200, outcome
    assert outcome["seconds"] < 10, outcome["seconds"]  # about 0.5 s; 30 s on c3793c2
    assert max(latencies) < 2.0, f"/health took {max(latencies):.1f} s while the echo was checked"
