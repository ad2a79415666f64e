"""The ``openai:`` backend against a real ``python -m llama_cpp.server`` on 127.0.0.1."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import SMOLLM, require_smollm

from selfrefine import SelfRefine, StopReason
from selfrefine.backends.openai_compat import OpenAIBackend
from selfrefine.core.records import DraftStep, ResultStep

pytestmark = [pytest.mark.integration, pytest.mark.server]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A llama_cpp.server child process serving the embedded SmolLM2 file."""

    def __init__(self, n_threads: int | None = None) -> None:
        from selfrefine.backends.embedded import default_model_path

        pytest.importorskip("uvicorn", reason="llama-cpp-python[server] is not installed")
        self.port = _free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        cmd = [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(default_model_path(SMOLLM)),
            "--model_alias",
            "smollm2",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--n_ctx",
            "2048",
            "--n_threads",
            str(n_threads or os.cpu_count() or 2),
            "--n_threads_batch",
            str(n_threads or os.cpu_count() or 2),
            "--verbose",
            "False",
        ]
        # the server's own log (uvicorn's access lines: one per request, with its status)
        self.log = Path(tempfile.mkstemp(prefix="llama-server-", suffix=".log")[1])
        with self.log.open("wb") as out:
            env = {**os.environ, "PYTHONUNBUFFERED": "1"}
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        self._wait_ready()

    def chat_statuses(self) -> list[int]:
        """The HTTP status of every chat request the server has answered, in order."""
        text = self.log.read_text(encoding="utf-8", errors="replace")
        return [int(code) for code in re.findall(r'"POST /v1/chat/completions HTTP/[\d.]+" (\d{3})', text)]

    def _wait_ready(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited: {self.log.read_text(errors='replace')[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as resp:
                    if resp.status == 200:
                        return
            except OSError:
                time.sleep(0.5)
        self.stop()
        raise RuntimeError("llama_cpp.server did not become ready")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        self.log.unlink(missing_ok=True)


@pytest.fixture(scope="module")
def server():
    require_smollm()
    srv = Server()
    yield srv
    srv.stop()


def test_chat_endpoint_falls_back_to_the_json_object_form_for_good(server):
    """llama_cpp.server knows only ``{"type": "json_object", "schema": ...}``: it refuses the
    standard json_schema form once, and from then on the backend sends the older form, for
    every later feedback call of this run and of the next."""
    backend = OpenAIBackend("smollm2", base_url=server.base_url)
    assert backend.json_format == "auto"
    engine = SelfRefine("commongen", backend, max_iterations=1, temperature=0.0)
    before = len(server.chat_statuses())
    results = [engine.run(concepts) for concepts in ("dog, frisbee, catch, throw", "sun, beach, towel")]
    statuses = server.chat_statuses()[before:]
    for result in results:
        assert result.stop_reason is not StopReason.ERROR, result.error
        fbs = [it.feedback for it in result.iterations if it.feedback is not None]
        assert fbs and all(fb.parse_error is None for fb in fbs), [fb.text for fb in fbs]
        assert all(c.prompt_tokens > 0 for c in result.calls if c.ok)
        assert result.usage.completion_tokens > 0
    assert backend.json_format == "json_object"
    refused = [code for code in statuses if code != 200]
    assert len(refused) == 1 and refused[0] in (400, 422, 500), statuses
    # every recorded call is one request, plus the one refused request (retried within its call)
    assert len(statuses) == sum(len(r.calls) for r in results) + 1, statuses


def test_completion_endpoint(server):
    backend = OpenAIBackend("smollm2", base_url=server.base_url, api="completion")
    question = "Tom has 5 apples and buys 3 more. How many apples does he have?"
    result = SelfRefine("gsm8k", backend, max_iterations=1).run(question, reference=8)
    assert result.stop_reason is not StopReason.ERROR, result.error
    assert result.iterations[0].draft.startswith("def solution")
    assert result.usage.calls >= 2


def test_server_dying_mid_run_keeps_finished_drafts():
    require_smollm()
    srv = Server()
    backend = OpenAIBackend("smollm2", base_url=srv.base_url, timeout=120)
    engine = SelfRefine("commongen", backend, max_iterations=2, backend_retries=2, retry_base_delay=0.05)

    async def drive():
        result = None
        async for step in engine.astream("sun, beach, towel"):
            if isinstance(step, DraftStep) and step.iteration == 0:
                srv.stop()  # the server dies after the first draft
            if isinstance(step, ResultStep):
                result = step.result
        await engine.aclose()
        return result

    try:
        result = asyncio.run(drive())
    finally:
        srv.stop()
    assert result.stop_reason is StopReason.ERROR
    assert "failed 3 times" in result.error and "cannot reach server" in result.error
    assert result.output == result.iterations[0].draft and result.output
    failed = [c for c in result.calls if not c.ok]
    assert [c.role for c in failed] == ["feedback"] * 3, failed
    assert [c.attempt for c in failed] == [1, 2, 3]
