"""Quality benchmark, our "Table 1": every task and mode on fixed dev inputs -> docs/quality.md.

    .venv/bin/python benchmarks/quality.py                          # embedded model, full sizes
    .venv/bin/python benchmarks/quality.py --limit-scale 0.5 --model openai:local -o concurrency=4
    .venv/bin/python benchmarks/quality.py --report-only            # rebuild the doc from runs/quality/

Each (task, mode) is one run folder under --out, run in-process through the eval harness
(`selfrefine eval`'s own code: durable rows, resume, one shared response cache), one run
after the other. Modes:

- ``self``: the paper's Self-Refine (verifier_mode self, the task's select policy);
- ``hybrid+verified``: model critique plus the task's tool findings, select ``verified``
  (tasks with a verifier only);
- ``hybrid+not-worse``: hybrid feedback, and a refinement the verifier scores lower than
  the draft it refined is rejected and redone (``accept=not_worse``, select last accepted);
- ``not-worse+no-history``: hybrid+not-worse with ``history=none`` and select ``verified``:
  a worse or unchanged refinement (sampled tasks) is redone from the current draft alone with
  the next seed, so the loop keeps drawing refinements and keeps only those that do not lose;
- ``generic`` / ``none``: the paper's feedback ablations (commongen and sentiment only).

The one-step baseline is not a run of its own: it is draft 0 of each run (the same draft in
every mode, since generation is identical and cached). Dialogue has no code metric, so it is
scored by the same model as pairwise judge (returned output vs draft 0, both orders).

Inputs (fixed, never shuffled): the first N rows of each dev file in --data-dir; sentiment
takes the first N/2 rows of each half of the Yelp file (first half -> positive, second ->
negative); codeopt takes the first N bundled programs (selfrefine.tasks.codeopt_bench, the
same rows benchmarks/export_codeopt.py writes); readability takes PIE ``input`` programs; chat
takes benchmarks/data/chat_requests.jsonl (IFEval-style requests, scored by the share of each
row's instruction checks passed).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import shlex
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from _cli import names
from rich.console import Console

from selfrefine.backends.registry import get_backend
from selfrefine.core.config import RefineConfig
from selfrefine.core.errors import SelfRefineError
from selfrefine.engine.loop import SelfRefine
from selfrefine.evaluation.datasets import Example, load_examples
from selfrefine.evaluation.driver import run_eval, run_meta
from selfrefine.evaluation.judge import DEFAULT_CRITERIA, PairwiseJudge, Preference
from selfrefine.evaluation.report import RunReport, run_table
from selfrefine.evaluation.response_cache import CachedBackend, ResponseCache
from selfrefine.evaluation.runstore import RunStore
from selfrefine.evaluation.stats import mean_known, paired_bootstrap_diff
from selfrefine.tasks import get_task

ROOT = Path(__file__).resolve().parent.parent
TASKS = (
    "gsm8k",
    "commongen",
    "sentiment",
    "acronym",
    "readability",
    "codeopt",
    "dialogue",
    "toxicity",
    "story",
    "chat",
)
SIZES = {
    "gsm8k": 30,
    "commongen": 20,
    "sentiment": 16,
    "acronym": 16,
    "readability": 10,
    "codeopt": 10,
    "dialogue": 10,
    "toxicity": 12,
    "story": 8,
    "chat": 20,
}
FILES = {
    "gsm8k": "gsm8k.dev.jsonl",
    "commongen": "commongen_hard.dev.jsonl",
    "sentiment": "yelp_extreme.dev.jsonl",
    "acronym": "acronyms.dev.tsv",
    "readability": "pie_codenet_python.dev.jsonl",
    "dialogue": "fed.dev.json",
}
# tasks whose dev split ships inside the package (written for it: see the task's module)
PACKAGED = {"toxicity": "toxicity.dev.jsonl", "story": "story.dev.jsonl"}
# written for this benchmark: IFEval-style requests, each row's instruction checks its reference
BENCHMARK_DATA = {"chat": ROOT / "benchmarks" / "data" / "chat_requests.jsonl"}
MODES: dict[str, dict[str, str]] = {
    "self": {"verifier_mode": "self"},
    "hybrid+verified": {"verifier_mode": "hybrid", "select": "verified"},
    # accept only refinements the verifier does not score lower (the rest are redone)
    "hybrid+not-worse": {"verifier_mode": "hybrid", "accept": "not_worse"},
    # the same with the refiner shown only the current draft: a rejected (worse or echoed)
    # attempt is redone from it with the next seed instead of being copied from the prompt
    "not-worse+no-history": {"verifier_mode": "hybrid", "select": "verified", "accept": "not_worse", "history": "none"},
    "generic": {"feedback_mode": "generic"},
    "none": {"feedback_mode": "none"},
}
ABLATION_TASKS = {"commongen", "sentiment"}  # the only tasks run in the generic/none modes
# the same model judges output vs one-step draft: dialogue has no code metric, story's
# code metric checks only constraints
JUDGED = {"dialogue", "story"}
SIDECAR = "quality_run.json"  # per run folder: mode, selection, model, wall time per invocation
PLOT = "quality_iterations.png"
MACHINE = f"{platform.platform()}, nproc {os.cpu_count()}, Python {platform.python_version()}"
SUMMARY = "quality_summary.json"


# --- what to run ----------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="embedded", help="model spec: embedded | gguf:PATH | openai:NAME | fake")
    p.add_argument("-o", "--option", action="append", default=[], metavar="KEY=VALUE", help="backend option")
    p.add_argument("--data-dir", type=Path, default=ROOT.parent / "shared" / "datasets")
    p.add_argument("--out", type=Path, default=ROOT / "runs" / "quality", help="parent of the run folders")
    p.add_argument("--doc", type=Path, default=ROOT / "docs" / "quality.md", help="the PNG and JSON go beside it")
    p.add_argument("--cache", type=Path, help="response cache file (default: the harness default)")
    p.add_argument("--tasks", default=",".join(TASKS), help="comma-separated subset of the tasks")
    p.add_argument("--modes", default=",".join(MODES), help="comma-separated subset of " + ", ".join(MODES))
    p.add_argument("--sizes", default="", help="per-task sizes, e.g. gsm8k=10,commongen=5 (after --limit-scale)")
    p.add_argument("--limit-scale", type=float, default=1.0, help="scale every default size (at least 1)")
    p.add_argument("--max-iters", type=int, help="maximum refinements (default: the task's)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--concurrency", type=int, help="examples in flight (default: the harness default)")
    p.add_argument("--report-only", action="store_true", help="only rebuild the doc from the run folders in --out")
    p.add_argument(
        "--notes",
        type=Path,
        default=ROOT / "docs" / "quality_notes.md",
        help="hand-written reading of the numbers, included after the overview when the file exists",
    )
    args = p.parse_args(argv)
    args.command = shlex.join(["python", "benchmarks/quality.py", *(sys.argv[1:] if argv is None else argv)])
    args.tasks = names(args.tasks, TASKS, "task")
    args.modes = names(args.modes, tuple(MODES), "mode")
    args.sizes = sizes(args.sizes, args.limit_scale)
    args.option = {k.strip(): v.strip() for k, _, v in (o.partition("=") for o in args.option)}
    return args


def sizes(overrides: str, scale: float) -> dict[str, int]:
    out = {task: max(1, round(n * scale)) for task, n in SIZES.items()}
    for item in filter(None, (s.strip() for s in overrides.split(","))):
        task, _, n = item.partition("=")
        if task not in SIZES or not n.isdigit() or int(n) < 1:
            sys.exit(f"bad --sizes item {item!r}: expected TASK=N with N >= 1, TASK one of {', '.join(TASKS)}")
        out[task] = int(n)
    return out


def modes_for(task: str, modes: list[str]) -> list[str]:
    """The hybrid and not-worse modes need a verifier; the feedback ablations run on two tasks only."""
    verifier = get_task(task).has_verifier
    return [
        m
        for m in modes
        if (not m.startswith(("hybrid", "not-worse")) or verifier)
        and (m not in ("generic", "none") or task in ABLATION_TASKS)
    ]


def select_examples(task: str, n: int, data_dir: Path) -> tuple[list[Example], str, str]:
    """The fixed inputs of a task: (examples, data source, what was taken)."""
    if task == "codeopt":
        from selfrefine.tasks.codeopt_bench import load_benchmark

        rows = [
            Example(id=p.id, input=p.slow, meta={"problem_id": p.id, "target": p.fast}) for p in load_benchmark()[:n]
        ]
        return rows, "selfrefine.tasks.codeopt_bench (bundled)", f"the first {len(rows)} bundled programs"
    path = data_path(task, data_dir)
    if task != "sentiment":
        rows = load_examples(task, path, n)
        return rows, str(path), f"the first {len(rows)} rows of {path.name}"
    rows = load_examples(task, path)
    half, first = len(rows) // 2, (n + 1) // 2
    picked = rows[:first] + rows[half : half + n - first]
    last = half + n - first - 1
    return picked, str(path), f"rows 0-{first - 1} (to positive) and {half}-{last} (to negative) of {path.name}"


def data_path(task: str, data_dir: Path) -> Path:
    """The dev file of a task: packaged with selfrefine, or in --data-dir."""
    if task in BENCHMARK_DATA:
        return BENCHMARK_DATA[task]
    if task in PACKAGED:
        from selfrefine.tasks.toxicity import DATA

        return DATA / PACKAGED[task]
    return (data_dir / FILES[task]).resolve()


def slug(task: str, mode: str) -> str:
    return f"{task}-{mode.replace('+', '-')}"


# --- running --------------------------------------------------------------------------------


def run_one(task_name: str, mode: str, config: RefineConfig, args: argparse.Namespace, cache_db: ResponseCache) -> Path:
    """One (task, mode) run folder, resumed if it exists; the sidecar records this invocation."""
    examples, data, selection = select_examples(task_name, args.sizes[task_name], args.data_dir)
    task = get_task(task_name)
    backend = get_backend(args.model, **args.option)
    describe = backend.describe()  # before the cache wraps it
    engine = SelfRefine(task, backend, config=config, wrap=lambda b: CachedBackend(b, cache_db))
    judge = None
    if task_name in JUDGED:  # the same (cached) backend as judge
        judge = PairwiseJudge(
            engine.backends["generate"], seed=args.seed, criteria=task.judge_criteria or DEFAULT_CRITERIA
        )
    folder = args.out / slug(task_name, mode)
    store = RunStore(folder)
    try:  # the folder's lock, held until this run ends (as `selfrefine eval` holds it)
        store.start(run_meta(folder.name, engine, data, len(examples)))
        stale = store.recorded_ids() - {e.id for e in examples}
        if stale:
            print(
                f"warning: {folder} holds {len(stale)} rows outside this selection; they are reported too", flush=True
            )
        todo = len(examples) - len(store.finished_ids() & {e.id for e in examples})  # failed rows are retried
        started = time.perf_counter()
        asyncio.run(
            run_eval(
                engine,
                examples,
                store,
                concurrency=args.concurrency or engine.examples_in_flight(),
                console=Console(stderr=True),
                judge=judge,
            )
        )
        wall = round(time.perf_counter() - started, 2)
    finally:
        store.release()
    record_invocation(
        folder,
        {"task": task_name, "mode": mode, "selection": selection, "model": describe},
        {"date": now(), "wall_s": wall, "examples_run": todo, "machine": MACHINE, "command": args.command},
    )
    return folder


def record_invocation(folder: Path, about: dict[str, Any], invocation: dict[str, Any]) -> None:
    side = read_sidecar(folder)
    side.update(about)
    side["invocations"] = [*side.get("invocations", []), invocation]
    (folder / SIDECAR).write_text(json.dumps(side, indent=2), encoding="utf-8")


def read_sidecar(folder: Path) -> dict[str, Any]:
    path = folder / SIDECAR
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def run_all(args: argparse.Namespace) -> None:
    cache_db = ResponseCache(args.cache)
    plan = [(t, m) for t in args.tasks for m in modes_for(t, args.modes)]
    for i, (task, mode) in enumerate(plan, start=1):
        tag = f"[{i}/{len(plan)}] {task} {mode}"
        try:  # a mode whose settings do not validate (yet) is skipped, not fatal
            config = RefineConfig.build(max_iterations=args.max_iters, seed=args.seed, **MODES[mode])
        except SelfRefineError as exc:
            print(f"{tag}: skipped: {exc}", flush=True)
            continue
        if task != "codeopt" and not data_path(task, args.data_dir).exists():
            print(f"{tag}: skipped: no {data_path(task, args.data_dir)}", flush=True)
            continue
        folder = run_one(task, mode, config, args, cache_db)
        wall = read_sidecar(folder)["invocations"][-1]["wall_s"]
        print(f"{tag}: {headline(run_table(folder))}; wall {wall:.1f} s -> {folder}", flush=True)
    cache_db.close()


# --- the report -----------------------------------------------------------------------------

Run = tuple[str, str, RunReport, dict[str, Any]]  # task, mode, numbers, sidecar


def collect(out: Path) -> list[Run]:
    runs = []
    for meta in out.glob("*/meta.json"):
        folder = meta.parent
        side = read_sidecar(folder)
        report = run_table(folder)
        runs.append((report.task, side.get("mode", folder.name.removeprefix(report.task + "-")), report, side))
    order = {name: i for i, name in enumerate([*TASKS, *MODES])}
    return sorted(runs, key=lambda r: (order.get(r[0], 99), r[0], order.get(r[1], 99), r[1]))


def _f(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def judge_text(p: Preference | None) -> str:
    return "-" if not p else str(p)


def headline(r: RunReport) -> str:
    if r.baseline is None and r.judge_preference:
        return f"n={r.n}, failed {r.failed}, judge {judge_text(r.judge_preference)}"
    delta = "-" if r.delta is None else str(r.delta)
    return f"n={r.n}, failed {r.failed}, {_f(r.baseline)} -> {_f(r.final)} (Δ {delta})"


def wall_s(side: dict[str, Any]) -> float | None:
    """Wall time of the invocations that ran examples (a resume with nothing left adds none)."""
    invocations = side.get("invocations", [])
    return sum(i["wall_s"] for i in invocations if i.get("examples_run")) if invocations else None


def md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return lines + ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows] + [""]


def overview(runs: list[Run]) -> list[str]:
    modes = [m for m in MODES if any(r[1] == m for r in runs)]
    rows = []
    for task in dict.fromkeys(r[0] for r in runs):
        mine = {r[1]: r[2] for r in runs if r[0] == task}
        first = next(iter(mine.values()))
        cells = [cell(mine[m]) if m in mine else "" for m in modes]
        rows.append([task, first.metric_name, str(first.n), *cells])
    return md_table(["task", "metric", "n", *modes], rows)


def cell(r: RunReport) -> str:
    if r.baseline is None and r.judge_preference:
        return judge_text(r.judge_preference)
    return f"{_f(r.baseline)} → {_f(r.final)} ({'-' if r.delta is None else f'{r.delta.estimate:+.3f}'})"


def metric_parts(task: str, folder: Path) -> dict[str, tuple[list[float], list[float]]]:
    """Part -> (one-step values, returned values) per example, for tasks with a metric_parts hook
    (sentiment's graded VADER score, toxicity's classifier and content parts); {} otherwise."""
    hook = getattr(get_task(task), "metric_parts", None)
    out: dict[str, tuple[list[float], list[float]]] = {}
    if hook is None:
        return out
    for row in RunStore(folder).rows():
        result = row.result
        if result is None or not result.iterations or result.output is None:
            continue  # a failed example has no output to score
        first, last = hook(result.input, result.iterations[0].draft), hook(result.input, result.output)
        for key in first:
            out.setdefault(key, ([], []))[0].append(first[key])
            out[key][1].append(last[key])
    return out


def parts_cell(base: list[float], final: list[float]) -> str:
    delta = paired_bootstrap_diff(base, final)
    return f"{_f(mean_known(base))} → {_f(mean_known(final))} ({'-' if delta is None else str(delta)})"


def parts_table(task: str, runs: list[Run]) -> list[str]:
    """One row per mode: each part's one-step → returned mean (paired Δ [95% CI])."""
    per_mode = [(mode, metric_parts(task, Path(r.folder))) for t, mode, r, _ in runs if t == task]
    keys = list(dict.fromkeys(k for _, parts in per_mode for k in parts))
    if not keys:
        return []
    rows = [
        [
            mode,
            str(len(next(iter(parts.values()))[0])) if parts else "0",
            *[parts_cell(*parts[k]) if k in parts else "-" for k in keys],
        ]
        for mode, parts in per_mode
    ]
    doc = getattr(get_task(task), "metric_parts_doc", "")
    return [
        f"Metric parts ({doc}); one-step → returned (Δ [95% CI]):" if doc else "Metric parts:",
        "",
        *md_table(["mode", "n scored", *keys], rows),
    ]


def task_section(task: str, runs: list[Run]) -> list[str]:
    mine = [r for r in runs if r[0] == task]
    k = max(len(r[2].by_iteration) for r in mine)
    metric = any(r[2].baseline is not None for r in mine)
    judged = any(r[2].judge_preference for r in mine)
    header = ["mode", "n", "failed"]
    header += ["one-step (y0)", "returned", "Δ", "95% CI", *[f"y{t}" for t in range(k)]] if metric else []
    header += ["judge: returned vs one-step"] if judged else []
    header += ["calls/ex", "prompt tok/ex", "completion tok/ex", "model s/ex", "wall s"]
    rows = []
    for _, mode, r, side in mine:
        row = [mode, str(r.n), str(r.failed)]
        if metric:
            ci = "-" if r.delta is None else f"[{r.delta.low:+.3f}, {r.delta.high:+.3f}]"
            iters = [_f(r.by_iteration[t]) if t < len(r.by_iteration) else "" for t in range(k)]
            row += [_f(r.baseline), _f(r.final), "-" if r.delta is None else f"{r.delta.estimate:+.3f}", ci, *iters]
        row += [judge_text(r.judge_preference)] if judged else []
        row += [
            _f(r.cost.calls, 2),
            _f(r.cost.prompt_tokens, 1),
            _f(r.cost.completion_tokens, 1),
            _f(r.cost.seconds, 2),
            _f(wall_s(side), 1),
        ]
        rows.append(row)
    selection = mine[0][3].get("selection", "?")
    return [
        f"### {task}: {mine[0][2].metric_name}",
        "",
        f"Inputs: {selection}.",
        "",
        *md_table(header, rows),
        *parts_table(task, runs),
    ]


def models_and_machines(runs: list[Run]) -> tuple[list[str], list[str], list[str]]:
    models, machines, commands = {}, {}, {}
    for _, _, r, side in runs:
        meta = RunStore(r.folder).meta()
        text = f"{side.get('model') or r.model} — id `{meta.model_ids.get('generate', '-')}`"
        file = getattr(meta, "model_files", {}).get("generate")  # role -> name, path, size, sha256
        if file:
            text += f", file `{Path(file['path']).name}` ({file['size']:,} bytes, sha256 `{file.get('sha256') or '-'}`)"
        models[text] = None
        for inv in side.get("invocations", []):
            machines[inv["machine"]] = None
            commands[inv["command"]] = None
    return list(models), list(machines), list(commands)


def show(path: Path) -> str:
    """A path as the doc shows it: relative to the repository root when inside it."""
    return str(path.resolve().relative_to(ROOT)) if path.resolve().is_relative_to(ROOT) else str(path)


def markdown(runs: list[Run], args: argparse.Namespace) -> str:
    models, machines, commands = models_and_machines(runs)
    lines = [
        "# Quality: Self-Refine vs one-step on the dev inputs",
        "",
        f"Generated {now()} by `benchmarks/quality.py` from {len(runs)} run folders in `{show(args.out)}` "
        f"(raw runs are not committed; the numbers are also in `{SUMMARY}`).",
        "",
        *[f"- model: {m}" for m in models],
        *[f"- machine: {m}" for m in machines],
        "",
        "Commands:",
        "",
        "```bash",
        *commands,
        shlex.join(
            ["python", "benchmarks/quality.py", "--report-only", "--out", show(args.out), "--doc", show(args.doc)]
        ),
        "```",
        "",
        'The one-step baseline is draft 0 (iteration 0) of the same run; "returned" is the output the run\'s '
        "select policy returned. Δ is the paired mean of (returned − one-step) over examples, with a 95% "
        "percentile bootstrap interval over examples (2000 resamples, seeded). yT is the mean metric after T "
        "refinements, a stopped example keeping its last draft. Costs are per example, summed over the "
        "model calls; wall s is the wall time of the invocations that produced the run. Failed examples "
        "(no result, or stopped by a backend error) count in n; dialogue is scored by the same model as a "
        "pairwise judge (a win needs both orders).",
        "",
        "## Overview (one-step → returned (Δ); judge: returned vs one-step)",
        "",
        *overview(runs),
        f"![metric per iteration]({PLOT})",
        "",
    ]
    if args.notes and args.notes.is_file():  # the analysis, kept apart so a rerun does not erase it
        lines += [args.notes.read_text(encoding="utf-8").strip(), ""]
    lines += ["## Per task", ""]
    for task in dict.fromkeys(r[0] for r in runs):
        lines += task_section(task, runs)
    return "\n".join(lines) + "\n"


def summary_json(runs: list[Run], args: argparse.Namespace) -> dict[str, Any]:
    models, machines, commands = models_and_machines(runs)
    entries = [
        {
            "task": task,
            "mode": mode,
            "folder": Path(r.folder).name,
            "metric": r.metric_name,
            "n": r.n,
            "failed": r.failed,
            "one_step": r.baseline,
            "returned": r.final,
            "delta": r.delta.model_dump() if r.delta else None,
            "by_iteration": r.by_iteration,
            "per_example": r.cost.model_dump(),
            "judge": r.judge_preference.model_dump() if r.judge_preference else None,
            "stop_reasons": r.stop_reasons,
            "wall_s": wall_s(side),
            "inputs": side.get("selection"),
            "parts": parts_json(task, Path(r.folder)),
        }
        for task, mode, r, side in runs
    ]
    return _round({"generated": now(), "models": models, "machines": machines, "commands": commands, "runs": entries})


def parts_json(task: str, folder: Path) -> dict[str, Any] | None:
    parts = metric_parts(task, folder)
    return {
        k: {
            "one_step": mean_known(b),
            "returned": mean_known(f),
            "delta": (d.model_dump() if (d := paired_bootstrap_diff(b, f)) else None),
        }
        for k, (b, f) in parts.items()
    } or None


def _round(x: Any) -> Any:
    if isinstance(x, float):
        return round(x, 4)
    if isinstance(x, dict):
        return {k: _round(v) for k, v in x.items()}
    return [_round(v) for v in x] if isinstance(x, list) else x


def compact_json(data: dict[str, Any]) -> str:
    """Indented at the top level, one line per run."""
    head = {k: v for k, v in data.items() if k != "runs"}
    runs = ",\n".join("  " + json.dumps(run, ensure_ascii=False) for run in data["runs"])
    return json.dumps(head, indent=1, ensure_ascii=False)[:-2] + f',\n "runs": [\n{runs}\n ]\n}}\n'


def plot(runs: list[Run], path: Path) -> None:
    from matplotlib.figure import Figure

    tasks = list(dict.fromkeys(r[0] for r in runs))
    cols = min(4, len(tasks))
    rows = math.ceil(len(tasks) / cols)
    fig = Figure(figsize=(3.6 * cols, 3.0 * rows), dpi=100)
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for ax, task in zip(axes, tasks):
        mine = [r for r in runs if r[0] == task]
        for _, mode, r, _ in mine:
            if any(y is not None for y in r.by_iteration):
                ax.plot(
                    range(len(r.by_iteration)),
                    [math.nan if y is None else y for y in r.by_iteration],
                    marker="o",
                    label=mode,
                )
        known = [y for r in mine for y in r[2].by_iteration if y is not None]
        if known and 0 <= min(known) and max(known) <= 1:
            ax.set_ylim(-0.05, 1.05)
        if ax.lines:
            ax.legend(fontsize="x-small")
        else:
            ax.text(
                0.5,
                0.5,
                "no code metric\n(judge preference: see table)",
                ha="center",
                va="center",
                transform=ax.transAxes,
                fontsize="small",
            )
            ax.set_yticks([])
        ax.set_title(task, fontsize="small")
        ax.set_xlabel("iteration (refinements)", fontsize="small")
        ax.set_ylabel("mean metric", fontsize="small")
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.grid(alpha=0.3)
    for ax in axes[len(tasks) :]:
        ax.set_visible(False)
    fig.tight_layout()
    fig.savefig(path, format="png", metadata={"Software": None})


def write_report(args: argparse.Namespace) -> None:
    runs = collect(args.out)
    if not runs:
        sys.exit(f"no run folders in {args.out}")
    args.doc.parent.mkdir(parents=True, exist_ok=True)
    plot(runs, args.doc.parent / PLOT)
    args.doc.write_text(markdown(runs, args), encoding="utf-8")
    (args.doc.parent / SUMMARY).write_text(compact_json(summary_json(runs, args)), encoding="utf-8")
    print(f"wrote {args.doc}, {args.doc.parent / PLOT}, {args.doc.parent / SUMMARY}")


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    try:
        if not args.report_only:
            run_all(args)
        write_report(args)
    except SelfRefineError as exc:  # e.g. --out holds a run of other settings: one clear line
        sys.exit(f"error: {exc}")


if __name__ == "__main__":
    main()
