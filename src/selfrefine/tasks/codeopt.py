"""Code optimization (PIE): make a stdin→stdout Python program faster, same behaviour.

The feedback explains why the current program is slow (which loop or data structure, what
to use instead) and ends with a verdict, "# this code is slow" or "# this code is not
slow"; the latter is the stop signal (the last verdict wins). The metric is computed by
running code, never from the feedback: the output program must print the same as the
original (or the expected output) on every test input AND be at least 5% faster with
p < 0.05 over repeated, interleaved sandboxed timings (:mod:`selfrefine.sandbox.timing`),
printing the same in every timed run too (a program that behaves differently when timed is
wrong, not fast).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.errors import DraftParseError, FeedbackParseError, InputError
from ..core.records import Feedback, Verification
from ..sandbox.process import run_python
from ..sandbox.timing import TimingResult, compare_programs
from ..task.task import LOOP_BEST, Capabilities, Task, TaskDefaults, system_message
from .codeopt_bench import TestCase, _normalise, find_by_source, to_test_cases
from .parsing import FENCE, extract_program, parse_python, parses

# "this code is slow", "it's not slow", "the program isn't slow", "code is already fast"
_VERDICT = re.compile(
    r"\b(?:this\s+code|the\s+code|this\s+program|the\s+program|code|program|it)\s*"
    r"(is\s+not|isn't|is|'s)\s+(not\s+)?(?:already\s+|very\s+|too\s+)?"
    r"(slow|fast|efficient|inefficient|optimal)\b",
    re.I,
)
_CODE_NODES = (
    ast.Assign,
    ast.AugAssign,
    ast.For,
    ast.While,
    ast.Import,
    ast.ImportFrom,
    ast.FunctionDef,
    ast.If,
    ast.With,
    ast.ClassDef,
)


def verdicts(text: str) -> list[str]:
    """Every verdict in the text, in order, each "slow" or "not slow"."""
    out = []
    for verb, negation, word in _VERDICT.findall(text):
        negated = verb.lower().replace(" ", "") in ("isnot", "isn't") or bool(negation)
        slow_word = word.lower() in ("slow", "inefficient")
        out.append("slow" if slow_word != negated else "not slow")
    return out


def outputs_match(expected: str, got: str, tol: float = 1e-6) -> bool:
    """Judge-style comparison: tokens equal, or numbers within ``tol`` (abs or relative)."""
    a, b = expected.split(), got.split()
    if a == b:
        return True
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x == y:
            continue
        try:
            fx, fy = float(x), float(y)
        except ValueError:
            return False
        if abs(fx - fy) > tol * max(1.0, abs(fx)):
            return False
    return True


@dataclass
class TestOutcome:
    """One test input run on the new program."""

    __test__ = False

    index: int
    stdin: str
    expected: str | None
    got: str = ""
    error: str | None = None
    timed_out: bool = False

    @property
    def passed(self) -> bool:
        return self.error is None and self.expected is not None and outputs_match(self.expected, self.got)

    def describe(self) -> str:
        shown = _short(self.stdin)
        if self.timed_out:
            return f"input {self.index + 1} ({shown}): timed out"
        if self.error:
            return f"input {self.index + 1} ({shown}): error {self.error}"
        return f"input {self.index + 1} ({shown}): expected {_short(self.expected or '')} but got {_short(self.got)}"


@dataclass
class ProgramCheck:
    """Correctness and speed of a new program against the original on known tests."""

    correct: bool
    tests: list[TestOutcome] = field(default_factory=list)
    timing: TimingResult | None = None
    original_error: str | None = None  # the original itself failed on a test input

    @property
    def speedup(self) -> float | None:
        return self.timing.speedup if self.timing and not self.timing.errors else None

    @property
    def p_value(self) -> float | None:
        return self.timing.p_value if self.timing and not self.timing.errors else None

    @property
    def faster(self) -> bool:
        return bool(self.timing and self.timing.faster)

    @property
    def score(self) -> float:
        """The PIE metric: 1.0 when correct and significantly >= 5% faster."""
        return float(self.correct and self.faster)

    @property
    def failures(self) -> list[TestOutcome]:
        return [t for t in self.tests if not t.passed]


def _short(text: str, limit: int = 60) -> str:
    text = text.strip().replace("\n", "\\n")
    return repr(text if len(text) <= limit else text[:limit] + "...")


class CodeOpt(Task):
    name = "codeopt"
    defaults = TaskDefaults(
        system=system_message(
            "an expert Python performance engineer. Each message asks you to speed up, analyse or improve a program without changing its output"
        ),
        generic_feedback="# Improve the code so that it runs faster.",
        stop_contains=("not slow",),
        temperature={"generate": 0.0, "feedback": 0.0, "refine": 0.0},
        max_tokens={"generate": 400, "feedback": 150, "refine": 400},
        stop_sequences={
            # the prompts end with "# optimized version:"; a model that writes that header again
            # has finished its program and started another example
            "generate": ["\n# optimized version", "\n# slower version", "\n# why is it slow", "\n###"],
            "feedback": ["\n# code:", "\n# slower version", "\n# optimized version", "\n###"],
            "refine": ["\n# optimized version", "\n# slower version", "\n# why is it slow", "\n###"],
        },
        best=LOOP_BEST,  # not measured on this task: the loop measured on commongen and acronym
        echo="off",  # a rewrite may rightly stay close to its input (checks/incomplete.py)
    )
    capabilities = Capabilities(verifier=True, runs_code=True)
    judge_aspects = ("same",)
    description = "Make a stdin/stdout Python program faster with the same output (PIE)"
    prompt_dir = "codeopt"
    metric_name = "correct and >=5% faster (p<0.05)"
    stop_description = "feedback says '# this code is not slow'"
    timeout = 10.0  # seconds per run of a program on one input
    metric_repeats = 7  # timing runs per program and input for the metric
    verify_repeats = 5  # fewer for the verifier: it runs every iteration

    def __init__(
        self,
        *args: Any,
        tests: Mapping[str, Sequence[Any]] | None = None,
        use_benchmark: bool = True,
        repeats: int | None = None,
        **kwargs: Any,
    ) -> None:
        """``tests`` maps a program's source to its test inputs (strings, TestCase, dicts);
        with ``use_benchmark`` the inputs of the built-in benchmark's programs are known too."""
        super().__init__(*args, **kwargs)
        self.tests = {_normalise(src): to_test_cases(cases) for src, cases in (tests or {}).items()}
        self.use_benchmark = use_benchmark
        if repeats is not None:
            self.metric_repeats = self.verify_repeats = repeats

    # --- hooks -----------------------------------------------------------------------------

    def prepare_input(self, text: str) -> str:
        text = super().prepare_input(text)
        fenced = FENCE.findall(text)
        if fenced and fenced[0].strip():
            text = fenced[0].strip()
        try:
            tree = parse_python(text)
        except SyntaxError as exc:
            raise InputError(f"the input program does not parse (line {exc.lineno}: {exc.msg})") from None
        # CodeNet programs often have blank lines doubled; drop them (saves prompt tokens)
        # unless that changes the program (blank lines inside a multi-line string)
        compact = "\n".join(line.rstrip() for line in text.splitlines() if line.strip())
        if ast.dump(parse_python(compact)) == ast.dump(tree):
            text = compact
        return text

    def parse_draft(self, text: str) -> str:
        return extract_program(text)

    def parse_feedback(self, text: str, *, input: str, draft: str) -> Feedback:
        raw = text.strip()
        if not raw:
            raise FeedbackParseError("the model returned empty feedback")
        found = verdicts(raw)
        if not found and _looks_like_code(raw):
            raise FeedbackParseError("the feedback is a program, not an explanation of why the code is slow")
        reasons = [ln.lstrip("#- ").strip() for ln in raw.splitlines()]
        reasons = [r for r in reasons if r and not verdicts(r)]
        verdict = found[-1] if found else ""
        return Feedback(
            text=raw,
            done=verdict == "not slow",
            total=1.0 if verdict == "not slow" else 0.0,  # the critic's verdict, for selection ties
            fields={"verdict": verdict, "reasons": reasons},
        )

    def says_done(self, text: str) -> bool | None:
        found = verdicts(text)
        return bool(found) and found[-1] == "not slow"

    # --- tests, metric, verifier --------------------------------------------------------

    def known_tests(self, program: str) -> list[TestCase]:
        """Test cases known for a program: given to the task, or from the benchmark."""
        key = _normalise(program)
        if key in self.tests:
            return self.tests[key]
        if self.use_benchmark:
            bench = find_by_source(program)
            if bench is not None:
                return bench.tests
        return []

    def check_program(
        self, original: str, new: str, tests: Sequence[Any], *, repeats: int | None = None
    ) -> ProgramCheck:
        """Run ``new`` on every test (checking outputs), then time it against ``original``."""
        cases = to_test_cases(tests)
        if not cases:
            raise InputError("evaluation needs at least one test input")
        outcomes, original_error = [], None
        for i, case in enumerate(cases):
            expected = case.expected
            if expected is None:
                ref = run_python(original, stdin=case.stdin, timeout=self.timeout, max_output=1 << 22)
                if not ref.ok:
                    original_error = original_error or f"input {i + 1}: {ref.error}"
                expected = ref.stdout if ref.ok else None
            got = run_python(new, stdin=case.stdin, timeout=self.timeout, max_output=1 << 22)
            outcomes.append(TestOutcome(i, case.stdin, expected, got.stdout, got.error, got.timed_out))
        correct = all(t.passed for t in outcomes)
        timing = None
        if correct:
            timing = compare_programs(
                original,
                new,
                [c.stdin for c in cases],
                repeats=repeats or self.metric_repeats,
                timeout=self.timeout,
                # timed runs must print what the checked run did: a program that can tell a
                # timed run from another and skips its work there is wrong, not fast
                expected=[t.expected for t in outcomes],
                same=outputs_match,
            )
            correct = not timing.wrong_output
        return ProgramCheck(correct, outcomes, timing, original_error)

    def metric(self, input: str, output: str, reference: Any = None) -> float | None:
        tests = to_test_cases(reference) if reference is not None else self.known_tests(input)
        if not tests:
            return None
        try:
            program = extract_program(output)
        except DraftParseError:
            return 0.0
        return self.check_program(input, program, tests).score

    def verify(self, input: str, draft: str) -> Verification | None:
        """Run the draft on the known test inputs and time it against the original.

        Score (higher is better): 0.0 when it does not parse or a test fails, else the
        measured speedup (median old / new time; 1.0 is as fast as the original, and when
        no test inputs are known a draft that runs scores 1.0)."""
        if not parses(draft):
            return Verification(text=f"# The code does not run: {_syntax_error(draft)}", passed=False, score=0.0)
        tests = self.known_tests(input)
        if not tests:
            return self._smoke_test(input, draft)
        ev = self.check_program(input, draft, tests, repeats=self.verify_repeats)
        if not ev.correct and ev.timing is not None and ev.timing.wrong_output:
            return Verification(text=f"# Wrong when timed: {ev.timing.errors[0]}.", passed=False, score=0.0)
        if not ev.correct:
            lines = [f"# Wrong on {len(ev.failures)} of {len(ev.tests)} test inputs:"]
            lines += [f"# {t.describe()}" for t in ev.failures[:3]]
            return Verification(text="\n".join(lines), passed=False, score=0.0)
        assert ev.timing is not None
        text = f"# All {len(ev.tests)} tests pass; {ev.timing.summary()}."
        return Verification(text=text, passed=ev.faster, score=ev.speedup or 0.0)

    def _smoke_test(self, original: str, draft: str) -> Verification:
        """No tests known: run both on empty stdin and report only what differs."""
        new = run_python(draft, stdin="", timeout=self.timeout)
        old = run_python(original, stdin="", timeout=self.timeout)
        if not new.ok and (old.ok or _kind(new.error) != _kind(old.error)):
            return Verification(text=f"# On empty input the code fails: {new.error}", passed=False, score=0.0)
        if new.ok and old.ok and not outputs_match(old.stdout, new.stdout):
            text = f"# On empty input it prints {_short(new.stdout)}, the original {_short(old.stdout)}."
            return Verification(text=text, passed=False, score=0.0)
        # as fast as the original, as far as anyone knows (a failing draft scores 0)
        text = "# No test inputs known: the code runs, its speed is unknown."
        return Verification(text=text, passed=None, score=1.0)


def _kind(error: str | None) -> str:
    return (error or "").split(":")[0]


def _syntax_error(code: str) -> str:
    try:
        parse_python(code)
    except SyntaxError as exc:
        return f"SyntaxError on line {exc.lineno}: {exc.msg}"
    except ValueError as exc:
        return str(exc)
    return ""


def _looks_like_code(text: str) -> bool:
    try:
        tree = parse_python(text)
    except (SyntaxError, ValueError):
        return False
    return any(isinstance(node, _CODE_NODES) for node in tree.body)
