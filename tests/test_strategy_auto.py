"""The auto strategy's decisions, as pure functions: deeper, wider, shrink to the budget, stop."""

from selfrefine.engine.strategy import MAX_WIDTH, Costs, RoundOutcome, affordable_width, next_width, plan_round

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
