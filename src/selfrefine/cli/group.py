"""The ``selfrefine`` command group, loaded with click alone: ``selfrefine --help`` lists the
commands from :data:`COMMANDS`, and a command's module (the engine, its models and tasks)
loads when a command is named. Importing all of it took most of --help's 1.8 s (issue 46)."""

from __future__ import annotations

import importlib
import os
import sys
import traceback
import warnings
from typing import Any

import click

from .. import __version__

# Each command's summary, the first paragraph of its help: what `selfrefine --help` lists
# without loading the commands (tests/cli/test_startup_imports.py holds them to the commands).
COMMANDS = {
    "compare": "Two run folders side by side: metric by iteration, gain with its CI, and cost.",
    "datasets": "List the datasets `eval --data NAME` takes: name, task, rows, source, licence.",
    "eval": "Run TASK over a dataset into a durable, resumable run folder.",
    "models": "List the embedded model catalogue (size, file, installed) and the model backends.",
    "report": "Tables, plots and an HTML trajectory viewer for one or more run folders.",
    "run": "Run Self-Refine on one INPUT with TASK (a built-in name or a YAML task file).",
    "serve": "Serve Self-Refine over an OpenAI-compatible HTTP API, with a playground at /.",
    "tasks": "List the built-in tasks with their stop rules and metrics.",
}
_COMMANDS_MODULE = "selfrefine.cli.commands"


def _load_commands() -> None:
    importlib.import_module(_COMMANDS_MODULE)  # registers every command on `cli`


class Group(click.Group):
    """Turns library errors into one clear line and an exit code; --debug shows tracebacks."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*COMMANDS, *self.commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands:
            _load_commands()
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        if _COMMANDS_MODULE in sys.modules:
            return super().format_commands(ctx, formatter)
        limit = formatter.width - 6 - max(map(len, COMMANDS))
        rows = [(name, click.Command(name, help=text).get_short_help_str(limit)) for name, text in COMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(sorted(rows))

    def invoke(self, ctx: click.Context) -> Any:
        from ..backends.catalogue import ModelFallbackWarning
        from ..core.errors import SelfRefineError

        with warnings.catch_warnings():  # restores the filters and showwarning afterwards
            warnings.simplefilter("always", ModelFallbackWarning)  # on every run, never once
            warnings.showwarning = _show_warning
            try:
                return super().invoke(ctx)
            except SelfRefineError as exc:
                if _debug(ctx):
                    traceback.print_exc()
                click.echo(f"Error: {exc}", err=True)
                ctx.exit(exc.exit_code)
            except KeyboardInterrupt:
                click.echo("Interrupted.", err=True)
                ctx.exit(130)


_showwarning = warnings.showwarning


def _show_warning(message: Warning | str, category: type[Warning], *args: Any, **kwargs: Any) -> None:
    """A model fallback is one yellow line on stderr; other warnings print as usual."""
    from ..backends.catalogue import ModelFallbackWarning

    if issubclass(category, ModelFallbackWarning):
        click.secho(f"Warning: {message}", fg="yellow", err=True)
    else:
        _showwarning(message, category, *args, **kwargs)


def _debug(ctx: click.Context) -> bool:
    return bool((ctx.obj or {}).get("debug")) or os.environ.get("SELFREFINE_DEBUG") == "1"


@click.group(cls=Group)
@click.version_option(__version__, prog_name="selfrefine")
@click.option("--debug", is_flag=True, help="Show full tracebacks on errors.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Self-Refine: draft, critique and refine with one LLM until a stop rule holds."""
    ctx.ensure_object(dict)["debug"] = debug


def main() -> None:
    cli(prog_name="selfrefine")
