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

from selfrefine.sandbox.process import run_python
from selfrefine.sandbox.timing import compare_programs
from selfrefine.tasks.codeopt import CodeOpt

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
