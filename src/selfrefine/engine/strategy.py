"""``strategy="auto"``: how a token budget is spent between width (samples per step) and
depth (rounds of critique and refinement), by what the verifier sees.

The rule, one round at a time (pure functions; the loop applies them):

1. the first draft is sampled ``START_WIDTH`` times (two samples already let votes and the
   verifier choose, at twice the cost of one);
2. stop when the verifier is satisfied with the current draft (its check passes): more
   compute cannot improve what the task can measure;
3. after a round, go **deeper** at the same width when its best refinement was accepted
   (the critique helps: refine that draft again), and **widen** (double, up to
   ``MAX_WIDTH``) when every refinement echoed its parent or none scored higher (the
   critique does not help this input: more samples of the refiner are the better bet);
4. never start a round the budget cannot pay for: a round costs one critique plus
   ``width`` samples, each estimated from the calls of this run so far; the width shrinks
   to what the remaining budget affords, and the run stops when not even one sample fits.
"""

from __future__ import annotations

from dataclasses import dataclass

START_WIDTH = 2
MAX_WIDTH = 8


@dataclass(frozen=True)
class RoundOutcome:
    """What the verifier saw in the last round."""

    accepted: bool  # its best refinement scored higher than the draft it refined
    echoed: bool  # every refinement repeated its parent


@dataclass(frozen=True)
class Costs:
    """Tokens per call so far in this run (prompt + completion), by kind of call."""

    sample: float  # a generate or refine call
    critique: float  # a feedback call (before the first: estimated as a sample)


def next_width(width: int, outcome: RoundOutcome) -> int:
    """Deeper at the same width after an accepted refinement; otherwise wider."""
    if outcome.accepted and not outcome.echoed:
        return width
    return min(MAX_WIDTH, max(1, width) * 2)


def affordable_width(wanted: int, remaining: float, costs: Costs, critique: bool = True) -> int:
    """The largest width up to ``wanted`` whose round fits in ``remaining`` tokens (0: none)."""
    left = remaining - (costs.critique if critique else 0.0)
    if costs.sample <= 0:
        return wanted if left > 0 else 0
    return max(0, min(wanted, int(left // costs.sample)))


def plan_round(width: int, outcome: RoundOutcome | None, remaining: float, costs: Costs) -> tuple[int, str]:
    """The next round's width and why, in words for the run's decision record (0: stop)."""
    wanted = width if outcome is None else next_width(width, outcome)
    why = (
        "the first round"
        if outcome is None
        else "the last refinement was accepted: deeper at the same width"
        if wanted == width and outcome.accepted
        else "the refinements echoed their parent: wider"
        if outcome.echoed
        else "no refinement scored higher: wider"
    )
    fits = affordable_width(wanted, remaining, costs)
    if fits == 0:
        return 0, f"the budget left ({remaining:.0f} tokens) pays for no critique and sample"
    if fits < wanted:
        why += f"; {fits} of {wanted} samples fit in the budget left"
    return fits, why
