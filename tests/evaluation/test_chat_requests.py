"""benchmarks/data/chat_requests.jsonl, chat's dev set (issue 29, "In the loop"): 20
IFEval-style requests whose instruction checks are the row's reference, loaded, validated
before any model call, and scored by `selfrefine eval chat` one-step vs returned."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner
from conftest import ROOT

from selfrefine.checks.declared import Checks
from selfrefine.cli.commands import cli
from selfrefine.core.errors import InputError
from selfrefine.evaluation.catalog import load_data
from selfrefine.evaluation.datasets import load_examples
from selfrefine.tasks.chat import Chat

REQUESTS = ROOT / "benchmarks" / "data" / "chat_requests.jsonl"


def test_the_chat_requests_load_and_every_rows_checks_validate():
    examples = load_examples("chat", REQUESTS)
    assert len(examples) == 20 and len({e.id for e in examples}) == 20
    assert len({e.input for e in examples}) == 20
    task = Chat()
    for e in examples:
        checks = Checks.parse(e.reference)  # a plain mapping, as the run folder can record it
        assert isinstance(e.reference, dict) and 1 <= checks.count() <= 3, e.id
        assert task.prepare_input(e.input).strip(), e.id
    # the last row is a conversation (`messages`): the task reads it as a transcript
    last = task.prepare_input(examples[-1].input)
    assert last.startswith("System: You are a concise travel assistant.") and "\n\nUser: Food and" in last


@pytest.mark.parametrize(
    "row, message",
    [
        ({"input": "Say hi.", "checks": {"must_match": "(a+)+b"}}, "field 'checks': check must_match: regex /(a+)+b/"),
        ({"input": "Say hi.", "checks": {"max_wrds": 5}}, "field 'checks': unknown check 'max_wrds'"),
        ({"input": "Say hi.", "checks": {}}, "field 'checks': check checks: no checks given"),
        ({"input": "Say hi.", "checks": ["max_words"]}, "field 'checks' must be an object"),
        ({"input": "Say hi.", "messages": [{"role": "user", "content": "Hi"}]}, "give 'input' or 'messages'"),
        ({"messages": "Hi"}, "field 'messages' must be a non-empty list"),
        ({"checks": {"max_words": 5}}, "missing field 'input'"),
    ],
)
def test_a_hostile_row_is_a_one_line_error_naming_it(tmp_path, row, message):
    data = tmp_path / "rows.jsonl"
    data.write_text(json.dumps({"input": "Fine.", "checks": {"max_words": 5}}) + "\n" + json.dumps(row) + "\n")
    with pytest.raises(InputError) as caught:
        load_data("chat", str(data))
    assert str(caught.value).startswith(f"{data}: line 2: ") and message in str(caught.value)
    assert "\n" not in str(caught.value)
    # the CLI stops on that line before any model call: no run folder is started
    out = tmp_path / "run"
    ran = CliRunner().invoke(cli, ["eval", "chat", "--data", str(data), "--out", str(out), "-m", "fake", "--no-cache"])
    assert ran.exit_code != 0 and ran.output.startswith(f"Error: {data}: line 2: ")
    assert len(ran.output.strip().splitlines()) == 1 and not out.exists()


def test_a_row_without_checks_has_no_reference(tmp_path):
    data = tmp_path / "rows.jsonl"
    data.write_text(json.dumps({"input": "Say hi.", "id": "x", "topic": "greetings"}) + "\n")
    [example] = load_examples("chat", data)
    assert (example.id, example.input, example.reference) == ("x", "Say hi.", None)
    assert example.meta == {"topic": "greetings"}


def test_eval_scores_chat_one_step_vs_returned_by_the_checks(tmp_path):
    # chat-01 (three bullets, nothing else) and chat-02 (under 50 words, mentions Thursday):
    # each draft 0 passes one check of two, each refinement both
    replies = {
        "generate": ["Water helps:\n* energy\n* skin", "Could you water my plants while I am away? Thanks!"],
        "feedback": [
            json.dumps({"issues": ["Drop the intro; give three bullets."]}),
            json.dumps({"issues": ["Mention Thursday."]}),
        ],
        "refine": ["* energy\n* skin\n* focus", "Could you water my plants on Thursday while I am away? Thanks!"],
    }
    model = tmp_path / "replies.json"
    model.write_text(json.dumps(replies))
    out = tmp_path / "run"
    args = ["eval", "chat", "--data", str(REQUESTS), "--out", str(out), "--limit", "2", "--max-iters", "1"]
    ran = CliRunner().invoke(
        cli, [*args, "--concurrency", "1", "-m", f"fake:{model}", "--no-cache"], terminal_width=200
    )
    assert ran.exit_code == 0, ran.output
    assert "share of the row's checks passed" in ran.output
    assert re.search(r"one-step \(iteration 0\)\s*│\s*0\.500", ran.output), ran.output
    assert re.search(r"final \(returned output\)\s*│\s*1\.000", ran.output), ran.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["by_iteration"] == [0.5, 1.0] and summary["final"] == 1.0
    assert summary["examples"] == 2 and summary["failed"] == 0 and summary["metric_failed"] == 0
