"""benchmarks/fresh_repair.py's report, without a model: each point counted on the fresh rows
both points finished (a row only one reached is left out, so the difference stays paired),
the paired difference repair − best with better/worse, and commongen's share of returned
outputs the scene check flags as lists."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

import fresh_repair
from _peers import Record, append_record, records_path

from selfrefine.evaluation.stats import Interval

SCENE = "A man and his dog walk through the park and throw a ball on the grass."
LISTED = "Man.\nDog.\nPark.\nBall.\nGrass."


def test_report_pairs_rows_and_counts_outputs_flagged_as_lists(tmp_path: Path) -> None:
    data, out, doc = _commongen_file(tmp_path, 100), tmp_path / "runs", tmp_path / "frontier.md"
    doc.write_text(f"head\n{fresh_repair.START}\nold\n{fresh_repair.END}\ntail\n")
    # fresh rows 56-58 by both points, row 59 by the preset only (left out of both)
    for i, (best, repair) in enumerate([(0.6, 1.0), (0.8, 0.8), (1.0, 0.6)], start=56):
        _record(out, "ours-best", i, metric=best, tokens=1000, output=LISTED if i < 58 else SCENE)
        _record(out, "ours-repair", i, metric=repair, tokens=500, output=SCENE)
    _record(out, "ours-best", 59, metric=0.0, tokens=9000, output=LISTED)

    args = fresh_repair.parse_args(["--tasks", "commongen", "--out", str(out), "--doc", str(doc)])
    args.data_dir = data
    fresh_repair.report(args)
    text = doc.read_text()
    assert text.startswith("head\n") and text.endswith("tail\n") and "old" not in text
    assert "| commongen | ours-best | 3 | 0.800 [" in text and "| 1000 | 1.00 | 0.667 |" in text
    assert "| commongen | ours-repair | 3 | 0.800 [" in text and "| 500 | 1.00 | 0.000 |" in text
    assert "| commongen | 3 | +0.000 [" in text and "| 1 / 1 | +0.533 [" in text
    assert "| 0.50× | -0.667 |" in text  # the preset's first sentences are "Man.": 1 concept of 5
    assert "- commongen (3 rows): level with the task's preset by 0.000, an interval that includes 0, at 0.50×" in text


@pytest.mark.parametrize(
    ("low", "high", "said"),
    [(-0.3, -0.1, "**worse** than the task's preset, -0.200"), (0.1, 0.3, "**better**"), (-0.1, 0.3, "above")],
)
def test_the_verdict_says_worse_or_better_only_where_the_interval_excludes_zero(
    low: float, high: float, said: str
) -> None:
    diff = Interval(estimate=(low + high) / 2, low=low, high=high, n=5)
    assert said in fresh_repair.verdict(diff, 2.0) and "2.00×" in fresh_repair.verdict(diff, 2.0)


def test_a_task_outside_the_two_is_a_usage_error() -> None:
    try:
        fresh_repair.parse_args(["--tasks", "acronym"])
    except SystemExit as exc:
        assert exc.code == 2
    else:
        raise AssertionError("acronym was accepted")


def _commongen_file(tmp_path: Path, n: int) -> Path:
    rows = [json.dumps({"concepts": ["man", "dog", "park", "ball", "grass"]}) for _ in range(n)]
    (tmp_path / "commongen_hard.dev.jsonl").write_text("\n".join(rows) + "\n")
    return tmp_path


def _record(out: Path, point: str, i: int, *, metric: float, tokens: int, output: str) -> None:
    record = Record(
        id=f"commongen-{i}",
        task="commongen",
        system=point,
        output=output,
        metric=metric,
        calls=1,
        prompt_tokens=tokens,
    )
    append_record(records_path(out, "commongen", point), record)
