"""Built-in tasks: input parsing, draft/feedback parsing, metrics and the sandbox."""

from __future__ import annotations

import pytest

from selfrefine import FeedbackParseError, InputError, TaskError, get_task
from selfrefine.core.errors import DraftParseError
from selfrefine.sandbox.process import run_python
from selfrefine.tasks.commongen import (
    concept_coverage,
    missing_concepts,
    parse_concepts,
)
from selfrefine.tasks.gsm8k import extract_code

# --- commongen ------------------------------------------------------------------------------


def test_concepts_parse_from_commas_spaces_and_json():
    assert parse_concepts("Dog, frisbee ,catch, dog") == ["dog", "frisbee", "catch"]
    assert parse_concepts("dog frisbee catch") == ["dog", "frisbee", "catch"]
    assert parse_concepts('["ice cream", "cone"]') == ["ice cream", "cone"]


def test_coverage_known_answers():
    concepts = ["dog", "frisbee", "catch", "throw", "park"]
    sentence = "The dog catches the frisbee."
    assert concept_coverage(concepts, sentence) == pytest.approx(0.6)
    assert missing_concepts(concepts, sentence) == ["throw", "park"]
    assert concept_coverage(["run", "bake", "fly"], "She was running, baking and flies.") == 1.0
    assert concept_coverage(["ice cream"], "I like ice and cream.") == 0.0
    assert concept_coverage([], "anything") == 0.0


def test_commongen_metric_is_code_not_feedback():
    task = get_task("commongen")
    assert task.metric("dog, ball", "A dog.") == 0.5


def test_commongen_feedback_json_and_text_forms():
    task = get_task("commongen")
    fb = task.parse_feedback('{"missing_concepts": ["ball"], "commonsense": "NONE"}', input="dog, ball", draft="A dog.")
    assert fb.done is False and fb.fields["missing_concepts"] == ["ball"] and fb.total == 0.5
    done = task.parse_feedback('{"missing_concepts": ["NONE"], "commonsense": "none"}', input="dog, ball", draft="x")
    assert done.done is True and done.total == 1.0
    text = task.parse_feedback("Concepts missing: ball\nCommonsense: NONE", input="dog, ball", draft="x")
    assert text.fields["missing_concepts"] == ["ball"] and text.done is False


@pytest.mark.parametrize(
    "raw, message",
    [
        ("", "empty"),
        ('{"missing_concepts": ["ball"], "commonsense": "NO', "cut off"),
        ('{"missing": []}', "lacks"),
        ('{"missing_concepts": 3, "commonsense": ""}', "must be a list"),
        ("looks fine to me", "neither"),
    ],
)
def test_commongen_malformed_feedback(raw, message):
    with pytest.raises(FeedbackParseError, match=message):
        get_task("commongen").parse_feedback(raw, input="dog, ball", draft="x")


def test_commongen_draft_takes_first_sentence_line():
    task = get_task("commongen")
    assert task.parse_draft("Improved sentence: A dog runs.\nConcepts: x") == "A dog runs."
    with pytest.raises(DraftParseError):
        task.parse_draft("   ")


def test_commongen_rejects_empty_input():
    with pytest.raises(InputError):
        get_task("commongen").prepare_input(" , ; ")


def test_input_size_limit():
    with pytest.raises(InputError, match="limit"):
        get_task("gsm8k").prepare_input("x" * 20_001)


def test_unknown_task_lists_builtins():
    with pytest.raises(TaskError, match="sentiment, dialogue, codeopt, readability, gsm8k, acronym, commongen"):
        get_task("nope")


def test_the_papers_seven_tasks_and_every_builtin_with_a_metric_and_ablation_prompts():
    from selfrefine.tasks import BUILTIN_TASKS, PAPER_TASKS

    assert len(PAPER_TASKS) == 7 and list(BUILTIN_TASKS)[:7] == list(PAPER_TASKS)
    for name in BUILTIN_TASKS:
        task = get_task(name)
        assert task.metric_name, name
        assert {"generate", "feedback", "refine", "refine_nofeedback"} <= set(task.declared.templates), name
        assert (
            task.declared.defaults.generic_feedback and task.declared.defaults.generic_feedback != "Improve the answer."
        ), name


# --- gsm8k ------------------------------------------------------------------------------------

CODE = "def solution():\n    a = 3 * 4\n    return 20 - a"


def test_extract_code_from_fences_and_trailing_text():
    reply = f"Here you go:\n```python\nimport math\n{CODE}\n```\nHope it helps"
    assert extract_code(reply) == f"import math\n{CODE}"
    assert extract_code(f"{CODE}\nQuestion: next one") == CODE
    with pytest.raises(DraftParseError, match="def solution"):
        extract_code("print(42)")
    with pytest.raises(DraftParseError, match="no body"):
        extract_code("def solution():")


def test_gsm8k_verdict_is_the_last_one():
    task = get_task("gsm8k")
    parse = task.parse_feedback
    assert parse("# a = 3 is right\n# it is correct", input="q", draft=CODE).done is True
    assert parse("# it is correct? no.\n# it is wrong", input="q", draft=CODE).done is False
    assert parse("# it's not correct", input="q", draft=CODE).done is False
    assert parse("# looks odd", input="q", draft=CODE).done is False
    with pytest.raises(FeedbackParseError):
        parse("  ", input="q", draft=CODE)


def test_gsm8k_answer_and_metric_by_execution():
    task = get_task("gsm8k")
    assert task.answer(CODE) == "8"
    assert task.metric("q", CODE, "8") == 1.0
    assert task.metric("q", CODE, "8.0") == 1.0
    assert task.metric("q", CODE, 9) == 0.0
    assert task.metric("q", "def solution():\n    return 1/0", 8) == 0.0
    assert task.metric("q", CODE) is None


# --- sandbox ----------------------------------------------------------------------------------


def test_sandbox_reports_errors_and_timeouts():
    assert run_python("def solution():\n    return [1, 2]", call="solution").value == "[1, 2]"
    bad = run_python("raise ValueError('nope')")
    assert not bad.ok and "ValueError: nope" in bad.error
    slow = run_python("while True:\n    pass", timeout=1)
    assert slow.timed_out and not slow.ok


def test_sandbox_runs_in_a_temp_dir_with_memory_limit(tmp_path):
    where = run_python("import os\nprint(os.getcwd())")
    assert "selfrefine" in where.stdout  # /tmp/selfrefine in a mount namespace, else /tmp/selfrefine-XXXX
    hog = run_python("x = bytearray(2 * 1024 ** 3)", memory_mb=256)
    assert not hog.ok


def test_sandbox_caps_output():
    out = run_python("print('x' * 200000)", max_output=1000)
    assert out.ok and len(out.stdout) < 1100 and out.stdout.endswith("[output truncated]")


def test_json_aspect_ratings_is_the_one_rating_reader():
    from selfrefine.tasks import acronym, dialogue
    from selfrefine.tasks.parsing import json_aspect_ratings

    def key_of(name):
        return {"clear": "clear", "clarity": "clear", "fun": "fun"}.get(name.lower())

    def score_of(v):
        return float(v) if v in (1, 2, 3) else None

    raw = 'Sure: {"Clear": {"score": 3, "reason": "short"}, "clarity": 1, "fun": 9, "other": 2}'
    ratings, data = json_aspect_ratings(raw, key_of, score_of)
    assert ratings == {"clear": (3.0, "short")}  # first mention wins; 9 is off the scale
    assert data["other"] == 2
    assert json_aspect_ratings("no json here", key_of, score_of) is None
    # both rating tasks read their JSON through it (one parser, two scales)
    assert "json_aspect_ratings" in acronym._parse_json.__code__.co_names
    assert "json_aspect_ratings" in dialogue._parse_json.__code__.co_names


def test_every_builtin_declares_what_it_overrides():
    # capabilities are declared, not inferred: the declaration matches the hooks each task defines
    from selfrefine.task.task import Task
    from selfrefine.tasks import BUILTIN_TASKS

    for cls in BUILTIN_TASKS.values():
        caps = cls.capabilities
        assert caps.verifier == (cls.verify is not Task.verify), cls.name
        assert caps.answer == (cls.answer is not Task.answer), cls.name
        assert caps.judge_only == (cls.metric is Task.metric), cls.name
    assert BUILTIN_TASKS["gsm8k"].capabilities.runs_code and BUILTIN_TASKS["codeopt"].capabilities.runs_code


def test_a_task_class_that_overrides_a_hook_without_declaring_it_is_refused_with_the_fix():
    from selfrefine.task.task import Capabilities, Task

    with pytest.raises(
        TaskError,
        match=r"overrides verify\(\) but does not declare it: set capabilities = "
        r"Capabilities\(verifier=True\)",
    ):

        class Checked(Task):
            def verify(self, input, draft):
                return None

    class Declared(Task):
        capabilities = Capabilities(verifier=True)

        def verify(self, input, draft):
            return None

    assert Declared("d", generate="g", feedback="f", refine="r").has_verifier


def test_legacy_default_class_variables_still_apply_with_a_deprecation_warning():
    from selfrefine.task.task import Task

    with pytest.warns(DeprecationWarning, match="default_\\* class variables are deprecated"):

        class Old(Task):
            default_max_iterations = 7
            default_temperature = {"generate": 0.5, "feedback": 0.0, "refine": 0.5}

    task = Old("old", generate="g", feedback="f", refine="r")
    assert task.declared.defaults.max_iterations == 7 and task.declared.defaults.temperature["refine"] == 0.5
