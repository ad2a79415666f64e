"""The KV snapshot store's bookkeeping (no model needed)."""

from __future__ import annotations

import numpy as np
import pytest

from selfrefine.backends.prefix_cache import PrefixCache, common_prefix

FEW_SHOT = list(range(1000, 1100))


def test_common_prefix():
    a = np.array([1, 2, 3, 4], dtype=np.int32)
    assert common_prefix(a, np.array([1, 2, 9], dtype=np.int32)) == 2
    assert common_prefix(a, a[:2]) == 2
    assert common_prefix(a, np.array([], dtype=np.int32)) == 0
    assert common_prefix(a, np.array([7], dtype=np.int32)) == 0


def test_best_is_the_longest_shared_prefix():
    cache = PrefixCache(10**6)
    cache.put(FEW_SHOT + [1, 2, 3], b"a" * 10)
    cache.put(FEW_SHOT + [7, 8], b"b" * 10)
    snap, shared = cache.best(FEW_SHOT + [7, 8, 9])
    assert snap.data == b"b" * 10 and shared == len(FEW_SHOT) + 2
    snap, shared = cache.best([5, 5])
    assert snap is None and shared == 0


def test_a_snapshot_that_a_newer_one_extends_is_dropped():
    cache = PrefixCache(10**6)
    cache.put(FEW_SHOT + [1] * 30, b"x")
    cache.put(FEW_SHOT + [1] * 30 + [2] * 30, b"y")  # the same example, one iteration later
    cache.put(FEW_SHOT + [9] * 40, b"z")  # another example: only the few-shot block is shared
    assert len(cache) == 2 and cache.stats.superseded == 1


def test_memory_stays_within_budget_least_recently_used_go_first():
    per = 4000
    cache = PrefixCache(3 * (per + 4 * 110))
    for i in range(6):
        cache.put(FEW_SHOT[:10] + [i] * 100, bytes(per))
        assert cache.nbytes <= cache.budget_bytes
    assert len(cache) == 3 and cache.stats.evicted == 3
    assert cache.stats.peak_bytes <= cache.budget_bytes
    snap, _ = cache.best(FEW_SHOT[:10] + [0] * 100)  # evicted: only the short shared prefix
    assert snap is not None and common_prefix(snap.tokens, np.array(FEW_SHOT[:10] + [0] * 100)) == 10


def test_a_snapshot_bigger_than_the_budget_is_refused():
    cache = PrefixCache(100)
    assert not cache.put([1, 2, 3], bytes(1000))
    assert len(cache) == 0
    assert PrefixCache(0).put([1], b"x") is False  # zero budget: nothing kept
    with pytest.raises(ValueError):
        PrefixCache(-1)
