"""Small helpers for the words the CLI, the service and reports print."""

from __future__ import annotations

import json
import re
from typing import Any

from .records import FailedCheck, Feedback, Verification

# the line engine/scoring/votes.py adds to a voted sample's findings ("# Votes: 4 samples return 18, ...")
VOTES_LINE = "# Votes: "
FINDINGS_SHOWN = 70  # characters of a failing sample's findings on its line


def plural(n: int, noun: str, many: str | None = None) -> str:
    """``1 example``, ``2 examples``: a count with its noun in the right number."""
    return f"{n} {noun if n == 1 else many or noun + 's'}"


def score_note(fb: Feedback) -> str:
    """What a feedback's score is: the verifier's, or the critic's on its scale: the one the
    critique writes (``8/10``), the sum of its per-aspect ratings, or 0 to 1 (a 0 or 1 that is
    the critic's verdict, done or not, is said as that verdict)."""
    if fb.verification is not None and fb.total == fb.verification.score:
        return verifier_note(fb.verification, said=False)  # the critique's text holds the findings
    total = fb.total if fb.total is not None else float("nan")
    scale = score_scale(fb)
    if scale is not None:
        return f"feedback score {total:g}/{scale:g} (the critic's)"
    if fb.scores:
        return f"feedback score {total:g} (the critic's, sum of its {plural(len(fb.scores), 'rating')})"
    if 0 <= total <= 1:
        if total in (0, 1) and fb.done is not None and fb.done == (total == 1):  # a verdict as a score
            return "the critic finds nothing to fix" if fb.done else "the critic asks for changes"
        return f"the critic's score {total:.3g} (0 to 1, higher is better)"
    return f"feedback score {total:g} (the critic's, no scale stated)"


def score_scale(fb: Feedback) -> float | None:
    """The top of the critic's scale where the critique writes its score with it: ``8/10``,
    ``27 / 30``, ``8 out of 10``; None where it does not."""
    if fb.total is None:
        return None
    number = re.escape(f"{fb.total:g}")
    found = re.search(rf"(?<![\d.]){number}(?:\.0+)?\s*(?:/|out of)\s*(\d+(?:\.\d+)?)", fb.text[-2000:])
    return float(found.group(1)) if found else None


def is_vote(check: Verification) -> bool:
    """Whether a check's score is a vote share (an answer task's samples, engine/scoring/votes.py)."""
    return any(line.startswith(VOTES_LINE) for line in check.text.splitlines())


def verifier_note(check: Verification | None, way: str | None = None, *, said: bool = True) -> str:
    """``verifier score 0.59, fails: Missing concepts: ball``: the task's own check of a
    draft, as a short note, with what a failing check found; a voted sample's score as what
    it is (``answer 18 (program): vote share 0.80, majority``); ``said`` False leaves the
    findings out (where the text beside the note holds them); with the judge's verdict
    where it was asked (``judge 0.91: sense 0.91``; ``, sampled`` when the backend gave no
    probabilities and verdicts were sampled)."""
    if check is None or (check.score is None and check.judged is None):
        return "no verifier score"
    notes = []
    if check.score is not None:
        notes.append(vote_note(check, way) if is_vote(check) else _check_note(check, said))
    if check.judged is not None:
        notes.append(judge_note(check))
    return "; ".join(notes)


def _check_note(check: Verification, said: bool = True) -> str:
    verdict = {True: ", passes", False: ", fails", None: ""}[check.passed]
    found = findings(check) if check.passed is False and said else ""
    return f"verifier score {check.score:.2f}{verdict}" + (f": {found}" if found else "")


def vote_note(check: Verification, way: str | None = None) -> str:
    """A voted sample: its answer, the way it was written, the share of the votes that give
    that answer and whether that is a majority; a sample without an answer (its program
    failed, or returned no number) gets no vote, and says what its check found."""
    how = f" ({way})" if way else ""
    if check.answer is None:
        own = findings(check)
        return f"no answer{how}, no vote" + (f": {own}" if own else "")
    verdict = "majority" if check.passed else "no majority"
    return f"answer {check.answer}{how}: vote share {check.score:.2f}, {verdict}"


def findings(check: Verification) -> str:
    """A check's findings on one line, without the vote line, cut short."""
    lines = [line.strip().lstrip("# ") for line in check.text.splitlines() if not line.startswith(VOTES_LINE)]
    lines = [line for line in lines if line]
    text = " ".join(lines)
    return text if len(text) <= FINDINGS_SHOWN else text[: FINDINGS_SHOWN - 1] + "…"


def judge_note(check: Verification) -> str:
    """``judge 0.91: sense 0.91``: the judge's mean P(yes) and each aspect's (``judge 0.85``
    alone when its one question is the unnamed one, "judge", of a task file)."""
    sampled = ", sampled" if any(j.method == "sampled" for j in check.judgments) else ""
    named = [j for j in check.judgments if j.question != "judge"]
    if not named:
        return f"judge {check.judged:.2f}{sampled}"
    aspects = ", ".join(f"{j.question} {j.score:.2f}" for j in check.judgments)
    return f"judge {check.judged:.2f}: {aspects}{sampled}"


# --- a typed (JSON) critique as text ---------------------------------------------------------

LONG_ITEM = 40  # list items longer than this get a line each


def feedback_lines(text: str) -> list[str] | None:
    """A JSON-object critique as "field: value" lines (``missing concepts: throw``), or None
    when the text is not one (free-text critiques are shown as they are)."""
    try:
        data = json.loads(text)
        return _field_lines(data) if isinstance(data, dict) and data else None
    except (ValueError, RecursionError):  # model text: absurdly deep nesting is shown raw
        return None


def typed_reply(text: str) -> bool | None:
    """Whether a critique being written is JSON (``{…}``, or fenced as ```` ```json ````), which
    a live view holds back and shows read as its fields once its step comes; None: too little
    written yet to tell."""
    head = text.lstrip()[:7].lower()
    if not head:
        return None
    if head.startswith("{") or head.startswith("```json"):
        return True
    return None if "```json".startswith(head) else False


def feedback_text(fb: Feedback) -> str:
    """A critique as a reader sees it: a typed (JSON) one as its fields, one per line; an
    unparsed or free-text one as it came."""
    lines = None if fb.parse_error else feedback_lines(fb.text)
    return "\n".join(lines) if lines else fb.text


def _field_lines(data: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    for key, value in data.items():
        label = str(key).replace("_", " ")
        if value == []:  # "no issues found", not "issues: none" (or the raw JSON)
            lines.append(f"no {label} found")
        elif isinstance(value, list) and any(len(_value_text(v)) > LONG_ITEM for v in value):
            lines += [f"{label}:", *(f"  - {_value_text(v)}" for v in value)]
        else:
            lines.append(f"{label}: {_value_text(value)}")
    return lines


def _value_text(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(_value_text(v) for v in value) if value else "none"
    if isinstance(value, dict):
        if set(value) == {"score", "reason"}:  # a rated aspect, as acronym's critic writes
            return f"{_value_text(value['score'])} ({_value_text(value['reason'])})"
        return ", ".join(f"{str(k).replace('_', ' ')} {_value_text(v)}" for k, v in value.items())
    return str(value)


def output_standing(fails: list[FailedCheck]) -> str:
    """The last word on a run with checks: which ones its returned output still fails."""
    if not fails:
        return "returned output passes every check"
    return "returned output fails: " + "; ".join(dict.fromkeys(f.says for f in fails))
