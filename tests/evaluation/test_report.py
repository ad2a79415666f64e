"""Reports over hand-built run folders: every number checked against hand computation."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from selfrefine.cli.report import compare_command, report_command
from selfrefine.core.records import (
    CallRecord,
    Feedback,
    Iteration,
    RunResult,
    StopReason,
    Usage,
)
from selfrefine.evaluation.report import (
    compare_table,
    run_table,
    word_diff,
    write_report,
)
from selfrefine.evaluation.runner import ExampleRow
from selfrefine.evaluation.runstore import RunMeta, RunStore
from selfrefine.evaluation.stats import bootstrap_mean, paired_bootstrap_diff

# Every generate/refine call costs 100 prompt + 10 completion tokens and 2 s; every
# feedback call 50 + 5 tokens and 1 s, so the cost tables can be computed by hand.
DRAFT_CALL = dict(prompt_tokens=100, completion_tokens=10, seconds=2.0)
FEEDBACK_CALL = dict(prompt_tokens=50, completion_tokens=5, seconds=1.0)


def make_result(
    task: str, drafts: list[str], totals: list[float | None], stop: StopReason, selected: int | None = None
) -> RunResult:
    """A run whose draft t got feedback with total ``totals[t]`` (None: stopped before feedback)."""
    iterations, calls = [], []
    for t, draft in enumerate(drafts):
        calls.append(CallRecord(role="generate" if t == 0 else "refine", iteration=t, **DRAFT_CALL))
        feedback = None
        if t < len(totals) and totals[t] is not None:
            feedback = Feedback(text=f"feedback on draft {t}: <b>bold</b>", total=totals[t])
            calls.append(CallRecord(role="feedback", iteration=t, **FEEDBACK_CALL))
        iterations.append(Iteration(index=t, draft=draft, feedback=feedback))
    chosen = len(drafts) - 1 if selected is None else selected
    return RunResult(
        task=task,
        input=f"input of {drafts[0]}",
        iterations=iterations,
        output=drafts[chosen],
        selected=chosen,
        stop_reason=stop,
        calls=calls,
        usage=Usage.of(calls),
    )


def write_run(folder: Path, meta: RunMeta, rows: list[ExampleRow]) -> Path:
    store = RunStore(folder)
    store.start(meta)
    for row in rows:
        store.append(row)
    return folder


def make_runs(root: Path) -> tuple[Path, Path]:
    """Run A: binary metric, K=2, one failed example. Run B: fractional metric, K=1."""
    a = write_run(
        root / "run_a",
        RunMeta(
            name="refine",
            task="gsm8k",
            data="dev.jsonl",
            models={"generate": "m", "feedback": "m", "refine": "m"},
            config={"max_iterations": 2, "feedback_mode": "actionable"},
        ),
        [
            ExampleRow(
                id="a",
                metrics=[0.0, 0.0, 1.0],
                result=make_result(
                    "gsm8k",
                    ["The answer is 3.", "The answer is 4.", "The answer is 5."],
                    [1, 3, None],
                    StopReason.MAX_ITERATIONS,
                ),
            ),
            ExampleRow(id="b", metrics=[1.0], result=make_result("gsm8k", ["Fine already."], [5], StopReason.FEEDBACK)),
            ExampleRow(
                id="c",
                metrics=[0.0, 0.0],
                result=make_result(
                    "gsm8k", ["A cat sleeps on the mat.", "A dog sleeps on the mat."], [2, 2], StopReason.FEEDBACK
                ),
            ),
            ExampleRow(id="d", error="InputError: empty input"),
        ],
    )
    b = write_run(
        root / "run_b",
        RunMeta(
            name="nofeedback",
            task="commongen",
            data="dev.jsonl",
            models={"generate": "m", "feedback": "m", "refine": "m"},
            config={"max_iterations": 1, "feedback_mode": "none"},
        ),
        [
            ExampleRow(
                id="a",
                metrics=[0.5, 1.0],
                result=make_result("commongen", ["x y", "x y z"], [1, None], StopReason.MAX_ITERATIONS),
            ),
            ExampleRow(
                id="b",
                metrics=[1.0],
                result=make_result("commongen", ["all </script><script>alert(1)</script>"], [4], StopReason.FEEDBACK),
            ),
            ExampleRow(
                id="c",
                metrics=[0.25, 0.5],
                result=make_result("commongen", ["p", "p q"], [1, None], StopReason.MAX_ITERATIONS),
            ),
        ],
    )
    return a, b


@pytest.fixture
def runs(tmp_path: Path) -> tuple[Path, Path]:
    return make_runs(tmp_path)


# --- stats ----------------------------------------------------------------------------------


def test_bootstrap_is_deterministic_and_contains_the_estimate():
    base = [0, 1, 0, 0, 1, 0, 1, 0, 0, 0]
    refined = [1, 1, 0, 1, 1, 0, 1, 1, 0, 1]
    ci = paired_bootstrap_diff(base, refined, seed=7)
    assert ci is not None and ci.n == 10 and ci.estimate == pytest.approx(0.4)
    assert ci.low <= ci.estimate <= ci.high and ci.low < ci.high
    assert paired_bootstrap_diff(base, refined, seed=7) == ci
    assert bootstrap_mean(refined, seed=1) == bootstrap_mean(refined, seed=1)
    mean = bootstrap_mean([0.2, None, 0.4], seed=0)
    assert mean is not None and mean.n == 2 and mean.estimate == pytest.approx(0.3)
    assert mean.low <= mean.estimate <= mean.high


def test_bootstrap_edge_cases():
    same = bootstrap_mean([0.5, 0.5, 0.5])
    assert same is not None and same.low == same.high == same.estimate == 0.5
    assert paired_bootstrap_diff([None, 1.0], [1.0, None]) is None  # no complete pair
    assert bootstrap_mean([]) is None
    with pytest.raises(ValueError, match="differ in length"):
        paired_bootstrap_diff([1.0], [1.0, 0.0])


# --- numbers --------------------------------------------------------------------------------


def test_run_table_matches_hand_computed_numbers(runs):
    r = run_table(runs[0])
    assert (r.name, r.task, r.n, r.failed, r.model) == ("refine", "gsm8k", 4, 1, "m")
    assert r.metric_name.startswith("solve rate")
    # carry-forward: b stopped after draft 0, c after draft 1
    assert r.by_iteration == [pytest.approx(1 / 3), pytest.approx(1 / 3), pytest.approx(2 / 3)]
    assert r.baseline == pytest.approx(1 / 3)
    assert r.final == pytest.approx(2 / 3)  # selected = last draft: a 1, b 1, c 0
    assert r.best_selected == pytest.approx(1 / 3)  # a: totals 1,3 → draft 1 (0); c: tie → later (0)
    assert r.cumulative == pytest.approx(2 / 3)
    assert r.delta is not None and r.delta.n == 3 and r.delta.estimate == pytest.approx(1 / 3)
    assert r.delta.low <= r.delta.estimate <= r.delta.high
    assert r.cost.calls == pytest.approx(11 / 3)
    assert r.cost.prompt_tokens == pytest.approx(850 / 3) and r.cost.completion_tokens == pytest.approx(85 / 3)
    assert r.cost.seconds == pytest.approx(17 / 3)
    per_t = [(c.calls, c.prompt_tokens, c.completion_tokens, c.seconds) for c in r.cost_by_iteration]
    assert per_t == [
        pytest.approx((2, 150, 15, 3)),
        pytest.approx((4 / 3, 100, 10, 2)),
        pytest.approx((1 / 3, 100 / 3, 10 / 3, 2 / 3)),
    ]
    assert r.stop_reasons == {"max_iterations": 1, "feedback": 2}


def test_fractional_metric_has_no_cumulative(runs):
    r = run_table(runs[1])
    assert r.by_iteration == [pytest.approx(1.75 / 3), pytest.approx(2.5 / 3)]
    assert r.cumulative is None and r.failed == 0
    assert r.delta is not None and r.delta.estimate == pytest.approx(0.75 / 3)


def test_word_diff_marks_changed_words_and_rebuilds_both_texts():
    old, new = "A cat sleeps on\n    the mat.", "A dog sleeps on\n    the red mat."
    diff = word_diff(old, new)
    assert ("-", " cat") in diff and ("+", " dog") in diff and ("+", " red") in diff
    assert "".join(t for op, t in diff if op != "-") == new
    assert "".join(t for op, t in diff if op != "+") == old
    assert word_diff("same words", "same words") == [("=", "same words")]


# --- files ----------------------------------------------------------------------------------


def test_write_report_writes_markdown_plots_and_html(runs, tmp_path):
    out = tmp_path / "report"
    write_report(list(runs), out)
    md = (out / "report.md").read_text()
    assert "| refine | gsm8k |" in md and "| 0.333 | 0.667 | +0.333 |" in md  # Table 1: base → final, Δ
    assert "| refine | 0.333 | 0.333 | 0.667 | 0.667 | 0.333 | 0.667 |" in md  # y0 y1 y2 final best cumulative
    assert "| nofeedback | 0.583 | 0.833 |  | 0.833 |" in md  # shorter run padded
    assert "Ablations" in md and "feedback_mode=none, max_iterations=1" in md  # the varying setting is named
    assert "| refine | 3.67 | 283.3 | 28.3 | 5.67 |" in md  # cost per example
    for name in ("metric_vs_iteration.png", "cost_vs_iteration.png"):
        data = (out / name).read_bytes()
        assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 2000
    page = (out / "report.html").read_text()
    assert 'id="example-picker"' in page and "data:image/png;base64," in page
    assert "alert(1)</script>" not in page  # untrusted text cannot close the data script
    without_images = re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "", page)
    assert "http://" not in without_images and "https://" not in without_images and 'src="/' not in without_images


def test_compare_table_shows_both_runs(runs):
    text = compare_table(*runs)
    assert "A: refine" in text and "B: nofeedback" in text
    assert re.search(r"y2\s*\|\s*0\.667\s*\|", text)
    assert "+0.333 [" in text and "tokens / example" in text


def test_compare_of_different_tasks_warns_and_pairs_nothing(runs):
    # run A is gsm8k and run B commongen: their example ids "a", "b", "c" match by chance only
    text = compare_table(*runs)
    assert "Warning: A is a gsm8k run and B a commongen run" in text
    assert "final B - A" not in text
    res = CliRunner().invoke(compare_command, [str(runs[0]), str(runs[1])])
    assert res.exit_code == 0 and "Warning: A is a gsm8k run" in res.output


def test_compare_of_one_task_pairs_the_shared_examples(runs, tmp_path):
    store = RunStore(runs[0])
    again = write_run(tmp_path / "again", store.meta().model_copy(update={"name": "again"}), store.rows()[:2])
    text = compare_table(runs[0], again)
    assert "Warning: A is a" not in text and "final B - A on 2 shared examples: +0.000" in text


def test_click_commands(runs, tmp_path):
    runner = CliRunner()
    res = runner.invoke(report_command, [str(runs[0]), str(runs[1]), "--out", str(tmp_path / "rep")])
    assert res.exit_code == 0, res.output
    assert "refine: base 0.333 -> final 0.667" in res.output and (tmp_path / "rep" / "report.html").exists()
    res = runner.invoke(compare_command, [str(runs[0]), str(runs[1])])
    assert res.exit_code == 0, res.output
    assert "nofeedback" in res.output


def test_empty_run_and_missing_folder(tmp_path):
    empty = write_run(
        tmp_path / "empty", RunMeta(name="empty", task="my-yaml-task", data="d", models={"generate": "m"}), []
    )
    r = run_table(empty)
    assert (r.n, r.failed, r.by_iteration, r.final, r.delta, r.metric_name) == (0, 0, [None], None, None, "metric")
    write_report([empty], tmp_path / "rep")  # still writes every file
    assert "| empty |" in (tmp_path / "rep" / "report.md").read_text()
    assert (tmp_path / "rep" / "cost_vs_iteration.png").exists()
    from selfrefine.core.errors import InputError

    with pytest.raises(InputError, match="not a run folder"):
        run_table(tmp_path)


def test_trajectory_names_a_best_draft_only_when_a_critique_scored_it():
    from selfrefine.evaluation.report import trajectory

    unscored = make_result("commongen", ["x", "x y"], [None, None], StopReason.MAX_ITERATIONS)
    assert trajectory(ExampleRow(id="u", metrics=[0, 1], result=unscored))["best"] is None
    scored = make_result("gsm8k", ["a", "b", "c"], [1, 3, None], StopReason.MAX_ITERATIONS)
    assert trajectory(ExampleRow(id="s", metrics=[0, 0, 1], result=scored))["best"] == 1
