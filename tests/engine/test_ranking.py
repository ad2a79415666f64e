"""The one ranking rule (engine/scoring/ranking.py) and the selections built on it."""

from selfrefine.core.records import Feedback, Iteration, Verification
from selfrefine.engine.scoring.ranking import best, best_of_tie, earns_place, rank, score, ties, worse
from selfrefine.engine.scoring.selection import select_index


def check(s):
    return Verification(text="", score=s) if s is not None else None


def test_a_missing_score_ranks_lowest_everywhere():
    assert score(None) < score(check(0.0))
    assert worse(None, check(0.1)) and not worse(check(0.1), None) and not worse(None, None)
    assert earns_place(check(0.0), None, None, None)  # any score beats none


def test_rank_orders_by_verifier_then_critic_done_then_critic_score():
    done = Feedback(text="", done=True, total=1.0)
    high = Feedback(text="", done=False, total=9.0)
    assert rank(check(0.5), None) > rank(None, done)
    assert rank(check(0.5), done) > rank(check(0.5), high) > rank(check(0.5), None)


def test_ties_go_to_the_earlier_sample_and_the_critic_breaks_them():
    checks = [check(s) for s in (0.5, 1.0, 1.0)]
    assert best(checks) == 1 and ties(checks) == [1, 2]
    assert best_of_tie(checks, [None, None, Feedback(text="", done=True)], [1, 2]) == 2


def test_a_tie_keeps_the_parent_unless_the_critic_finds_only_the_refinement_done():
    done = Feedback(text="", done=True)
    assert not earns_place(check(0.5), None, check(0.5), None)
    assert earns_place(check(0.5), done, check(0.5), None)
    assert not earns_place(check(0.5), done, check(0.5), done)  # the parent was done too


def test_the_returned_draft_follows_the_same_rank():
    its = [
        Iteration(index=0, draft="a", verification=check(0.5), feedback=Feedback(text="", total=1.0)),
        Iteration(index=1, draft="b", verification=check(0.5), feedback=Feedback(text="", total=3.0)),
        Iteration(index=2, draft="c", verification=None, feedback=Feedback(text="", done=True)),
    ]
    assert select_index(its, "verified") == 1
    its[1].accepted = False
    assert select_index(its, "verified") == 0
