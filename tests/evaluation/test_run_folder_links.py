"""Issue 46 item 12: ``eval`` followed a ``lock`` symlink planted in the run folder and
overwrote its target. No file of a run folder (or of a report) is now opened through a
link: a planted link, hard link or FIFO is one line naming it, and the file it points to is
left as it was."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from conftest import FB_DONE

from selfrefine.cli.commands import cli
from selfrefine.core.errors import StorageError
from selfrefine.evaluation.report import COST_PLOT, HTML, MARKDOWN, METRIC_PLOT
from selfrefine.evaluation.runstore import LOCK, META, RESULTS, SUMMARY, RunStore

KEEP = "the user's own file\n"


def eval_args(tmp_path: Path, out: Path) -> list[str]:
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"concepts": ["dog", "ball", f"w{i}"]}) + "\n" for i in range(2)))
    model = tmp_path / "r.json"
    model.write_text(json.dumps({"default": FB_DONE, "replies": {"generate": ["A dog plays with a ball."] * 50}}))
    return ["eval", "commongen", "--data", str(data), "--out", str(out), "-m", f"fake:{model}",
            "--max-iters", "1", "--concurrency", "1", "--no-cache"]  # fmt: skip


def one_line_error(result: Result) -> str:
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code != 0 and "Traceback" not in result.output, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, result.output
    return errors[0]


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    target = tmp_path / "outside" / "precious.txt"
    target.parent.mkdir()
    target.write_text(KEEP)
    return target


@pytest.mark.parametrize("name", [LOCK, RESULTS, META, META + ".tmp", SUMMARY, SUMMARY + ".tmp"])
def test_a_planted_symlink_is_refused_and_its_target_untouched(tmp_path, outside, name):
    run = tmp_path / "run"
    run.mkdir()
    (run / name).symlink_to(outside)
    line = one_line_error(CliRunner().invoke(cli, eval_args(tmp_path, run)))
    assert outside.read_text() == KEEP
    assert str(run / name) in line and "symbolic link" in line, line
    assert (run / name).is_symlink()  # left for the user to see


def test_a_dangling_symlink_creates_nothing_where_it_points(tmp_path):
    run, nowhere = tmp_path / "run", tmp_path / "elsewhere" / "made.txt"
    run.mkdir()
    nowhere.parent.mkdir()
    (run / LOCK).symlink_to(nowhere)
    line = one_line_error(CliRunner().invoke(cli, eval_args(tmp_path, run)))
    assert not nowhere.exists() and "symbolic link" in line, line


@pytest.mark.parametrize("name", [LOCK, RESULTS])
def test_a_planted_hard_link_is_refused_and_its_target_untouched(tmp_path, outside, name):
    run = tmp_path / "run"
    run.mkdir()
    os.link(outside, run / name)
    line = one_line_error(CliRunner().invoke(cli, eval_args(tmp_path, run)))
    assert outside.read_text() == KEEP
    assert str(run / name) in line and "hard link" in line, line


@pytest.mark.timeout(30)
def test_a_fifo_in_place_of_the_results_is_refused_without_hanging(tmp_path):
    store = RunStore(tmp_path / "run")
    store.folder.mkdir()
    os.mkfifo(store.folder / RESULTS)
    with pytest.raises(StorageError, match="not a plain file"):
        store.rows()  # a reader (`report`) would have blocked in open()


def test_a_good_run_still_resumes(tmp_path):
    run = tmp_path / "run"
    assert CliRunner().invoke(cli, eval_args(tmp_path, run)).exit_code == 0
    again = CliRunner().invoke(cli, eval_args(tmp_path, run))
    assert again.exit_code == 0, again.output
    assert len(RunStore(run).rows()) == 2 and json.loads((run / SUMMARY).read_text())["examples"] == 2


@pytest.mark.parametrize("name", [MARKDOWN, HTML, METRIC_PLOT, COST_PLOT])
def test_a_planted_symlink_in_the_report_folder_is_refused(tmp_path, outside, name):
    run = tmp_path / "run"
    assert CliRunner().invoke(cli, eval_args(tmp_path, run)).exit_code == 0
    report = tmp_path / "report"
    report.mkdir()
    (report / name).symlink_to(outside)
    line = one_line_error(CliRunner().invoke(cli, ["report", str(run), "--out", str(report)]))
    assert outside.read_text() == KEEP
    assert str(report / name) in line and "symbolic link" in line, line
