"""Issue 39 items 1-3: what one sandboxed run could share with the machine or with a later run.

1. System V IPC: a program's shared memory segments, message queues and semaphores were the
   machine's, outlived the run and carried state into the next (a codeopt program cached its
   answer). Each run gets an IPC namespace of its own; where the kernel refuses one, the
   seccomp filter refuses the IPC calls.
2. Timed runs: the launcher's own ``__main__`` (with ``_measured``) was the program's, so a
   codeopt program could skip its work only when timed. It now gets a fresh ``__main__``, every
   run ends alike, and a timed run's output is compared with the checked one.
3. Kernel memory: pipe buffers taken by many processes holding many pipes must stay within the
   run's memory cap (or, without kernel-memory accounting, within the descriptor limit).
"""

from __future__ import annotations

import ctypes
import dataclasses
import errno
import os

import pytest

from selfrefine.sandbox import process
from selfrefine.sandbox.confine import confinement
from selfrefine.sandbox.isolation import network_isolation
from selfrefine.sandbox.process import run_python
from selfrefine.sandbox.timing import compare_programs
from selfrefine.tasks.codeopt import CodeOpt
from selfrefine.tasks.gsm8k import GSM8K

# 1. System V IPC ---------------------------------------------------------------------------

KEY = 0x5E1F0000 + os.getpid() % 0xFFFF  # one key for the three kinds of object
CREATE, RMID = 0o1600, 0  # IPC_CREAT | 0600; IPC_RMID
LIBC = ctypes.CDLL(None, use_errno=True)

# solution() creates one object of each kind (64 MB of shared memory) and returns the ids, or
# the negative errno of a refusal
MAKE = f"""
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
def made(ident):
    return ident if ident >= 0 else -ctypes.get_errno()
def solution():
    shm = made(libc.shmget({KEY}, 64 << 20, {CREATE}))
    if shm >= 0:
        libc.shmat.restype = ctypes.c_void_p
        ctypes.memset(libc.shmat(shm, None, 0), 42, 64 << 20)  # touch every page
    return [shm, made(libc.msgget({KEY}, {CREATE})), made(libc.semget({KEY}, 1, {CREATE}))]
"""
# the same objects looked up without creating them: -ENOENT when nothing is there
FIND = f"""
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
def made(ident):
    return ident if ident >= 0 else -ctypes.get_errno()
def solution():
    return [made(libc.shmget({KEY}, 0, 0)), made(libc.msgget({KEY}, 0)), made(libc.semget({KEY}, 0, 0))]
"""


def _on_the_host() -> list[int]:
    """The ids of the objects with KEY in this test's (the machine's) IPC namespace."""
    found = [LIBC.shmget(KEY, 0, 0), LIBC.msgget(KEY, 0), LIBC.semget(KEY, 0, 0)]
    return [i for i in found if i >= 0]


@pytest.fixture
def no_leftovers():
    """Remove what a broken sandbox left on the machine (so a failure does not pile up)."""
    yield
    for ident, remove in zip(
        (LIBC.shmget(KEY, 0, 0), LIBC.msgget(KEY, 0), LIBC.semget(KEY, 0, 0)),
        (lambda i: LIBC.shmctl(i, RMID, None), lambda i: LIBC.msgctl(i, RMID, None), lambda i: LIBC.semctl(i, 0, RMID)),
    ):
        if ident >= 0:
            remove(ident)


@pytest.fixture(params=["default", "seccomp"])
def ipc_mode(request, monkeypatch) -> str:
    if not network_isolation().seccomp:
        if request.param == "seccomp" or not confinement().ipc_flags:
            pytest.skip(f"no seccomp filter here: {network_isolation().problems}")
    if request.param == "seccomp":  # where the kernel refuses an IPC namespace, the filter refuses the calls
        found = confinement()
        monkeypatch.setattr(process, "confinement", lambda: dataclasses.replace(found, ipc_flags=0))
    return request.param


def test_ipc_objects_are_the_runs_own_and_go_with_it(ipc_mode, no_leftovers):
    """Through gsm8k's path (``solution()`` in the sandbox): what the first run makes is gone
    from the machine afterwards, and a second run cannot find it."""
    assert _on_the_host() == []
    task = GSM8K()
    made = eval(task.answer(MAKE))
    assert _on_the_host() == [], f"the run left {made} on the machine"
    found = eval(task.answer(FIND))
    if ipc_mode == "seccomp":
        assert made == found == [-errno.EPERM] * 3
    else:  # the machine's own mechanism; with an IPC namespace the program may use IPC inside it
        assert found == [-errno.ENOENT] * 3 or found == [-errno.EPERM] * 3
        if confinement().ipc_flags:
            assert all(i >= 0 for i in made) and found == [-errno.ENOENT] * 3, made


def test_a_codeopt_program_cannot_cache_its_answer_between_runs(no_leftovers):
    """The audit's cache: the first run stores its answer in a segment, later (timed) runs
    would print it without the work. Every run must find no segment and do the work."""
    cache = (
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        f"print('hit' if libc.shmget({KEY}, 0, 0) >= 0 else 'miss')\n"
        f"libc.shmget({KEY}, 4096, {CREATE})\n"
    )
    outputs = [run_python(cache, measure=measure).stdout.strip() for measure in (False, True, True)]
    assert outputs == ["miss"] * 3 and _on_the_host() == []


def test_no_ipc_barrier_refuses_with_the_fix(monkeypatch):
    """Neither an IPC namespace nor a filter to refuse the calls: model code is not run, unless
    the operator opts out of the file barriers (the IPC objects are the machine's, like files)."""
    from selfrefine.core.errors import SandboxUnavailableError
    from selfrefine.sandbox import confine
    from selfrefine.sandbox.isolation import Isolation

    if network_isolation().namespace != "user-namespace":
        pytest.skip("no user network namespace here to stand in for the filter")
    bare = Isolation(namespace="user-namespace")
    monkeypatch.delenv(confine.FILES_ENV, raising=False)
    monkeypatch.setattr(process, "network_isolation", lambda: bare)
    monkeypatch.setattr(process, "confinement", lambda: dataclasses.replace(confinement(), ipc_flags=0))
    with pytest.raises(SandboxUnavailableError, match="System V.*SELFREFINE_SANDBOX_FILES=allow"):
        run_python("print('ran')", isolation=bare)
    monkeypatch.setenv(confine.FILES_ENV, "allow")
    assert run_python("print('ran')", isolation=bare).stdout.strip() == "ran"


# 2. timed runs look like any other ----------------------------------------------------------

PROBE = 'import __main__\nif getattr(__main__, "_measured", False):\n    raise SystemExit(0)\n'
SLOW = "n = int(input())\ntotal = 0\nfor i in range(n):\n    total += i\nprint(total)\n"


def test_the_audits_probe_does_its_work_when_timed():
    """The exact probe through codeopt's evaluation: it scored PIE 1.0 ("21.9x faster") by
    exiting at once in timed runs. Now it sees no ``_measured`` and is timed doing its work:
    twice the original's, so it can only be slower."""
    new = PROBE + SLOW + "for i in range(n):\n    total -= 0\n"  # the original's work and as much again
    check = CodeOpt(repeats=4).check_program(SLOW, new, ["300000\n"])
    assert check.correct and check.timing is not None and not check.timing.errors, check.timing
    assert check.score == 0.0 and check.speedup < 1.0, check.timing.summary()


def test_the_program_gets_a_fresh_main_the_same_in_timed_and_untimed_runs():
    """``import __main__`` is the program's own module (its names, none of the launcher's),
    and what the program can find of the launcher does not differ when it is timed."""
    code = (
        "import pickle, sys\nimport __main__\nx = 41\nclass Kept:\n    pass\n"
        "names = sorted(n for n in vars(__main__) if not n.startswith('__'))\n"
        "launcher = sys._getframe().f_back\n"
        "seen = sorted((k, v) for k, v in (launcher.f_globals.items() if launcher else ())\n"
        "              if type(v) in (int, bool) or v is None)\n"
        "print(__main__.x + 1, names, type(pickle.loads(pickle.dumps(Kept()))).__name__)\n"
        "print(seen)\n"
    )
    untimed, timed = run_python(code), run_python(code, measure=True)
    assert untimed.ok and timed.ok, untimed.stderr + timed.stderr
    first = untimed.stdout.splitlines()[0]
    assert first == "42 ['Kept', 'pickle', 'sys', 'x'] Kept"
    assert untimed.stdout == timed.stdout


def test_a_timed_run_that_prints_something_else_is_not_faster():
    """Whatever lets a program tell a timed run apart, it must print the same output there:
    a timed run with other output fails the comparison (wrong, not fast)."""
    honest = compare_programs(SLOW, "print(44850)", ["300\n"], repeats=4, warmup=False, expected=["44850"])
    assert not honest.errors, honest.errors
    lazy = compare_programs(SLOW, "print(0)", ["300\n"], repeats=4, warmup=False, expected=["44850"])
    assert lazy.wrong_output and not lazy.faster
    assert lazy.errors == ["new program on input 1: printed something else in a timed run"]
