"""What a new user trips on in eval data and fake reply files (issue 22 items 1, 2, 6, 7;
issue 21 item 8's dataset and fake-file parts): shipped datasets by name, a documented and
checked replies file, YAML-task evals, resume messages, one-line errors for hostile files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import FB_DONE, ROOT

from selfrefine.cli.commands import cli

DATA = ROOT / "src" / "selfrefine" / "evaluation" / "data"
EXAMPLES = ROOT / "examples"


def fake(tmp_path: Path, content: object, name: str = "r.json") -> str:
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return f"fake:{path}"


def gsm_replies(tmp_path: Path) -> str:
    program = "def solution():\n    return 18\n"
    return fake(tmp_path, {"generate": [program] * 10, "default": json.dumps({"correct": True, "error": "none"})})


def invoke(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(cli, list(args), env=env)


# --- item 1: shipped datasets, `selfrefine datasets`, --data NAME, hf: loader ---------------


def test_datasets_lists_name_task_rows_source_and_licence():
    result = invoke("datasets", "--json")
    assert result.exit_code == 0, result.output
    rows = {r["name"]: r for r in json.loads(result.output)}
    assert rows["gsm8k"]["tasks"] == ["gsm8k"] and rows["gsm8k"]["rows"] == 300 and rows["gsm8k"]["licence"] == "MIT"
    assert rows["yelp_extreme"]["shipped"] is False and "self-refine" in rows["yelp_extreme"]["get"]
    table = invoke("datasets", env={"COLUMNS": "150"})
    assert table.exit_code == 0 and "commongen_hard" in table.output and "not shipped" in table.output


def test_shipped_files_hold_the_rows_listed_and_are_package_data():
    rows = {r["name"]: r for r in json.loads(invoke("datasets", "--json").output)}
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["selfrefine"]
    package = ROOT / "src" / "selfrefine"
    for row in rows.values():
        if not row["shipped"]:
            assert not (DATA / row["file"]).exists(), f"{row['name']} may not be redistributed"
            continue
        path = Path(row["path"])
        lines = [line for line in path.read_text().splitlines() if line.strip()]
        assert len(lines) - path.name.endswith(".tsv") == row["rows"]  # a TSV has a header row
        # the README beside each shipped file names it with its row count (its provenance)
        assert f"| {row['name']} | {row['file']} | {row['rows']} |" in (path.parent / "README.md").read_text()
        assert any(path.relative_to(package).match(p) for p in patterns)


def test_every_shipped_set_loads_for_each_of_its_tasks():
    from selfrefine.evaluation.catalog import SETS, resolve
    from selfrefine.evaluation.datasets import load_examples

    for known in (s for s in SETS.values() if s.shipped):
        for task in known.tasks:
            rows = load_examples(task, resolve(known.name))
            assert len(rows) == known.rows and all(r.input.strip() for r in rows), (known.name, task)


def test_eval_takes_a_shipped_name(tmp_path):
    out = tmp_path / "run"
    result = invoke(
        "eval",
        "gsm8k",
        "--data",
        "gsm8k",
        "--limit",
        "2",
        "--out",
        str(out),
        "-m",
        gsm_replies(tmp_path),
        "--no-cache",
        "--max-iters",
        "0",
    )
    assert result.exit_code == 0, result.output
    assert len((out / "results.jsonl").read_text().splitlines()) == 2
    assert json.loads((out / "meta.json").read_text())["data"] == str(DATA / "gsm8k.dev.jsonl")


def test_a_set_that_is_not_shipped_says_where_to_get_it_and_reads_the_users_copy(tmp_path):
    result = invoke("eval", "sentiment", "--data", "yelp_extreme", "--out", str(tmp_path / "a"), "-m", "fake")
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "not shipped" in result.output and "SELFREFINE_DATA" in result.output
    row = {"review": "Awful food.", "sentiment": "Very negative", "target_sentiment": "Very positive"}
    (tmp_path / "yelp_extreme.dev.jsonl").write_text(json.dumps(row) + "\n")
    replies = fake(tmp_path, {"default": "Great food!"})
    result = invoke(
        "eval",
        "sentiment",
        "--data",
        "yelp_extreme",
        "--out",
        str(tmp_path / "b"),
        "-m",
        replies,
        "--no-cache",
        "--max-iters",
        "0",
        env={"SELFREFINE_DATA": str(tmp_path)},
    )
    assert result.exit_code == 0, result.output
    unknown = invoke("eval", "gsm8k", "--data", "gsm9k", "--out", str(tmp_path / "c"), "-m", "fake")
    assert unknown.exit_code == 2 and "selfrefine datasets" in unknown.output
    other_task = invoke("eval", "gsm8k", "--data", "commongen_hard", "--out", str(tmp_path / "d"), "-m", "fake")
    assert other_task.exit_code == 2 and "holds rows for commongen, not gsm8k" in other_task.output


def test_hf_loader_reads_a_local_file_offline(tmp_path):
    pytest.importorskip("datasets")
    data = tmp_path / "rows.jsonl"
    data.write_text(json.dumps({"input": "What is 9 + 9?", "target": "18"}) + "\n")
    env = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    out = tmp_path / "run"
    result = invoke(
        "eval",
        "gsm8k",
        "--data",
        f"hf:{data}",
        "--out",
        str(out),
        "-m",
        gsm_replies(tmp_path),
        "--no-cache",
        "--max-iters",
        "0",
        env=env,
    )
    assert result.exit_code == 0, result.output
    (row,) = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert row["metrics"] == [1.0]


def test_readme_eval_examples_read_no_shared_folder():
    readme = (ROOT / "README.md").read_text()
    evals = [line for line in readme.splitlines() if line.startswith("selfrefine eval")]
    assert evals and not any("../shared" in line for line in evals)


# --- item 2 and issue 21 item 8: the fake replies file --------------------------------------


def test_fake_file_takes_role_keys_at_the_top_level(tmp_path):
    replies = fake(tmp_path, {"generate": ["A dog catches a frisbee."], "feedback": [FB_DONE]})
    result = invoke("run", "commongen", "dog, frisbee, catch", "-m", replies, "--json", "--max-iters", "1")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["output"] == "A dog catches a frisbee."


def test_fake_file_that_is_a_list_is_the_replies(tmp_path):
    replies = fake(tmp_path, ["A dog catches a frisbee.", FB_DONE])
    result = invoke("run", "commongen", "dog, frisbee, catch", "-m", replies, "--json", "--max-iters", "1")
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(
    "content, says",
    [
        ({"gen": ["x"]}, "unknown key(s) 'gen'; the valid keys are replies, table, default, latency, generate"),
        ({"latency": "abc"}, '"latency" must be seconds'),
        ({"replies": 5}, '"replies" must be a list of reply strings'),
        ({"replies": {"writer": ["x"]}}, '"writer" is not a role'),
        ({"default": 3}, '"default" must be a string'),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ],
)
def test_bad_fake_file_is_one_line_naming_file_and_fix(tmp_path, content, says):
    replies = fake(tmp_path, content)
    result = invoke("run", "commongen", "dog, cat", "-m", replies)
    assert result.exit_code == 2, result.output
    assert result.output.count("\n") == 1 and "Traceback" not in result.output
    assert replies[5:] in result.output and says in result.output


def test_models_documents_the_replies_file():
    result = invoke("models", "--json")
    assert '"generate"' in json.loads(result.output)["fake_replies_file"]
    assert "fake:REPLIES.json reads" in invoke("models", env={"COLUMNS": "200"}).output
    assert "### The fake model" in (ROOT / "README.md").read_text()


# --- issue 21 item 8: hostile dataset files -------------------------------------------------


@pytest.mark.parametrize(
    "name, text",
    [
        ("deep.jsonl", "[" * 100_000 + "]" * 100_000 + "\n"),
        ("deep.json", "[" * 100_000 + "]" * 100_000),
    ],
)
def test_deeply_nested_dataset_is_one_line_error(tmp_path, name, text):
    (tmp_path / name).write_text(text)
    task = "dialogue" if name.endswith(".json") else "commongen"
    cmd = [
        sys.executable,
        "-m",
        "selfrefine",
        "eval",
        task,
        "--data",
        str(tmp_path / name),
        "--out",
        str(tmp_path / "run"),
        "-m",
        "fake",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1 and str(tmp_path / name) in proc.stderr and "nested too deeply" in proc.stderr


def test_dataset_with_wrong_types_names_the_line_and_field(tmp_path):
    (tmp_path / "d.jsonl").write_text(json.dumps({"concepts": 5}) + "\n")
    result = invoke(
        "eval", "commongen", "--data", str(tmp_path / "d.jsonl"), "--out", str(tmp_path / "r"), "-m", "fake"
    )
    assert result.exit_code == 2 and "line 1: field 'concepts' must be a non-empty list" in result.output


# --- item 6: eval with a YAML task ------------------------------------------------------------


def test_yaml_task_eval_from_a_text_file_says_there_is_no_metric(tmp_path):
    (tmp_path / "products.txt").write_text("green tea\n\nwool socks\n")
    out = tmp_path / "run"
    result = invoke(
        "eval",
        str(EXAMPLES / "tagline.yaml"),
        "--data",
        str(tmp_path / "products.txt"),
        "--out",
        str(out),
        "-m",
        fake(tmp_path, {"default": "NONE"}),
        "--no-cache",
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["result"]["input"] for r in rows] == ["green tea", "wool socks"]
    assert "no metric: the task defines none" in result.output and "one-step (iteration 0)" not in result.output


def test_bad_json_on_line_one_points_at_txt(tmp_path):
    (tmp_path / "p.jsonl").write_text("green tea\n")
    result = invoke(
        "eval",
        str(EXAMPLES / "tagline.yaml"),
        "--data",
        str(tmp_path / "p.jsonl"),
        "--out",
        str(tmp_path / "r"),
        "-m",
        "fake",
    )
    assert result.exit_code == 2 and "bad JSON" in result.output and ".txt" in result.output


# --- item 7: resume ------------------------------------------------------------------------


def test_resume_says_what_is_kept_and_a_different_run_names_the_settings(tmp_path):
    (tmp_path / "d.txt").write_text("dog, ball\ncat, tree\nsun, lake\n")
    replies = fake(tmp_path, {"generate": ["A dog plays."] * 10, "default": FB_DONE})
    base = [
        "eval",
        "commongen",
        "--data",
        str(tmp_path / "d.txt"),
        "--out",
        str(tmp_path / "run"),
        "-m",
        replies,
        "--no-cache",
        "--max-iters",
        "2",
    ]
    first = invoke(*base, "--limit", "2")
    assert first.exit_code == 0 and "resuming" not in first.output
    again = invoke(*base)
    assert again.exit_code == 0 and "resuming: 2 finished rows kept, 1 to run" in again.output
    other = invoke(*base[:-1], "1", "--history", "none")
    assert other.exit_code == 2
    assert "max_iterations 2 → 1" in other.output and "history" in other.output


def test_readme_yaml_eval_example_runs_as_written(tmp_path):
    readme = (ROOT / "README.md").read_text()
    block = next(b for b in readme.split("```bash\n")[1:] if "examples/tagline.yaml --data products.txt" in b)
    script = block.split("```")[0]
    (tmp_path / "examples").symlink_to(EXAMPLES)
    shell = f'selfrefine() {{ "{sys.executable}" -m selfrefine "$@"; }}\nset -e\n{script}'
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "src"),
        "SELFREFINE_CACHE": str(tmp_path / "c.sqlite"),
        "COLUMNS": "150",
    }
    proc = subprocess.run(["bash", "-c", shell], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "no metric: the task defines none" in proc.stdout
    assert len((tmp_path / "runs" / "taglines" / "results.jsonl").read_text().splitlines()) == 2
