"""Drafts that are no answer: a refusal, a reply cut off at the token limit, or an echo of
the request.

A model that answers "I'm sorry, but I cannot …" or stops mid-sentence at ``max_tokens``
has written no answer, whatever a task's checks find in the text (a refusal uses none of a
story's required elements, so it misses none). One rule for every task:

- a cut-off draft (its call's ``finish_reason`` is ``"length"``) is demoted by the engine:
  its verification never passes and scores :data:`INCOMPLETE_SCORE`, and as the output its
  metric is :data:`INCOMPLETE_METRIC`;
- a refusal is recognised by its wording (:func:`is_refusal`: the reply *opens* with a
  common refusal phrasing) in the built-in tasks' own ``verify`` and ``metric``, which
  return :func:`refusal_check` and :data:`INCOMPLETE_METRIC` for it;
- an echo (:func:`echoes`: the draft repeats the request, or nearly) is failed by the engine
  for every task whose ``TaskDefaults.echo`` is not ``"off"`` (:func:`echo_check`), also
  where the task has no verifier: its verification then has no score, which ranks below a
  draft with no verification at all (:mod:`.ranking`), so no judge or critic can prefer it.

:data:`INCOMPLETE_SCORE` is below every built-in verifier's range (the lowest, sentiment's,
starts at -1), so ``select="verified"`` and ``accept="not_worse"`` never prefer such a
draft to a complete one. The metric's 0 is its floor: a mean over examples counts it as
a failure, as a wrong answer.
"""

from __future__ import annotations

import re
from collections import Counter

from ..core.records import Verification

INCOMPLETE_SCORE = -2.0
INCOMPLETE_METRIC = 0.0
CUT_OFF = "length"  # the finish reason of a reply stopped by max_tokens
# a request of fewer words ("Hi", "Good morning") answered in kind is no echo
MIN_ECHO_WORDS = 3
ECHO = "The draft repeats the request instead of answering it: write the answer the request asks for."

_CANNOT = r"(?:can ?not|can'?t|won'?t|will not|am unable to|'?m unable to|am not able to|'?m not able to)"
_DO = (
    r"(?:help|assist|provide|create|write|compose|generate|produce|improve|revise|rewrite|"
    r"complete|continue|comply|fulfil+|do that|do this|answer|support|engage|make)"
)
_REFUSAL = re.compile(
    rf"""^\s*(?:
        (?:i'?m|i\ am)\ (?:really\ |very\ |so\ )?sorry,?\ (?:but\ )?(?:i|as\ an\ ai)\b
      | i\ apologi[sz]e,?\ (?:but\ )?i\b
      | sorry,?\ (?:but\ )?i\ {_CANNOT}
      | unfortunately,?\ i\ {_CANNOT}
      | i\ {_CANNOT}\ (?:\w+\ ){{0,2}}{_DO}\b
      | i\ must\ (?:respectfully\ )?decline
      | as\ an\ ai\b
    )""",
    re.IGNORECASE | re.VERBOSE,
)


def is_refusal(text: str) -> bool:
    """Whether a reply opens with a refusal ("I'm sorry, but I cannot…", "I can't help
    with…", "As an AI…"). Only the opening counts: a story whose character says "I'm
    sorry" later on, or a quoted line, is not a refusal."""
    return bool(_REFUSAL.match(text.replace("\u2019", "'")))


def cut_off(finish_reason: str | None) -> bool:
    """Whether a reply stopped at the token limit rather than finishing."""
    return finish_reason == CUT_OFF


def incomplete(text: str, finish_reason: str | None = None) -> str | None:
    """Why a draft is no complete answer ("cut off at the token limit", "a refusal"), or None."""
    if cut_off(finish_reason):
        return "cut off at the token limit"
    if is_refusal(text):
        return "a refusal"
    return None


def refusal_check(draft: str) -> Verification | None:
    """A task's verification of a refusal (None: the draft is no refusal)."""
    if not is_refusal(draft):
        return None
    return Verification(
        text="The draft is a refusal, not an answer: write the answer the task asks for.",
        passed=False,
        score=INCOMPLETE_SCORE,
    )


def output_metric(value: float | None, finish_reason: str | None) -> float | None:
    """A draft's metric as the loop and eval report it: :data:`INCOMPLETE_METRIC` for a
    draft cut off at the token limit (no answer, whatever is in it), else ``value``; a
    metric that failed (None) stays None."""
    return INCOMPLETE_METRIC if value is not None and cut_off(finish_reason) else value


def demoted(check: Verification | None, finish_reason: str | None) -> Verification | None:
    """A task's check of a draft (None: the task has none), demoted when its reply was cut
    off at the token limit: it does not pass and scores below any complete draft, and the findings say why."""
    if check is None or not cut_off(finish_reason):
        return check
    note = "The draft was cut off at the token limit (it stops mid-way): write a shorter, complete one."
    return check.model_copy(
        update={"text": f"{note}\n{check.text}".strip(), "passed": False, "score": INCOMPLETE_SCORE}
    )


def words(text: str) -> list[str]:
    """A text's words, lower-cased, without punctuation ("pour-over" is two, "$29" is "29")."""
    return re.findall(r"\w+", text.lower())


def echo_slack(n: int) -> int:
    """How many words a near-echo of a request of ``n`` words may add or drop: one in ten
    (none under ten words, where only a word-for-word repeat is an echo: "dog runs" for the
    concepts "dog, runs, park" is a poor sentence, not a repeat)."""
    return n // 10


def echoes(draft: str, request: str, rule: str = "near") -> bool:
    """Whether ``draft`` repeats ``request`` instead of answering it, comparing their
    :func:`words` (case, punctuation and spacing aside). A request of fewer than
    :data:`MIN_ECHO_WORDS` words is never echoed. ``rule``:

    - ``"exact"``: the same words in the same order;
    - ``"near"``: that, or nearly: the words of each that the other lacks, in order (a
      changed word counts twice, dropped and added), are at most :func:`echo_slack` of the
      request's (:func:`near_repeat`: linear time, whatever the texts);
    - ``"off"``: never."""
    asked, said = words(request), words(draft)
    if rule == "off" or len(asked) < MIN_ECHO_WORDS:
        return False
    if rule == "exact" or said == asked:
        return said == asked
    return near_repeat(asked, said, echo_slack(len(asked)))


WORK_PER_WORD = 32  # comparisons per word the alignment may make: a pair that needs more is no near repeat


def near_repeat(asked: list[str], said: list[str], slack: int) -> bool:
    """Whether ``said`` is ``asked`` with at most ``slack`` words dropped or added, in linear
    time: the words (and pairs of neighbouring words) both hold must differ by no more than
    ``slack`` edits could make them (bounds no alignment beats), then :func:`fewest_edits`
    aligns them, stopping past ``slack`` edits or past :data:`WORK_PER_WORD` comparisons a
    word (a pair that needs more differs in too many places to be a repeat: an 8,000-word
    request with 700 scattered edits, say). ``difflib.SequenceMatcher``, used before, took
    quadratic time: 8,000 words 21.6-44 s."""
    if abs(len(said) - len(asked)) > slack:
        return False
    # each word dropped or added changes one word's count and at most three pairs of
    # neighbours: more changes than that say no alignment can do with ``slack`` edits
    if _apart(Counter(asked), Counter(said)) > slack:
        return False
    if _apart(Counter(zip(asked, asked[1:])), Counter(zip(said, said[1:]))) > 3 * slack:
        return False
    return fewest_edits(asked, said, slack, WORK_PER_WORD * (len(asked) + len(said))) <= slack


def _apart(a: Counter, b: Counter) -> int:
    return sum(((a - b) + (b - a)).values())


def fewest_edits(a: list[str], b: list[str], limit: int, work: int) -> int:
    """The fewest words to drop from ``a`` and add to turn it into ``b`` (a changed word
    counts twice), or ``limit + 1`` once that is past ``limit`` or the search has made
    ``work`` comparisons: Myers' O((N+M)D) difference algorithm (1986), each round d
    extending the furthest-reaching path with d edits on each diagonal."""
    n, m = len(a), len(b)
    reach = {1: 0}  # diagonal k = x - y: the furthest x a path of the last round reached on it
    for d in range(limit + 1):
        this: dict[int, int] = {}
        for k in range(-d, d + 1, 2):
            down, right = reach.get(k + 1, -1), reach.get(k - 1, -2) + 1  # add b[y], or drop a[x]
            x = max(down if 0 <= down - k <= m else -1, right if 0 <= right <= n else -1)
            if x < 0:
                continue
            start, y = x, x - k
            while x < n and y < m and a[x] == b[y]:
                x, y = x + 1, y + 1
            work -= x - start
            if x >= n and y >= m:
                return d
            this[k] = x
        work -= 2 * d + 1
        if work < 0:
            break
        reach = this
    return limit + 1


def echo_check(check: Verification | None, draft: str, request: str, rule: str) -> Verification | None:
    """A draft's check (None: the task has none), failed when the draft echoes the request
    (:func:`echoes` by ``rule``): it does not pass, a scored check scores
    :data:`INCOMPLETE_SCORE`, and the findings say why. On a task without a verifier the echo
    gets a verification of its own, with no score (it ranks below every other draft)."""
    if not echoes(draft, request, rule):
        return check
    if check is None:
        return Verification(text=ECHO, passed=False)
    score = INCOMPLETE_SCORE if check.score is not None else None
    return check.model_copy(update={"text": f"{ECHO}\n{check.text}".strip(), "passed": False, "score": score})
