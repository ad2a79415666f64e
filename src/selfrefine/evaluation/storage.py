"""File-system and SQLite failures of the run folder and the response cache, as one line
naming the file and the fix (:class:`StorageError`) instead of a traceback.

The run folder is append-only and every finished row is fsync'ed before it is counted, so
each message for it can promise that rerunning the same command after the fix loses nothing.

Every file of a run folder or a report is opened by :func:`open_file` without following a
symbolic link: a link planted in the folder (``lock`` -> a file elsewhere) would otherwise
have the eval write through it. A link, a FIFO, a folder or a file with more than one name
(a hard link) is a StorageError naming it, before a byte is read or written.
"""

from __future__ import annotations

import errno
import os
import shutil
import sqlite3
import stat
from pathlib import Path
from typing import BinaryIO

from ..core.errors import StorageError

FULL = {errno.ENOSPC, errno.EDQUOT}
READ_ONLY = {errno.EROFS, errno.EACCES, errno.EPERM}
NO_PATH = {errno.ENOENT, errno.ENOTDIR, errno.EEXIST, errno.ENAMETOOLONG}
LOW_SPACE = 64 << 10  # less room than this left: an I/O error is most likely the full disk
KEPT = "rerun the same command (finished examples are kept)"
FLAGS = {
    "rb": os.O_RDONLY,
    "r+b": os.O_RDWR,
    "wb": os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
    "ab": os.O_WRONLY | os.O_CREAT | os.O_APPEND,
}


def open_fd(path: Path, flags: int, mode: int = 0o644) -> int:
    """``os.open`` of a run folder's (or a report's) file that follows no symbolic link and
    blocks on no FIFO; one that is not a plain file with one name is refused
    before anything is read, truncated or written. Other OSErrors are the caller's."""
    truncate = flags & os.O_TRUNC  # only once the file is known to be the folder's own
    try:
        fd = os.open(path, (flags & ~os.O_TRUNC) | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise not_own_file(path, "is a symbolic link") from None
        raise
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):  # what open() of a folder says: the caller's message
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        if not stat.S_ISREG(info.st_mode):
            raise not_own_file(path, "is not a plain file")
        if info.st_nlink > 1:  # another name may be outside the folder
            raise not_own_file(path, f"has {info.st_nlink - 1} other name(s) (a hard link)")
        os.set_blocking(fd, True)
        if truncate:
            os.ftruncate(fd, 0)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_file(path: Path, mode: str) -> BinaryIO:
    """:func:`open_fd` as a binary file object (``mode``: one of :data:`FLAGS`)."""
    return os.fdopen(open_fd(path, FLAGS[mode]), mode)


def refuse_link(path: Path) -> None:
    """Before a file is replaced by a rename (which would not write through a link, but a
    link there is not the folder's own file): a StorageError where ``path`` is a link."""
    if os.path.islink(path):
        raise not_own_file(path, "is a symbolic link")


def not_own_file(path: Path, what: str) -> StorageError:
    return StorageError(
        f"{path} {what}, not a file written by selfrefine; nothing is read or written through it: "
        "remove it (and check who put it there), or give another folder"
    )


def disk_full(path: Path) -> bool:
    """Whether the file system holding ``path`` (or its nearest existing parent) is full."""
    p = path
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        return shutil.disk_usage(p).free < LOW_SPACE
    except OSError:
        return False


def run_folder_error(path: Path, exc: OSError) -> StorageError:
    """``path`` (a run folder or a file in it) could not be written."""
    code = exc.errno
    if code in READ_ONLY:
        fix = f"the folder is read-only; give --out a writable folder, or make it writable and {KEPT}"
    elif code in NO_PATH:
        fix = "that folder cannot be created there; give --out another path"
    elif code in FULL or disk_full(path):
        fix = f"the disk is full; free space and {KEPT}"
    else:
        fix = f"check the folder, then {KEPT}"
    return StorageError(f"cannot write {path}: {exc.strerror or exc}; {fix}")


def run_folder_read_error(path: Path, exc: OSError) -> StorageError:
    """A file of a run folder exists but cannot be read (a folder in its place, no permission)."""
    return StorageError(
        f"cannot read {path}: {exc.strerror or exc}; a run folder holds the files meta.json, "
        "results.jsonl and summary.json written by `selfrefine eval`: restore that file or give another folder"
    )


def report_error(out: Path, exc: OSError) -> StorageError:
    """The report folder ``out`` (or a file in it) cannot be written."""
    where = f"{out}" if exc.filename in (None, str(out)) else f"{out} ({exc.filename})"
    fix = "free space" if exc.errno in FULL else "give --out a folder you can write"
    return StorageError(f"cannot write the report to {where}: {exc.strerror or exc}; {fix}")


def cache_error(path: Path, exc: OSError | sqlite3.Error) -> StorageError:
    """The response cache file ``path`` cannot be opened, read or written."""
    what = f"response cache {path}"
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    if isinstance(exc, OSError) and exc.errno in (errno.EEXIST, errno.ENOTDIR):
        reason = "part of its folder path is a file, not a folder"  # mkdir's "File exists" misleads
    if isinstance(exc, OSError):
        full, read_only, no_path = exc.errno in FULL, exc.errno in READ_ONLY, exc.errno in NO_PATH
    else:
        text = str(exc).lower()
        full, read_only, no_path = "full" in text, "readonly" in text, "unable to open" in text
    if read_only:
        fix = "it is read-only; give --cache a writable file, or run with --no-cache"
    elif no_path:
        fix = "it cannot be created or written there; give --cache a file in a writable folder, or run with --no-cache"
    elif full or (isinstance(exc, sqlite3.OperationalError) and disk_full(path)):
        fix = f"the disk is full; free space and {KEPT}, or run with --no-cache"
    elif isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError):
        fix = (
            "the file is damaged; delete it (its answers are recomputed), give another --cache, or run with --no-cache"
        )
    else:
        fix = "give another --cache, or run with --no-cache"
    return StorageError(f"{what}: {reason}; {fix}")
