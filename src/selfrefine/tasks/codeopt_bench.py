"""The code-optimization benchmark: slow programs with seeded input generators, and PIE rows.

``load_benchmark()`` returns our own slow programs (``codeopt_programs/programs.toml``,
written for this project, not taken from PIE), each with a known faster version and a
deterministic input generator. Expected outputs are computed by running the fast version
(the reference solution) in the sandbox, lazily and once per program.

``load_pie(path, tests)`` reads the PIE JSONL format (``input`` slow program, ``target``
faster one, ``problem_id``, …). PIE ships no test inputs, so the caller supplies them per
``problem_id``; rows without tests get ``tests == []`` (their reference is None).
"""

from __future__ import annotations

import functools
import json
import random
import tomllib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from ..core.errors import InputError, TaskError
from ..sandbox.process import run_python

Generator = Callable[[random.Random], str]


@dataclass(frozen=True)
class TestCase:
    """One test: the program's stdin and, when known, the expected stdout."""

    __test__ = False  # not a pytest class

    stdin: str
    expected: str | None = None


@dataclass(frozen=True)
class CodeOptProgram:
    """A slow program of the benchmark, its faster version and how to make its inputs."""

    id: str
    description: str
    pattern: str  # the slowness pattern, e.g. "list membership in a loop"
    slow: str
    fast: str
    generator: Generator | None = field(default=None, repr=False, compare=False)
    n_tests: int = 2

    def inputs(self, n: int | None = None) -> list[str]:
        """Deterministic stdin strings (seed i for test i)."""
        if self.generator is None:
            return []
        return [self.generator(random.Random(f"{self.id}:{i}")) for i in range(n or self.n_tests)]

    @functools.cached_property
    def tests(self) -> list[TestCase]:
        """Inputs with the expected outputs of the reference (fast) solution."""
        out = []
        for stdin in self.inputs():
            result = run_python(self.fast, stdin=stdin, timeout=20, max_output=1 << 22)
            if not result.ok:
                raise TaskError(f"reference solution of {self.id!r} failed: {result.error}")
            out.append(TestCase(stdin, result.stdout))
        return out


@dataclass(frozen=True)
class PieRow:
    """One PIE row: slow ``input`` program, faster ``target``, and tests if supplied."""

    problem_id: str
    input: str
    target: str
    tests: list[TestCase] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def reference(self) -> list[TestCase] | None:
        return self.tests or None


# --- input generators (seeded; sized so the slow version runs ~50-300 ms) ------------------


def _ints(rng: random.Random, n: int, lo: int, hi: int) -> str:
    return " ".join(str(rng.randint(lo, hi)) for _ in range(n))


def _sized(rng: random.Random, n: int, lo: int, hi: int) -> str:
    """The common input shape: a count line, then that many integers on one line."""
    return f"{n}\n{_ints(rng, n, lo, hi)}\n"


def _one_per_line(ns: list[int]) -> str:
    """A count line, then one number per line."""
    return f"{len(ns)}\n" + "".join(f"{n}\n" for n in ns)


def _list_membership(rng: random.Random) -> str:
    n, q = 2200, 2200
    return f"{n} {q}\n{_ints(rng, n, 1, 10**6)}\n{_ints(rng, q, 1, 10**6)}\n"


def _prepend_string(rng: random.Random) -> str:
    return " ".join(f"w{rng.randint(0, 999)}" for _ in range(30000)) + "\n"


def _stairs(rng: random.Random) -> str:
    ns = [rng.randint(18, 19) for _ in range(3)]
    return _one_per_line(ns)


def _pair_sum(rng: random.Random) -> str:
    n = 900
    return f"{n} {rng.randint(50, 150)}\n{_ints(rng, n, 0, 100)}\n"


def _running_median(rng: random.Random) -> str:
    return _sized(rng, 5500, 1, 10**9)


def _input_per_line(rng: random.Random) -> str:
    n = 100_000
    return f"{n}\n" + "\n".join(str(rng.randint(-(10**9), 10**9)) for _ in range(n)) + "\n"


def _primes(rng: random.Random) -> str:
    return f"{rng.randint(40_000, 45_000)}\n"


def _range_sum(rng: random.Random) -> str:
    n, q = 3000, 1500
    lines = [f"{n} {q}", _ints(rng, n, -1000, 1000)]
    for _ in range(q):
        left = rng.randint(1, n)
        lines.append(f"{left} {rng.randint(left, n)}")
    return "\n".join(lines) + "\n"


def _divisors(rng: random.Random) -> str:
    ns = [rng.randint(150_000, 300_000) for _ in range(5)]
    return _one_per_line(ns)


def _bfs(rng: random.Random) -> str:
    n = 20_000  # a shallow random tree: the BFS queue holds most nodes at once
    edges = [(rng.randint(1, min(i - 1, 20)), i) for i in range(2, n + 1)]
    rng.shuffle(edges)
    return f"{n} {len(edges)}\n" + "\n".join(f"{u} {v}" for u, v in edges) + "\n"


def _count_in_loop(rng: random.Random) -> str:
    return _sized(rng, 6000, 1, 800)


def _max_subarray(rng: random.Random) -> str:
    return _sized(rng, 900, -100, 100)


def _lis(rng: random.Random) -> str:
    return _sized(rng, 950, 1, 10**6)


def _power_mod(rng: random.Random) -> str:
    qs = [(rng.randint(2, 10**9), rng.randint(100_000, 200_000), rng.randint(2, 10**9)) for _ in range(5)]
    return f"{len(qs)}\n" + "".join(f"{a} {b} {m}\n" for a, b, m in qs)


def _factorial(rng: random.Random) -> str:
    ns = [rng.randint(5_000, 20_000) for _ in range(60)]
    return _one_per_line(ns)


def _count_smaller(rng: random.Random) -> str:
    return _sized(rng, 800, 1, 10**6)


def _window(rng: random.Random) -> str:
    n, k = 12000, 600
    return f"{n} {k} {k * 50}\n{_ints(rng, n, 1, 100)}\n"


def _collatz(rng: random.Random) -> str:
    return f"{rng.randint(6_000, 8_000)}\n"


def _prefix_max(rng: random.Random) -> str:
    return _sized(rng, 2500, 1, 10**9)


def _pascal(rng: random.Random) -> str:
    qs = []
    for _ in range(3):
        n = rng.randint(19, 20)
        qs.append((n, rng.randint(n // 2 - 1, n // 2 + 1)))
    return f"{len(qs)}\n" + "".join(f"{n} {k}\n" for n, k in qs)


def _pop_min(rng: random.Random) -> str:
    return _sized(rng, 4000, 1, 1000)


def _unique_words(rng: random.Random) -> str:
    return " ".join(f"w{rng.randint(0, 1500)}" for _ in range(6000)) + "\n"


def _grid(rng: random.Random) -> str:
    h, w = 11, 12
    rows = []
    for r in range(h):
        row = ["#" if rng.random() < 0.08 else "." for _ in range(w)]
        if r in (0, h - 1):
            row[0] = row[-1] = "."
        rows.append("".join(row))
    return f"{h} {w}\n" + "\n".join(rows) + "\n"


GENERATORS: dict[str, Generator] = {
    "list_membership": _list_membership,
    "prepend_string": _prepend_string,
    "stairs_recursion": _stairs,
    "pair_sum": _pair_sum,
    "running_median": _running_median,
    "input_per_line": _input_per_line,
    "trial_division_primes": _primes,
    "range_sum_queries": _range_sum,
    "divisor_count": _divisors,
    "list_queue_bfs": _bfs,
    "count_in_loop": _count_in_loop,
    "max_subarray": _max_subarray,
    "lis_quadratic": _lis,
    "loop_power_mod": _power_mod,
    "factorial_per_query": _factorial,
    "count_smaller": _count_smaller,
    "window_sum_count": _window,
    "collatz_no_memo": _collatz,
    "prefix_max_recompute": _prefix_max,
    "pascal_recursion": _pascal,
    "sort_to_pop_min": _pop_min,
    "unique_words_list": _unique_words,
    "grid_path_recursion": _grid,
}


# --- loaders ---------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _programs() -> tuple[CodeOptProgram, ...]:
    path = resources.files("selfrefine.tasks").joinpath("codeopt_programs", "programs.toml")
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    out = []
    for item in data["program"]:
        pid = item["id"]
        if pid not in GENERATORS:
            raise TaskError(f"benchmark program {pid!r} has no input generator")
        out.append(
            CodeOptProgram(
                id=pid,
                description=item["description"],
                pattern=item["pattern"],
                slow=item["slow"].strip() + "\n",
                fast=item["fast"].strip() + "\n",
                generator=GENERATORS[pid],
            )
        )
    return tuple(out)


def load_benchmark(ids: Sequence[str] | None = None) -> list[CodeOptProgram]:
    """The benchmark programs (all, or those with the given ids, in that order)."""
    programs = {p.id: p for p in _programs()}
    if ids is None:
        return list(programs.values())
    unknown = [i for i in ids if i not in programs]
    if unknown:
        raise InputError(f"unknown benchmark program(s) {unknown}; known: {', '.join(programs)}")
    return [programs[i] for i in ids]


def find_by_source(source: str) -> CodeOptProgram | None:
    """The benchmark program whose slow (or fast) source is ``source``, ignoring blank lines."""
    key = _normalise(source)
    for program in _programs():
        if key in (_normalise(program.slow), _normalise(program.fast)):
            return program
    return None


def _normalise(source: str) -> str:
    return "\n".join(line.rstrip() for line in source.strip().splitlines() if line.strip())


def to_test_cases(items: Any) -> list[TestCase]:
    """Test cases from a string, TestCase objects, dicts or (stdin, expected) pairs."""
    if items is None:
        return []
    if isinstance(items, (str, TestCase, Mapping)):
        items = [items]
    out = []
    for item in items:
        if isinstance(item, TestCase):
            out.append(item)
        elif isinstance(item, str):
            out.append(TestCase(item))
        elif isinstance(item, Mapping):
            stdin = item.get("stdin", item.get("input"))
            if not isinstance(stdin, str):
                raise InputError(f"a test case needs a string 'stdin' (or 'input'); got {dict(item)!r:.120}")
            expected = item.get("expected", item.get("output"))
            out.append(TestCase(stdin, None if expected is None else str(expected)))
        elif isinstance(item, (tuple, list)) and len(item) == 2:
            out.append(TestCase(str(item[0]), None if item[1] is None else str(item[1])))
        else:
            raise InputError(f"cannot read a test case from {item!r:.120}")
    return out


def load_pie(path: str | Path, tests: Mapping[str, Sequence[Any]] | None = None) -> list[PieRow]:
    """Rows of a PIE JSONL file; ``tests`` maps problem_id to its test inputs (or cases)."""
    rows = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
                problem_id, slow = str(obj["problem_id"]), obj["input"]
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise InputError(f"{path}:{lineno}: not a PIE row ({exc})") from None
            cases = to_test_cases((tests or {}).get(problem_id))
            meta = {k: v for k, v in obj.items() if k not in ("problem_id", "input", "target")}
            rows.append(PieRow(problem_id, slow, obj.get("target", ""), cases, meta))
    return rows


# --- test cases for PIE rows, from a file (``selfrefine eval codeopt --tests FILE``) ---------


def load_tests_file(path: str | Path) -> dict[str, list[TestCase]]:
    """Test cases per problem id from a tests file: a JSON object keyed by problem id,
    ``{"p03371": [{"input": "1500 2000 1600 3 2\\n", "output": "7900\\n"}, ...]}``, or for a
    ``.jsonl`` file one ``{"problem_id": ID, "tests": [...]}`` per line. A case without
    ``output`` (or a bare stdin string) expects what the original program prints."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read tests file {p}: {exc}") from None
    if p.suffix == ".jsonl":
        entries = list(_tests_jsonl(p, text))
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"tests file {p}: line {exc.lineno}: bad JSON: {exc.msg}") from None
        if not isinstance(data, dict):
            raise InputError(f"tests file {p} must hold a JSON object keyed by problem id, got {type(data).__name__}")
        entries = [(f"{p}: problem {pid!r}", str(pid), cases) for pid, cases in data.items()]
    out: dict[str, list[TestCase]] = {}
    for where, problem_id, cases in entries:
        if problem_id in out:
            raise InputError(f"{where}: problem id {problem_id!r} appears twice; give its tests once")
        if not isinstance(cases, list) or not cases:
            raise InputError(
                f"{where}: the tests must be a non-empty list of test cases, e.g. "
                f'[{{"input": "3\\n", "output": "6\\n"}}]'
            )
        try:
            out[problem_id] = to_test_cases(cases)
        except InputError as exc:
            raise InputError(f"{where}: {exc}") from None
    return out


def _tests_jsonl(p: Path, text: str) -> Iterator[tuple[str, str, Any]]:
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"tests file {p}: line {number}"
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise InputError(f"{where}: bad JSON: {exc}") from None
        if not isinstance(row, dict) or not isinstance(row.get("problem_id"), (str, int)) or "tests" not in row:
            raise InputError(f'{where}: expected {{"problem_id": ID, "tests": [...]}}')
        yield where, str(row["problem_id"]), row["tests"]
