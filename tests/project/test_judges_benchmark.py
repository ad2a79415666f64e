"""benchmarks/judges.py end to end on the fake model (scripted token probabilities), and the
shape of its hand-written sense pairs."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import ROOT

from selfrefine.tasks.commongen import concept_coverage

SCRIPT = ROOT / "benchmarks" / "judges.py"
PAIRS = ROOT / "benchmarks" / "data" / "sense_pairs.jsonl"
KINDS = {"objects_as_people", "swapped_roles", "impossible_event", "wrong_instrument", "subtle"}


def pairs() -> list[dict]:
    return [json.loads(line) for line in PAIRS.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_sense_pairs_share_their_concepts_and_differ():
    rows = pairs()
    assert len(rows) >= 40
    assert len({r["id"] for r in rows}) == len(rows)
    assert {r["kind"] for r in rows} == KINDS
    for r in rows:
        assert 3 <= len(r["concepts"]) <= 5, r["id"]
        assert r["sensible"] != r["nonsense"], r["id"]
        for side in ("sensible", "nonsense"):
            assert concept_coverage(r["concepts"], r[side]) == 1.0, (r["id"], side)


def scripted_replies(rows: list[dict]) -> dict:
    """The critic approves everything; the judge prefers each pair's sensible sentence, except
    in the first pair, whose comparison flips with the order (a tie)."""
    yes, no = {"Yes": -0.1, "No": -2.5}, {"Yes": -2.5, "No": -0.1}
    a, b = {"A": -0.1, "B": -2.5}, {"A": -2.5, "B": -0.1}
    table: dict[str, object] = {"Feedback:": '{"missing_concepts": [], "commonsense": "NONE"}'}
    for i, r in enumerate(rows):
        good_first, bad_first = (a, a) if i == 0 else (a, b)
        table[f"A: {r['sensible']}\nB:"] = {"text": "A", "top_logprobs": [good_first]}
        table[f"A: {r['nonsense']}\nB:"] = {"text": "B", "top_logprobs": [bad_first]}
    for r in rows:
        table[f"Sentence: {r['sensible']}"] = {"text": "Yes", "top_logprobs": [yes]}
        table[f"Sentence: {r['nonsense']}"] = {"text": "No", "top_logprobs": [no]}
    return {"table": table}


def test_sense_part_runs_end_to_end_on_the_fake_model(tmp_path):
    rows = pairs()[:6]
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps(scripted_replies(rows)), encoding="utf-8")
    out, doc = tmp_path / "rows", tmp_path / "judges.md"
    args = ["--part", "sense", "--model", f"fake:{replies}", "--data", str(data), "--out", str(out), "--doc", str(doc)]
    done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    critic = [json.loads(line) for line in (out / "sense.critic.jsonl").read_text().splitlines()]
    assert len(critic) == 6 and all(r["sensible"]["approved"] and r["nonsense"]["approved"] for r in critic)
    pointwise = [json.loads(line) for line in (out / "sense.pointwise.jsonl").read_text().splitlines()]
    assert all(r["sensible"]["score"] > 0.9 > 0.1 > r["nonsense"]["score"] for r in pointwise)
    assert all(r["sensible"]["how"] == "probabilities" for r in pointwise)
    pairwise = {r["key"]: r for r in map(json.loads, (out / "sense.pairwise.jsonl").read_text().splitlines())}
    assert pairwise[rows[0]["id"]]["score"] == 0.5  # the flipped verdict is a tie
    assert all(pairwise[r["id"]]["score"] > 0.9 for r in rows[1:])
    text = doc.read_text()
    # critic: approves all, so right on no pair; P(Yes): 6 of 6, AUC 1; compare: 5 of 6, one tie
    assert "| (i) today's critic (sampled `commonsense` verdict) | 6 | 1.000" in text
    assert "| 1.000 [1.000, 1.000] | 0 / – | 1.000 [1.000, 1.000] |" in text
    assert "| (iii) `compare`, both orders (flip = tie) | 6 | – | – | 0.833" in text
    # a rerun finds every item done and calls nothing
    again = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "sense " not in again.stderr
