"""Math reasoning (GSM8K) as program-of-thought: the model writes ``solution()``.

The feedback reviews the code line by line and ends with "# it is correct" (stop) or
"# it is wrong". The answer comes from running ``solution()`` in a sandboxed subprocess
with a timeout; the metric compares it with the reference number.
"""

from __future__ import annotations

import math
import re
from typing import Any

from ..core.errors import DraftParseError, FeedbackParseError
from ..core.records import Feedback, Finding, Verification
from ..sandbox.process import run_python
from ..task.task import Capabilities, Task, TaskDefaults
from .parsing import fenced_blocks

_ANSWER_IS = re.compile(r"answer is\s*:?\s*\$?\s*(-?[\d,]*\.?\d+)", re.I)
_VERDICT = re.compile(r"\bit(?:\s+is|'s)\s+(not\s+correct|incorrect|correct|wrong)", re.I)


def extract_code(text: str) -> str:
    """The ``solution()`` function (with imports before it) from a model reply."""
    fenced = fenced_blocks(text)
    if fenced:
        text = next((block for block in fenced if "def solution" in block), fenced[0])
    lines = text.strip("\n").splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.lstrip().startswith("def solution")), None)
    if start is None:
        raise DraftParseError("the draft has no `def solution():`")
    head = [ln for ln in lines[:start] if ln.startswith(("import ", "from "))]
    body = [lines[start]]
    for line in lines[start + 1 :]:
        if line.strip() and not line[0].isspace():
            break  # the function ended: drop trailing prose or a next "Question:"
        body.append(line)
    code = "\n".join(head + body).rstrip()
    if len(body) < 2:
        raise DraftParseError("`solution()` has no body")
    return code


def steps_program(text: str) -> str:
    """A step-by-step answer ("... The answer is 10.") as a program that returns its final
    number, its reasoning kept as comments, so it is run, voted on, critiqued and refined as
    any program is. A reply that wrote ``solution()`` anyway is that program."""
    if "def solution" in text:
        return extract_code(text)
    found = _ANSWER_IS.findall(text)
    value = to_number(found[-1]) if found else None
    if value is None:
        raise DraftParseError('the step-by-step answer has no final "The answer is N."')
    cut = text[: text.rfind("\n", 0, text.lower().rfind("answer is")) + 1]  # up to the answer's line
    steps = [ln.strip() for ln in cut.splitlines() if ln.strip() and not ln.strip().lower().startswith("question:")]
    comments = [f"    # {ln}" for ln in steps[-30:]]
    return "\n".join(["def solution():", *comments, f"    return {number_text(value)}"])


def _last_verdict(text: str) -> str:
    """The review's final verdict ("correct", "wrong", "not correct", …), or ""."""
    verdicts = _VERDICT.findall(text)
    return " ".join(verdicts[-1].lower().split()) if verdicts else ""


def to_number(value: Any) -> float | None:
    try:
        text = str(value).strip().replace(",", "").replace("$", "")
        number = float(text)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def number_text(value: float | None) -> str | None:
    """A number as one spelling for votes: 18.0 and 18 are the same answer."""
    if value is None:
        return None
    return str(int(value)) if float(value).is_integer() else f"{value:.6g}"


def program_finding(text: str, error: str | None) -> Finding:
    """A failing program's finding, with its repair: "The program fails: <error>. Fix it so
    solution() returns the answer." """
    said = " ".join(str(error or "it does not run").split())
    said = said if len(said) <= 300 else said[:299] + "…"
    repair = f"The program fails: {said.rstrip('.')}. Fix it so solution() returns the answer."
    return Finding(check="solution() runs and returns a number", text=text, repair=repair, kind="program")


class GSM8K(Task):
    name = "gsm8k"
    defaults = TaskDefaults(
        # measured (docs/frontier.md): on the default model one greedy program solves as many
        # of the 30 dev problems as 2, 4 or 5 voted ones and the auto strategy, at a fifth of
        # the tokens; votes are for larger models (--samples 5)
        best={"samples": 1, "max_iterations": 0},
        # short: a one-sample call costs about what DSPy's does (docs/frontier.md); the
        # longer rules cost ~60 tokens a call and measured no better (rows outside the frontier's)
        system="You are a careful Python programmer. Reply only in the format asked for.",
        generic_feedback="# Improve the code so that it returns the right answer.",
        stop_contains=("it is correct",),
        max_tokens={"generate": 300, "feedback": 300, "refine": 300},
        stop_sequences={
            "generate": ["\nQuestion:", "\n# Review"],
            "feedback": ["\nQuestion:", "\ndef solution"],
            "refine": ["\nQuestion:", "\n# Review"],
        },
    )
    capabilities = Capabilities(verifier=True, answer=True, runs_code=True)
    judge_aspects = ("reading",)
    # other ways to write a sample: a step-by-step answer whose number is parsed, or a program that
    # first quotes each quantity; measured on the default model (docs/frontier.md, rows 0-14), each
    # alone solved fewer problems than the program (0.27 and 0.42 vs 0.53-0.58) and votes across
    # them fewer than the greedy program, so votes draw from programs unless asked (--ways)
    ways = ("program", "steps", "quantities")
    default_ways = ("program",)
    description = "Math word problems solved as Python programs (program-of-thought, GSM8K)"
    prompt_dir = "gsm8k"
    metric_name = "solve rate (execution)"
    stop_description = "feedback says '# it is correct'"
    timeout = 5.0

    def parse_draft(self, text: str) -> str:
        return extract_code(text)

    def parse_way(self, way: str | None, text: str) -> str:
        return steps_program(text) if way == "steps" else extract_code(text)  # quantities: a program too

    def parse_feedback(self, text: str, *, input: str, draft: str) -> Feedback:
        raw = text.strip()
        if not raw:
            raise FeedbackParseError("the model returned an empty review")
        verdict = _last_verdict(raw)
        # the critic's verdict as a score (1 correct, 0 otherwise): breaks ties in
        # "best"/"verified" selection between drafts that all run
        total = 1.0 if verdict == "correct" else 0.0
        return Feedback(text=raw, done=verdict == "correct", total=total, fields={"verdict": verdict})

    def says_done(self, text: str) -> bool | None:
        return _last_verdict(text) == "correct"

    def verify(self, input: str, draft: str) -> Verification:
        """Run solution(): report an exception, a timeout or a non-numeric result.

        Passing means the program runs and returns a number — not that the number is right;
        the reference answer is never shown to the loop. Score: 1.0 when it passes, else 0.0.
        """
        result = run_python(draft, call="solution", timeout=self.timeout)
        if not result.ok:
            text = f"# Running solution() failed: {result.error}"
            return Verification(text=text, passed=False, score=0.0, findings=[program_finding(text, result.error)])
        if to_number(result.value) is None:
            text = f"# solution() returned {result.value}, which is not a number"
            found = program_finding(text, f"solution() returned {result.value}, which is not a number")
            return Verification(text=text, passed=False, score=0.0, findings=[found])
        return Verification(
            text=f"# Running solution() returned {result.value}",
            passed=True,
            score=1.0,
            answer=number_text(to_number(result.value)),
        )

    def answer(self, output: str) -> str | None:
        """Run ``solution()`` and return its value, or None when it fails."""
        result = run_python(output, call="solution", timeout=self.timeout)
        return result.value if result.ok else None

    def metric(self, input: str, output: str, reference: Any = None) -> float | None:
        if reference is None:
            return None
        target = to_number(reference)
        got = to_number(self.answer(output))
        if target is None or got is None:
            return 0.0
        return float(abs(got - target) <= 1e-4 * max(1.0, abs(target)))
