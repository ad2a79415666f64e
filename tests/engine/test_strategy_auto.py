"""The auto strategy's decisions, as pure functions: deeper, wider, shrink to the budget, stop."""

from selfrefine.engine.drafting.auto_rule import (
    MAX_WIDTH,
    Costs,
    RoundOutcome,
    affordable_width,
    lead,
    next_draft_wave,
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


# --- width first (issue 31): the first draft's waves on a task the verifier scores --------

DRAFTS = Costs(sample=600, critique=500, draft=300)
ROUND = 500 + 2 * 600  # a critique and MIN_ROUND samples


def test_an_easy_input_stops_at_the_sample_that_satisfies_the_verifier():
    assert next_draft_wave([1.0], passed=True, remaining=10_000, costs=DRAFTS, round_cost=ROUND)[0] == 0
    assert (
        next_draft_wave([], passed=False, remaining=10_000, costs=DRAFTS, round_cost=ROUND)[0] == 0
    )  # nothing written


def test_spread_scores_widen_by_doubling_to_the_first_width():
    assert next_draft_wave([0.4], False, 10_000, DRAFTS, ROUND) == (1, "one first draft so far: 1 more")
    assert next_draft_wave([0.4, 0.6], False, 10_000, DRAFTS, ROUND) == (
        2,
        "the 2 first drafts score differently: 2 more",
    )
    # at FIRST_WIDTH drafts, a round that fits is next
    wave, why = next_draft_wave([0.4, 0.6, 0.5, 0.7], False, 10_000, DRAFTS, ROUND)
    assert wave == 0 and why == "4 first drafts, and a round fits in the budget left"


def test_width_goes_on_to_the_cap_while_no_round_fits():
    assert next_draft_wave([0.4, 0.6, 0.5, 0.7], False, ROUND - 1, DRAFTS, ROUND)[0] == 4
    assert next_draft_wave([0.1 * i for i in range(MAX_WIDTH)], False, 100_000, DRAFTS, 10**9)[0] == 0


def test_flat_scores_stop_widening_and_the_budget_shrinks_a_wave():
    wave, why = next_draft_wave([0.5, 0.5], False, 10_000, DRAFTS, ROUND)
    assert wave == 0 and why == "the 2 first drafts score alike: sampling does not explore this input"
    assert next_draft_wave([0.4, 0.6], False, 350, DRAFTS, ROUND)[0] == 1  # one more fits
    wave, why = next_draft_wave([0.4, 0.6], False, 250, DRAFTS, ROUND)
    assert wave == 0 and "pays for no more first drafts" in why


def test_auto_samples_width_first_on_the_fake_model():
    # coverage 1/3, 2/3, then 1/3, 2/3: spread, so 1 + 1 + 2 first drafts; the budget pays for a round
    from selfrefine import FakeBackend, SelfRefine

    fb = '{"missing_concepts": [], "commonsense": "odd"}'
    backend = FakeBackend(
        {"generate": ["A dog.", "A dog runs.", "A dog.", "A dog runs."], "refine": ["A dog runs in the park."] * 4},
        default=fb,
    )
    result = SelfRefine("commongen", backend, strategy="auto", max_total_tokens=100_000, max_iterations=1).run(
        "dog, run, park"
    )
    assert len(result.iterations[0].candidates) == 4
    roles = [r.role for r in backend.requests]
    assert roles[:4] == ["generate"] * 4 and roles.count("refine") == 4  # the round at the first width
    assert [r.seed for r in backend.requests[:4]] == [0, 1, 2, 3]  # the same samples as --samples 4
    assert result.output == "A dog runs in the park."
    # an easy input: the first sample covers every concept, and nothing more is asked
    backend = FakeBackend({"generate": ["A dog runs in the park."]}, default=fb)
    easy = SelfRefine("commongen", backend, strategy="auto", max_total_tokens=100_000).run("dog, run, park")
    assert [r.role for r in backend.requests] == ["generate"] and easy.stop_reason.value == "verified"


def test_samples_given_to_auto_cap_every_step():
    # the same spread drafts as above, with samples 2: auto says what it does with it (a cap)
    from selfrefine import FakeBackend, SelfRefine

    fb = '{"missing_concepts": [], "commonsense": "odd"}'
    backend = FakeBackend(
        {"generate": ["A dog.", "A dog runs.", "A dog.", "A dog runs."], "refine": ["A dog runs in the park."] * 4},
        default=fb,
    )
    result = SelfRefine(
        "commongen", backend, strategy="auto", samples=2, max_total_tokens=100_000, max_iterations=1
    ).run("dog, run, park")
    assert [len(it.candidates) for it in result.iterations] == [2, 2]  # 4 and 4 without the cap
    assert [r.role for r in backend.requests].count("generate") == 2
