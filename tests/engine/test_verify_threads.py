"""Issue 39, items 9-11: a user's verify function that is interrupted, hangs, or replies with
something that cannot be shown. Interrupted: the interrupt reaches the caller of that run once,
the next run (another engine) is unharmed and nothing is printed at exit. Hanging: the run
stops at its time budget naming the function, the next check waits for the stuck one instead
of starting a thread more, and the process still exits. Unshowable: a TaskError whose message
is short. Interpreter exits are watched in child processes (``python -c``) on the fake model."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import threading
import time

import pytest
from conftest import ROOT

from selfrefine import FakeBackend, SelfRefine, Task, TaskError
from selfrefine.core.records import DecisionStep, ResultStep, StopReason

TEMPLATES = dict(generate="Write about {{ input }}.", feedback="Critique: {{ draft }}", refine="Better: {{ draft }}")

# a child's prelude: a task checked by the script's own verify function, on the fake model
PRELUDE = """
import sys, threading, time
from selfrefine import FakeBackend, SelfRefine, Task
TEMPLATES = dict(generate="Write about {{ input }}.", feedback="Critique: {{ draft }}", refine="Better: {{ draft }}")
def engine(verify, **options):
    backend = FakeBackend(default="A draft. Score: 5/10")
    options.setdefault("max_iterations", 1)
    return SelfRefine(Task("t", **TEMPLATES, score=r"Score: (\\d+)"), backend, verify=verify, **options)
"""


def child(script: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    code = PRELUDE + textwrap.dedent(script)
    env = {"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env)


# --- item 9: an interrupt in verify --------------------------------------------------------


@pytest.mark.parametrize("interrupt", ["KeyboardInterrupt", "SystemExit"])
def test_an_interrupt_in_verify_reaches_its_caller_once_and_leaves_nothing(interrupt):
    # b6c03ab: the interrupt broke out of the event loop mid-run; the next run() of another
    # engine on that loop raised it again, and "Task exception was never retrieved" at exit
    done = child(f"""
        def interrupted(input, draft):
            raise {interrupt}()
        for attempt in range(2):  # a second interrupted run is interrupted once too
            try:
                engine(interrupted, samples=3).run("dogs")
            except {interrupt}:
                print("interrupted", attempt)
        result = engine(lambda input, draft: 1.0, samples=3).run("cats")  # another engine
        print("next run:", result.stop_reason.value, len(result.iterations))
        time.sleep(0.2)  # the samples still in flight would have finished by now
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["interrupted 0", "interrupted 1", "next run: max_iterations 2"], done.stdout
    assert done.stderr == "", done.stderr  # no "Task exception was never retrieved", no traceback


def test_an_async_caller_gets_the_interrupt_wrapped_not_loose_in_its_loop():
    from selfrefine.core.errors import RunInterrupted

    def interrupted(input: str, draft: str) -> float:
        raise KeyboardInterrupt

    engine = SelfRefine(Task("t", **TEMPLATES), FakeBackend(default="A draft."), verify=interrupted, samples=2)
    with pytest.raises(RunInterrupted, match="KeyboardInterrupt in verify function .*interrupted") as caught:
        asyncio.run(engine.arun("dogs"))  # the user's own loop: it ends as any failed run does
    assert isinstance(caught.value.interrupt, KeyboardInterrupt)


# --- item 10: a verify function that hangs -------------------------------------------------


def _stop_of(engine: SelfRefine, input: str) -> tuple[DecisionStep, float]:
    async def steps() -> list:
        return [step async for step in engine.astream(input)]

    start = time.monotonic()
    found = asyncio.run(steps())
    assert isinstance(found[-1], ResultStep)
    stops = [s for s in found if isinstance(s, DecisionStep) and s.stop]
    return stops[-1], time.monotonic() - start


def _verify_threads() -> int:
    return sum(t.name == "selfrefine-verify" and t.is_alive() for t in threading.enumerate())


def test_a_hanging_verify_stops_the_run_at_its_budget_and_holds_one_thread():
    # b6c03ab: the run waited for the function (here 20 s) whatever max_seconds said, and each
    # such run held one more thread of the event loop's executor
    released = threading.Event()

    def hangs(input: str, draft: str) -> float:
        released.wait(20)
        return 1.0

    backend = FakeBackend(default="A draft. Score: 5/10")
    engine = SelfRefine(Task("t", **TEMPLATES), backend, verify=hangs, select="verified", max_seconds=1.5)
    try:
        stop, seconds = _stop_of(engine, "dogs")
        assert stop.reason == StopReason.TIME_BUDGET and seconds < 4, (stop, seconds)
        assert "verify function" in stop.detail and "hangs has not returned" in stop.detail, stop.detail
        assert _verify_threads() == 1
        again, seconds = _stop_of(engine, "cats")  # the stuck check is waited for, not joined by another
        assert again.reason == StopReason.TIME_BUDGET and seconds < 4, (again, seconds)
        assert "1 check(s) of verify function" in again.detail and "hangs from earlier runs" in again.detail
        assert _verify_threads() == 1
    finally:
        released.set()
    deadline = time.monotonic() + 5
    while _verify_threads() and time.monotonic() < deadline:
        time.sleep(0.02)
    result = engine.run("birds")  # returned: checks run again
    assert result.iterations[0].verification.passed and result.stop_reason != StopReason.TIME_BUDGET


def test_a_verify_that_never_returns_does_not_hold_up_the_exit():
    # b6c03ab: the stuck thread was the executor's, joined at exit: the process never ended
    done = child(
        """
        def forever(input, draft):
            threading.Event().wait()
        result = engine(forever, select="verified", max_seconds=1).run("dogs")
        print(result.stop_reason.value, result.output)
    """,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["time_budget", "A", "draft.", "Score:", "5/10"], done.stdout


# --- item 11: a reply that cannot be shown -------------------------------------------------


class Unshowable:
    def __repr__(self) -> str:
        raise ValueError("no repr for you")


class Unsayable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no str either")


def _raises(error: Exception):
    def verify(input: str, draft: str) -> float:
        raise error

    return verify


@pytest.mark.parametrize(
    "verify, says",
    [
        (lambda i, d: Unshowable(), r"returned <Unshowable whose repr\(\) raised ValueError>; a verify function"),
        (lambda i, d: (0.5, [Unshowable()]), r"returned findings \[<Unshowable whose repr\(\) raised ValueError>\]"),
        (lambda i, d: tuple(range(3_000_000)), r"returned \(0, 1, 2, 3, 4, 5, \.\.\.\); a verify function"),
        (lambda i, d: "x" * 10_000_000, r"returned 'xxx.*\.\.\..*xxx'; a verify function"),
        (lambda i, d: 10**100_000, r"returned <int whose repr\(\) raised ValueError>"),
        (_raises(Unsayable()), r"raised Unsayable: \(its message cannot be shown: str\(\) raised RuntimeError\)"),
        (_raises(ValueError("e" * 10_000_000)), r"raised ValueError: eee+…$"),
    ],
)
def test_a_reply_that_cannot_be_shown_is_a_short_task_error(verify, says):
    # b6c03ab: a repr that raised escaped as a bare ValueError; a 3M-element tuple made a
    # 25.9 MB message (and a 10 MB string or error message one of 10 MB)
    engine = SelfRefine(Task("t", **TEMPLATES), FakeBackend(default="A draft."), verify=verify, select="verified")
    with pytest.raises(TaskError, match=says) as caught:
        engine.run("dogs")
    assert len(str(caught.value)) < 500, len(str(caught.value))


def test_a_reply_whose_own_methods_fail_is_a_task_error():
    class Broken(tuple):
        def __len__(self) -> int:
            raise OSError("gone")

    with pytest.raises(TaskError, match=r"returned a Broken that cannot be read \(OSError: gone\)"):
        Task("t", **TEMPLATES, verify=lambda i, d: Broken((1, 2))).verify("x", "y")
