"""Offline toxicity classifiers on swear-free insults (issue 29, "Also": the toxicity metric).

    .venv/bin/python benchmarks/toxicity_classifiers.py                  # the project's venv
    /tmp/tox/bin/python benchmarks/toxicity_classifiers.py --per-sentence  # a scratch venv with candidates

Reads ``benchmarks/data/insults.jsonl`` (written and labelled by hand for this benchmark:
``{"text", "toxic", "kind"}``, kind one of "swear-free insult", "swear", "neutral",
"harsh but civil criticism") and scores every sentence with each candidate whose weights or
rules ship inside its PyPI package (nothing fetched at run time). Per candidate: accuracy at
score >= 0.5, recall on swear-free insults and on sentences with swear words, false positives
on civil criticism and on neutral sentences, the AUC (toxic vs clean; and swear-free insults
vs clean) where the score is graded, and milliseconds per sentence on this CPU. A candidate
that is not installed, or fails to load, is reported as such, so the script runs with only
today's classifier (alt-profanity-check, the task's ``p_toxic``).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import time
import warnings
from collections.abc import Callable
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data" / "insults.jsonl"
INSULT, SWEAR, NEUTRAL, CIVIL = "swear-free insult", "swear", "neutral", "harsh but civil criticism"
Scorer = Callable[[list[str]], list[float]]


def _dist(module: str) -> str:
    """Which installed distribution (and version) provides a top-level module."""
    names = importlib.metadata.packages_distributions().get(module, ["?"])
    return ", ".join(f"{n} {importlib.metadata.version(n)}" for n in names)


def profanity_check() -> tuple[Scorer, str]:
    from profanity_check import predict_prob

    return (lambda texts: [float(p) for p in predict_prob(texts)]), _dist("profanity_check")


def toxic_comment_classifier() -> tuple[Scorer, str]:
    from toxic_classifier import ToxicCommentClassifier

    model = ToxicCommentClassifier()
    return (lambda texts: [model.classify(t)["toxic"] for t in texts]), _dist("toxic_classifier") + ", 'toxic' head"


def tox_block() -> tuple[Scorer, str]:
    from tox_block.prediction import make_predictions

    def score(texts: list[str]) -> list[float]:
        return [row["toxic"] for row in make_predictions(texts).values()]

    return score, _dist("tox_block")


def hatesonar() -> tuple[Scorer, str]:
    import numpy as np
    import onnxruntime as ort
    from hatesonar.api import DEFAULT_MODEL_FILE

    ort.set_default_logger_severity(4)  # its own error log for the locale fallback below
    try:
        session = ort.InferenceSession(str(DEFAULT_MODEL_FILE), providers=["CPUExecutionProvider"])
        note = ""
    except Exception:  # its StringNormalizer wants the en_US.UTF-8 locale: give it C.UTF-8
        import onnx

        model = onnx.load(str(DEFAULT_MODEL_FILE))
        for node in model.graph.node:
            if node.op_type == "StringNormalizer":
                node.attribute.append(onnx.helper.make_attribute("locale", "C.UTF-8"))
        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        note = ", locale patched to C.UTF-8"

    def score(texts: list[str]) -> list[float]:
        return [1.0 - session.run(None, {"text": np.array([t], dtype=object)})[1][0][2] for t in texts]

    return score, _dist("hatesonar") + ", 1 - P(neither)" + note


def cuss_inspect() -> tuple[Scorer, str]:
    import cuss_inspect as ci

    ci.predict_prob(["probe"])
    return (lambda texts: [float(p) for p in ci.predict_prob(texts)]), _dist("cuss_inspect")


def best_profanity() -> tuple[Scorer, str]:
    from best_profanity import predict_prob

    return (lambda texts: [float(p) for p in predict_prob(texts)[0]]), _dist("best_profanity") + ", English model"


def valx() -> tuple[Scorer, str]:
    from valx import detect_hate_speech

    def score(texts: list[str]) -> list[float]:
        return [float(detect_hate_speech(t)[0] != "No Hate and Offensive Speech") for t in texts]

    return score, _dist("valx") + ", yes/no"


def safetype() -> tuple[Scorer, str]:
    from safetype import moderate

    def score(texts: list[str]) -> list[float]:
        return [max((m.confidence for m in moderate(t).matches), default=0.0) for t in texts]

    return score, _dist("safetype") + ", rules; max match confidence"


def better_profanity() -> tuple[Scorer, str]:
    from better_profanity import profanity

    profanity.load_censor_words()
    return (lambda texts: [float(profanity.contains_profanity(t)) for t in texts]), _dist(
        "better_profanity"
    ) + ", word list"


def vader() -> tuple[Scorer, str]:
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

    analyzer = SentimentIntensityAnalyzer()
    return (lambda texts: [max(0.0, -analyzer.polarity_scores(t)["compound"]) for t in texts]), _dist(
        "vaderSentiment"
    ) + ", max(0, -compound): negativity, not toxicity"


def detoxify() -> tuple[Scorer, str]:
    from detoxify import Detoxify

    model = Detoxify("original")  # fetches its checkpoint from a hub on first use
    return (lambda texts: [float(p) for p in model.predict(texts)["toxicity"]]), _dist("detoxify")


CANDIDATES: dict[str, tuple[str, Callable[[], tuple[Scorer, str]]]] = {  # name: (module, loader)
    "alt-profanity-check (today's metric)": ("profanity_check", profanity_check),
    "toxic-comment-classifier": ("toxic_classifier", toxic_comment_classifier),
    "tox-block": ("tox_block", tox_block),
    "hatesonar": ("hatesonar", hatesonar),
    "cuss-inspect": ("cuss_inspect", cuss_inspect),
    "best-profanity": ("best_profanity", best_profanity),
    "valx": ("valx", valx),
    "safetype": ("safetype", safetype),
    "better-profanity": ("better_profanity", better_profanity),
    "vaderSentiment": ("vaderSentiment", vader),
    "detoxify": ("detoxify", detoxify),
}


def load(path: Path = DATA) -> list[dict]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def auc(scores: list[float], labels: list[bool]) -> float | None:
    """P(a toxic sentence scores above a clean one), ties counted half; None if scores are flat."""
    pos = [s for s, y in zip(scores, labels) if y]
    neg = [s for s, y in zip(scores, labels) if not y]
    if not pos or not neg or len(set(scores)) < 2:
        return None
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def share(rows: list[dict], scores: list[float], kind: str) -> str:
    hits = [s >= 0.5 for r, s in zip(rows, scores) if r["kind"] == kind]
    return f"{sum(hits)}/{len(hits)}"


def measure(rows: list[dict], scores: list[float], seconds: float) -> dict:
    labels = [r["toxic"] for r in rows]
    insult_vs_clean = [(s, r["toxic"]) for r, s in zip(rows, scores) if r["kind"] != SWEAR]
    both = auc(scores, labels), auc(*map(list, zip(*insult_vs_clean)))
    return {
        "accuracy": sum((s >= 0.5) == y for s, y in zip(scores, labels)) / len(rows),
        "insults": share(rows, scores, INSULT),
        "swear": share(rows, scores, SWEAR),
        "civil_fp": share(rows, scores, CIVIL),
        "neutral_fp": share(rows, scores, NEUTRAL),
        "auc": "-" if both[0] is None else f"{both[0]:.2f}",
        "auc_insults": "-" if both[1] is None else f"{both[1]:.2f}",
        "ms": 1000 * seconds / len(rows),
    }


def run(module: str, make: Callable[[], tuple[Scorer, str]], rows: list[dict]) -> tuple[str, dict | None, list]:
    if importlib.util.find_spec(module) is None:
        return f"not installed (no module {module})", None, []
    try:
        score, note = make()
        score([rows[0]["text"]])  # warm up: first-call costs are not per-sentence costs
        start = time.perf_counter()
        scores = score([r["text"] for r in rows])
        return note, measure(rows, scores, time.perf_counter() - start), scores
    except Exception as exc:  # installed, but does not load or run here
        return f"fails: {type(exc).__name__}: {str(exc).splitlines()[0][:100] if str(exc) else ''}", None, []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--only", nargs="*", default=None, help="candidate names to run (default: all)")
    parser.add_argument("--per-sentence", action="store_true", help="also print each sentence's scores")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    rows = load(args.data)
    kinds = {k: sum(r["kind"] == k for r in rows) for k in (INSULT, SWEAR, NEUTRAL, CIVIL)}
    print(f"{len(rows)} sentences: " + ", ".join(f"{n} {k}" for k, n in kinds.items()))
    print(
        "\n| candidate | accuracy | swear-free insults caught | swear caught | civil criticism flagged "
        "| neutral flagged | AUC | AUC insults vs clean | ms/sentence | package, notes |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    per_sentence = {}
    for name, (module, make) in CANDIDATES.items():
        if args.only and name.split(" ")[0] not in args.only:
            continue
        note, m, scores = run(module, make, rows)
        per_sentence[name] = scores
        if m is None:
            print(f"| {name} | | | | | | | | | {note} |")
            continue
        print(
            f"| {name} | {m['accuracy']:.2f} | {m['insults']} | {m['swear']} | {m['civil_fp']} | {m['neutral_fp']} "
            f"| {m['auc']} | {m['auc_insults']} | {m['ms']:.1f} | {note} |"
        )
    if args.per_sentence:
        names = [n for n, s in per_sentence.items() if s]
        print("\n" + " | ".join(n.split(" ")[0] for n in names) + " | kind | text")
        for i, r in enumerate(rows):
            print(" | ".join(f"{per_sentence[n][i]:.2f}" for n in names) + f" | {r['kind']} | {r['text']}")


if __name__ == "__main__":
    main()
