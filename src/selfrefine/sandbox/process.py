"""Run model-written Python in a separate, limited process.

The code runs in a fresh interpreter (``python -I``: no user site, no env-based paths) in
a temporary working directory, with CPU-time, address-space and file-size limits, a
wall-clock timeout that kills the whole process group, capped output (read incrementally,
so a program printing forever cannot fill the caller's memory) and no network:

1. the kernel keeps the child and everything it starts off the network, with a network
   namespace and/or a seccomp filter (:mod:`selfrefine.sandbox.isolation`); where neither works,
   :func:`run_python` refuses with :class:`SandboxUnavailableError` unless
   ``SELFREFINE_SANDBOX_NETWORK=allow``;
2. the program sees only its own files, processes and System V IPC objects
   (:mod:`selfrefine.sandbox.confine`): a Landlock ruleset lets it read the standard library
   and system libraries and write only its temporary directory, it runs as init of its own
   PID namespace, so nothing it starts outlives it, and in an IPC namespace of its own (or,
   where the kernel refuses one, with the IPC calls refused by the seccomp filter), and the
   filter refuses the kernel keyring calls;
   :func:`run_python` refuses where Landlock, both IPC barriers, or the filter are missing unless
   ``SELFREFINE_SANDBOX_FILES=allow``;
3. in every case a small launcher replaces ``socket.socket``, ``_socket.socket`` and the
   connection helpers with a function raising ``PermissionError`` before the program runs
   (no sitecustomize is needed, which ``-I`` would ignore anyway): a clear message for the
   program itself, but no barrier for the processes it starts.

It never runs in the caller's process. Each run also gets a control group of its own
(:mod:`.cgroup`): one memory cap for all of its processes, the CPU time they all used (with
``measure=True``, counted from outside the program, without interpreter start-up) and a kill
that reaches each of them; with a mount namespace its working directory is a size-limited
tmpfs (:mod:`.launcher`), and the folder on the caller's disk is removed without recursion
(:mod:`.cleanup`). Where no cgroup can be made, RLIMIT_NPROC limits the number of processes
and ``measure`` falls back to ``getrusage`` of the launcher. RLIMIT_NOFILE bounds what one
process can hold in pipe and socket buffers (kernel memory, which a v1 memory cap without
kernel-memory accounting does not count): :data:`DESCRIPTORS`, or :data:`FALLBACK_DESCRIPTORS`
where the cap does not count kernel memory.
"""

from __future__ import annotations

import functools
import logging
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass

from ..core.errors import SandboxUnavailableError
from .cgroup import RunGroup, cgroups
from .cleanup import remove_tree
from .confine import Confinement, confinement, require_confinement, ruleset_fd
from .isolation import CLONE_NEWNS, CLONE_NEWUSER, Isolation, child_setup, network_isolation, require_isolation
from .landlock import base_paths, hidden_dirs, shm_rights, workdir_rights
from .launcher import CONFINE_FAILED, FOLDERS, SOURCE

__all__ = ["Isolation", "SandboxResult", "network_isolation", "run_python"]

MARKER = "__SELFREFINE_RESULT__"
DISK_MB = 64  # the working directory's size (a tmpfs), where a mount namespace can be made
FILE_MB = 16  # the largest file the program may write (RLIMIT_FSIZE), everywhere
FALLBACK_PROCESSES = 16  # RLIMIT_NPROC where no memory cgroup caps all processes together
# RLIMIT_NOFILE: the descriptors of one process, and so the pipes and socket pairs whose kernel
# buffers it can hold; fewer where the memory cap does not count kernel memory
DESCRIPTORS, FALLBACK_DESCRIPTORS = 256, 64
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SandboxResult:
    ok: bool
    value: str | None = None  # repr() of the returned value, when a function was called
    stdout: str = ""
    stderr: str = ""
    error: str | None = None  # short description of what went wrong
    timed_out: bool = False
    seconds: float | None = None  # CPU time of the program and its processes, with measure=True
    returncode: int | None = None


@dataclass(frozen=True)
class _Limits:
    timeout: float
    memory_mb: int  # per process (address space) and, with a memory cgroup, for all together
    disk_mb: int  # the working directory's tmpfs, with a mount namespace
    max_output: int


def _limits(limits: _Limits, isolation: Isolation, confined: Confinement, group: RunGroup | None):
    flags = confined.pid_flags | confined.ipc_flags
    # no IPC namespace: the seccomp filter refuses the IPC calls (where this machine has one)
    # and, in every run where the machine has the filter, the kernel keyring calls
    machine_filter = network_isolation().seccomp
    isolate = child_setup(
        isolation, flags, deny_ipc=not confined.ipc_flags and machine_filter, deny_keys=machine_filter
    )
    join = group.joiner() if group else None
    cpu_seconds = max(1, int(limits.timeout) + 1)
    # without a memory cap for all processes together: fewer processes, counted in the
    # sandbox's own user namespace (elsewhere RLIMIT_NPROC counts all of the user's processes)
    own_user = isolation.namespace == "user-namespace" or bool(flags & CLONE_NEWUSER)
    capped = bool(group and "memory" in group.dirs)
    few = FALLBACK_PROCESSES if own_user and not capped else None
    files = DESCRIPTORS if capped and cgroups().kernel_memory else FALLBACK_DESCRIPTORS

    def apply() -> None:  # pragma: no cover - runs in the child
        import resource

        if join is not None:
            join()  # before unsharing: the caller's own user namespace owns the groups
        isolate()  # before the rlimits: creating a namespace needs some memory
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds))
        mem = limits.memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        size = FILE_MB * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_NOFILE, (files, files))
        if few is not None:
            resource.setrlimit(resource.RLIMIT_NPROC, (few, few))

    return apply


def run_python(
    code: str,
    *,
    call: str | None = None,
    timeout: float = 5.0,
    memory_mb: int = 512,
    disk_mb: int = DISK_MB,
    max_output: int = 65_536,
    stdin: str = "",
    measure: bool = False,
    isolation: Isolation | None = None,
) -> SandboxResult:
    """Execute ``code``; with ``call`` (e.g. ``"solution"``) also call it and return its repr.

    ``memory_mb``: the cap for all of the program's processes together (a memory cgroup)
    and for each one's address space. ``disk_mb``: the size of its working directory.
    ``measure``: report the CPU seconds the program and every process it started used in
    ``SandboxResult.seconds``, as counted outside the program (see :mod:`.launcher`).
    ``isolation``: the network barriers to use; default every one :func:`network_isolation`
    found (tests pass a subset to exercise one mode). Raises :class:`SandboxUnavailableError`
    when none is given or found, unless ``SELFREFINE_SANDBOX_NETWORK=allow``."""
    isolation = network_isolation() if isolation is None else isolation
    require_isolation(isolation)
    confined = confinement()
    require_confinement(confined, ipc_filter=network_isolation().seccomp)
    script = code
    if call:
        script += f"\n\nif __name__ == '__main__':\n    print({MARKER!r} + repr({call}()))\n"
    limits = _Limits(timeout, memory_mb, disk_mb, max_output)
    tmp = tempfile.mkdtemp(prefix="selfrefine-")
    try:
        path = os.path.join(tmp, "main.py")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(script)
        out, err, returncode, timed_out, seconds = _execute(path, stdin, measure, limits, isolation, confined)
    finally:
        _remove(tmp)
    return _result(out, err, returncode, timed_out, timeout, call, seconds, max_output)


def _remove(folder: str) -> None:
    try:
        remove_tree(folder)
    except OSError as exc:  # pragma: no cover - every process of the run is gone by now
        log.warning("could not remove the sandbox folder %s: %s", folder, exc)


def _execute(path: str, stdin: str, measure: bool, limits: _Limits, isolation: Isolation, confined: Confinement):
    """Run the launcher in the run's control groups; remove them once all is over."""
    found = cgroups()
    try:
        group = RunGroup(found, limits.memory_mb) if found.memory or found.cpu else None
    except OSError as exc:
        raise SandboxUnavailableError(
            f"could not make the sandbox's control group ({found.describe()}): {exc}"
        ) from exc
    try:
        return _supervise(path, stdin, measure, limits, isolation, confined, group)
    finally:
        if group is not None:
            group.close()


def _supervise(path, stdin, measure, limits: _Limits, isolation, confined: Confinement, group: RunGroup | None):
    """Start the launcher, feed stdin, read capped output; kill it all at the end."""
    report, measure_fd = os.pipe()  # in every run: a timed one must not differ in its descriptors
    try:
        rules = ruleset_fd(os.path.dirname(path), confined)
        try:
            proc, header = _start(path, (measure_fd, rules), limits, isolation, confined, group)
        except subprocess.SubprocessError as exc:  # the isolation step failed in the child: fail closed
            raise SandboxUnavailableError(
                f"could not isolate the sandboxed program ({isolation.describe()}; {confined.describe()}) although "
                f"the start-up probe succeeded: {exc}"
            ) from exc
        finally:
            for fd in (rules, measure_fd):
                if fd >= 0:
                    os.close(fd)
        out_buf, err_buf = bytearray(), bytearray()
        readers = _readers(proc, header + stdin.encode("utf-8"), out_buf, err_buf, 4 * limits.max_output + 4)
        timed_out, usage = _wait(proc, limits.timeout)
        if group is not None:
            group.kill()
        for thread in readers:
            thread.join(timeout=2.0)  # a process that left the group may hold a pipe: give up
        if proc.returncode == 97 and CONFINE_FAILED.encode() in err_buf:
            raise SandboxUnavailableError(
                f"the sandboxed program could not be confined: {bytes(err_buf).decode(errors='replace').strip()}"
            )
        seconds = _seconds(report, usage, group) if measure else None
    finally:
        if report >= 0:
            os.close(report)
    return bytes(out_buf), bytes(err_buf), proc.returncode, timed_out, seconds


def _readers(proc: subprocess.Popen, stdin: bytes, out_buf: bytearray, err_buf: bytearray, limit: int):
    """Threads that drain stdout/stderr (``limit`` bytes kept per stream) and feed stdin."""
    readers = [
        threading.Thread(target=_drain, args=(proc.stdout, out_buf, limit), daemon=True),
        threading.Thread(target=_drain, args=(proc.stderr, err_buf, limit), daemon=True),
        threading.Thread(target=_feed, args=(proc.stdin, stdin), daemon=True),
    ]
    for thread in readers:
        thread.start()
    return readers


def _wait(proc: subprocess.Popen, timeout: float):
    """Wait up to ``timeout``, kill the launcher's process group, reap it: (timed out, rusage).

    The launcher is reaped only after the group kill, so its process group id cannot have
    been reused by then; ``os.wait4`` gives the CPU time of it and of what it waited for."""
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # pragma: no cover - Linux < 5.3, or not Linux
        try:
            proc.wait(timeout=timeout)
            return False, None
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            proc.wait()
            return True, None
    try:
        timed_out = not select.select([pidfd], [], [], timeout)[0]
    finally:
        os.close(pidfd)
    _kill_group(proc)
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    except ChildProcessError:  # pragma: no cover - the caller ignores SIGCHLD: reaped already
        proc.returncode = 0  # as subprocess.Popen reports it then
        return timed_out, None
    proc.returncode = os.waitstatus_to_exitcode(status)
    return timed_out, usage


def _seconds(report: int, usage, group: RunGroup | None) -> float | None:
    """CPU seconds of the whole run minus what it had used before the program started."""
    os.set_blocking(report, False)
    try:
        kind, _, before = os.read(report, 64).decode("ascii", "replace").partition(" ")
    except BlockingIOError:  # pragma: no cover - the launcher closes its end before forking
        return None
    if not before.isdigit():
        return None  # the launcher died before it could report
    if kind == "cgroup" and group is not None:
        after = group.cpu_seconds()
    elif kind == "rusage" and usage is not None:
        after = usage.ru_utime + usage.ru_stime
    else:
        return None
    return None if after is None else max(0.0, after - int(before) / 1e6)


def _start(
    path: str,
    fds: tuple[int, int],
    limits: _Limits,
    isolation: Isolation,
    confined: Confinement,
    group: RunGroup | None,
) -> tuple[subprocess.Popen, bytes]:
    """The launcher, and the header it reads from stdin before the program's input: the
    run's parameters go there, not in argv or the environment (see :mod:`.launcher`)."""
    fd, rules = fds
    pid_flags, abi = confined.pid_flags, confined.landlock_abi
    mounts = bool(pid_flags & CLONE_NEWNS)
    cwd = os.path.dirname(path)
    shown = _shown_folder(cwd) if mounts else cwd
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONHASHSEED": "0",
        "HOME": shown,
        "TMPDIR": shown,
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    args = [path, os.path.join(shown, "main.py"), str(fd), str(rules), "1" if pid_flags else "0"]
    args += [str(shm_rights(abi)), str(workdir_rights(abi)), str(limits.disk_mb if mounts else 0)]
    args += [group.cpu_file if group else "", os.pathsep.join(hidden_dirs()) if mounts else ""]
    payload = "\0".join(args).encode("utf-8")
    proc = subprocess.Popen(
        [sys.executable, "-I", "-c", SOURCE],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env=env,
        pass_fds=tuple(f for f in fds if f >= 0),
        start_new_session=True,  # its own process group: a timeout kills its children too
        preexec_fn=_limits(limits, isolation, confined, group),
    )
    return proc, b"%d\n" % len(payload) + payload


def _shown_folder(own: str) -> str:
    """The program's folder in its mount namespace (:func:`program_folder`), else the run's
    own folder on the caller's disk, mounted over."""
    return program_folder() or own


@functools.cache
def program_folder() -> str | None:
    """The fixed folder a program works in where a mount namespace can be made: the first of
    :data:`FOLDERS` (``/tmp/selfrefine``, ``/var/tmp/selfrefine``) whose parent exists and holds
    no part of the interpreter (a tmpfs over it would hide it); None where each does."""
    lives = [os.path.realpath(p) for p in (sys.executable, sys.prefix, sys.base_prefix, *base_paths().values()) if p]
    for folder in FOLDERS:
        top = os.path.dirname(folder)
        if os.path.isdir(top) and not any(p.startswith(top + "/") for p in lives):
            return folder
    return None


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


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
