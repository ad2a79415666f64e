"""How the sandbox keeps model-written code, and every process it starts, off the network.

Two kernel mechanisms, both inherited by every process the program forks or execs (so a
``subprocess.run([sys.executable, ...])`` or ``os.system`` grandchild is held too):

- a **network namespace** (``unshare``), whose only interface is a downed loopback. A
  user namespace is tried first, also as root: it leaves the child no capability in the
  machine's own namespaces, so it cannot ``setns`` (``nsenter --net=/proc/1/ns/net``)
  back into the real network, which a root child of a plain ``CLONE_NEWNET`` can (so
  that one counts as a barrier only together with the filter).
- a **seccomp filter** (libseccomp through the ``pyseccomp`` package) making these system
  calls fail with ``EPERM``:

  - ``socket`` for every address family. AF_UNIX is denied too: a namespace does not hide
    path-named sockets (a Docker daemon, an HTTP proxy, ssh-agent) that reach the
    network for the caller, and the launcher already refuses every socket in the program
    itself. ``socketpair`` stays allowed: an anonymous pair reaches nothing outside.
  - ``io_uring_setup``/``_enter``/``_register``: io_uring can open and connect sockets
    without the ``socket``/``connect`` system calls that seccomp sees.
  - ``ptrace``, ``process_vm_writev`` and ``pidfd_getfd``: they let the program act
    through another process of the same user, e.g. take the caller's open connection to
    the model server.

  - where the run gets no IPC namespace of its own (:mod:`.confine`), the System V IPC calls
    (``shmget``/``shmat``/``msgget``/``semget`` and the rest, :data:`IPC_SYSCALLS`) and the
    POSIX message queue calls: the machine's IPC objects outlive a run, so a program could
    leave a segment behind, read another's, or pass state from one run to the next.
  - in every run, the kernel keyring calls ``add_key``, ``request_key`` and ``keyctl``
    (:data:`KEY_SYSCALLS`): keys are kernel memory that no memory cap counts, charged to the
    user's machine-wide key quota (a 24 MB run held 1,561 keys of 16 KB and filled root's),
    and no namespace of a run holds them.

  libseccomp, not a hand-written BPF program, checks the architecture and the x32 ABI
  (a 32-bit system call from a 64-bit program is killed) and sets ``no_new_privs``.

:func:`network_isolation` probes both once; :func:`require_isolation` refuses to run model
code where neither works unless ``SELFREFINE_SANDBOX_NETWORK=allow``.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import subprocess
import sys
from dataclasses import dataclass

from ..core.errors import ConfigError, SandboxUnavailableError

CLONE_NEWNET = 0x40000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
NAMESPACE_FLAGS = {"user-namespace": CLONE_NEWUSER | CLONE_NEWNET, "namespace": CLONE_NEWNET}
DENIED_SYSCALLS = (
    "socket",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "ptrace",
    "process_vm_writev",
    "pidfd_getfd",
)
# refused where the run has no IPC namespace of its own ("ipc": the multiplexer of 32-bit
# architectures; libseccomp ignores a name the native architecture does not have)
IPC_SYSCALLS = (
    "shmget",
    "shmat",
    "shmdt",
    "shmctl",
    "msgget",
    "msgsnd",
    "msgrcv",
    "msgctl",
    "semget",
    "semop",
    "semtimedop",
    "semctl",
    "ipc",
    "mq_open",
    "mq_unlink",
    "mq_timedsend",
    "mq_timedreceive",
    "mq_notify",
    "mq_getsetattr",
)
# refused in every run where the machine has a filter (see the module docstring)
KEY_SYSCALLS = ("add_key", "request_key", "keyctl")
ENV_VAR = "SELFREFINE_SANDBOX_NETWORK"

# Exit 0 only when the filter refused an Internet socket (the probe's own check).
_SECCOMP_PROBE = (
    "import socket, sys\n"
    "try:\n    socket.socket(socket.AF_INET, socket.SOCK_STREAM)\n"
    "except PermissionError:\n    sys.exit(0)\n"
    "sys.exit(3)\n"
)


@dataclass(frozen=True)
class Isolation:
    """The mechanisms that keep the sandboxed program off the network."""

    namespace: str | None = None  # "user-namespace" or "namespace"; None: no network namespace
    seccomp: bool = False  # the syscall filter of this module's docstring
    problems: tuple[str, ...] = ()  # why a mechanism is missing (for the refusal message)

    @property
    def blocks_network(self) -> bool:
        # a plain CLONE_NEWNET child of root can setns() back, so it only counts with seccomp
        return self.seccomp or self.namespace == "user-namespace"

    def describe(self) -> str:
        parts = [self.namespace or "", "seccomp" if self.seccomp else ""]
        return " + ".join(p for p in parts if p) or "none (only the in-process socket guard)"


@functools.lru_cache(maxsize=1)
def network_isolation() -> Isolation:
    """What this machine offers, probed once in throw-away child processes."""
    problems = []
    namespace, why = _probe_namespace()
    if why:
        problems.append(why)
    seccomp_ok, why = _probe_seccomp()
    if why:
        problems.append(why)
    if namespace == "namespace" and not seccomp_ok:
        problems.append("a plain network namespace (root without user namespaces) can be left with setns")
    return Isolation(namespace=namespace, seccomp=seccomp_ok, problems=tuple(problems))


def opted_out(env_var: str) -> bool:
    """Whether ``env_var`` says ``allow`` (run model code without that barrier); ``block``
    or unset is the default, anything else a ConfigError."""
    policy = os.environ.get(env_var, "block").strip().lower() or "block"
    if policy not in ("block", "allow"):
        raise ConfigError(f"{env_var}={os.environ[env_var]!r} is not valid: use 'block' (the default) or 'allow'")
    return policy == "allow"


def require_isolation(isolation: Isolation) -> None:
    """Refuse to run model code that nothing keeps off the network, unless opted out."""
    if opted_out(ENV_VAR) or isolation.blocks_network:
        return
    found = "; ".join(isolation.problems) or "no mechanism was enabled"
    raise SandboxUnavailableError(
        f"refusing to run model-written code: nothing here can cut it off from the network ({found}). "
        "Fix one of: install libseccomp (e.g. apt install libseccomp2) and `pip install pyseccomp`; "
        "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, or on Ubuntu "
        "kernel.apparmor_restrict_unprivileged_userns=0; in a container, a seccomp profile that permits "
        f"unshare); or set {ENV_VAR}=allow to run it with only the in-process socket guard, which a "
        "program's subprocesses can get around."
    )


def child_setup(isolation: Isolation, extra_flags: int = 0, deny_ipc: bool = False, deny_keys: bool = False):
    """The part of ``preexec_fn`` that isolates the child; raising there fails the Popen.

    ``extra_flags``: more namespaces to create in the same ``unshare`` (the PID and IPC
    namespaces of :mod:`.confine`). ``deny_ipc``: the filter also refuses :data:`IPC_SYSCALLS`
    (where the run has no IPC namespace), ``deny_keys`` :data:`KEY_SYSCALLS`; either loads it
    even if ``isolation`` asks for no network filter. The filter is built here, in the
    parent, so the child only loads it."""
    flags = (NAMESPACE_FLAGS[isolation.namespace] if isolation.namespace else 0) | extra_flags
    if flags and _unshare_fn() is None:
        raise SandboxUnavailableError("network namespaces were requested but unshare() is not available")
    load = None
    if isolation.seccomp or deny_ipc or deny_keys:
        try:
            load = _seccomp_filter(isolation.seccomp, deny_ipc, deny_keys).load
        except (ImportError, RuntimeError, OSError) as exc:
            raise SandboxUnavailableError(f"the seccomp filter cannot be built: {exc}") from exc
    return _preexec(flags, load)


def _preexec(flags: int, load):
    unshare = _unshare_fn() if flags else None
    # Map the caller's own ids to 0 in a new user namespace: without a mapping, exec drops
    # every capability in it, and the launcher needs one to cap its PID namespace.
    maps = _id_maps() if flags & CLONE_NEWUSER else ()

    def apply() -> None:  # pragma: no cover - runs in the child
        if unshare is not None and unshare(flags) != 0:
            raise OSError(ctypes.get_errno(), "unshare failed")
        for path, text in maps:
            fd = os.open(path, os.O_WRONLY)
            try:
                os.write(fd, text)
            finally:
                os.close(fd)
        if load is not None:
            load()

    return apply


def _id_maps() -> tuple[tuple[str, bytes], ...]:
    uid, gid = os.geteuid(), os.getegid()
    return (
        ("/proc/self/setgroups", b"deny"),
        ("/proc/self/uid_map", f"0 {uid} 1".encode()),
        ("/proc/self/gid_map", f"0 {gid} 1".encode()),
    )


@functools.lru_cache(maxsize=1)
def _unshare_fn():
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).unshare
    except (OSError, AttributeError):  # pragma: no cover - non-glibc platforms
        return None


@functools.lru_cache(maxsize=8)
def _seccomp_filter(network: bool = True, ipc: bool = False, keys: bool = False):
    """The filter (see the module docstring): ``network`` refuses :data:`DENIED_SYSCALLS`,
    ``ipc`` :data:`IPC_SYSCALLS`, ``keys`` :data:`KEY_SYSCALLS`; raises
    ImportError/RuntimeError/OSError."""
    import pyseccomp  # raises RuntimeError where libseccomp itself is missing

    flt = pyseccomp.SyscallFilter(pyseccomp.ALLOW)
    names = (DENIED_SYSCALLS if network else ()) + (IPC_SYSCALLS if ipc else ()) + (KEY_SYSCALLS if keys else ())
    for name in names:  # OSError(EINVAL) for a name this libseccomp does not know
        flt.add_rule(pyseccomp.ERRNO(errno.EPERM), name)
    return flt


def _probe_namespace() -> tuple[str | None, str | None]:
    if _unshare_fn() is None:
        return None, f"no network namespaces: unshare() is not available on {sys.platform}"
    for label, flags in NAMESPACE_FLAGS.items():
        if _probe(_preexec(flags, None), "pass") == 0:
            return label, None
    return None, "no network namespaces: unshare(CLONE_NEWUSER|CLONE_NEWNET) and unshare(CLONE_NEWNET) were refused"


def _probe_seccomp() -> tuple[bool, str | None]:
    if not sys.platform.startswith("linux"):
        return False, f"no seccomp filter: seccomp is Linux-only, this is {sys.platform}"
    try:
        load = _seccomp_filter().load
    except ImportError:
        return False, "no seccomp filter: the pyseccomp package is not installed"
    except (RuntimeError, OSError) as exc:
        return False, f"no seccomp filter: libseccomp (>= 2.5) is missing or too old ({exc})"
    code = _probe(_preexec(0, load), _SECCOMP_PROBE)
    if code == 0:
        return True, None
    if code is None:
        return False, "no seccomp filter: the kernel refused to load it"
    return False, f"no seccomp filter: it loaded but did not refuse a socket (probe exit status {code})"


def _probe(preexec, code: str) -> int | None:
    try:
        proc = subprocess.run([sys.executable, "-I", "-c", code], preexec_fn=preexec, capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.returncode
