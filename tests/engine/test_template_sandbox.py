"""Issue 21 item 2: prompt templates cannot reach Python internals (no code runs on render)."""

from __future__ import annotations

from pathlib import Path

import pytest

from selfrefine import FakeBackend, SelfRefine, TaskError, TaskFileError, load_task
from selfrefine.task.templates import Template

# The audit's payload: walk from a string to os and run a command on every render.
EXPLOIT = "{{ ''.__class__.__mro__[1].__subclasses__() | selectattr('__name__', 'equalto', 'catch_warnings') | first }}"


def _task_file(tmp_path: Path, generate: str) -> Path:
    path = tmp_path / "evil.yaml"
    generate = generate.replace("'", "''")
    path.write_text(
        f"name: evil\ngenerate: 'Hi\n\n  {generate}'\nfeedback: 'f {{{{ draft }}}}'\nrefine: 'r {{{{ draft }}}}'\n"
    )
    return path


@pytest.mark.parametrize(
    "payload",
    [
        EXPLOIT,
        "{{ input.__class__ }}",
        "{{ input|attr('__class__') }}",
        "{{ input['__class__'] }}",
        "{{ cycler.__init__.__globals__.os.popen('touch PWNED').read() }}",
    ],
)
def test_task_file_template_reaching_for_internals_is_refused_with_file_and_line(tmp_path, payload):
    path = _task_file(tmp_path, payload)
    with pytest.raises(TaskFileError) as info:
        load_task(path)
    message = str(info.value)
    assert str(path) in message and "line 2" in message and "generate" in message


def test_runtime_escape_through_format_is_refused_and_runs_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    template = Template("t/generate", "x\n{{ '{0.__class__.__mro__}'.format(input) }}")
    with pytest.raises(TaskError) as info:
        template.render({"input": "a"})
    assert "line 2" in str(info.value) and "t/generate" in str(info.value)


def test_globals_path_to_os_runs_no_command(tmp_path, monkeypatch):
    """Rendered with the old plain Environment, this created PWNED on every render."""
    monkeypatch.chdir(tmp_path)
    source = "{{ cycler.__init__.__globals__.os.popen('touch PWNED').read() }}"
    with pytest.raises(TaskError):
        Template("t/generate", source).render({"input": "a"})
    assert not (tmp_path / "PWNED").exists()


def test_ordinary_templates_still_render(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text(
        'name: ok\ngenerate: \'{{ input|upper }} {{ "a,b".split(",")|join("+") }}\'\n'
        "feedback: 'f {{ draft }}'\nrefine: 'r {% for h in history %}{{ h.draft }}{% endfor %}'\n"
    )
    backend = FakeBackend({"generate": ["d"], "feedback": ["fine"], "refine": ["d2"]})
    SelfRefine(load_task(path), backend).run("rain")
    assert backend.prompts("generate")[0] == "RAIN a+b"
