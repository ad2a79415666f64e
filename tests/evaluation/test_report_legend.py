"""Statistics on tiny runs (issue 39, item 18): ``report`` and ``compare`` warn when an
interval rests on a handful of examples, and say what y0/y1, Best-selected and Cumulative
(``-`` against ``0.000``) mean."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner
from test_report import make_result, make_runs, write_run

from selfrefine.cli.report import compare_command, report_command
from selfrefine.core.records import StopReason
from selfrefine.evaluation.report import compare_table
from selfrefine.evaluation.report_tables import SMALL_N
from selfrefine.evaluation.runner import ExampleRow
from selfrefine.evaluation.runstore import RunMeta

WARNING = "Warning: too few examples for the intervals to mean much"


def _wide_run(folder: Path, n: int) -> Path:
    """A commongen run of n examples, each 0.5 → 1.0."""
    meta = RunMeta(name=folder.name, task="commongen", data="d", models={"generate": "m"}, config={"max_iterations": 1})
    rows = [
        ExampleRow(
            id=str(i),
            metrics=[0.5, 1.0],
            result=make_result("commongen", ["a", "a b"], [1, None], StopReason.MAX_ITERATIONS),
        )  # fmt: skip
        for i in range(n)
    ]
    return write_run(folder, meta, rows)


def test_a_report_on_three_examples_warns_about_its_interval(tmp_path):
    # was: "Δ +0.333 [-0.333, +1.000]" on n = 3 without a word
    a, b = make_runs(tmp_path)
    out = tmp_path / "report"
    res = CliRunner().invoke(report_command, [str(a), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert f"{WARNING}: refine (n = 3)" in res.stderr
    md = (out / "report.md").read_text()
    assert f"{WARNING}: refine (n = 3)" in md and WARNING in (out / "report.html").read_text()
    text = compare_table(a, b)
    assert WARNING in text and "refine (n = 3), nofeedback (n = 3)" in " ".join(text.split())


def test_a_report_on_enough_examples_does_not(tmp_path):
    run = _wide_run(tmp_path / "wide", SMALL_N)
    out = tmp_path / "report"
    res = CliRunner().invoke(report_command, [str(run), "--out", str(out)])
    assert res.exit_code == 0 and WARNING not in res.stderr and WARNING not in (out / "report.md").read_text()
    assert "Warning" not in compare_table(run, _wide_run(tmp_path / "wide2", SMALL_N))


def test_the_report_says_how_to_read_its_columns(tmp_path):
    # was: y0, y1, Best-selected and Cumulative ("-" here, "0.000" there) unexplained
    a, _ = make_runs(tmp_path)
    out = tmp_path / "report"
    CliRunner().invoke(report_command, [str(a), "--out", str(out)])
    md = " ".join((out / "report.md").read_text().split())
    assert "## How to read these tables" in md
    assert "y0, y1, …: the mean metric of the output after 0, 1, … refinements (y0 is the one-step draft" in md
    assert "Best-selected: what --select best would have returned, the draft the critic scored highest" in md
    assert "it can be below Final when the critic's scores disagree with the metric" in md
    assert "'-' means the metric is not pass/fail, so there is no solve rate; 0.000 means no example was solved" in md
    html = (out / "report.html").read_text()
    assert "How to read these tables" in html and "no solve rate" in html
    res = CliRunner().invoke(compare_command, [str(a), str(a)])
    told = " ".join(res.output.split())
    assert "How to read it:" in told and "y0 is the one-step draft" in told and "no solve rate" in told
