"""The codeopt task: prompts, feedback verdicts, program extraction, the timing metric,
the verifier, the benchmark and the PIE loader."""

from __future__ import annotations

import json

import pytest

from selfrefine.core.errors import DraftParseError, FeedbackParseError, InputError
from selfrefine.sandbox.timing import compare_programs, significance
from selfrefine.tasks.codeopt import CodeOpt, extract_program, outputs_match, verdicts
from selfrefine.tasks.codeopt_bench import (
    TestCase,
    load_benchmark,
    load_pie,
)

SLOW = "n = int(input())\ntotal = 0\nfor i in range(n):\n    total += i\nprint(total)"
FAST = "n = int(input())\nprint(n * (n - 1) // 2)"


@pytest.fixture(scope="module")
def task() -> CodeOpt:
    return CodeOpt(repeats=5)


# --- prompts ----------------------------------------------------------------------------------


def test_all_templates_render_with_the_program(task):
    for role in ("generate", "feedback", "refine", "refine_nofeedback"):
        text = task.render(role, SLOW, draft=FAST, feedback="# this code is slow", history=[])
        assert (SLOW if role == "generate" else FAST) in text
    assert task.render("generate", SLOW).endswith("# optimized version:")
    assert task.render("feedback", SLOW, draft=FAST).endswith("# why is it slow?")


def test_refine_prompt_grows_byte_for_byte(task):
    fb0, fb1 = "# loop is O(n)\n# this code is slow", "# still a loop\n# this code is slow"
    first = task.render("refine", SLOW, draft=SLOW, feedback=fb0, history=[])
    second = task.render("refine", SLOW, draft=FAST, feedback=fb1, history=[{"draft": SLOW, "feedback": fb0}])
    assert first.endswith("# optimized version:") and second.startswith(first)


def test_generic_feedback_and_defaults(task):
    assert "faster" in task.declared.defaults.generic_feedback
    assert task.declared.defaults.temperature == {"generate": 0.0, "feedback": 0.0, "refine": 0.0}
    assert task.declared.stop_contains == ["not slow"]


# --- feedback -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, verdict, stop",
    [
        ("# the loop is quadratic\n# this code is slow", "slow", False),
        ("# it uses a set\n# this code is not slow", "not slow", True),
        ("# this code is slow? no.\n# this code is not slow", "not slow", True),
        ("# this code is not slow... actually\n# it is slow", "slow", False),
        ("The program isn't slow.", "not slow", True),
        ("The code is inefficient: use a dict.", "slow", False),
        ("It's already fast.", "not slow", True),
        ("# input() per line is slow for big inputs; use sys.stdin", "", False),
    ],
)
def test_verdicts_last_one_wins(task, text, verdict, stop):
    fb = task.parse_feedback(text, input=SLOW, draft=SLOW)
    assert fb.fields["verdict"] == verdict and fb.done is stop
    assert task.says_done(text) is stop


def test_feedback_reasons_exclude_the_verdict(task):
    fb = task.parse_feedback("# x in list is O(n)\n# use a set\n# this code is slow", input=SLOW, draft=SLOW)
    assert fb.fields["reasons"] == ["x in list is O(n)", "use a set"]


@pytest.mark.parametrize(
    "raw, message", [("  \n", "empty"), ("n = int(input())\nfor i in range(n):\n    pass", "program")]
)
def test_malformed_feedback(task, raw, message):
    with pytest.raises(FeedbackParseError, match=message):
        task.parse_feedback(raw, input=SLOW, draft=SLOW)


def test_verdicts_helper():
    assert verdicts("it is slow. The code is not slow.") == ["slow", "not slow"]
    assert verdicts("nothing to say") == []


# --- drafts and inputs --------------------------------------------------------------------------


def test_extract_program_from_fences_prose_and_truncation():
    assert extract_program(f"Here:\n```python\n{FAST}\n```\nThis is faster.") == FAST
    assert extract_program(f"{FAST}\nThis version avoids the loop.") == FAST
    assert extract_program(f"{FAST}\nfor i in range(") == FAST  # cut by max_tokens
    with pytest.raises(DraftParseError):
        extract_program("```python\n```\n  ")


def test_prepare_input_compacts_blank_lines_but_not_strings(task):
    assert task.prepare_input("a = 1\n\n\n\nprint(a)\n") == "a = 1\nprint(a)"
    keep = 's = """x\n\ny"""\nprint(s)'
    assert task.prepare_input(keep) == keep
    assert task.prepare_input(f"```python\n{FAST}\n```") == FAST
    with pytest.raises(InputError, match="does not parse"):
        task.prepare_input("def f(:\n  pass")


def test_outputs_match_like_a_judge():
    assert outputs_match("1 2\n3\n", "1 2 \n3")
    assert outputs_match("0.3333333", "0.33333331")
    assert not outputs_match("1 2", "1 3") and not outputs_match("1", "1 1")


# --- metric and timing ---------------------------------------------------------------------------


def test_significance_known_answers():
    old, new = [1.0, 1.1, 1.2, 1.05, 1.15], [0.5, 0.55, 0.6, 0.52, 0.58]
    assert significance(old, new) == pytest.approx(1 / 252)  # complete separation, n = 5
    assert significance(old, old) > 0.5
    assert significance([1.0] * 4, [1.0 / 1.05] * 4) == 1.0  # all tied: no evidence


def test_compare_programs_needs_enough_repeats():
    with pytest.raises(ValueError, match="repeats"):
        compare_programs(SLOW, FAST, ["5\n"], repeats=3)


@pytest.fixture(scope="module")
def stairs():
    (stairs,) = load_benchmark(["stairs_recursion"])
    return stairs


def test_metric_slow_to_fast_is_one(task, stairs):
    ev = task.check_program(stairs.slow, stairs.fast, stairs.tests[:1])
    assert ev.correct and ev.faster and ev.speedup > 5 and ev.p_value < 0.05
    assert ev.score == 1.0 and len(ev.timing.per_input) == 1


def test_metric_slow_to_slow_is_zero(task, stairs):
    assert task.metric(stairs.slow, stairs.slow, stairs.tests[:1]) == 0.0


def test_metric_wrong_output_is_zero_without_timing(task, stairs):
    wrong = stairs.fast.replace("print(w[n])", "print(w[n] + 1)")
    ev = task.check_program(stairs.slow, wrong, stairs.tests)
    assert not ev.correct and ev.timing is None and ev.score == 0.0
    assert task.metric(stairs.slow, "```python\n```", stairs.tests) == 0.0  # nothing to run


def test_metric_compares_with_the_original_when_no_expected_output(task):
    assert task.metric(SLOW, FAST, ["300000\n"]) == 1.0
    assert task.metric(SLOW, FAST.replace("- 1", "+ 1"), ["300000\n"]) == 0.0
    assert task.metric(SLOW, FAST) is None  # no tests known for this program


def test_metric_looks_up_benchmark_tests(task):
    (pascal,) = load_benchmark(["pascal_recursion"])
    assert task.known_tests(task.prepare_input(pascal.slow)) == pascal.tests
    assert CodeOpt(use_benchmark=False).known_tests(pascal.slow) == []


# --- verifier ------------------------------------------------------------------------------------


def test_verifier_reports_failing_inputs():
    task = CodeOpt(tests={SLOW: [{"input": "4\n", "output": "6"}, "10\n"]}, repeats=4)
    wrong = task.verify(SLOW, "n = int(input())\nprint(n * n)")
    assert wrong.passed is False and "Wrong on 2 of 2" in wrong.text and "expected '6' but got '16'" in wrong.text
    crash = task.verify(SLOW, "print(int(input()) // 0)")
    assert crash.passed is False and "ZeroDivisionError" in crash.text
    syntax = task.verify(SLOW, "print(")
    assert syntax.passed is False and "SyntaxError" in syntax.text


def test_verifier_without_tests_smoke_tests_on_empty_input():
    task = CodeOpt(use_benchmark=False)
    same_failure = task.verify(SLOW, FAST)  # both raise EOFError on empty input: no finding
    assert same_failure.passed is None and "No test inputs" in same_failure.text
    broken = task.verify(SLOW, "print(undefined_name)")
    assert broken.passed is False and "NameError" in broken.text


def test_verifier_passes_a_faster_correct_program(task, stairs):
    quick = CodeOpt(tests={stairs.slow: stairs.tests[:1]}, repeats=6)  # 4 runs flaked under heavy load
    check = quick.verify(stairs.slow, stairs.fast)
    assert check.passed is True and check.score > 1.05 and "speedup" in check.text


# --- benchmark and PIE loader -------------------------------------------------------------------


def test_benchmark_records_are_complete_and_deterministic():
    programs = load_benchmark()
    assert len(programs) >= 20 and len({p.id for p in programs}) == len(programs)
    for p in programs:
        assert p.slow != p.fast and p.description and p.pattern
        assert p.inputs() == p.inputs() and len(p.inputs()) == 2
    with pytest.raises(InputError, match="unknown"):
        load_benchmark(["nope"])


def test_benchmark_slow_and_fast_agree_on_first_input():
    from selfrefine.sandbox.process import run_python

    for p in load_benchmark():
        case = p.tests[0]
        slow = run_python(p.slow, stdin=case.stdin, timeout=20, max_output=1 << 22)
        assert slow.ok and outputs_match(case.expected, slow.stdout), p.id


PIE_ROWS = [
    {
        "problem_id": "p00001",
        "input": "n=int(input())\n\n\nprint(sum(range(n)))",
        "target": "n=int(input())\nprint(n*(n-1)//2)",
        "cpu_time_v0": 30,
    },
    {"problem_id": "p00002", "input": "print(input())", "target": "import sys\nprint(sys.stdin.readline().rstrip())"},
]


def test_load_pie_attaches_tests_by_problem_id(tmp_path):
    path = tmp_path / "pie.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in PIE_ROWS) + "\n\n", encoding="utf-8")
    rows = load_pie(path, tests={"p00001": ["5\n", {"stdin": "7\n", "expected": "21"}]})
    assert [r.problem_id for r in rows] == ["p00001", "p00002"]
    assert rows[0].reference == [TestCase("5\n"), TestCase("7\n", "21")]
    assert rows[1].reference is None and rows[0].meta["cpu_time_v0"] == 30
    assert CodeOpt().metric(rows[1].input, rows[1].target, rows[1].reference) is None
    path.write_text('{"input": "x"}\n', encoding="utf-8")
    with pytest.raises(InputError, match="not a PIE row"):
        load_pie(path)


def test_extract_program_is_one_rule_for_program_tasks():
    # readability and codeopt share it: code before a lone closing fence wins, a word does not
    from selfrefine.tasks.readability import extract_program as readability_extract

    assert readability_extract is extract_program
    assert extract_program("count = 1\nprint(count)\n```\nmore") == "count = 1\nprint(count)"
    assert extract_program("Solution\n```python\nx = 1\n```") == "x = 1"
