"""The sandbox keeps model code and every process it starts off the network, in each mode.

Each attack targets a socket listening in this test process on 127.0.0.1; it must accept
nothing. The modes are forced with ``run_python(isolation=...)``: the default (everything
this machine offers), a user network namespace alone, and the seccomp filter alone (the
fallback where user namespaces are disabled). A mode this machine lacks is skipped.
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
import textwrap

import pytest

from selfrefine.core.errors import ConfigError, SandboxUnavailableError
from selfrefine.sandbox.confine import confinement
from selfrefine.sandbox.process import Isolation, network_isolation, run_python

PY = sys.executable
DENIED = ("Operation not permitted", "Network is unreachable")  # seccomp, namespace


def _mode(name: str) -> Isolation | None:
    found = network_isolation()
    if name == "default":
        if not found.blocks_network:
            pytest.skip(f"nothing blocks the network here: {found.problems}")
        return None
    if name == "user-namespace":
        if found.namespace != "user-namespace":
            pytest.skip("no user network namespaces here")
        return Isolation(namespace="user-namespace")
    if not found.seccomp:
        pytest.skip(f"no seccomp filter here: {found.problems}")
    return Isolation(seccomp=True)


@pytest.fixture(params=["default", "user-namespace", "seccomp"])
def mode(request) -> Isolation | None:
    return _mode(request.param)


@pytest.fixture(params=["default", "seccomp"])
def filtered(request) -> Isolation | None:
    """The modes with the seccomp filter: only it stops these attacks."""
    if not network_isolation().seccomp:
        pytest.skip(f"no seccomp filter here: {network_isolation().problems}")
    return _mode(request.param)


@pytest.fixture
def listener():
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.5)
    yield server
    server.close()


def _assert_nothing_accepted(server: socket.socket) -> None:
    try:
        conn, peer = server.accept()
    except TimeoutError:
        return
    conn.close()
    pytest.fail(f"the sandboxed code connected to 127.0.0.1 (from {peer})")


def _connect(port: int) -> str:
    return f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2)"


def _run(code: str, isolation: Isolation | None):
    return run_python(textwrap.dedent(code), isolation=isolation, timeout=10)


def test_a_subprocess_grandchild_cannot_connect(mode, listener):
    port = listener.getsockname()[1]
    out = _run(
        f"""
        import subprocess, sys
        subprocess.run([sys.executable, "-c", {_connect(port)!r}], check=True)
        print("connected")
    """,
        mode,
    )
    _assert_nothing_accepted(listener)
    assert not out.ok and "CalledProcessError" in out.error and "connected" not in out.stdout
    assert any(reason in out.stderr for reason in DENIED), out.stderr


def test_an_os_system_grandchild_cannot_connect(mode, listener):
    port = listener.getsockname()[1]
    command = f'{PY} -c "{_connect(port)}"'
    out = _run(
        f"""
        import os
        status = os.system({command!r})
        raise SystemExit(f"grandchild exit status {{status}}" if status else 0)
    """,
        mode,
    )
    _assert_nothing_accepted(listener)
    assert not out.ok and "grandchild exit status" in out.error
    assert any(reason in out.stderr for reason in DENIED), out.stderr


def test_a_forked_and_execed_python_cannot_connect(mode, listener):
    port = listener.getsockname()[1]
    out = _run(
        f"""
        import os, sys
        pid = os.fork()
        if pid == 0:
            os.execv(sys.executable, [sys.executable, "-c", {_connect(port)!r}])
        _, status = os.waitpid(pid, 0)
        raise SystemExit(f"grandchild exit status {{status}}" if status else 0)
    """,
        mode,
    )
    _assert_nothing_accepted(listener)
    assert not out.ok and "grandchild exit status" in out.error
    assert any(reason in out.stderr for reason in DENIED), out.stderr


def test_a_raw_socket_call_in_the_program_itself_cannot_connect(mode, listener):
    """libc's socket()/connect() through ctypes: past the launcher's Python-level guard."""
    port = listener.getsockname()[1]
    out = _run(
        f"""
        import ctypes, os, socket, struct
        libc = ctypes.CDLL(None, use_errno=True)
        fd = libc.socket(socket.AF_INET, socket.SOCK_STREAM, 0)
        if fd < 0:
            raise SystemExit("socket: " + os.strerror(ctypes.get_errno()))
        addr = struct.pack("=HH4s8x", socket.AF_INET, socket.htons({port}), socket.inet_aton("127.0.0.1"))
        if libc.connect(fd, addr, len(addr)) != 0:
            raise SystemExit("connect: " + os.strerror(ctypes.get_errno()))
        print("connected")
    """,
        mode,
    )
    _assert_nothing_accepted(listener)
    assert not out.ok and any(reason in out.error for reason in DENIED), out.error


def test_a_unix_socket_is_refused_by_the_filter(filtered, tmp_path):
    """AF_UNIX is denied too: a path-named socket (Docker, a proxy) is outside any namespace."""
    path = tmp_path / "service.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)
    server.settimeout(0.5)
    try:
        code = f"import socket; s = socket.socket(socket.AF_UNIX); s.connect({str(path)!r})"
        out = _run(
            f"""
            import subprocess, sys
            subprocess.run([sys.executable, "-c", {code!r}], check=True)
        """,
            filtered,
        )
        _assert_nothing_accepted(server)
        assert not out.ok and "Operation not permitted" in out.stderr
    finally:
        server.close()


def test_setns_back_into_the_real_network_fails(mode, listener):
    """As root, nsenter into this process's namespace; a user namespace forbids it."""
    if shutil.which("nsenter") is None:
        pytest.skip("no nsenter here")
    port = listener.getsockname()[1]
    out = _run(
        f"""
        import subprocess, sys
        subprocess.run(["nsenter", "--net=/proc/{os.getpid()}/ns/net", sys.executable, "-c", {_connect(port)!r}],
                       check=True)
    """,
        mode,
    )
    _assert_nothing_accepted(listener)
    assert not out.ok and "CalledProcessError" in out.error


def test_the_callers_open_connection_cannot_be_taken(filtered, listener):
    """pidfd_getfd on the parent (this test process) would reuse its live TCP connection."""
    client = socket.create_connection(listener.getsockname())
    conn, _ = listener.accept()
    conn.settimeout(0.5)
    try:
        out = _run(
            f"""
            import ctypes, os
            libc = ctypes.CDLL(None, use_errno=True)
            pidfd = os.pidfd_open(os.getppid())
            fd = libc.syscall(438, pidfd, {client.fileno()}, 0)  # pidfd_getfd
            if fd < 0:
                raise SystemExit("pidfd_getfd: " + os.strerror(ctypes.get_errno()))
            os.write(fd, b"stolen")
        """,
            filtered,
        )
        with pytest.raises(socket.timeout):
            conn.recv(16)
        # with a PID namespace the caller is not even visible (getppid() is 0: pidfd_open fails)
        assert not out.ok and (
            "pidfd_getfd: Operation not permitted" in out.error
            or (confinement().pid_flags and "Invalid argument" in out.error)
        )
    finally:
        conn.close()
        client.close()


def test_ordinary_programs_still_run(mode):
    solution = "import math\ndef solution():\n    return math.comb(6, 2) * 2"
    assert run_python(solution, call="solution", isolation=mode).value == "30"
    stdin_prog = "import sys, collections\nc = collections.Counter(sys.stdin.read().split())\nprint(c['a'])"
    assert run_python(stdin_prog, stdin="a b a\n", isolation=mode).stdout.strip() == "2"
    tools = textwrap.dedent("""
        import multiprocessing, subprocess
        print(subprocess.run(["echo", "hi"], capture_output=True, text=True).stdout.strip())
        with multiprocessing.Pool(2) as pool:
            print(sum(pool.map(abs, [-1, -2, 3])))
    """)
    out = run_python(tools, isolation=mode, timeout=20)
    assert out.ok and out.stdout.split() == ["hi", "6"], out.stderr


def test_nothing_to_block_the_network_refuses_with_the_fix(monkeypatch):
    monkeypatch.delenv("SELFREFINE_SANDBOX_NETWORK", raising=False)
    for bare in (Isolation(), Isolation(namespace="namespace")):  # root's plain netns: setns escapes it
        with pytest.raises(SandboxUnavailableError, match="SELFREFINE_SANDBOX_NETWORK=allow"):
            run_python("print('ran')", isolation=bare)


def test_the_opt_out_runs_with_only_the_socket_guard(monkeypatch, listener):
    monkeypatch.setenv("SELFREFINE_SANDBOX_NETWORK", "allow")
    assert run_python("print('ran')", isolation=Isolation()).stdout.strip() == "ran"
    port = listener.getsockname()[1]
    direct = run_python(_connect(port), isolation=Isolation())
    assert not direct.ok and "network access is disabled in the selfrefine sandbox" in direct.error
    monkeypatch.setenv("SELFREFINE_SANDBOX_NETWORK", "maybe")
    with pytest.raises(ConfigError, match="'block'.*'allow'"):
        run_python("print('ran')", isolation=Isolation())


def test_a_run_whose_metric_needs_the_sandbox_reports_the_refusal(monkeypatch):
    """The loop swallows a broken metric hook, but not a machine that cannot run the code."""
    from selfrefine import FakeBackend, SelfRefine
    from selfrefine.sandbox import process as sandbox

    monkeypatch.delenv("SELFREFINE_SANDBOX_NETWORK", raising=False)
    monkeypatch.setattr(sandbox, "network_isolation", lambda: Isolation(problems=("simulated machine",)))
    backend = FakeBackend({"generate": ["def solution():\n    return 8"]})
    with pytest.raises(SandboxUnavailableError, match="simulated machine"):
        SelfRefine("gsm8k", backend, max_iterations=0, retry_base_delay=0.0).run("q", reference="8")
