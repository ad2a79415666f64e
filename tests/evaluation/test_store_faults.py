"""The run folder and the response cache under damage and bad storage (issue 21, items 7-9).

A results.jsonl whose last row lacks its newline is repaired on open; a cache entry that
does not parse is a miss, recomputed and counted; a damaged cache file, a cache path that
cannot exist, a read-only run folder, a full disk and a task file nested too deep each give
one line naming the file and the fix, never a traceback, and finished rows stay on disk.
The read-only and full-disk cases use a real tmpfs mounted for the test (root only).
"""

from __future__ import annotations

import errno
import gc
import json
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from conftest import FB_DONE

from selfrefine.cli.commands import cli
from selfrefine.core.errors import StorageError
from selfrefine.evaluation import runstore
from selfrefine.evaluation.runner import ExampleRow
from selfrefine.evaluation.runstore import RunStore


def write_data(path: Path, n: int) -> Path:
    path.write_text("".join(json.dumps({"concepts": ["dog", "ball", f"w{i}"]}) + "\n" for i in range(n)))
    return path


def replies(path: Path) -> Path:
    path.write_text(json.dumps({"default": FB_DONE, "replies": {"generate": ["A dog plays with a ball."] * 500}}))
    return path


def eval_args(tmp_path: Path, out: Path, n: int = 3, *cache: str) -> list[str]:
    data = write_data(tmp_path / "d.jsonl", n)
    model = replies(tmp_path / "r.json")
    return [
        "eval",
        "commongen",
        "--data",
        str(data),
        "--out",
        str(out),
        "-m",
        f"fake:{model}",
        "--max-iters",
        "1",
        "--concurrency",
        "1",
        *(cache or ("--no-cache",)),
    ]


def one_line_error(result: Result, code: int = 1) -> str:
    """The error line of a command that failed cleanly: no traceback, one 'Error:' line."""
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, result.output
    return errors[0]


def ids(out: Path) -> list[str]:
    return [json.loads(line)["id"] for line in (out / "results.jsonl").read_text().splitlines()]


# --- item 7: a last row without its newline ------------------------------------------------


def test_last_row_without_newline_is_repaired_on_open(tmp_path):
    a, b = json.dumps({"id": "a", "metrics": [1.0]}), json.dumps({"id": "b", "metrics": [0.0]})
    (tmp_path / "results.jsonl").write_text(a + "\n" + b)  # crash between the row and its newline
    store = RunStore(tmp_path)
    store.acquire()  # the lock's holder repairs (issue 39 item 13: a reader never writes)
    assert [r.id for r in store.rows()] == ["a", "b"]
    assert (tmp_path / "results.jsonl").read_text() == a + "\n" + b + "\n"


def test_rerun_after_a_lost_newline_appends_on_a_line_of_its_own(tmp_path):
    out = tmp_path / "run"
    args = eval_args(tmp_path, out, 3)
    assert CliRunner().invoke(cli, args + ["--limit", "1"]).exit_code == 0
    results = out / "results.jsonl"
    results.write_bytes(results.read_bytes().rstrip(b"\n"))
    second = CliRunner().invoke(cli, args)
    assert second.exit_code == 0, second.output
    assert sorted(ids(out)) == ["commongen-0", "commongen-1", "commongen-2"]
    third = CliRunner().invoke(cli, args)  # and the folder stays usable
    assert third.exit_code == 0, third.output
    assert len(RunStore(out).rows()) == 3


class TornAppend:
    """The file of one append on a disk that fills mid-row: half the row goes in, then ENOSPC."""

    def __init__(self, fh) -> None:
        self.fh = fh

    def __enter__(self) -> TornAppend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.fh.close()

    def write(self, data: bytes) -> None:
        self.fh.write(data[: len(data) // 2])
        self.fh.flush()
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_row_appended_after_a_torn_one_starts_a_line_of_its_own(tmp_path, monkeypatch):
    """Examples in flight still hand their rows to the store after an append failed (eval
    stops at the next turn of its event loop): a torn row must not swallow the next one."""
    store, real_open, torn = RunStore(tmp_path), runstore.open_file, []

    def open_(path: Path, mode: str):
        fh = real_open(path, mode)
        if path.name == "results.jsonl" and mode == "ab" and not torn:
            torn.append(path)
            return TornAppend(fh)
        return fh

    store.append(ExampleRow(id="a", metrics=[1.0]))
    monkeypatch.setattr(runstore, "open_file", open_)
    with pytest.raises(StorageError, match="disk is full"):
        store.append(ExampleRow(id="b", metrics=[1.0]))
    store.append(ExampleRow(id="c", metrics=[1.0]))  # the disk has room again
    monkeypatch.undo()
    assert torn and [r.id for r in RunStore(tmp_path).rows()] == ["a", "c"]  # b is run again on resume


# --- item 9: a cache entry that does not parse ---------------------------------------------


def test_corrupt_cache_entry_is_dropped_recomputed_and_counted(tmp_path):
    cache = tmp_path / "cache.sqlite"
    first = CliRunner().invoke(cli, eval_args(tmp_path, tmp_path / "one", 3, "--cache", str(cache)))
    assert first.exit_code == 0, first.output
    with sqlite3.connect(cache) as db:
        entries = db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
        db.execute('UPDATE responses SET response = \'{"text": 5, "cut\'')
    second = CliRunner().invoke(cli, eval_args(tmp_path, tmp_path / "two", 3, "--cache", str(cache)))
    assert second.exit_code == 0, second.output
    rows = RunStore(tmp_path / "two").rows()
    assert [r.failed for r in rows] == [False] * 3, [r.error for r in rows]
    summary = json.loads((tmp_path / "two" / "summary.json").read_text())
    assert summary["cache_dropped"] == entries > 0
    assert "damaged cache entries (dropped, recomputed)" in second.output
    with sqlite3.connect(cache) as db:  # recomputed answers replaced the damaged ones
        for (text,) in db.execute("SELECT response FROM responses"):
            json.loads(text)


# --- item 8: one-line errors naming the file and the fix -----------------------------------


def test_damaged_cache_file_is_one_line(tmp_path):
    cache = tmp_path / "cache.sqlite"
    cache.write_bytes(b"not a database at all " * 200)
    line = one_line_error(CliRunner().invoke(cli, eval_args(tmp_path, tmp_path / "run", 1, "--cache", str(cache))))
    assert str(cache) in line and "--no-cache" in line and "delete" in line


def test_damaged_pages_inside_a_cache_file_are_one_line(tmp_path):
    cache = tmp_path / "cache.sqlite"
    assert CliRunner().invoke(cli, eval_args(tmp_path, tmp_path / "one", 40, "--cache", str(cache))).exit_code == 0
    gc.collect()  # close the in-process CLI's connection before damaging the file
    with sqlite3.connect(cache) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    with cache.open("r+b") as fh:  # the header stays valid; the table's pages do not
        fh.seek(2 * 4096)
        fh.write(b"\xff" * 8192)
    line = one_line_error(CliRunner().invoke(cli, eval_args(tmp_path, tmp_path / "two", 40, "--cache", str(cache))))
    assert str(cache) in line and "damaged" in line and "--no-cache" in line


@pytest.mark.parametrize("where", ["/dev/null/cache.sqlite", "{tmp}/file/cache.sqlite", "/proc/none/cache.sqlite"])
def test_cache_path_that_cannot_exist_is_one_line(tmp_path, where):
    (tmp_path / "file").write_text("a file, not a folder")
    cache = where.format(tmp=tmp_path)
    line = one_line_error(CliRunner().invoke(cli, eval_args(tmp_path, tmp_path / "run", 1, "--cache", cache)))
    assert cache in line and "--cache" in line


def deep(n: int) -> str:
    return "[" * n + "]" * n


@pytest.mark.parametrize(
    "name,text",
    [
        ("deep.yaml", "name: x\ngenerate: g\nfeedback: f\nrefine: r\nfeedback_schema: {a: " + deep(50_000) + "}\n"),
        (
            "deep.json",
            '{"name": "x", "generate": "g", "feedback": "f", "refine": "r", "feedback_schema": {"a": '
            + deep(50_000)
            + "}}",
        ),
        (
            "deep2.yaml",
            "name: x\ngenerate: g\nfeedback: f\nrefine: r\nfeedback_schema: " + "{a: " * 500 + "1" + "}" * 500,
        ),
    ],
)
def test_deeply_nested_task_file_is_one_line(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    result = CliRunner().invoke(cli, ["run", str(path), "hi", "-m", f"fake:{replies(tmp_path / 'r.json')}"])
    line = one_line_error(result, code=2)
    assert str(path) in line and "nested" in line


# a million values from six lines: aliases share, anything that walks the schema expands them
LAUGHS = "{l0: &l0 [x], " + "".join(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}], " for i in range(1, 7)) + "}"


@pytest.mark.parametrize(
    "name,text,says",
    [
        ("loop.yaml", "name: x\ngenerate: g\nfeedback: f\nrefine: r\nfeedback_schema: {a: &x [*x]}\n", "nested"),
        ("laughs.yaml", "name: x\ngenerate: g\nfeedback: f\nrefine: r\nfeedback_schema: " + LAUGHS + "\n", "expands"),
    ],
)
def test_self_referencing_or_exploding_aliases_are_one_line(tmp_path, name, text, says):
    path = tmp_path / name
    path.write_text(text)
    result = CliRunner().invoke(cli, ["run", str(path), "hi", "-m", f"fake:{replies(tmp_path / 'r.json')}"])
    line = one_line_error(result, code=2)
    assert str(path) in line and says in line


def test_full_disk_injected_at_the_write_is_one_line_and_keeps_the_rows(tmp_path, monkeypatch):
    """Where no tmpfs can be mounted: ENOSPC from the second row's fsync, 4 in flight.

    Only results.jsonl's fsyncs are counted: the lock's and meta.json's come first, and
    counting them too once made the failing row the first one, which left 2 rows or 1
    depending on whether another example finished in the same event-loop turn."""
    out = tmp_path / "run"
    real_fsync, rows = os.fsync, []

    def fsync(fd: int) -> None:
        results = out / "results.jsonl"
        if results.exists() and os.path.samestat(os.fstat(fd), results.stat()):
            rows.append(fd)
            if len(rows) == 2:  # the first row is on disk, the second written but not synced
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_fsync(fd)

    args = eval_args(tmp_path, out, 12)
    args[args.index("--concurrency") + 1] = "4"
    monkeypatch.setattr(os, "fsync", fsync)
    line = one_line_error(CliRunner().invoke(cli, args))
    monkeypatch.undo()
    assert str(out / "results.jsonl") in line and "disk is full" in line
    assert 2 <= len(RunStore(out).rows()) < 12  # rows written before stay whole
    assert CliRunner().invoke(cli, args).exit_code == 0
    assert sorted(ids(out)) == sorted(f"commongen-{i}" for i in range(12))


@pytest.mark.parametrize("name", ["results.jsonl", "meta.json"])
def test_unreadable_run_folder_file_is_one_line_for_eval_and_report(tmp_path, name):
    out = tmp_path / "run"
    args = eval_args(tmp_path, out, 1)
    assert CliRunner().invoke(cli, args).exit_code == 0
    (out / name).unlink()
    (out / name).mkdir()  # unreadable as a file, even for root
    for command in (args, ["report", str(out), "--out", str(tmp_path / "report")]):
        line = one_line_error(CliRunner().invoke(cli, command))
        assert str(out / name) in line and "restore" in line


@pytest.mark.parametrize("where", ["/dev/null/report", "/proc/none/report"])
def test_report_folder_that_cannot_be_written_is_one_line(tmp_path, where):
    out = tmp_path / "run"
    assert CliRunner().invoke(cli, eval_args(tmp_path, out, 1)).exit_code == 0
    line = one_line_error(CliRunner().invoke(cli, ["report", str(out), "--out", where]))
    assert where in line and "--out" in line


# --- item 8 on real file systems: read-only and full --------------------------------------


class TinyFs:
    """A tmpfs mounted for one test (needs root); remount changes its size or makes it read-only."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def remount(self, options: str) -> None:
        subprocess.run(["mount", "-o", f"remount,{options}", str(self.path)], check=True)


@pytest.fixture
def tiny_fs(tmp_path: Path) -> Iterator[TinyFs]:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield TinyFs(mnt)
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_read_only_run_folder_is_one_line_and_keeps_its_rows(tmp_path, tiny_fs):
    out = tiny_fs.path / "run"
    args = eval_args(tmp_path, out, 3)
    assert CliRunner().invoke(cli, args + ["--limit", "2"]).exit_code == 0
    before = (out / "results.jsonl").read_bytes()
    tiny_fs.remount("ro")
    line = one_line_error(CliRunner().invoke(cli, args))
    assert str(out) in line and "read-only" in line and "--out" in line
    line = one_line_error(CliRunner().invoke(cli, eval_args(tmp_path, tiny_fs.path / "new", 1)))
    assert str(tiny_fs.path / "new") in line and "read-only" in line
    assert (out / "results.jsonl").read_bytes() == before
    assert len(RunStore(out).rows()) == 2  # still readable, for report


def test_cache_on_a_read_only_file_system_is_one_line(tmp_path, tiny_fs):
    cache = tiny_fs.path / "cache.sqlite"
    assert CliRunner().invoke(cli, eval_args(tmp_path, tmp_path / "one", 1, "--cache", str(cache))).exit_code == 0
    gc.collect()  # the in-process CLI's cache connection: an open file keeps the mount busy
    tiny_fs.remount("ro")
    for path in (cache, tiny_fs.path / "new.sqlite"):
        line = one_line_error(CliRunner().invoke(cli, eval_args(tmp_path, tmp_path / "two", 1, "--cache", str(path))))
        assert str(path) in line and "--no-cache" in line


def test_full_disk_is_one_line_and_a_rerun_finishes_the_run(tmp_path, tiny_fs):
    tiny_fs.remount("size=16k")
    out = tiny_fs.path / "run"
    args = eval_args(tmp_path, out, 40)
    line = one_line_error(CliRunner().invoke(cli, args))
    assert str(out / "results.jsonl") in line and "full" in line and "rerun" in line
    kept = RunStore(out).rows()  # every row that made it is whole; a torn tail is dropped
    assert 0 < len(kept) < 40
    tiny_fs.remount("size=1m")
    again = CliRunner().invoke(cli, args)
    assert again.exit_code == 0, again.output
    assert sorted(ids(out)) == sorted(f"commongen-{i}" for i in range(40))


def test_full_disk_under_the_cache_is_one_line(tmp_path, tiny_fs):
    tiny_fs.remount("size=16k")
    cache = tiny_fs.path / "cache.sqlite"
    out = tmp_path / "run"
    line = one_line_error(CliRunner().invoke(cli, eval_args(tmp_path, out, 40, "--cache", str(cache))))
    assert str(cache) in line and "full" in line
    rows = RunStore(out).rows()  # the examples finished before the disk filled are kept
    assert all(not r.failed for r in rows)
