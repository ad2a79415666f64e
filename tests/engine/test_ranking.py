"""The one ranking rule (engine/ranking.py) and the selections built on it."""

from selfrefine.core.records import Candidate, Feedback, Iteration, Verification
from selfrefine.engine.ranking import best, best_of_tie, earns_place, rank, score, ties, worse
from selfrefine.engine.selection import select_index


def check(s):
    return Verification(text="", score=s) if s is not None else None


def test_a_missing_score_ranks_lowest_everywhere():
    assert score(None) < score(check(0.0))
    assert worse(None, check(0.1)) and not worse(check(0.1), None) and not worse(None, None)
    parent = Iteration(index=0, draft="p", verification=None)
    assert earns_place(check(0.0), None, parent)  # any score beats none


def test_rank_orders_by_verifier_then_critic_done_then_critic_score():
    done = Feedback(text="", done=True, total=1.0)
    high = Feedback(text="", done=False, total=9.0)
    assert rank(check(0.5), None) > rank(None, done)
    assert rank(check(0.5), done) > rank(check(0.5), high) > rank(check(0.5), None)


def test_ties_go_to_the_earlier_sample_and_the_critic_breaks_them():
    cands = [Candidate(draft=d, verification=check(s)) for d, s in (("a", 0.5), ("b", 1.0), ("c", 1.0))]
    assert best(cands) == 1 and ties(cands) == [1, 2]
    cands[2].feedback = Feedback(text="", done=True)
    assert best_of_tie(cands, [1, 2]) == 2


def test_a_tie_keeps_the_parent_unless_the_critic_finds_only_the_refinement_done():
    parent = Iteration(index=0, draft="p", verification=check(0.5))
    assert not earns_place(check(0.5), None, parent)
    assert earns_place(check(0.5), Feedback(text="", done=True), parent)
    parent.feedback = Feedback(text="", done=True)
    assert not earns_place(check(0.5), Feedback(text="", done=True), parent)


def test_the_returned_draft_follows_the_same_rank():
    its = [
        Iteration(index=0, draft="a", verification=check(0.5), feedback=Feedback(text="", total=1.0)),
        Iteration(index=1, draft="b", verification=check(0.5), feedback=Feedback(text="", total=3.0)),
        Iteration(index=2, draft="c", verification=None, feedback=Feedback(text="", done=True)),
    ]
    assert select_index(its, "verified") == 1
    its[1].accepted = False
    assert select_index(its, "verified") == 0
