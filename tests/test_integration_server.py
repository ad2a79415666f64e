"""The ``openai:`` backend against a real ``python -m llama_cpp.server`` on 127.0.0.1."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from conftest import SMOLLM, require_smollm
from selfrefine import SelfRefine, StopReason
from selfrefine.backends.openai_compat import OpenAIBackend
from selfrefine.records import DraftStep, ResultStep

pytestmark = [pytest.mark.integration, pytest.mark.server]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A llama_cpp.server child process serving the embedded SmolLM2 file."""

    def __init__(self) -> None:
        from selfrefine.backends.embedded import default_model_path

        pytest.importorskip("uvicorn", reason="llama-cpp-python[server] is not installed")
        self.port = _free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        cmd = [
            sys.executable, "-m", "llama_cpp.server",
            "--model", str(default_model_path(SMOLLM)), "--model_alias", "smollm2",
            "--host", "127.0.0.1", "--port", str(self.port),
            "--n_ctx", "2048", "--n_threads", str(os.cpu_count() or 2), "--verbose", "False",
        ]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        self._wait_ready()

    def _wait_ready(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited: {self.proc.stderr.read().decode()[-2000:]}")
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


@pytest.fixture(scope="module")
def server():
    require_smollm()
    srv = Server()
    yield srv
    srv.stop()


def test_chat_endpoint_with_constrained_feedback(server):
    backend = OpenAIBackend("smollm2", base_url=server.base_url)
    result = SelfRefine("commongen", backend, max_iterations=1).run("dog, frisbee, catch, throw")
    assert result.stop_reason is not StopReason.ERROR, result.error
    fb = result.iterations[0].feedback
    assert fb.parse_error is None, fb.text  # the server's schema form is used after a 4xx
    assert backend.json_format in ("json_schema", "json_object")
    assert all(c.prompt_tokens > 0 for c in result.calls if c.ok)
    assert result.usage.completion_tokens > 0


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
