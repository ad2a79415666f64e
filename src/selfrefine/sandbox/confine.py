"""What keeps model-written code in its own file system and process tree.

- **Files**: a Landlock ruleset (:mod:`.landlock`) that the launcher applies just before the
  program runs; it holds the program and everything it forks or execs. Where the kernel
  offers no Landlock, :func:`require_confinement` refuses to run model code unless
  ``SELFREFINE_SANDBOX_FILES=allow``.
- **Processes**: a PID namespace (a user namespace too, where the caller is not root). The
  launcher forks the program as the namespace's init, with ``PR_SET_PDEATHSIG``: when the
  program returns, or the launcher is killed at the timeout, the kernel kills every process
  left in the namespace, including ones that called ``setsid()``. The launcher also sets the
  namespace's own ``pid_max`` (Linux >= 6.14), so the program can have at most
  :data:`MAX_PROCESSES` processes at once. Where no PID namespace can be made, the old
  process-group kill is all there is (a ``setsid()`` child escapes it).
- **Mounts**: a mount namespace made in the same ``unshare``, probed by mounting a tmpfs in
  it; :mod:`.launcher` uses it for the working directory's size-limited tmpfs, a private
  ``/dev/shm`` and to hide package directories.
- **IPC**: an IPC namespace made in the same ``unshare``: the program's System V shared
  memory segments, message queues and semaphores (and POSIX message queues) are its own and
  go with its last process; it sees none of the machine's, and no run sees another's. Where
  the kernel refuses one, the seccomp filter refuses those system calls instead
  (:mod:`.isolation`); where there is neither, :func:`require_confinement` refuses to run
  model code unless ``SELFREFINE_SANDBOX_FILES=allow``.
- **Kernel keyrings**: no namespace holds a run's keys and no memory cap counts them (they
  fill the user's machine-wide key quota), so the seccomp filter refuses the keyring calls
  in every run (:mod:`.isolation`); where there is no filter, :func:`require_confinement`
  refuses to run model code unless ``SELFREFINE_SANDBOX_FILES=allow``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from ..core.errors import SandboxUnavailableError
from . import landlock
from .isolation import CLONE_NEWIPC, CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWUSER, _preexec, _probe, _unshare_fn, opted_out

FILES_ENV = "SELFREFINE_SANDBOX_FILES"
# A mount namespace serves only where a tmpfs can be mounted in it (the launcher's disk cap)
_MOUNT_PROBE = (
    "import ctypes, sys\nlibc = ctypes.CDLL(None, use_errno=True)\n"
    "ok = libc.mount(b'none', b'/', None, 16384 | 262144, None) == 0 and "
    "libc.mount(b'tmpfs', b'/tmp', b'tmpfs', 6, b'size=1m') == 0\nsys.exit(0 if ok else 3)\n"
)
PID_MAX = 301  # the smallest pid_max the kernel accepts: pids 1..300
MAX_PROCESSES = PID_MAX - 1


@dataclass(frozen=True)
class Confinement:
    """The file-system and process barriers this machine offers."""

    landlock_abi: int = 0  # 0: no Landlock
    pid_flags: int = 0  # the unshare() flags that give the program its own PID namespace
    problems: tuple[str, ...] = ()
    ipc_flags: int = 0  # the unshare() flags that give it its own IPC namespace (0: none)

    def describe(self) -> str:
        files = f"Landlock ABI {self.landlock_abi}" if self.landlock_abi else "no file-system barrier"
        ipc = "IPC namespace" if self.ipc_flags else "no IPC namespace"
        return f"{files}; " + ("PID namespace" if self.pid_flags else "process group only") + f"; {ipc}"


@functools.lru_cache(maxsize=1)
def confinement() -> Confinement:
    """Probed once: Landlock's ABI in-process, the PID namespace in throw-away children."""
    problems = []
    abi, why = landlock.abi_version()
    if why:
        problems.append(why)
    pid_flags = 0
    if _unshare_fn() is not None:
        user_pid, pid = CLONE_NEWUSER | CLONE_NEWPID, CLONE_NEWPID
        for flags in (user_pid | CLONE_NEWNS, pid | CLONE_NEWNS, user_pid, pid):
            if _probe(_preexec(flags, None), _MOUNT_PROBE if flags & CLONE_NEWNS else "pass") == 0:
                pid_flags = flags
                break
    if not pid_flags:
        problems.append("no PID namespace: unshare(CLONE_NEWUSER|CLONE_NEWPID) and unshare(CLONE_NEWPID) were refused")
    ipc_flags = _probe_ipc(pid_flags)
    if not ipc_flags:
        problems.append("no IPC namespace: unshare(CLONE_NEWIPC) was refused")
    return Confinement(landlock_abi=abi, pid_flags=pid_flags, problems=tuple(problems), ipc_flags=ipc_flags)


def _probe_ipc(pid_flags: int) -> int:
    """The flags that add an IPC namespace to the run's ``unshare`` (0 where refused)."""
    if _unshare_fn() is None:
        return 0
    # with the user namespace the PID namespace already needs, or one of its own, or as root
    tries = ((pid_flags & CLONE_NEWUSER) | CLONE_NEWIPC, CLONE_NEWUSER | CLONE_NEWIPC, CLONE_NEWIPC)
    for flags in dict.fromkeys(tries):
        if _probe(_preexec(flags, None), "pass") == 0:
            return flags
    return 0


def require_confinement(found: Confinement, ipc_filter: bool = False) -> None:
    """Refuse to run model code that could read the server's files, share System V IPC
    objects with the machine (no IPC namespace, and no seccomp filter, ``ipc_filter``, to
    refuse those calls), or fill the kernel's keyrings (no filter), unless opted out."""
    if opted_out(FILES_ENV):
        return
    if not (found.ipc_flags or ipc_filter):
        raise SandboxUnavailableError(
            "refusing to run model-written code: nothing here can keep it from the machine's System V shared "
            "memory, message queues and semaphores (no IPC namespace: unshare(CLONE_NEWIPC) was refused; no "
            "seccomp filter). Fix one of: allow unprivileged user namespaces or install libseccomp and "
            f"`pip install pyseccomp`, as for the network; or set {FILES_ENV}=allow."
        )
    if not ipc_filter:
        raise SandboxUnavailableError(
            "refusing to run model-written code: nothing here can keep it from filling the kernel's keyrings "
            "(keys are memory no cap counts, charged to the user's machine-wide quota; no seccomp filter to "
            "refuse add_key/keyctl). Fix: install libseccomp (e.g. apt install libseccomp2) and "
            f"`pip install pyseccomp`; or set {FILES_ENV}=allow."
        )
    if found.landlock_abi:
        return
    why = "; ".join(p for p in found.problems if "Landlock" in p) or "Landlock is unavailable"
    raise SandboxUnavailableError(
        f"refusing to run model-written code: nothing here can keep it from reading and writing this "
        f"machine's files ({why}). Fix one of: use Linux >= 5.13 with Landlock enabled (CONFIG_SECURITY_LANDLOCK=y "
        "and 'landlock' in the lsm= boot parameter, e.g. lsm=landlock,lockdown,yama,apparmor,bpf); in a "
        "container, a seccomp profile that permits the landlock_* system calls; or set "
        f"{FILES_ENV}=allow to run it with the file access of the server's own user."
    )


def ruleset_fd(workdir: str, found: Confinement) -> int:
    """A Landlock ruleset for ``workdir`` (-1 without Landlock); the caller closes it."""
    if not found.landlock_abi:
        return -1
    try:
        return landlock.build_ruleset(workdir, found.landlock_abi)
    except OSError as exc:
        raise SandboxUnavailableError(f"could not build the Landlock ruleset for the sandbox: {exc}") from exc
