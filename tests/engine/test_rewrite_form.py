"""The rewrite form of focused refinement (``refine_form="rewrite"``, engine/focused.py; issue 45
item 2's second form) on the fake model: one failed check at a time, written again from the
request with the instruction the draft failed stated first, without the draft; judged as a
focused repair is. And the record a benchmark counts repairs by: each try's check kind and form."""

from __future__ import annotations

import asyncio
import json

import pytest

from selfrefine import ConfigError, FakeBackend, SelfRefine, Task
from selfrefine.core.records import RunResult

LOWER = {"type": "case", "letters": "lower"}
NO_COMMA = {"type": "forbidden_chars", "chars": ","}
REQUEST = "Tell me about the cat in one short sentence. {{ draft }} stays as written."
DRAFT = "The Cat sat on the mat."


def run(model: FakeBackend, checks: list[dict], **options) -> RunResult:
    options = {"max_iterations": 4, "refine_form": "rewrite", **options}
    engine = SelfRefine("chat", model, checks=checks, derive_checks=False, **options)

    async def collect() -> list:
        return [s async for s in engine.astream(REQUEST)]

    return asyncio.run(collect())[-1].result


def prompts(model: FakeBackend, role: str) -> list[str]:
    return [r.prompt for r in model.requests if r.role == role]


def test_the_rewrite_prompt_states_the_failed_instruction_first_then_the_request_and_not_the_draft():
    model = FakeBackend({"generate": [DRAFT], "refine": ["the cat sat on the mat."]})
    result = run(model, [LOWER, NO_COMMA])
    [prompt] = prompts(model, "refine")
    assert prompt.splitlines()[0] == "Important: use only lowercase letters."  # the instruction, first
    assert REQUEST in prompt  # the request, as written: "{{ draft }}" in it is text, not a template
    assert DRAFT not in prompt and "The Cat" not in prompt  # no draft, nothing to copy
    focus = result.iterations[1].focus
    assert focus is not None and focus.kept and (focus.form, focus.kind, focus.sample) == ("rewrite", "case", 1)
    assert focus.repair == "use only lowercase letters"  # what the prompt asked for
    assert result.output == "the cat sat on the mat." and result.stop_reason == "feedback"
    assert prompts(model, "feedback") == []  # the checks' findings are the feedback: no critic call


def test_a_rewrite_that_breaks_a_passing_check_is_rejected_and_sampled_again_from_the_same_prompt():
    model = FakeBackend({"generate": [DRAFT], "refine": ["the cat, sat on the mat.", "the cat sat on the mat."]})
    result = run(model, [LOWER, NO_COMMA], temperature=0)
    first, second = result.iterations[1].focus, result.iterations[2].focus
    assert result.iterations[1].accepted is False
    assert first is not None and not first.kept and first.why == "it breaks a check that passed: use no commas"
    assert first.fixed is True  # its own check passes: rejected for the one it broke
    assert second is not None and second.kept and (second.form, second.sample) == ("rewrite", 2)
    assert result.output == "the cat sat on the mat." and result.selected == 2
    first_try, second_try = [r for r in model.requests if r.role == "refine"]
    assert first_try.prompt == second_try.prompt  # the tries of one check share their whole prompt
    assert first_try.temperature == 0 and second_try.temperature >= 0.7  # the second samples


def test_when_no_rewrite_is_kept_the_draft_stays_and_the_run_says_no_change():
    model = FakeBackend({"generate": [DRAFT], "refine": ["The Cat, sat.", "THE CAT SAT."]})
    result = run(model, [LOWER, NO_COMMA])
    tries = [it.focus for it in result.iterations[1:] if it.focus is not None]
    assert [(f.kept, f.fixed) for f in tries] == [(False, False), (False, False)]
    assert result.stop_reason == "no_change" and result.output == DRAFT  # never worse


def test_each_try_records_its_checks_kind_and_form_in_the_json_result():
    model = FakeBackend({"generate": ["The cat, sat."], "refine": ["the cat, sat.", "the cat sat."]})
    result = run(model, [LOWER, NO_COMMA], repair_samples=1)
    tries = [json.loads(result.model_dump_json())["iterations"][i]["focus"] for i in (1, 2)]
    assert [(f["kind"], f["form"], f["kept"], f["fixed"]) for f in tries] == [
        ("case", "rewrite", True, True),
        ("forbidden_chars", "rewrite", True, True),
    ]
    finding = result.iterations[0].verification.findings[0]
    assert finding.kind == "case" and json.loads(finding.model_dump_json())["kind"] == "case"


def test_a_tasks_own_check_that_names_no_kind_is_counted_by_its_words():
    model = FakeBackend({"generate": ["The boy kicks the ball."], "refine": ["The boy kicks the ball into the goal."]})
    result = SelfRefine("commongen", model, refine_form="rewrite", max_iterations=2).run("ball, kick, goal")
    focus = result.iterations[1].focus
    assert focus is not None and focus.kept and (focus.kind, focus.form) == ("use every concept", "rewrite")
    # its check's words name no concept: the rewrite states its repair, which does, then the request
    [prompt] = prompts(model, "refine")
    assert prompt.startswith("Important: Use the word 'goal' in the sentence; keep it one natural scene.\n\n")
    assert prompt.endswith("ball, kick, goal") and "The boy kicks the ball." not in prompt
    assert "kind" not in result.iterations[0].verification.findings[0].model_dump()  # records before it read the same


def test_the_focused_form_records_its_form_and_kind_too():
    model = FakeBackend({"generate": [DRAFT], "refine": ["the cat sat on the mat."]})
    engine = SelfRefine("chat", model, checks=[LOWER], derive_checks=False, refine_form="focused")
    focus = engine.run(REQUEST).iterations[1].focus
    assert focus is not None and (focus.form, focus.kind, focus.kept) == ("focused", "case", True)
    assert DRAFT in prompts(model, "refine")[0]  # the focused form edits the draft in place


def test_rewrite_needs_code_checks_and_every_repair_form_has_a_prompt():
    task = Task("plain", generate="Write {{ input }}.", feedback="Critique: {{ draft }}", refine="Better: {{ draft }}")
    with pytest.raises(ConfigError, match="refine_form 'rewrite' repairs one failed check at a time"):
        SelfRefine(task, FakeBackend(), refine_form="rewrite").run("x")
    from selfrefine.core.config import REPAIR_FORMS
    from selfrefine.engine.focused import FORMS, REWRITE

    assert tuple(FORMS) == REPAIR_FORMS and FORMS["rewrite"] is REWRITE


def test_the_cli_takes_rewrite_and_refuses_an_unknown_form_in_one_error_line(tmp_path):
    from click.testing import CliRunner

    from selfrefine.cli.commands import cli

    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps({"generate": ["The Cat sat."], "refine": ["the cat sat."]}))
    checks = tmp_path / "checks.json"
    checks.write_text(json.dumps([LOWER]))
    args = ["run", "chat", "--model", f"fake:{replies}", "--checks", str(checks), "--no-derive-checks"]
    out = CliRunner().invoke(cli, [*args, "--refine-form", "rewrite", "--json"], input="hi")
    assert out.exit_code == 0, out.output
    result = json.loads(out.output)
    assert result["config"]["refine_form"] == "rewrite" and result["output"] == "the cat sat."
    assert result["iterations"][1]["focus"]["form"] == "rewrite" and result["iterations"][1]["focus"]["kind"] == "case"
    bad = CliRunner().invoke(cli, [*args, "--refine-form", "sideways"], input="hi")
    assert bad.exit_code == 2 and "Traceback" not in bad.output
    [error] = [line for line in bad.output.splitlines() if line.startswith("Error:")]
    assert "'sideways' is not one of 'history', 'focused', 'rewrite', 'by_kind'" in error


def test_the_live_view_says_a_repair_was_written_again():
    import io

    from rich.console import Console

    from selfrefine import DraftStep
    from selfrefine.cli.display import StepPrinter

    model = FakeBackend({"generate": [DRAFT], "refine": ["the cat sat on the mat."]})
    engine = SelfRefine("chat", model, checks=[LOWER], derive_checks=False, refine_form="rewrite")
    out = io.StringIO()
    printer = StepPrinter(Console(file=out, width=300))

    async def collect() -> list:
        return [s async for s in engine.astream(REQUEST)]

    for step in asyncio.run(collect()):
        printer(step)
        assert not isinstance(step, DraftStep) or step.iteration == 0 or step.focus is not None
    assert "repair for 'use only lowercase letters' (rewrite, try 1): kept" in out.getvalue()


def test_by_kind_asks_forbidden_characters_in_the_rewrite_form_and_other_kinds_in_the_focused_form():
    # refine_form="by_kind": the form measured to fix each kind (commas: rewrite; case: focused)
    model = FakeBackend({"generate": ["The Cat, sat."], "refine": ["the cat, sat.", "the cat sat."]})
    result = run(model, [LOWER, NO_COMMA], repair_samples=1, refine_form="by_kind")
    tries = [result.iterations[i].focus for i in (1, 2)]
    assert [(f.kind, f.form, f.kept) for f in tries] == [
        ("case", "focused", True),
        ("forbidden_chars", "rewrite", True),
    ]
    case_prompt, comma_prompt = prompts(model, "refine")
    assert "The Cat, sat." in case_prompt  # focused: the draft, edited in place
    assert comma_prompt.splitlines()[0] == "Important: use no commas." and "the cat, sat." not in comma_prompt
    assert result.output == "the cat sat."
