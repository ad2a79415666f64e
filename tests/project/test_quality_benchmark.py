"""benchmarks/quality.py end to end: the fake model, a tiny dataset of every format, tmp paths.

The script's ``main(argv)`` runs in this process, as ``python benchmarks/quality.py ARGS``
would run it: its three runs (the first, the resume, the report alone) share the imports
and the loaded toxicity classifier, which three interpreters loaded three times."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import ROOT

from selfrefine.evaluation.report import run_table

SIZES = "gsm8k=2,commongen=2,sentiment=2,acronym=2,readability=1,codeopt=1,dialogue=1,toxicity=2,story=1,chat=2"


def write_data(folder: Path) -> Path:
    folder.mkdir()

    def jsonl(name: str, rows: list[dict]) -> None:
        (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")

    jsonl(
        "gsm8k.dev.jsonl",
        [
            {"input": "A pen costs 3 dollars. How much do 4 pens cost?", "target": 12},
            {"input": "Tom has 5 apples and eats 2. How many are left?", "target": 3},
        ],
    )
    jsonl(
        "commongen_hard.dev.jsonl", [{"concepts": ["dog", "frisbee", "catch"]}, {"concepts": ["sun", "beach", "towel"]}]
    )
    jsonl(
        "yelp_extreme.dev.jsonl",
        [
            {"review": "Awful food, rude staff.", "sentiment": "Very negative", "target_sentiment": "Very positive"},
            {
                "review": "Cold soup and a dirty table.",
                "sentiment": "Very negative",
                "target_sentiment": "Very positive",
            },
            {
                "review": "Wonderful service, great pasta!",
                "sentiment": "Very positive",
                "target_sentiment": "Very negative",
            },
            {
                "review": "Lovely place, friendly people.",
                "sentiment": "Very positive",
                "target_sentiment": "Very negative",
            },
        ],
    )
    (folder / "acronyms.dev.tsv").write_text(
        "Acronym\tTitle\nNASA\tNational Aeronautics and Space Administration\nAI\tArtificial Intelligence\n",
        encoding="utf-8",
    )
    jsonl(
        "pie_codenet_python.dev.jsonl",
        [{"input": "a = int(input())\nprint(a * 2)\n", "target": "print(int(input()) * 2)\n", "problem_id": "p00001"}],
    )
    (folder / "fed.dev.json").write_text(
        json.dumps([{"context": "User: Hi!\nSystem: Hello!\nUser: How are you?", "response": "System: Fine, thanks."}]),
        encoding="utf-8",
    )
    return folder


@pytest.fixture
def run(monkeypatch, capsys):
    """``run(*args)``: the script's main with these arguments, from the repository root;
    returns what it printed (a failure is its SystemExit, which fails the test)."""
    monkeypatch.chdir(ROOT)
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))  # as for a script: its folder first
    import quality

    def main(*args: str) -> str:
        capsys.readouterr()
        quality.main(list(args))
        return capsys.readouterr().out

    return main


def test_quality_benchmark_runs_every_task_and_mode_and_reports_the_run_folders(tmp_path: Path, run) -> None:
    data, runs, doc = write_data(tmp_path / "data"), tmp_path / "runs", tmp_path / "docs" / "quality.md"
    common = ["--out", str(runs), "--doc", str(doc)]
    common += ["--data-dir", str(data), "--cache", str(tmp_path / "c.sqlite")]
    first = run("--model", "fake", "--sizes", SIZES, *common)

    summary = json.loads((doc.parent / "quality_summary.json").read_text(encoding="utf-8"))
    planned = {
        (t, m)
        for t in (
            "gsm8k",
            "commongen",
            "sentiment",
            "acronym",
            "readability",
            "codeopt",
            "dialogue",
            "toxicity",
            "story",
            "chat",
        )
        for m in ("self", "hybrid+verified", "hybrid+not-worse", "not-worse+no-history")
    }
    planned |= {(t, m) for t in ("commongen", "sentiment") for m in ("generic", "none")}
    planned -= {
        (t, m) for t in ("dialogue", "chat") for m in ("hybrid+verified", "hybrid+not-worse", "not-worse+no-history")
    }  # no verifier
    got = {(r["task"], r["mode"]) for r in summary["runs"]}
    lines = [line.split() for line in first.splitlines() if line.startswith("[")]  # one line per planned run
    skipped = {(w[1], w[2].rstrip(":")) for w in lines if w[3] == "skipped:"}
    assert len(lines) == len(planned) and len(got) + len(skipped) == len(planned)
    assert got | skipped == planned and got >= {(t, "self") for t, _ in planned}  # hybrid+verified: if select validates

    text = doc.read_text(encoding="utf-8")
    assert (doc.parent / "quality_iterations.png").read_bytes()[:4] == b"\x89PNG"
    assert "rows 0-0 (to positive) and 2-2 (to negative)" in text
    for entry in summary["runs"]:
        r = run_table(runs / entry["folder"])  # the doc's numbers are the run folder's
        assert (entry["n"], entry["failed"]) == (r.n, r.failed)
        assert r.n == {"readability": 1, "codeopt": 1, "dialogue": 1, "story": 1}.get(r.task, 2)
        if r.task == "dialogue":
            assert entry["judge"]["n"] == r.judge_preference.n == 1
            assert f"| {entry['mode']} | {r.n} | {r.failed} | win {r.judge_preference.win:.2f}" in text
        else:
            assert entry["one_step"] == round(r.baseline, 4) and entry["returned"] == round(r.final, 4)
            numbers = f"{r.baseline:.3f} | {r.final:.3f} | {r.delta.estimate:+.3f} | [{r.delta.low:+.3f}, {r.delta.high:+.3f}]"
            assert f"| {entry['mode']} | {r.n} | {r.failed} | {numbers} |" in text

    # the graded sentiment metric and toxicity's two parts, next to the binary/combined metric
    for task, keys in (
        ("sentiment", {"reached", "toward_target", "very"}),
        ("toxicity", {"non_toxic", "p_toxic", "preservation", "combined"}),
    ):
        entries = [e for e in summary["runs"] if e["task"] == task]
        assert entries and all(set(e["parts"]) == keys for e in entries)
        assert "| mode | n scored | " + " | ".join(entries[0]["parts"]) + " |" in text.split(f"### {task}:")[1]
    assert [e["judge"]["n"] for e in summary["runs"] if e["task"] == "story"] == [1] * 4  # judged and scored

    rows_before = {p.parent.name: p.read_text() for p in runs.glob("*/results.jsonl")}
    run("--model", "fake", "--sizes", SIZES, *common)
    assert {
        p.parent.name: p.read_text() for p in runs.glob("*/results.jsonl")
    } == rows_before  # resumed, nothing redone
    doc.unlink()
    run("--report-only", *common)
    assert doc.read_text(encoding="utf-8").split("## Overview")[1] == text.split("## Overview")[1]
