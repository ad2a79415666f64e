"""``selfrefine datasets`` never wraps a dataset's name, in a narrow terminal or piped.

Issue 30 item 18: at 80 columns (a pipe's width) the table broke ``commongen_hard`` into
"commongen_ha" / "rd", a name no reader can type back into ``eval --data``. The name
column never wraps now; the other columns wrap (at spaces while their words fit) to make
room. ``--json`` stays the form for scripts."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner
from conftest import ROOT

from selfrefine.cli import cli
from selfrefine.evaluation.catalog import listing

SRC = ROOT / "src"


def first_cells(output: str) -> list[str]:
    """The name cell of every row line of the table (the part before its first '│')."""
    return [ln.split("│")[0].strip() for ln in output.splitlines() if "│" in ln]


def assert_names_whole(output: str, width: int) -> None:
    names = [row["name"] for row in listing()]
    cells = [c for c in first_cells(output) if c]
    assert cells == names, output  # was: ..., 'commongen_ha', 'rd', ..., 'pie_codenet_', 'python', ...
    table = [ln for ln in output.splitlines() if "│" in ln or "┃" in ln]
    assert all(len(ln) <= width for ln in table), max(table, key=len)


@pytest.mark.parametrize("columns", [80, 60])
def test_names_stay_whole_at_80_and_60_columns(columns):
    result = CliRunner().invoke(cli, ["datasets"], env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, result.output
    assert_names_whole(result.output, columns)


def test_at_80_columns_other_columns_wrap_at_spaces_not_inside_words():
    result = CliRunner().invoke(cli, ["datasets"], env={"COLUMNS": "80"})
    cells = [c.strip() for ln in result.output.splitlines() if "│" in ln for c in ln.split("│")]
    for word in ("readability", "CommonGen-Hard", "Apache-2.0", "shipped", "selfrefine"):
        assert word in cells or any(word in c.split() for c in cells), (word, result.output)


def test_piped_output_keeps_names_whole():
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env["PYTHONPATH"] = str(SRC)
    done = subprocess.run(
        [sys.executable, "-m", "selfrefine", "datasets"], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert_names_whole(done.stdout, 80)  # a pipe is 80 columns wide to rich


def test_json_lists_the_same_names():
    result = CliRunner().invoke(cli, ["datasets", "--json"], env={"COLUMNS": "40"})
    assert [row["name"] for row in json.loads(result.output)] == [row["name"] for row in listing()]
