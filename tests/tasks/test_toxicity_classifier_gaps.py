"""What the toxicity metric misses (issue 29, "Also"): alt-profanity-check scores insults in
ordinary words as clean. The README and docs/quality.md say so with the numbers measured on
benchmarks/data/insults.jsonl; these tests fail when the gap closes (a better classifier: then
update the paragraphs) or when the paragraphs or their numbers drift from the measurement."""

from __future__ import annotations

import sys

import pytest
from conftest import ROOT

from selfrefine.tasks.toxicity import THRESHOLD, p_toxic, toxicity

sys.path.insert(0, str(ROOT / "benchmarks"))
import toxicity_classifiers as bench  # noqa: E402

ISSUE_EXAMPLE = "This update is subpar, your code is a joke, and I don't want anything from your repo."
SWEAR_FREE_INSULTS = [
    ISSUE_EXAMPLE,
    "You have the intelligence of a houseplant.",
    "You're a parasite who takes credit for other people's work.",
    "Your documentation reads like it was written by a confused toddler.",
]


def flat(path) -> str:
    return " ".join(path.read_text("utf-8").split())


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    return bench.load()


def test_the_labelled_set_has_the_kinds_the_benchmark_reads(rows):
    assert len(rows) >= 60
    kinds = {bench.INSULT: 0, bench.SWEAR: 0, bench.NEUTRAL: 0, bench.CIVIL: 0}
    for row in rows:
        kinds[row["kind"]] += 1  # an unknown kind is a KeyError
        assert row["toxic"] == (row["kind"] in (bench.INSULT, bench.SWEAR)), row
    assert kinds[bench.INSULT] >= 20 and kinds[bench.SWEAR] >= 15 and kinds[bench.CIVIL] >= 10
    assert set(SWEAR_FREE_INSULTS) <= {r["text"] for r in rows if r["kind"] == bench.INSULT}


def test_the_metric_scores_swear_free_insults_as_clean_and_swearing_as_toxic():
    for text in SWEAR_FREE_INSULTS:
        assert p_toxic(text) < THRESHOLD, text
    assert p_toxic("Shut the fuck up about tabs versus spaces.") >= THRESHOLD


def test_the_readme_and_docs_state_the_measured_gap(rows):
    scores = toxicity([r["text"] for r in rows])
    measured = bench.measure(rows, scores, seconds=0.0)
    caught, total = measured["insults"].split("/")
    swear, swear_total = measured["swear"].split("/")
    readme, quality = flat(ROOT / "README.md"), flat(ROOT / "docs" / "quality.md")
    assert "What the toxicity metric misses" in readme
    assert f"p_toxic {p_toxic(ISSUE_EXAMPLE):.2f}" in readme
    assert (
        f"it flags {caught} of {total} swear-free insults, {swear} of {swear_total} sentences with swear words"
        in readme
    )
    assert f"accuracy {measured['accuracy']:.2f}" in readme
    assert f"{caught} of {total} swear-free insults flagged" in quality
    assert f"| alt-profanity-check 1.9.1 (today; 0.8 MB wheel, MIT, scikit-learn) | yes | {caught}/{total} |" in quality
    assert f"AUC {measured['auc']}, {measured['auc_insults']} for swear-free insults" in quality
