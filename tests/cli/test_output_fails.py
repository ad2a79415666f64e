"""``selfrefine run`` ends by naming the checks its returned output still fails (issue 45,
item 5): the last line of the text view, and ``fails`` in ``--json``; a task file's checks
steer the run by default (item 6). On the fake model."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from selfrefine.cli import cli

TASK = """\
name: commit
generate: "Write a commit message for: {{ input }}"
feedback: "Message: {{ draft }}\\nList problems, or say NONE."
refine: "Message: {{ draft }}\\nProblems: {{ feedback }}\\nRewrite:"
stop:
  contains: NONE
max_iterations: 2
checks:
  - {type: forbidden_chars, chars: ","}
  - {type: regex, pattern: '\\A[A-Z]', says: start with a capital letter}
"""
BAD = "fixed the parser, which crashed"


def files(tmp_path: Path, refinement: str) -> tuple[str, str]:
    task = tmp_path / "commit.yaml"
    task.write_text(TASK)
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps({"generate": [BAD], "feedback": ["NONE"] * 3, "refine": [refinement] * 2}))
    return str(task), f"fake:{replies}"


def test_the_text_view_ends_with_the_checks_the_output_fails(tmp_path):
    task, model = files(tmp_path, BAD)  # the refiner hands its draft back: no change
    result = CliRunner().invoke(cli, ["run", task, "parser crash", "--model", model, "--no-live"])
    assert result.exit_code == 0, result.output
    # before: "feedback", the critic's NONE on draft 0; now each focused repair (the default of a
    # task file with checks) is rejected, having changed nothing, until the cap
    assert "stop reason: max_iterations" in result.output and "the repair changed nothing" in result.output
    last = result.output.strip().splitlines()[-1]
    assert last == "returned output fails: use no commas; start with a capital letter"
    assert "\\A" not in result.output  # the regex is never shown, in the feedback either


def test_json_carries_the_failed_checks_and_a_passing_output_says_so(tmp_path):
    task, model = files(tmp_path, "Fix the parser crash")
    result = CliRunner().invoke(cli, ["run", task, "parser crash", "--model", model, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["output"] == "Fix the parser crash" and data["fails"] == []
    assert data["iterations"][0]["feedback"]["done"] is False  # the critic's NONE did not end the run
    shown = CliRunner().invoke(cli, ["run", task, "parser crash", "--model", model, "--no-live"])
    assert shown.output.strip().splitlines()[-1] == "returned output passes every check"
    task_bad, model_bad = files(tmp_path, BAD)
    failed = json.loads(CliRunner().invoke(cli, ["run", task_bad, "x", "--model", model_bad, "--json"]).output)
    assert [f["says"] for f in failed["fails"]] == ["use no commas", "start with a capital letter"]
    assert failed["fails"][0]["finding"] == "remove the 1 comma"
