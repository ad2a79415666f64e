"""Bootstrap confidence intervals for reports: of a mean, and of a paired mean difference.

Self-Refine's claim is a *paired* one: the same examples scored before (draft 0, the
one-step baseline) and after refinement. Resampling examples (not drafts) keeps each
example's pair together, so the interval reflects how much the gain depends on which
examples happened to be in the dev split. A percentile interval over 2000 resamples is
the usual choice for small evaluation sets; the generator is seeded so a report is
reproducible byte for byte.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pydantic import BaseModel

if TYPE_CHECKING:  # numpy is imported where a bootstrap runs: it adds half a second to every command's start
    import numpy as np

RESAMPLES = 2000
LEVEL = 0.95


class Interval(BaseModel):
    """A point estimate with its bootstrap percentile interval over ``n`` examples."""

    estimate: float
    low: float
    high: float
    n: int
    level: float = LEVEL

    def __str__(self) -> str:
        return f"{self.estimate:+.3f} [{self.low:+.3f}, {self.high:+.3f}]"


def mean_known(values: Sequence[float | None]) -> float | None:
    """The mean of the values that are not None; None when there are none."""
    known = [v for v in values if v is not None]
    return statistics.fmean(known) if known else None


def bootstrap_mean(
    values: Sequence[float | None], *, resamples: int = RESAMPLES, level: float = LEVEL, seed: int = 0
) -> Interval | None:
    """Mean of the known values with a percentile interval; None when there are none."""
    import numpy as np

    data = np.asarray([v for v in values if v is not None], dtype=float)
    return _bootstrap(data, resamples=resamples, level=level, seed=seed)


def paired_bootstrap_diff(
    base: Sequence[float | None],
    refined: Sequence[float | None],
    *,
    resamples: int = RESAMPLES,
    level: float = LEVEL,
    seed: int = 0,
) -> Interval | None:
    """Mean of ``refined - base`` over examples where both are known, with its interval.

    ``base[i]`` and ``refined[i]`` must belong to the same example; pairs with a missing
    side are dropped (a metric that crashed on one draft says nothing about the gain).
    """
    if len(base) != len(refined):
        raise ValueError(f"paired samples differ in length: {len(base)} base vs {len(refined)} refined")
    import numpy as np

    diffs = np.asarray([r - b for b, r in zip(base, refined) if b is not None and r is not None], dtype=float)
    return _bootstrap(diffs, resamples=resamples, level=level, seed=seed)


def _bootstrap(data: np.ndarray, *, resamples: int, level: float, seed: int) -> Interval | None:
    import numpy as np

    if data.size == 0:
        return None
    if not 0 < level < 1:
        raise ValueError(f"level must be between 0 and 1, got {level}")
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    # Resample in chunks so a large eval (thousands of examples) stays within modest memory.
    chunk = max(1, 2_000_000 // data.size)
    for start in range(0, resamples, chunk):
        stop = min(resamples, start + chunk)
        idx = rng.integers(0, data.size, size=(stop - start, data.size))
        means[start:stop] = data[idx].mean(axis=1)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return Interval(estimate=float(data.mean()), low=float(low), high=float(high), n=int(data.size), level=level)
