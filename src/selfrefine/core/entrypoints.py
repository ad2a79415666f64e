"""The package's plugins by group: the built-in ones registered in-process, a third party's
found through its entry points, both through :func:`register`.

Tasks, strategies, task-file loaders and backends are found by name in a group
(``selfrefine.tasks``, ``selfrefine.strategies``, …). The package's own are listed once, in
:mod:`.builtins`, and registered by :func:`~.builtins.register_builtins` through the same
:func:`register` a third party may call in-process (as simonw/llm registers its default
plugins beside the ones setuptools finds): so a new built-in needs no reinstall, and the
package's metadata lists no built-in. Installed distributions' entry points (third parties
only) are read once for each ``sys.path``: a distribution put on the path later (a plugin's
folder added) is found, one installed into a folder already read is found by :func:`forget`.
A name is the first registration's: a built-in's name is not taken over by an entry point.
"""

from __future__ import annotations

import importlib.metadata
import sys
import threading

from .errors import ConfigError

_READ: dict[tuple[str, tuple[str, ...]], dict[str, importlib.metadata.EntryPoint]] = {}
_REGISTERED: dict[str, dict[str, importlib.metadata.EntryPoint]] = {}  # group -> name -> in-process registration
_LOCK = threading.Lock()
_BUILTINS_LOCK = threading.Lock()  # held while the built-ins register (register() takes _LOCK)
_BUILTINS_DONE = False


def register(group: str, name: str, target: str) -> None:
    """Register ``target`` (``"package.module:attr"``, imported when first used) as ``name`` in
    ``group``, in this process. The same name for another target is a ConfigError."""
    if ":" not in target:
        raise ConfigError(f"cannot register {name!r} in {group}: {target!r} is not 'package.module:attr'")
    with _LOCK:
        found = _REGISTERED.setdefault(group, {})
        if name in found and found[name].value != target:
            raise ConfigError(f"{name!r} is already registered in {group} as {found[name].value}, not {target}")
        found[name] = importlib.metadata.EntryPoint(name=name, value=target, group=group)


def entry_points(group: str) -> dict[str, importlib.metadata.EntryPoint]:
    """The group's plugins by name: those registered in-process (the built-ins first), then the
    installed distributions' entry points under a name not taken."""
    _load_builtins()
    key = (group, tuple(sys.path))
    with _LOCK:
        found = _READ.get(key)
    if found is None:
        found = {ep.name: ep for ep in importlib.metadata.entry_points(group=group)}
        with _LOCK:
            _READ[key] = found
    with _LOCK:
        registered = dict(_REGISTERED.get(group, {}))
    return {**registered, **{name: ep for name, ep in found.items() if name not in registered}}


def registered(group: str) -> tuple[str, ...]:
    """The names registered in-process in ``group``, in their order (the built-ins first)."""
    _load_builtins()
    with _LOCK:
        return tuple(_REGISTERED.get(group, {}))


def _load_builtins() -> None:
    global _BUILTINS_DONE
    if _BUILTINS_DONE:
        return
    from .builtins import register_builtins

    with _BUILTINS_LOCK:
        if not _BUILTINS_DONE:
            register_builtins(register)
            _BUILTINS_DONE = True  # only once every built-in is in: another thread waits for them


def forget() -> None:
    """Read every group's entry points afresh next time (a distribution installed while the
    process runs)."""
    with _LOCK:
        _READ.clear()
