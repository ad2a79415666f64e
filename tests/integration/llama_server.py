"""A ``python -m llama_cpp.server`` child process serving the embedded SmolLM2 file on
127.0.0.1, for the tests of the ``openai:`` backend against a real server. The session's
shared one is conftest's ``llama_server`` fixture; a test that kills its server starts its own."""

from __future__ import annotations

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
from conftest import SMOLLM


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
