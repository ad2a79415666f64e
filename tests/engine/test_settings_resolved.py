"""The run's settings, resolved once (engine/settings.py): what the loop and the Caller read,
grouped by what reads them."""

import pytest

from selfrefine import Task
from selfrefine.core.config import RefineConfig
from selfrefine.core.errors import ConfigError
from selfrefine.engine.drafting.registry import find_strategy
from selfrefine.engine.settings import Settings
from selfrefine.task.plugins import find_task


def resolve(task, **options) -> Settings:
    task = task if isinstance(task, Task) else find_task(task)
    return Settings.resolve(RefineConfig.build(**options), task, find_strategy)


def test_task_defaults_fill_what_the_run_leaves_unset():
    s = resolve("gsm8k")
    defaults = find_task("gsm8k").declared.defaults
    assert s.requests.temperature == defaults.temperature and s.requests.max_tokens == defaults.max_tokens
    assert (s.sampling.strategy, s.sampling.samples, s.sampling.several) == ("fixed", 1, False)


def test_sampling_resolves_width_selection_votes_and_the_greedy_first_sample():
    s = resolve("gsm8k", samples=3)
    assert (s.sampling.samples, s.select, s.sampling.votes) == (3, "verified", True)
    assert s.sampling.greedy_first["generate"] is True  # gsm8k drafts greedily; its greedy draft is kept
    assert resolve("gsm8k", samples=3, temperature=0.5).sampling.greedy_first["generate"] is False


def test_auto_samples_several_and_needs_a_budget():
    s = resolve("commongen", strategy="auto", max_total_tokens=900)
    assert (s.sampling.strategy, s.sampling.several, s.calls.max_total_tokens) == ("auto", True, 900)
    with pytest.raises(ConfigError, match="budget"):
        resolve("commongen", strategy="auto")


def test_an_unknown_strategy_is_refused_with_the_registered_ones():
    with pytest.raises(
        ConfigError, match=r"unknown strategy 'atuo' \(did you mean 'auto'\?\); strategies: fixed, auto"
    ):
        resolve("commongen", strategy="atuo")


def test_the_judge_is_on_where_it_can_rank_and_never_on_votes():
    # one answer to "is the judge on" (JudgePolicy.on): asked for, the task has a judge, no votes
    assert resolve("commongen", samples=2).judge.on is True
    assert resolve("commongen", samples=2, judging=False).judge.on is False
    assert resolve("gsm8k", samples=3).judge.on is False  # tied votes share one answer
    assert resolve("gsm8k", samples=3).judge.available is True


def test_the_record_and_the_eval_meta_hold_the_resolved_values():
    s = resolve("commongen", preset="best")
    recorded = s.recorded()
    assert recorded["max_iterations"] == s.stops.max_iterations and recorded["select"] == s.select
    assert recorded["samples"] == s.sampling.samples == 4  # the preset's, as run
    assert s.run_config({}, {}).samples == 4
