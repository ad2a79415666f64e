"""Eval and report tables show only the rounds that ran, and say why examples stopped
(issue 46, item 21): a run whose examples all stopped at draft 0 has no "after 2
refinements" row, and report.md counts the examples per stop reason."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from conftest import FB_DONE
from test_report import make_result, write_run

from selfrefine.cli.commands import cli
from selfrefine.core.records import StopReason
from selfrefine.evaluation.report import run_table, write_report
from selfrefine.evaluation.report_tables import STOP_MEANINGS
from selfrefine.evaluation.runner import ExampleRow
from selfrefine.evaluation.runstore import RunMeta


def _stopped_at_draft_0(root: Path) -> Path:
    """Three examples, a cap of 2 refinements, every example stopped by its first critique."""
    meta = RunMeta(name="early", task="gsm8k", data="d", models={"generate": "m"}, config={"max_iterations": 2})
    rows = [
        ExampleRow(id=str(i), metrics=[float(i % 2)], result=make_result("gsm8k", [f"d{i}"], [5], StopReason.FEEDBACK))
        for i in range(3)
    ]
    return write_run(root / "early", meta, rows)


def test_a_report_has_no_rounds_that_never_ran(tmp_path):
    run = _stopped_at_draft_0(tmp_path)
    r = run_table(run)
    assert len(r.by_iteration) == 1 and len(r.cost_by_iteration) == 1
    write_report([run], tmp_path / "rep")
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "| Run | y0 | Final |" in md and "| y1 |" not in md and "| y2 |" not in md
    assert "| early | 1 |" not in md  # no cost row for iteration 1


def test_report_md_counts_examples_per_stop_reason(tmp_path):
    meta = RunMeta(name="mixed", task="gsm8k", data="d", models={"generate": "m"}, config={"max_iterations": 1})
    rows = [
        ExampleRow(id="a", metrics=[0.0, 1.0], result=make_result("gsm8k", ["x", "y"], [1], StopReason.MAX_ITERATIONS)),
        ExampleRow(id="b", metrics=[1.0], result=make_result("gsm8k", ["z"], [5], StopReason.FEEDBACK)),
        ExampleRow(id="c", metrics=[1.0], result=make_result("gsm8k", ["w"], [5], StopReason.FEEDBACK)),
    ]
    write_report([write_run(tmp_path / "mixed", meta, rows)], tmp_path / "rep")
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "## Why examples stopped" in md
    assert f"| mixed | feedback | 2 | {STOP_MEANINGS['feedback']} |" in md
    assert f"| mixed | max_iterations | 1 | {STOP_MEANINGS['max_iterations']} |" in md
    assert "Why examples stopped" in (tmp_path / "rep" / "report.html").read_text()


def test_every_stop_reason_has_a_meaning():
    assert set(STOP_MEANINGS) == {reason.value for reason in StopReason}


def test_eval_table_shows_only_rounds_that_ran(tmp_path):
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps({"generate": ["A dog can catch a frisbee."] * 2, "feedback": [FB_DONE] * 2}))
    data = tmp_path / "two.txt"
    data.write_text("dog, frisbee, catch\ndog, frisbee\n")
    args = ["eval", "commongen", "--data", str(data), "--out", str(tmp_path / "run"), "-m", f"fake:{replies}"]
    ran = CliRunner().invoke(cli, [*args, "--no-cache", "--max-iters", "2"], terminal_width=200)
    assert ran.exit_code == 0, ran.output
    assert "one-step (iteration 0)" in ran.output and "feedback 2" in ran.output
    assert "after 1 refinement" not in ran.output and "after 2 refinements" not in ran.output  # none ran
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert len(summary["by_iteration"]) == 1
