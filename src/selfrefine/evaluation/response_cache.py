"""A response cache in SQLite, keyed by the full request, shared across runs.

The key hashes the backend's identity (model and endpoint) and every field of the request
(role, prompt, system, a conversation's turns, max_tokens, temperature, seed, stop,
json_schema, top_logprobs; turns and top_logprobs only where given: a request without them
keeps the key it had before those fields existed), so a re-run or a
report of the same configuration costs no model calls, while any change of prompt or
sampling misses. Failures are never cached. WAL mode lets several processes share a file.
An entry that no longer parses is deleted and answered as a miss (``dropped`` counts them);
a file that cannot be opened, read or written is a :class:`StorageError` naming it.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..backends.base import Backend, CompletionRequest, CompletionResponse, ModelInfo, TextSink
from .storage import cache_error


def default_cache_path() -> Path:
    env = os.environ.get("SELFREFINE_CACHE")
    if env:
        return Path(env).expanduser()
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "selfrefine" / "responses.sqlite"


class ResponseCache:
    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path else default_cache_path()
        self.dropped = 0  # damaged entries deleted and answered as misses
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
        except (OSError, sqlite3.Error) as exc:
            raise cache_error(self.path, exc) from None
        with self._lock, self._guard(), self._db:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, response TEXT NOT NULL)")

    @contextmanager
    def _guard(self) -> Iterator[None]:
        """A damaged, unwritable or full cache file: one line naming it, not a traceback."""
        try:
            yield
        except (OSError, sqlite3.Error) as exc:
            raise cache_error(self.path, exc) from None

    @staticmethod
    def key(identity: str, request: CompletionRequest) -> str:
        # fields added later are left out where not given, so the keys stay as they were
        unasked = {name for name in ("top_logprobs", "purpose", "turns", "ban") if getattr(request, name) is None}
        payload = json.dumps(
            {"model": identity, "request": request.model_dump(mode="json", exclude=unasked or None)}, sort_keys=True
        )
        return hashlib.sha256(payload.encode()).hexdigest()

    def get(self, key: str) -> CompletionResponse | None:
        with self._lock, self._guard():
            row = self._db.execute("SELECT response FROM responses WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        try:
            return CompletionResponse.model_validate_json(row[0])
        except (ValueError, TypeError):  # cut short, or from another version: recompute it
            self._drop(key)
            return None

    def _drop(self, key: str) -> None:
        with self._lock, self._guard(), self._db:
            gone = self._db.execute("DELETE FROM responses WHERE key = ?", (key,)).rowcount
            self.dropped += max(0, gone)

    def put(self, key: str, response: CompletionResponse) -> None:
        with self._lock, self._guard(), self._db:
            self._db.execute(
                "INSERT OR REPLACE INTO responses (key, response) VALUES (?, ?)", (key, response.model_dump_json())
            )

    def __len__(self) -> int:
        with self._lock, self._guard():
            return int(self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()


class CachedBackend(Backend):
    """Wraps any backend; answers repeated requests from the cache."""

    def __init__(self, inner: Backend, cache: ResponseCache) -> None:
        super().__init__(inner.name)
        self.inner = inner
        self.cache = cache
        self.max_concurrency = inner.max_concurrency
        self.hits = 0
        self.misses = 0

    def cache_identity(self) -> str:
        return self.inner.cache_identity()

    def model_info(self) -> ModelInfo | None:
        return self.inner.model_info()

    def describe(self) -> str:
        return f"{self.inner.describe()} [cached]"

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        return await self._answer(request, None)

    async def stream(self, request: CompletionRequest, on_text: TextSink) -> CompletionResponse:
        """A hit is sent as one piece; a miss streams from the model and is stored whole."""
        return await self._answer(request, on_text)

    async def _answer(self, request: CompletionRequest, on_text: TextSink | None) -> CompletionResponse:
        key = ResponseCache.key(self.inner.cache_identity(), request)
        hit = await self.lookup(key)
        if hit is not None:
            self.hits += 1
            if on_text is not None and hit.text:
                on_text(hit.text)
            return hit.model_copy(update={"cached": True})
        self.misses += 1
        if on_text is None:
            response = await self.inner.complete(request)
        else:
            response = await self.inner.stream(request, on_text)
        await self.store(key, response)
        return response

    # where the answers live; a Ray actor asks the driver's node instead (ray_pool.py)
    async def lookup(self, key: str) -> CompletionResponse | None:
        return self.cache.get(key)

    async def store(self, key: str, response: CompletionResponse) -> None:
        self.cache.put(key, response)

    async def aclose(self) -> None:
        await self.inner.aclose()
