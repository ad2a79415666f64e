"""`selfrefine eval`: durable rows, resume after kill -9, response cache, failures kept."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from click.testing import CliRunner
from conftest import FB_DONE

FB_MISSING_BALL = json.dumps({"missing_concepts": ["ball"], "commonsense": "NONE"})
from selfrefine import FakeBackend, SelfRefine
from selfrefine.cli.commands import cli
from selfrefine.evaluation.datasets import load_examples
from selfrefine.evaluation.driver import run_eval, run_meta
from selfrefine.evaluation.response_cache import CachedBackend, ResponseCache
from selfrefine.evaluation.runstore import RunStore


def write_data(path: Path, n: int) -> Path:
    words = ["dog", "ball", "park", "sun", "tree", "cat", "rain", "car", "book", "lake", "bird", "road"]
    lines = [json.dumps({"concepts": [words[i % 12], words[(i + 1) % 12]]}) for i in range(n)]
    path.write_text("\n".join(lines) + "\n")
    return path


def replies(path: Path, latency: float = 0.0) -> Path:
    path.write_text(
        json.dumps({"default": FB_DONE, "replies": {"generate": ["A dog plays."] * 100}, "latency": latency})
    )
    return path


def test_eval_writes_rows_summary_and_table(tmp_path):
    data = write_data(tmp_path / "d.jsonl", 3)
    out = tmp_path / "runs" / "a"
    args = [
        "eval",
        "commongen",
        "--data",
        str(data),
        "--out",
        str(out),
        "-m",
        f"fake:{replies(tmp_path / 'r.json')}",
        "--no-cache",
        "--max-iters",
        "1",
    ]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(r["id"] for r in rows) == ["commongen-0", "commongen-1", "commongen-2"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["examples"] == 3 and summary["stop_reasons"] == {"feedback": 3}
    assert "one-step (iteration 0)" in result.output
    meta = json.loads((out / "meta.json").read_text())
    assert meta["task"] == "commongen" and meta["config"]["max_iterations"] == 1


def test_rerun_skips_finished_examples(tmp_path):
    data = write_data(tmp_path / "d.jsonl", 4)
    out = tmp_path / "run"
    args = [
        "eval",
        "commongen",
        "--data",
        str(data),
        "--out",
        str(out),
        "-m",
        f"fake:{replies(tmp_path / 'r.json')}",
        "--no-cache",
    ]
    runner = CliRunner()
    assert runner.invoke(cli, args + ["--limit", "2"]).exit_code == 0
    # a different limit is the same experiment: the first two are skipped, two are added
    assert runner.invoke(cli, args).exit_code == 0
    ids = [json.loads(x)["id"] for x in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(ids) == [f"commongen-{i}" for i in range(4)]


def test_resume_after_sigkill_loses_nothing_and_repeats_nothing(tmp_path):
    data = write_data(tmp_path / "d.jsonl", 8)
    out = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "selfrefine",
        "eval",
        "commongen",
        "--data",
        str(data),
        "--out",
        str(out),
        "-m",
        f"fake:{replies(tmp_path / 'r.json', latency=0.15)}",
        "--no-cache",
        "--concurrency",
        "2",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    results = out / "results.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if results.exists() and len(results.read_text().splitlines()) >= 3:
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = len(results.read_text().splitlines())
    assert 3 <= before < 8, "the run should have been killed mid-way"
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    ids = [json.loads(x)["id"] for x in results.read_text().splitlines()]
    assert sorted(ids) == sorted(f"commongen-{i}" for i in range(8))  # each exactly once


def test_torn_last_line_is_dropped(tmp_path):
    store = RunStore(tmp_path)
    store.acquire()  # the lock's holder drops it (issue 39 item 13: a reader only skips it)
    (tmp_path / "results.jsonl").write_text('{"id": "a", "metrics": [1.0]}\n{"id": "b", "metr')
    assert [r.id for r in store.rows()] == ["a"]
    assert (tmp_path / "results.jsonl").read_text() == '{"id": "a", "metrics": [1.0]}\n'


def test_failing_example_is_recorded_and_the_run_continues(tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"concepts": ["dog", "ball"]}) + "\n" + json.dumps({"concepts": []}) + "\n")
    out = tmp_path / "run"
    args = [
        "eval",
        "commongen",
        "--data",
        str(data),
        "--out",
        str(out),
        "-m",
        f"fake:{replies(tmp_path / 'r.json')}",
        "--no-cache",
    ]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    rows = {r["id"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    assert rows["commongen-1"]["error"] and rows["commongen-1"]["result"] is None
    assert rows["commongen-0"]["result"]["output"] == "A dog plays."


def test_second_identical_run_makes_zero_backend_calls(tmp_path):
    examples = load_examples("commongen", write_data(tmp_path / "d.jsonl", 3))
    cache = ResponseCache(tmp_path / "cache.sqlite")

    def once(folder: str) -> FakeBackend:
        backend = FakeBackend({"generate": ["A dog plays."] * 3}, default=FB_DONE)
        engine = SelfRefine("commongen", backend, max_iterations=1, wrap=lambda b: CachedBackend(b, cache))
        store = RunStore(tmp_path / folder)
        store.start(run_meta(folder, engine, "d.jsonl", None))
        asyncio.run(run_eval(engine, examples, store))
        return backend

    first, second = once("one"), once("two")
    assert len(first.requests) == 6 and len(second.requests) == 0
    rows = RunStore(tmp_path / "two").rows()
    assert all(call.cached for row in rows for call in row.result.calls)
    assert [r.result.output for r in rows] == [r.result.output for r in RunStore(tmp_path / "one").rows()]


def test_cache_key_covers_the_request(tmp_path):
    from selfrefine.backends.base import CompletionRequest

    a = CompletionRequest(role="generate", prompt="p", seed=1)
    assert ResponseCache.key("m", a) != ResponseCache.key("m", a.model_copy(update={"seed": 2}))
    assert ResponseCache.key("m", a) != ResponseCache.key("other", a)
    assert ResponseCache.key("m", a) == ResponseCache.key("m", CompletionRequest(role="generate", prompt="p", seed=1))


def test_other_experiment_in_the_same_folder_is_refused(tmp_path):
    data = write_data(tmp_path / "d.jsonl", 1)
    out = tmp_path / "run"
    base = [
        "eval",
        "commongen",
        "--data",
        str(data),
        "--out",
        str(out),
        "-m",
        f"fake:{replies(tmp_path / 'r.json')}",
        "--no-cache",
    ]
    runner = CliRunner()
    assert runner.invoke(cli, base).exit_code == 0
    other = runner.invoke(cli, base + ["--history", "none"])
    assert other.exit_code == 2 and "holds a different run" in other.output


def test_judge_preference_of_output_over_one_step(tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"concepts": ["dog", "ball"]}) + "\n")
    model = tmp_path / "m.json"
    model.write_text(
        json.dumps(
            {
                "replies": {
                    "generate": ["A dog."],
                    "feedback": [FB_MISSING_BALL, FB_DONE],
                    "refine": ["A dog chases a ball."],
                }
            }
        )
    )
    judge = tmp_path / "j.json"  # prefers whichever text mentions the ball, in both orders
    judge.write_text(
        json.dumps(
            {"table": {"Output 1:\nA dog chases": '{"winner": "1"}', "Output 2:\nA dog chases": '{"winner": "2"}'}}
        )
    )
    out = tmp_path / "run"
    args = [
        "eval",
        "commongen",
        "--data",
        str(data),
        "--out",
        str(out),
        "-m",
        f"fake:{model}",
        "--judge",
        f"fake:{judge}",
        "--no-cache",
    ]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    row = json.loads((out / "results.jsonl").read_text())
    assert row["judge"]["winner"] == "b"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["judge_preference"] == {"win": 1.0, "tie": 0.0, "loss": 0.0, "n": 1}
    assert "judge: output preferred over one-step" in result.output


def test_run_meta_names_final_feedback_only_when_asked():
    # skipping the last critique changes no output, so folders made before the option resume
    plain = SelfRefine("commongen", FakeBackend(default="x"))
    asked = SelfRefine("commongen", FakeBackend(default="x"), final_feedback=True)
    assert "final_feedback" not in run_meta("r", plain, "d.jsonl", None).config
    assert run_meta("r", asked, "d.jsonl", None).config["final_feedback"] is True


def test_run_meta_names_the_sampling_options_only_when_they_are_not_the_defaults():
    # folders made before samples/strategy/preset existed hold none of them and must resume
    plain = run_meta("r", SelfRefine("commongen", FakeBackend(default="x")), "d.jsonl", None).config
    assert not {"samples", "strategy", "preset"} & set(plain)
    sampled = run_meta("r", SelfRefine("commongen", FakeBackend(default="x"), preset="best"), "d.jsonl", None).config
    assert (sampled["samples"], sampled["preset"], sampled["verifier_mode"]) == (4, "best", "hybrid")
