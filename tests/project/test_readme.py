"""Every Python code block in README.md runs, exactly as written.

Each block is compiled from the README text itself (named ``README.md:LINE`` in
tracebacks) and executed in a fresh namespace; nothing is copied or rewritten. Two runs:

- fast: the model spec ``embedded`` resolves to the in-package fake model. That is the one
  substitution, made by the ``embedded_is_fake`` fixture below (it swaps the ``embedded``
  scheme in the backend registry for a scripted ``FakeBackend``), so the quick suite
  catches a block that no longer compiles or calls an API that changed;
- ``integration``: the same text on the real default model (Qwen2.5-Coder-1.5B), which is
  what a reader who pastes the block gets.

The README's bash blocks are not run here (``test_default_model.py`` runs the demo command),
but for the lines of the ``llm`` snippet that write ``llm``'s model file.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT

from selfrefine import FakeBackend, RunResult, StopReason
from selfrefine.backends import registry

README = ROOT / "README.md"
_FENCE = re.compile(r"^```python\n(.*?)^```", re.M | re.S)


def python_blocks() -> list[tuple[str, str]]:
    """(``README.md:LINE``, code) for every ```python block, LINE being its first code line."""
    text = README.read_text(encoding="utf-8")
    return [(f"README.md:{text.count(chr(10), 0, m.start(1)) + 1}", m.group(1)) for m in _FENCE.finditer(text)]


BLOCKS = python_blocks()


def run_block(where: str, code: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "__readme__"}
    exec(compile(code, where, "exec"), namespace)
    return namespace


def example_of(schema: dict[str, Any], root: dict[str, Any] | None = None) -> Any:
    """A value of a small JSON Schema (the README's structured-output models): each property
    at a value of its type ("Lyon", 2, 2.5, true), an array of one item, the first of an enum."""
    root = root or schema
    if "$ref" in schema:
        return example_of(root["$defs"][schema["$ref"].rsplit("/", 1)[1]], root)
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object":
        return {k: example_of(v, root) for k, v in schema.get("properties", {}).items()}
    if kind == "array":
        return [example_of(schema.get("items", {}), root)]
    return {"integer": 2, "number": 2.5, "boolean": True}.get(kind, "Lyon")


def fake_reply(request) -> str:
    """A reply that parses for any README task: commongen's JSON critique (the only role
    with a schema) says nothing is missing; a plain critique scores 9/10; drafts are one line,
    or under a run's JSON Schema a value of it."""
    if request.role != "feedback" and request.json_schema is not None:
        return json.dumps(example_of(request.json_schema))
    if request.role == "feedback":
        if request.json_schema is not None:
            return json.dumps({"missing_concepts": [], "commonsense": "NONE"})
        return "Fine as it is. Score: 9/10"
    return "A dog catches the frisbee I throw on the sunny beach with a towel."


@pytest.fixture
def embedded_is_fake(monkeypatch) -> list[FakeBackend]:
    """Resolve the spec ``embedded`` to a fake model; returns the backends it built."""
    built: list[FakeBackend] = []

    def factory(rest: str, **options: Any) -> FakeBackend:
        built.append(FakeBackend(default=fake_reply, name="fake-embedded"))
        return built[-1]

    scheme = registry.BUILTIN["embedded"]
    monkeypatch.setitem(registry.BUILTIN, "embedded", registry.Scheme(scheme.name, scheme.usage, scheme.help, factory))
    return built


SERVER = "http://127.0.0.1:8000/v1"  # where the README's serve blocks send their requests


def test_the_readme_has_its_python_blocks():
    # the library quick start (sync, then async), the Task example, the two clients of
    # `selfrefine serve` (plain, then streamed), and structured output (library, then served)
    assert len(BLOCKS) == 7, [where for where, _ in BLOCKS]
    assert [SERVER in code for _, code in BLOCKS] == [False, False, False, True, True, False, True]


@pytest.fixture
def readme_server(request) -> Iterator[None]:
    """For a block that talks to `selfrefine serve`: the server the README starts
    (defaults, on 127.0.0.1:8000) with the ``embedded`` model, whatever that resolves to."""
    index = request.getfixturevalue("index")
    if SERVER not in BLOCKS[index][1]:
        yield
        return
    import uvicorn

    from selfrefine.backends.registry import get_backend
    from selfrefine.backends.roles import RoleBackends
    from selfrefine.service import ServeSettings, create_app

    app = create_app(ServeSettings(backends=RoleBackends.of(get_backend("embedded"))))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=8000, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            pytest.fail("the README's server could not start on 127.0.0.1:8000 (port taken?)")
        time.sleep(0.05)
    yield
    server.should_exit = True
    thread.join(timeout=30)


def check_block(index: int, namespace: dict[str, Any], out: str) -> None:
    """What each block promises a reader, beyond running without an error."""
    if index == 0:  # sync quick start: a finished run, printed
        result = namespace["result"]
        assert isinstance(result, RunResult) and result.stop_reason is not StopReason.ERROR, result.error
        assert result.output and result.output in out
    elif index == 1:  # async quick start: the typed steps, streamed, ending with the result
        kinds = out.split()
        assert kinds[0] == "draft" and "feedback" in kinds and kinds[-1] == "result", out
    elif index == 2:  # the Task example prints the refined haiku
        assert out.strip(), "the haiku example printed nothing"
    elif index == 3:  # the served run: its output, then the stop reason and the tokens
        reply = namespace["reply"]
        assert reply.choices[0].message.content and reply.choices[0].message.content in out
        assert reply.selfrefine["stop_reason"] in out and reply.usage.total_tokens > 0
    elif index == 4:  # the stream printed the drafts as reasoning, then the output
        assert "Draft 0" in out and "Feedback on draft 0" in out, out
    elif index == 5:  # structured output: JSON that validates as the model, and the object
        result = namespace["result"]
        assert result.parsed is not None, result.iterations[-1].verification
        assert namespace["City"].model_validate_json(result.output) and "name=" in out
    else:  # the SDK's parse() against serve: the JSON and the object it made of it
        message = namespace["message"]
        assert message.parsed is not None and message.parsed == namespace["Person"].model_validate_json(message.content)


@pytest.mark.parametrize("index", range(len(BLOCKS)), ids=[where for where, _ in BLOCKS])
def test_python_block_runs_as_written_on_the_fake_model(index, embedded_is_fake, readme_server, capsys):
    where, code = BLOCKS[index]
    namespace = run_block(where, code)
    out = capsys.readouterr().out
    assert embedded_is_fake, f"{where} never asked for the embedded model"
    assert all(b.requests for b in embedded_is_fake), f"{where} built a model it never called"
    check_block(index, namespace, out)


@pytest.mark.integration
@pytest.mark.parametrize("index", range(len(BLOCKS)), ids=[where for where, _ in BLOCKS])
def test_python_block_runs_as_written_on_the_default_model(index, embedded_by_name, readme_server, capsys):
    # "embedded" is the session's loaded default model (conftest): one load for the five blocks
    where, code = BLOCKS[index]
    namespace = run_block(where, code)
    check_block(index, namespace, capsys.readouterr().out)


# -- the `llm` snippet: it adds selfrefine-chat to the user's models, never replaces them ------


def llm_snippet() -> str:
    """The lines of the README's `llm` bash block that write llm's model file, as written:
    from the line that finds the file through the heredoc's end (not `serve &`, not the
    question asked of the model)."""
    text = README.read_text(encoding="utf-8")
    block = next(b for b in re.findall(r"^```bash\n(.*?)^```", text, re.M | re.S) if "extra-openai-models" in b)
    lines = block.splitlines()
    start = next(i for i, ln in enumerate(lines) if "extra-openai-models.yaml" in ln)
    end = next(i for i, ln in enumerate(lines) if i > start and ln == "YAML")
    return "\n".join(lines[start : end + 1]) + "\n"


def test_the_llm_snippet_keeps_the_models_already_there(tmp_path):
    """Run with bash in a folder whose ``.venv/bin/llm`` is the real ``llm`` (the test
    extra's), its user folder holding a model of the user's own: after the snippet, twice,
    ``llm`` knows both models and the file holds selfrefine-chat once."""
    import subprocess
    import sys

    pytest.importorskip("llm", reason="simonw's llm is in the test extra")
    import yaml

    llm = Path(sys.executable).with_name("llm")
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "llm").symlink_to(llm)
    home = tmp_path / "llm home"  # a space in the path, as on many a Mac
    home.mkdir()
    mine = '- model_id: my-own\n  model_name: gpt-4o-mini\n  api_base: "http://127.0.0.1:9/v1"'  # no final newline
    (home / "extra-openai-models.yaml").write_text(mine, encoding="utf-8")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "LLM_USER_PATH": str(home)}
    for _ in range(2):
        done = subprocess.run(
            ["bash", "-e"], input=llm_snippet(), cwd=tmp_path, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
    written = (home / "extra-openai-models.yaml").read_text(encoding="utf-8")
    assert written.startswith(mine)  # was: replaced by the snippet's model
    entries = yaml.safe_load(written)
    assert [e["model_id"] for e in entries] == ["my-own", "selfrefine-chat"], written
    assert entries[1]["api_base"] == "http://127.0.0.1:8000/v1"
    listed = subprocess.run([str(llm), "models", "list"], env=env, capture_output=True, text=True, timeout=60)
    assert "my-own" in listed.stdout and "selfrefine-chat" in listed.stdout, listed.stdout + listed.stderr
