"""benchmarks/frontier.py's own logic, without a model: the row ranges that pick the fresh
rows, and a report that keeps the old rows' tables and the fresh rows' apart, holds each
auto point against the fixed grid's best point at no more tokens, and times only the
examples the response cache did not answer."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

import frontier
from _peers import Record, append_record, records_path, select_rows


def test_rows_fresh_is_the_issues_fresh_sets() -> None:
    assert frontier.parse_rows("fresh") == {"commongen": (56, 99), "gsm8k": (132, 231), "acronym": (16, 65)}


def test_rows_parse_inclusive_ranges_per_task() -> None:
    assert frontier.parse_rows("commongen=56-99, gsm8k=132-231") == {"commongen": (56, 99), "gsm8k": (132, 231)}


@pytest.mark.parametrize("spec", ["commongen=99-56", "commongen=5", "commongen", "nope=1-2", "gsm8k=1-2,gsm8k=3-4"])
def test_a_bad_rows_spec_is_a_one_line_usage_error(spec: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        frontier.parse_args(["--rows", spec])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert ": error: bad " in err and "Traceback" not in err


def test_without_rows_a_task_keeps_its_first_limit_rows(tmp_path: Path) -> None:
    data = _gsm8k_file(tmp_path, 8)
    args = frontier.parse_args(["--rows", "gsm8k=3-5", "--limit-acronym", "2", "--data-dir", str(data)])
    assert [e.id for e in frontier.examples_of("gsm8k", args)] == ["gsm8k-3", "gsm8k-4", "gsm8k-5"]
    assert "acronym" not in args.rows


def test_rows_past_the_end_of_the_file_are_an_error(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="rows 3-9 asked for"):
        select_rows("gsm8k", 3, 9, _gsm8k_file(tmp_path, 8))


def test_report_keeps_old_and_fresh_rows_apart(tmp_path: Path) -> None:
    data, out, doc = _gsm8k_file(tmp_path, 8), tmp_path / "runs", tmp_path / "frontier.md"
    doc.write_text(
        f"{frontier.TABLE_START}\nold table\n{frontier.TABLE_END}\n{frontier.FRESH_START}\n{frontier.FRESH_END}\n"
    )
    # fresh rows 4-7: the grid's k2 is better than k1, auto costs more than k2 and beats it on one row
    for i in range(4, 8):
        _record(out, "ours-k1-r0", i, metric=0.0, tokens=300, any_correct=i == 4)
        _record(out, "ours-k2-r0", i, metric=float(i < 6), tokens=600, any_correct=i < 7, hits=2 * (i == 5))
        _record(out, "ours-auto-1500", i, metric=float(i < 7), tokens=900)
    args = frontier.parse_args(
        ["--tasks", "gsm8k", "--rows", "gsm8k=4-7", "--limit-gsm8k", "2", "--out", str(out), "--doc", str(doc)]
        + ["--data-dir", str(data)]
    )
    frontier.report(args)
    text = doc.read_text()
    old, fresh = text.split(frontier.FRESH_START)
    assert "old table" in old  # no old-row records: the old block stays as it was
    assert "| gsm8k | ours-k2-r0 | 4 | 0.500" in fresh
    assert "| 0.750 |" in fresh  # k2's any correct: 3 of 4
    assert "| 0.50 | 10.0 (3) |" in fresh  # 2 hits over 4 rows; s/ex over the 3 rows with none
    assert "| gsm8k | ours-auto-1500 | 900 | ours-k2-r0 (600) | 4 | +0.250 [" in fresh

    _record(out, "ours-k1-r0", 0, metric=1.0, tokens=300)
    frontier.report(args)
    old, fresh = doc.read_text().split(frontier.FRESH_START)
    assert "old table" not in old and "| gsm8k | ours-k1-r0 | 1 | 1.000" in old and "ours-k2-r0" not in old
    assert "| gsm8k | ours-k1-r0 | 4 | 0.000" in fresh


def _gsm8k_file(tmp_path: Path, n: int) -> Path:
    rows = [json.dumps({"input": f"What is {i} + 1?", "target": i + 1}) for i in range(n)]
    (tmp_path / "gsm8k.dev.jsonl").write_text("\n".join(rows) + "\n")
    return tmp_path


def _record(
    out: Path, point: str, i: int, *, metric: float, tokens: int, any_correct: bool = False, hits: int = 0
) -> None:
    record = Record(
        id=f"gsm8k-{i}",
        task="gsm8k",
        system=point,
        output="def solution():\n    return 0",
        metric=metric,
        one_step_metric=metric,
        calls=2,
        prompt_tokens=tokens,
        seconds=1.0 if hits else 10.0,
        cache_hits=hits,
        any_correct=any_correct,
    )
    append_record(records_path(out, "gsm8k", point), record)
