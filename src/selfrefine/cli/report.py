"""``selfrefine report`` and ``selfrefine compare``: run folders' reports from the command line
(the numbers, plots and viewer are :mod:`selfrefine.evaluation.report`'s)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:  # the report's modules (numpy, matplotlib) load when a report is made, not on --help
    from ..evaluation.report_tables import RunReport

_RUN = click.Path(exists=True, file_okay=False, path_type=Path)


@click.command("report")
@click.argument("runs", nargs=-1, required=True, type=_RUN)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("report"),
    show_default=True,
    help="Folder for report.md, report.html and the plots.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the bootstrap intervals.")
def report_command(runs: tuple[Path, ...], out: Path, seed: int) -> None:
    """Tables, plots and an HTML trajectory viewer for one or more run folders."""
    from ..evaluation.report import COST_PLOT, HTML, MARKDOWN, METRIC_PLOT, write_report
    from ..evaluation.report_tables import mixed_tasks_warning, small_sample_warning
    from ..evaluation.storage import report_error

    try:
        reports = write_report(list(runs), out, seed=seed)
    except OSError as exc:  # a read-only or full --out: one line, not a traceback
        raise report_error(out, exc) from None
    for warning in (mixed_tasks_warning(reports), small_sample_warning(reports)):
        if warning:
            click.echo(warning, err=True)
    click.echo(compare_lines(reports))
    for name in (MARKDOWN, HTML, METRIC_PLOT, COST_PLOT):
        click.echo(f"wrote {out / name}")


def compare_lines(reports: Sequence[RunReport]) -> str:
    """One line per run: the headline numbers, for the terminal."""
    from ..evaluation.report_tables import delta_text, interval_text, number, unique_names

    return "\n".join(
        f"{name}: base {number(r.baseline)} -> final {number(r.final)} (Δ {delta_text(r.delta)} {interval_text(r.delta)}, n={r.n}"
        + (f", {r.failed} failed left out" if r.failed else "")
        + ")"
        for name, r in zip(unique_names(reports), reports)
    )


@click.command("compare")
@click.argument("run_a", type=_RUN)
@click.argument("run_b", type=_RUN)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the bootstrap intervals.")
def compare_command(run_a: Path, run_b: Path, seed: int) -> None:
    """Two run folders side by side: metric by iteration, gain with its CI, and cost."""
    from ..evaluation.report import compare_table

    click.echo(compare_table(run_a, run_b, seed=seed), nl=False)
