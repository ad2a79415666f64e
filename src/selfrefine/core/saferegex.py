"""Regular expressions from untrusted authors (task files) run on untrusted text (drafts,
critiques): Python's ``re`` has no timeout, so a pattern is refused when it is loaded if its
backtracking could grow past ``MAX_REGEX_STEPS`` on a text of ``MAX_REGEX_CHARS`` (nested
repeats, backreferences, more than one unbounded repeat); callers search at most
``MAX_REGEX_CHARS`` of a text.
"""

from __future__ import annotations

import math
import re

# the parser behind re.compile (Python 3.11+), to bound a pattern before it is used
from re import _constants as sre  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any

MAX_REGEX_CHARS = 5_000  # the longest text a bounded regex searches
MAX_REGEX_STEPS = 10**8  # the backtracking bound a pattern must stay within on such a text
_REPEATS = (sre.MAX_REPEAT, sre.MIN_REPEAT, getattr(sre, "POSSESSIVE_REPEAT", sre.MAX_REPEAT))
_COMPILED: dict[tuple[str, int], re.Pattern[str]] = {}


def shown(pattern: str) -> str:
    """A regex as its author wrote it, on one line: /pattern/."""
    return "/" + pattern.replace("\r", "\\r").replace("\n", "\\n") + "/"


def bounded(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """The compiled regex, or a ValueError naming it when it is invalid or could backtrack
    past ``MAX_REGEX_STEPS`` on a text of ``MAX_REGEX_CHARS``."""
    compiled = _COMPILED.get((pattern, flags))
    if compiled is not None:
        return compiled
    try:
        compiled = re.compile(pattern, flags)
        steps = MAX_REGEX_CHARS * _cost(sre_parse.parse(pattern, flags))
    except re.error as exc:
        raise ValueError(f"regex {shown(pattern)} is invalid: {exc}") from None
    except _Unbounded as exc:
        raise ValueError(f"regex {shown(pattern)} {exc}") from None
    if steps > MAX_REGEX_STEPS:
        raise ValueError(
            f"regex {shown(pattern)} could backtrack too long on a long text (more than one unbounded repeat, "
            f"or repeats that multiply); {_BOUND}"
        )
    if len(_COMPILED) < 1024:
        _COMPILED[(pattern, flags)] = compiled
    return compiled


_BOUND = "bound its repeats, e.g. \\w{1,30} for \\w+"


class _Unbounded(Exception):
    """A construct whose backtracking grows exponentially with the draft."""


def _cost(items: Any) -> float:
    """How many ways a pattern can match at one position, at most (the draft's length
    standing for an unbounded repeat): the product over a sequence, the sum over branches."""
    total = 1.0
    for op, av in items:
        total *= _item_cost(op, av)
        if total > MAX_REGEX_STEPS:
            return math.inf
    return total


def _item_cost(op: Any, av: Any) -> float:
    if op in _REPEATS:
        low, high, body = av
        inner = _cost(body)
        reach = MAX_REGEX_CHARS if high == sre.MAXREPEAT else high
        if inner > 1 and reach > 1:
            if high == sre.MAXREPEAT:
                raise _Unbounded(f"repeats a group that can itself match in several ways (a nested repeat); {_BOUND}")
            return math.inf if reach * math.log(inner) > math.log(MAX_REGEX_STEPS) else inner**reach
        # a repeated group is several times slower per step than a repeated character
        return float(reach + 1) * (1 if len(body) == 1 and body[0][0] is not sre.SUBPATTERN else 8)
    if op is sre.SUBPATTERN:
        return _cost(av[-1])
    if op is sre.BRANCH:
        return sum(_cost(alt) for alt in av[1])
    if op in (sre.ASSERT, sre.ASSERT_NOT):
        return _cost(av[1])
    if op is getattr(sre, "ATOMIC_GROUP", None):
        return _cost(av)
    if op in (sre.GROUPREF, sre.GROUPREF_EXISTS):
        raise _Unbounded("refers back to a group; backreferences can take exponential time")
    return 1.0
