"""The run's checks are resolved once per engine: answering whether code checks the drafts
(``verifies``, asked by the preset, the verifier mode and the fit checks) reads the options
without parsing the checks again (it parsed them 4 times per engine, 6 under preset best)."""

from __future__ import annotations

import pytest

import selfrefine.engine.run_checks as run_checks
from selfrefine import SelfRefine
from selfrefine.backends.fake import FakeBackend
from selfrefine.core.errors import ConfigError
from selfrefine.tasks import get_task

CHECKS = [{"type": "count", "unit": "words", "relation": "at most", "n": 40}, {"type": "regex", "pattern": "^A"}]


@pytest.fixture
def parses(monkeypatch):
    counted: list[int] = []
    real = run_checks.parse_checks

    def counting(data):  # the real parse, counted
        counted.append(len(data))
        return real(data)

    monkeypatch.setattr(run_checks, "parse_checks", counting)
    return counted


@pytest.mark.parametrize("options", [{}, {"preset": "best"}, {"derive_checks": False, "samples": 2}])
def test_the_runs_checks_are_parsed_once_per_engine(parses, options):
    engine = SelfRefine(get_task("chat"), FakeBackend({}), checks=CHECKS, **options)
    assert parses == [2]
    assert [c.type for c in engine.settings.checks.given] == ["count", "regex"]
    # still known to verify: the checks steer (under --preset best's focused repairs, alone)
    assert engine.settings.verifier_mode == ("verifier" if options.get("preset") else "hybrid")


def test_a_bad_check_is_still_refused_before_any_call(parses):
    with pytest.raises(ConfigError, match=r"invalid option checks: check 1 \(count\): n"):
        SelfRefine(
            get_task("chat"),
            FakeBackend({}),
            checks=[{"type": "count", "unit": "words", "relation": "at most", "n": -1}],
        )
    assert parses == [1]


def test_each_run_holds_the_engines_checks_and_states_them(parses):
    from selfrefine.engine.refinement import Refinement

    backend = FakeBackend({"generate": ["A short answer."]})
    engine = SelfRefine(get_task("chat"), backend, checks=CHECKS, derive_checks=False, max_iterations=0)
    runs = [Refinement(engine.task, engine.settings, engine.backends, text) for text in ("one", "two")]
    assert all(run.state.checks.policy is engine.settings.checks for run in runs)  # held, not copied
    assert all(run.state.checks.given is engine.settings.checks.given for run in runs)
    result = engine.run("Say something.")
    assert [c.source for c in result.checks] == ["given", "given"] and result.fails == []
    assert parses == [2]  # a run parses nothing: it holds what the engine parsed
    engine.run("Say more.")
    assert parses == [2]
