"""Issue 30 item 5: a task file's templates load and render within bounded time and memory.

Each attack runs in a process of its own with its address space capped at 2 GB and a hard
timeout, so that this test cannot hang or take the machine's memory even against code
without the bounds: the process times the load and the render, and the test asks for a
one-line TaskError naming the file and the template within 2 s. The processes are forks of
one child that imported selfrefine once for the module (an interpreter start and the
package's imports per attack were most of this file's time)."""

from __future__ import annotations

import json
import select
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from selfrefine import FakeBackend, SelfRefine, load_task
from selfrefine.task.templates import Template

FORKER = textwrap.dedent(
    """
    import json, os, resource, select, signal, sys, time
    from selfrefine import TaskError, load_task


    def attack(path):
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
        start, stage, out = time.monotonic(), "load", {}
        try:
            task = load_task(path)
            out["load_seconds"] = time.monotonic() - start
            stage = "render"
            task.render("generate", "abab")
            out["rendered"] = True
        except TaskError as exc:
            out["error"] = str(exc)
        except BaseException as exc:
            out["escaped"] = f"{type(exc).__name__}: {exc}"[:300]
        out["stage"], out["seconds"] = stage, time.monotonic() - start
        return out


    warm = os.path.join(sys.argv[1], "warm.yaml")  # the imports a load and a render make, made once
    with open(warm, "w") as f:
        f.write('{"name": "warm", "generate": "g {{ input }}", "feedback": "f {{ draft }}", "refine": "r"}')
    load_task(warm).render("generate", "x")
    print("ready", flush=True)

    for line in sys.stdin:  # one task file per line: each attacked in a fork, killed after 15 s
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the fork: never back into this loop
            code = 1
            try:
                os.close(r)
                os.write(w, json.dumps(attack(line.strip())).encode())
                code = 0
            finally:
                os._exit(code)
        os.close(w)
        data, deadline = b"", time.monotonic() + 15
        while select.select([r], [], [], max(0.0, deadline - time.monotonic()))[0]:
            chunk = os.read(r, 65536)
            if not chunk:
                break
            data += chunk
        else:
            os.kill(pid, signal.SIGKILL)
            data = b'{"hung": true}'
        status = os.waitpid(pid, 0)[1]
        os.close(r)
        print(data.decode() or json.dumps({"died": status}), flush=True)
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


@pytest.fixture(scope="module")
def forker(tmp_path_factory) -> Iterator[subprocess.Popen]:
    folder = str(tmp_path_factory.mktemp("forker"))
    cmd = [sys.executable, "-c", FORKER, folder]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "ready\n", "the forking child did not start"
    yield proc
    proc.stdin.close()
    proc.wait(timeout=30)


@pytest.fixture
def attempt(forker, tmp_path) -> Callable[[str], dict]:
    """Load and render a task file whose generate template is ``generate``, in a capped fork."""

    def run(generate: str) -> dict:
        path = _task_file(tmp_path, generate)
        forker.stdin.write(f"{path}\n")
        forker.stdin.flush()
        assert select.select([forker.stdout], [], [], 60)[0], "the forking child did not answer in 60 s"
        result = json.loads(forker.stdout.readline())
        assert "hung" not in result, f"loading and rendering {generate!r} hung (killed after 15 s)"
        assert "died" not in result, f"the process died: wait status {result['died']}"
        return {**result, "path": str(path)}

    return run


def _assert_bounded(result: dict) -> None:
    assert "escaped" not in result, f"not a TaskError: {result['escaped']}"
    assert "rendered" not in result, "rendered without an error"
    assert result["seconds"] < 2.0, f"took {result['seconds']:.1f} s"
    message = result["error"]
    assert "\n" not in message and result["path"] in message and "attack/generate" in message, message


@pytest.mark.timeout(120)
@pytest.mark.parametrize("source", LOAD_ATTACKS.values(), ids=LOAD_ATTACKS.keys())
def test_constant_expressions_are_not_evaluated_when_a_task_file_loads(attempt, source):
    result = attempt(source)
    assert result.get("load_seconds", 99) < 1.0, result
    assert result["stage"] == "render"
    _assert_bounded(result)
    assert "line 2" in result["error"]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("source", RENDER_ATTACKS.values(), ids=RENDER_ATTACKS.keys())
def test_renders_that_would_hang_or_take_gigabytes_stop_with_one_line(attempt, source):
    result = attempt(source)
    _assert_bounded(result)
    assert "is over a bound" in result["error"]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("source", ERROR_ATTACKS.values(), ids=ERROR_ATTACKS.keys())
def test_python_errors_of_a_render_are_one_line_task_errors(attempt, source):
    _assert_bounded(attempt(source))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["include", "import", "extends"])
def test_templates_naming_other_templates_are_refused_at_load(attempt, kind):
    source = {"include": "{% include 'x' %}", "import": "{% import 'x' as m %}", "extends": "{% extends 'x' %}"}[kind]
    result = attempt(source)
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
