"""Tables fit an 80-column terminal or pipe, their cells wrapped, not cut (issue 46, item 21:
`selfrefine tasks` cut its preset column at 80 columns: "verifier_m" / "ode=hybrid")."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner
from test_report import make_runs

from selfrefine.cli.commands import cli

WIDTH = 80
BOX = re.compile(r"[\s│┃┏┓┗┛┡┩━─┳┻╇┴└┘]+")


def _run(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args), env={"COLUMNS": str(WIDTH)})
    assert result.exit_code == 0, result.output
    return result.stdout


def _words(text: str) -> set[str]:
    return {w for w in BOX.split(text) if w}


def test_tasks_fits_80_columns_with_every_word_whole():
    out = _run("tasks")
    assert max(map(len, out.splitlines())) <= WIDTH, out
    shown = _words(out)
    rows = json.loads(_run("tasks", "--json"))
    for row in rows:
        for key in ("name", "description", "stop", "metric", "default", "best"):
            missing = _words(str(row[key])) - shown
            assert not missing, f"{row['name']} {key}: {missing} cut or folded"


@pytest.mark.parametrize("command", ["datasets", "models"])
def test_listings_fit_80_columns(command):
    out = _run(command)
    # only a word longer than a line (a path of a file) may stand alone past the edge
    too_wide = [line for line in out.splitlines() if len(line) > WIDTH and len(line.split()) > 1]
    assert not too_wide, "\n".join(too_wide)


def test_models_options_keep_option_names_whole():
    shown = _words(_run("models"))
    assert {"prefix_cache_mb", "repeat_penalty", "fake[:REPLIES.json]"} <= shown


def test_compare_fits_80_columns(tmp_path):
    a, b = make_runs(tmp_path)
    out = _run("compare", str(a), str(b))
    assert max(map(len, out.splitlines())) <= WIDTH, out
    assert "final-base" in out and "How to read it:" in out
