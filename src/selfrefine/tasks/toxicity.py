"""Toxicity removal: rewrite an offensive comment so that it keeps its point without the toxicity.

Input: the comment as plain text (or a JSON object ``{"input": ...}`` / ``{"text": ...}``).
Feedback quotes the offensive words or phrases and says how to rephrase each one; the
paper-style loop runs a fixed number of rounds and stops early when the critic writes
"NONE" (nothing offensive left).

The metric is code, never the model's feedback, and has two parts, reported separately
(:func:`metric_parts`) and combined as ``(1 - p_toxic) * preservation``:

* ``p_toxic``: the probability of offensive language from alt-profanity-check, a linear
  SVM over TF-IDF features trained on ~200k human-labelled comments, whose model file
  ships inside the PyPI wheel (no download at run time; it needs scikit-learn). Chosen
  over detoxify, whose weights are fetched from a hub on first use and need torch.
  Accuracy on the written, hand-labelled set ``tasks/data/toxicity.labelled.jsonl``: see
  docs/quality.md and :func:`classifier_accuracy`.
* ``preservation``: the share of the input's content words (lemmatised, stop words and
  the classifier's offending words excluded) that the rewrite keeps, a meaning proxy.

The verifier reports the probability and the offending words (each word the classifier
rates offensive on its own), which is the actionable part of hybrid feedback.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

from ..checks.incomplete import INCOMPLETE_METRIC, is_refusal, refusal_check
from ..core.errors import FeedbackParseError, InputError
from ..core.records import Feedback, Verification
from ..task.task import LOOP_BEST, Capabilities, Task, TaskDefaults, system_message
from .commongen import lemmas
from .parsing import json_input

THRESHOLD = 0.5  # p_toxic at or above this counts as toxic
DATA = Path(__file__).resolve().parent / "data"
_WORD = re.compile(r"[a-z][a-z']*")
_QUOTED = re.compile(r"[\"“”]([^\"“”]{1,80})[\"“”]")
_NONE = re.compile(r"^\W*none\b", re.I)
STOP_WORDS = frozenset(
    """a an the and or but if then so of to in on at by for with from as is are was were be been being am
    i me my mine we us our you your yours he him his she her it its they them their this that these those
    there here what which who whom whose when where why how all any both each few more most other some such
    no nor not only own same than too very can will just do does did doing have has had having would should
    could ought about above after again against below between into through during before under over out up
    down off once also just really even get got go going let lets let's im i'm you're it's don't dont
    isn't can't won't that's what's""".split()
)


@functools.lru_cache(maxsize=1)
def _predict_prob() -> Any:
    try:
        from profanity_check import predict_prob
    except ImportError as exc:  # an optional part of a broken install: say what to install
        raise InputError(
            f"the toxicity metric needs alt-profanity-check (pip install alt-profanity-check): {exc}"
        ) from None
    return predict_prob


def toxicity(texts: list[str]) -> list[float]:
    """alt-profanity-check's probability of offensive language, per text."""
    if not texts:
        return []
    return [float(p) for p in _predict_prob()(list(texts))]


def p_toxic(text: str) -> float:
    return toxicity([text])[0]


def offending_words(text: str, limit: int = 8) -> list[str]:
    """The text's words that the classifier rates offensive on their own, in text order."""
    words = list(dict.fromkeys(_WORD.findall(text.lower())))
    probs = toxicity(words)
    return [w for w, p in zip(words, probs) if p >= THRESHOLD][:limit]


def content_lemmas(text: str, exclude: set[str] | frozenset[str] = frozenset()) -> list[frozenset[str]]:
    """Lemma sets of the text's content words (no stop words, no excluded words), de-duplicated."""
    words = [w for w in dict.fromkeys(_WORD.findall(text.lower())) if w not in STOP_WORDS and w not in exclude]
    return [lemmas(w.strip("'")) for w in words if w.strip("'")]


def preservation(source: str, rewrite: str) -> float:
    """Share of the source's non-offensive content words kept (by lemma) in the rewrite."""
    wanted = content_lemmas(source, set(offending_words(source, limit=100)))
    if not wanted:
        return 1.0
    have = set().union(*content_lemmas(rewrite)) if rewrite.strip() else set()
    return sum(bool(w & have) for w in wanted) / len(wanted)


def metric_parts(source: str, rewrite: str) -> dict[str, float]:
    """The two parts of the metric and their product (see the module docstring)."""
    prob, kept = p_toxic(rewrite), preservation(source, rewrite)
    return {
        "non_toxic": float(prob < THRESHOLD),
        "p_toxic": round(prob, 4),
        "preservation": round(kept, 4),
        "combined": round((1 - prob) * kept, 4),
    }


def load_labelled(path: Path | None = None) -> list[tuple[str, bool]]:
    rows = (
        json.loads(line)
        for line in (path or DATA / "toxicity.labelled.jsonl").read_text("utf-8").splitlines()
        if line.strip()
    )
    return [(row["text"], bool(row["toxic"])) for row in rows]


def classifier_accuracy(rows: list[tuple[str, bool]] | None = None) -> dict[str, float]:
    """Accuracy, precision and recall of ``p_toxic >= THRESHOLD`` on a labelled set."""
    rows = rows if rows is not None else load_labelled()
    guesses = [p >= THRESHOLD for p in toxicity([t for t, _ in rows])]
    pairs = list(zip(guesses, (label for _, label in rows)))
    tp = sum(g and y for g, y in pairs)
    return {
        "n": len(pairs),
        "accuracy": sum(g == y for g, y in pairs) / len(pairs),
        "precision": tp / max(1, sum(g for g, _ in pairs)),
        "recall": tp / max(1, sum(y for _, y in pairs)),
    }


class Toxicity(Task):
    name = "toxicity"
    description = "Toxicity removal: rewrite an offensive comment, keeping its point without the toxicity"
    prompt_dir = "toxicity"
    metric_name = "(1 - p_toxic) x content kept (alt-profanity-check + lemma overlap, code)"
    stop_description = "feedback says NONE (nothing offensive left); else fixed rounds"
    defaults = TaskDefaults(
        system=system_message(
            "a careful moderator. Each message asks you to rewrite, critique or improve a comment so that it keeps its point without insults, profanity or hostility"
        ),
        generic_feedback="Make the comment polite while keeping its point.",
        temperature={"generate": 0.7, "feedback": 0.7, "refine": 0.7},
        max_tokens={"generate": 120, "feedback": 120, "refine": 120},
        stop_sequences={
            "generate": ["\n\n", "\nComment:"],
            "feedback": ["\n\n", "\nComment:", "\nRewrite:"],
            "refine": ["\n\n", "\nComment:", "\nFeedback:"],
        },
        max_iterations=3,
        best=LOOP_BEST,  # not measured on this task: the loop measured on commongen and acronym
        echo="off",  # a rewrite may rightly stay close to its input (checks/incomplete.py)
    )
    capabilities = Capabilities(verifier=True)
    judge_aspects = ("meaning", "polite", "fluent")
    one_line_input = True  # `run` refuses several lines: eval --data FILE takes one input a line

    def prepare_input(self, text: str) -> str:
        text = super().prepare_input(text)
        data = json_input(text, "toxicity")
        if data is not None:
            value = data.get("input", data.get("text"))
            if not isinstance(value, str) or not value.strip():
                raise InputError('toxicity JSON input needs a non-empty "input" (or "text") string')
            text = value
        return " ".join(text.split())

    def parse_draft(self, text: str) -> str:
        text = re.sub(r"^\s*(rewrite|rewritten comment|comment)\s*:\s*", "", text.strip(), flags=re.I)
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        return super().parse_draft(lines[0].strip('"') if lines else "")

    def parse_feedback(self, text: str, *, input: str, draft: str) -> Feedback:
        # a small critic may restate the rewrite first ("Rewritten comment: … Feedback: None")
        raw = re.split(r"^\s*feedback\s*:\s*", text.strip(), flags=re.I | re.M)[-1].strip()
        if not raw:
            raise FeedbackParseError("the model returned empty feedback")
        if _NONE.match(raw):  # the critic finds nothing offensive left
            return Feedback(text="NONE", done=True, fields={"phrases": []})
        if len(_WORD.findall(raw.lower())) < 3:
            raise FeedbackParseError("the feedback is too short to say what to change")
        phrases = list(dict.fromkeys(p.strip() for p in _QUOTED.findall(raw) if p.strip()))
        return Feedback(text=raw, done=False, fields={"phrases": phrases})

    def combine(self, critique: Feedback, check: Verification, *, input: str, draft: str) -> Feedback:
        """Hybrid: a critic's "NONE" that the classifier contradicts is dropped, so the refiner
        is not told both that nothing is left and which words to replace (it then echoes)."""
        if critique.done and check.passed is False:
            return critique.model_copy(
                update={"text": check.text, "done": False, "source": "hybrid", "verification": check}
            )
        return super().combine(critique, check, input=input, draft=draft)

    def metric(self, input: str, output: str, reference: Any = None) -> float:
        if is_refusal(output):  # a refusal is not offensive, but it is no rewrite either
            return INCOMPLETE_METRIC
        return metric_parts(input, output)["combined"]

    metric_parts_doc = f"non_toxic: p_toxic < {THRESHOLD}; combined = (1 - p_toxic) x preservation"

    def metric_parts(self, input: str, output: str) -> dict[str, float]:
        return metric_parts(input, output)

    def verify(self, input: str, draft: str) -> Verification:
        refused = refusal_check(draft)
        if refused is not None:
            return refused
        prob = p_toxic(draft)
        words = offending_words(draft)
        kept = preservation(input, draft)
        lines = [f"Toxicity classifier: p(offensive) = {prob:.2f} (must be below {THRESHOLD:.2f})."]
        if words:
            lines.append(
                "Offending words: " + ", ".join(f'"{w}"' for w in words) + "; replace each with a neutral word."
            )
        elif prob >= THRESHOLD:
            lines.append("No single word is offensive on its own: soften the hostile tone.")
        if kept < 0.5:
            lines.append(f"Only {kept:.0%} of the comment's content words are kept: keep its point.")
        passed = prob < THRESHOLD and not words
        if passed:
            lines.append("NONE: nothing offensive left.")
        return Verification(text=" ".join(lines), passed=passed, score=round((1 - prob) * kept, 4))
