"""`selfrefine eval codeopt --tests FILE`: PIE rows get test cases, so the metric can run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from selfrefine.cli.commands import cli
from selfrefine.evaluation.runstore import RunStore

SLOW = "n = int(input())\ns = 0\nfor i in range(n):\n    s += i\nprint(s)\n"
FAST = "n = int(input())\nprint(n * (n - 1) // 2)\n"
WRONG = "n = int(input())\nprint(n)\n"
N = 1_000_000
EXPECTED = str(N * (N - 1) // 2)


def pie_data(path: Path) -> Path:
    rows = [
        {"problem_id": "p00001", "input": SLOW, "target": FAST},
        {"problem_id": "p00002", "input": SLOW.replace("s = 0", "s = 0  # two"), "target": FAST},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def fake_model(path: Path) -> Path:
    """Draft 0 of the first example is the fast program, of the second a wrong one; the
    critic says "not slow", so each run stops after draft 0."""
    path.write_text(
        json.dumps(
            {
                "replies": {
                    "generate": [f"```python\n{FAST}```", f"```python\n{WRONG}```"],
                    "feedback": ["# this code is not slow"] * 2,
                }
            }
        )
    )
    return path


def invoke(tmp_path: Path, *extra: str, out: str = "run"):
    args = [
        "eval",
        "codeopt",
        "--data",
        str(pie_data(tmp_path / "pie.jsonl")),
        "--out",
        str(tmp_path / out),
        "-m",
        f"fake:{fake_model(tmp_path / 'm.json')}",
        "--no-cache",
        "--concurrency",
        "1",
        *extra,
    ]
    return CliRunner().invoke(cli, args)


def test_pie_rows_have_no_metric_without_tests(tmp_path):
    res = invoke(tmp_path)
    assert res.exit_code == 0, res.output
    assert [r.metrics for r in RunStore(tmp_path / "run").rows()] == [[None], [None]]


def test_tests_file_gives_the_metric_its_cases(tmp_path):
    tests = tmp_path / "tests.json"
    tests.write_text(
        json.dumps(
            {
                "p00001": [{"input": f"{N}\n", "output": f"{EXPECTED}\n"}],
                "p00002": [{"input": f"{N}\n", "output": f"{EXPECTED}\n"}],
            }
        )
    )
    res = invoke(tmp_path, "--tests", str(tests))
    assert res.exit_code == 0, res.output
    rows = RunStore(tmp_path / "run").rows()
    # the fast program is correct and faster; the wrong one prints N, not the expected sum
    assert [r.metrics for r in rows] == [[1.0], [0.0]]
    meta = RunStore(tmp_path / "run").meta()
    assert meta.tests == str(tests.resolve()) and meta.tests_sha256


def test_expected_outputs_of_the_tests_file_are_what_is_checked(tmp_path):
    tests = tmp_path / "tests.jsonl"  # JSONL form; the expected output here is deliberately wrong
    tests.write_text(
        json.dumps({"problem_id": "p00001", "tests": [{"input": f"{N}\n", "output": "42\n"}]})
        + "\n"
        + json.dumps({"problem_id": "p00002", "tests": [f"{N}\n"]})
        + "\n"
    )  # bare stdin
    res = invoke(tmp_path, "--tests", str(tests))
    assert res.exit_code == 0, res.output
    # p00001: the program is right but the file expects 42; p00002: expected = the original's output
    assert [r.metrics for r in RunStore(tmp_path / "run").rows()] == [[0.0], [0.0]]
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"p00001": [f"{N}\n"], "p00002": [f"{N}\n"]}))
    res = invoke(tmp_path, "--tests", str(other))  # other tests, other metric: another experiment
    assert res.exit_code == 2 and "holds a different run" in res.output and "tests.jsonl" in res.output


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("t.json", "{not json", "bad JSON"),
        ("t.json", "[1, 2]", "must hold a JSON object keyed by problem id"),
        (
            "t.json",
            json.dumps({"p00001": [], "p00002": ["1\n"]}),
            "problem 'p00001': the tests must be a non-empty list",
        ),
        (
            "t.json",
            json.dumps({"p00001": [{"output": "1"}], "p00002": ["1\n"]}),
            "problem 'p00001': a test case needs a string 'stdin' (or 'input')",
        ),
        (
            "t.jsonl",
            json.dumps({"id": "p00001"}) + "\n",
            't.jsonl: line 1: expected {"problem_id": ID, "tests": [...]}',
        ),
        ("t.json", json.dumps({"p00001": ["1\n"]}), "has no tests for problem id p00002 (example codeopt-1)"),
    ],
)
def test_bad_tests_file_is_a_clear_input_error(tmp_path, name, text, message):
    tests = tmp_path / name
    tests.write_text(text)
    res = invoke(tmp_path, "--tests", str(tests))
    assert res.exit_code == 2, res.output
    assert message in res.output and str(tests) in res.output
    assert not (tmp_path / "run").exists()  # refused before anything ran


def test_tests_are_refused_for_other_tasks_and_documented(tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"concepts": ["dog", "ball"]}) + "\n")
    tests = tmp_path / "t.json"
    tests.write_text("{}")
    res = CliRunner().invoke(
        cli,
        ["eval", "commongen", "--data", str(data), "--out", str(tmp_path / "r"), "-m", "fake", "--tests", str(tests)],
    )
    assert res.exit_code == 2 and "--tests gives test cases to codeopt's metric" in res.output
    help_text = " ".join(CliRunner().invoke(cli, ["eval", "--help"]).output.split())
    assert "--tests FILE" in help_text and '"problem_id": ID, "tests"' in help_text
