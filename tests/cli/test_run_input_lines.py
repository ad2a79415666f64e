"""``run`` refuses several lines for a task whose input is one line, and keeps them for the rest.

Issue 30 item 14: ``run commongen --input-file two_lines.txt`` joined the lines into one
input of seven concepts, silently, where ``eval --data two_lines.txt`` reads one input per
line. A task declares ``one_line_input``; ``run`` then refuses several lines with one line
saying what to do instead. Tasks whose input spans lines (chat, story, codeopt programs)
take them as before."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from selfrefine.cli import cli
from selfrefine.tasks import get_task

TWO_LINES = "dog, frisbee, catch\ncat, hat, mat, sit\n"


def run(*args: str, stdin: str | None = None):
    return CliRunner().invoke(cli, ["run", *args, "--model", "fake", "--max-iters", "0", "--json"], input=stdin)


def test_two_lines_for_commongen_are_refused_with_one_line(tmp_path):
    path = tmp_path / "two.txt"
    path.write_text(TWO_LINES)
    result = run("commongen", "--input-file", str(path))
    assert result.exit_code != 0  # was: 0, one run on seven concepts
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1, result.output
    message = lines[0]
    assert message.startswith("Error: commongen takes one input on one line")
    assert f"--input-file {path} has 2 lines" in message
    assert f"selfrefine eval commongen --data {path}" in message and "join them" in message


def test_stdin_is_refused_alike():
    result = run("commongen", "-", stdin=TWO_LINES)
    assert result.exit_code != 0 and "stdin has 2 lines" in result.output, result.output


@pytest.mark.parametrize(
    "text", ["dog, frisbee, catch\n", "\ndog, frisbee, catch\n\n", '[\n  "dog",\n  "frisbee"\n]\n']
)
def test_one_line_or_a_json_list_runs(tmp_path, text):
    path = tmp_path / "one.txt"
    path.write_text(text)
    result = run("commongen", "--input-file", str(path))
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["input"] in ("dog, frisbee, catch", "dog, frisbee")


@pytest.mark.parametrize(
    "task, text",
    [
        ("chat", "Summarise this:\nline one\nline two"),
        ("story", "A lighthouse keeper finds a message.\nIt is in her own handwriting."),
        ("codeopt", "n = int(input())\nprint(sum(range(n)))\n"),
    ],
)
def test_tasks_whose_input_spans_lines_keep_them(tmp_path, task, text):
    path = tmp_path / "input.txt"
    path.write_text(text)
    result = run(task, "--input-file", str(path))
    assert result.exit_code == 0, result.output
    given = json.loads(result.output)["input"]
    assert all(line.strip() in given for line in text.splitlines()), given  # one input, every line of it


def test_the_property_is_declared_by_the_task():
    one_line = {name for name in ("commongen", "acronym", "sentiment", "toxicity") if get_task(name).one_line_input}
    assert one_line == {"commongen", "acronym", "sentiment", "toxicity"}
    assert not any(get_task(name).one_line_input for name in ("chat", "story", "codeopt", "gsm8k", "dialogue"))
