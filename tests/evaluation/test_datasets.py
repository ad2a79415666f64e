"""Dataset loaders: every reference format from tiny inline fixtures, clear errors, the hub."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from selfrefine import InputError
from selfrefine.evaluation.datasets import Example, load_examples, load_hub

# the development files beside the checkout (../shared/datasets), as the benchmarks find them
SHARED = ROOT.parent / "shared" / "datasets"


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def jsonl(*rows: dict) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


# --- each format --------------------------------------------------------------------------


def test_gsm8k(tmp_path):
    path = write(tmp_path, "g.jsonl", jsonl({"input": "2+2?", "target": 4}, {"input": "3*3?", "target": 9.0}) + "\n")
    rows = load_examples("gsm8k", path)
    assert rows == [
        Example(id="gsm8k-0", input="2+2?", reference=4),
        Example(id="gsm8k-1", input="3*3?", reference=9.0),
    ]


def test_commongen_joins_concepts(tmp_path):
    path = write(tmp_path, "c.jsonl", jsonl({"concepts": ["dog", "frisbee", "catch"]}))
    (row,) = load_examples("commongen", path)
    assert row.input == "dog, frisbee, catch" and row.reference is None


def test_acronym_tsv(tmp_path):
    text = "Acronym\tTitle\nGAN\tGenerative Adversarial Networks\n\nSTAR\tScalable Tree Boosting\n"
    path = write(tmp_path, "a.tsv", text)
    rows = load_examples("acronym", path)
    assert [(r.input, r.reference) for r in rows] == [
        ("Generative Adversarial Networks", "GAN"),
        ("Scalable Tree Boosting", "STAR"),
    ]


def test_yelp_becomes_the_sentiment_input_shape(tmp_path):
    rows = [
        {"review": "Awful food.", "sentiment": "Very negative", "target_sentiment": "Very positive"},
        {"review": "Great staff!", "sentiment": "Very positive", "target_sentiment": "Very negative"},
    ]
    first, second = load_examples("sentiment", write(tmp_path, "y.jsonl", jsonl(*rows)))
    assert json.loads(first.input) == {"review": "Awful food.", "target": "positive"}
    assert first.reference == "positive" and second.reference == "negative"
    assert first.meta["sentiment"] == "Very negative"


def test_fed_json_array(tmp_path):
    data = [
        {
            "context": "User: Hi!\nSystem: Hello.\nUser: Any plans?",
            "response": "System: A walk.",
            "annotations": {"Fluent": [3]},
        },
        {"context": "User: Hi!\nSystem: Hey.", "annotations": {}},  # dialogue-level item: no response
    ]
    turn, dialogue = load_examples("dialogue", write(tmp_path, "f.json", json.dumps(data, indent=1)))
    assert turn.input.count("\n") == 2 and turn.reference == "System: A walk."
    assert turn.meta["annotations"] == {"Fluent": [3]}
    assert dialogue.reference is None


def test_pie_rows_for_codeopt_and_readability(tmp_path):
    row = {
        "input": "print(sum(range(10)))",
        "target": "print(45)",
        "problem_id": "p00001",
        "cpu_time_v0": "30",
        "code_v0_loc": "1",
    }
    path = write(tmp_path, "p.jsonl", jsonl(row))
    (opt,) = load_examples("codeopt", path)
    assert opt.input == row["input"] and opt.reference is None
    assert opt.meta == {"problem_id": "p00001", "target": "print(45)", "cpu_time_v0": "30"}
    (read,) = load_examples("readability", path)
    assert read.input == row["input"] and read.meta == {"problem_id": "p00001"}


def test_unknown_task_reads_generic_jsonl(tmp_path):
    path = write(tmp_path, "t.jsonl", jsonl({"id": "a", "input": "x", "reference": "y", "lang": "en"}, {"input": "z"}))
    first, second = load_examples("haiku", path)
    assert (first.id, first.reference, first.meta) == ("a", "y", {"lang": "en"})
    assert (second.id, second.reference) == ("haiku-1", None)


def test_limit(tmp_path):
    path = write(tmp_path, "g.jsonl", jsonl(*({"input": f"q{i}", "target": i} for i in range(5))) + "{broken\n")
    assert [r.input for r in load_examples("gsm8k", path, limit=2)] == ["q0", "q1"]  # the bad line is not read
    assert load_examples("gsm8k", path, limit=0) == []
    with pytest.raises(InputError, match="limit"):
        load_examples("gsm8k", path, limit=-1)


# --- errors name the file and line ------------------------------------------------------


def test_missing_file(tmp_path):
    with pytest.raises(InputError, match="not found"):
        load_examples("gsm8k", tmp_path / "nope.jsonl")
    with pytest.raises(InputError, match="not a file"):
        load_examples("gsm8k", tmp_path)


def test_bad_json_names_line(tmp_path):
    path = write(tmp_path, "g.jsonl", jsonl({"input": "q", "target": 1}) + '{"input": "q2", \n')
    with pytest.raises(InputError, match=r"g\.jsonl: line 2: bad JSON"):
        load_examples("gsm8k", path)
    with pytest.raises(InputError, match="line 1: expected a JSON object"):
        load_examples("gsm8k", write(tmp_path, "l.jsonl", "[1, 2]\n"))


@pytest.mark.parametrize(
    "task, row, message",
    [
        ("gsm8k", {"input": "q"}, "line 2: missing field 'target'"),
        ("gsm8k", {"input": "", "target": 1}, "line 2: field 'input' must be a non-empty string"),
        ("commongen", {"concepts": "dog, cat"}, "line 2: field 'concepts' must be a non-empty list"),
        ("commongen", {"concepts": ["dog", 3]}, "list of non-empty strings"),
        ("sentiment", {"review": "ok"}, "line 2: missing field 'target_sentiment'"),
        ("sentiment", {"review": "ok", "target_sentiment": "neutral"}, "positive or negative"),
        ("codeopt", {"input": "x", "problem_id": "p1"}, "missing field 'target'"),
        ("readability", {"target": "x", "problem_id": "p1"}, "missing field 'input'"),
    ],
)
def test_missing_field_names_line(tmp_path, task, row, message):
    good = {
        "gsm8k": {"input": "q", "target": 1},
        "commongen": {"concepts": ["a"]},
        "sentiment": {"review": "r", "target_sentiment": "Very positive"},
        "codeopt": {"input": "x", "target": "y", "problem_id": "p0"},
        "readability": {"input": "x", "problem_id": "p0"},
    }[task]
    path = write(tmp_path, "d.jsonl", jsonl(good, row))
    with pytest.raises(InputError, match=message):
        load_examples(task, path)


def test_fed_errors(tmp_path):
    with pytest.raises(InputError, match="line 3: bad JSON"):
        load_examples("dialogue", write(tmp_path, "a.json", '[\n{"context": "x"},\n{"context": }\n]'))
    with pytest.raises(InputError, match="expected a JSON array"):
        load_examples("dialogue", write(tmp_path, "b.json", '{"context": "x"}'))
    with pytest.raises(InputError, match="item 1: missing field 'context'"):
        load_examples("dialogue", write(tmp_path, "c.json", '[{"context": "x"}, {"response": "y"}]'))


def test_tsv_errors(tmp_path):
    with pytest.raises(InputError, match="line 1: the header lacks column"):
        load_examples("acronym", write(tmp_path, "a.tsv", "Short\tTitle\nGAN\tGenerative\n"))
    with pytest.raises(InputError, match="line 3: expected 2 tab-separated fields, got 1"):
        load_examples("acronym", write(tmp_path, "b.tsv", "Acronym\tTitle\nGAN\tGenerative\nJUSTONE\n"))
    with pytest.raises(InputError, match="empty"):
        load_examples("acronym", write(tmp_path, "c.tsv", ""))


# --- the hub: only the clear-message paths, never the network -----------------------------


def test_hub_without_the_datasets_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)  # makes `import datasets` fail
    with pytest.raises(InputError, match="needs the `datasets` package.*network access"):
        load_hub("gsm8k")


def test_hub_offline(monkeypatch):
    class OfflineStub:  # what `datasets` does offline without a cached copy
        @staticmethod
        def load_dataset(*args, **kwargs):
            raise ConnectionError("Couldn't reach the Hugging Face Hub (offline mode is enabled)")

    monkeypatch.setitem(sys.modules, "datasets", OfflineStub)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(InputError, match="needs network access.*HF_HUB_OFFLINE"):
        load_hub("gsm8k")
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    with pytest.raises(InputError, match="cannot load 'openai/gsm8k'"):
        load_hub("gsm8k")


def test_hub_converts_rows_with_a_stub_package(monkeypatch):
    class Stub:
        @staticmethod
        def load_dataset(path, config, split):
            assert (path, config, split) == ("openai/gsm8k", "main", "test")
            return [{"question": "1+1?", "answer": "1+1=2\n#### 2"}, {"question": "q", "answer": "#### 1,000"}]

    monkeypatch.setitem(sys.modules, "datasets", Stub)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    rows = load_hub("gsm8k")
    assert [(r.input, r.reference) for r in rows] == [("1+1?", "2"), ("q", "1000")]


# --- the real development files (when this machine has them) --------------------------------


@pytest.mark.skipif(not SHARED.is_dir(), reason=f"no development datasets at {SHARED}")
@pytest.mark.parametrize(
    "task, name, count",
    [
        ("gsm8k", "gsm8k.dev.jsonl", 300),
        ("commongen", "commongen_hard.dev.jsonl", 100),
        ("acronym", "acronyms.dev.tsv", 125),
        ("sentiment", "yelp_extreme.dev.jsonl", 200),
        ("dialogue", "fed.dev.json", 250),
        ("codeopt", "pie_codenet_python.dev.jsonl", 300),
        ("readability", "pie_codenet_python.dev.jsonl", 300),
    ],
)
def test_real_files_load_with_readme_row_counts(task, name, count):
    rows = load_examples(task, SHARED / name)
    assert len(rows) == count
    assert all(r.input.strip() for r in rows)
    assert len({r.id for r in rows}) == count
    if task == "sentiment":  # first 100 to positive, last 100 to negative (README)
        assert {r.reference for r in rows[:100]} == {"positive"} and {r.reference for r in rows[100:]} == {"negative"}
