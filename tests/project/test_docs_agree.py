"""The README, the scripts and the results page agree with the code and with each other
(issue 39, item 16: what a new user reading them trips on)."""

from __future__ import annotations

import re
import shlex

from click.testing import CliRunner
from conftest import ROOT

from selfrefine.cli.commands import cli
from selfrefine.core.records import StopReason

README = (ROOT / "README.md").read_text(encoding="utf-8")


def _section(start: str, text: str = README) -> str:
    return text.partition(start)[2].partition("\n## ")[0]


def _bash_lines() -> list[str]:
    blocks = re.findall(r"^```bash\n(.*?)^```", README, re.M | re.S)
    return [line for block in blocks for line in block.replace("\\\n", " ").splitlines()]


def test_the_readme_lists_every_stop_reason():
    # was: `verified` (strategy auto) missing from the list
    listed = README.partition("Stop reasons: ")[2].partition("\n\n")[0]
    assert [r.value for r in StopReason if f"`{r.value}`" not in listed] == []


def test_every_file_a_readme_command_reads_is_shipped(tmp_path):
    # was: `--input-file concepts.txt`, a file nobody has
    read = [
        (line, path)
        for line in _bash_lines()
        for path in re.findall(r"(?:--input-file|-f)\s+(\S+)", line.partition("#")[0])
    ]
    assert read, "the quick start reads a file"
    assert [(line, path) for line, path in read if not (ROOT / path).is_file()] == []


def test_the_quick_starts_file_line_runs_as_written(monkeypatch):
    line = next(x for x in _bash_lines() if "--input-file" in x and x.startswith("selfrefine run"))
    monkeypatch.chdir(ROOT)
    args = shlex.split(line)[1:] + ["-m", "fake"]  # the one change: no model to load
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert '"stop_reason"' in result.output


def test_the_demo_script_says_who_breaks_ties():
    # was: "(the critic breaks ties)"; with the judge in the loop, the judge does
    demo = (ROOT / "scripts" / "demo.sh").read_text(encoding="utf-8")
    assert "critic breaks ties" not in demo and "judge breaks ties" in demo


def test_the_readme_says_the_test_script_installs_a_browser_as_root():
    script = (ROOT / "scripts" / "test.sh").read_text(encoding="utf-8")
    assert "apt-get install" in script and "SELFREFINE_NO_APT" in script
    told = " ".join(_section("## Two commands").split())
    assert "as root" in told and "installs the system package `chromium` with `apt-get`" in told
    assert "SELFREFINE_NO_APT=1" in told


def test_the_readme_quotes_no_stale_number_as_current():
    # was: "GSM8K 0.567 for one greedy program", a row docs/results.md marks stale
    page = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    headline = _section("## Quality against tokens, and DSPy at equal tokens", page)
    stale = [
        re.findall(r"\d\.\d{3}", row.split("|")[3])[0]
        for row in headline.splitlines()
        if row.startswith("| ") and "**stale**" in row
    ]
    assert stale, "the page marks a row stale (gsm8k's, measured before its prompts changed)"
    short = " ".join(_section("In short, for Qwen2.5").split()).partition("**Rounds of refinement**")[0]
    sentences = re.split(r"(?<=\.)\s+(?=[A-Z*])", short)
    quoted = [s for s in sentences if any(n in s for n in stale)]
    assert [s for s in quoted if "stale" not in s] == []
