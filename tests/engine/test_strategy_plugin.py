"""A strategy is a registered part: a third party's, in one module of its own package, is
found by name through the ``selfrefine.strategies`` entry points and runs through the same
loop, without a change to the engine (engine/drafting/registry.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from selfrefine import FakeBackend, SelfRefine, Task
from selfrefine.core.errors import ConfigError

# One module, as a plugin package would ship it: a drafter that writes two drafts a step,
# keeps the longer one, and stops the run once a draft has five words or more.
PLUGIN = """
from selfrefine.core.records import Iteration, StopReason
from selfrefine.engine.drafting.base import Acceptance, Drafted, Drafter, Strategy
from selfrefine.engine.stopping import Stop


class Longer(Drafter):
    async def _two(self, run, role, index, prompt):
        made = [await run.draft(role, index, prompt + f" (take {k})") for k in (1, 2)]
        draft, call = max(made, key=lambda m: len(m[0].split()))
        return Drafted(Iteration(index=index, draft=draft, finish_reason=call.finish_reason), call)

    async def first(self, run, prompt):
        return await self._two(run, "generate", 0, prompt)

    async def refinement(self, run, index, prompt):
        return await self._two(run, "refine", index, prompt)

    async def accept(self, run, parent, new):
        return Acceptance() if len(new.draft.split()) > len(parent.draft.split()) else Acceptance(rejected="shorter")

    def before_round(self, run, t):
        if len(run.state.iterations[t].draft.split()) >= 5:
            return Stop(StopReason.VERIFIED, "five words: long enough")
        return None


class LongerStrategy(Strategy):
    name = "longer"
    summary = "two drafts a step, the longer kept"

    def drafter(self, settings):
        return Longer()
"""


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch) -> None:
    """The module and its entry point, installed as a distribution on sys.path."""
    (tmp_path / "sr_strategy_plugin.py").write_text(PLUGIN)
    info = tmp_path / "sr_strategy_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: sr-strategy-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[selfrefine.strategies]\nlonger = sr_strategy_plugin:LongerStrategy\n")
    monkeypatch.syspath_prepend(str(tmp_path))


def words_task() -> Task:
    return Task(
        "words", generate="Write about {{ input }}.", feedback="Critique: {{ draft }}", refine="Better: {{ draft }}"
    )


def test_a_strategy_from_another_package_runs_by_its_name(plugin):
    model = FakeBackend(
        {"generate": ["a dog", "a big dog"], "feedback": ["more"], "refine": ["a big dog runs far", "a dog runs"]}
    )
    result = SelfRefine(words_task(), model, strategy="longer", max_iterations=3).run("dogs")
    assert [it.draft for it in result.iterations] == ["a big dog", "a big dog runs far"]
    assert (result.stop_reason, result.output, result.config.strategy) == ("verified", "a big dog runs far", "longer")
    assert [r.prompt[-8:] for r in model.requests if r.role == "generate"] == ["(take 1)", "(take 2)"]


def test_the_cli_offers_a_registered_strategy(plugin):
    from click.testing import CliRunner

    from selfrefine.cli.commands import cli

    out = CliRunner().invoke(cli, ["run", "--help"])
    assert "longer" in out.output  # --strategy's choices are the registered strategies


def test_an_unregistered_strategy_names_the_registered_ones(plugin):
    with pytest.raises(
        ConfigError,
        match=r"unknown strategy 'longr' \(did you mean 'longer'\?\); strategies: fixed, auto, sequential, longer",
    ):
        SelfRefine(words_task(), FakeBackend(), strategy="longr")
