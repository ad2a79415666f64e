"""A run folder on disk: durable, append-only, resumable.

Layout of ``runs/NAME/``::

    meta.json       what was run: task, models, config, data path, limit (RunMeta)
    results.jsonl   one ExampleRow per finished example, appended and fsync'ed
    summary.json    the EvalSummary of the rows, rewritten at the end of each eval
    lock            held (flock) by the one eval writing the folder: its pid, host and start

Every finished example is on disk (written, flushed and fsync'ed) before the next one is
counted, so a ``kill -9`` loses at most the examples in flight. A line cut short by a
crash is dropped on the next open, and a whole last row that lost its newline gets it back
(else the next row would be appended onto its line); rerunning the same eval skips the
finished ids. A folder that cannot be written (read-only, full disk) is a StorageError.
One eval writes a folder at a time: a second one is refused before any model call, naming
the holder; the kernel drops the lock when its holder dies, so a killed eval never blocks.
The lock belongs to the file, so before each write the holder checks that ``lock`` is still
the file it locked: one deleted or replaced mid-run (which would let a second eval in) is
taken again, or, when another eval has taken it, this one stops before writing. Only the
holder repairs a torn last line; a reader (``report`` during an eval) skips it, since it
may be a row the writer is still writing.

No file of the folder is opened through a symbolic link (:func:`.storage.open_file`): a
``lock`` or ``results.jsonl`` planted as a link to a file elsewhere is a StorageError naming
it, and the file it points to is left alone. The folder itself is the one the user named
(it may be a link to a bigger disk).

A failed example (no result, or a run stopped by an error) is retried by a rerun: its new
row is appended and supersedes the old one, which stays in the file. ``rows()`` returns
one row per id, the latest, except that a failed row never replaces a good one.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import json
import os
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from ..core.errors import ConfigError, InputError, StorageError
from .runner import EvalSummary, ExampleRow
from .storage import open_fd, open_file, refuse_link, run_folder_error, run_folder_read_error

RESULTS = "results.jsonl"
META = "meta.json"
SUMMARY = "summary.json"
LOCK = "lock"
LOCK_TRIES = 5  # a lock file replaced this many times in a row between open and flock: give up


class RunMeta(BaseModel):
    name: str
    task: str
    data: str
    models: dict[str, str]  # role -> model name, for people
    model_ids: dict[str, str] = Field(default_factory=dict)  # role -> what decides the answers
    model_files: dict[str, dict[str, Any]] = Field(default_factory=dict)  # role -> file, size, sha256
    config: dict[str, Any] = Field(default_factory=dict)
    limit: int | None = None
    version: str = ""
    tests: str | None = None  # the --tests file of a codeopt eval, for people
    tests_sha256: str | None = None  # its content, which decides the metric

    def same_job(self, other: RunMeta) -> bool:
        """Whether resuming ``other`` into this folder would mix different experiments."""
        keys = ("task", "model_ids", "config", "tests_sha256")
        return all(getattr(self, k) == getattr(other, k) for k in keys) and self.data == other.data


class RunStore:
    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self._lock = threading.Lock()
        self._held: int | None = None  # the lock file's descriptor while this store writes
        self._torn = False  # the last append failed: it may have left part of its row

    # -- meta --------------------------------------------------------------------------------

    def meta(self) -> RunMeta:
        path = self.folder / META
        try:
            with open_file(path, "rb") as fh:
                return RunMeta.model_validate_json(fh.read().decode("utf-8"))
        except FileNotFoundError:
            raise InputError(
                f"{self.folder} is not a run folder (no {META}); create it with `selfrefine eval`"
            ) from None
        except (ValidationError, ValueError) as exc:
            raise InputError(f"{path} is damaged: {exc}") from None
        except OSError as exc:
            raise run_folder_read_error(path, exc) from None

    def start(self, meta: RunMeta) -> None:
        """Create the folder and take its lock (:meth:`acquire`), or check that an existing
        one holds the same experiment. The lock is held until :meth:`release`."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise run_folder_error(self.folder, exc) from None
        self.acquire()
        if os.path.lexists(self.folder / META):  # a link there is refused by meta()
            old = self.meta()
            if not old.same_job(meta):
                raise ConfigError(
                    f"{self.folder} holds a different run ({'; '.join(differences(old, meta))}); "
                    "use another --out, the old settings, or delete that folder"
                )
            return
        _atomic_write(self.folder / META, meta.model_dump_json(indent=2))

    # -- one writer ----------------------------------------------------------------------------

    def acquire(self) -> None:
        """Take the folder's lock, or raise a StorageError naming the eval that holds it.
        ``flock`` belongs to the open file: the kernel drops it when the holder exits or
        is killed, so a stale lock file never blocks a resume."""
        if self._held is not None:
            return
        self._held = self._locked(
            lambda holder: (
                f"{self.folder} is being written by another eval ({holder}); wait for it to finish, "
                "or give another --out"
            )
        )
        _write_holder(self._held)

    def _locked(self, refused: Callable[[str], str]) -> int:
        """A descriptor of the folder's lock file, locked by this process; a StorageError
        with ``refused(holder)`` when another holds it. A file deleted or replaced between
        its opening and its locking is not the folder's lock: the one now there is tried."""
        path = self.folder / LOCK
        for _ in range(LOCK_TRIES):
            try:
                fd = open_fd(path, os.O_RDWR | os.O_CREAT)
            except OSError as exc:
                raise run_folder_error(path, exc) from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                holder = _holder(fd)
                os.close(fd)
                if isinstance(exc, BlockingIOError):
                    raise StorageError(refused(holder)) from None
                raise run_folder_error(path, exc) from None
            if _is_file_at(fd, path):
                return fd
            os.close(fd)
        raise StorageError(f"{path} keeps being replaced while it is locked; check what else writes {self.folder}")

    def _check_lock(self) -> None:
        """Before a write: the lock held is still the folder's ``lock`` file. One deleted or
        replaced since (by hand, by a cleaner) would let a second eval in: it is taken
        again, or, when another eval holds the new one, this eval stops here."""
        if self._held is None or _is_file_at(self._held, self.folder / LOCK):
            return
        fd = self._locked(
            lambda holder: (
                f"{self.folder / LOCK} was removed or replaced while this eval wrote the folder, and "
                f"another eval holds it now ({holder}); this one stops so that one eval writes the folder "
                "(finished rows are kept)"
            )
        )
        os.close(self._held)
        self._held = fd
        _write_holder(fd)

    def release(self) -> None:
        """Let another eval write the folder (the lock file stays, unlocked)."""
        if self._held is not None:
            os.close(self._held)  # closing the only descriptor drops the flock
            self._held = None

    # -- rows --------------------------------------------------------------------------------

    def rows(self) -> list[ExampleRow]:
        """One row per example id, in the order ids first appear: the latest row, unless it
        failed and an earlier one did not (a retried failure never hides a good row)."""
        latest: dict[str, ExampleRow] = {}
        for row in self.all_rows():
            old = latest.get(row.id)
            if old is None or not row.failed or old.failed:
                latest[row.id] = row
        return list(latest.values())

    def all_rows(self) -> list[ExampleRow]:
        """Every line of results.jsonl, superseded rows too. A last line cut short (by a
        crash, or a row being written now) is skipped; the lock's holder also drops it from
        the file, and ends a whole last row without its newline (a reader never writes: what
        it saw cut short may be the holder's row, finished since)."""
        if self._held is not None:
            self._check_lock()
        return self._read(repair=self._held is not None)

    def _read(self, repair: bool) -> list[ExampleRow]:
        path = self.folder / RESULTS
        if not os.path.lexists(path):
            return []
        try:
            rows, good_bytes, newline = _read_rows(path)
        except OSError as exc:
            raise run_folder_read_error(path, exc) from None
        if repair:
            _repair_tail(path, good_bytes, newline)
        return rows

    def finished_ids(self) -> set[str]:
        """Ids with a good row: what a rerun skips (failed ones are retried)."""
        return {row.id for row in self.rows() if not row.failed}

    def recorded_ids(self) -> set[str]:
        """Ids with any row, failed or not: what a rerun with --no-retry-failed skips."""
        return {row.id for row in self.rows()}

    def append(self, row: ExampleRow) -> None:
        line = (row.model_dump_json() + "\n").encode()  # the row and its newline in one write
        path = self.folder / RESULTS
        with self._lock:
            self._check_lock()
            if self._torn or not _ends_whole(path):  # a failed append (examples in flight may still
                self._read(repair=True)  # finish after it) or a crash: this row must not join its line
            try:
                with open_file(path, "ab") as fh:
                    fh.write(line)
                    fh.flush()
                    os.fsync(fh.fileno())
            except OSError as exc:  # rows written before stay whole; a torn one is dropped on resume
                self._torn = True
                raise run_folder_error(path, exc) from None
            self._torn = False

    def write_summary(self, summary: EvalSummary, extra: dict[str, Any] | None = None) -> None:
        data = summary.model_dump(mode="json")
        data.update(extra or {})
        with self._lock:
            self._check_lock()
        _atomic_write(self.folder / SUMMARY, json.dumps(data, indent=2))


def _read_rows(path: Path) -> tuple[list[ExampleRow], int, bool]:
    """The whole rows of results.jsonl, how many bytes they fill, and whether the last one
    ends with its newline; a damaged line before the last is an InputError."""
    rows, good_bytes, newline = [], 0, True
    with open_file(path, "rb") as fh:
        for raw in fh:
            try:
                rows.append(ExampleRow.model_validate_json(raw))
            except ValidationError:
                if raw.endswith(b"\n"):
                    raise InputError(f"{path} has a damaged line after {len(rows)} rows") from None
                break  # the torn tail of an interrupted write
            good_bytes += len(raw)
            newline = raw.endswith(b"\n")
    return rows, good_bytes, newline


def _repair_tail(path: Path, good_bytes: int, newline: bool) -> None:
    """Drop a torn last line, or end a whole last row with its newline. A folder that cannot
    be written is still read (``report``); an eval then fails on its first append."""
    try:
        with open_file(path, "r+b") as fh:
            if good_bytes < os.fstat(fh.fileno()).st_size:
                fh.truncate(good_bytes)
            if good_bytes and not newline:
                fh.seek(0, os.SEEK_END)
                fh.write(b"\n")
                fh.flush()
                os.fsync(fh.fileno())
    except OSError:
        pass


def _ends_whole(path: Path) -> bool:
    """Whether results.jsonl is absent, empty or ends with a newline (a row may follow)."""
    try:
        with open_file(path, "rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            return size == 0 or os.pread(fh.fileno(), 1, size - 1) == b"\n"
    except FileNotFoundError:
        return True
    except OSError:
        return True  # the append that follows meets the same error and names it


def _is_file_at(fd: int, path: Path) -> bool:
    """Whether the open file ``fd`` is the one ``path`` names now (not deleted, not replaced)."""
    try:
        held, there = os.fstat(fd), os.lstat(path)  # a link there is not the file
    except OSError:
        return False
    return (held.st_dev, held.st_ino) == (there.st_dev, there.st_ino)


def _write_holder(fd: int) -> None:
    """Who holds the lock, for the message a second eval gets (best effort: the lock is
    what keeps it out)."""
    started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    record = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started": started})
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)
        os.pwrite(fd, record.encode() + b"\n", 0)
        os.fsync(fd)


def _holder(fd: int) -> str:
    try:
        data = json.loads(os.pread(fd, 4096, 0) or b"{}")
        return f"pid {int(data['pid'])} on {data['host']}, started {data['started']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "a process that has not yet said which"


def differences(old: RunMeta, new: RunMeta) -> list[str]:
    """What ``same_job`` compares, as "setting old → new" for each one that differs."""
    out = [
        f"{key} {getattr(old, key)} → {getattr(new, key)}"
        for key in ("task", "data")
        if getattr(old, key) != getattr(new, key)
    ]
    for role in sorted(set(old.model_ids) | set(new.model_ids)):
        if old.model_ids.get(role) != new.model_ids.get(role):
            before, after = old.models.get(role), new.models.get(role)
            if before == after:  # same name, other file or options: show what decides the answers
                before, after = old.model_ids.get(role), new.model_ids.get(role)
            out.append(f"{role} model {before} → {after}")
    for key in sorted(set(old.config) | set(new.config)):
        if old.config.get(key) != new.config.get(key):
            out.append(f"{key} {old.config.get(key, '(unset)')} → {new.config.get(key, '(unset)')}")
    if old.tests_sha256 != new.tests_sha256:
        out.append(
            f"tests {old.tests or 'none'} → {new.tests or 'none'}"
            if old.tests != new.tests
            else f"tests file {new.tests} changed"
        )
    return out


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    refuse_link(path)
    try:
        with open_file(tmp, "wb") as fh:
            fh.write(text.encode("utf-8"))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):  # a read-only folder cannot lose it either
            tmp.unlink(missing_ok=True)
        raise run_folder_error(path, exc) from None
