"""benchmarks/results.py: docs/results.md is exactly what the command writes from the committed
sources (so the page cannot drift from them), and a source not yet run reads "not yet run"."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from datetime import UTC, datetime

import pytest
from conftest import ROOT

SCRIPT = ROOT / "benchmarks" / "results.py"
PAGE = ROOT / "docs" / "results.md"


def full_history() -> bool:
    done = subprocess.run(
        ["git", "rev-parse", "--is-shallow-repository"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    return done.returncode == 0 and done.stdout.strip() == "false"


@pytest.fixture
def results(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import results

    return results


@pytest.mark.skipif(not full_history(), reason="the page dates its sources from the git history")
def test_page_is_what_the_command_writes_from_the_committed_sources(tmp_path):
    out = tmp_path / "results.md"
    done = subprocess.run([sys.executable, str(SCRIPT), "--out", str(out)], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert out.read_bytes() == PAGE.read_bytes(), (
        "docs/results.md differs from its sources: commit the sources, then run .venv/bin/python benchmarks/results.py and commit the page"
    )


@pytest.mark.skipif(not full_history(), reason="prompt dates come from the git history")
def test_a_result_older_than_its_prompts_says_so_in_words(results):
    """The issue's case: quality_summary.json (committed 2026-11-23 21:17) ran commongen on the
    prompts before those of 2026-11-25 that frontier.md's one-step ran."""
    quality, later = datetime(2026, 11, 23, 21, 17, tzinfo=UTC), datetime(2100, 1, 1, tzinfo=UTC)
    stale = results.freshness("commongen", quality, "docs/frontier.md")
    assert stale.startswith("**stale**: measured with the prompts as of 2026-11-23 (changed 2026-11-2")
    assert "the current prompts' one-step is in docs/frontier.md" in stale
    assert results.freshness("commongen", later) == "current prompts"


def test_an_absent_judged_loop_reads_not_yet_run(results, monkeypatch, tmp_path):
    for name in ("quality_summary.json", "peers_summary.json", "frontier.md"):
        shutil.copy(ROOT / "docs" / name, tmp_path / name)
    monkeypatch.setattr(results, "DOCS", tmp_path)
    text = results.page()
    loop = text.partition("## The judge in the loop")[2].partition("\n## ")[0]
    assert "Not yet run: `.venv/bin/python benchmarks/judged_loop.py` writes `docs/judged_loop.json`." in loop
    assert "| commongen | self | 20 | 0.326 | 0.356 |" in text  # the other sources still render


def test_every_source_absent_reads_not_yet_run(results, monkeypatch, tmp_path):
    monkeypatch.setattr(results, "DOCS", tmp_path)
    text = results.page()
    assert text.count("Not yet run:") == 6  # frontier, judged loop, IFEval, judges, every mode, peers


def test_a_judged_loop_summary_renders_its_rows(results, monkeypatch, tmp_path):
    """The shape benchmarks/judged_loop.py writes: one entry per set, one per system run."""
    delta = {"estimate": 0.1, "low": -0.05, "high": 0.25, "n": 8, "level": 0.95}
    system = {
        "n": 8,
        "one_step": 0.5,
        "first_draft": 0.55,
        "returned": 0.6,
        "delta": delta,
        "wins_ties_losses": [3, 4, 1],
        "tokens_per_example": 2400.0,
        "one_step_tokens_per_example": 300.0,
        "seconds_per_example": 50.0,
        "judge_calls_per_example": 6.0,
        "judge_prompt_tokens_per_call": 90.0,
        "judge_seconds_per_call": 1.5,
        "returned_outputs": {"story-0": "Once."},
    }
    summary = [
        {
            "set": "story",
            "task": "story",
            "rows": "0-5",
            "best": system,
            "pairwise": {"best": 2, "tie": 3, "one-step": 1},
        },
        {"set": "chat", "task": "chat", "rows": "0-19"},
    ]
    (tmp_path / "judged_loop.json").write_text(json.dumps(summary), encoding="utf-8")
    monkeypatch.setattr(results, "DOCS", tmp_path)
    loop = results.judged_loop_section()
    row = next(line for line in loop if line.startswith("| story |"))
    # one-step, the best of the first drafts (sampling alone), then returned (after the round)
    assert "| best | 8 | 0.500 | 0.550 | 0.600 | +0.100 [-0.050, +0.250] | 3 / 4 / 1 | 300 → 2400 | 2 / 3 / 1 |" in row
    assert not any("Not yet run" in line for line in loop)


def test_the_readme_quotes_the_page():
    """Every three-decimal figure of the README's results sections is on docs/results.md."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.partition("## Does refinement help? Our Table 1")[2].partition("\n## ")[0]
    assert "docs/results.md" in section
    page = PAGE.read_text(encoding="utf-8")
    figures = set(re.findall(r"\d+\.\d{3}", section))
    assert len(figures) > 20
    assert sorted(f for f in figures if f not in page) == []
