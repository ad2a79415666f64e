"""Removing a sandbox's working directory, whatever the program left in it.

``shutil.rmtree`` recurses once per directory level (a program that nests 1,500
directories makes it raise ``RecursionError``) and works with whole paths (which grow past
``PATH_MAX``). :func:`remove_tree` walks down and back up with one directory descriptor at
a time (``openat(name)`` going down, ``openat("..")`` going up), never follows a symbolic
link, and makes each directory writable before emptying it (a program may have left one
read-only). It is only called once every process of the run is gone, so nothing changes
the tree while it is walked.
"""

from __future__ import annotations

import os
import stat

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def remove_tree(path: str) -> None:
    """Delete ``path`` and everything below it, at any depth; raises OSError if it cannot."""
    fd = os.open(path, _DIR_FLAGS)
    names: list[str] = []  # the path from ``path`` down to the directory ``fd`` is open on
    try:
        while True:
            child = _empty_or_descend(fd)
            if child is not None:
                os.chmod(child, stat.S_IRWXU, dir_fd=fd)
                deeper = os.open(child, _DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = deeper
                names.append(child)
                continue
            if not names:
                break
            parent = os.open("..", _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = parent
            os.rmdir(names.pop(), dir_fd=fd)
    finally:
        os.close(fd)
    os.rmdir(path)


def _empty_or_descend(fd: int) -> str | None:
    """Unlink every non-directory in ``fd``; return the name of a subdirectory, if any."""
    with os.scandir(fd) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                return entry.name
            os.unlink(entry.name, dir_fd=fd)
    return None
