"""The loop's options have one source, RefineConfig: each option's type, default, bounds (its
one cap), CLI flag spellings, help and API exposure are declared on its field, and the CLI's
flags and the API's request options are built from it, take both spellings of a choice and
print one."""

from __future__ import annotations

import re
from pathlib import Path

import annotated_types
import click
import pytest
from click.testing import CliRunner

from selfrefine.cli.commands import cli
from selfrefine.cli.options import LOOP_OPTIONS, LoopFlags, config_of
from selfrefine.core.config import Offer, RefineConfig, choices, offers
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


def test_each_flag_is_its_options_declaration():
    flags = _flags()
    declared = {name: offer for name, offer in offers().items() if offer.flags}
    assert list(flags) == list(declared)  # in the declarations' order, none besides
    for name, offer in declared.items():
        opts = flags[name].opts
        if flags[name].secondary_opts:  # click splits "--x/--no-x" into opts and secondary_opts
            opts = ["/".join([*opts, *flags[name].secondary_opts])]
        assert tuple(opts) == offer.flags and flags[name].help == offer.help, name
    assert set(RefineConfig.model_fields) - set(declared) == {  # the library's (and eval's) alone
        "stop_on_feedback", "stop_on_no_change", "parse_retries", "backend_retries", "retry_base_delay",
        "retry_max_delay", "record_prompts",
    }  # fmt: skip


def _edges(name: str) -> list[tuple[float, bool]]:
    """Values at and past each of an option's declared bounds, with whether each is allowed."""
    step = 1 if RefineConfig.model_fields[name].annotation in (int, int | None) else 0.5
    edges = []
    for m in RefineConfig.model_fields[name].metadata:
        for kind, allowed, past in (("ge", True, -step), ("gt", False, step), ("le", True, step), ("lt", False, -step)):
            if hasattr(m, kind):
                bound = getattr(m, kind)
                edges += [(bound, allowed), (bound + past, kind in ("gt", "lt"))]
    return edges


BOUNDED = [name for name, offer in offers().items() if offer.flags and _edges(name)]


@pytest.mark.parametrize("name", BOUNDED)
def test_the_cli_refuses_exactly_what_the_library_refuses_at_each_bound(name):
    # one cap per option: the flag's range is the field's (samples: 16 taken, 17 refused, by both)
    assert {"max_iterations", "samples", "max_total_tokens", "max_seconds", "max_tokens"} <= set(BOUNDED)
    flag = _flags()[name].opts[0]
    for value, allowed in _edges(name):
        try:
            LoopFlags.of(_probe().make_context("probe", [flag, str(value)]).params).config()
            by_cli = True
        except click.BadParameter:
            by_cli = False
        try:
            RefineConfig.build(**{name: value})
            by_library = True
        except ConfigError:
            by_library = False
        assert by_cli == by_library == allowed, (name, value)


def _probe() -> click.Command:
    @click.command()
    @LoopFlags.options()
    def probe(**_: object) -> None:
        pass

    return probe


@pytest.mark.parametrize("command", ["run", "eval", "serve"])
def test_the_library_s_names_are_also_flags(command):
    short = ["--max-iters", "2", "--budget-tokens", "500", "--budget-seconds", "1.5"]
    long = ["--max-iterations", "2", "--max-total-tokens", "500", "--max-seconds", "1.5"]
    head = {"run": ["commongen", "dog"], "eval": ["commongen", "--data", "d", "--out", "o"], "serve": []}[command]
    params = [cli.commands[command].make_context(command, [*head, *args]).params for args in (short, long)]
    names = ("max_iterations", "max_total_tokens", "max_seconds")
    assert [tuple(p[n] for n in names) for p in params] == [(2, 500, 1.5)] * 2
    help_text = " ".join(CliRunner().invoke(cli, [command, "--help"]).output.split())
    for spelled in (
        "--max-iters, --max-iterations",
        "--budget-tokens, --max-total-tokens",
        "--budget-seconds, --max-seconds",
    ):
        assert spelled in help_text, spelled


def test_the_request_options_have_the_configs_types_and_bounds():
    assert set(LoopOptions.model_fields) == {*REQUEST_OPTIONS, "model"}
    assert REQUEST_OPTIONS == tuple(name for name, offer in offers().items() if offer.api)
    for name in REQUEST_OPTIONS:
        ours, theirs = LoopOptions.model_fields[name], RefineConfig.model_fields[name]
        lower = [m for m in theirs.metadata if not isinstance(m, (annotated_types.Le, annotated_types.Lt, Offer))]
        assert ours.metadata == lower, name  # ge/gt bounds; upper ones are the server's caps
        assert ours.default is None
    for name in ("select", "history", "accept", "feedback_mode", "verifier_mode"):
        for value in choices(name):
            assert getattr(LoopOptions(**{name: value}), name) == value
        with pytest.raises(ValueError):
            LoopOptions(**{name: "nope"})


def test_the_readme_lists_the_request_options_as_declared():
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    listed = readme.split('- Options per request (`extra_body={"selfrefine": {...}}`): ')[1].split(" (an allowed")[0]
    assert re.findall(r"`(\w+)`", listed) == [*REQUEST_OPTIONS, "model"]


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
