"""Issue 30 item 5: a task file's templates load and render within bounded time and memory.

Each attack runs in a child process with its address space capped at 2 GB and a hard
timeout, so that this test cannot hang or take the machine's memory even against code
without the bounds: the child times the load and the render, and the test asks for a
one-line TaskError naming the file and the template within 2 s."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from selfrefine import FakeBackend, SelfRefine, load_task
from selfrefine.engine.templates import Template

CHILD = textwrap.dedent(
    """
    import json, resource, sys, time
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
    from selfrefine import TaskError, load_task
    start, stage, out = time.monotonic(), "load", {}
    try:
        task = load_task(sys.argv[1])
        out["load_seconds"] = time.monotonic() - start
        stage = "render"
        task.render("generate", "abab")
        out["rendered"] = True
    except TaskError as exc:
        out["error"] = str(exc)
    except BaseException as exc:
        out["escaped"] = f"{type(exc).__name__}: {exc}"[:300]
    out["stage"], out["seconds"] = stage, time.monotonic() - start
    print(json.dumps(out))
    """
)

LOAD_ATTACKS = {  # constant folding evaluated these while the file loaded
    "power": "{{ (9 ** (9 ** 9)) % 7 }}",
    "repeat": "{{ 'a' * 2 * 10**9 }}",
    "constant_center": "{{ 'a'|center(3000000000) }}",
}
RENDER_ATTACKS = {
    "center": "{{ input|center(3000000000) }}",
    "center_method": "{{ input.center(3000000000) }}",
    "format_width": "{{ '{:>3000000000}'.format(input) }}",
    "percent_width": "{{ '%3000000000s' % input }}",
    "format_filter_width": "{{ '%*s'|format(3000000000, input) }}",
    "input_times_n": "{{ input * 1000000000 }}",
    "nested_loops": "{% for i in range(100000) %}{% for j in range(100000) %}{{ i }}{% endfor %}{% endfor %}",
    "nested_loops_in_set": (
        "{% set x %}{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}{% endset %}"
    ),
    "lipsum": "{{ lipsum(n=100000000) }}",
    "macro_doubling": ("{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(60) }}"),
    "string_doubling": (
        "{% set ns = namespace(a='ab') %}{% for i in range(64) %}{% set ns.a = ns.a ~ ns.a %}{% endfor %}{{ ns.a }}"
    ),
    "shared_lists": (
        "{% set ns = namespace(a=['x']) %}{% for i in range(64) %}{% set ns.a = [ns.a, ns.a] %}{% endfor %}{{ ns.a }}"
    ),
    "indent": "{{ ((input ~ '\\n') * 1000)|indent(1000000) }}",
    "replace": "{{ (input * 10000)|replace('', input * 100) }}",
    "join": "{{ range(100000)|join(input * 1000) }}",
    "slice": "{{ [1]|slice(1000000000)|list }}",
    "big_output": "{% for i in range(100000) %}{{ input * 10000 }}{% endfor %}",
}
ERROR_ATTACKS = {  # Python errors that escaped as tracebacks
    "overflow": "{{ 10.0 ** 400 }}",
    "index": "{{ '{1}'.format(input) }}",
    "recursion": "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}",
    "recursive_loop": "{% for x in [1] recursive %}{{ loop([1]) }}{% endfor %}",
    "zero_division": "{{ 1 // 0 }}",
}


def _task_file(tmp_path: Path, generate: str) -> Path:
    path = tmp_path / "attack.yaml"
    path.write_text(
        json.dumps({"name": "attack", "generate": "Topic:\n" + generate, "feedback": "f {{ draft }}", "refine": "r"})
    )
    return path


def _attempt(tmp_path: Path, generate: str) -> dict:
    path = _task_file(tmp_path, generate)
    try:
        done = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, timeout=15)
    except subprocess.TimeoutExpired:
        pytest.fail(f"loading and rendering {generate!r} hung (killed after 15 s)")
    lines = done.stdout.strip().splitlines()
    assert lines, f"the child died: {done.returncode} {done.stderr[-500:]}"
    return {**json.loads(lines[-1]), "path": str(path)}


def _assert_bounded(result: dict) -> None:
    assert "escaped" not in result, f"not a TaskError: {result['escaped']}"
    assert "rendered" not in result, "rendered without an error"
    assert result["seconds"] < 2.0, f"took {result['seconds']:.1f} s"
    message = result["error"]
    assert "\n" not in message and result["path"] in message and "attack/generate" in message, message


@pytest.mark.timeout(120)
@pytest.mark.parametrize("source", LOAD_ATTACKS.values(), ids=LOAD_ATTACKS.keys())
def test_constant_expressions_are_not_evaluated_when_a_task_file_loads(tmp_path, source):
    result = _attempt(tmp_path, source)
    assert result.get("load_seconds", 99) < 1.0, result
    assert result["stage"] == "render"
    _assert_bounded(result)
    assert "line 2" in result["error"]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("source", RENDER_ATTACKS.values(), ids=RENDER_ATTACKS.keys())
def test_renders_that_would_hang_or_take_gigabytes_stop_with_one_line(tmp_path, source):
    result = _attempt(tmp_path, source)
    _assert_bounded(result)
    assert "is over a bound" in result["error"]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("source", ERROR_ATTACKS.values(), ids=ERROR_ATTACKS.keys())
def test_python_errors_of_a_render_are_one_line_task_errors(tmp_path, source):
    _assert_bounded(_attempt(tmp_path, source))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["include", "import", "extends"])
def test_templates_naming_other_templates_are_refused_at_load(tmp_path, kind):
    source = {"include": "{% include 'x' %}", "import": "{% import 'x' as m %}", "extends": "{% extends 'x' %}"}[kind]
    result = _attempt(tmp_path, source)
    assert result["stage"] == "load" and f"{kind} is not allowed" in result["error"], result


@pytest.mark.timeout(60)
def test_modest_loops_macros_and_filters_still_render(tmp_path):
    source = (
        "{% macro item(i) %}<{{ i }}>{% endmacro %}"
        "{% for i in range(2000) %}{{ item(i) }}{% endfor %}|{{ 'ab'|center(8) }}|{{ '%5s' % 'x' }}"
        "|{{ '{:>4}'.format('y') }}|{{ input * 3 }}|{{ (input ~ '\\n')|indent(2, true) }}|{{ 2 ** 10 }}"
    )
    text = Template("t/generate", source).render({"input": "ab"})
    assert text.startswith("<0><1>") and "<1999>" in text
    assert text.endswith("|   ab   |    x|   y|ababab|  ab\n|1024")


@pytest.mark.timeout(60)
def test_a_bounded_task_file_still_runs_and_renders_its_prompt(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text(
        "name: ok\ngenerate: 'Write about {{ input }} ({{ input|length }} letters).'\n"
        "feedback: 'f {{ draft }}'\nrefine: 'r {% for h in history %}{{ h.draft }}{% endfor %}{{ draft }}'\n"
    )
    backend = FakeBackend({"generate": ["d"], "feedback": ["fine"], "refine": ["d2"]})
    SelfRefine(load_task(path), backend).run("rain")
    assert backend.prompts("generate")[0] == "Write about rain (4 letters)."
