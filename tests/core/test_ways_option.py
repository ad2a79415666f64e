"""The ``ways`` run option (which of an answer task's ways to write a first draft its voted
samples are drawn from): one check in the library, the API's request options and the CLI
(core/config.py ``checked_ways``), and left out of the record of a run that does not set it."""

from __future__ import annotations

import pytest

from selfrefine.core.config import UNRECORDED_WHEN_UNSET, RefineConfig
from selfrefine.core.errors import ConfigError
from selfrefine.core.records import RunConfig
from selfrefine.service.schemas import LoopOptions

BAD = [
    ("program,steps", "a list of the task's ways, e.g. ['program', 'steps'], not the string 'program,steps'"),
    ([], "no way named: leave it unset for the task's default ways"),
    (["program", "two words"], "way 'two words' is not a name: letters, digits, '_' and '-', at most 32 characters"),
    ([""], "way '' is not a name"),
    (["w" * 33], f"way '{'w' * 33}' is not a name"),
    (["program", "steps", "program"], "way 'program' is named twice"),
    ([f"w{i}" for i in range(9)], "9 ways named; at most 8"),
    (["program", 3], "ways.1: Input should be a valid string"),
]


@pytest.mark.parametrize("ways", [["program"], ("program", "steps"), ["a-b_C9", "w" * 32], [f"w{i}" for i in range(8)]])
def test_a_list_of_way_names_is_kept_in_order_as_a_tuple(ways):
    assert RefineConfig(ways=ways).ways == tuple(ways)
    assert LoopOptions(ways=ways).ways == tuple(ways)  # the API's options take the same values


@pytest.mark.parametrize(("ways", "message"), BAD)
def test_a_bad_ways_is_one_error_naming_the_value(ways, message):
    with pytest.raises(ConfigError) as caught:
        RefineConfig.build(ways=ways)
    assert str(caught.value).startswith("invalid option ways"), caught.value
    assert message in str(caught.value) and "Value error" not in str(caught.value)
    with pytest.raises(ValueError, match="ways"):
        LoopOptions(ways=ways)  # the request option is checked by the same validators


def test_ways_unset_is_no_key_of_the_record_and_set_is_one():
    assert RefineConfig().ways is None
    # as before the option (and the other options added since: checks, derive_checks)
    assert set(RunConfig().model_dump()) == set(RunConfig.model_fields) - set(UNRECORDED_WHEN_UNSET)
    assert '"ways"' not in RunConfig().model_dump_json()
    recorded = RunConfig(ways=["program"], models={"generate": "fake"}).model_dump(mode="json")
    assert recorded["ways"] == ["program"]
    assert RunConfig.model_validate(recorded).ways == ("program",)  # a stored record loads back
    assert list(RunConfig(ways=["steps"]).model_dump()).index("ways") == list(RunConfig.model_fields).index("ways")
