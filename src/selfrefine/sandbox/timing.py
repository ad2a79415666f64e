"""Is program B faster than program A? Repeated, interleaved timing with a significance test.

Both programs run in the sandbox on the same inputs, alternating A, B, A, B, … so that
slow drift of the machine (other jobs, thermal state, caches) hits both alike. Each run's
time is the CPU time of the program and of every process it started, counted from outside
the program (``run_python(measure=True)``: the run's control group, see :mod:`.launcher`),
so a program can neither report a time of its own nor hide work in a child it never waits
for; it is not the subprocess wall time: interpreter start-up (~20-40 ms), which precedes
the count, would otherwise swamp the difference between two short programs, and CPU time
is less disturbed by a shared machine.

One sample per repetition is the sum of a program's times over all inputs (so a repetition
is one pass over the test set, as a judge measures it). The speedup is
``median(A) / median(B)``.

Significance: a one-sided Mann–Whitney U test of ``A > threshold * B`` (threshold 1.05 by
default: "at least 5% faster"), i.e. the new program's times are scaled up by the threshold
before ranking. Rank-based rather than Welch's t-test because run times are not normal:
they are right-skewed with occasional large outliers (preemption, GC pauses), which inflate
the variance of a t-test and can make a real speedup look insignificant, while ranks are
robust to them. With n runs per side the smallest attainable p is 1/C(2n, n): n >= 4 is
needed to reach p < 0.05 (n = 4 → 0.014), so ``repeats`` must be at least 4.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .process import SandboxResult, run_python

MIN_REPEATS = 4
MAX_OUTPUT = 1 << 22  # what a timed run may print: as much as a checked run (tasks/codeopt.py)


@dataclass(frozen=True)
class InputTiming:
    """Times of both programs on one input (seconds of CPU, one entry per repetition)."""

    index: int
    old: list[float]
    new: list[float]

    @property
    def speedup(self) -> float:
        return _ratio(statistics.median(self.old), statistics.median(self.new))


@dataclass(frozen=True)
class TimingResult:
    old_times: list[float]  # per repetition: total CPU seconds over all inputs
    new_times: list[float]
    speedup: float  # median(old) / median(new)
    p_value: float  # one-sided: new is faster than old by at least `threshold`
    threshold: float
    alpha: float
    per_input: list[InputTiming] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # a run failed: no valid comparison
    wrong_output: bool = False  # the new program printed something else than expected in a timed run

    @property
    def faster(self) -> bool:
        """Significantly faster by at least the threshold (and no run failed)."""
        return not self.errors and self.speedup >= self.threshold and self.p_value < self.alpha

    def summary(self) -> str:
        if self.errors:
            return "timing failed: " + "; ".join(self.errors[:3])
        old, new = statistics.median(self.old_times), statistics.median(self.new_times)
        verdict = "faster" if self.faster else "not significantly faster"
        return (
            f"speedup {self.speedup:.2f}x ({old * 1000:.1f} ms -> {new * 1000:.1f} ms, "
            f"p={self.p_value:.3g}, {len(self.old_times)} runs each): {verdict}"
        )


def time_once(code: str, stdin: str, *, timeout: float = 10.0, memory_mb: int = 512) -> SandboxResult:
    """One measured run (``result.seconds``: CPU time of the program and its processes)."""
    return run_python(code, stdin=stdin, timeout=timeout, memory_mb=memory_mb, measure=True, max_output=MAX_OUTPUT)


def _same_tokens(expected: str, got: str) -> bool:
    return expected.split() == got.split()


def compare_programs(
    old: str,
    new: str,
    inputs: Sequence[str],
    *,
    repeats: int = 7,
    threshold: float = 1.05,
    alpha: float = 0.05,
    timeout: float = 10.0,
    memory_mb: int = 512,
    warmup: bool = True,
    expected: Sequence[str | None] | None = None,
    same: Callable[[str, str], bool] = _same_tokens,
) -> TimingResult:
    """Time ``old`` and ``new`` interleaved on every input ``repeats`` times and test B < A.

    ``expected``: per input, what ``new`` must print (``same(expected, stdout)``) in every
    timed run, warm-up included; a run that prints anything else fails the comparison, so
    a program that behaves differently when timed cannot be timed as faster."""
    if repeats < MIN_REPEATS:
        raise ValueError(f"repeats must be >= {MIN_REPEATS} for the test to reach p < 0.05; got {repeats}")
    if not inputs:
        raise ValueError("timing needs at least one input")
    per = [InputTiming(i, [], []) for i in range(len(inputs))]
    errors: list[str] = []
    want = list(expected) if expected is not None else [None] * len(inputs)
    if len(want) != len(inputs):
        raise ValueError(f"expected has {len(want)} outputs for {len(inputs)} inputs")
    limits = {"timeout": timeout, "memory_mb": memory_mb}
    if warmup:  # the first run pays for cold disk caches of the interpreter; its time is discarded
        for code, label in ((old, "old"), (new, "new")):
            _, error, wrong = _timed(code, label, 0, inputs[0], want[0], same, limits)
            if wrong:
                return _failed(per, threshold, alpha, [error or ""], wrong_output=True)
    for _ in range(repeats):
        for timing in per:
            for code, bucket, label in ((old, timing.old, "old"), (new, timing.new, "new")):
                i = timing.index
                seconds, error, wrong = _timed(code, label, i, inputs[i], want[i], same, limits)
                if error or seconds is None:
                    errors.append(error or f"{label} program on input {i + 1}: no timing")
                    return _failed(per, threshold, alpha, errors, wrong_output=wrong)
                bucket.append(seconds)
    old_times = [sum(t.old[r] for t in per) for r in range(repeats)]
    new_times = [sum(t.new[r] for t in per) for r in range(repeats)]
    return TimingResult(
        old_times=old_times,
        new_times=new_times,
        speedup=_ratio(statistics.median(old_times), statistics.median(new_times)),
        p_value=significance(old_times, new_times, threshold),
        threshold=threshold,
        alpha=alpha,
        per_input=per,
    )


def _timed(code: str, label: str, index: int, stdin: str, want: str | None, same, limits: dict):
    """One timed run: (seconds, what went wrong, whether ``new`` printed other than ``want``)."""
    result = time_once(code, stdin, **limits)
    if not result.ok or result.seconds is None:
        return None, f"{label} program on input {index + 1}: {result.error or 'no timing'}", False
    if label == "new" and want is not None and not same(want, result.stdout):
        return None, f"new program on input {index + 1}: printed something else in a timed run", True
    return result.seconds, None, False


def significance(old_times: Sequence[float], new_times: Sequence[float], threshold: float = 1.05) -> float:
    """One-sided Mann–Whitney p-value for ``old > threshold * new`` (small: new is faster)."""
    from scipy.stats import (
        mannwhitneyu,  # ~1 s to import: only codeopt's metric needs it
    )

    scaled = [t * threshold for t in new_times]
    if len(set(old_times) | set(scaled)) == 1:
        return 1.0  # all equal (e.g. zero-time programs): no evidence either way
    return float(mannwhitneyu(old_times, scaled, alternative="greater").pvalue)


def _ratio(old: float, new: float) -> float:
    if new <= 0:
        return float("inf") if old > 0 else 1.0
    return old / new


def _failed(
    per: list[InputTiming], threshold: float, alpha: float, errors: list[str], wrong_output: bool = False
) -> TimingResult:
    return TimingResult([], [], 0.0, 1.0, threshold, alpha, per, errors, wrong_output)
