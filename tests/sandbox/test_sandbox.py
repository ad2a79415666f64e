"""The sandbox: limits, stdin, output cap, process-group kill, no network, CPU timing."""

from __future__ import annotations

import os
import socket
import time

import pytest

from selfrefine.sandbox.process import network_isolation, run_python


def test_stdin_is_passed_and_errors_are_reported():
    out = run_python("import sys\nprint(sum(map(int, sys.stdin.read().split())))", stdin="1 2\n3\n")
    assert out.ok and out.stdout.strip() == "6"
    bad = run_python("x = 1\nraise KeyError('k')")
    assert not bad.ok and "KeyError" in bad.error and 'main.py", line 2' in bad.stderr
    assert run_python("import sys\nsys.exit(3)").returncode == 3


def test_call_mode_still_returns_the_value():
    assert run_python("def solution():\n    return 6 * 7", call="solution").value == "42"


def test_output_cap_bounds_an_endless_printer():
    out = run_python("while True:\n    print('x' * 1000)", timeout=1, max_output=2000)
    assert out.timed_out and len(out.stdout) < 2100 and out.stdout.endswith("[output truncated]")


def test_memory_limit():
    hog = run_python("x = bytearray(1024 ** 3)", memory_mb=200)
    assert not hog.ok and "MemoryError" in hog.error


def test_timeout_kills_child_processes_too():
    # The program sees its own PID namespace, so the grandchild is found by a marker in its
    # command line; /usr/bin is outside the sandbox's file system, so it runs the interpreter.
    marker = f"selfrefine-grandchild-{time.time_ns()}"
    code = (
        "import subprocess, sys\n"
        f"p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)', {marker!r}])\n"
        "print(p.pid, flush=True)\n"
        "while True:\n    pass\n"
    )
    start = time.monotonic()
    out = run_python(code, timeout=1.5)
    assert out.timed_out and time.monotonic() - start < 6
    assert out.stdout.split()[0].isdigit()
    time.sleep(0.2)
    assert not _alive_with(marker), "the grandchild survived the timeout"


def _alive_with(marker: str) -> bool:
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                if marker.encode() in fh.read() and _alive(int(entry)):
                    return True
        except OSError:
            continue
    return False


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as fh:
            return "State:\tZ" not in fh.read()
    except FileNotFoundError:
        return False


@pytest.fixture
def open_port():
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    yield server.getsockname()[1]
    server.close()


def test_connecting_to_an_open_local_port_fails(open_port):
    code = f"import socket\nsocket.create_connection(('127.0.0.1', {open_port}), timeout=2)\nprint('connected')"
    out = run_python(code)
    assert not out.ok and "connected" not in out.stdout
    raw = f"import _socket\ns = _socket.socket()\ns.connect(('127.0.0.1', {open_port}))\nprint('connected')"
    assert "connected" not in run_python(raw).stdout


def test_network_namespace_when_the_kernel_allows_it():
    if network_isolation().namespace is None:
        pytest.skip("no network namespaces here")
    out = run_python("import os\nprint(os.readlink('/proc/self/ns/net'))")
    assert out.ok and out.stdout.strip() != os.readlink("/proc/self/ns/net")


def test_measure_reports_the_programs_own_cpu_time():
    quick = run_python("x = 1", measure=True)
    busy = run_python("s = sum(range(3 * 10 ** 6))", measure=True)
    assert quick.seconds is not None and quick.seconds < 0.01  # start-up is not counted
    assert busy.seconds > quick.seconds and busy.seconds > 0.01
    assert run_python("x = 1").seconds is None
