"""``selfrefine --help`` loads no model runtime, server, SDK or report library (issue 46, item 22:
it took 1.8 s idle). Which modules a command imports is deterministic, unlike its time."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("llama_cpp", "openai", "fastapi", "uvicorn", "starlette", "jsonschema", "numpy", "matplotlib")

PROBE = """
import json, sys
sys.argv = ["selfrefine", *sys.argv[1:]]
from selfrefine.cli import main
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in %r or m == "selfrefine.evaluation.report")))
"""


def _imported(*args: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE % (HEAVY,), *args], capture_output=True, text=True, timeout=120, check=True
    )
    return json.loads(done.stdout.splitlines()[-1])


def test_help_imports_no_heavy_library():
    assert _imported("--help") == []


def test_a_commands_help_imports_none_either():
    assert _imported("report", "--help") == []


def test_help_loads_no_command_module():
    # the commands' module pulls in the engine, the task contract, the checks, tasks and models: --help lists them without it
    probe = PROBE.replace('m.split(".")[0] in %r or m == "selfrefine.evaluation.report"', "m.startswith(%r)")
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            probe % (("selfrefine.engine", "selfrefine.task", "selfrefine.checks", "selfrefine.cli.commands"),),
            "--help",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert json.loads(done.stdout.splitlines()[-1]) == []
    assert "Commands:" in done.stdout and "Run Self-Refine on one INPUT" in done.stdout


def test_the_listed_summaries_are_the_commands_own():
    import click

    from selfrefine.cli.commands import cli
    from selfrefine.cli.group import COMMANDS

    assert set(COMMANDS) == set(cli.commands)
    for name, command in cli.commands.items():
        for limit in (40, 200):
            assert click.Command(name, help=COMMANDS[name]).get_short_help_str(limit) == command.get_short_help_str(
                limit
            ), name


def test_the_package_exports_load_on_first_use():
    import selfrefine

    assert set(selfrefine.__all__) <= set(dir(selfrefine))
    for name in selfrefine.__all__:
        assert getattr(selfrefine, name) is not None
    from selfrefine import SelfRefine
    from selfrefine.engine.loop import SelfRefine as Loop

    assert SelfRefine is Loop
