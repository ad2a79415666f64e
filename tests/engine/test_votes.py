"""Votes as a verifier: shares, findings in words, the majority; the reference never enters."""

from selfrefine.core.records import Verification
from selfrefine.engine.scoring.votes import disagreement, majority_answer, tally, with_vote

RAN = Verification(text="# Running solution() returned 18", passed=True, score=1.0)
CRASHED = Verification(text="# Running solution() failed: ZeroDivisionError", passed=False, score=0.0)


def test_the_findings_name_the_disagreement():
    counts = tally(["18", "12", "18", "18", None, "18", "12"])
    assert disagreement(counts, 7) == "4 samples return 18, 2 samples return 12, 1 gives no answer"
    assert disagreement(tally(["3"]), 1) == "1 sample returns 3"
    assert disagreement(tally(["3", "3"]), 2) == "all 2 samples return 3"
    assert disagreement(tally([None, None]), 2) == "none of the 2 samples returns an answer"


def test_a_candidate_scores_its_answers_share_and_passes_on_a_strict_majority():
    counts = tally(["18", "18", "12", "18"])
    top = with_vote(RAN, "18", counts, 4)
    assert (top.score, top.passed, top.answer) == (0.75, True, "18")
    assert top.text == "# Running solution() returned 18\n# Votes: 3 samples return 18, 1 sample returns 12"
    low = with_vote(RAN, "12", counts, 4)
    assert (low.score, low.passed) == (0.25, False)
    half = with_vote(RAN, "18", tally(["18", "12"]), 2)  # 1 of 2 is no majority
    assert (half.score, half.passed) == (0.5, False)


def test_a_candidate_whose_program_failed_gets_no_vote():
    vote = with_vote(CRASHED, None, tally(["18", None]), 2)
    assert (vote.score, vote.passed) == (0.0, False)
    assert vote.text.startswith("# Running solution() failed")


def test_the_majority_answer_and_its_tie_rule():
    assert majority_answer(tally(["12", "18", "18"])) == "18"
    assert majority_answer(tally(["12", "18"])) == "12"  # a tie: the answer seen first
    assert majority_answer(tally([None])) is None
