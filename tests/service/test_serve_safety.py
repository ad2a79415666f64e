"""Bad clients and bad input against a real ``selfrefine serve`` (uvicorn on 127.0.0.1, with the
connection settings the command uses): the Host check (DNS rebinding), lone surrogates and
non-UTF-8 text refused at the edge (HTTP and CLI stdin), unsupported chat fields refused,
the default per-request limits, slow and idle connections timed out, queue places of gone
clients freed, and run slots released whatever a client's socket does (issue 21, items 4, 5,
6, 10, 11). The model is the in-package fake."""

from __future__ import annotations

import itertools
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import httpx2
import openai
import pytest
import uvicorn
from click.testing import CliRunner
from conftest import ROOT
from test_serve import COMMONGEN, user, writer

from selfrefine.backends.base import Backend, CompletionRequest
from selfrefine.backends.fake import FakeBackend
from selfrefine.backends.roles import RoleBackends
from selfrefine.cli import cli
from selfrefine.core.config import upper_bound
from selfrefine.core.errors import ConfigError
from selfrefine.service import Caps, ServeSettings, create_app
from selfrefine.service.connections import server_config
from selfrefine.service.tracing import Tracing


@dataclass
class Served:
    url: str
    port: int
    settings: ServeSettings
    server: uvicorn.Server
    thread: threading.Thread

    @property
    def fake(self) -> FakeBackend:
        return self.settings.backends.model  # type: ignore[return-value]

    def client(self, **kw: Any) -> openai.OpenAI:
        kw.setdefault("max_retries", 0)
        return openai.OpenAI(base_url=f"{self.url}/v1", api_key="no-key", **kw)

    def health(self) -> dict[str, Any]:
        return httpx2.get(f"{self.url}/health").json()

    def wait_health(self, ready: Callable[[dict[str, Any]], bool], timeout: float = 10.0) -> float:
        """Seconds until ``ready(health)`` held."""
        start = time.monotonic()
        while not ready(self.health()):
            assert time.monotonic() - start < timeout, f"not there in {timeout}s: {self.health()}"
            time.sleep(0.05)
        return time.monotonic() - start

    def connections(self) -> int:
        return len(self.server.server_state.connections)


@pytest.fixture
def serve() -> Iterator[Callable[..., Served]]:
    """``serve(backend, client_timeout=..., **settings)``: a real server configured as
    ``selfrefine serve`` configures uvicorn (``server_config``)."""
    started: list[Served] = []

    def start(backend: Backend | None = None, client_timeout: float = 30.0, **settings: Any) -> Served:
        settings.setdefault("tracing", Tracing.off())
        settings = ServeSettings(
            backends=RoleBackends.of(backend or writer()), client_timeout=client_timeout, **settings
        )
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        config = server_config(
            create_app(settings), host="127.0.0.1", port=port, log_level="warning", client_timeout=client_timeout
        )
        config.timeout_graceful_shutdown = 3
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        deadline = time.monotonic() + 15
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.01)
        served = Served(f"http://127.0.0.1:{port}", port, settings, server, thread)
        started.append(served)
        return served

    yield start
    for served in started:
        served.server.should_exit = True
        served.thread.join(timeout=15)


def raw(port: int, data: bytes, rcvbuf: int | None = None) -> socket.socket:
    """A plain TCP client that sends ``data`` (and reads only if the test does)."""
    sock = socket.socket()
    if rcvbuf is not None:  # set before connecting, so the window stays small
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.connect(("127.0.0.1", port))
    sock.sendall(data)
    return sock


def post(path: str, body: bytes, host: str = "127.0.0.1") -> bytes:
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def closed_within(sock: socket.socket, seconds: float) -> bool:
    """Whether the server closed (or reset) the connection within ``seconds``; reads what it sent."""
    sock.settimeout(0.2)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if sock.recv(1 << 16) == b"":
                return True
        except TimeoutError:
            continue
        except OSError:  # reset
            return True
    return False


# -- item 5: the Host check -------------------------------------------------------------------


def test_a_foreign_host_header_is_refused(serve):
    served = serve()
    evil = httpx2.get(f"{served.url}/health", headers={"Host": "rebind.evil.example"})
    assert evil.status_code == 400, evil.text
    error = evil.json()["error"]
    assert error["code"] == "invalid_host" and "--allowed-host" in error["message"]
    page = httpx2.get(f"{served.url}/", headers={"Host": "rebind.evil.example:80"})
    assert page.status_code == 400
    for host in (f"127.0.0.1:{served.port}", "localhost", f"localhost:{served.port}", "[::1]:8000", "127.0.0.2"):
        assert httpx2.get(f"{served.url}/health", headers={"Host": host}).status_code == 200, host
    # the SDK's own requests pass
    assert served.client().models.list().data


def test_allowed_host_opens_one_name(serve):
    served = serve(allowed_hosts=["api.example.org"])
    assert httpx2.get(f"{served.url}/health", headers={"Host": "api.example.org:8000"}).status_code == 200
    assert httpx2.get(f"{served.url}/health", headers={"Host": "API.example.org"}).status_code == 200
    assert httpx2.get(f"{served.url}/health", headers={"Host": "other.example.org"}).status_code == 400
    assert httpx2.get(f"{served.url}/health", headers={"Host": "localhost"}).status_code == 200


def test_serve_host_and_allowed_host_options():
    from selfrefine.cli.serve import allowed_hosts

    assert allowed_hosts("127.0.0.1", ()) == []  # loopback names only
    assert allowed_hosts("10.1.2.3", ()) == ["10.1.2.3"]
    assert allowed_hosts("0.0.0.0", ()) == ["*"]  # every address: any name (the key guards it)
    assert allowed_hosts("0.0.0.0", ("api.example.org",)) == ["api.example.org"]
    result = CliRunner().invoke(cli, ["serve", "--help"])
    assert "--allowed-host" in result.output and "--client-timeout" in result.output


# -- item 6: invalid text at the edge ---------------------------------------------------------

SURROGATE_CHAT = b'{"model": "selfrefine/commongen", "messages": [{"role": "user", "content": "dog \\ud800 frisbee"}]}'


def test_lone_surrogate_is_400_before_any_call(serve):
    served = serve()
    reply = httpx2.post(
        f"{served.url}/v1/chat/completions", content=SURROGATE_CHAT, headers={"Content-Type": "application/json"}
    )
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error["param"] == "messages.0.content" and "surrogate" in error["message"], error

    refine = httpx2.post(
        f"{served.url}/v1/refine",
        content=b'{"task": "commongen", "input": "a \\udfff b"}',
        headers={"Content-Type": "application/json"},
    )
    assert refine.status_code == 400 and refine.json()["error"]["param"] == "input"
    # a proper pair (an emoji) is fine
    ok = httpx2.post(
        f"{served.url}/v1/refine",
        content=b'{"task": "commongen", "input": "dog \\ud83d\\ude00, ball"}',
        headers={"Content-Type": "application/json"},
    )
    assert ok.status_code == 200, ok.text
    assert [r.role for r in served.fake.requests][0] == "generate" and len(served.fake.requests) >= 2
    served.fake.requests.clear()
    bad_bytes = httpx2.post(
        f"{served.url}/v1/refine",
        content=b'{"task": "commongen", "input": "dog \xff ball"}',
        headers={"Content-Type": "application/json"},
    )
    assert bad_bytes.status_code == 400 and "UTF-8" in bad_bytes.json()["error"]["message"]
    assert served.fake.requests == []


def test_non_utf8_stdin_is_a_one_line_error():
    cmd = [sys.executable, "-m", "selfrefine", "run", "commongen", "--model", "fake", "--json"]
    proc = subprocess.run(cmd, input=b"dog \xff frisbee", capture_output=True, timeout=60)
    err = proc.stderr.decode()
    assert proc.returncode != 0 and "Traceback" not in err, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "UTF-8" in lines[0] and "stdin" in lines[0], err
    # an argument with an undecodable byte (Python hands it over as a lone surrogate)
    arg = subprocess.run([*cmd[:5], b"dog \xff frisbee", *cmd[5:]], capture_output=True, timeout=60)
    lines = [ln for ln in arg.stderr.decode().splitlines() if ln.strip()]
    assert arg.returncode != 0 and len(lines) == 1 and "INPUT is not UTF-8" in lines[0], arg.stderr.decode()
    good = subprocess.run(cmd, input=b"dog, frisbee", capture_output=True, timeout=60)
    assert good.returncode == 0, good.stderr.decode()


# -- item 10: what the API cannot do is refused -----------------------------------------------


def test_tools_unknown_roles_and_images_are_400(serve):
    served = serve()
    client = served.client()
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}
    cases = [
        ({"messages": user("dog, ball"), "tools": [tool], "tool_choice": "required"}, "tools"),
        ({"messages": user("dog, ball"), "tools": [tool]}, "tools"),
        ({"messages": [*user("dog, ball"), {"role": "tool", "content": "x", "tool_call_id": "1"}]}, "messages.1.role"),
        ({"messages": [{"role": "wizard", "content": "dog, ball"}]}, "messages.0.role"),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "dog, ball"},
                            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                        ],
                    }
                ]
            },
            "messages.0.content.1.type",
        ),
    ]
    for fields, param in cases:
        with pytest.raises(openai.BadRequestError) as caught:
            client.chat.completions.create(model=COMMONGEN, **fields)
        error = caught.value.response.json()["error"]
        assert error["param"] == param and "not supported" in error["message"], (param, error)
    assert served.fake.requests == []
    # tools the client says not to use change nothing
    reply = client.chat.completions.create(
        model=COMMONGEN, messages=user("dog, ball"), tools=[tool], tool_choice="none"
    )
    assert reply.choices[0].message.content == "Here dog and ball meet."


# -- item 11: limits and timeouts -------------------------------------------------------------


def test_request_options_are_capped_by_default(serve):
    served = serve()
    reply = httpx2.post(
        f"{served.url}/v1/refine",
        json={"task": "commongen", "input": "dog, ball", "options": {"max_iterations": 10**9, "max_tokens": 10**9}},
    )
    assert reply.status_code == 200, reply.text
    config = reply.json()["config"]
    assert config["max_iterations"] == 10  # the documented default limits
    assert config["max_tokens"] == 8192
    hot = httpx2.post(
        f"{served.url}/v1/refine", json={"task": "commongen", "input": "dog, ball", "options": {"temperature": 1e308}}
    )
    assert hot.status_code == 400 and "temperature" in hot.json()["error"]["message"]
    with pytest.raises(openai.BadRequestError):
        served.client().chat.completions.create(model=COMMONGEN, messages=user("a, b"), temperature=1e308)


def test_slow_and_idle_connections_are_dropped(serve):
    served = serve(client_timeout=1.0)
    idle = raw(served.port, b"")
    loris = raw(served.port, b"POST /v1/refine HTTP/1.1\r\nHost: 127.0.0.1\r\n")

    def trickle() -> None:  # one header byte every 0.3 s: never a whole request
        for _ in range(20):
            try:
                loris.send(b"X")
            except OSError:
                return
            time.sleep(0.3)

    threading.Thread(target=trickle, daemon=True).start()
    body = raw(served.port, b"POST /v1/refine HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{")
    start = time.monotonic()
    assert closed_within(idle, 4) and closed_within(loris, 4)
    body.settimeout(4)
    assert body.recv(1 << 16).startswith(b"HTTP/1.1 408")
    assert time.monotonic() - start < 5
    served.wait_health(lambda h: h["running"] == 0 and h["queued"] == 0)


def test_a_gone_client_gives_its_queue_place_back(serve):
    served = serve(writer(latency=1.0, worsening=True), max_concurrency=1, max_queue=1)
    client = served.client()
    first = threading.Thread(
        target=lambda: client.chat.completions.create(
            model=COMMONGEN, messages=user("a1, b2, c3, d4"), extra_body={"selfrefine": {"max_iterations": 2}}
        )
    )
    first.start()
    served.wait_health(lambda h: h["running"] == 1)
    with pytest.raises(openai.APITimeoutError):
        served.client(timeout=0.5).chat.completions.create(model=COMMONGEN, messages=user("x, y"))
    # well before the first run ends (5 calls of 1 s), the place is free again
    assert served.wait_health(lambda h: h["queued"] == 0, timeout=1.5) < 1.5
    assert served.health()["running"] == 1
    first.join()


# -- item 4: slots are released whatever the socket does --------------------------------------


def big_writer(size: int = 1_000_000) -> FakeBackend:
    """Long drafts, each different, and a critic never satisfied: a stream that nobody reads
    fills every socket buffer within a few steps, and the run goes on until its budget."""
    drafts = itertools.count()

    def reply(request: CompletionRequest) -> str:
        if request.role == "feedback":
            return json.dumps({"missing_concepts": ["dog"], "commonsense": "NONE"})
        return f"x{next(drafts)} " * (size // 4)

    return FakeBackend(default=reply, latency=0.2)


def stalled_stream(port: int) -> socket.socket:
    body = json.dumps(
        {"model": COMMONGEN, "messages": user("dog, ball"), "stream": True, "selfrefine": {"max_iterations": 10}}
    ).encode()
    return raw(port, post("/v1/chat/completions", body), rcvbuf=4096)


def test_clients_that_stop_reading_do_not_keep_their_slots(serve):
    served = serve(big_writer(), client_timeout=2.0, max_concurrency=2, caps=Caps(max_seconds=3.0))
    stalled = [stalled_stream(served.port) for _ in range(2)]
    served.wait_health(lambda h: h["running"] == 2)
    # the runs end within their budget, though nobody reads what they wrote
    assert served.wait_health(lambda h: h["running"] == 0 and h["queued"] == 0, timeout=8) < 8
    reply = served.client(timeout=20).chat.completions.create(
        model=COMMONGEN, messages=user("dog, ball"), extra_body={"selfrefine": {"max_iterations": 0}}
    )
    assert reply.choices[0].message.content.startswith("x")
    # and a send that cannot proceed for client_timeout drops the client
    deadline = time.monotonic() + 10
    while served.connections() > 0:
        assert time.monotonic() < deadline, f"{served.connections()} connections still open"
        time.sleep(0.1)
    for sock in stalled:
        sock.close()


# -- issue 30 item 7: the samples cap, the upstream's address, a strict Host ------------------


def _status_for_host(port: int, host: str) -> int:
    sock = raw(port, f"GET /health HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode("latin-1"))
    sock.settimeout(10)
    try:
        return int(sock.recv(1 << 16).split(b" ", 2)[1])
    finally:
        sock.close()


def test_host_header_is_a_bracketed_ipv6_or_a_name_then_an_optional_port(serve):
    served = serve()
    for host in ("[::1]evil.com", "[::1]evil.com:80", "[::1]:80:80", "127.0.0.1 evil.com", "evil.com@127.0.0.1",
                 "[::1", "localhost:80x", ":80"):  # fmt: skip
        assert _status_for_host(served.port, host) == 400, host
    for host in ("[::1]", "[::1]:8000", "127.0.0.1", f"localhost:{served.port}"):
        assert _status_for_host(served.port, host) == 200, host


def test_samples_over_the_limit_get_the_limit_the_readme_states(serve):
    readme = (ROOT / "README.md").read_text()
    assert "8 samples per step (asking more gets the limit" in readme
    served = serve()
    for asked in (9, 17, 10**6):
        reply = httpx2.post(
            f"{served.url}/v1/refine",
            json={"task": "commongen", "input": "dog, ball", "options": {"samples": asked, "max_iterations": 0}},
        )
        assert reply.status_code == 200, (asked, reply.text)
        assert reply.json()["config"]["samples"] == Caps.LIMITS["samples"] == 8
    zero = httpx2.post(
        f"{served.url}/v1/refine", json={"task": "commongen", "input": "a, b", "options": {"samples": 0}}
    )
    assert zero.status_code == 400 and "samples" in zero.json()["error"]["message"]


def test_the_servers_samples_limit_is_a_declared_policy_under_the_options_one_cap():
    # the option states its cap once (RefineConfig); the server's 8 is its own policy, which
    # may only lower that cap: a server built with more is refused with an error naming it
    cap = upper_bound("samples")
    assert cap is not None and Caps.LIMITS["samples"] < cap

    class Generous(Caps):
        LIMITS: ClassVar[dict[str, float]] = {**Caps.LIMITS, "samples": cap + 1}

    with pytest.raises(ConfigError) as caught:
        Generous()
    said = f"the server's limit Caps.LIMITS['samples'] = {cap + 1:g} is over the option's own cap of {cap:g}"
    assert str(caught.value).startswith(said), caught.value


UPSTREAM = "http://10.77.0.9:8000/v1"


def test_a_502_does_not_tell_the_client_the_upstream_address(serve, caplog):
    from selfrefine.core.errors import BackendError

    message = f"openai:qwen: cannot reach server: Connection error. (at {UPSTREAM})"
    served = serve(FakeBackend(default=lambda request: (_ for _ in ()).throw(BackendError(message))))
    with caplog.at_level("WARNING", logger="selfrefine.serve"):
        native = httpx2.post(f"{served.url}/v1/refine", json={"task": "commongen", "input": "dog, ball"})
        chat = httpx2.post(f"{served.url}/v1/chat/completions", json={"model": COMMONGEN, "messages": user("a, b")})
        streamed = httpx2.post(
            f"{served.url}/v1/chat/completions", json={"model": COMMONGEN, "messages": user("a, b"), "stream": True}
        )
    assert chat.status_code == 502, chat.text  # /v1/refine answers its run result, error included
    for text in (native.text, chat.text, streamed.text):
        assert "cannot reach server" in text and "10.77.0.9" not in text and "http://" not in text, text
    assert UPSTREAM in caplog.text  # the operator still sees where it failed
