"""``strategy="auto"``: how a token budget is spent between width (samples per step) and
depth (rounds of critique and refinement), by what the first samples show of each input.

Measured (docs/frontier.md, default model): a first draft more is worth more per token than a
round of refinement until about four drafts (commongen: the best of 3 first drafts 0.634 at
1.1k tokens, one draft and one round 0.578 at the same tokens); a round on top of four
drafts still adds (0.658 → 0.710). The rule follows that, one decision at a time (pure
functions; the loop applies them):

1. **width first**: the first draft is sampled in waves (1, then doubling), each wave priced
   in tokens before it is asked for. How hard the input is, is read from its samples:
   - *easy*: a sample satisfies the verifier (its check passes): stop, nothing the task can
     measure is left to gain (an easy input costs one sample);
   - *flat*: two or more samples score alike: sampling does not explore this input, so
     width stops (a round, whose prompt holds what the findings name as missing, is next);
   - *spread*: the samples score differently: more samples find better drafts, so width
     goes on to ``FIRST_WIDTH`` drafts, and on to ``MAX_WIDTH`` while no round of
     ``MIN_ROUND`` samples fits in what is left;
2. **depth where it adds**: after the waves, a round of ``min(drafts, FIRST_WIDTH)`` samples
   when the budget pays for its critique and samples; after a round, **deeper** at the same
   width when its best refinement was accepted, **wider** (double, up to ``MAX_WIDTH``) when
   every refinement echoed its parent or none scored higher;
3. **the budget**: a round costs one critique (where the critic makes one: not when the checks'
   findings are the feedback) plus ``width`` samples, each estimated from the latest call of
   its kind in this run plus what the history grew by since (a refinement's prompt holds the
   drafts and critiques before it; a call made for a purpose of its own, the derivation of a
   request's checks, prices nothing); the width shrinks to what is left, and the run stops
   when not even one sample fits.

On an answer task (votes: gsm8k) the first draft is sampled in waves before any round too,
judged by agreement instead of scores: while the answers are not settled (the most common
answer leads the next by fewer than ``SETTLE_MARGIN`` votes; a program that fails gives
none), the next wave is the
fewest samples that could settle them, up to ``MAX_WIDTH`` first drafts and what the budget
pays for. Easy inputs stop at two agreeing samples (of two different ways when the task has
them); disputed ones get more independent votes, which a small model's critique cannot
replace (adaptive self-consistency). The answer returned is the majority of the votes
weighted by how often each way of solving agrees with the others (:mod:`.votes`).

The widths are capped at ``MAX_WIDTH`` (8) drafts a step, or at the run's ``samples`` when it
gives more than one (``--strategy auto --samples 4``: at most 4 drafts a step; the first
waves, the rounds and an answer task's votes alike).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

START_WIDTH = 2  # an answer task's first wave: two votes can already agree
FIRST_WIDTH = 4  # first drafts before any round, when the budget pays for them
MIN_ROUND = 2  # the narrowest round worth leaving budget for
MAX_WIDTH = 8
SETTLE_MARGIN = 2


@dataclass(frozen=True)
class RoundOutcome:
    """What the verifier saw in the last round."""

    accepted: bool  # its best refinement scored higher than the draft it refined
    echoed: bool  # every refinement repeated its parent


@dataclass(frozen=True)
class Costs:
    """Estimated tokens (prompt + completion) of the next call of each kind."""

    sample: float  # a refinement sample of the next round
    critique: float  # the next round's feedback call
    draft: float | None = None  # another first-draft sample (answer tasks' waves); None: as ``sample``


def next_width(width: int, outcome: RoundOutcome, most: int = MAX_WIDTH) -> int:
    """Deeper at the same width after an accepted refinement; otherwise wider (up to ``most``)."""
    if outcome.accepted and not outcome.echoed:
        return width
    return min(most, max(1, width) * 2)


def affordable_width(wanted: int, remaining: float, costs: Costs, critique: bool = True) -> int:
    """The largest width up to ``wanted`` whose round fits in ``remaining`` tokens (0: none)."""
    left = remaining - (costs.critique if critique else 0.0)
    if costs.sample <= 0:
        return wanted if left > 0 else 0
    return max(0, min(wanted, int(left // costs.sample)))


def plan_round(
    width: int,
    outcome: RoundOutcome | None,
    remaining: float,
    costs: Costs,
    critique: bool = True,
    most: int = MAX_WIDTH,
) -> tuple[int, str]:
    """The next round's width and why, in words for the run's decision record (0: stop);
    ``critique``: the round begins with a critique (a retry after a rejected round does not)."""
    wanted = width if outcome is None else next_width(width, outcome, most)
    why = (
        "the first round"
        if outcome is None
        else "the last refinement was accepted: deeper at the same width"
        if wanted == width and outcome.accepted
        else "the refinements echoed their parent: wider"
        if outcome.echoed
        else "no refinement scored higher: wider"
    )
    fits = affordable_width(wanted, remaining, costs, critique)
    if fits == 0:
        what = "critique and sample" if critique else "sample"
        return 0, f"the budget left ({remaining:.0f} tokens) pays for no {what}"
    if fits < wanted:
        why += f"; {fits} of {wanted} samples fit in the budget left"
    return fits, why


def lead(answers: Sequence[str | None]) -> int:
    """How many votes the most common answer has over the next (no answer: no vote)."""
    counts = [n for _, n in Counter(a for a in answers if a is not None).most_common(2)]
    counts += [0] * (2 - len(counts))
    return counts[0] - counts[1]


def settled(answers: Sequence[str | None]) -> bool:
    """Whether the votes so far decide the answer: its lead is at least ``SETTLE_MARGIN``
    samples (counted one each: the ways' weights choose the answer, not how many to ask)."""
    return lead(answers) >= SETTLE_MARGIN


def next_wave(answers: Sequence[str | None], have: int, remaining: float, costs: Costs, most: int = MAX_WIDTH) -> int:
    """How many more first drafts to sample on an answer task (0: the votes are settled, the
    width is at ``most``, or the budget pays for none): the fewest that could settle it."""
    if settled(answers) or have >= most:
        return 0
    wanted = min(SETTLE_MARGIN - lead(answers), most - have)
    per_draft = costs.sample if costs.draft is None else costs.draft
    return affordable_width(wanted, remaining, Costs(sample=per_draft, critique=0.0), critique=False)


def next_draft_wave(
    scores: Sequence[float], passed: bool, remaining: float, costs: Costs, round_cost: float, most: int = MAX_WIDTH
) -> tuple[int, str]:
    """How many more first drafts to sample on a task the verifier scores (0: width stops),
    and why in words: easy inputs stop, flat ones go to rounds, spread ones widen (rule 1);
    ``round_cost``: what a round of ``MIN_ROUND`` samples would cost now."""
    have = len(scores)
    if have == 0:
        return 0, "the model wrote no first draft"  # (every reply empty) more of the same would not help
    if passed:
        return 0, "a first draft satisfies the verifier: an easy input"
    if have >= 2 and max(scores) == min(scores):
        return 0, f"the {have} first drafts score alike: sampling does not explore this input"
    if have >= most:
        return 0, f"{most} first drafts"
    if have >= min(FIRST_WIDTH, most) and remaining >= round_cost:
        return 0, f"{have} first drafts, and a round fits in the budget left"
    wanted = min(max(1, have), most - have)
    per_draft = costs.sample if costs.draft is None else costs.draft
    fits = affordable_width(wanted, remaining, Costs(sample=per_draft, critique=0.0), critique=False)
    if fits == 0:
        return 0, f"the budget left ({remaining:.0f} tokens) pays for no more first drafts"
    why = "one first draft so far" if have <= 1 else f"the {have} first drafts score differently"
    return fits, f"{why}: {fits} more"
