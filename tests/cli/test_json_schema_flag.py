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


BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{name}: &{name} [{', '.join(['*' + prev] * 10)}]\n" for prev, name in zip("abcdefgh", "bcdefghi", strict=True)
)  # 10**9 values once its aliases are expanded, in under 1 KB


def test_a_yaml_alias_bomb_is_refused_in_one_line_as_a_task_file_is(tmp_path):
    # issue 46 item 11: c3793c2 expanded it (84.5 s, 6.77 GB for a 1 KB file)
    schema = tmp_path / "bomb.yaml"
    schema.write_text(BOMB)
    assert len(BOMB) < 1024
    result = CliRunner().invoke(cli, ["run", "chat", "hi", "-m", "fake", "--json-schema", str(schema)])
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert "expands to more than 100,000 values (YAML aliases?)" in result.output and str(schema) in result.output


def test_a_reference_loop_is_one_line_before_any_model_call(tmp_path):
    # issue 46 item 8: c3793c2 printed a RecursionError traceback
    schema = tmp_path / "loop.json"
    schema.write_text(json.dumps({"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}))
    result = CliRunner().invoke(
        cli, ["run", "chat", "hi", "-m", "fake:/nonexistent.json", "--json-schema", str(schema)]
    )
    assert result.exit_code != 0 and "Traceback" not in result.output and "RecursionError" not in result.output
    assert "Error: invalid option json_schema: the schema's $ref '#/$defs/a' loops back to itself" in result.output
    assert len(result.output.strip().splitlines()) == 1, result.output
