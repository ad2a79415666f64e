"""benchmarks/ifeval_dspy.py's own logic, without a model or DSPy: DSPy's tokens carry our
derivation call's, the official verifiers score its replies, the verdict reads the paired
interval, and a run's stop time."""

from __future__ import annotations

import calendar
import json
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

pytest.importorskip("nltk")  # the official verifiers are benchmark-only dependencies (.[bench])
ifeval = pytest.importorskip("ifeval")
import ifeval_dspy  # noqa: E402


def _write(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_dspy_rows_are_scored_officially_and_charged_our_derivation(tmp_path: Path) -> None:
    # an IFEval-shaped row (the dataset package is a benchmark-only dependency; the verifiers ship here)
    row = {"key": 7, "prompt": "Reply in lowercase.", "instruction_id_list": ["change_case:english_lowercase"],
           "kwargs": [{}]}  # fmt: skip
    ours, out = tmp_path / "ours", tmp_path / "dspy"
    verdict = ifeval.verdicts(row, "x")
    _write(ours / "seq-4-focused-report.jsonl", [{"key": row["key"], "checks": [{"type": "lowercase"}],
           "by_purpose": {"checks": 400, "generate": 100}, "returned": verdict, "draft0": verdict,
           "tokens": 500, "first": "x", "output": "x"}])  # fmt: skip
    _write(out / "dspy-bestofn-n4.jsonl", [{"key": row["key"], "output": "y", "first": "", "rewards": [0.5, 1.0],
           "calls": 2, "prompt_tokens": 300, "completion_tokens": 50, "seconds": 3.0, "error": None}])  # fmt: skip
    got = ifeval_dspy.scored("dspy-bestofn-n4", out, ours, {row["key"]: row})[row["key"]]
    assert (got["dspy_tokens"], got["tokens"]) == (350, 750)
    assert got["returned"] == ifeval.verdicts(row, "y")
    assert got["draft0"]["strict"] == [False] * len(row["instruction_id_list"])  # no first reply: nothing passes
    assert ifeval_dspy.derived(ours)[row["key"]] == {"checks": [{"type": "lowercase"}], "tokens": 400}


@pytest.mark.parametrize(
    ("interval", "said"),
    [("+0.200 [+0.050, +0.350]", "ahead"), ("-0.100 [-0.300, +0.050]", "level"), ("-0.2 [-0.4, -0.05]", "behind")],
)
def test_verdict_reads_the_paired_interval(interval: str, said: str) -> None:
    line = f"| dspy-refine-n3 | seq-4 | 20 | 0.5 | 0.4 | {interval} | 3 / 1 | 900 | 800 |"
    assert ifeval_dspy.verdict(line) == said


def test_stop_time_is_the_earlier_bound() -> None:
    now = time.time()
    assert abs(ifeval_dspy.stop_time(10, None) - (now + 600)) < 5
    assert ifeval_dspy.stop_time(None, None) == float("inf")
    g = time.gmtime(now + 120)
    until = calendar.timegm((g.tm_year, g.tm_mon, g.tm_mday, g.tm_hour, g.tm_min, 0))
    if g.tm_mday == time.gmtime(now).tm_mday:  # not across midnight
        assert ifeval_dspy.stop_time(60, f"{g.tm_hour:02d}:{g.tm_min:02d}") == until


def test_verdict_line_names_the_pair_and_the_token_ratio() -> None:
    line = "| dspy-bestofn-n4 | seq-8 | 20 | 0.5 | 0.6 | -0.100 [-0.300, +0.100] | 1 / 3 | 900 | 1800 |"
    assert ifeval_dspy.verdict_line(line) == "| dspy-bestofn-n4 | seq-8 | -0.100 [-0.300, +0.100] | level | 0.50 |"
