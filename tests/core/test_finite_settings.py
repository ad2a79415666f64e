"""NaN and infinity are no setting (issue 46 item 9): a task file's ``temperature: .nan`` or
``score_at_least: .inf`` was accepted, and an ``openai:`` run then died on its first call
("Out of range float values are not JSON compliant"). Every place settings are read refuses
them with one line naming the field, before any model call: task files, the run's options
(library, CLI), a request to ``selfrefine serve``, backend options (core/config.py ``Finite``)."""

from __future__ import annotations

import json
import math

import click
import httpx2
import pytest
import test_serve
from click.testing import CliRunner

from selfrefine import ConfigError, FakeBackend, SelfRefine, Task
from selfrefine.backends.options import OpenAIOptions, validate
from selfrefine.cli.commands import cli
from selfrefine.core.errors import TaskError, TaskFileError
from selfrefine.tasks.taskfile import load_task

serve = test_serve.serve  # the real-server fixture
FINITE = "Input should be a finite number"
TASK = "name: t\ngenerate: '{{ input }}'\nfeedback: '{{ draft }}'\nrefine: '{{ draft }} {{ feedback }}'\n"


@pytest.mark.parametrize(
    "extra, key",
    [
        ("temperature: .nan\n", "temperature"),
        ("temperature: .inf\n", "temperature"),
        ("temperature: {generate: -.inf}\n", "temperature.generate"),
        ("stop: {score_at_least: .inf}\n", "stop.score_at_least"),
        ("stop: {score_at_least: .nan}\n", "stop.score_at_least"),
    ],
)
def test_a_task_file_with_a_non_finite_number_is_refused_naming_the_key(tmp_path, extra, key):
    path = tmp_path / "t.yaml"
    path.write_text(TASK + extra)
    with pytest.raises(TaskFileError, match=rf"^task file .*: key '{key}': {FINITE}$") as raised:
        load_task(path)
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("option", ["temperature", "score_threshold", "max_seconds", "retry_base_delay"])
@pytest.mark.parametrize("value", [math.nan, math.inf])
def test_a_run_option_that_is_not_finite_is_a_config_error_before_any_call(option, value):
    backend = FakeBackend(default="x")
    with pytest.raises(ConfigError, match=rf"^invalid option {option}: {FINITE}"):
        SelfRefine("commongen", backend, **{option: value})
    assert backend.requests == []


def test_a_task_s_own_defaults_are_finite_too():
    with pytest.raises(TaskError, match="temperature"):
        Task("t", generate="{{ input }}", feedback="{{ draft }}", refine="{{ draft }}", temperature=math.nan)
    with pytest.raises(TaskError, match="score_threshold"):
        Task("t", generate="{{ input }}", feedback="{{ draft }}", refine="{{ draft }}", score_threshold=math.inf)


RUN = ["run", "commongen", "dog, ball", "--model", "fake"]


@pytest.mark.parametrize(
    "args",
    [
        [*RUN, "--temperature", "nan"],
        [*RUN, "--score-threshold", "inf"],
        [*RUN, "--score-threshold", "1e999"],
        [*RUN, "--budget-seconds", "inf"],
    ],
)
def test_a_cli_flag_refuses_nan_and_inf_in_one_line(args):
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    flag, value = args[-2:]
    assert result.output.strip().splitlines()[-1].startswith(f"Error: Invalid value for '{flag}'")
    assert result.output.strip().endswith(f"{value!r} is not a finite number")


@pytest.mark.parametrize("flag, value", [("--client-timeout", "inf"), ("--budget-seconds", "nan")])
def test_the_server_s_own_numbers_are_finite(flag, value):
    """serve's flags, parsed as click parses them (a bad one would start a server otherwise)."""
    [param] = [p for p in cli.commands["serve"].params if flag in p.opts]
    with pytest.raises(click.BadParameter, match=f"{value!r} is not a finite number"):
        param.type.convert(value, param, None)
    assert param.type.convert("2.5", param, None) == 2.5


def test_backend_options_are_finite():
    with pytest.raises(ConfigError, match=f"timeout=inf: {FINITE}"):
        validate("openai:m", OpenAIOptions, {"timeout": math.inf})


@pytest.mark.parametrize(
    "body, param",
    [
        ({"temperature": math.nan}, "temperature"),
        ({"temperature": math.inf}, "temperature"),
        ({"selfrefine": {"max_seconds": math.inf}}, "selfrefine.max_seconds"),
        ({"selfrefine": {"temperature": math.nan}}, "selfrefine.temperature"),
    ],
)
def test_a_request_with_nan_or_infinity_is_a_400_naming_the_field(serve, body, param):
    served = serve(FakeBackend(default="x"))
    # Python's json (the server's too) writes and reads NaN and Infinity
    payload = {"model": "selfrefine/commongen", "messages": [{"role": "user", "content": "dog, ball"}], **body}
    reply = httpx2.post(
        f"{served.url}/v1/chat/completions", content=json.dumps(payload), headers={"Content-Type": "application/json"}
    )
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error["param"] == param and FINITE in error["message"], error
    assert served.fake.requests == []
