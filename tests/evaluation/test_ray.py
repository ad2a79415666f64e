"""`selfrefine eval --ray` on a real local Ray cluster: same rows as local, nothing lost when
an actor or the driver is killed, the embedded model through actors, the cache shared.

One 2-CPU cluster is started for the module (the suite runs on a 2-core CI machine) and
shut down at the end; the CLI in this process joins it, subprocesses join it by address.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import FB_DONE, SMOLLM, require_smollm

if os.environ.get("CI"):
    import ray  # the test extra installs it: its absence is a failure in CI
else:
    ray = pytest.importorskip("ray")

from selfrefine.cli.commands import cli
from selfrefine.cli.options import engine_spec
from selfrefine.core.errors import SelfRefineError
from selfrefine.engine.loop import SelfRefine
from selfrefine.engine.spec import EngineSpec, ModelSpec
from selfrefine.evaluation.datasets import load_examples
from selfrefine.evaluation.driver import run_eval, run_meta
from selfrefine.evaluation.ray_pool import (
    EngineRecipe,
    PoolOptions,
    RayPool,
    RefineWorker,
)
from selfrefine.evaluation.runstore import RunStore

FB_MISSING_BALL = json.dumps({"missing_concepts": ["ball"], "commonsense": "NONE"})
TIMING = {"seconds", "wait_seconds", "seconds_per_example"}


@pytest.fixture(scope="module", autouse=True)
def cluster():
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        object_store_memory=100 * 2**20,
        logging_level=logging.WARNING,
    )
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


def write_data(path: Path, n: int) -> Path:
    words = ["dog", "ball", "park", "sun", "tree", "cat", "rain", "car", "book", "lake", "bird", "road"]
    path.write_text("".join(json.dumps({"concepts": [words[i % 12], words[(i + 1) % 12]]}) + "\n" for i in range(n)))
    return path


def replies(path: Path, latency: float = 0.0, refine: bool = False) -> Path:
    """Replies that do not depend on call order (each actor has its own queue): with
    ``refine``, every critique asks for 'ball', so the examples with that concept refine."""
    per_role: dict[str, list[str]] = {"generate": ["A dog plays."] * 500}
    if refine:
        per_role.update(feedback=[FB_MISSING_BALL] * 500, refine=["A dog plays with a ball."] * 500)
    path.write_text(json.dumps({"default": FB_DONE, "replies": per_role, "latency": latency}))
    return path


def rows_of(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def untimed(value: Any) -> Any:
    """A row without its wall-clock fields (the only ones allowed to differ between runs)."""
    if isinstance(value, dict):
        return {k: untimed(v) for k, v in value.items() if k not in TIMING}
    if isinstance(value, list):
        return [untimed(v) for v in value]
    return value


def eval_args(tmp_path: Path, out: Path, n: int, latency: float = 0.0, refine: bool = False) -> list[str]:
    data = write_data(tmp_path / "d.jsonl", n)
    model = replies(tmp_path / "r.json", latency, refine)
    return ["eval", "commongen", "--data", str(data), "--out", str(out), "-m", f"fake:{model}", "--no-cache"]


def test_ray_rows_equal_local_rows(tmp_path):
    runner = CliRunner()
    args = eval_args(tmp_path, tmp_path / "local", 6, refine=True) + [
        "--max-iters",
        "2",
        "--seed",
        "7",
        "--judge",
        "fake",
        "--eval-judge-option",
        'reply={"winner": "2"}',
    ]
    local = runner.invoke(cli, args)
    assert local.exit_code == 0, local.output
    ray_args = [a if a != str(tmp_path / "local") else str(tmp_path / "ray") for a in args]
    remote = runner.invoke(cli, ray_args + ["--ray", "--ray-actors", "2", "--concurrency", "2"])
    assert remote.exit_code == 0, remote.output
    assert "Ray: 2 actor(s) × 1 CPU on 1 node(s), 2 example(s) in flight each" in remote.output
    by_id = {r["id"]: untimed(r) for r in rows_of(tmp_path / "local")}
    ray_rows = rows_of(tmp_path / "ray")
    assert len(ray_rows) == 6 and {r["id"]: untimed(r) for r in ray_rows} == by_id
    # the examples with 'ball' refined twice, the others stopped on the first critique
    assert sorted(len(r["result"]["iterations"]) for r in ray_rows) == [1, 1, 1, 1, 3, 3]
    assert sum(len(r["judge"]["raw"]) == 2 for r in ray_rows) == 2  # the actors asked the judge too
    summaries = [json.loads((tmp_path / name / "summary.json").read_text()) for name in ("local", "ray")]
    assert untimed(summaries[0]) == untimed(summaries[1])
    assert (
        json.loads((tmp_path / "local" / "meta.json").read_text())["model_ids"]
        == json.loads((tmp_path / "ray" / "meta.json").read_text())["model_ids"]
    )


def test_actors_share_the_drivers_response_cache(tmp_path):
    runner = CliRunner()
    args = [a for a in eval_args(tmp_path, tmp_path / "a", 4) if a != "--no-cache"]
    args += ["--cache", str(tmp_path / "cache.sqlite"), "--ray", "--ray-actors", "2"]
    assert runner.invoke(cli, args).exit_code == 0
    again = [a if a != str(tmp_path / "a") else str(tmp_path / "b") for a in args]
    assert runner.invoke(cli, again).exit_code == 0
    first = [c["cached"] for r in rows_of(tmp_path / "a") for c in r["result"]["calls"]]
    second = [c["cached"] for r in rows_of(tmp_path / "b") for c in r["result"]["calls"]]
    assert first and not any(first) and len(second) == len(first) and all(second)


def test_damaged_cache_entries_are_recomputed_and_counted_through_actors(tmp_path):
    import sqlite3

    cache = tmp_path / "cache.sqlite"
    args = [a for a in eval_args(tmp_path, tmp_path / "a", 4) if a != "--no-cache"]
    args += ["--cache", str(cache), "--ray", "--ray-actors", "2"]
    assert CliRunner().invoke(cli, args).exit_code == 0
    with sqlite3.connect(cache) as db:
        entries = db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
        db.execute("UPDATE responses SET response = '{\"cut'")
    again = CliRunner().invoke(cli, [a if a != str(tmp_path / "a") else str(tmp_path / "b") for a in args])
    assert again.exit_code == 0, again.output
    assert not any(r["error"] for r in rows_of(tmp_path / "b"))
    assert json.loads((tmp_path / "b" / "summary.json").read_text())["cache_dropped"] == entries > 0


def test_ray_flags_need_ray(tmp_path):
    result = CliRunner().invoke(cli, eval_args(tmp_path, tmp_path / "x", 1) + ["--ray-actors", "2"])
    assert result.exit_code == 2 and "--ray-actors, --ray-cpus-per-actor and --ray-base-url need --ray" in result.output


def test_without_ray_installed_the_error_names_the_extra(tmp_path):
    # a process where `import ray` fails, as it does where the extra is not installed
    code = (
        "import sys; sys.modules['ray'] = None; from selfrefine.cli import main; "
        f"sys.argv = ['selfrefine', *{eval_args(tmp_path, tmp_path / 'x', 1) + ['--ray']!r}]; main()"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == ("Error: --ray needs Ray, which is not installed: pip install 'selfrefine[ray]'")
    assert not (tmp_path / "x").exists()  # failed before anything was written


def pool_run(
    tmp_path: Path,
    n: int,
    latency: float,
    options: PoolOptions,
    model: str | None = None,
    extra: list[str] | None = None,
) -> tuple[RayPool, RunStore, list]:
    """An eval through the library: the same parts as the CLI, with the pool at hand."""
    args = eval_args(tmp_path, tmp_path / "run", n, latency) + (extra or [])
    if model is not None:
        args[args.index("-m") + 1] = model
    params = cli.commands["eval"].make_context("eval", args[1:]).params
    engine_keys = {p.name for p in cli.commands["run"].params} - {
        "task",
        "input",
        "input_file",
        "reference",
        "record_prompts",
        "as_json",
    }
    options_ = {k: v for k, v in params.items() if k in engine_keys}
    spec = engine_spec("commongen", options_)
    engine = SelfRefine.from_spec(spec)
    store = RunStore(tmp_path / "run")
    store.start(run_meta("run", engine, str(Path(params["data"]).resolve()), None))  # --data is NAME|PATH
    pool = RayPool(EngineRecipe.portable(spec), options)
    examples = load_examples("commongen", Path(params["data"]), None)
    return pool, store, [engine, examples]


@pytest.mark.timeout(180)  # a lost example would leave the pool waiting for it
def test_an_actor_killed_mid_example_loses_no_row_and_repeats_none(tmp_path):
    options = PoolOptions(actors=2, cpus_per_actor=1, in_flight=2)
    pool, store, (engine, examples) = pool_run(tmp_path, 20, 0.5, options)
    killed: list[int] = []

    def kill_one_actor() -> None:  # a real SIGKILL of an actor's process while it runs examples
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and (len(pool.live) < 2 or len(store.all_rows()) < 2):
            time.sleep(0.05)
        handle = next(iter(pool.live.values()))
        pid = ray.get(handle.pid.remote())
        os.kill(pid, signal.SIGKILL)
        killed.append(pid)

    killer = threading.Thread(target=kill_one_actor)
    killer.start()
    summary, _ = asyncio.run(run_eval(engine, examples, store, runner=pool))
    killer.join()
    assert killed, "no actor was killed"
    ids = [row.id for row in store.all_rows()]
    assert sorted(ids) == sorted(e.id for e in examples)  # every example once, none twice
    assert summary.failed == 0 and summary.examples == 20
    assert pool.stats.deaths == 1 and pool.stats.requeued >= 1  # it died with examples in flight
    # a replacement is asked for where the killed one freed a CPU; on a loaded machine the
    # survivor can finish the run before it is ready, so it need not have started
    assert pool.stats.replaced == 1 and pool.stats.started in (2, 3)


@pytest.mark.timeout(300)
def test_driver_killed_then_rerun_with_ray_resumes(tmp_path, cluster):
    out = tmp_path / "run"
    args = eval_args(tmp_path, out, 10, latency=0.3) + ["--concurrency", "1"]
    cmd = [sys.executable, "-m", "selfrefine", *args, "--ray", cluster, "--ray-actors", "2"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    results = out / "results.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (results.exists() and len(results.read_text().splitlines()) >= 3):
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = {r["id"] for r in rows_of(out)}
    assert 3 <= len(before) < 10
    # the rerun starts its own local cluster (--ray with no address)
    rerun = subprocess.run(
        [sys.executable, "-m", "selfrefine", *args, "--ray"], capture_output=True, text=True, timeout=300, check=False
    )
    assert rerun.returncode == 0, rerun.stderr
    ids = [r["id"] for r in rows_of(out)]
    assert sorted(ids) == [f"commongen-{i}" for i in range(10)]  # all present, each once
    summary = json.loads((out / "summary.json").read_text())
    assert summary["skipped_as_finished"] == len(before) and summary["examples"] == 10


@pytest.mark.integration
def test_embedded_model_runs_examples_through_actors(tmp_path):
    require_smollm()
    options = PoolOptions(actors=2, cpus_per_actor=1, in_flight=1)
    pool, store, (engine, examples) = pool_run(
        tmp_path, 2, 0.0, options, model=SMOLLM, extra=["--max-iters", "1", "--max-tokens", "48"]
    )
    summary, rows = asyncio.run(run_eval(engine, examples, store, runner=pool))
    assert sorted(r.id for r in rows) == ["commongen-0", "commongen-1"]
    assert summary.failed == 0 and all(r.result is not None and r.result.output for r in rows)
    assert {c.model for r in rows for c in r.result.calls} == {SMOLLM}
    # an actor's engine has threads sized to its CPU
    worker = ray.remote(RefineWorker).options(num_cpus=1).remote(pool.recipe.for_actor(1, None))
    assert ray.get(worker.ready.remote()) is None
    assert "threads=1" in ray.get(worker.describe.remote())[0]
    ray.kill(worker)


@pytest.mark.timeout(120)
def test_an_engine_an_actor_cannot_build_stops_the_run_with_its_error(tmp_path):
    # e.g. a task file or a model that exists on the driver's node but not on the actor's
    options = PoolOptions(actors=2, cpus_per_actor=0.5, in_flight=1)
    pool, store, (engine, examples) = pool_run(tmp_path, 3, 0.0, options)
    broken = RayPool(EngineRecipe(pool.recipe.spec.replace(task=str(tmp_path / "gone.yaml"))), options)
    with pytest.raises(SelfRefineError, match="gone.yaml"):
        asyncio.run(run_eval(engine, examples, store, runner=broken))
    assert store.all_rows() == []


def test_the_recipe_carries_absolute_paths_and_sizes_each_actor(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "haiku.yaml").write_text("name: haiku\n")
    (tmp_path / "r.json").write_text("{}")
    spec = EngineSpec(
        task="haiku.yaml",
        model=ModelSpec(model="openai:qwen"),
        feedback_model=ModelSpec(model=SMOLLM, options={"n_ctx": "2048"}),
        refine_model=ModelSpec(model="gguf:m.gguf", options={"n_threads": "3"}),
    )
    recipe = EngineRecipe.portable(spec, ModelSpec(model="fake:r.json"))
    assert recipe.spec.task == str(tmp_path / "haiku.yaml") and recipe.judge.model == f"fake:{tmp_path / 'r.json'}"
    assert recipe.spec.refine_model.model == "gguf:m.gguf"  # no such file here: left as given
    assert EngineRecipe.portable(spec.replace(task="commongen")).spec.task == "commongen"
    fake_only = EngineSpec(task="x", model=ModelSpec(model="fake"))
    assert recipe.in_process() and not EngineRecipe.portable(fake_only).in_process()
    actor = recipe.for_actor(2, "http://10.0.0.7:8000/v1")
    assert actor.spec.model.options == {"base_url": "http://10.0.0.7:8000/v1"}  # openai takes no threads
    assert actor.spec.feedback_model.options == {"n_ctx": 2048, "n_threads": 2}  # typed, not KEY=VALUE strings
    assert actor.spec.refine_model.options == {"n_threads": 3}  # given: kept
    assert EngineRecipe.portable(spec, ModelSpec(model="embedded")).for_actor(2, None).judge.options == {"n_threads": 2}
    # plain data: it pickles, and nothing in it is a function an actor would have to import
    assert pickle.loads(pickle.dumps(actor)) == actor
    assert not any(callable(v) for v in vars(actor).values())
