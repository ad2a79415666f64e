"""Run model-written Python in a separate, limited process.

The code runs in a fresh interpreter (``python -I``: no user site, no env-based paths) in
a temporary working directory, with CPU-time, address-space and file-size limits, a
wall-clock timeout that kills the whole process group, capped output (read incrementally,
so a program printing forever cannot fill the caller's memory) and no network:

1. the kernel keeps the child and everything it starts off the network, with a network
   namespace and/or a seccomp filter (:mod:`selfrefine.isolation`); where neither works,
   :func:`run_python` refuses with :class:`SandboxUnavailableError` unless
   ``SELFREFINE_SANDBOX_NETWORK=allow``;
2. the program sees only its own files and processes (:mod:`selfrefine.sandbox.confine`): a
   Landlock ruleset lets it read the standard library and system libraries and write only
   its temporary directory, and it runs as init of its own PID namespace, so nothing it
   starts outlives it; :func:`run_python` refuses where Landlock is missing unless
   ``SELFREFINE_SANDBOX_FILES=allow``;
3. in every case a small launcher replaces ``socket.socket``, ``_socket.socket`` and the
   connection helpers with a function raising ``PermissionError`` before the program runs
   (no sitecustomize is needed, which ``-I`` would ignore anyway): a clear message for the
   program itself, but no barrier for the processes it starts.

It never runs in the caller's process. With ``measure=True`` the launcher also reports
the CPU time of the program itself (excluding interpreter start-up, ~20-40 ms, which
would otherwise hide the speed of short programs) through a file descriptor the program
does not know about.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass

from ..core.errors import SandboxUnavailableError
from .confine import PID_MAX, Confinement, confinement, require_confinement, ruleset_fd
from .isolation import CLONE_NEWNS, Isolation, child_setup, network_isolation, require_isolation
from .landlock import RESTRICT_SOURCE, shm_rights

__all__ = ["Isolation", "SandboxResult", "network_isolation", "run_python"]

MARKER = "__SELFREFINE_RESULT__"
CONFINE_FAILED = "__SELFREFINE_CONFINE_FAILED__"  # the launcher could not apply Landlock


@dataclass(frozen=True)
class SandboxResult:
    ok: bool
    value: str | None = None  # repr() of the returned value, when a function was called
    stdout: str = ""
    stderr: str = ""
    error: str | None = None  # short description of what went wrong
    timed_out: bool = False
    seconds: float | None = None  # the program's own CPU time, with measure=True
    returncode: int | None = None


# The launcher runs first in the child: it blocks sockets, then executes main.py as
# __main__ with the program's real file name (so tracebacks show its own line numbers),
# and with ``measure`` writes the CPU time of that execution to the inherited fd. The main
# thread's CPU clock is used because it is exact, while the process clock is tick-granular
# (4 ms) on kernels once RLIMIT_CPU arms a CPU timer; when other threads or waited-for child
# processes used clearly more CPU (work moved off the main thread), their total counts.
_LAUNCHER = (
    r"""
import sys, time, os
_CONFINE_FAILED = "__SELFREFINE_CONFINE_FAILED__"
"""
    + RESTRICT_SOURCE
    + f"_PID_MAX = {PID_MAX}\n"
    + r"""
def _confine_processes():
    # The launcher stays outside; the program becomes init of the new PID namespace, so
    # when it ends (or the launcher dies: PDEATHSIG) the kernel kills all it started.
    import ctypes, select, signal
    alive, held = os.pipe()  # EOF on `alive` once the launcher is gone
    child = os.fork()
    if child:
        os.close(alive)
        _, status = os.waitpid(child, 0)
        if os.WIFSIGNALED(status):
            signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
            os.kill(os.getpid(), os.WTERMSIG(status))
        os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)
    os.close(held)
    ctypes.CDLL(None, use_errno=True).prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL
    if select.select([alive], [], [], 0)[0]:  # the launcher died before PDEATHSIG was set
        os._exit(1)
    os.close(alive)
    try:
        with open("/proc/sys/kernel/pid_max", "w") as fh:
            fh.write(str(_PID_MAX))
    except OSError:
        pass  # kernels before 6.14 have one global pid_max
def _blocked(*args, **kwargs):
    raise PermissionError("network access is disabled in the selfrefine sandbox")
import socket as _s, _socket
for _mod in (_s, _socket):
    for _name in ("socket", "socketpair", "create_connection", "create_server", "fromfd"):
        if hasattr(_mod, _name):
            setattr(_mod, _name, _blocked)
del _mod, _name, _s, _socket
_path, _fd, _rules, _pidns, _shm = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1", int(sys.argv[5])
sys.argv = [_path]
with open(_path, encoding="utf-8") as _fh:
    _code = compile(_fh.read(), _path, "exec")
if _pidns:
    _confine_processes()
if _shm:
    _private_shm(_rules, _shm)
if _rules >= 0:
    _err = _landlock(_rules)
    if _err:
        os.write(2, ("%s errno %d\n" % (_CONFINE_FAILED, _err)).encode())
        os._exit(97)
_clock, _times, _write, _flush = time.thread_time, os.times, os.write, sys.stdout.flush
def _total():
    t = _times()
    return t.user + t.system + t.children_user + t.children_system
_g = {"__name__": "__main__", "__file__": _path, "__builtins__": __builtins__}
_t0, _all0 = _clock(), _total()
try:
    exec(_code, _g)
finally:
    try:
        _flush()
    except Exception:
        pass
    if _fd >= 0:
        _own, _all = _clock() - _t0, _total() - _all0
        _write(_fd, repr(_all if _all > _own + 0.01 else _own).encode())
"""
)


def _limits(cpu_seconds: int, memory_mb: int, file_mb: int, isolation: Isolation, pid_flags: int = 0):
    isolate = child_setup(isolation, pid_flags)

    def apply() -> None:  # pragma: no cover - runs in the child
        import resource

        isolate()  # before the rlimits: creating a namespace needs some memory
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds))
        mem = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        size = file_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return apply


def run_python(
    code: str,
    *,
    call: str | None = None,
    timeout: float = 5.0,
    memory_mb: int = 512,
    max_output: int = 65_536,
    stdin: str = "",
    measure: bool = False,
    isolation: Isolation | None = None,
) -> SandboxResult:
    """Execute ``code``; with ``call`` (e.g. ``"solution"``) also call it and return its repr.

    ``measure``: report the program's own CPU seconds in ``SandboxResult.seconds``.
    ``isolation``: the network barriers to use; default every one :func:`network_isolation`
    found (tests pass a subset to exercise one mode). Raises :class:`SandboxUnavailableError`
    when none is given or found, unless ``SELFREFINE_SANDBOX_NETWORK=allow``."""
    isolation = network_isolation() if isolation is None else isolation
    require_isolation(isolation)
    confined = confinement()
    require_confinement(confined)
    script = code
    if call:
        script += f"\n\nif __name__ == '__main__':\n    print({MARKER!r} + repr({call}()))\n"
    with tempfile.TemporaryDirectory(prefix="selfrefine-") as tmp:
        path = os.path.join(tmp, "main.py")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(script)
        timing = open(os.path.join(tmp, "timing"), "w+b") if measure else None
        try:
            fd = timing.fileno() if timing else -1
            out, err, code_, timed_out = _execute(
                path, tmp, fd, stdin, timeout, memory_mb, max_output, isolation, confined
            )
            seconds = _read_seconds(timing)
        finally:
            if timing:
                timing.close()
    return _result(out, err, code_, timed_out, timeout, call, seconds, max_output)


def _read_seconds(timing) -> float | None:
    if timing is None:
        return None
    timing.seek(0)
    try:
        return float(timing.read(64).decode())
    except ValueError:
        return None  # the program was killed before the launcher could report


def _execute(
    path: str,
    cwd: str,
    fd: int,
    stdin: str,
    timeout: float,
    memory_mb: int,
    max_output: int,
    isolation: Isolation,
    confined: Confinement,
):
    """Start the launcher, feed stdin, read capped output; kill the group on timeout."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONHASHSEED": "0", "HOME": cwd, "TMPDIR": cwd, "PYTHONDONTWRITEBYTECODE": "1"}
    rules = ruleset_fd(cwd, confined)
    try:
        proc = _start(path, cwd, (fd, rules), env, timeout, memory_mb, isolation, confined)
    except subprocess.SubprocessError as exc:  # the isolation step failed in the child: fail closed
        raise SandboxUnavailableError(
            f"could not isolate the sandboxed program ({isolation.describe()}; {confined.describe()}) although "
            f"the start-up probe succeeded: {exc}"
        ) from exc
    finally:
        if rules >= 0:
            os.close(rules)
    # bytes kept per stream: the cap in characters, plus room for multi-byte characters
    out_buf, err_buf = bytearray(), bytearray()
    readers = [
        threading.Thread(target=_drain, args=(proc.stdout, out_buf, 4 * max_output + 4), daemon=True),
        threading.Thread(target=_drain, args=(proc.stderr, err_buf, 4 * max_output + 4), daemon=True),
        threading.Thread(target=_feed, args=(proc.stdin, stdin.encode("utf-8")), daemon=True),
    ]
    for thread in readers:
        thread.start()
    timed_out = False
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
    _kill_group(proc)
    for thread in readers:
        thread.join(timeout=2.0)  # a process that left the group may hold a pipe: give up
    if proc.returncode == 97 and CONFINE_FAILED.encode() in err_buf:
        raise SandboxUnavailableError(
            f"the sandboxed program could not be confined: {bytes(err_buf).decode(errors='replace').strip()}"
        )
    return bytes(out_buf), bytes(err_buf), proc.returncode, timed_out


def _start(
    path: str,
    cwd: str,
    fds: tuple[int, int],
    env: dict[str, str],
    timeout: float,
    memory_mb: int,
    isolation: Isolation,
    confined: Confinement,
) -> subprocess.Popen:
    fd, rules = fds
    pid_flags, landlock_abi = confined.pid_flags, confined.landlock_abi
    return subprocess.Popen(
        [
            sys.executable,
            "-I",
            "-c",
            _LAUNCHER,
            path,
            str(fd),
            str(rules),
            "1" if pid_flags else "0",
            str(shm_rights(landlock_abi) if pid_flags & CLONE_NEWNS else 0),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env=env,
        pass_fds=tuple(f for f in fds if f >= 0),
        start_new_session=True,  # its own process group: a timeout kills its children too
        preexec_fn=_limits(max(1, int(timeout) + 1), memory_mb, 16, isolation, pid_flags),
    )


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def _drain(stream, buf: bytearray, limit: int) -> None:
    """Read a pipe to EOF, keeping at most ``limit`` bytes (the rest is discarded)."""
    try:
        while True:
            chunk = stream.read1(65_536)
            if not chunk:
                break
            room = limit - len(buf)
            if room > 0:
                buf.extend(chunk[:room])
    except (OSError, ValueError):
        pass
    finally:
        stream.close()


def _feed(stream, data: bytes) -> None:
    try:
        if data:
            stream.write(data)
    except (BrokenPipeError, OSError, ValueError):
        pass  # the program exited without reading all of its input
    finally:
        try:
            stream.close()
        except OSError:
            pass


def _result(
    out: bytes,
    err: bytes,
    returncode: int | None,
    timed_out: bool,
    timeout: float,
    call: str | None,
    seconds: float | None,
    max_output: int,
) -> SandboxResult:
    stdout = _cap(out.decode("utf-8", "replace"), max_output)
    stderr = _cap(err.decode("utf-8", "replace"), max_output)
    if timed_out:
        return SandboxResult(
            ok=False,
            stdout=stdout,
            stderr=stderr,
            error=f"timed out after {timeout:g}s",
            timed_out=True,
            returncode=returncode,
        )
    if returncode != 0:
        last = stderr.strip().splitlines()[-1] if stderr.strip() else f"exit code {returncode}"
        if returncode is not None and returncode < 0:
            last = f"killed by signal {-returncode} (CPU or memory limit?)"
        return SandboxResult(ok=False, stdout=stdout, stderr=stderr, error=last, seconds=seconds, returncode=returncode)
    value = None
    if call:
        lines = [ln for ln in stdout.splitlines() if ln.startswith(MARKER)]
        if not lines:
            return SandboxResult(ok=False, stdout=stdout, stderr=stderr, error="no result printed", returncode=0)
        value = lines[-1][len(MARKER) :]
        stdout = "\n".join(ln for ln in stdout.splitlines() if not ln.startswith(MARKER))
    return SandboxResult(ok=True, value=value, stdout=stdout, stderr=stderr, seconds=seconds, returncode=0)


def _cap(text: str | bytes | None, limit: int) -> str:
    if text is None:
        return ""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return text if len(text) <= limit else text[:limit] + "\n[output truncated]"
