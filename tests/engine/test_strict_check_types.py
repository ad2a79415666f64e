"""Strict types in checks (issue 46 item 18): ``n: "40"`` and ``n: true`` were taken as 40 and
1. A check's numbers are integers and its flags booleans, as written: anything else is refused
with the key named, in every place checks are declared (a run's checks, a task file's list of
checks and its checks mapping, ``Task(verify={...})``)."""

from __future__ import annotations

import pytest

from selfrefine import ConfigError, FakeBackend, SelfRefine, Task
from selfrefine.checks.declared import Checks
from selfrefine.checks.instructions import parse_checks
from selfrefine.core.errors import TaskError, TaskFileError
from selfrefine.tasks.taskfile import load_task

COUNT = {"type": "count", "unit": "words", "relation": "at most", "n": 40}


@pytest.mark.parametrize(
    "check, key",
    [
        ({**COUNT, "n": "40"}, "n"),
        ({**COUNT, "n": True}, "n"),
        ({**COUNT, "n": 40.0}, "n"),
        ({"type": "paragraph_start", "nth": True, "word": "Hi"}, "nth"),
        ({"type": "letter_frequency", "letter": "q", "relation": "at least", "n": "2"}, "n"),
        ({"type": "regex", "pattern": "x", "present": "no"}, "present"),
    ],
)
def test_a_check_with_a_loose_type_is_refused_naming_the_key(check, key):
    with pytest.raises(TaskError, match=rf"^check 1 \({check['type']}\): {key}: Input should be a valid"):
        parse_checks([check])


def test_a_run_s_checks_are_strict_before_any_call():
    backend = FakeBackend(default="x")
    with pytest.raises(
        ConfigError, match=r"^invalid option checks: check 1 \(count\): n: Input should be a valid integer"
    ):
        SelfRefine("chat", backend, checks=[{**COUNT, "n": True}])
    assert backend.requests == []
    assert parse_checks([COUNT])[0].n == 40  # an integer is fine


@pytest.mark.parametrize("value", ["'40'", "true", "40.0"])
def test_a_task_file_s_checks_mapping_is_strict(tmp_path, value):
    path = tmp_path / "t.yaml"
    path.write_text(
        f"name: t\ngenerate: '{{{{ input }}}}'\nfeedback: '{{{{ draft }}}}'\nrefine: '{{{{ draft }}}}'\n"
        f"checks:\n  max_words: {value}\n"
    )
    with pytest.raises(TaskFileError, match=r"key 'checks.max_words': Input should be a valid integer"):
        load_task(path)
    with pytest.raises(TaskError, match=r"^check max_words: Input should be a valid integer"):
        Checks.parse({"max_words": True})
    with pytest.raises(TaskError, match="max_words"):
        Task("t", generate="{{ input }}", feedback="{{ draft }}", refine="{{ draft }}", verify={"max_words": "40"})


def test_a_task_file_s_list_of_checks_is_strict(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text(
        "name: t\ngenerate: '{{ input }}'\nfeedback: '{{ draft }}'\nrefine: '{{ draft }}'\n"
        "checks:\n  - {type: count, unit: words, relation: at most, n: '40'}\n"
    )
    with pytest.raises(TaskFileError, match=r"check 1 \(count\): n: Input should be a valid integer"):
        load_task(path)
