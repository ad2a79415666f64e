"""Peers side by side: selfrefine vs DSPy Refine / BestOfN / Predict, same model and inputs.

    .venv/bin/python benchmarks/vs_peers.py                       # everything, full sizes
    .venv/bin/python benchmarks/vs_peers.py --limit-commongen 5 --limit-gsm8k 5 --systems dspy-refine
    .venv/bin/python benchmarks/vs_peers.py --report-only         # tables from runs/peers only

One llama-server (``scripts/build_llama_server.sh``, one slot, prompt cache on) serves the
default embedded model's GGUF file (Qwen2.5-Coder-1.5B-Instruct Q4_K_M) to every system,
one system after the other, one example at a time, over the first N rows of the commongen
and gsm8k dev files. Every output is scored by our task's metric (``_peers.metric``).

- ``selfrefine-paper``: the paper's loop (task defaults); ``selfrefine-best``: hybrid
  feedback (critique + the task's code checks) and ``select verified``;
  ``selfrefine-best-notworse``: the same plus ``accept not_worse``. Library API, ``openai:``
  backend, no response cache: every call reaches the server.
- ``dspy-predict`` / ``dspy-bestofn`` / ``dspy-refine`` (N=3, reward = the task's own
  reference-free check, threshold 1.0): run by ``_peers_dspy.py`` in benchmarks/.venv-peers,
  a virtual environment this script creates with DSPy pinned (never a selfrefine dependency).

Per example results go to ``--out/<task>/<system>.jsonl`` as they finish; a rerun skips
finished examples, so a run can be stopped and resumed, or grown with larger limits. The
summary goes to ``--json`` and the tables into ``--doc`` between its table markers.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from _cli import names
from _peers import (
    OURS,
    ROOT,
    SYSTEMS,
    TASKS,
    THEIRS,
    Record,
    append_record,
    dump_json,
    metric,
    ratio,
    read_records,
    records_path,
    select_examples,
    summarise,
    table,
    write_between,
)

from selfrefine.backends.openai_compat import OpenAIBackend
from selfrefine.core.config import RefineConfig
from selfrefine.engine.loop import SelfRefine
from selfrefine.evaluation.datasets import Example
from selfrefine.tasks import get_task

DSPY_VERSION = "3.4.1"
PEERS_VENV = ROOT / "benchmarks" / ".venv-peers"
MODEL_NAME = "qwen2.5-coder-1.5b-instruct"  # llama-server serves one model whatever the name
MODES = {
    "selfrefine-paper": {},
    "selfrefine-best": {"verifier_mode": "hybrid", "select": "verified"},
    # not_worse redoes an echoed or worse refinement with the next seed; without history, so
    # the small model does not copy the attempt it is shown (docs/peers.md, "not-worse")
    "selfrefine-best-notworse": {
        "verifier_mode": "hybrid",
        "select": "verified",
        "accept": "not_worse",
        "history": "none",
    },
}
TABLE_START, TABLE_END = "<!-- vs_peers:table:start -->", "<!-- vs_peers:table:end -->"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--limit-commongen", type=int, default=20)
    p.add_argument("--limit-gsm8k", type=int, default=30)
    p.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated subset of " + ", ".join(SYSTEMS))
    p.add_argument("--tasks", default=",".join(TASKS))
    p.add_argument("--n", type=int, default=3, help="DSPy Refine/BestOfN attempts")
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="llama-server -t; 1 because with 2 threads on 2 shared cores decode fell to 1-3 tok/s",
    )
    p.add_argument("--base-url", help="use this running OpenAI-compatible server instead of starting one")
    p.add_argument("--out", type=Path, default=ROOT / "runs" / "peers")
    p.add_argument("--json", type=Path, default=ROOT / "docs" / "peers_summary.json")
    p.add_argument("--doc", type=Path, default=ROOT / "docs" / "peers.md")
    p.add_argument("--report-only", action="store_true", help="only aggregate what --out holds")
    args = p.parse_args(argv)
    args.systems = names(args.systems, SYSTEMS, "system")
    args.tasks = names(args.tasks, TASKS, "task")
    args.limits = {"commongen": args.limit_commongen, "gsm8k": args.limit_gsm8k}
    args.command = shlex.join(["python", "benchmarks/vs_peers.py", *(sys.argv[1:] if argv is None else argv)])
    return args


def log(message: str) -> None:
    print(f"[{datetime.now().strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --- the server and the DSPy environment --------------------------------------------------


@contextlib.contextmanager
def server(args: argparse.Namespace) -> Iterator[str]:
    """The OpenAI base URL: --base-url, or a llama-server started here on the default model.

    One slot with an 8k context (DSPy Refine's advice prompt alone is ~4k tokens) and the
    server's prompt cache on: both systems send long shared prefixes again and again."""
    if args.base_url:
        yield args.base_url
        return
    # the same start/stop code as the throughput benchmarks
    from _engines import llama_server

    with llama_server(slots=1, ctx_per_slot=8192, threads=args.threads) as srv:
        yield f"{srv.url}/v1"


def peers_python() -> Path:
    """benchmarks/.venv-peers/bin/python with DSPy pinned and selfrefine (no extras), made once."""
    python = PEERS_VENV / "bin" / "python"
    probe = [str(python), "-c", "import dspy, selfrefine; print(dspy.__version__)"]
    if python.exists():
        found = subprocess.run(probe, check=False, capture_output=True, text=True)
        if found.returncode == 0 and found.stdout.strip() == DSPY_VERSION:
            return python
    log(f"creating {PEERS_VENV} with dspy=={DSPY_VERSION} (a few minutes, once)")
    subprocess.run([sys.executable, "-m", "venv", str(PEERS_VENV)], check=True)
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, f"dspy=={DSPY_VERSION}"], check=True)
    subprocess.run([*pip, "-e", str(ROOT)], check=True)
    subprocess.run(probe, check=True, capture_output=True)
    return python


# --- running the systems -----------------------------------------------------------------


def sampling(task: str) -> tuple[float, int]:
    """DSPy's one LM gets our generator's temperature and our largest per-role max_tokens."""
    t = get_task(task)
    defaults = t.declared.defaults
    return defaults.temperature["generate"], max(defaults.max_tokens.values())


def run_ours(system: str, task: str, examples: list[Example], base_url: str, out: Path) -> None:
    path = records_path(out, task, system)
    done = read_records(path)
    todo = [e for e in examples if e.id not in done]
    log(f"{system} {task}: {len(todo)} to run, {len(done)} done")
    if todo:
        asyncio.run(_run_ours(system, task, todo, base_url, path))


async def _run_ours(system: str, task: str, todo: list[Example], base_url: str, path: Path) -> None:
    """One example after another on one engine (one event loop: the HTTP client is bound to it)."""
    backend = OpenAIBackend(MODEL_NAME, base_url=base_url, concurrency=1)
    engine = SelfRefine(task, backend, config=RefineConfig(**MODES[system]))
    try:
        for example in todo:
            record = await _one(engine, system, task, example)
            append_record(path, record)
            log(
                f"{system} {task} {record.id}: metric {record.one_step_metric:.3f} -> {record.metric:.3f}  "
                f"calls {record.calls}  tokens {record.prompt_tokens}+{record.completion_tokens}  "
                f"{record.seconds:.1f} s  {record.stop_reason}{'  CRASHED ' + str(record.error) if record.crashed else ''}"
            )
    finally:
        await engine.aclose()


async def _one(engine: SelfRefine, system: str, task: str, example: Example) -> Record:
    t0 = time.perf_counter()
    try:
        result = await engine.arun(example.input, example.reference)
    except Exception as exc:  # noqa: BLE001 - a crash is a measured outcome
        return Record(
            id=example.id,
            task=task,
            system=system,
            crashed=True,
            error=f"{type(exc).__name__}: {exc}"[:500],
            seconds=round(time.perf_counter() - t0, 3),
        )
    seconds = time.perf_counter() - t0
    one_step = result.iterations[0].draft if result.iterations else ""
    output = result.output or ""
    return Record(
        id=example.id,
        task=task,
        system=system,
        one_step=one_step,
        output=output,
        one_step_metric=metric(task, example, one_step),
        metric=metric(task, example, output),
        crashed=not output,
        error=result.error or (None if output else "returned nothing"),
        calls=result.usage.calls,
        prompt_tokens=result.usage.prompt_tokens,
        completion_tokens=result.usage.completion_tokens,
        cached_prompt_tokens=result.usage.cached_prompt_tokens,
        seconds=round(seconds, 3),
        load=round(os.getloadavg()[0], 2),
        stop_reason=result.stop_reason.value,
    )


def run_theirs(system: str, task: str, limit: int, base_url: str, args: argparse.Namespace) -> None:
    temperature, max_tokens = sampling(task)
    cmd = [
        str(peers_python()),
        str(ROOT / "benchmarks" / "_peers_dspy.py"),
        "--task",
        task,
        "--system",
        system.removeprefix("dspy-"),
        "--api-base",
        base_url,
        "--model-name",
        MODEL_NAME,
        "--limit",
        str(limit),
        "--n",
        str(args.n),
        "--temperature",
        str(temperature),
        "--max-tokens",
        str(max_tokens),
        "--out",
        str(args.out),
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "benchmarks")}
    subprocess.run(cmd, check=True, env=env)


# --- reporting -----------------------------------------------------------------------------


def report(args: argparse.Namespace) -> dict:
    """Summaries of what --out holds for the selected inputs, ratios, tables, JSON, doc."""
    summaries, ratios, chosen = [], [], {}
    for task in TASKS:
        examples = select_examples(task, args.limits[task])
        for system in SYSTEMS:
            recs = read_records(records_path(args.out, task, system))
            chosen[task, system] = [recs[e.id] for e in examples if e.id in recs]
            if chosen[task, system]:
                summaries.append(summarise(task, system, chosen[task, system], examples))
        for ours in OURS:
            for theirs in THEIRS:
                if chosen[task, ours] and chosen[task, theirs]:
                    ratios.append(ratio(task, chosen[task, ours], chosen[task, theirs]))
    text = table(summaries, ratios)
    print(text)
    data = {
        "generated": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": args.command,
        "dspy": DSPY_VERSION,
        "limits": args.limits,
        "summaries": [s.model_dump() for s in summaries],
        "ratios": [r.model_dump() for r in ratios],
    }
    dump_json(args.json, data)
    write_between(args.doc, TABLE_START, TABLE_END, text)
    return data


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if not args.report_only:
        if any(s in THEIRS for s in args.systems):
            peers_python()  # before the server starts: the install takes minutes
        with server(args) as base_url:
            log(f"server {base_url}; systems {', '.join(args.systems)}; limits {args.limits}")
            for system in args.systems:
                for task in args.tasks:
                    if system in OURS:
                        run_ours(system, task, select_examples(task, args.limits[task]), base_url, args.out)
                    else:
                        run_theirs(system, task, args.limits[task], base_url, args)
    report(args)


if __name__ == "__main__":
    main()
