"""The library's engine object (issue 30, item 16): a context manager that closes its
backends, refuses to run once closed, names the valid options when one is misspelt, and
refuses ``preset="best"`` on a task that measured no best configuration."""

from __future__ import annotations

import asyncio
import inspect
import json
import types
import typing

import pytest
from click.testing import CliRunner

from selfrefine import ConfigError, FakeBackend, RefineConfig, SelfRefine, SelfRefineError, Task
from selfrefine.cli import cli

TEMPLATES = dict(
    generate="Write about {{ input }}.",
    feedback="Text: {{ draft }}\nCritique:",
    refine="Text: {{ draft }}\nCritique: {{ feedback }}\nBetter text:",
)


class Closing(FakeBackend):
    def __init__(self) -> None:
        super().__init__(default="A dog runs.")
        self.closed = 0

    async def aclose(self) -> None:
        self.closed += 1


def test_with_closes_the_backends_and_a_closed_engine_refuses_to_run():
    backend = Closing()
    with SelfRefine("commongen", backend, max_iterations=0) as engine:
        assert engine.run("dog, run").output == "A dog runs."
    assert backend.closed == 1
    with pytest.raises(SelfRefineError, match="engine is closed") as err:
        engine.run("dog, run")
    assert type(err.value).__name__ == "EngineClosedError" and "\n" not in str(err.value)
    assert len(backend.requests) == 1  # the refused run sent nothing
    engine.close()  # closing twice is harmless and closes nothing again
    assert backend.closed == 1


def test_with_closes_the_backends_when_the_block_raises():
    backend = Closing()
    with pytest.raises(KeyError), SelfRefine("commongen", backend) as engine:
        raise KeyError("user code failed")
    assert backend.closed == 1 and engine.closed


def test_async_with_closes_the_backends_and_a_closed_engine_refuses_to_stream():
    backend = Closing()

    async def go() -> None:
        async with SelfRefine("commongen", backend, max_iterations=0) as engine:
            assert (await engine.arun("dog, run")).output == "A dog runs."
        assert backend.closed == 1
        with pytest.raises(SelfRefineError, match="engine is closed"):
            await engine.arun("dog, run")

    asyncio.run(go())


def test_close_then_run_is_refused():
    engine = SelfRefine("commongen", FakeBackend(default="A dog runs."), max_iterations=0)
    engine.close()
    with pytest.raises(SelfRefineError, match="closed"):
        engine.run("dog, run")


def test_a_misspelt_option_names_the_valid_ones():
    with pytest.raises(ConfigError) as err:
        SelfRefine("commongen", FakeBackend(), max_iteratons=2)
    message = str(err.value)
    assert message.startswith("unknown option 'max_iteratons' (did you mean 'max_iterations'?); valid options: ")
    assert all(name in message for name in RefineConfig.model_fields) and "\n" not in message
    with pytest.raises(ConfigError, match="valid options: max_iterations"):
        SelfRefine("commongen", FakeBackend(), colour="red")


def test_the_keyword_options_are_typed_as_refine_configs_fields():
    from selfrefine.core.config import RunOptions

    assert list(RunOptions.__annotations__) == list(RefineConfig.model_fields)  # one spelling, one list
    assert inspect.signature(SelfRefine).parameters["options"].annotation == "Unpack[RunOptions]"
    hints = typing.get_type_hints(RunOptions)
    for name, field in RefineConfig.model_fields.items():  # and one type: the field's, as a keyword takes it
        assert _bare(hints[name]) == _bare(field.annotation) | _TAKEN_ALSO.get(name, set()), name


# a keyword may also give these as the field's validators take them (a list for the tuple of ways)
_TAKEN_ALSO = {"ways": {"list[str]"}}


def _bare(annotation: object) -> set[str]:
    """A type as the set of what it admits, validators (Annotated) left out: ``int | None`` is
    {'int', 'None'}, ``Literal['a', 'b']`` {"Literal['a', 'b']"}."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return set().union(*(_bare(a) for a in typing.get_args(annotation)))
    if typing.get_origin(annotation) is typing.Annotated:
        return _bare(typing.get_args(annotation)[0])
    if annotation is type(None):
        return {"None"}
    return {annotation.__name__ if isinstance(annotation, type) else repr(annotation).replace("typing.", "")}


def test_preset_best_on_a_task_without_a_measured_best_is_refused(tmp_path):
    task = Task("words", **TEMPLATES, verify=lambda input, draft: 1.0)
    with pytest.raises(ConfigError, match="task 'words' declares none; give the options yourself") as err:
        SelfRefine(task, FakeBackend(), preset="best")
    assert "\n" not in str(err.value)
    declared = Task("words", **TEMPLATES, verify=lambda input, draft: 1.0, best={"samples": 2})
    assert SelfRefine(declared, FakeBackend(), preset="best").config.samples == 2  # its own measured best
    assert SelfRefine("commongen", FakeBackend(), preset="best").config.samples == 4  # a built-in's, measured
    path = tmp_path / "words.yaml"
    path.write_text(json.dumps({"name": "words", **TEMPLATES, "judge": "Is it a good sentence?"}))  # no checks
    out = CliRunner().invoke(cli, ["run", str(path), "dog", "-m", "fake", "--preset", "best"])
    # the CLI says it in flags (tests/cli/test_new_user.py)
    assert out.exit_code == 2 and "--preset best" in out.output and "declares none" in out.output
    assert len(out.output.strip().splitlines()) == 1


def test_a_task_files_best_is_what_preset_best_sets(tmp_path):
    path = tmp_path / "words.yaml"
    spec = {"name": "words", **TEMPLATES, "checks": {"max_words": 5}, "best": {"samples": 3, "max_iterations": 0}}
    path.write_text(json.dumps(spec))
    engine = SelfRefine(str(path), FakeBackend(), preset="best")
    assert (engine.config.samples, engine.max_iterations) == (3, 0)
    path.write_text(json.dumps({**spec, "best": {"sample": 3}}))
    with pytest.raises(SelfRefineError, match=r"task file .*words.yaml: .*unknown run option\(s\) sample"):
        SelfRefine(str(path), FakeBackend())
