"""The CLI's flags are typed records declared once (cli/options.py): each command's options
are exactly its record's fields, a flag spelled unlike its RefineConfig field fills that
field, and each command loads its task and prepares its input once."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from selfrefine.cli.commands import EvalFlags, RunFlags, cli
from selfrefine.cli.serve import ServeFlags, _settings
from selfrefine.task import plugins
from selfrefine.task.task import PreparedInput, Task, prepared_input
from selfrefine.tasks import get_task

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TAGLINE = str(EXAMPLES / "tagline.yaml")
COMMANDS = [("run", RunFlags, {"task", "input"}), ("eval", EvalFlags, {"task"}), ("serve", ServeFlags, set())]


@pytest.mark.parametrize(("name", "record", "arguments"), COMMANDS)
def test_every_option_of_a_command_is_a_field_of_its_record_and_back(name, record, arguments):
    command = cli.commands[name]
    options = [p.name for p in command.params if isinstance(p, click.Option)]
    assert options == [f.name for f in record.flags()]  # the same flags, in the help's order
    assert {p.name for p in command.params if isinstance(p, click.Argument)} == arguments


@pytest.mark.parametrize("record", [RunFlags, EvalFlags, ServeFlags])
def test_a_parameter_without_a_field_or_a_field_without_one_is_refused(record):
    @click.command()
    @click.option("--extra")  # declared on the command, outside the record
    @record.options()
    def probe(**_: object) -> None:
        pass

    params = probe.make_context("probe", ["--data", "d", "--out", "o"] if record is EvalFlags else []).params
    with pytest.raises(TypeError, match="extra"):
        record.of(params)
    del params["extra"]
    record.of(params)  # exactly the record's flags
    del params[next(record.flags()).name]
    with pytest.raises(TypeError):
        record.of(params)


def _run_flags(*args: str) -> RunFlags:
    params = cli.commands["run"].make_context("run", ["commongen", "dog, ball", *args]).params
    return RunFlags.of({k: v for k, v in params.items() if k not in ("task", "input")})


def test_the_flags_spelled_unlike_their_field_fill_that_field():
    loop = _run_flags("--max-iters", "2", "--no-constrain", "--budget-tokens", "500", "--budget-seconds", "1.5")
    config = loop.engine.loop.config()
    assert (config.max_iterations, config.constrained) == (2, False)
    assert (config.max_total_tokens, config.max_seconds) == (500, 1.5)
    default = _run_flags().engine.loop.config()
    assert default.constrained is True and default.max_iterations is None and default.max_total_tokens is None


def test_the_renamed_flags_reach_the_run():
    args = ["run", "commongen", "dog, ball", "-m", "fake", "-o", "reply=A dog and a ball.", "--json"]
    args += ["--max-iters", "2", "--no-constrain", "--budget-tokens", "5000", "--budget-seconds", "30"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    config = json.loads(result.stdout)["config"]
    assert config["max_iterations"] == 2 and config["constrained"] is False
    assert config["max_total_tokens"] == 5000 and config["max_seconds"] == 30


def test_ways_is_a_comma_separated_list_on_run_and_eval(tmp_path):
    assert _run_flags("--ways", "program, steps").engine.loop.config().ways == ("program", "steps")
    assert _run_flags().engine.loop.config().ways is None  # unset: the task's own ways
    args = ["--data", "d", "--out", str(tmp_path / "o"), "--ways", "steps"]
    params = cli.commands["eval"].make_context("eval", ["commongen", *args]).params
    assert EvalFlags.of({k: v for k, v in params.items() if k != "task"}).engine.loop.config().ways == ("steps",)
    assert "--ways" not in [o for p in cli.commands["serve"].params for o in p.opts]  # per request there


@pytest.mark.parametrize(
    ("value", "says"), [("program,program", "way 'program' is named twice"), ("program,", "way '' is not a name")]
)
def test_a_bad_ways_is_a_one_line_usage_error(value, says):
    result = CliRunner().invoke(cli, ["run", "commongen", "dog, ball", "-m", "fake", "--ways", value])
    errors = [line for line in result.output.splitlines() if line.startswith("Error")]
    assert result.exit_code == 2 and len(errors) == 1, result.output
    assert errors[0].startswith("Error: Invalid value for '--ways': ") and says in errors[0], result.output


def test_serves_renamed_flags_are_its_caps():
    args = ["-m", "fake", "--max-iters", "3", "--budget-tokens", "900", "--budget-seconds", "5"]
    opts = ServeFlags.of(cli.commands["serve"].make_context("serve", args).params)
    caps = _settings(opts).caps
    assert (caps.max_iterations, caps.max_total_tokens, caps.max_seconds) == (3, 900, 5)


@pytest.fixture
def loads(monkeypatch) -> list[str]:
    """Every read of a task file."""
    seen: list[str] = []
    load = plugins._load_file

    def counted(spec: str) -> Task:
        seen.append(spec)
        return load(spec)

    monkeypatch.setattr(plugins, "_load_file", counted)
    return seen


def test_eval_loads_its_task_once(loads, tmp_path):
    data = tmp_path / "products.txt"
    data.write_text("green tea\nrain boots\n")
    args = ["eval", TAGLINE, "--data", str(data), "--out", str(tmp_path / "run"), "--no-cache"]
    result = CliRunner().invoke(cli, [*args, "-m", "fake", "-o", "reply=NONE"])
    assert result.exit_code == 0, result.output
    assert loads == [TAGLINE]


def test_run_loads_its_task_and_prepares_its_input_once(loads, monkeypatch):
    prepared: list[str] = []
    prepare = Task.prepare_input

    def counted(self: Task, text: str) -> str:
        prepared.append(text)
        return prepare(self, text)

    monkeypatch.setattr(Task, "prepare_input", counted)
    result = CliRunner().invoke(cli, ["run", TAGLINE, "  green tea ", "-m", "fake", "-o", "reply=NONE", "--json"])
    assert result.exit_code == 0, result.output
    assert loads == [TAGLINE] and prepared == ["  green tea "]
    assert json.loads(result.stdout)["input"] == "green tea"


def test_a_bad_input_fails_before_the_model_loads(tmp_path):
    missing = tmp_path / "missing.gguf"  # loading this model would fail with another error
    result = CliRunner().invoke(cli, ["run", "commongen", " ", "-m", f"gguf:{missing}"])
    assert result.exit_code != 0
    assert result.output.strip() == "Error: input for task 'commongen' is empty"


def test_the_engine_takes_a_prepared_input_only_from_its_own_task():
    task, other = get_task("acronym"), get_task("acronym")
    text = PreparedInput.of(task, "  Deep\n Nets  ")
    assert text == "Deep Nets" and type(prepared_input(task, text)) is str
    calls: list[str] = []
    other.prepare_input = lambda t: calls.append(t) or t  # type: ignore[method-assign]
    assert prepared_input(other, text) == "Deep Nets" and calls == ["Deep Nets"]
    assert prepared_input(task, " Deep  Nets ") == "Deep Nets"  # a plain string: prepared here


def _commands(group: click.Group, prefix: str = "") -> dict[str, click.Command]:
    found: dict[str, click.Command] = {}
    for name, command in group.commands.items():
        found[prefix + name] = command
        if isinstance(command, click.Group):
            found.update(_commands(command, f"{prefix}{name} "))
    return found


def test_dash_o_is_a_backend_option_in_every_command_that_has_it():
    # one meaning across commands: report's folder is --out alone (it was also -o there)
    having = {
        name: option.opts
        for name, command in _commands(cli).items()
        for option in command.params
        if "-o" in option.opts + option.secondary_opts
    }
    assert sorted(having) == ["eval", "run", "serve"]
    assert all(opts == ["--option", "-o"] for opts in having.values()), having
    assert "--out" in [o for p in cli.commands["report"].params for o in p.opts]
