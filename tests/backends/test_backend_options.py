"""Options belong to one backend: typed per scheme, and never leaked to another role's model."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import FB_DONE, ROOT

from selfrefine.backends import FakeBackend, get_backend
from selfrefine.backends.embedded import LlamaCppBackend
from selfrefine.backends.openai_compat import OpenAIBackend
from selfrefine.backends.options import FakeOptions, LlamaCppOptions, OpenAIOptions
from selfrefine.cli.commands import RunFlags, cli, run
from selfrefine.core.errors import ConfigError
from selfrefine.engine.loop import SelfRefine

EXAMPLES = ROOT / "examples"
LOCAL = "http://127.0.0.1:1/v1"  # never contacted: these tests only build backends


@pytest.fixture
def gguf(tmp_path: Path) -> str:
    """A file with the GGUF magic: enough to build a llama.cpp backend (the model loads on first call)."""
    path = tmp_path / "m.gguf"
    path.write_bytes(b"GGUF\x03\x00")
    return f"gguf:{path}"


@pytest.fixture
def no_openai_env(monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")


# -- the registry: typed options per backend ----------------------------------------------


def test_unknown_option_names_the_backend_and_lists_the_valid_ones(gguf):
    with pytest.raises(ConfigError, match=r"^fake does not accept option 'n_ctx'; valid options: reply, latency$"):
        get_backend("fake", n_ctx="8192")
    with pytest.raises(ConfigError, match=r"^gguf does not accept option 'base_url'; valid options: n_ctx, n_threads,"):
        get_backend(gguf, base_url=LOCAL)
    with pytest.raises(
        ConfigError, match=r"^openai does not accept options 'bogus', 'n_ctx'; valid options: base_url,"
    ):
        get_backend("openai:m", base_url=LOCAL, bogus=1, n_ctx=1)


@pytest.mark.parametrize(
    ("spec", "option", "value", "expected"),
    [
        ("gguf", "n_ctx", "big", "must be an integer"),
        ("gguf", "repeat_penalty", "high", "must be a number"),
        ("gguf", "prefix_reuse", "maybe", "must be true or false"),
        ("openai:m", "timeout", "soon", "must be a number"),
        ("openai:m", "api", "soap", "must be one of 'chat', 'completion'"),
        ("fake", "latency", "slow", "must be a number"),
    ],
)
def test_a_wrong_type_says_which_type_is_expected(gguf, spec, option, value, expected):
    spec = gguf if spec == "gguf" else spec
    scheme = spec.partition(":")[0]
    server = {"base_url": LOCAL} if scheme == "openai" else {}
    with pytest.raises(ConfigError) as err:
        get_backend(spec, **server, **{option: value})
    assert str(err.value) == f"{scheme} option {option}={value!r}: {expected}"


def test_option_strings_are_typed(gguf):
    backend = get_backend(gguf, n_ctx="8192", prefix_reuse="off", repeat_penalty="1.1")
    assert (backend.n_ctx, backend.prefix_reuse, backend.repeat_penalty) == (8192, False, 1.1)
    assert get_backend("fake", latency="0.5").latency == 0.5


@pytest.mark.parametrize(
    ("model", "backend"),
    [
        (LlamaCppOptions, LlamaCppBackend),
        (OpenAIOptions, OpenAIBackend),
        (FakeOptions, FakeBackend),
    ],
)
def test_option_models_match_the_backends_keywords(model, backend):
    params = inspect.signature(backend.__init__).parameters
    defaults = {"reply": "fake reply"}  # fake: the spec's reply, FakeBackend's `default`
    for name, field in model.model_fields.items():
        assert name in params or name in defaults, f"{backend.__name__} takes no {name}"
        assert field.default == defaults.get(name, params.get(name) and params[name].default), name


def test_a_ready_backend_takes_no_options():
    with pytest.raises(ConfigError, match=r"apply to a model spec, not to a ready backend \(fake\)"):
        get_backend(FakeBackend(), reply="x")


def test_a_reply_file_takes_no_options(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"default": "x"}))
    with pytest.raises(ConfigError, match="from the file"):
        get_backend(f"fake:{path}", reply="y")


PLUGIN = """
from pydantic import BaseModel, ConfigDict
from selfrefine.backends.fake import FakeBackend

class TypedOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    size: int = 1

def typed(rest, **options):
    return FakeBackend(default=repr(options.get("size")), name="typed:" + rest)

typed.Options = TypedOptions

def plain(rest, *, colour="red"):
    return FakeBackend(default=colour, name="plain:" + rest)
"""


@pytest.fixture
def plugins(tmp_path: Path, monkeypatch) -> None:
    """Two real plugin backends, registered through an entry point on sys.path."""
    (tmp_path / "sr_options_plugin.py").write_text(PLUGIN)
    info = tmp_path / "sr_options_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: sr-options-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[selfrefine.backends]\ntyped = sr_options_plugin:typed\nplain = sr_options_plugin:plain\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))


def test_a_plugin_declares_typed_options(plugins):
    assert get_backend("typed:x", size="3").default == "3"  # the int 3, not the string "3"
    with pytest.raises(ConfigError, match=r"^typed option size='big': must be an integer$"):
        get_backend("typed:x", size="big")
    with pytest.raises(ConfigError, match=r"^typed does not accept option 'colour'; valid options: size$"):
        get_backend("typed:x", colour="blue")


def test_a_plugin_without_options_model_is_checked_by_its_keywords(plugins):
    assert get_backend("plain:x", colour="blue").default == "blue"
    with pytest.raises(ConfigError, match=r"plain does not accept option\(s\) 'size'; valid options: colour$"):
        get_backend("plain:x", size="3")


# -- the CLI: which role's backend gets which options --------------------------------------


def engine_from(*args: str):
    """The engine that `selfrefine run commongen ... ARGS` builds (parsed by click, not run)."""
    params = run.make_context("run", ["commongen", "dog, ball", *args]).params
    params = {k: v for k, v in params.items() if k not in ("task", "input")}  # run's arguments
    return SelfRefine.from_spec(RunFlags.of(params).engine.spec("commongen"))


def test_o_stays_with_model_and_the_roles_that_share_it(gguf, no_openai_env):
    engine = engine_from("--model", gguf, "-o", "n_ctx=8192", "--feedback-model", "openai:critic")
    generate, feedback, refine = (engine.backends[r] for r in ("generate", "feedback", "refine"))
    assert generate.n_ctx == 8192 and refine is generate  # refine shares --model's backend
    assert isinstance(feedback, OpenAIBackend) and feedback.base_url is None


def test_a_role_option_reaches_only_its_role(gguf, no_openai_env):
    engine = engine_from(
        "--model",
        "fake",
        "--feedback-model",
        gguf,
        "--refine-model",
        gguf,
        "--refine-option",
        "n_ctx=2048",
        "--feedback-option",
        "n_batch=64",
    )
    feedback, refine = engine.backends["feedback"], engine.backends["refine"]
    assert (refine.n_ctx, refine.n_batch) == (2048, 512)
    assert (feedback.n_ctx, feedback.n_batch) == (4096, 64)


def test_base_url_goes_to_model_only(no_openai_env):
    engine = engine_from("--model", "openai:local", "--base-url", LOCAL, "--refine-model", "openai:gpt-4o")
    assert engine.backends["generate"].base_url == LOCAL and engine.backends["feedback"].base_url == LOCAL
    assert engine.backends["refine"].base_url is None  # api.openai.com, not the local server


def test_a_role_gets_its_own_server(no_openai_env):
    engine = engine_from(
        "--model",
        "openai:local",
        "--base-url",
        LOCAL,
        "--feedback-model",
        "openai:other",
        "--feedback-option",
        "base_url=http://127.0.0.1:2/v1",
    )
    assert engine.backends["feedback"].base_url == "http://127.0.0.1:2/v1"
    assert engine.backends["generate"].base_url == LOCAL


def test_base_url_for_a_model_without_a_server_says_where_it_goes():
    with pytest.raises(Exception, match=r"'fake' has none; for another role's server use --feedback-option"):
        engine_from("--model", "fake", "--feedback-model", "openai:m", "--base-url", LOCAL)


def test_a_role_option_without_the_role_model_is_refused():
    with pytest.raises(Exception, match="--refine-option needs --refine-model"):
        engine_from("--model", "fake", "--refine-option", "reply=x")


def test_run_feedback_model_does_not_get_o(tmp_path):
    args = [
        "run",
        str(EXAMPLES / "tagline.yaml"),
        "tea",
        "--model",
        "fake",
        "-o",
        "reply=Tea, calmly.",
        "--feedback-model",
        "fake",
        "--json",
    ]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["iterations"][0]["draft"] == "Tea, calmly."
    assert data["iterations"][0]["feedback"]["text"] == "fake reply"  # the feedback model's own default


def test_run_feedback_option_reaches_the_feedback_model():
    args = [
        "run",
        str(EXAMPLES / "tagline.yaml"),
        "tea",
        "--model",
        "fake",
        "-o",
        "reply=Tea, calmly.",
        "--feedback-model",
        "fake",
        "--feedback-option",
        "reply=NONE",
        "--json",
    ]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["iterations"][0]["feedback"]["text"] == "NONE" and data["stop_reason"] == "feedback"
    assert data["output"] == "Tea, calmly."


def test_unknown_option_on_the_command_line_names_the_backend():
    result = CliRunner().invoke(cli, ["run", "commongen", "dog", "--model", "fake", "-o", "n_ctx=1"])
    assert result.exit_code == 2
    assert "fake does not accept option 'n_ctx'; valid options: reply, latency" in result.output


@pytest.fixture
def eval_data(tmp_path: Path) -> Path:
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"concepts": ["dog", "ball"]}) + "\n")
    return data


def test_eval_judge_gets_neither_base_url_nor_o(tmp_path, eval_data, monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    base = [
        "eval",
        "commongen",
        "--data",
        str(eval_data),
        "--out",
        str(tmp_path / "run"),
        "--no-cache",
        "--model",
        "openai:local",
        "--base-url",
        LOCAL,
        "-o",
        "concurrency=2",
        "--judge",
        "openai:gpt-4o",
    ]
    result = CliRunner().invoke(cli, base)
    # the judge did not get --base-url, so it looks for the OpenAI key (not the local server)
    assert result.exit_code == 2 and "OPENAI_API_KEY is not set" in result.output, result.output
    result = CliRunner().invoke(cli, [*base, "--eval-judge-option", "api=soap"])
    assert result.exit_code == 2 and "openai option api='soap'" in result.output, result.output


def test_eval_judge_option_needs_judge(tmp_path, eval_data):
    model = tmp_path / "m.json"
    model.write_text(json.dumps({"default": FB_DONE}))
    result = CliRunner().invoke(
        cli,
        [
            "eval",
            "commongen",
            "--data",
            str(eval_data),
            "--out",
            str(tmp_path / "run"),
            "--model",
            f"fake:{model}",
            "--eval-judge-option",
            "base_url=x",
        ],
    )
    assert result.exit_code == 2 and "--eval-judge-option needs --judge" in result.output
