"""Sentiment reversal (Yelp): rewrite a review so that it carries the target polarity.

Input: a review plus a target polarity, given as ``positive: <review>`` /
``negative: <review>`` or as a JSON object ``{"review": ..., "target": "positive"}`` (the
Yelp rows' ``target_sentiment`` key with values like "Very positive" works too). The input
is normalised to the text form, so the run record shows one canonical string.

Feedback says why the rewrite is not yet the target sentiment and names the phrases to
change. The paper runs a fixed number of rounds (no stop signal). The metric is measured by
an offline classifier, VADER, never by the model's feedback: 1.0 when the compound score
has the target's sign beyond VADER's ±0.05 neutral band.

That binary metric saturates at the one-step draft, so :meth:`Sentiment.metric_parts` adds
two graded parts (the quality benchmark reports them): ``toward_target``, the compound
score signed toward the target (-1..1; higher is more positive for a positive target), and
``very``, 1.0 when it reaches ``VERY`` (0.5): the paper's "Very positive"/"Very negative".
"""

from __future__ import annotations

import re
from typing import Any

from ..checks.incomplete import INCOMPLETE_METRIC, is_refusal, refusal_check
from ..core.errors import FeedbackParseError, InputError
from ..core.records import Feedback, Verification
from ..task.task import Capabilities, Task, TaskDefaults, system_message
from .parsing import json_input

POLARITIES = ("positive", "negative")
NEUTRAL_BAND = 0.05  # VADER's convention: |compound| < 0.05 is neutral
VERY = 0.5  # |compound| >= 0.5 in the target's direction counts as "Very positive/negative"

_TEXT_FORM = re.compile(r"^\s*(?:to\s+)?(positive|negative)\s*:\s*(.+)$", re.I | re.S)
_WORD = re.compile(r"[a-z][a-z'\-]*")
_QUOTED = re.compile(r"[\"“”']([^\"“”']{2,80})[\"“”']")
_analyzer: Any = None


def analyzer() -> Any:
    """VADER's analyzer, built once on first use (loading its lexicon takes ~0.1 s)."""
    global _analyzer
    if _analyzer is None:
        from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

        _analyzer = SentimentIntensityAnalyzer()
    return _analyzer


def compound_score(text: str) -> float:
    """VADER's signed compound score of a text, in [-1, 1]."""
    return float(analyzer().polarity_scores(text)["compound"])


def oriented_score(text: str, target: str) -> float:
    """The compound score signed so that larger means closer to the target polarity."""
    score = compound_score(text)
    return score if _polarity(target) == "positive" else -score


def has_sentiment(text: str, target: str, band: float = NEUTRAL_BAND) -> bool:
    """True when VADER rates the text as the target polarity (beyond the neutral band)."""
    return oriented_score(text, target) >= band


def opposite_words(text: str, target: str, limit: int = 6) -> list[tuple[str, float]]:
    """The text's words whose VADER valence has the wrong sign, strongest first."""
    lexicon = analyzer().lexicon
    want = 1 if _polarity(target) == "positive" else -1
    found: dict[str, float] = {}
    for word in _WORD.findall(text.lower()):
        valence = lexicon.get(word)
        if valence is not None and valence * want < 0:
            found[word] = float(valence)
    return sorted(found.items(), key=lambda kv: -abs(kv[1]))[:limit]


def _polarity(value: Any) -> str:
    """'positive'/'negative' from e.g. 'Very positive', 'POS', 'negative'."""
    low = str(value or "").strip().lower()
    for polarity in POLARITIES:
        if polarity in low or low == polarity[:3]:
            return polarity
    raise InputError(f"target sentiment {value!r} is neither positive nor negative")


def _clean_review(text: str) -> str:
    # Yelp rows carry literal "\n" escapes; one line keeps the few-shot layout intact
    return " ".join(str(text).replace("\\n", "\n").split())


def parse_sentiment_input(text: str) -> tuple[str, str]:
    """(review, target) from the text form or a JSON object; InputError otherwise."""
    text = text.strip()
    if text.startswith("{"):
        data = json_input(text, "sentiment")
        if data is None or "review" not in data:
            raise InputError('sentiment JSON input needs a "review" key and a "target" key')
        target = data.get("target", data.get("target_sentiment"))
        if target is None:
            raise InputError('sentiment JSON input needs "target" (or "target_sentiment")')
        review, polarity = _clean_review(data["review"]), _polarity(target)
    else:
        match = _TEXT_FORM.match(text)
        if match is None:
            raise InputError(
                "sentiment input must be 'positive: <review>', 'negative: <review>' or "
                'a JSON object {"review": ..., "target": "positive"|"negative"}'
            )
        polarity, review = match.group(1).lower(), _clean_review(match.group(2))
    if not review:
        raise InputError("the review to rewrite is empty")
    return review, polarity


class Sentiment(Task):
    name = "sentiment"
    description = "Sentiment reversal: rewrite a review with the target polarity (Yelp)"
    prompt_dir = "sentiment"
    metric_name = "target sentiment reached (VADER, ±0.05) + judge preference"
    judge_criteria = "Which rewrite expresses the target sentiment named in the input more clearly, while keeping the review's content and fluency?"
    stop_description = "fixed rounds (no stop signal)"
    extra_variables = frozenset({"review", "target"})
    defaults = TaskDefaults(
        system=system_message(
            "an expert editor. Each message asks you to rewrite, critique or improve a review so that it expresses a target sentiment"
        ),
        generic_feedback="Make the review's sentiment match the target.",
        temperature={"generate": 0.7, "feedback": 0.7, "refine": 0.7},
        max_tokens={"generate": 160, "feedback": 120, "refine": 160},
        stop_sequences={
            "generate": ["\n\n", "\nReview:", "\nTarget:"],
            "feedback": ["\n\n", "\nReview:", "\nTarget:", "\nRewrite:"],
            "refine": ["\n\n", "\nReview:", "\nTarget:", "\nFeedback:"],
        },
        max_iterations=4,
        # measured (docs/frontier.md, 16 dev rows): the best of 4 rewrites by VADER reaches the
        # target on all 16 at 1.6k tokens; a round of refinement on top adds nothing at 3x that
        best={"samples": 4, "max_iterations": 0, "verifier_mode": "hybrid"},
        echo="off",  # a rewrite may rightly stay close to its input (checks/incomplete.py)
    )
    capabilities = Capabilities(verifier=True)
    judge_aspects = ("keeps",)
    one_line_input = True  # `run` refuses several lines: eval --data FILE takes one input a line
    # reviews and feedback are one paragraph in the few-shot: a blank line ends the answer

    def prepare_input(self, text: str) -> str:
        review, target = parse_sentiment_input(super().prepare_input(text))
        return f"{target}: {review}"

    def context(self, input: str) -> dict[str, Any]:
        review, target = parse_sentiment_input(input)
        return {"review": review, "target": target}

    def parse_draft(self, text: str) -> str:
        text = re.sub(r"^\s*(rewrite|rewritten review|review)\s*:\s*", "", text.strip(), flags=re.I)
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        return super().parse_draft(lines[0] if lines else "")

    def parse_feedback(self, text: str, *, input: str, draft: str) -> Feedback:
        raw = re.sub(r"^\s*feedback\s*:\s*", "", text.strip(), flags=re.I).strip()
        if not raw:
            raise FeedbackParseError("the model returned empty feedback")
        if len(_WORD.findall(raw.lower())) < 3:
            raise FeedbackParseError("the feedback is too short to say what to change")
        phrases = [p.strip() for p in _QUOTED.findall(raw) if p.strip()]
        return Feedback(text=raw, fields={"phrases": list(dict.fromkeys(phrases))})

    def metric(self, input: str, output: str, reference: Any = None) -> float:
        if is_refusal(output):  # "I'm sorry, but I can't" reads as negative to VADER
            return INCOMPLETE_METRIC
        _, target = parse_sentiment_input(input)
        return 1.0 if has_sentiment(output, target) else 0.0

    metric_parts_doc = f"VADER compound toward the target, mean; very: share with it >= {VERY}"

    def metric_parts(self, input: str, output: str) -> dict[str, float]:
        """The binary metric plus the graded ones (see the module docstring)."""
        _, target = parse_sentiment_input(input)
        toward = oriented_score(output, target)
        return {
            "reached": float(toward >= NEUTRAL_BAND),
            "toward_target": round(toward, 4),
            "very": float(toward >= VERY),
        }

    def verify(self, input: str, draft: str) -> Verification:
        refused = refusal_check(draft)
        if refused is not None:
            return refused
        _, target = parse_sentiment_input(input)
        score = compound_score(draft)
        oriented = score if target == "positive" else -score
        passed = oriented >= NEUTRAL_BAND
        sign = ">=" if target == "positive" else "<="
        bound = NEUTRAL_BAND if target == "positive" else -NEUTRAL_BAND
        lines = [f"VADER compound score: {score:+.3f} (target {target}: needs {sign} {bound:+.2f})."]
        wrong = opposite_words(draft, target)
        if wrong:
            listed = ", ".join(f'"{w}" ({v:+.1f})' for w, v in wrong)
            lines.append(f"Words with the opposite polarity: {listed}.")
        elif not passed:
            lines.append(f"No strongly {_other(target)} word; add clearly {target} words.")
        if passed and not wrong:
            lines.append(f"The review reads as {target}.")
        return Verification(text=" ".join(lines), passed=passed, score=round(oriented, 4))


def _other(target: str) -> str:
    return "negative" if target == "positive" else "positive"
