"""The readability task: prompts, parsing, fixed rounds, static-analysis metric (the real model: test_default_model.py)."""

from __future__ import annotations

import pytest

from selfrefine import FakeBackend, FeedbackParseError, SelfRefine, StopReason
from selfrefine.core.errors import DraftParseError
from selfrefine.tasks.readability import (
    Readability,
    bound_names,
    extract_program,
    is_meaningful,
    readability_stats,
)

UNREADABLE = "n=int(input())\na=list(map(int,input().split()))\nprint(sum(a)//n)"
# 10 code lines, 2 comment lines (one whole-line, one trailing), 1 function, a docstring
TEN_LINES = '''\
def average(values):
    """Mean of the values."""
    total = 0
    # add them up
    for value in values:
        total += value
    return total / len(values)


count = int(input())  # how many
numbers = list(map(int, input().split()))
print(average(numbers))
print("done")
'''


@pytest.fixture
def task() -> Readability:
    return Readability()


# --- prompts ------------------------------------------------------------------------------


def test_prompts_render(task):
    prompt = task.render("generate", UNREADABLE)
    assert f"```python\n{UNREADABLE}\n```" in prompt and prompt.endswith("Readable program:")
    fb = task.render("feedback", UNREADABLE, draft="x = 1")
    assert "x = 1" in fb and fb.endswith("Suggestion:")
    assert "{{" not in task.declared.templates["refine_nofeedback"].render(
        {"input": "p", "draft": "d", "feedback": "", "history": [], "iteration": 1}
    )


def test_refine_prompt_extends_the_previous_one_byte_for_byte(task):
    cue = "Improved program:"
    first = task.render("refine", UNREADABLE, draft="x=1", feedback="Rename x.", history=[], iteration=0)
    second = task.render(
        "refine",
        UNREADABLE,
        draft="one=1",
        feedback="Add a comment.",
        history=[{"draft": "x=1", "feedback": "Rename x."}],
        iteration=1,
    )
    assert first.endswith(cue) and second.endswith(cue)
    assert second.startswith(first)


def test_fewshot_block_is_short(task):
    # the 135M model prefills ~110 tokens/s: keep each template under ~400 tokens (~4 chars each)
    for role, template in task.declared.templates.items():
        assert len(template.source) < 1600, role


# --- drafts and feedback ------------------------------------------------------------------


def test_parse_draft_fenced_plain_and_cut_at_closing_fence(task):
    assert task.parse_draft("Here:\n```python\nx = 1\n```\nDone.") == "x = 1"
    assert task.parse_draft("count = 1\nprint(count)\n```\nmore") == "count = 1\nprint(count)"
    assert task.parse_draft("```py\nx = 2") == "x = 2"  # unclosed fence
    with pytest.raises(DraftParseError):
        task.parse_draft("```\n```")


def test_feedback_takes_one_suggestion(task):
    fb = task.parse_feedback(
        " Suggestion: Rename n and a to count and values.\n2. Add comments.", input=UNREADABLE, draft="x"
    )
    assert fb.fields["suggestion"] == "Rename n and a to count and values."
    assert fb.fields["aspect"] == "naming" and fb.done is None and fb.total is None
    fb = task.parse_feedback("- Move the loop into a helper function.", input="", draft="x")
    assert fb.fields["aspect"] == "functions"


@pytest.mark.parametrize("raw, message", [("", "empty"), ("  \n ", "empty"), ("```python\nx=1\n```", "not a sentence")])
def test_malformed_feedback_is_retryable(task, raw, message):
    with pytest.raises(FeedbackParseError, match=message):
        task.parse_feedback(raw, input=UNREADABLE, draft="x")


# --- stop rule ----------------------------------------------------------------------------


def test_fixed_rounds_end_at_max_iterations(task):
    assert task.declared.defaults.max_iterations == 5 and task.declared.defaults.temperature["generate"] == 0.0
    backend = FakeBackend(
        {
            "generate": ["```python\nx = 1\n```"],
            "feedback": ["Rename x to value."] * 3,
            "refine": ["value = 1\n```", "value = 1  # one\n```"],
        }
    )
    result = SelfRefine(task, backend, max_iterations=2, retry_base_delay=0.0).run(UNREADABLE)
    assert result.stop_reason is StopReason.MAX_ITERATIONS
    assert result.drafts == ["x = 1", "value = 1", "value = 1  # one"]
    assert result.metric == 1.0  # "value" is meaningful; code, not the critic, decides


# --- metric -------------------------------------------------------------------------------


def test_comments_per_line_known_answer():
    stats = readability_stats(TEN_LINES)
    assert (stats.comment_lines, stats.code_lines) == (2, 10)
    assert stats.comments_per_line == pytest.approx(0.2)
    assert stats.functions == 1
    assert stats.names == ["average", "values", "total", "value", "count", "numbers"]
    assert stats.meaningful_share == 1.0 and stats.poor_names == []


def test_meaningful_share_known_answer():
    stats = readability_stats(UNREADABLE)  # n, a
    assert stats.meaningful_share == 0.0 and stats.poor_names == ["n", "a"]
    code = "for i in range(3):\n    tmp = i\nresult = [k for k in range(2)]\nvar1 = 0\n"
    stats = readability_stats(code)  # i, tmp, result, k, var1 → 3 of 5
    assert stats.meaningful_share == pytest.approx(0.6)
    assert stats.names == ["i", "tmp", "result", "k", "var1"]
    assert stats.poor_names == ["tmp", "var1"]


def test_functions_count_defs_not_lambdas():
    code = "f = lambda x: x\ndef g(y):\n    return y\nasync def h():\n    pass\n"
    assert readability_stats(code).functions == 2


@pytest.mark.parametrize(
    "name, ok",
    [
        ("i", True),
        ("id", True),
        ("n", False),
        ("dp", False),
        ("count", True),
        ("tmp", False),
        ("var1", False),
        ("a2", False),
        ("row_count", True),
        ("_private", True),
        ("ans", False),
        ("foo", False),
    ],
)
def test_is_meaningful_rule(name, ok):
    assert is_meaningful(name) is ok


def test_bound_names_skip_builtins_and_underscore():
    import ast

    code = "import numpy as np\nfor _ in range(2):\n    print(len([]))\ntry:\n    pass\nexcept E as err:\n    pass\n"
    tree = ast.parse(code)
    assert bound_names(tree) == ["np", "err"]


def test_no_names_is_vacuously_meaningful():
    assert readability_stats("print(input())").meaningful_share == 1.0


def test_syntax_error_scores_zero_and_verifier_reports_it(task):
    assert task.metric(UNREADABLE, "def f(:\n  pass") == 0.0
    check = task.verify(UNREADABLE, "def f(:\n  pass")
    assert check.text.startswith("Syntax error: line 1") and check.score == 0.0 and check.passed is None


def test_verifier_reports_three_numbers_and_worst_names(task):
    check = task.verify(UNREADABLE, UNREADABLE)
    assert "Syntax: OK" in check.text and "Comments per line: 0.00" in check.text
    assert "Functions: 0" in check.text and "unclear names: n, a" in check.text
    assert check.passed is None and check.score == 0.0


def test_extract_program_prefers_first_nonempty_fence():
    assert extract_program("```\n\n```\n```python\ny = 2\n```") == "y = 2"
