"""A control group per sandboxed run: one memory cap for all of its processes, the CPU time
they all used (read by the caller, not reported by the program), and a kill that reaches
every one of them.

Each run gets a fresh group below the caller's own group in each hierarchy used (so the
caller's own limits still apply), which the child joins in ``preexec_fn`` before it
creates its namespaces:

- **memory**: cgroup v2 ``memory.max`` (and ``memory.swap.max`` 0) where the caller's v2
  group delegates the memory controller; otherwise the v1 memory hierarchy's
  ``memory.limit_in_bytes`` (and ``memory.memsw.limit_in_bytes``). Over the cap the
  kernel's OOM killer kills a process of the group, never one outside it. The cap counts
  kernel memory (pipe and socket buffers, the kernel's records of files, sockets and
  processes) in v2 always, and in v1 where kernel-memory accounting is on (Linux >= 4.6
  charges it to ``memory.usage_in_bytes`` too, unless booted with ``cgroup.memory=nokmem``):
  :attr:`Cgroups.kernel_memory` says which, seen in the caller's own group's
  ``memory.kmem.usage_in_bytes``. ``memory.kmem.limit_in_bytes`` is not written: it adds
  nothing to that cap, and from Linux 5.16 writing it has no effect.
- **CPU time**: v2 ``cpu.stat`` ``usage_usec`` (every v2 group has it), else v1
  ``cpuacct.usage``. It counts every process of the group, including ones the program
  never waits for or that ignore ``SIGCHLD`` (whose time ``getrusage`` loses).
- **kill**: v2 ``cgroup.kill`` where the kernel has it (5.14), else ``SIGKILL`` to every
  pid in ``cgroup.procs`` until none is left.

:func:`cgroups` probes once; where a hierarchy cannot be written (no cgroup file system, not
root, a read-only mount) the field is ``None`` and :mod:`.process` falls back as its
docstring says.
"""

from __future__ import annotations

import functools
import itertools
import os
import signal
import time
from dataclasses import dataclass

_COUNTER = itertools.count()
_PREFIX = "selfrefine-"


@dataclass(frozen=True)
class Cgroups:
    """Where this machine lets the sandbox make groups: (version, parent directory)."""

    memory: tuple[str, str] | None = None  # ("v2" | "v1", the caller's group directory)
    cpu: tuple[str, str] | None = None
    problems: tuple[str, ...] = ()
    kernel_memory: bool = False  # the memory cap counts kernel memory (pipe and socket buffers)

    def describe(self) -> str:
        mem = f"memory cap: cgroup {self.memory[0]}" if self.memory else "memory cap per process only"
        if self.memory:
            mem += " with kernel memory" if self.kernel_memory else " without kernel memory"
        cpu = f"CPU time: cgroup {self.cpu[0]}" if self.cpu else "CPU time: getrusage"
        return f"{mem}; {cpu}"


def _own_groups() -> dict[str, str]:
    """Controller (or "" for v2) -> the caller's group path, from /proc/self/cgroup."""
    groups: dict[str, str] = {}
    with open("/proc/self/cgroup", encoding="utf-8") as fh:
        for line in fh:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for name in controllers.split(",") if controllers else [""]:
                groups[name] = path
    return groups


def _mounts() -> dict[str, tuple[str, str]]:
    """Controller (or "" for v2) -> (mount point, the group mounted there) of a writable
    cgroup file system."""
    found: dict[str, tuple[str, str]] = {}
    with open("/proc/self/mountinfo", encoding="utf-8") as fh:
        for line in fh:
            left, _, right = line.partition(" - ")
            fields, (fstype, _source, options) = left.split(), right.split()[:3]
            if "ro" in fields[5].split(","):
                continue
            if fstype == "cgroup2":
                found.setdefault("", (fields[4], fields[3]))
            elif fstype == "cgroup":
                for name in options.split(","):
                    found.setdefault(name, (fields[4], fields[3]))
    return found


@functools.lru_cache(maxsize=1)
def cgroups() -> Cgroups:
    """Probe once: make and remove a group in each hierarchy that could serve."""
    try:
        own, mounts = _own_groups(), _mounts()
    except (OSError, ValueError) as exc:
        return Cgroups(problems=(f"no control groups: {exc}",))

    def parent(key: str) -> str | None:
        if key not in own or key not in mounts:
            return None
        point, root = mounts[key]  # a container may see only its own subtree mounted
        if root != "/" and not (own[key] + "/").startswith(root.rstrip("/") + "/"):
            return None
        path = os.path.join(point, own[key][len(root.rstrip("/")) :].lstrip("/"))
        return path if os.path.isdir(path) else None

    v2, mem1, acct1 = parent(""), parent("memory"), parent("cpuacct")
    memory = cpu = None
    if v2 and "memory" in _read(os.path.join(v2, "cgroup.subtree_control")).split() and _usable(v2, "memory.max"):
        memory = ("v2", v2)
    elif mem1 and _usable(mem1, "memory.limit_in_bytes"):
        memory = ("v1", mem1)
    if v2 and _usable(v2, "cpu.stat"):
        cpu = ("v2", v2)
    elif acct1 and _usable(acct1, "cpuacct.usage"):
        cpu = ("v1", acct1)
    problems = [] if memory else ["no memory cgroup the sandbox can create (v2 memory controller or v1 memory)"]
    if not cpu:
        problems.append("no cgroup for CPU time (v2 cpu.stat or v1 cpuacct)")
    kernel = memory is not None and (memory[0] == "v2" or _counts_kernel_memory(memory[1]))
    if memory and not kernel:
        problems.append("the v1 memory cap does not count kernel memory (booted with cgroup.memory=nokmem?)")
    return Cgroups(memory=memory, cpu=cpu, problems=tuple(problems), kernel_memory=kernel)


def _counts_kernel_memory(group: str) -> bool:
    """v1: whether kernel memory is charged, i.e. the caller's own group (which holds this
    process, its open files and its page tables) shows some."""
    try:
        return int(_read(os.path.join(group, "memory.kmem.usage_in_bytes")).split()[0]) > 0
    except (IndexError, ValueError):
        return False


def _usable(parent: str, control: str) -> bool:
    _remove_stale(parent)
    path = os.path.join(parent, f"{_PREFIX}probe-{os.getpid()}")
    try:
        os.mkdir(path)
    except OSError:
        return False
    try:
        return os.path.exists(os.path.join(path, control)) and os.access(os.path.join(path, "cgroup.procs"), os.W_OK)
    finally:
        os.rmdir(path)


def _remove_stale(parent: str) -> None:
    """Remove empty groups left by a selfrefine process that no longer runs."""
    try:
        names = [n for n in os.listdir(parent) if n.startswith(_PREFIX)]
    except OSError:
        return
    for name in names:
        pid = name[len(_PREFIX) :].split("-")[-2] if name.count("-") >= 2 else ""
        if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            try:
                os.rmdir(os.path.join(parent, name))
            except OSError:
                pass


def _read(path: str) -> str:
    try:
        with open(path, encoding="ascii") as fh:
            return fh.read()
    except OSError:
        return ""


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="ascii") as fh:
        fh.write(text)


class RunGroup:
    """The groups of one run: made by the constructor, emptied and removed by :meth:`close`."""

    def __init__(self, found: Cgroups, memory_mb: int):
        name = f"{_PREFIX}{os.getpid()}-{next(_COUNTER)}"
        spots = {"memory": found.memory, "cpu": found.cpu}
        # "memory" / "cpu" -> (version, directory); both may be the same v2 group
        self.dirs = {role: (spot[0], os.path.join(spot[1], name)) for role, spot in spots.items() if spot}
        self.made: list[str] = []
        try:
            for path in sorted({d for _, d in self.dirs.values()}):
                os.mkdir(path)
                self.made.append(path)
            if "memory" in self.dirs:
                self._cap(memory_mb * 1024 * 1024)
        except OSError:
            self.close()
            raise

    def _cap(self, limit: int) -> None:
        version, path = self.dirs["memory"]
        if version == "v2":
            _write(os.path.join(path, "memory.max"), str(limit))
            if os.path.exists(os.path.join(path, "memory.swap.max")):
                _write(os.path.join(path, "memory.swap.max"), "0")
            return
        _write(os.path.join(path, "memory.limit_in_bytes"), str(limit))
        if os.path.exists(os.path.join(path, "memory.memsw.limit_in_bytes")):
            _write(os.path.join(path, "memory.memsw.limit_in_bytes"), str(limit))

    def procs(self) -> list[str]:
        return [os.path.join(path, "cgroup.procs") for path in self.made]

    def joiner(self):
        """For ``preexec_fn``: move the child into the groups (before it unshares)."""
        procs = self.procs()

        def join() -> None:  # pragma: no cover - runs in the child
            for path in procs:
                fd = os.open(path, os.O_WRONLY)
                try:
                    os.write(fd, b"0")
                finally:
                    os.close(fd)

        return join

    @property
    def cpu_file(self) -> str:
        """The file whose first number is the group's CPU time ("" without a CPU group)."""
        if "cpu" not in self.dirs:
            return ""
        version, path = self.dirs["cpu"]
        return os.path.join(path, "cpu.stat" if version == "v2" else "cpuacct.usage")

    def cpu_seconds(self) -> float | None:
        return cpu_seconds(self.cpu_file) if self.cpu_file else None

    def kill(self, wait: float = 5.0) -> bool:
        """Kill every process of the group; True once none is left (within ``wait`` s)."""
        deadline = time.monotonic() + wait
        kill_file = [os.path.join(d, "cgroup.kill") for v, d in self.dirs.values() if v == "v2"]
        kill_file = [p for p in kill_file if os.path.exists(p)]
        while time.monotonic() < deadline:
            pids = [int(p) for path in self.procs() for p in _read(path).split()]
            if not pids:
                return True
            if kill_file:
                _write(kill_file[0], "1")
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.002)
        return False

    def close(self) -> None:
        self.kill()
        for path in self.made:
            try:
                os.rmdir(path)
            except OSError:
                pass


def cpu_seconds(path: str) -> float | None:
    """The CPU seconds in a v2 ``cpu.stat`` or a v1 ``cpuacct.usage`` file."""
    text = _read(path)
    try:
        if path.endswith("cpu.stat"):
            return int(text.split("usage_usec", 1)[1].split()[0]) / 1e6
        return int(text.split()[0]) / 1e9
    except (IndexError, ValueError):
        return None
