"""Issue 21 item 1 through the service: code-running tasks are off unless `--allow-code-tasks`,
and when on, a model-written solution() that reads the server's files gets nothing back.

Real uvicorn servers on 127.0.0.1, queried with the openai client."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import openai
import pytest
import uvicorn
from click.testing import CliRunner

from selfrefine.backends.fake import FakeBackend
from selfrefine.backends.roles import RoleBackends
from selfrefine.cli import cli
from selfrefine.sandbox.confine import confinement
from selfrefine.service import ServeSettings, create_app
from selfrefine.service.tracing import Tracing


@contextmanager
def serving(backend: FakeBackend, **settings) -> Iterator[openai.OpenAI]:
    app = create_app(ServeSettings(backends=RoleBackends.of(backend), tracing=Tracing.off(), **settings))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0)
    finally:
        server.should_exit = True
        thread.join(timeout=15)


def thief(path: Path) -> FakeBackend:
    """A model whose program returns the content of ``path``."""
    program = f"```python\ndef solution():\n    return open({str(path)!r}).read()\n```"
    return FakeBackend(default=lambda r: "It is correct." if r.role == "feedback" else program)


def ask(client: openai.OpenAI, model: str):
    return client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "How many?"}],
        extra_body={"selfrefine": {"max_iterations": 1}},
    )


def test_code_tasks_are_off_by_default(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-42")
    with serving(thief(secret)) as client:
        ids = {m.id for m in client.models.list().data}
        assert "selfrefine/commongen" in ids
        assert not {"selfrefine/gsm8k", "selfrefine/codeopt"} & ids
        for model in ("selfrefine/gsm8k", "selfrefine/codeopt"):
            with pytest.raises(openai.NotFoundError) as info:
                ask(client, model)
            assert "--allow-code-tasks" in str(info.value)


@pytest.mark.skipif(not confinement().landlock_abi, reason="no Landlock on this kernel")
def test_enabled_code_task_cannot_hand_out_the_servers_files(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-42")
    with serving(thief(secret), allow_code_tasks=True) as client:
        assert "selfrefine/gsm8k" in {m.id for m in client.models.list().data}
        reply = ask(client, "selfrefine/gsm8k")
    dumped = reply.model_dump_json()
    assert "TOP-SECRET-42" not in dumped
    assert '"answer":null' in dumped  # the program failed: PermissionError


def test_serve_help_names_the_flag():
    result = CliRunner().invoke(cli, ["serve", "--help"])
    assert result.exit_code == 0 and "--allow-code-tasks" in result.output
