"""``--json-schema FILE`` (issue 38 item 3): the schema of a JSON or YAML file is the run's,
a draft that breaks it is refined with its errors, and ``--json`` shows the parsed value; a
file that is no JSON Schema is a one-line error before any model call. The model is the fake,
from a replies file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from selfrefine.cli.commands import cli

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}, "required": ["n"]}


@pytest.fixture
def replies(tmp_path: Path) -> Path:
    path = tmp_path / "replies.json"
    drafts = {"generate": ['{"n": 0}'], "refine": ['{"n": 2}'], "feedback": ['{"issues": []}']}
    path.write_text(json.dumps({"replies": drafts}))
    return path


@pytest.mark.parametrize("suffix", ["json", "yaml"])
def test_the_flag_reads_a_schema_and_the_run_returns_its_parsed_json(tmp_path, replies, suffix):
    schema = tmp_path / f"schema.{suffix}"
    schema.write_text(
        json.dumps(SCHEMA)
        if suffix == "json"
        else "type: object\nproperties:\n  n: {type: integer, minimum: 1}\nrequired: [n]\n"
    )
    result = CliRunner().invoke(
        cli, ["run", "chat", "A number.", "-m", f"fake:{replies}", "--json-schema", str(schema), "--no-derive-checks", "--json"]
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["parsed"] == {"n": 2} and data["stop_reason"] == "verified"
    assert data["config"]["json_schema"] == SCHEMA
    assert "$.n: 0 is less than the minimum of 1" in data["iterations"][0]["feedback"]["text"]


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ('{"type": "nope"}', "Error: invalid option json_schema: not a valid JSON Schema: $.type:"),
        ("{not json: [", "is not JSON or YAML"),
    ],
)
def test_a_bad_schema_file_is_one_line_before_any_model_call(tmp_path, content, says):
    schema = tmp_path / "schema.json"
    schema.write_text(content)
    # a model that does not exist: reached, it would fail differently
    result = CliRunner().invoke(
        cli, ["run", "chat", "hi", "-m", "fake:/nonexistent.json", "--json-schema", str(schema)]
    )
    assert result.exit_code != 0
    assert says in result.output and "fake reply file" not in result.output, result.output


def test_a_missing_schema_file_is_named():
    result = CliRunner().invoke(cli, ["run", "chat", "hi", "-m", "fake", "--json-schema", "/nonexistent/s.json"])
    assert result.exit_code == 2 and "cannot read '/nonexistent/s.json'" in result.output
