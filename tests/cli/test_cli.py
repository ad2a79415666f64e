"""The CLI through click's runner, with the fake model (real models: test_integration_*)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import FB_DONE, FB_MISSING, ROOT

from selfrefine.cli.commands import cli

EXAMPLES = ROOT / "examples"


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def replies(tmp_path: Path) -> Path:
    path = tmp_path / "replies.json"
    path.write_text(
        json.dumps(
            {
                "replies": {
                    "generate": ["A dog runs."],
                    "feedback": [FB_MISSING, FB_DONE],
                    "refine": ["A dog can catch a frisbee."],
                }
            }
        )
    )
    return path


def test_run_json_output(runner, replies):
    result = runner.invoke(cli, ["run", "commongen", "dog, frisbee, catch", "--model", f"fake:{replies}", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["output"] == "A dog can catch a frisbee."
    assert data["stop_reason"] == "feedback"
    assert [it["draft"] for it in data["iterations"]] == ["A dog runs.", "A dog can catch a frisbee."]
    assert data["iterations"][0]["feedback"]["text"] == FB_MISSING
    assert data["usage"]["calls"] == 4
    assert data["usage"]["prompt_tokens"] > 0 and data["usage"]["completion_tokens"] > 0
    assert data["metric"] == 1.0


def test_run_live_display_shows_rounds(runner, replies):
    result = runner.invoke(cli, ["run", "commongen", "dog, frisbee, catch", "-m", f"fake:{replies}"])
    assert result.exit_code == 0, result.output
    for text in ("draft 0 (generate)", "feedback 0", "→ refine", "draft 1 (refine)", "stop", "feedback"):
        assert text in result.output


def test_run_options_reach_the_loop(runner, tmp_path):
    replies = tmp_path / "r.json"
    replies.write_text(json.dumps({"default": "same"}))
    args = [
        "run",
        str(EXAMPLES / "tagline.yaml"),
        "tea",
        "-m",
        f"fake:{replies}",
        "--json",
        "--max-iters",
        "3",
        "--history",
        "none",
        "--select",
        "best",
        "--feedback-mode",
        "generic",
        "--seed",
        "7",
    ]
    result = runner.invoke(cli, args)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["stop_reason"] == "no_change"
    assert data["config"]["history"] == "none" and data["config"]["seed"] == 7
    assert data["config"]["feedback_mode"] == "generic" and data["config"]["select"] == "best"


def test_input_from_file_and_stdin(runner, replies, tmp_path):
    infile = tmp_path / "in.txt"
    infile.write_text("dog, frisbee, catch\n")
    a = runner.invoke(cli, ["run", "commongen", "-f", str(infile), "-m", f"fake:{replies}", "--json"])
    assert a.exit_code == 0 and json.loads(a.stdout)["input"] == "dog, frisbee, catch"
    b = runner.invoke(cli, ["run", "commongen", "-m", f"fake:{replies}", "--json"], input="dog, frisbee, catch")
    assert b.exit_code == 0 and json.loads(b.stdout)["input"] == "dog, frisbee, catch"


@pytest.mark.parametrize(
    "args, message",
    [
        (["run", "commongen", "   "], "input for task 'commongen' is empty"),
        (["run", "nosuchtask", "x"], "unknown task 'nosuchtask'"),
        (["run", "missing.yaml", "x"], "task file not found"),
        (["run", "commongen", "-f", "/no/such/file.txt"], "does not exist"),
        (["run", "commongen", "dog", "-m", "gguf:/no/such/model.gguf"], "model file not found"),
        (["run", "commongen", "dog", "-m", "warp:9"], "unknown model 'warp:9'"),
        (["run", "commongen", "dog", "--history", "all"], "'all' is not one of"),
        (["run", "commongen", "dog", "-o", "novalue"], "is not KEY=VALUE"),
    ],
)
def test_bad_input_gives_one_clear_line(runner, args, message):
    result = runner.invoke(cli, args)
    assert result.exit_code != 0
    assert message in result.output
    assert "Traceback" not in result.output


def test_unreadable_model_file(runner, tmp_path):
    not_gguf = tmp_path / "model.gguf"
    not_gguf.write_text("hello")
    result = runner.invoke(cli, ["run", "commongen", "dog", "-m", f"gguf:{not_gguf}"])
    assert result.exit_code == 2 and "is not a GGUF model file" in result.output
    folder = runner.invoke(cli, ["run", "commongen", "dog", "-m", f"gguf:{tmp_path}"])
    assert folder.exit_code == 2 and "not a file" in folder.output


def test_huge_input_is_refused(runner, tmp_path):
    result = runner.invoke(cli, ["run", "gsm8k", "x" * 30_000, "-m", "fake"])
    assert result.exit_code == 2 and "the limit is 20,000" in result.output


def test_debug_flag_shows_traceback(runner):
    result = runner.invoke(cli, ["--debug", "run", "nosuchtask", "x"])
    assert result.exit_code == 2 and "Traceback" in result.output


def test_backend_failure_keeps_drafts_and_exits_nonzero(runner, tmp_path):
    replies = tmp_path / "r.json"
    replies.write_text(json.dumps({"replies": {"generate": ["A dog runs."], "feedback": [FB_MISSING]}}))
    result = runner.invoke(cli, ["run", "commongen", "dog, frisbee", "-m", f"fake:{replies}", "--json"])
    assert result.exit_code == 1
    data = json.loads(result.stdout.splitlines()[0])
    assert data["stop_reason"] == "error" and data["output"] == "A dog runs."
    assert "finished drafts kept" in result.stderr


def test_tasks_and_models_commands(runner):
    tasks = runner.invoke(cli, ["tasks", "--json"])
    assert tasks.exit_code == 0
    names = {row["name"]: row for row in json.loads(tasks.stdout)}
    assert {"commongen", "gsm8k"} <= set(names)
    assert names["gsm8k"]["metric"].startswith("solve rate")
    table = runner.invoke(cli, ["tasks"])
    assert "commongen" in table.output and "YAML task file" in table.output
    models = runner.invoke(cli, ["models", "--json"])
    data = json.loads(models.stdout)
    assert {"embedded", "gguf:PATH", "openai:NAME"} <= {m["model"] for m in data["models"]}


def test_openai_without_key_or_base_url_says_how_to_fix(runner, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    result = runner.invoke(cli, ["run", "commongen", "dog", "-m", "openai:gpt-4o-mini"])
    assert result.exit_code == 2 and "OPENAI_API_KEY is not set" in result.output


def test_final_feedback_flag_critiques_the_last_draft(runner, tmp_path):
    replies = tmp_path / "r.json"
    replies.write_text(
        json.dumps(
            {
                "replies": {
                    "generate": ["A dog runs."],
                    "feedback": [FB_MISSING, FB_MISSING],
                    "refine": ["A dog runs to catch."],
                }
            }
        )
    )
    base = ["run", "commongen", "dog, frisbee, catch", "-m", f"fake:{replies}", "--json", "--max-iters", "1"]
    skipped = json.loads(runner.invoke(cli, base).stdout)
    asked = json.loads(runner.invoke(cli, [*base, "--final-feedback"]).stdout)
    assert [c["role"] for c in skipped["calls"]] == ["generate", "feedback", "refine"]
    assert [c["role"] for c in asked["calls"]] == ["generate", "feedback", "refine", "feedback"]
    assert skipped["output"] == asked["output"] == "A dog runs to catch."
    assert asked["config"]["final_feedback"] is True and skipped["iterations"][1]["feedback"] is None


def test_models_prints_whole_file_paths_at_80_columns(runner, tmp_path, monkeypatch):
    # a long cache path, as under a home folder or a CI workspace; piped output is 80 columns
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / ("a-rather-long-folder-name" * 3) / "cache"))
    monkeypatch.setenv("COLUMNS", "80")
    files = [e["file"] for e in json.loads(runner.invoke(cli, ["models", "--json"]).stdout)["catalogue"] if e["file"]]
    out = runner.invoke(cli, ["models"]).output
    assert files and all(any(line.rstrip().endswith(f) for line in out.splitlines()) for f in files), out
    assert "…" not in out  # no cell cut short either (model names, descriptions)


def test_live_view_shows_typed_feedback_as_its_fields(runner, replies):
    result = runner.invoke(cli, ["run", "commongen", "dog, frisbee, catch", "-m", f"fake:{replies}"])
    assert result.exit_code == 0, result.output
    assert "missing concepts: frisbee" in result.output and "commonsense: NONE" in result.output
    assert "no missing concepts found" in result.output  # the critique that found nothing missing
    assert '"missing_concepts"' not in result.output  # not the raw JSON


def test_feedback_fields_format_nested_and_long_values():
    from selfrefine.core.wording import feedback_lines

    assert feedback_lines('{"ease_of_spelling": {"reason": "short", "score": 4}, "issues": []}') == [
        "ease of spelling: 4 (short)",
        "no issues found",
    ]
    long = ["The reply names the wrong capital of France entirely.", "It is rude."]
    assert feedback_lines(json.dumps({"issues": long})) == ["issues:", f"  - {long[0]}", f"  - {long[1]}"]
    assert feedback_lines("Missing: ball") is None and feedback_lines("[1, 2]") is None
    deep = '{"a": ' * 5000 + "1" + "}" * 5000
    assert feedback_lines(deep) is None  # json gives up on it: shown raw, no crash
    feedback_lines('{"a": ' * 900 + "1" + "}" * 900)  # parses, then is too deep to format: no crash
