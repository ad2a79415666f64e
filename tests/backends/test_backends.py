"""Backends: the fake model, the registry, error mapping of the OpenAI path (real sockets)."""

from __future__ import annotations

import asyncio
import json
import re
import socket

import pytest

from selfrefine import (
    BackendError,
    ConfigError,
    FakeBackend,
    TransientBackendError,
    get_backend,
)
from selfrefine.backends.base import CompletionRequest
from selfrefine.backends.embedded import check_gguf
from selfrefine.core.errors import ModelNotFoundError


def req(prompt="hi", role="generate", **kw) -> CompletionRequest:
    return CompletionRequest(role=role, prompt=prompt, **kw)


def complete(backend, request):
    return asyncio.run(backend.complete(request))


def test_fake_replies_by_table_then_role_queue_then_default():
    backend = FakeBackend({"feedback": ["fb"]}, table={"magic": "table hit"}, default=lambda r: f"echo {r.prompt}")
    assert complete(backend, req("a magic word")).text == "table hit"
    assert complete(backend, req("x", role="feedback")).text == "fb"
    assert complete(backend, req("x", role="feedback")).text == "echo x"
    assert [r.role for r in backend.requests] == ["generate", "feedback", "feedback"]


def test_fake_raises_scripted_errors_and_runs_dry():
    backend = FakeBackend([TransientBackendError("flaky")])
    with pytest.raises(TransientBackendError):
        complete(backend, req())
    with pytest.raises(BackendError, match="no reply left"):
        complete(backend, req())


def test_fake_from_file(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"replies": ["one"], "default": "more"}))
    backend = get_backend(f"fake:{path}")
    assert [complete(backend, req()).text for _ in range(2)] == ["one", "more"]
    (tmp_path / "bad.json").write_text("[1,")
    with pytest.raises(ModelNotFoundError, match="cannot read"):
        get_backend(f"fake:{tmp_path / 'bad.json'}")


def test_registry_errors():
    with pytest.raises(ModelNotFoundError, match="unknown model"):
        get_backend("nope:x")
    with pytest.raises(ConfigError, match="needs a file path"):
        get_backend("gguf:")
    with pytest.raises(ConfigError, match="does not accept"):
        get_backend("openai:m", base_url="http://127.0.0.1:9", bogus=1)
    with pytest.raises(ConfigError, match="n_ctx='big': must be an integer"):
        get_backend("gguf:/x.gguf", n_ctx="big")


def test_check_gguf(tmp_path):
    with pytest.raises(ModelNotFoundError, match="not found"):
        check_gguf(tmp_path / "missing.gguf")
    fake = tmp_path / "f.gguf"
    fake.write_bytes(b"NOPE")
    with pytest.raises(ModelNotFoundError, match="not a GGUF"):
        check_gguf(fake)
    real = tmp_path / "r.gguf"
    real.write_bytes(b"GGUF\x03\x00")
    assert check_gguf(real) == real


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_openai_connection_refused_is_transient():
    backend = get_backend("openai:any", base_url=f"http://127.0.0.1:{_closed_port()}/v1", timeout=5)
    with pytest.raises(TransientBackendError, match="cannot reach server"):
        complete(backend, req())
    asyncio.run(backend.aclose())


def test_openai_connection_error_names_the_url():
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    backend = get_backend("openai:any", base_url=url, timeout=5)
    with pytest.raises(TransientBackendError, match=f"cannot reach server: .*{re.escape(url)}"):
        complete(backend, req())
    asyncio.run(backend.aclose())


def test_openai_local_server_needs_no_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    backend = get_backend("openai:m", base_url="http://127.0.0.1:1/v1")
    assert backend.max_concurrency == 4
    with pytest.raises(ConfigError, match="api='soap': must be one of 'chat', 'completion'"):
        get_backend("openai:m", base_url="http://127.0.0.1:1/v1", api="soap")


def test_llama_cpp_log_lines_pass_only_when_they_are_errors(capfd):
    # continuation lines (5) follow the level of the line they continue
    from selfrefine.backends.embedded import _log_errors_only

    for level, text in [(3, b"warn "), (5, b"more warn "), (4, b"err "), (5, b"err cont "), (2, b"info "), (5, b"x")]:
        _log_errors_only(level, text, None)
    assert capfd.readouterr().err == "err err cont "
