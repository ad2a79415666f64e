"""Help that agrees with the code (issue 39, item 16): what `run --help` says auto does, help
on every option, a stop reason printed as its value, and --preset best refused in flags."""

from __future__ import annotations

import json

import click
from click.testing import CliRunner

from selfrefine import SelfRefine, StopReason
from selfrefine.backends import FakeBackend
from selfrefine.cli.commands import cli
from selfrefine.engine.drafting import auto_rule as strategy

CONCEPTS = "dog, frisbee, catch"


def _help(*command: str) -> str:
    return " ".join(CliRunner().invoke(cli, [*command, "--help"], terminal_width=400).output.split())


def test_auto_help_says_it_starts_with_one_sample_as_the_engine_does():
    # was: "start with 2 samples", while a verifier task's first wave is one sample
    text = _help("run")
    assert "start with 2 samples" not in text
    assert "the first draft starts with 1 sample" in text and f"starts with {strategy.START_WIDTH} votes" in text
    # and the engine does so: an easy commongen input stops at its one passing sample
    engine = SelfRefine(
        "commongen", FakeBackend(["A dog can catch a frisbee."]), strategy="auto", max_total_tokens=5000
    )
    result = engine.run(CONCEPTS)
    assert [c.role for c in result.calls] == ["generate"] and result.stop_reason is StopReason.VERIFIED


def test_every_option_of_every_command_has_help():
    # was: --seed (run, eval) and --port (serve) had none
    missing = []
    for name, command in cli.commands.items():
        for param in command.params:
            if isinstance(param, click.Option) and not param.help and "--help" not in param.opts:
                missing.append(f"{name} {param.opts[0]}")
    assert missing == []
    assert "Seed of the model's sampling" in _help("run") and "Port to listen on" in _help("serve")


def test_a_stop_reason_prints_as_its_value():
    # was: print(result.stop_reason) -> StopReason.NO_CHANGE
    assert str(StopReason.NO_CHANGE) == "no_change" and f"{StopReason.VERIFIED}" == "verified"
    assert f"{StopReason.FEEDBACK:>10}" == "  feedback"


def test_preset_best_on_a_task_file_is_refused_in_flags(tmp_path):
    # was: "give the options yourself (e.g. samples=4, max_iterations=1, verifier_mode='hybrid')"
    path = tmp_path / "words.yaml"
    path.write_text(json.dumps({"name": "words", "generate": "Say {{ input }}", "feedback": "f", "refine": "r"}))
    out = CliRunner().invoke(cli, ["run", str(path), "dog", "-m", "fake", "--preset", "best"])
    assert out.exit_code == 2 and len(out.output.strip().splitlines()) == 1
    assert "--samples 4 --max-iters 1 --verifier-mode hybrid" in out.output
    assert "samples=4" not in out.output and "max_iterations" not in out.output
    data = tmp_path / "in.txt"
    data.write_text("dog\n")
    args = ["eval", str(path), "--data", str(data), "--out", str(tmp_path / "r"), "-m", "fake", "--preset", "best"]
    ran = CliRunner().invoke(cli, args)
    assert ran.exit_code == 2 and "--samples 4" in ran.output and not (tmp_path / "r").exists()
