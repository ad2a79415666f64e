"""Regular expressions from untrusted authors (task files, requests) run on untrusted text
(drafts, critiques): Python's ``re`` has no timeout and holds the interpreter while it
searches, so a pattern is refused when it is loaded if searching a text of
``MAX_REGEX_CHARS`` could take more than ``MAX_REGEX_STEPS`` backtracking steps (nested
repeats, backreferences, repeats whose give-backs the rest of the pattern could take), and
callers search at most ``MAX_REGEX_CHARS`` of a text. The patterns of one list (a task's
stop patterns, its checks) share that bound (:func:`bounded_together`): twenty patterns each
just under it would otherwise take twenty times as long.

The steps are estimated from the parsed pattern: a repeat costs its reach, and multiplies
what follows it by the ways it can end, unless what follows cannot start with a character
the repeat takes (``\\s*\\d+``: the two never trade characters) or, at the top of the
pattern, it starts after a character it cannot take (``Score:\\s*``: each run of spaces is
read once in the whole text, whatever the start). A repeated group's iteration costs about
``GROUP_STEP`` character steps (measured on CPython 3.11).
"""

from __future__ import annotations

import _sre  # type: ignore[import-not-found]  # re's own lower case, for what IGNORECASE equates
import math
import re
from collections.abc import Sequence

# the parser behind re.compile (Python 3.11+), to bound a pattern before it is used
from re import _constants as sre  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]
from re._casefix import _EXTRA_CASES  # type: ignore[import-not-found]  # IGNORECASE's other equivalences
from typing import Any

MAX_REGEX_CHARS = 5_000  # the longest text a bounded regex searches
MAX_REGEX_STEPS = 10**8  # the steps the patterns of one list may take on such a text (0.2-1 s measured)
MAX_PATTERNS = 100  # patterns in one list
GROUP_STEP = 30  # what one iteration of a repeated group costs, in character steps
_REPEATS = (sre.MAX_REPEAT, sre.MIN_REPEAT, getattr(sre, "POSSESSIVE_REPEAT", sre.MAX_REPEAT))
_CHARS = (sre.LITERAL, sre.NOT_LITERAL, sre.IN, sre.ANY)
_COMPILED: dict[tuple[str, int], tuple[re.Pattern[str], float]] = {}


def shown(pattern: str) -> str:
    """A regex as its author wrote it, on one line: /pattern/."""
    return "/" + pattern.replace("\r", "\\r").replace("\n", "\\n") + "/"


def bounded(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """The compiled regex, or a ValueError naming it when it is invalid or could backtrack
    past ``MAX_REGEX_STEPS`` on a text of ``MAX_REGEX_CHARS``."""
    return _checked(pattern, flags)[0]


def regex_steps(pattern: str, flags: int = 0) -> float:
    """The backtracking steps a search of a ``MAX_REGEX_CHARS`` text may take, at most
    (about); a ValueError as :func:`bounded` for a pattern over the bound."""
    return _checked(pattern, flags)[1]


def bounded_together(patterns: list[str], flags: int = 0, what: str = "regexes") -> None:
    """Each pattern bounded, all of them within ``MAX_REGEX_STEPS`` together (they search
    the same text), and no more than ``MAX_PATTERNS``; a ValueError naming the problem
    otherwise."""
    within_budget([(p, flags) for p in patterns], what)


def within_budget(patterns: Sequence[tuple[str, int]], what: str = "regexes") -> None:
    """Every regex of one run, each with its flags, within one budget: each bounded, all of
    them within ``MAX_REGEX_STEPS`` together and no more than ``MAX_PATTERNS`` (a run
    searches each of its texts with its regexes: a task file's checks, stop patterns and
    score, and a request's checks, in whatever form they came); a ValueError naming the
    problem otherwise."""
    if len(patterns) > MAX_PATTERNS:
        raise ValueError(f"{len(patterns)} {what}; the limit is {MAX_PATTERNS}")
    steps = 0.0
    for pattern, flags in patterns:
        steps += regex_steps(pattern, flags)
        if steps > MAX_REGEX_STEPS:
            raise ValueError(
                f"these {len(patterns)} {what} together could backtrack too long on a long text "
                f"(more than {MAX_REGEX_STEPS:.0e} steps): use fewer, or {_BOUND}"
            )


def _checked(pattern: str, flags: int) -> tuple[re.Pattern[str], float]:
    known = _COMPILED.get((pattern, flags))
    if known is not None:
        return known
    try:
        compiled = re.compile(pattern, flags)
        parsed = sre_parse.parse(pattern, flags)  # its flags: the given ones and its own (?i)
        steps = MAX_REGEX_CHARS * _Cost(parsed.state.flags).sequence(list(parsed), frozenset(), top=True)[0]
    except re.error as exc:
        raise ValueError(f"regex {shown(pattern)} is invalid: {exc}") from None
    except _Unbounded as exc:
        raise ValueError(f"regex {shown(pattern)} {exc}") from None
    except RecursionError:
        raise ValueError(f"regex {shown(pattern)} nests its groups too deeply") from None
    if steps > MAX_REGEX_STEPS:
        raise ValueError(
            f"regex {shown(pattern)} could backtrack too long on a long text (more than one unbounded repeat, "
            f"or repeats that multiply); {_BOUND}"
        )
    if len(_COMPILED) < 1024:
        _COMPILED[(pattern, flags)] = (compiled, steps)
    return compiled, steps


_BOUND = "bound its repeats, e.g. \\w{1,30} for \\w+"


class _Unbounded(Exception):
    """A construct whose backtracking grows exponentially with the draft."""


# A set of characters: its parts, each (a regex of one character, the code points it lists
# when it is a short positive list), or None for "any character, as far as we know". An
# empty set matches no character (where the pattern ends).
Atom = tuple[str, frozenset[int] | None]
CharSet = frozenset[Atom] | None
_CATEGORIES = {
    sre.CATEGORY_DIGIT: r"\d",
    sre.CATEGORY_NOT_DIGIT: r"\D",
    sre.CATEGORY_SPACE: r"\s",
    sre.CATEGORY_NOT_SPACE: r"\S",
    sre.CATEGORY_WORD: r"\w",
    sre.CATEGORY_NOT_WORD: r"\W",
}
MAX_LISTED = 512  # a class part listing more code points is compared as "any character"
_FLAGS = re.IGNORECASE | re.DOTALL | re.ASCII  # what decides which characters a part takes
_CASES: dict[int, frozenset[int]] = {}  # code point -> the code points IGNORECASE may equate with it


def _char(code: int) -> str:
    return f"\\U{code:08x}"


def _atoms(op: Any, av: Any) -> CharSet:
    """One character's item as a set of parts; a negated class is one part, not listed."""
    if op is sre.LITERAL:
        return frozenset({(_char(av), frozenset({av}))})
    if op is sre.NOT_LITERAL:
        return frozenset({(f"[^{_char(av)}]", None)})
    if op is sre.ANY:
        return frozenset({(".", None)})
    if any(kind is sre.NEGATE for kind, _ in av):
        source = _class_source(av)
        return None if source is None else frozenset({(source, None)})
    parts: set[Atom] = set()
    for kind, value in av:
        if kind is sre.LITERAL:
            parts.add((_char(value), frozenset({value})))
        elif kind is sre.RANGE:
            low, high = value
            listed = frozenset(range(low, high + 1)) if high - low < MAX_LISTED else None
            parts.add((f"[{_char(low)}-{_char(high)}]", listed))
        elif kind is sre.CATEGORY and value in _CATEGORIES:
            parts.add((_CATEGORIES[value], None))
        else:
            return None
    return frozenset(parts)


def _class_source(av: Any) -> str | None:
    parts = []
    for kind, value in av:
        if kind is sre.NEGATE:
            parts.insert(0, "^")
        elif kind is sre.LITERAL:
            parts.append(_char(value))
        elif kind is sre.RANGE:
            parts.append(f"{_char(value[0])}-{_char(value[1])}")
        elif kind is sre.CATEGORY and value in _CATEGORIES:
            parts.append(_CATEGORIES[value])
        else:
            return None
    return "[" + "".join(parts) + "]"


def _union(a: CharSet, b: CharSet) -> CharSet:
    return None if a is None or b is None else a | b


def disjoint(a: CharSet, b: CharSet, flags: int) -> bool:
    """Whether no character is in both sets (exactly: a listed part's code points, and
    those IGNORECASE equates with them, are matched against the other part)."""
    if a is None or b is None:
        return False
    return not any(_meet(x, y, flags & _FLAGS) for x in a for y in b)


def _meet(x: Atom, y: Atom, flags: int) -> bool:
    if x[1] is None and y[1] is None:
        return _categories_meet(x[0], y[0], flags)
    listed, other = (x, y) if x[1] is not None and (y[1] is None or len(x[1]) <= len(y[1])) else (y, x)
    mine, theirs = re.compile(listed[0], flags), re.compile(other[0], flags)
    codes = listed[1] or frozenset()
    if flags & re.IGNORECASE:
        codes = frozenset().union(*(_cases(c) for c in codes))
    return any(mine.fullmatch(chr(c)) and theirs.fullmatch(chr(c)) for c in codes)


def _categories_meet(x: str, y: str, flags: int) -> bool:
    """Whether two categories (\\d, \\s, ...) share a character, in Unicode as in ASCII:
    digits are word characters, spaces are neither, and each is apart from its complement
    (the test suite checks this on every code point). Anything else unlisted (a negated
    class, a long range, ".") may share one."""
    return not (x in _CATEGORIES.values() and y in _CATEGORIES.values() and frozenset((x, y)) in _APART)


_APART = {
    frozenset(pair)
    for pair in ((r"\d", r"\s"), (r"\s", r"\w"), (r"\d", r"\W"), (r"\d", r"\D"), (r"\s", r"\S"), (r"\w", r"\W"))
}


def _cases(code: int) -> frozenset[int]:
    """The code point with every code point its lower or upper case, or re's extra case
    equivalences, link it to (a superset of what IGNORECASE matches it with)."""
    if not _CASES:
        _CASES.update(_case_groups())
    return _CASES.get(code, frozenset({code}))


def _case_groups() -> dict[int, frozenset[int]]:
    """Each code point that has another case, with its group (built once, in about 20 ms)."""
    links: dict[int, set[int]] = {}
    pairs = [(c, other) for c, extra in _EXTRA_CASES.items() for other in extra]
    for c in [c for c in range(0x20000) if _sre.unicode_iscased(c)]:  # no cased letter lies beyond
        upper = chr(c).upper()
        pairs += [(c, other) for other in (_sre.unicode_tolower(c), ord(upper) if len(upper) == 1 else c) if other != c]
    for c, other in pairs:
        links.setdefault(c, set()).add(other)
        links.setdefault(other, set()).add(c)
    groups: dict[int, frozenset[int]] = {}
    for c in links:
        if c not in groups:
            group, todo = {c}, [c]
            while todo:
                more = links[todo.pop()] - group
                group |= more
                todo += more
            groups.update(dict.fromkeys(group, frozenset(group)))
    return groups


class _Cost:
    """The steps a pattern takes at one start position, at most (about), and the ways it can
    end there (each a place where what follows it is tried again)."""

    def __init__(self, flags: int) -> None:
        self.flags = flags

    def first(self, items: list[Any], follow: CharSet) -> tuple[CharSet, bool]:
        """The characters ``items`` can start with (``follow``'s too when they can match
        nothing), and whether they can match nothing."""
        found: CharSet = frozenset()
        for op, av in items:
            chars, empty = self.starts(op, av)
            found = _union(found, chars)
            if not empty:
                return found, False
        return _union(found, follow), True

    def starts(self, op: Any, av: Any) -> tuple[CharSet, bool]:
        if op in _CHARS:
            return _atoms(op, av), False
        if op in _REPEATS:
            chars, empty = self.first(list(av[2]), frozenset())
            return chars, empty or av[0] == 0
        if op is sre.SUBPATTERN:
            return self.first(list(av[-1]), frozenset()) if not (av[1] or av[2]) else (None, True)
        if op is getattr(sre, "ATOMIC_GROUP", None):
            return self.first(list(av), frozenset())
        if op is sre.BRANCH:
            alts = [self.first(list(alt), frozenset()) for alt in av[1]]
            chars: CharSet = frozenset()
            for alt_chars, _ in alts:
                chars = _union(chars, alt_chars)
            return chars, any(empty for _, empty in alts)
        if op is sre.AT and av in (sre.AT_END, sre.AT_END_LINE):
            return frozenset({(_char(10), frozenset({10}))}), False  # "$": only before a line end (or at the end)
        if op is sre.AT and av in (sre.AT_END_STRING, sre.AT_BEGINNING_STRING):
            return frozenset(), False  # \Z, \A: never where a repeat gave a character back
        if op in (sre.AT, sre.ASSERT, sre.ASSERT_NOT):
            return frozenset(), True  # zero width: what follows decides
        return None, True

    def sequence(self, items: list[Any], follow: CharSet, top: bool = False) -> tuple[float, float]:
        """(steps, ways) of ``items`` followed by something that starts with ``follow``. At
        the ``top`` of the pattern, a repeat that starts after a fixed run of characters it
        cannot take reads each run of its characters once in the whole text: 2 steps per start."""
        items = _flattened(items)
        follows: list[CharSet] = []
        after = follow
        for op, av in reversed(items):
            follows.insert(0, after)
            chars, empty = self.starts(op, av)
            after = _union(chars, after) if empty else chars
        steps, paths, fixed, before = 0.0, 1.0, top, None
        for (op, av), after in zip(items, follows):
            chars = self.starts(*av[2][0])[0] if op in _REPEATS and len(av[2]) == 1 and av[2][0][0] in _CHARS else None
            once = chars is not None and fixed and disjoint(before, chars, self.flags)
            if once:  # its runs never overlap from one start to the next: read once in the text
                item_steps, ways = 2.0, 1.0 if disjoint(chars, after, self.flags) else 2.0
            else:
                item_steps, ways = self.item(op, av, after)
            steps, paths = steps + paths * item_steps, paths * ways
            if steps > MAX_REGEX_STEPS or paths > MAX_REGEX_STEPS:
                return math.inf, math.inf
            if op in _CHARS:  # one character: where what follows starts is still fixed by the start
                before = self.starts(op, av)[0]
            elif once and ways == 1:  # ends where its run ends: fixed too
                before = chars if av[0] > 0 else _union(before, chars)
            elif op is not sre.AT:
                fixed = False
        return steps, paths

    def item(self, op: Any, av: Any, follow: CharSet) -> tuple[float, float]:
        if op in _REPEATS:
            return self.repeat(op, av, follow)
        if op is sre.SUBPATTERN:  # a group with flags of its own: (?i:...)
            return _Cost((self.flags | av[1]) & ~av[2]).sequence(list(av[-1]), None)
        if op is sre.BRANCH:
            alts = [self.sequence(list(alt), follow) for alt in av[1]]
            return sum(s for s, _ in alts), sum(w for _, w in alts)
        if op in (sre.ASSERT, sre.ASSERT_NOT):
            return self.sequence(list(av[1]), frozenset())[0], 1.0
        if op is getattr(sre, "ATOMIC_GROUP", None):
            return self.sequence(list(av), frozenset())[0], 1.0
        if op in (sre.GROUPREF, sre.GROUPREF_EXISTS):
            raise _Unbounded("refers back to a group; backreferences can take exponential time")
        return 1.0, 1.0

    def repeat(self, op: Any, av: Any, follow: CharSet) -> tuple[float, float]:
        """A repeat reads up to its reach; greedy or lazy, it can end after any of its
        iterations, unless what follows cannot start with a character it takes (or it is
        possessive)."""
        low, high, body = av[0], av[1], list(av[2])
        reach = min(high, MAX_REGEX_CHARS)
        first = self.first(body, frozenset())[0]
        deterministic = op is getattr(sre, "POSSESSIVE_REPEAT", None) or disjoint(first, follow, self.flags)
        ends = 1.0 if deterministic else float(max(reach - low, 0) + 1)
        if len(body) == 1 and body[0][0] in _CHARS:
            return float(reach), ends
        inner_steps, inner_ways = self.sequence(body, _union(first, follow))
        if inner_ways > 1 and reach > 1:
            if high == sre.MAXREPEAT:
                raise _Unbounded(f"repeats a group that can itself match in several ways (a nested repeat); {_BOUND}")
            if reach * math.log(inner_ways) > math.log(MAX_REGEX_STEPS):
                return math.inf, math.inf
            paths = sum(inner_ways**k for k in range(reach + 1))
            return (inner_steps + GROUP_STEP) * paths, paths
        return (inner_steps + GROUP_STEP) * reach, ends


def _flattened(items: list[Any]) -> list[Any]:
    """A sequence with its plain groups (no flags of their own) opened: ``(\\d+)`` is ``\\d+``."""
    out: list[Any] = []
    for op, av in items:
        if op is sre.SUBPATTERN and not (av[1] or av[2]):
            out.extend(_flattened(list(av[-1])))
        else:
            out.append((op, av))
    return out
