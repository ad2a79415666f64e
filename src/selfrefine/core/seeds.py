"""Every seed a run sends, derived in one place from the run's ``seed`` option.

A run with seed S asks its calls with these seeds, so the same options give the same
requests (and on a deterministic backend the same run):

- a step's call: S; a parse retry (attempt a > 1) resamples with S + a - 1, since a
  deterministic model would repeat the unparsable reply; a refinement retried after ``r``
  rejections is seeded S + r, so a sampled retry is a new sample;
- sample ``j`` of step ``t`` (several samples a step): S + 1000·t + j, so no two samples of a
  run share a seed (steps are far fewer than 1000 samples apart);
- sample ``j`` of an answer task's first draft written several ways: S + j;
- reply ``i`` of one request asked ``n`` times of a backend that sends one request per
  reply: the request's seed + i;
- the judge's closed questions: 0 (greedy, one token: the seed does not matter, a fixed one
  keeps the request identical across runs for the caches).

An unset seed (None) counts as 0 where a seed is derived from it, and stays unset on a
step's first attempt (the backend's own seed applies).
"""

from __future__ import annotations

SAMPLES_PER_STEP = 1000  # sample seeds of consecutive steps never meet
JUDGE_SEED = 0


def attempt_seed(seed: int | None, attempt: int = 1, reseed: int = 0) -> int | None:
    """The seed of a step's call: ``attempt`` (1 = the first) and ``reseed`` (rejections so far)."""
    base = seed if not reseed else (seed or 0) + reseed
    return base if attempt <= 1 else (base or 0) + attempt - 1


def sample_seed(seed: int | None, step: int, j: int) -> int:
    """The seed of sample ``j`` of step ``step``."""
    return (seed or 0) + SAMPLES_PER_STEP * step + j


def way_seed(seed: int | None, j: int) -> int:
    """The seed of sample ``j`` of a first draft written several ways, in turn."""
    return (seed or 0) + j


def reply_seed(seed: int | None, i: int) -> int | None:
    """The seed of reply ``i`` of one request sent once per reply (None stays None)."""
    return seed if i == 0 or seed is None else seed + i
