"""Issue 39, items 9-11: a user's verify function that is interrupted, hangs, or replies with
something that cannot be shown. Unshowable: a TaskError whose message is short."""

from __future__ import annotations

import pytest

from selfrefine import FakeBackend, SelfRefine, Task, TaskError

TEMPLATES = dict(generate="Write about {{ input }}.", feedback="Critique: {{ draft }}", refine="Better: {{ draft }}")


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
