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


# --- issue 39, item 13: a lock file deleted mid-run, a reader during an eval ---------------

MANY = [f"topic {i}" for i in range(40)]


def _many_eval(tmp_path: Path, latency: float) -> list[str]:
    replies = tmp_path / "many.json"
    replies.write_text(json.dumps({"default": "haiku. Score: 9/10", "latency": latency}))
    data = tmp_path / "many.txt"
    data.write_text("\n".join(MANY) + "\n")
    return [sys.executable, "-m", "selfrefine", "eval", str(ROOT / "examples" / "haiku.yaml"), "--data", str(data),
            "--model", f"fake:{replies}", "--out", str(tmp_path / "run"), "--no-cache", "--concurrency", "1"]  # fmt: skip


@pytest.mark.timeout(180)
def test_a_lock_file_deleted_mid_run_does_not_let_a_second_eval_in(tmp_path):
    # b6c03ab: the first eval kept its lock on the deleted file, the second locked a new one,
    # and both wrote the folder (64 rows for 40 ids). Now the holder checks, before each
    # write, that "lock" is still the file it locked: it takes it again (the second eval is
    # refused), or it stops because the second holds it; each id is written once either way
    first = _start(_many_eval(tmp_path, latency=0.05))  # 40 examples x 2 calls: about 4 s
    try:
        _wait_for(tmp_path / "run" / "results.jsonl", first)
        (tmp_path / "run" / LOCK).unlink()
        second = subprocess.run(_many_eval(tmp_path, latency=0.05), capture_output=True, text=True, env=_env(),
                                timeout=120)  # fmt: skip
        first_err = first.communicate(timeout=120)[1]
    finally:
        first.kill()
    failed = [(p.returncode, err) for p, err in ((first, first_err), (second, second.stderr)) if p.returncode]
    assert len(failed) == 1, (first.returncode, first_err, second.returncode, second.stderr)
    message = failed[0][1].strip().splitlines()[-1]
    assert "another eval" in message, message
    resumed = subprocess.run(_many_eval(tmp_path, latency=0.0), capture_output=True, text=True, env=_env(),
                             timeout=120)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    inputs = [r["result"]["input"] for r in _rows(tmp_path / "run")]
    assert sorted(inputs) == sorted(MANY)  # 40 rows, each id once


def test_a_reader_skips_a_row_being_written_and_leaves_it_to_the_holder(tmp_path):
    # b6c03ab: any reader (report during an eval) truncated what looked like a torn last line,
    # which was the writer's row half-way in: the rest of it, and the rows after, were lost
    from selfrefine.evaluation.runner import ExampleRow

    writer = RunStore(tmp_path)
    writer.acquire()
    writer.append(ExampleRow(id="a", metrics=[1.0]))
    line = (ExampleRow(id="b", metrics=[0.5]).model_dump_json() + "\n").encode()
    results = tmp_path / "results.jsonl"
    with results.open("ab") as fh:  # the writer's row, half written
        fh.write(line[:10])
    size = results.stat().st_size
    assert [r.id for r in RunStore(tmp_path).rows()] == ["a"]  # the reader skips the half row ...
    assert results.stat().st_size == size  # ... and leaves it alone
    with results.open("ab") as fh:  # the writer's write goes on
        fh.write(line[10:])
    writer.append(ExampleRow(id="c", metrics=[1.0]))
    assert [r.id for r in RunStore(tmp_path).rows()] == ["a", "b", "c"]
    writer.release()


def test_the_holder_drops_a_torn_tail_a_reader_skipped(tmp_path):
    results = tmp_path / "results.jsonl"
    results.write_text('{"id": "a", "metrics": [1.0]}\n{"id": "b", "metr')  # a crash mid-row
    assert [r.id for r in RunStore(tmp_path).rows()] == ["a"]
    assert results.read_text().endswith('"metr')  # a reader does not write
    holder = RunStore(tmp_path)
    holder.acquire()
    assert [r.id for r in holder.rows()] == ["a"]
    assert results.read_text() == '{"id": "a", "metrics": [1.0]}\n'
    holder.release()


def test_a_lock_file_replaced_while_held_is_taken_again(tmp_path):
    from selfrefine.evaluation.runner import ExampleRow

    store = RunStore(tmp_path)
    store.acquire()
    (tmp_path / LOCK).unlink()
    store.append(ExampleRow(id="a", metrics=[1.0]))  # takes the folder's lock again first
    with pytest.raises(StorageError, match="another eval"):
        RunStore(tmp_path).acquire()
    (tmp_path / LOCK).unlink()
    other = RunStore(tmp_path)
    other.acquire()  # got in while the lock file was gone: the first store must not write
    with pytest.raises(StorageError, match=r"lock was removed or replaced while this eval wrote the folder"):
        store.append(ExampleRow(id="b", metrics=[1.0]))
    assert [r.id for r in other.rows()] == ["a"]
    other.release()
    store.release()


@pytest.mark.timeout(300)
def test_reading_the_folder_all_through_an_eval_loses_no_row(tmp_path):
    # the audit's probe: a reader (what `report` does) over and over while an eval writes rows
    # of about 4 MB; b6c03ab's reader truncated rows being written and lost 1-2 of 40 in 2 of
    # 3 runs here (the test above shows the same every time)
    replies = tmp_path / "big.json"
    replies.write_text(json.dumps({"default": "x" * 1_000_000 + " Score: 9/10"}))
    cmd = _many_eval(tmp_path, latency=0.0)
    cmd[cmd.index("--model") + 1] = f"fake:{replies}"
    writer, reads = _start(cmd), 0
    try:
        while writer.poll() is None:
            if (tmp_path / "run" / "results.jsonl").exists():
                reads += bool(RunStore(tmp_path / "run").rows() is not None)
        err = writer.communicate(timeout=60)[1]
    finally:
        writer.kill()
    assert writer.returncode == 0, err
    assert reads > 0
    assert sorted(r["result"]["input"] for r in _rows(tmp_path / "run")) == sorted(MANY)
