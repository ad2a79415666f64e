"""Failures in an eval are never silent: failed rows are retried by a rerun and left out
of the means; a judge, metric or answer hook that raises is recorded and counted."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from click.testing import CliRunner
from conftest import FB_DONE

from selfrefine import FakeBackend, SelfRefine, Task
from selfrefine.cli.commands import cli
from selfrefine.core.errors import BackendError
from selfrefine.core.records import (
    CallRecord,
    Iteration,
    RunResult,
    StopReason,
    Usage,
)
from selfrefine.evaluation.datasets import Example
from selfrefine.evaluation.judge import PairwiseJudge
from selfrefine.evaluation.report import compare_table, run_table, write_report
from selfrefine.evaluation.runner import ExampleRow, evaluate_rows, summarize
from selfrefine.evaluation.runstore import RunMeta, RunStore
from selfrefine.task.task import Capabilities


def write_data(path: Path, concepts: list[list[str]]) -> Path:
    path.write_text("".join(json.dumps({"concepts": c}) + "\n" for c in concepts))
    return path


def result(drafts: list[str], stop: StopReason, calls: int = 2) -> RunResult:
    records = [CallRecord(role="generate", iteration=0, prompt_tokens=10, completion_tokens=1, seconds=1.0)] * calls
    return RunResult(
        task="t",
        input="i",
        iterations=[Iteration(index=t, draft=d) for t, d in enumerate(drafts)],
        output=drafts[-1],
        selected=len(drafts) - 1,
        stop_reason=stop,
        calls=records,
        usage=Usage.of(records),
        error="BackendError: server gone" if stop is StopReason.ERROR else None,
    )


# --- item 2: failed rows are retried and left out of the means ------------------------------


def eval_args(data: Path, out: Path, model: Path) -> list[str]:
    return [
        "eval",
        "commongen",
        "--data",
        str(data),
        "--out",
        str(out),
        "-m",
        f"fake:{model}",
        "--no-cache",
        "--concurrency",
        "1",
        "--max-iters",
        "1",
    ]


def test_rerun_retries_failed_examples_and_shows_each_once(tmp_path):
    data = write_data(tmp_path / "d.jsonl", [["dog", "ball"], ["cat", "mat"]])
    out, model = tmp_path / "run", tmp_path / "m.json"
    # one reply per role: the second example finds none left, and fails
    model.write_text(json.dumps({"replies": {"generate": ["A dog plays."], "feedback": [FB_DONE]}}))
    runner = CliRunner()
    first = runner.invoke(cli, eval_args(data, out, model))
    assert first.exit_code == 0, first.output
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["examples"], summary["failed"]) == (2, 1)
    assert "no reply left" in summary["first_errors"]["example"]

    model.write_text(json.dumps({"default": FB_DONE, "replies": {"generate": ["A cat sits on a mat."]}}))
    kept = runner.invoke(cli, eval_args(data, out, model) + ["--no-retry-failed"])
    assert kept.exit_code == 0, kept.output
    assert len((out / "results.jsonl").read_text().splitlines()) == 2  # nothing run again
    assert json.loads((out / "summary.json").read_text())["failed"] == 1

    again = runner.invoke(cli, eval_args(data, out, model))
    assert again.exit_code == 0, again.output
    lines = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert [r["id"] for r in lines] == ["commongen-0", "commongen-1", "commongen-1"]  # appended, old kept
    rows = RunStore(out).rows()
    assert [r.id for r in rows] == ["commongen-0", "commongen-1"]  # each id once, the latest row
    assert rows[1].result.output == "A cat sits on a mat."
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["examples"], summary["failed"], summary["retried_failed"]) == (2, 0, 1)
    assert run_table(out).n == 2 and run_table(out).failed == 0


def test_a_failed_row_never_hides_a_good_one(tmp_path):
    store = RunStore(tmp_path)
    good = ExampleRow(id="a", result=result(["x"], StopReason.FEEDBACK), metrics=[1.0])
    store.append(ExampleRow(id="b", error="BackendError: down"))
    store.append(good)
    store.append(ExampleRow(id="a", error="BackendError: down"))  # e.g. an older tool appended it
    store.append(ExampleRow(id="b", result=result(["y"], StopReason.FEEDBACK), metrics=[0.0]))
    rows = store.rows()
    assert [r.id for r in rows] == ["b", "a"]
    assert rows[0].metrics == [0.0] and rows[1] == good
    assert store.finished_ids() == {"a", "b"} and len(store.all_rows()) == 4


def test_failed_rows_are_left_out_of_means_costs_and_delta(tmp_path):
    rows = [
        ExampleRow(id="ok", result=result(["a", "b"], StopReason.MAX_ITERATIONS, calls=2), metrics=[0.0, 1.0]),
        # stopped by an error after two drafts: its drafts must not move the means
        ExampleRow(
            id="err",
            result=result(["c", "d"], StopReason.ERROR, calls=6),
            metrics=[1.0, 0.0],
            error="BackendError: server gone",
        ),
        ExampleRow(id="none", error="InputError: empty input"),
    ]
    summary = summarize("t", rows, 1)
    assert (summary.examples, summary.failed) == (3, 2)
    assert summary.by_iteration == [0.0, 1.0] and summary.final == 1.0 and summary.cumulative == 1.0
    assert summary.calls_per_example == 2.0 and summary.seconds_per_example == 2.0
    assert summary.stop_reasons == {"max_iterations": 1, "error": 1}  # still counted by reason
    assert summary.first_errors["example"] == "err: BackendError: server gone"

    meta = RunMeta(name="r", task="t", data="d", models={"generate": "m"}, config={"max_iterations": 1})
    store = RunStore(tmp_path / "run")
    store.start(meta)
    for row in rows:
        store.append(row)
    report = run_table(tmp_path / "run")
    assert report.failed == 2 and report.delta is not None
    assert (report.delta.n, report.delta.estimate) == (1, 1.0)  # the error row's -1.0 is not paired in
    assert report.cost.calls == 2.0 and report.cost_by_iteration[0].calls == 2.0
    write_report([tmp_path / "run"], tmp_path / "rep")
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "| Run | Failed examples | Judge errors |" in md and "| r | 2 | 0 | 0 | 0 |" in md
    assert "left out of every mean" in md
    assert "n (failed, left out)" in compare_table(tmp_path / "run", tmp_path / "run")


# --- item 4: judge, metric and answer errors are recorded -----------------------------------


class Flaky(Task):
    """A user task whose metric cannot score some drafts and whose answer hook crashes."""

    capabilities = Capabilities(answer=True)

    def metric(self, input, output, reference=None):
        if "bad" in output:
            raise ValueError("cannot score a bad draft")
        return 1.0

    def answer(self, output):
        raise RuntimeError("the answer hook crashed")


def flaky_engine() -> SelfRefine:
    task = Flaky(
        "flaky",
        generate="Write {{ input }}.",
        feedback="Critique: {{ draft }}",
        refine="Fix {{ draft }} per {{ feedback }}:",
    )
    backend = FakeBackend({"generate": ["a bad draft"], "feedback": ["improve it", "ok"], "refine": ["a good draft"]})
    return SelfRefine(task, backend, max_iterations=1)


def test_metric_answer_and_judge_errors_are_recorded_and_counted():
    judge = PairwiseJudge(FakeBackend([BackendError("401: invalid API key")]), constrained=False)
    rows = asyncio.run(evaluate_rows(flaky_engine(), [Example(id="x", input="a poem")], judge=judge))
    row = rows[0]
    assert row.metrics == [None, 1.0]
    assert row.metric_errors == ["ValueError: cannot score a bad draft", None]
    assert row.answer_error == "RuntimeError: the answer hook crashed"
    assert row.judge is None and row.judge_error == "BackendError: 401: invalid API key"
    summary = summarize("flaky", rows, 1)
    assert (summary.failed, summary.judge_failed, summary.metric_failed, summary.answer_failed) == (0, 1, 1, 1)
    assert summary.first_errors == {
        "judge": "x: BackendError: 401: invalid API key",
        "metric": "x: ValueError: cannot score a bad draft",
        "answer": "x: RuntimeError: the answer hook crashed",
    }


def test_failed_judge_shows_in_the_cli_table_and_the_report(tmp_path):
    data = write_data(tmp_path / "d.jsonl", [["dog", "ball"]])
    model = tmp_path / "m.json"
    model.write_text(
        json.dumps(
            {
                "replies": {
                    "generate": ["A dog."],
                    "refine": ["A dog chases a ball."],
                    "feedback": [json.dumps({"missing_concepts": ["ball"], "commonsense": "NONE"}), FB_DONE],
                }
            }
        )
    )
    dead = tmp_path / "judge.json"
    dead.write_text("{}")  # a judge that answers nothing: every call fails
    out = tmp_path / "run"
    res = CliRunner().invoke(
        cli,
        [
            "eval",
            "commongen",
            "--data",
            str(data),
            "--out",
            str(out),
            "-m",
            f"fake:{model}",
            "--judge",
            f"fake:{dead}",
            "--no-cache",
        ],
    )
    assert res.exit_code == 0, res.output
    row = json.loads((out / "results.jsonl").read_text())
    assert row["judge"] is None and "no reply left" in row["judge_error"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["judge_failed"] == 1 and summary["judge_preference"] is None
    assert "judge calls failed" in res.output and "first judge error" in res.output
    reports = write_report([out], tmp_path / "rep")
    assert reports[0].judge_failed == 1
    assert (
        "| run | 0 | 1 | 0 | 0 | judge: commongen-0: BackendError: fake backend has no reply left"
        in (tmp_path / "rep" / "report.md").read_text()
    )
    assert (
        '"judge_error": "BackendError: fake backend has no reply left' in (tmp_path / "rep" / "report.html").read_text()
    )


def test_rows_written_before_errors_were_recorded_still_load(tmp_path):
    old = {"id": "a", "result": None, "error": "InputError: empty", "metrics": [], "judge": None}
    meta = RunMeta(name="old", task="commongen", data="d", models={"generate": "m"})
    (tmp_path / "meta.json").write_text(meta.model_dump_json())
    (tmp_path / "results.jsonl").write_text(json.dumps(old) + "\n")
    row = RunStore(tmp_path).rows()[0]
    assert row.metric_errors == [] and row.judge_error is None and row.answer_error is None
    report = run_table(tmp_path)
    assert (report.n, report.failed, report.judge_failed, report.metric_failed) == (1, 1, 0, 0)
