"""One loaded ``Llama`` per model file and load settings in a process, shared by the roles and
backends that ask for it (:class:`~.embedded.LlamaCppBackend`) and closed with its last user.

Each ``Llama`` is a whole copy of the model in memory: the file's mapping, the weights llama.cpp
repacks for its CPU kernels, a KV cache and compute buffers. One per role held 5.8 GB peak RSS
for the 1.1 GB default model in one ``run commongen`` (issue 46)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


class Loaded:
    """A loaded ``Llama``, its lock, and how many backends hold it."""

    def __init__(self, key: tuple[Any, ...], llm: Any) -> None:
        self.key, self.llm, self.lock, self.users = key, llm, threading.Lock(), 1


_LOADED: dict[tuple[Any, ...], Loaded] = {}
_LOADED_LOCK = threading.Lock()


def shared_llama(key: tuple[Any, ...], load: Callable[[], Any]) -> Loaded:
    """The process's ``Llama`` for ``key``, loaded on first use; each caller holds one use
    of it until :func:`release`. Loading happens under the lock: two roles asking at once
    must not load the file twice."""
    with _LOADED_LOCK:
        loaded = _LOADED.get(key)
        if loaded is not None:
            loaded.users += 1
            return loaded
        loaded = _LOADED[key] = Loaded(key, load())
        return loaded


def release(loaded: Loaded) -> None:
    """One use of ``loaded`` ends; the last one closes the model and frees its memory."""
    with _LOADED_LOCK:
        loaded.users -= 1
        if loaded.users > 0:
            return
        if _LOADED.get(loaded.key) is loaded:
            del _LOADED[loaded.key]
    with loaded.lock:  # a call still running on another thread finishes first
        close = getattr(loaded.llm, "close", None)
        if close is not None:
            close()
