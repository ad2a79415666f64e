"""`compare` shows which settings differ between two runs, and `report` warns when it puts
runs of different tasks (unlike metrics) on one axis (issue 30, item 17). Through the CLI,
on small fake-model runs."""

from __future__ import annotations

import json
import re
from pathlib import Path

from click.testing import CliRunner
from conftest import FB_DONE, FB_MISSING

from selfrefine.cli.commands import cli

GSM8K_PROGRAM = "def solution():\n    return 12"


def _eval(tmp_path: Path, name: str, task: str, data: str, replies: dict, *flags: str) -> Path:
    model = tmp_path / f"{name}.json"
    model.write_text(json.dumps(replies))
    rows = tmp_path / (f"{name}.jsonl" if data.startswith("{") else f"{name}.txt")
    rows.write_text(data)
    out = tmp_path / name
    args = ["eval", task, "--data", str(rows), "--out", str(out), "-m", f"fake:{model}", "--no-cache", *flags]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    return out


def _commongen(tmp_path: Path, name: str, *flags: str) -> Path:
    data = "dog, frisbee\ncat, hat\n"
    replies = {"generate": ["A dog runs."], "feedback": [FB_MISSING], "refine": ["A dog catches a frisbee."]}
    return _eval(tmp_path, name, "commongen", data, {**replies, "default": FB_DONE}, *flags)


def _gsm8k(tmp_path: Path) -> Path:
    data = json.dumps({"input": "A pen costs 3 dollars. How much do 4 pens cost?", "target": 12}) + "\n"
    return _eval(tmp_path, "gsm", "gsm8k", data, {"default": GSM8K_PROGRAM}, "--max-iters", "0")


def test_compare_shows_the_settings_that_differ(tmp_path):
    a = _commongen(tmp_path, "one", "--max-iters", "1")
    b = _commongen(tmp_path, "two", "--max-iters", "2", "--select", "best")
    out = CliRunner().invoke(cli, ["compare", str(a), str(b)])
    assert out.exit_code == 0, out.output
    assert re.search(r"setting: max_iterations\s*\|\s*1\s*\|\s*2\s*\|", out.output), out.output
    assert re.search(r"setting: select\s*\|\s*last\s*\|\s*best\s*\|", out.output), out.output
    assert "setting: seed" not in out.output  # the same in both: not shown


def test_compare_of_runs_with_the_same_settings_says_so(tmp_path):
    a = _commongen(tmp_path, "one", "--max-iters", "1")
    b = _commongen(tmp_path, "two", "--max-iters", "1")
    out = CliRunner().invoke(cli, ["compare", str(a), str(b)])
    assert out.exit_code == 0, out.output
    assert re.search(r"settings\s*\|\s*the same\s*\|\s*the same\s*\|", out.output), out.output
    assert "setting: " not in out.output


def test_report_of_different_tasks_warns_that_their_metrics_differ(tmp_path):
    a, b = _commongen(tmp_path, "cg", "--max-iters", "1"), _gsm8k(tmp_path)
    out = tmp_path / "report"
    res = CliRunner().invoke(cli, ["report", str(a), str(b), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "Warning: these runs are of 2 different tasks" in res.stderr
    assert "commongen: concept coverage (code)" in res.stderr
    assert "Warning: these runs are of 2 different tasks" in (out / "report.md").read_text()
    assert "Warning: these runs are of 2 different tasks" in (out / "report.html").read_text()


def test_report_of_one_task_gives_no_warning(tmp_path):
    a = _commongen(tmp_path, "one", "--max-iters", "1")
    b = _commongen(tmp_path, "two", "--max-iters", "2")
    out = tmp_path / "report"
    res = CliRunner().invoke(cli, ["report", str(a), str(b), "--out", str(out)])
    assert res.exit_code == 0, res.output
    # no mixed-task warning (these tiny runs get the small-sample one: tests/evaluation/test_report_legend.py)
    assert "different tasks" not in res.stderr and "different tasks" not in (out / "report.md").read_text()
