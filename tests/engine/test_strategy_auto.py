"""The auto strategy's decisions, as pure functions: deeper, wider, shrink to the budget, stop."""

from selfrefine.engine.strategy import (
    MAX_WIDTH,
    Costs,
    RoundOutcome,
    affordable_width,
    lead,
    next_wave,
    next_width,
    plan_round,
    settled,
)

COSTS = Costs(sample=300, critique=500)


def test_an_accepted_refinement_goes_deeper_at_the_same_width():
    assert next_width(2, RoundOutcome(accepted=True, echoed=False)) == 2


def test_echoes_and_rejections_widen_up_to_the_cap():
    assert next_width(2, RoundOutcome(accepted=False, echoed=True)) == 4
    assert next_width(4, RoundOutcome(accepted=False, echoed=False)) == 8
    assert next_width(MAX_WIDTH, RoundOutcome(accepted=False, echoed=False)) == MAX_WIDTH


def test_the_width_shrinks_to_what_the_budget_pays_for():
    assert affordable_width(4, remaining=1400, costs=COSTS) == 3  # 500 + 3 * 300 <= 1400
    assert affordable_width(4, remaining=700, costs=COSTS) == 0  # the critique and one sample do not fit
    width, why = plan_round(2, RoundOutcome(accepted=False, echoed=True), remaining=1200, costs=COSTS)
    assert width == 2 and why == "the refinements echoed their parent: wider; 2 of 4 samples fit in the budget left"


def test_a_budget_that_pays_for_nothing_stops():
    width, why = plan_round(2, RoundOutcome(accepted=True, echoed=False), remaining=600, costs=COSTS)
    assert width == 0 and "pays for no critique and sample" in why


def test_the_reasons_read_as_the_rule():
    assert (
        plan_round(2, RoundOutcome(True, False), 10_000, COSTS)[1]
        == "the last refinement was accepted: deeper at the same width"
    )
    assert plan_round(2, RoundOutcome(False, False), 10_000, COSTS)[1] == "no refinement scored higher: wider"


def test_votes_are_settled_by_a_lead_of_two():
    assert lead(["18", "18"]) == 2 and settled(["18", "18"])
    assert lead(["18", "12", "18"]) == 1 and not settled(["18", "12", "18"])
    assert settled(["18", "12", "18", "18"]) and not settled([None, None, "18"])


def test_the_next_wave_is_the_fewest_samples_that_could_settle_the_votes():
    assert next_wave(["18", "12"], have=2, remaining=10_000, costs=COSTS) == 2  # 1-1: two more
    assert next_wave(["18", "12", "18"], have=3, remaining=10_000, costs=COSTS) == 1  # 2-1: one more
    assert next_wave(["18", "18"], have=2, remaining=10_000, costs=COSTS) == 0  # settled
    assert next_wave(["1", "2", "3", "4", "5", "6", "7"], have=7, remaining=10_000, costs=COSTS) == 1  # to the cap
    assert next_wave(["1", "2", "3", "4", "5", "6", "7", "8"], have=MAX_WIDTH, remaining=10_000, costs=COSTS) == 0
    assert next_wave(["18", "12"], have=2, remaining=400, costs=COSTS) == 1  # what the budget pays for
