"""Every code block of docs/writing-a-task.md runs as written, in order, in one namespace.

Each YAML block is saved as the ``NAME.yaml`` the page tells the reader to save, and the
pyproject block's entry points are installed as a real (temporary) distribution on
``sys.path``, with ``mypackage.slogan`` and ``mypackage.shout`` the modules the page wrote:
``importlib.metadata`` then finds them exactly as it finds an installed package's. The one
substitution: the spec ``embedded`` is the fake model in the quick suite.
"""

from __future__ import annotations

import math
import re
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT

from selfrefine import FakeBackend
from selfrefine.backends import registry

DOC = ROOT / "docs" / "writing-a-task.md"
_FENCE = re.compile(r"^```(\w+)\n(.*?)^```", re.M | re.S)


def blocks() -> list[tuple[str, str, str]]:
    text = DOC.read_text(encoding="utf-8")
    return [
        (m.group(1), f"writing-a-task.md:{text.count(chr(10), 0, m.start(2)) + 1}", m.group(2))
        for m in _FENCE.finditer(text)
    ]


MOTTOS = ["Lumo: the sun, at your desk.", "A lamp."]


def reply(request) -> str | dict:
    if request.role == "feedback":
        return "done"
    if request.prompt.startswith("Write a motto"):  # two different samples, for the judge to order
        return MOTTOS[(request.seed or 0) % 2]
    if request.role == "judge":
        p_yes = 0.3 if f"Motto: {MOTTOS[1]}" in request.prompt else 0.8
        return {"text": "Yes", "top_logprobs": [{"Yes": math.log(p_yes), "No": math.log(1 - p_yes)}]}
    return "Lumo: sunlight for your desk."


@pytest.fixture
def embedded_is_fake(monkeypatch) -> list[FakeBackend]:
    built: list[FakeBackend] = []

    def factory(rest: str, **options: Any) -> FakeBackend:
        built.append(FakeBackend(default=reply, name="fake-embedded"))
        return built[-1]

    scheme = registry.BUILTIN["embedded"]
    monkeypatch.setitem(registry.BUILTIN, "embedded", registry.Scheme(scheme.name, scheme.usage, scheme.help, factory))
    return built


def install(tmp_path: Path, toml: str, namespace: dict[str, Any], monkeypatch) -> None:
    """The pyproject block's entry points as an installed distribution of ``mypackage``."""
    groups = dict(re.findall(r'\[project\.entry-points\."([^"]+)"\]\n(.*?)(?=\n\[|\Z)', toml, re.S))
    lines = [f"[{group}]\n{body.strip()}\n" for group, body in groups.items()]
    info = tmp_path / "site" / "mypackage-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mypackage\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("\n".join(lines).replace('"', ""))
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    package = types.ModuleType("mypackage")
    for name in ("slogan", "shout"):
        module = types.ModuleType(f"mypackage.{name}")
        module.__dict__.update(namespace)
        monkeypatch.setitem(sys.modules, f"mypackage.{name}", module)
        setattr(package, name, module)
    monkeypatch.setitem(sys.modules, "mypackage", package)


def test_every_block_of_the_page_runs_in_order(tmp_path, monkeypatch, embedded_is_fake, capsys):
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {"__name__": "__doc__"}
    kinds = [kind for kind, _, _ in blocks()]
    assert kinds == [
        "python",
        "yaml",
        "python",
        "python",
        "yaml",
        "python",
        "yaml",
        "python",
        "toml",
        "python",
        "python",
    ], kinds
    for kind, where, code in blocks():
        if kind == "yaml":
            name = re.match(r"name: (\w+)", code).group(1)
            (tmp_path / f"{name}.yaml").write_text(code)
        elif kind == "toml":
            toml = code
        else:
            if "get_backend" in code:
                install(tmp_path, toml, namespace, monkeypatch)
            exec(compile(code, where, "exec"), namespace)
    out = capsys.readouterr().out.splitlines()
    # the Python task: three samples, each verified, the best returned; the verifier is satisfied
    result = namespace["result"]
    assert len(result.iterations[0].candidates) == 3 and result.output == "Lumo: sunlight for your desk."
    assert out[0] == "Lumo: sunlight for your desk. ok"
    assert namespace["yaml_task"].declared.stop_contains == ["done"] and not namespace["yaml_task"].has_verifier
    # a function verifier on the YAML task, and a task file's checks, choosing among samples
    assert out[2] == "ok" and namespace["checked"].closed
    assert out[3] == "Lumo: sunlight for your desk. | all checks pass" and namespace["tagline"].has_verifier
    tagged = namespace["tagged"]
    # both samples pass every check: the default (focused repairs) has nothing to repair
    assert len(tagged.iterations[0].candidates) == 2 and len(tagged.iterations) == 1
    # a task file's judge orders two samples the task cannot check by code
    assert out[4:6] == [
        "kept Lumo: the sun, at your desk. | [('catchy', 0.8), ('about', 0.8)]",
        "lost A lamp. | [('catchy', 0.3), ('about', 0.3)]",
    ]
    # the plugin backend, found through its entry point, options typed ("2" -> 2)
    assert out[6] == "shout:loud 2" and out[7].startswith("WRITE ONE SLOGAN") and out[7].count("SLOGAN:") == 2
    from selfrefine.tasks import get_task

    assert type(get_task("slogan")).__name__ == "Slogan"  # the task entry point too
    assert embedded_is_fake and all(b.requests for b in embedded_is_fake)  # the page's runs reached the model


@pytest.mark.parametrize(
    "critique, stops",
    [
        ("It is not done: line 2 needs 7 syllables", False),  # was: stopped, on its negation
        ("Line 2 is abandoned", False),  # was: stopped, on a word that holds "done"
        ("It isn't done yet: name the lamp.", False),
        ("Done.", True),
        ("The haiku is done.", True),
        ("The slogan is done.", True),
    ],
)
def test_the_pages_yaml_task_stops_on_done_only_when_the_critic_says_it(tmp_path, critique, stops):
    from selfrefine import SelfRefine, StopReason, load_task

    yaml_block = next(code for kind, _, code in blocks() if kind == "yaml")
    (tmp_path / "slogan.yaml").write_text(yaml_block)
    task = load_task(tmp_path / "slogan.yaml")
    backend = FakeBackend(
        {"generate": ["Lumo lights."], "refine": ["Lumo: light.", "Lumo: sun light."]}, default=critique
    )
    result = SelfRefine(task, backend, retry_base_delay=0).run("Lumo, a solar desk lamp")
    assert (result.stop_reason is StopReason.FEEDBACK) is stops, result.stop_reason
    assert len(result.iterations) == (1 if stops else 3)
