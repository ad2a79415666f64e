"""The loop's options have one source, RefineConfig: the CLI's flags and the API's request
options are built from it, take both spellings of a choice and print one."""

from __future__ import annotations

import annotated_types
import click
import pytest
from click.testing import CliRunner

from selfrefine.cli.commands import cli
from selfrefine.cli.options import LOOP_OPTIONS, LoopFlags, config_of
from selfrefine.core.config import RefineConfig, choices
from selfrefine.core.errors import ConfigError
from selfrefine.engine.drafting.registry import strategy_names
from selfrefine.service.schemas import REQUEST_OPTIONS, LoopOptions


def _flags() -> dict[str, click.Option]:
    @click.command()
    def probe(**_: object) -> None:
        pass

    for option in LOOP_OPTIONS:
        probe = option(probe)
    return {p.name: p for p in probe.params if isinstance(p, click.Option)}


def test_every_loop_flag_sets_a_config_field_with_its_choices_and_default():
    flags = _flags()
    assert set(flags) == {f.name for f in LoopFlags.flags()}  # each flag is one declared field
    for name, flag in flags.items():
        field = RefineConfig.model_fields[name]  # named as the config field it fills: no renames
        if isinstance(flag.type, click.Choice):
            # a strategy is any registered one (engine/drafting/registry.py), the others RefineConfig's values
            expected = strategy_names() if name == "strategy" else choices(name)
            assert tuple(flag.type.choices) == expected, name
        given = flag.default if type(flag.default).__name__ != "Sentinel" else None  # click 8.3: UNSET
        if given is not None and not flag.is_flag and not flag.multiple:
            assert given == field.default, name


def test_the_request_options_have_the_configs_types_and_bounds():
    assert set(LoopOptions.model_fields) == {*REQUEST_OPTIONS, "model"}
    for name in REQUEST_OPTIONS:
        ours, theirs = LoopOptions.model_fields[name], RefineConfig.model_fields[name]
        lower = [m for m in theirs.metadata if not isinstance(m, (annotated_types.Le, annotated_types.Lt))]
        assert ours.metadata == lower, name  # ge/gt bounds; upper ones are the server's caps
        assert ours.default is None
    for name in ("select", "history", "accept", "feedback_mode", "verifier_mode"):
        for value in choices(name):
            assert getattr(LoopOptions(**{name: value}), name) == value
        with pytest.raises(ValueError):
            LoopOptions(**{name: "nope"})


def test_a_choice_takes_both_spellings_everywhere_and_prints_one():
    assert RefineConfig(accept="not-worse") == RefineConfig(accept="not_worse")
    assert LoopOptions(accept="not-worse").accept == "not_worse"
    assert config_of({"accept": "not-worse"}).accept == "not_worse"
    with pytest.raises(ConfigError, match="invalid option accept: Input should be 'any' or 'not_worse'"):
        RefineConfig.build(accept="better")


@pytest.mark.parametrize("spelling", ["not-worse", "not_worse"])
def test_the_cli_takes_both_spellings(spelling, tmp_path):
    result = CliRunner().invoke(
        cli,
        [
            "run",
            "commongen",
            "dog, ball",
            "-m",
            "fake",
            "-o",
            "reply=A dog and a ball.",
            "--select",
            "verified",
            "--accept",
            spelling,
            "--max-iters",
            "1",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    assert '"accept":"not_worse"' in result.output
    help_text = CliRunner().invoke(cli, ["run", "--help"]).output
    assert "not_worse" in help_text and "[any|not_worse]" in help_text.replace("\n", "")
