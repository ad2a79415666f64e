"""The package's entry points, read once per group and import path.

Tasks, strategies, task-file loaders and backends are found through entry-point groups
(``selfrefine.tasks``, ``selfrefine.strategies``, …), the built-in ones as a third party's.
Reading a group scans every installed distribution's metadata (tens of milliseconds), and a
run looks its task and strategy up each time an engine is made; so a group's entry points
are read once for each ``sys.path``: a distribution put on the path later (a plugin's folder
added) is found, one installed into a folder already read is found by :func:`forget`.
"""

from __future__ import annotations

import importlib.metadata
import sys
import threading

_READ: dict[tuple[str, tuple[str, ...]], dict[str, importlib.metadata.EntryPoint]] = {}
_LOCK = threading.Lock()


def entry_points(group: str) -> dict[str, importlib.metadata.EntryPoint]:
    """The group's entry points by name, as the current import path finds them."""
    key = (group, tuple(sys.path))
    with _LOCK:
        found = _READ.get(key)
    if found is None:
        found = {ep.name: ep for ep in importlib.metadata.entry_points(group=group)}
        with _LOCK:
            _READ[key] = found
    return dict(found)


def forget() -> None:
    """Read every group afresh next time (a distribution installed while the process runs)."""
    with _LOCK:
        _READ.clear()
