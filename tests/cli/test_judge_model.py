"""--judge-model: the loop's judge role gets a model of its own from the command line, as
--feedback-model gives the critic one (run, eval, serve; judge_model in the library and the
spec). eval's --judge stays the evaluation's judge, with options of its own
(--eval-judge-option; --judge-option is the loop's judge's only). Fake models, no server."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from selfrefine.cli.commands import EvalFlags, RunFlags, cli
from selfrefine.cli.options import evaluation_judge_model
from selfrefine.cli.serve import ServeFlags, _settings
from selfrefine.engine.spec import ModelSpec
from selfrefine.evaluation.ray_pool import EngineRecipe

RUN = ["run", "commongen", "dog, ball", "-m", "fake", "-o", "reply=A dog and a ball.", "--max-iters", "0"]


def judge_file(tmp_path: Path) -> str:
    path = tmp_path / "judge.json"
    path.write_text(json.dumps({"default": "Yes"}))
    return f"fake:{path}"


def run_spec(*args: str):
    params = cli.commands["run"].make_context("run", ["commongen", "dog, ball", *args]).params
    return RunFlags.of({k: v for k, v in params.items() if k not in ("task", "input")}).engine.spec("commongen")


def test_the_flag_and_its_options_reach_the_spec_and_only_the_judge():
    spec = run_spec("-m", "fake", "-o", "latency=0.1", "--judge-model", "fake", "--judge-option", "latency=0.5")
    assert spec.judge_model == ModelSpec(model="fake", options={"latency": 0.5})
    assert spec.model.options == {"latency": 0.1} and spec.feedback_model is None
    assert run_spec("-m", "fake").judge_model is None  # not given: the feedback role's backend judges


def test_a_run_records_the_judge_s_model(tmp_path):
    judge = judge_file(tmp_path)
    result = CliRunner().invoke(cli, [*RUN, "--judge-model", judge, "--json"])
    assert result.exit_code == 0, result.output
    models = json.loads(result.stdout)["config"]["models"]
    assert models == {"generate": "fake", "feedback": "fake", "refine": "fake", "judge": judge}


def test_a_bad_judge_model_or_option_is_one_line():
    for extra, said in [
        (["--judge-model", "nope:x"], "Error: unknown model 'nope:x'"),
        (["--judge-model", "fake", "--judge-option", "n_ctx=3"], "Error: fake does not accept option 'n_ctx'"),
        (["--judge-model", "fake:/no/such/replies.json"], "Error: fake reply file not found"),
    ]:
        result = CliRunner().invoke(cli, [*RUN, *extra])
        lines = [line for line in result.output.splitlines() if line.strip()]
        assert result.exit_code != 0 and len(lines) == 1 and lines[0].startswith(said), result.output
    alone = CliRunner().invoke(cli, [*RUN, "--judge-option", "reply=x"])
    assert alone.exit_code == 2 and "--judge-option needs --judge-model" in alone.output


def test_eval_keeps_its_judge_apart_from_the_loop_s(tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"concepts": ["dog", "ball"]}) + "\n")
    base = ["eval", "commongen", "--data", str(data), "--no-cache", "-m", "fake", "-o", "reply=A dog and a ball."]
    plain = CliRunner().invoke(cli, [*base, "--out", str(tmp_path / "plain"), "--max-iters", "0"])
    assert plain.exit_code == 0, plain.output
    meta = json.loads((tmp_path / "plain" / "meta.json").read_text())
    assert meta["models"]["judge"] == "fake" and "judge" not in meta["model_ids"]  # default: older folders resume
    writer = tmp_path / "writer.json"  # a refinement that differs from draft 0, for the evaluation's judge
    missing = json.dumps({"missing_concepts": ["ball"], "commonsense": "NONE"})
    writer.write_text(json.dumps({"generate": ["A dog."], "refine": ["A dog and a ball."], "feedback": [missing]}))
    base[-3:] = [f"fake:{writer}"]
    args = [*base, "--out", str(tmp_path / "own"), "--max-iters", "1", "--judge-model", "fake"]
    args += ["--judge", "fake", "--eval-judge-option", 'reply={"winner": "2"}']  # the evaluation's judge's own
    own = CliRunner().invoke(cli, args)
    assert own.exit_code == 0, own.output
    ids = json.loads((tmp_path / "own" / "meta.json").read_text())["model_ids"]
    assert ids["judge"] == "fake"  # a judge of its own is a setting of the run: resuming with another is refused
    [row] = [json.loads(line) for line in (tmp_path / "own" / "results.jsonl").read_text().splitlines()]
    assert row["judge"]["raw"] == ['{"winner": "2"}'] * 2  # the evaluation's judge got it
    assert args[-6:-4] == ["--judge-model", "fake"]
    again = CliRunner().invoke(cli, args[:-6] + args[-4:])  # the same folder, the critic's model judging
    assert again.exit_code != 0 and "judge model" in again.output, again.output
    own_file = ["--judge-model", judge_file(tmp_path), "--judge-option", "reply=x"]  # the loop's judge's option
    mixed = CliRunner().invoke(cli, [*args[:-6], *own_file, *args[-4:]])
    assert mixed.exit_code != 0 and "takes its replies and latency from the file" in mixed.output, mixed.output


def _eval_flags(*args: str) -> EvalFlags:
    params = cli.commands["eval"].make_context("eval", ["commongen", "--data", "d", "--out", "o", *args]).params
    return EvalFlags.of({k: v for k, v in params.items() if k != "task"})


def test_each_judge_takes_only_its_own_options():
    opts = _eval_flags("-m", "fake", "--judge-model", "fake", "--judge-option", "latency=0.5", "--judge", "fake")
    assert opts.engine.spec("commongen").judge_model == ModelSpec(model="fake", options={"latency": 0.5})
    assert evaluation_judge_model(opts.evaluation_judge, opts.evaluation_judge_options) == ModelSpec(model="fake")
    opts = _eval_flags("-m", "fake", "--judge", "fake", "--eval-judge-option", "latency=0.25")
    assert opts.engine.spec("commongen").judge_model is None  # the loop's judge: the feedback role's backend
    assert evaluation_judge_model(opts.evaluation_judge, opts.evaluation_judge_options).options == {"latency": 0.25}


def test_a_judge_option_without_its_judge_says_which_flag_to_use(tmp_path):
    data = tmp_path / "d.txt"
    data.write_text("dog, ball\n")
    base = ["eval", "commongen", "--data", str(data), "--out", str(tmp_path / "o"), "--no-cache", "-m", "fake"]
    loop_s = CliRunner().invoke(cli, [*base, "--judge", "fake", "--judge-option", "latency=0.1"])
    assert loop_s.exit_code == 2 and "--judge-option needs --judge-model" in loop_s.output, loop_s.output
    assert "eval's --judge takes --eval-judge-option" in loop_s.output
    eval_s = CliRunner().invoke(cli, [*base, "--eval-judge-option", "latency=0.1"])
    assert eval_s.exit_code == 2 and "--eval-judge-option needs --judge" in eval_s.output, eval_s.output
    assert "the loop's --judge-model takes --judge-option" in eval_s.output
    assert not (tmp_path / "o").exists()  # refused before the run folder or any model
    run_help = CliRunner().invoke(cli, ["run", "--help"]).output
    assert "--eval-judge-option" not in run_help  # eval's alone


def test_the_help_says_which_judge_is_which():
    run_help = " ".join(CliRunner().invoke(cli, ["run", "--help"]).output.split())
    assert "--judge-model TEXT A different model for the loop's judge role" in run_help
    assert "--judge-option KEY=VALUE" in run_help and "--judge MODEL" not in run_help
    eval_help = " ".join(CliRunner().invoke(cli, ["eval", "--help"]).output.split())
    assert "--judge MODEL The evaluation's judge (not the loop's judge role, --judge-model)" in eval_help
    assert "Not eval's --judge, which measures the results afterwards." in eval_help


def test_serve_takes_a_judge_model(tmp_path):
    judge = judge_file(tmp_path)
    args = ["-m", "fake", "--judge-model", judge]
    backends = _settings(ServeFlags.of(cli.commands["serve"].make_context("serve", args).params)).backends
    assert backends["judge"].name == judge and backends["feedback"] is backends["generate"]
    args = ["-m", "fake", "--judge-model", "fake", "--judge-option", "latency=0.25"]
    backends = _settings(ServeFlags.of(cli.commands["serve"].make_context("serve", args).params)).backends
    assert backends["judge"].latency == 0.25 and backends["generate"].latency == 0
    shared = _settings(ServeFlags.of(cli.commands["serve"].make_context("serve", ["-m", "fake"]).params)).backends
    assert shared["judge"] is shared["feedback"] and shared.distinct() == [shared.model]


def test_a_ray_actor_gets_the_judge_model_with_an_absolute_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "j.json").write_text("{}")
    spec = run_spec("-m", "fake", "--judge-model", "fake:j.json")
    recipe = EngineRecipe.portable(spec)
    assert recipe.spec.judge_model == ModelSpec(model=f"fake:{tmp_path / 'j.json'}") and recipe.judge is None
