"""YAML task files: loading, running with the fake model, and validation errors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import ROOT

from selfrefine import (
    FakeBackend,
    SelfRefine,
    StopReason,
    Task,
    TaskError,
    TaskFileError,
    get_task,
    load_task,
)

EXAMPLES = ROOT / "examples"

GOOD = """
name: haiku
description: a haiku about a topic
generate: "Write a haiku about {{ input }}."
feedback: "Critique: {{ draft }}"
refine: |
  {% for h in history %}OLD[{{ h.draft }}|{{ h.feedback }}]
  {% endfor %}CUR[{{ draft }}|{{ feedback }}] about {{ input }}
score: 'Score:\\s*(\\d+)'
stop:
  contains: "perfect"
  score_at_least: 9
max_iterations: 2
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "task.yaml"
    path.write_text(text)
    return path


def test_yaml_task_runs_with_its_stop_rules(tmp_path):
    task = load_task(write(tmp_path, GOOD))
    assert task.name == "haiku" and task.declared.defaults.max_iterations == 2
    backend = FakeBackend({"generate": ["h0"], "feedback": ["meh Score: 4", "Score: 9"], "refine": ["h1"]})
    result = SelfRefine(task, backend).run("rain")
    assert result.stop_reason is StopReason.SCORE and result.output == "h1"
    assert "CUR[h0|meh Score: 4] about rain" in backend.prompts("refine")[0]


def test_yaml_stop_contains(tmp_path):
    task = load_task(write(tmp_path, GOOD))
    backend = FakeBackend({"generate": ["h0"], "feedback": ["Perfect! Score: 5"]})
    assert SelfRefine(task, backend).run("rain").stop_reason is StopReason.FEEDBACK


def test_yaml_max_iterations_is_the_default_cap(tmp_path):
    task = load_task(write(tmp_path, GOOD))
    backend = FakeBackend({"generate": ["h0"], "refine": ["h1", "h2"]}, default="Score: 1")
    result = SelfRefine(task, backend).run("rain")
    assert result.stop_reason is StopReason.MAX_ITERATIONS and len(result.iterations) == 3


def test_get_task_accepts_a_path(tmp_path):
    assert get_task(str(write(tmp_path, GOOD))).name == "haiku"


def test_shipped_example_task_files_load():
    files = sorted(EXAMPLES.glob("*.yaml"))
    assert files, "examples/*.yaml should exist"
    for path in files:
        assert isinstance(load_task(path), Task)


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda t: t.replace("refine: |", "refined: |"), "missing key 'refine'"),
        (lambda t: t + "\ncolour: blue\n", "unknown key 'colour'"),
        (
            lambda t: t.replace("Critique: {{ draft }}", "Critique: {{ draft }"),
            "'haiku/feedback' has a syntax error on line 1",
        ),
        (lambda t: t.replace("Critique: {{ draft }}", "Critique: {{ drafts }}"), "unknown variable(s) drafts"),
        (lambda t: t.replace("'Score:\\s*(\\d+)'", "'Score: (\\d+'"), "score regex"),
        (lambda t: t.replace("'Score:\\s*(\\d+)'", "'Score: \\d+'"), "needs a group"),
        (lambda t: t.replace("max_iterations: 2", "max_iterations: -1"), "max_iterations"),
        (lambda t: t.replace("score_at_least: 9", "score_at_least: high"), "stop.score_at_least"),
        (lambda t: "- just\n- a list\n", "must be a YAML mapping"),
        (lambda t: "name: [unclosed\n", "not valid YAML (line"),
    ],
)
def test_task_file_errors_name_the_problem(tmp_path, edit, message):
    path = write(tmp_path, edit(GOOD))
    with pytest.raises(TaskFileError, match=re.escape(message)) as info:
        load_task(path)
    assert str(path) in str(info.value)


def test_missing_and_directory_task_files(tmp_path):
    with pytest.raises(TaskFileError, match="not found"):
        load_task(tmp_path / "nope.yaml")
    with pytest.raises(TaskFileError, match="directory"):
        load_task(tmp_path)


def test_python_task_api_validates_like_yaml():
    with pytest.raises(TaskError, match="no 'refine' template"):
        Task("t", generate="g", feedback="f")
    with pytest.raises(TaskError, match="unknown variable"):
        Task("t", generate="{{ nothing }}", feedback="f", refine="r")


def test_templates_render_feedback_as_plain_text(tmp_path):
    task = load_task(write(tmp_path, GOOD))
    text = task.render("refine", "rain", draft="d", feedback="fb", history=[{"draft": "d0", "feedback": "f0"}])
    assert "OLD[d0|f0]" in text and "CUR[d|fb]" in text


def test_yaml_history_and_select_defaults(tmp_path):
    task = load_task(write(tmp_path, GOOD + "history: none\nselect: best\n"))
    backend = FakeBackend(
        {"generate": ["h0"], "feedback": ["Score: 5", "Score: 3", "Score: 1"], "refine": ["h1", "h2"]}
    )
    result = SelfRefine(task, backend).run("rain")
    assert result.config["history"] == "none" and result.output == "h0"
    with pytest.raises(TaskFileError, match="history"):
        load_task(write(tmp_path, GOOD + "history: most\n"))


CHECKED = """
name: blurb
generate: "Describe {{ input }} for a shop page in under 12 words."
feedback: "Critique: {{ draft }}"
refine: "Better: {{ draft }}. Fix: {{ feedback }}"
derive_checks: true
checks:
  - {type: count, unit: words, relation: at most, n: 11}
  - {type: forbidden_chars, chars: ","}
"""


def test_a_task_file_with_checks_is_measured_by_them_and_can_derive_more(tmp_path):
    # issue 38: its checks are a list in the instructions vocabulary, its metric is the share
    # of them passed (so eval reports draft 0 against the returned draft), and derive_checks
    # turns the instructions its generate prompt states into more checks of the run
    from conftest import eval_into

    from selfrefine.evaluation.datasets import Example

    task = load_task(write(tmp_path, CHECKED))
    assert task.metric("mug", "A white mug.") == 1.0
    assert task.metric("mug", "A white, plain, very large mug that holds all of your morning coffee.") == 0.0
    under = '{"checks": [{"type": "count", "unit": "words", "relation": "at most", "n": 12}]}'
    backend = FakeBackend(
        {"checks": [under], "generate": ["A white, plain mug."], "feedback": ["Drop the commas."],
         "refine": ["A plain white mug."]},
    )  # fmt: skip
    engine = SelfRefine(task, backend, max_iterations=1)
    summary, rows = eval_into(tmp_path / "run", engine, [Example(id="mug", input="a mug")])
    assert summary.by_iteration == [0.5, 1.0] and summary.final == 1.0  # draft 0 against the returned
    assert [c.source for c in rows[0].result.checks] == ["derived"]
    # code read "in under 12 words" from the generate prompt, which states nothing else: no model call
    assert rows[0].result.checks[0].check["n"] == 11 and not backend.prompts("feedback", purpose="checks")
