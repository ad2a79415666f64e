"""The run's settings, resolved once (engine/settings.py): what the loop and the Caller read."""

import pytest

from selfrefine import Task
from selfrefine.core.config import RefineConfig
from selfrefine.core.errors import ConfigError
from selfrefine.engine.plugins import find_task
from selfrefine.engine.settings import Settings
from selfrefine.engine.strategy import START_WIDTH


def resolve(task, **options) -> Settings:
    return Settings.resolve(RefineConfig.build(**options), task if isinstance(task, Task) else find_task(task))


def test_task_defaults_fill_what_the_run_leaves_unset():
    s = resolve("gsm8k")
    task = find_task("gsm8k")
    assert s.temperature == task.temperature and s.max_tokens == task.max_tokens
    assert (s.samples, s.auto, s.several_samples) == (1, False, False)


def test_sampling_resolves_width_selection_votes_and_the_greedy_first_sample():
    s = resolve("gsm8k", samples=3)
    assert (s.samples, s.select, s.votes, s.verify_every_draft) == (3, "verified", True, True)
    assert s.greedy_first["generate"] is True  # gsm8k drafts greedily; its greedy draft is kept
    assert resolve("gsm8k", samples=3, temperature=0.5).greedy_first["generate"] is False


def test_auto_starts_at_its_width_and_needs_a_budget():
    s = resolve("commongen", strategy="auto", max_total_tokens=900)
    assert (s.auto, s.samples, s.calls.max_total_tokens) == (True, START_WIDTH, 900)
    with pytest.raises(ConfigError, match="budget"):
        resolve("commongen", strategy="auto")


def test_the_record_and_the_eval_meta_hold_the_resolved_values():
    s = resolve("commongen", preset="best")
    recorded = s.recorded()
    assert recorded["max_iterations"] == s.max_iterations and recorded["select"] == s.select
    assert recorded["samples"] == s.samples == 4  # the preset's, as run
    assert s.run_config({}, {}).samples == 4
