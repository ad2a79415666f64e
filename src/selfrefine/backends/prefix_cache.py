"""KV-cache snapshots of prompt prefixes for the embedded llama.cpp backend.

A ``Llama`` context holds one KV sequence and reuses only the longest token prefix it
shares with its previous call. When eval interleaves examples, example B's call wipes the
history example A's next refine prompt extends. This store keeps, per finished call, the
KV state of its prompt (``llama_state_seq_get_data``: the sequence's cells only, no logits)
and hands back the snapshot sharing the longest token prefix with a new prompt, so A's
next call restores its own history instead of recomputing it.

Memory is bounded by ``budget_bytes``: least recently used snapshots are dropped first,
and a snapshot whose tokens a newer one extends (the same example one iteration later) is
dropped at once, since the newer one serves every prompt the older one could.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# A snapshot ends with the chat template's end-of-turn and assistant header; the next
# prompt of the same lineage diverges there, so it still supersedes the older snapshot.
SUPERSEDE_SLACK_TOKENS = 16


def common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    """Length of the longest common prefix of two token arrays."""
    n = min(len(a), len(b))
    if n == 0:
        return 0
    diff = np.flatnonzero(a[:n] != b[:n])
    return int(diff[0]) if diff.size else n


def as_tokens(tokens: Sequence[int] | np.ndarray) -> np.ndarray:
    return np.asarray(tokens, dtype=np.int32)


@dataclass
class Snapshot:
    tokens: np.ndarray
    data: bytes
    last_used: int = 0

    @property
    def nbytes(self) -> int:
        return len(self.data) + self.tokens.nbytes


@dataclass
class PrefixCacheStats:
    lookups: int = 0
    hits: int = 0  # lookups that restored a snapshot
    restored_tokens: int = 0
    stored: int = 0
    evicted: int = 0
    superseded: int = 0
    peak_bytes: int = 0


class PrefixCache:
    """Thread-safe LRU store of KV snapshots keyed by token sequences, within a byte budget."""

    def __init__(self, budget_bytes: int) -> None:
        if budget_bytes < 0:
            raise ValueError("the prefix cache budget must be >= 0 bytes")
        self.budget_bytes = int(budget_bytes)
        self._items: list[Snapshot] = []
        self._lock = threading.Lock()
        self._clock = 0
        self.stats = PrefixCacheStats()

    @property
    def nbytes(self) -> int:
        with self._lock:
            return sum(s.nbytes for s in self._items)

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def best(self, tokens: Sequence[int] | np.ndarray) -> tuple[Snapshot | None, int]:
        """The snapshot sharing the longest prefix with ``tokens``, and that length."""
        query = as_tokens(tokens)
        with self._lock:
            self.stats.lookups += 1
            best, best_len = None, 0
            for snap in self._items:
                n = common_prefix(snap.tokens, query)
                if n > best_len:
                    best, best_len = snap, n
            if best is not None:
                self._clock += 1
                best.last_used = self._clock
            return best, best_len

    def record_hit(self, restored_tokens: int) -> None:
        with self._lock:
            self.stats.hits += 1
            self.stats.restored_tokens += restored_tokens

    def put(self, tokens: Sequence[int] | np.ndarray, data: bytes) -> bool:
        """Store a snapshot; False when it alone exceeds the budget."""
        key = as_tokens(tokens)
        snap = Snapshot(key, data)
        if snap.nbytes > self.budget_bytes:
            return False
        with self._lock:
            kept = []
            for old in self._items:
                shared = common_prefix(old.tokens, key)
                if shared >= len(old.tokens) - SUPERSEDE_SLACK_TOKENS and shared >= len(old.tokens) // 2:
                    self.stats.superseded += 1  # the new snapshot serves every prompt this one could
                    continue
                kept.append(old)
            self._clock += 1
            snap.last_used = self._clock
            kept.append(snap)
            kept.sort(key=lambda s: s.last_used)
            total = sum(s.nbytes for s in kept)
            while total > self.budget_bytes:
                dropped = kept.pop(0)  # least recently used
                total -= dropped.nbytes
                self.stats.evicted += 1
            self._items = kept
            self.stats.stored += 1
            self.stats.peak_bytes = max(self.stats.peak_bytes, total)
            return True

    def clear(self) -> None:
        with self._lock:
            self._items = []
