"""Output lines in words a reader can act on (issue 46, items 19 and 23): the derivation of
the request's checks announced as it starts, a critique written as JSON shown read (never
the raw ``{"issues": []}``), a dropped check named, a stop at max_iterations 0 said plainly,
and a critic's 0-or-1 verdict said as the verdict, not as "feedback score 1 of 1"."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

from click.testing import CliRunner
from rich.console import Console

from selfrefine import FakeBackend, SelfRefine
from selfrefine.cli.commands import cli
from selfrefine.cli.display import StepPrinter, Writing
from selfrefine.core.records import DeltaStep, Feedback
from selfrefine.core.wording import feedback_lines, score_note, typed_reply

REQUEST = "Give me three tips for sleeping better as a bulleted list. Do not use any commas."
ANSWER = "* keep a schedule\n* dim the lights\n* skip late coffee"


def _cli(tmp_path: Path, *args: str, replies: dict) -> str:
    path = tmp_path / "replies.json"
    path.write_text(json.dumps(replies))
    result = CliRunner().invoke(cli, [*args, "-m", f"fake:{path}"], terminal_width=200)
    assert result.exit_code == 0, result.output
    return result.output


def test_run_says_it_derives_checks_and_shows_a_json_critique_read(tmp_path):
    out = _cli(
        tmp_path, "run", "chat", REQUEST, "--live", "--max-iters", "1",
        replies={"generate": [ANSWER], "feedback": ['{"issues": []}']},
    )  # fmt: skip
    assert "deriving checks from the request…" in out
    assert out.index("deriving checks from the request…") < out.index("checks of every draft")
    assert "No issues." in out
    assert '{"issues"' not in out and "[]}" not in out  # was printed as the critic wrote it


def test_a_stop_at_max_iterations_0_says_so_plainly(tmp_path):
    out = _cli(tmp_path, "run", "commongen", "dog, ball", "--max-iters", "0", replies={"generate": ["A dog."]})
    said = " ".join(out.split())
    assert "stopped after the first draft: max_iterations is 0" in said
    assert "reached 0" not in said and "refinement(s)" not in said and "the last draft's" not in said


def test_a_dropped_derived_check_is_named(capsys):
    words300 = {"type": "count", "unit": "words", "relation": "at least", "n": 300}  # the request never says it
    backend = FakeBackend({"checks": [json.dumps({"checks": [words300]})]}, default=ANSWER)
    show = StepPrinter(Console(width=200))

    async def run() -> None:
        async for step in SelfRefine("chat", backend, max_iterations=0).astream(REQUEST):
            show(step)

    asyncio.run(run())
    out = " ".join(capsys.readouterr().out.split())
    assert "dropped: at least 300 words" in out
    assert "derived check(s)" not in out


def test_a_json_critique_is_held_back_while_written():
    console = Console(file=io.StringIO(), width=100, force_terminal=True)
    writing = Writing(console, DeltaStep(role="feedback", iteration=0, text=""))
    for piece in ('{"issues": ', "[]}"):
        writing.add(piece)
    shown = writing._panel().renderable.plain
    writing.end()
    assert "{" not in shown and "structured critique" in shown
    piped = Console(file=io.StringIO(), width=100)
    writing = Writing(piped, DeltaStep(role="feedback", iteration=0, text=""))
    for piece in ('{"issues": ', '["Be brief."]}'):
        writing.add(piece)
    writing.end()
    assert "{" not in piped.file.getvalue()
    plain = Writing(piped, DeltaStep(role="feedback", iteration=1, text=""))
    plain.add("Too long. ")
    plain.add("Cut it.")
    plain.end()
    assert "Too long. Cut it." in piped.file.getvalue()  # a critique in prose streams as it comes


def test_typed_reply_tells_json_from_prose_once_it_can():
    assert typed_reply("") is None and typed_reply("  `") is None and typed_reply("```js") is None
    assert typed_reply(' {"issues"') is True and typed_reply("```json\n{") is True
    assert typed_reply("The draft") is False and typed_reply("```python") is False


def test_feedback_reads_as_words():
    assert feedback_lines('{"issues": []}') == ["no issues found"]
    assert feedback_lines('{"missing_concepts": [], "commonsense": "NONE"}') == [
        "no missing concepts found",
        "commonsense: NONE",
    ]
    # a 0-or-1 score that is the critic's verdict reads as the verdict
    assert score_note(Feedback(text="correct", total=1.0, done=True)) == "the critic finds nothing to fix"
    assert score_note(Feedback(text="wrong", total=0.0, done=False)) == "the critic asks for changes"
    coverage = score_note(Feedback(text="{}", total=1.0, done=False))
    assert coverage == "the critic's score 1 (0 to 1, higher is better)"
    assert "of 1 (the critic's)" not in coverage
