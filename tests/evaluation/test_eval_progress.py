"""``eval`` shows progress from the first call (issue 39, item 15): a line when each example
starts, a line per step with the time the example may still take when piped, the same start
lines above the bar on a terminal, and the README's eval example says how long it takes."""

from __future__ import annotations

import asyncio
import io
import json
import re

from click.testing import CliRunner
from conftest import FB_MISSING, ROOT
from rich.console import Console

from selfrefine.backends import FakeBackend
from selfrefine.cli.commands import cli
from selfrefine.core.records import DraftStep, Feedback, FeedbackStep
from selfrefine.engine.loop import SelfRefine
from selfrefine.evaluation.datasets import Example
from selfrefine.evaluation.driver import run_eval, run_meta
from selfrefine.evaluation.progress import Plan, duration
from selfrefine.evaluation.runstore import RunStore

REPLIES = {"generate": ["A dog runs."], "feedback": [FB_MISSING] * 4, "default": "A dog can catch a frisbee."}


def test_a_piped_eval_speaks_before_its_first_example_ends(tmp_path):
    # was: nothing until the first example finished (6.5 minutes on commongen_hard)
    replies, data = tmp_path / "replies.json", tmp_path / "two.txt"
    replies.write_text(json.dumps(REPLIES))
    data.write_text("dog, frisbee, catch\nsun, beach, towel\n")
    args = ["eval", "commongen", "--data", str(data), "--out", str(tmp_path / "run"), "-m", f"fake:{replies}",
            "--no-cache", "--max-iters", "2", "--concurrency", "1"]  # fmt: skip
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()
    first_done = next(i for i, line in enumerate(lines) if line.startswith("[1/2] "))
    before = lines[:first_done]
    assert before[0] == "▶ commongen-0: example 1 of 2 started (1 in flight): dog, frisbee, catch"
    steps = [line for line in before if line.startswith("  commongen-0 [")]
    assert steps[0].endswith(": first draft written; ETA ≤ " + steps[0].partition("ETA ≤ ")[2])
    assert "(at most 4 more steps at ~" in steps[0]  # 2 rounds: a critique and a refinement each
    assert any(": critique of draft 0; ETA ≤ " in line and "(at most 3 more steps" in line for line in steps)
    assert any(line.endswith(": stops: no_change") or ": refinement 2 written; no step left" in line for line in steps)
    assert any(line.startswith("▶ commongen-1: example 2 of 2 started") for line in lines[first_done:])
    assert re.search(
        r"^\[1/2\] commongen-0: \w+; running metric [\d.]+, tokens [\d,]+; 1 to go, ETA ~\d", lines[first_done]
    )


def test_on_a_terminal_each_start_is_a_line_above_the_bar(tmp_path):
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=200)
    engine = SelfRefine(
        "commongen", FakeBackend(["A dog runs."], default="A dog can catch a frisbee."), max_iterations=0
    )
    store = RunStore(tmp_path / "run")
    store.start(run_meta("run", engine, "examples", None))
    asyncio.run(run_eval(engine, [Example(id="a", input="dog, frisbee, catch")], store, console=console))
    assert "▶ a: example 1 of 1 started (1 in flight): dog, frisbee, catch" in buffer.getvalue()


def test_the_steps_left_bound_each_round():
    plan = Plan(max_iterations=2)

    def draft(t: int) -> DraftStep:
        return DraftStep(iteration=t, draft="x")

    critique = FeedbackStep(iteration=0, feedback=Feedback(text="f"))
    assert [
        plan.steps_left(draft(0)),
        plan.steps_left(critique),
        plan.steps_left(draft(1)),
        plan.steps_left(draft(2)),
    ] == [4, 3, 2, 0]
    # feedback from the code alone is no call: a round is its refinement
    assert Plan(max_iterations=2, critic=False).steps_left(draft(0)) == 2
    assert [duration(5), duration(65), duration(3720)] == ["5s", "1m05s", "1h02m"]


def test_the_readme_says_how_long_its_eval_example_takes():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.partition("## Evaluating over a dataset")[2].partition("```bash\n")[2].partition("```")[0]
    timed = [line for line in block.splitlines() if line.startswith("selfrefine eval") and "measured" in line]
    assert timed, "an eval example of the README carries its measured time"
    assert all(re.search(r"measured: about \d+ min", line) for line in timed)
