"""Issue 30 item 6: one writer per run folder. Two `eval`s on one --out both ran every
example (12 rows for 6 inputs, both exit 0); now the second is refused before any model
call with one line naming the holder, and a holder killed with -9 does not block a resume.
The evals are real processes (``python -m selfrefine eval ... --model fake:FILE``)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT

from selfrefine.core.errors import StorageError
from selfrefine.evaluation.runstore import LOCK, RunStore

INPUTS = ["rain", "snow", "fog", "wind", "sun", "hail"]


def _eval(tmp_path: Path, who: str, latency: float) -> list[str]:
    replies = tmp_path / f"{who}.json"
    replies.write_text(json.dumps({"default": f"{who} haiku. Score: 9/10", "latency": latency}))
    data = tmp_path / "inputs.txt"
    data.write_text("\n".join(INPUTS) + "\n")
    return [sys.executable, "-m", "selfrefine", "eval", str(ROOT / "examples" / "haiku.yaml"), "--data", str(data),
            "--model", f"fake:{replies}", "--out", str(tmp_path / "run"), "--no-cache", "--concurrency", "1"]  # fmt: skip


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}


def _start(cmd: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())


def _wait_for(path: Path, proc: subprocess.Popen[str], timeout: float = 30.0) -> None:
    start = time.monotonic()
    while not path.exists():
        assert proc.poll() is None, f"the first eval ended early: {proc.communicate()}"
        assert time.monotonic() - start < timeout, f"{path} never appeared"
        time.sleep(0.05)


def _rows(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()]


@pytest.mark.timeout(120)
def test_a_second_eval_on_the_same_folder_is_refused_naming_the_holder(tmp_path):
    first = _start(_eval(tmp_path, "first", latency=0.4))  # 6 examples x 2 calls: about 5 s
    try:
        _wait_for(tmp_path / "run" / "meta.json", first)  # written under the lock
        started = time.monotonic()  # the same command: the same job, so only the lock can refuse it
        second = subprocess.run(_eval(tmp_path, "first", latency=0.4), capture_output=True, text=True, env=_env(),
                                timeout=60)  # fmt: skip
        second_seconds = time.monotonic() - started
        still_running = first.poll() is None
        out, err = first.communicate(timeout=60)
    finally:
        first.kill()
    assert second.returncode != 0, second.stdout + second.stderr
    message = second.stderr.strip()
    assert len(message.splitlines()) == 1, message
    assert f"pid {first.pid} on {socket.gethostname()}" in message and "another eval" in message, message
    assert still_running and second_seconds < 4.8, "the second eval ran examples (12 model calls of 0.4 s)"
    assert first.returncode == 0, err
    rows = _rows(tmp_path / "run")
    assert sorted(r["result"]["input"] for r in rows) == sorted(INPUTS)  # 6 rows, not 12


@pytest.mark.timeout(120)
def test_a_holder_killed_with_minus_9_does_not_block_the_resume(tmp_path):
    first = _start(_eval(tmp_path, "first", latency=0.4))
    try:
        _wait_for(tmp_path / "run" / "results.jsonl", first)  # a row on disk, the lock held
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
    finally:
        first.kill()
    assert (tmp_path / "run" / LOCK).exists()  # the stale lock file stays; its flock died with the process
    resumed = subprocess.run(_eval(tmp_path, "first", latency=0.0), capture_output=True, text=True, env=_env(),
                             timeout=60)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming" in resumed.stderr
    assert sorted(r["result"]["input"] for r in _rows(tmp_path / "run")) == sorted(INPUTS)


def test_the_lock_is_per_store_and_released(tmp_path):
    one, two = RunStore(tmp_path / "run"), RunStore(tmp_path / "run")
    (tmp_path / "run").mkdir()
    one.acquire()
    with pytest.raises(StorageError, match=f"pid {os.getpid()} on "):
        two.acquire()
    one.release()
    two.acquire()  # free again once released
    two.release()
