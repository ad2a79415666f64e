"""Focused refinement (``refine_form="focused"``, engine/focused.py) on the fake model: one
failed check's repair at a time in a short prompt, kept only when its check passes and no
passing check breaks, else tried again and then the next failed check; the record says which
check each refinement was for and whether it was kept (issue 45 item 2)."""

from __future__ import annotations

import asyncio

import pytest

from selfrefine import ConfigError, DraftStep, FakeBackend, SelfRefine, Task
from selfrefine.core.records import RunResult

LOWER = {"type": "case", "letters": "lower"}
NO_COMMA = {"type": "forbidden_chars", "chars": ","}
DOG = {"type": "keywords", "words": ["dog"]}
REQUEST = "Tell me about the cat in one short sentence."


def run(model: FakeBackend, checks: list[dict], **options) -> tuple[RunResult, list]:
    options = {"max_iterations": 4, **options}
    engine = SelfRefine("chat", model, checks=checks, derive_checks=False, refine_form="focused", **options)

    async def collect() -> list:
        return [s async for s in engine.astream(REQUEST)]

    steps = asyncio.run(collect())
    return steps[-1].result, steps


def prompts(model: FakeBackend, role: str) -> list[str]:
    return [r.prompt for r in model.requests if r.role == role]


def test_a_repair_that_passes_its_check_is_kept_from_a_short_prompt():
    model = FakeBackend({"generate": ["The cat sat on the mat."], "refine": ["the cat sat on the mat."]})
    result, steps = run(model, [LOWER, NO_COMMA])
    assert result.output == "the cat sat on the mat."
    focus = result.iterations[1].focus
    assert focus is not None and (focus.check, focus.kept, focus.sample) == ("use only lowercase letters", True, 1)
    [prompt] = prompts(model, "refine")
    assert REQUEST in prompt and "The cat sat on the mat." in prompt
    assert prompt.rstrip().splitlines()[-2] == (
        "Edit the reply: Rewrite the text entirely in lowercase letters; change nothing else."
    )
    assert prompts(model, "feedback") == []  # the checks' findings are the feedback: no critic call
    drafts = [s for s in steps if isinstance(s, DraftStep)]
    assert drafts[1].focus is not None and drafts[1].focus.kept  # the live steps say it too
    assert "focus" not in result.iterations[0].model_dump()  # a draft no repair made records none


def test_a_repair_that_breaks_a_passing_check_is_rejected_and_sampled_again():
    model = FakeBackend(
        {"generate": ["The cat sat on the mat."], "refine": ["the cat, sat on the mat.", "the cat sat on the mat."]}
    )
    result, _ = run(model, [LOWER, NO_COMMA], temperature=0)  # a greedy refiner
    first, second = result.iterations[1], result.iterations[2]
    assert first.accepted is False and first.focus is not None and not first.focus.kept
    assert first.focus.why == "it breaks a check that passed: use no commas"
    assert second.focus is not None and (second.focus.check, second.focus.sample, second.focus.kept) == (
        "use only lowercase letters",
        2,
        True,
    )
    assert result.output == "the cat sat on the mat." and result.selected == 2
    first_try, second_try = [r for r in model.requests if r.role == "refine"]
    assert first_try.temperature == 0 and second_try.temperature >= 0.7  # the second try samples: greedy repeats


def test_after_a_rejected_repair_the_next_failed_check_is_tried():
    model = FakeBackend(
        {
            "generate": ["The cat sat."],
            "refine": ["The cat sat.", "The cat sat with a dog.", "the cat sat with a dog."],
        }
    )
    result, _ = run(model, [LOWER, DOG], repair_samples=1)
    focus = [it.focus for it in result.iterations[1:]]
    assert [(f.check, f.kept) for f in focus if f is not None] == [
        ("use only lowercase letters", False),  # unchanged: rejected
        ("include the word 'dog'", True),  # the next failed check's repair, kept
        ("use only lowercase letters", True),  # the next round: the one still failing
    ]
    assert focus[0] is not None and focus[0].why == "the repair changed nothing"
    assert "Add the word 'dog' where it fits" in prompts(model, "refine")[1]
    assert result.output == "the cat sat with a dog." and result.stop_reason == "feedback"


def test_a_repair_whose_own_check_still_fails_is_rejected_and_when_none_is_kept_the_run_stops():
    model = FakeBackend({"generate": ["The Cat sat."], "refine": ["The cat sat.", "THE CAT SAT."]})
    result, _ = run(model, [LOWER])
    rejected = [it.focus for it in result.iterations[1:]]
    assert all(f is not None and not f.kept for f in rejected) and len(rejected) == 2  # repair_samples: 2
    assert rejected[0] is not None and rejected[0].why.startswith("the check it was for still fails: ")
    assert result.stop_reason == "no_change" and result.output == "The Cat sat."  # never worse: the draft stays


def test_the_refinement_cap_counts_each_try():
    model = FakeBackend({"generate": ["The Cat sat."], "refine": ["The Cat sat."] * 5})
    result, _ = run(model, [LOWER, DOG], max_iterations=2)  # run()'s 4 is overridden
    assert len(result.iterations) == 3 and result.stop_reason == "max_iterations"


def test_the_default_is_todays_refine_form_and_focused_needs_code_checks():
    model = FakeBackend({"generate": ["The cat."], "feedback": ["make it lowercase"], "refine": ["the cat."]})
    engine = SelfRefine("chat", model, checks=[LOWER], derive_checks=False, max_iterations=1)
    result = engine.run(REQUEST)
    assert result.iterations[1].focus is None and "refine_form" not in result.config.model_dump()
    task = Task("plain", generate="Write {{ input }}.", feedback="Critique: {{ draft }}", refine="Better: {{ draft }}")
    with pytest.raises(ConfigError, match="refine_form 'focused' repairs one failed check at a time"):
        SelfRefine(task, FakeBackend(), refine_form="focused").run("x")


def test_commongens_missing_concepts_are_repaired_in_focus():
    model = FakeBackend({"generate": ["The boy kicks the ball."], "refine": ["The boy kicks the ball into the goal."]})
    result = SelfRefine("commongen", model, refine_form="focused", max_iterations=2).run("ball, kick, goal")
    focus = result.iterations[1].focus
    assert focus is not None and focus.kept and focus.repair.startswith("Use the word 'goal' in the sentence")
    assert result.output == "The boy kicks the ball into the goal."


def test_the_cli_spells_it_refine_form(tmp_path):
    import json

    from click.testing import CliRunner

    from selfrefine.cli.commands import cli

    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps({"generate": ["The Cat sat."], "refine": ["the cat sat."]}))
    checks = tmp_path / "checks.json"
    checks.write_text(json.dumps([LOWER]))
    args = ["run", "chat", "--model", f"fake:{replies}", "--checks", str(checks), "--no-derive-checks"]
    out = CliRunner().invoke(cli, [*args, "--refine-form", "focused", "--repair-samples", "1", "--json"], input="hi")
    assert out.exit_code == 0, out.output
    result = json.loads(out.output)
    assert result["config"]["refine_form"] == "focused" and result["config"]["repair_samples"] == 1
    assert result["iterations"][1]["focus"]["kept"] is True and result["output"] == "the cat sat."


def test_the_live_view_says_which_check_a_repair_was_for_and_whether_it_was_kept():
    import io

    from rich.console import Console

    from selfrefine.cli.display import StepPrinter

    model = FakeBackend({"generate": ["The cat sat."], "refine": ["the cat, sat.", "the cat sat."]})
    _, steps = run(model, [LOWER, NO_COMMA])
    out = io.StringIO()
    printer = StepPrinter(Console(file=out, width=300))
    for step in steps:
        printer(step)
    shown = out.getvalue()
    assert "repair for 'use only lowercase letters' (try 1): rejected: it breaks a check that passed: use no" in shown
    assert "repair for 'use only lowercase letters' (try 2): kept" in shown


def test_a_task_files_checks_are_repaired_in_focus(tmp_path):
    from selfrefine import load_task

    (tmp_path / "tagline.yaml").write_text(
        "name: tagline\ngenerate: 'Tagline for {{ input }}:'\nfeedback: 'Fix: {{ draft }}'\n"
        "refine: 'Better: {{ draft }}'\nchecks:\n  max_words: 5\n  required_words: [lamp]\n"
    )
    model = FakeBackend({"generate": ["A bright solar light for every desk"], "refine": ["A bright solar lamp"]})
    result = SelfRefine(load_task(tmp_path / "tagline.yaml"), model, refine_form="focused").run("Lumo")
    focus = result.iterations[1].focus
    assert (
        focus is not None
        and focus.kept
        and focus.repair == ("It has 7 words; shorten it to at most 5 words; keep the meaning.")
    )
    assert result.output == "A bright solar lamp" and [r.role for r in model.requests] == ["generate", "refine"]
