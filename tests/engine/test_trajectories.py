"""Golden trajectories: the full record of runs across the loop's paths, on the fake model.

Each case below runs one input through ``SelfRefine.astream`` on the in-package fake model
(:mod:`selfrefine.backends.fake`, scripted and deterministic) and records

- ``requests``: every request the model received, in order (role, seed, temperature, token
  limit, stop sequences, schema and system digests, the prompt: whole when short, else its
  digest);
- ``steps``: every streamed step in order (draft, feedback, decision, call, delta, result),
  with its iteration, accepted, stop, reason and detail;
- ``result``: the :class:`~selfrefine.core.records.RunResult` as JSON, with the wall-clock
  fields removed (``seconds``, ``wait_seconds``; a time budget's elapsed seconds in its
  wording are masked) and the fields at their record's default left out (to keep the file
  small: a value that differs from its default is still there, so any change shows).

``golden_trajectories.json`` pins them as the loop ran them before issue 28's rewrite of the
run (main dd5d6e8): a refactor of the engine must leave every case unchanged. When a case
differs, the test prints the diff of that case.

Regenerate the file with ``PYTHONPATH=src python tests/engine/test_trajectories.py --write``
only for an intended behaviour change: a regenerated golden file is a behaviour change, and
its commit message must say which cases changed and why. (Issue 29: where the code checks tie
samples, the task's judge now decides; the cases that pin the critic's tie-break run with
``judging=False``, which their recorded config shows.)
"""

from __future__ import annotations

import asyncio
import difflib
import hashlib
import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from selfrefine import BackendError, FakeBackend, SelfRefine, Task, TransientBackendError
from selfrefine.core.records import (
    CallStep,
    DecisionStep,
    DeltaStep,
    DraftStep,
    FeedbackStep,
    ResultStep,
    Step,
    Verification,
)
from selfrefine.task.task import Capabilities

GOLDEN = Path(__file__).with_name("golden_trajectories.json")
LINE = 200  # the golden file's lines: a value longer than this is spread over lines
SHORT = 240  # prompts up to this length are kept whole in the golden file, longer ones as a digest
WALL_CLOCK = ("seconds", "wait_seconds", "elapsed", "started")
ELAPSED = re.compile(r"(time budget ran out: )\d+(?:\.\d+)?s")

# --- the tasks --------------------------------------------------------------------------

REFINE = (
    "Topic: {{ input }}\n"
    "{% for h in history %}OLD[{{ h.draft }}|{{ h.feedback }}]\n{% endfor %}"
    "CUR[{{ draft }}|{{ feedback }}]\nBetter:"
)


def scored(**kw: Any) -> Task:
    """A user task without a verifier: the critic's score (``score: N``) and stop phrase."""
    params: dict[str, Any] = dict(
        generate="Write about {{ input }}.",
        feedback="Critique: {{ draft }}",
        refine=REFINE,
        score=r"score:\s*(\d+)",
    )
    params.update(kw)
    return Task("scored", **params)


def coverage(input: str, draft: str) -> tuple[float, list[str]]:
    """The share of the input's words the draft uses, and the missing ones."""
    words = [w.strip() for w in input.split(",") if w.strip()]
    used = set(re.findall(r"[a-z]+", draft.lower()))
    missing = [w for w in words if w not in used]
    return round(1 - len(missing) / len(words), 6), [f"missing: {w}" for w in missing]


def words(**kw: Any) -> Task:
    """A user task with a verifier (the input's words a draft uses), a critic score and a
    stop phrase: a small commongen whose prompts fit in the golden file whole."""
    params: dict[str, Any] = dict(
        generate="Use the words {{ input }}.",
        feedback="Critique: {{ draft }}",
        refine=REFINE,
        score=r"score:\s*(\d+)",
        stop_contains=["done"],
        temperature=0.7,
        verify=coverage,
    )
    params.update(kw)
    return Task("words", **params)


class Sum(Task):
    """A user task with an answer: a draft ends ``= N``; the votes count the answers."""

    name = "sum"
    capabilities = Capabilities(verifier=True, answer=True)

    def verify(self, input: str, draft: str) -> Verification:
        match = re.search(r"=\s*(-?\d+)\s*$", draft)
        if match is None:
            return Verification(text="no answer", passed=False, score=0.0)
        return Verification(text=f"answer {match.group(1)}", passed=True, score=1.0, answer=match.group(1))

    def answer(self, output: str) -> str | None:
        match = re.search(r"=\s*(-?\d+)\s*$", output)
        return match.group(1) if match else None


def sums(**kw: Any) -> Task:
    params: dict[str, Any] = dict(
        generate="Add {{ input }}.",
        feedback="Check: {{ draft }}",
        refine=REFINE,
        stop_contains=["correct"],
        temperature={"generate": 0.0, "feedback": 0.0, "refine": 0.7},
    )
    params.update(kw)
    return Sum(**params)


# --- the cases --------------------------------------------------------------------------


@dataclass
class Case:
    task: Task | str
    model: FakeBackend
    input: str = "cats"
    options: dict[str, Any] = field(default_factory=dict)
    feedback_model: FakeBackend | None = None
    deltas: bool = False
    reference: Any = None


def fake(generate=("d0",), feedback=(), refine=(), **kw: Any) -> FakeBackend:
    return FakeBackend({"generate": list(generate), "feedback": list(feedback), "refine": list(refine)}, **kw)


CG_ODD = json.dumps({"missing_concepts": [], "commonsense": "It is odd."})  # never done: the loop refines
CG_DONE = json.dumps({"missing_concepts": [], "commonsense": "NONE"})
CG_PARK = json.dumps({"missing_concepts": ["park"], "commonsense": "NONE"})
BOOM = TransientBackendError("503 from server")
PROGRAMS = {
    "18a": "def solution():\n    return 18",
    "18b": "def solution():\n    x = 9\n    return 2 * x",
    "12": "def solution():\n    return 12",
    "crash": "def solution():\n    return 1 / 0",
}


def commongen(generate, refine=(), feedback=(CG_ODD,) * 8, **options: Any) -> Case:
    backend = FakeBackend(
        {"generate": list(generate), "feedback": list(feedback), "refine": list(refine)}, default=CG_ODD
    )
    return Case("commongen", backend, "dog, run, park", options)


SCORES = ["score: 1", "score: 2", "score: 3", "score: 4"]

CASES: dict[str, Callable[[], Case]] = {
    # one draft a step: history, feedback modes, selection, stop rules
    "history_full": lambda: Case(scored(), fake(feedback=SCORES, refine=["d1", "d2", "d3"]), options=dict(max_iterations=3, history="full")),
    "history_last": lambda: Case(scored(), fake(feedback=SCORES, refine=["d1", "d2", "d3"]), options=dict(max_iterations=3, history="last")),
    "history_none": lambda: Case(scored(), fake(feedback=SCORES, refine=["d1", "d2", "d3"]), options=dict(max_iterations=3, history="none")),
    "feedback_generic": lambda: Case(scored(generic_feedback="Make it better."), fake(refine=["d1", "d2"]), options=dict(max_iterations=2, feedback_mode="generic")),
    "feedback_none_own_template": lambda: Case("commongen", fake(generate=["A dog."], refine=["A dog runs.", "A dog runs in the park."]), "dog, runs, park", dict(max_iterations=2, feedback_mode="none")),
    "feedback_none_no_template": lambda: Case(scored(), fake(refine=["d1"]), options=dict(max_iterations=1, feedback_mode="none")),
    "select_last_skips_final_critique": lambda: Case(scored(), fake(feedback=["score: 5", "score: 2"], refine=["d1"]), options=dict(max_iterations=1, select="last")),
    "select_last_final_feedback": lambda: Case(scored(), fake(feedback=["score: 5", "score: 2"], refine=["d1"]), options=dict(max_iterations=1, select="last", final_feedback=True)),
    "select_best_ties_to_later": lambda: Case(scored(), fake(feedback=["score: 5", "score: 7", "score: 7", "score: 2"], refine=["d1", "d2", "d3"]), options=dict(max_iterations=3, select="best")),
    "stop_on_no_change": lambda: Case(scored(), fake(feedback=["score: 1"], refine=[" d0 "]), options=dict(max_iterations=3)),
    "no_change_ignored": lambda: Case(scored(), fake(feedback=["score: 1", "score: 1"], refine=["d0", "d2"]), options=dict(max_iterations=2, stop_on_no_change=False)),
    "stop_contains": lambda: Case(scored(), fake(feedback=["meh score: 1", "LGTM score: 2"], refine=["d1", "d2"]), options=dict(stop_contains=["lgtm"])),
    "stop_matches": lambda: Case(scored(), fake(feedback=["meh score: 1", "all good: ship it score: 2"], refine=["d1", "d2"]), options=dict(stop_matches=[r"ship\s+it"])),
    "stop_on_feedback_off": lambda: Case(scored(stop_contains=["done"]), fake(feedback=["done score: 1"] * 3, refine=["d1", "d2"]), options=dict(max_iterations=2, stop_on_feedback=False)),
    "score_threshold": lambda: Case(scored(), fake(feedback=["score: 3", "score: 9"], refine=["d1", "d2"]), options=dict(score_threshold=8)),
    "max_iterations_0": lambda: Case(scored(), fake(feedback=["score: 1"]), options=dict(max_iterations=0)),
    "max_iterations_1": lambda: Case(scored(), fake(feedback=SCORES, refine=["d1"]), options=dict(max_iterations=1)),
    "max_iterations_3_best": lambda: Case(scored(), fake(feedback=SCORES, refine=["d1", "d2", "d3"]), options=dict(max_iterations=3, select="best")),
    # parse errors, backend errors, budgets
    "parse_retries": lambda: Case(scored(), fake(generate=["", "d0"], feedback=["no number", BOOM, "still none", "score: 6", "bad", "bad", "bad"], refine=["d1"]), options=dict(max_iterations=1, final_feedback=True, seed=3)),
    "parse_retries_exhausted_refine": lambda: Case(scored(), fake(feedback=["score: 1"], refine=["", "", ""]), options=dict(max_iterations=2)),
    "transient_then_ok": lambda: Case(scored(), fake(generate=[BOOM, "d0"], feedback=[BOOM, "score: 2", "score: 3"], refine=["d1"]), options=dict(max_iterations=1)),
    "backend_keeps_failing": lambda: Case(scored(), fake(feedback=["score: 1"], refine=[BOOM] * 3), options=dict(backend_retries=2)),
    "backend_error_mid_run": lambda: Case(scored(), fake(feedback=["score: 1", BackendError("bad request")], refine=["d1"]), options=dict(max_iterations=3)),
    "backend_error_first_call": lambda: Case(scored(), fake(generate=[BackendError("down")])),
    "token_budget": lambda: Case(scored(), fake(feedback=["score: 1"] * 5, refine=["d1", "d2", "d3"]), options=dict(max_total_tokens=10)),
    "time_budget_before_first_call": lambda: Case(scored(), fake(), options=dict(max_seconds=1e-9)),
    "time_budget_mid_call": lambda: Case(scored(), fake(feedback=["score: 1"], refine=["d1"], latency={"refine": 10.0}), options=dict(max_seconds=0.5)),
    "deltas": lambda: Case(scored(), fake(generate=["a first draft"], feedback=["not yet score: 2", "score: 9"], refine=["a better draft"]), options=dict(score_threshold=9), deltas=True),
    "two_backends": lambda: Case(scored(), fake(refine=["d1"]), options=dict(max_iterations=1, final_feedback=True), feedback_model=FakeBackend({"feedback": ["score: 1", "score: 2"]}, name="critic")),
    # a verifier: verifier modes, verified selection, accept not_worse
    "verifier_self_select_verified": lambda: Case(words(), fake(generate=["a dog"], feedback=["score: 3", "score: 5", "score: 4"], refine=["a dog in a park", "a dog runs"]), "dog, runs, park", dict(max_iterations=2, select="verified")),
    "select_verified_done_beats_score": lambda: Case(words(), fake(generate=["a dog runs"], feedback=["done score: 3", "score: 8"], refine=["a dog runs fast"]), "dog, runs, park", dict(max_iterations=1, select="verified", stop_on_feedback=False, final_feedback=True)),
    "verifier_verifier": lambda: Case(words(), fake(generate=["a dog"], refine=["a dog in a park", "a dog runs in a park"]), "dog, runs, park", dict(verifier_mode="verifier")),
    "verifier_hybrid": lambda: Case(words(), fake(generate=["a dog"], feedback=["done score: 9", "done score: 9"], refine=["a dog runs in a park"]), "dog, runs, park", dict(verifier_mode="hybrid")),
    "verifier_hybrid_commongen": lambda: Case("commongen", fake(generate=["A dog runs."], feedback=[CG_DONE, json.dumps({"missing_concepts": ["frisbee"], "commonsense": "NONE"})], refine=["A dog can catch a frisbee."]), "dog, frisbee, catch", dict(verifier_mode="hybrid")),
    "accept_not_worse_rejects_worse": lambda: Case(words(), fake(generate=["a dog runs"], feedback=["score: 2", "done score: 6"], refine=["a cat", "a dog runs in a park"]), "dog, runs, park", dict(max_iterations=3, accept="not_worse")),
    "accept_not_worse_rejects_echo": lambda: Case(words(), fake(generate=["a dog runs"], feedback=["score: 2", "score: 2"], refine=["a dog runs", "a dog runs", "a dog runs"]), "dog, runs, park", dict(max_iterations=2, accept="not_worse")),
    "accept_not_worse_greedy_echo_stops": lambda: Case(words(temperature=0.0), fake(generate=["a dog runs"], feedback=["score: 2"], refine=["a dog runs"]), "dog, runs, park", dict(max_iterations=2, accept="not_worse")),
    # several samples on a verifier task
    "samples3_critic_breaks_tie": lambda: commongen(["A dog runs.", "A dog is running.", "A dog."], ["A dog runs in the park.", "A dog.", "A dog runs."], [CG_PARK, CG_ODD, CG_DONE], samples=3, max_iterations=1, judging=False),
    "samples4_rejected_then_accepted": lambda: commongen(["A dog runs.", "A dog runs.", "A dog.", "A dog."], ["A dog runs fast.", "A dog runs home.", "A dog.", "A cat.", "A dog runs in the park.", "A dog.", "A dog.", "A dog."], samples=4, max_iterations=2, judging=False),
    "samples2_all_echo_parent": lambda: commongen(["A dog runs.", "A dog."], ["A dog runs.", "A  dog runs."], samples=2, max_iterations=1),
    "samples3_final_feedback_off": lambda: commongen(["A dog.", "A dog.", "A cat."], ["A dog runs.", "A dog is running.", "A dog."], samples=3, max_iterations=1, judging=False),
    "samples3_final_feedback_on": lambda: commongen(["A dog.", "A dog.", "A cat."], ["A dog runs.", "A dog is running.", "A dog."], [CG_ODD, CG_PARK, CG_DONE, CG_ODD], samples=3, max_iterations=1, final_feedback=True, judging=False),
    "samples_empty_refinements_echo": lambda: commongen(["A dog.", "A dog runs."], ["", "  "], samples=2, max_iterations=1),
    "samples_tie_critique_fails": lambda: commongen(["A dog runs.", "A dog is running."], ["A dog runs in the park.", "A dog."], [BackendError("critic down"), CG_ODD], samples=2, max_iterations=1, judging=False),
    "preset_best_commongen": lambda: commongen(["A dog.", "A dog runs.", "A dog is running.", "A dog."], ["A dog runs in the park."] * 4, [CG_PARK, CG_ODD, CG_DONE], preset="best", judging=False),
    "samples_verifier_mode": lambda: Case(words(), fake(generate=["a dog", "a dog runs"], refine=["a dog runs", "a dog runs in a park"]), "dog, runs, park", dict(samples=2, verifier_mode="verifier", max_iterations=2)),
    # answers and votes
    "gsm8k_votes4": lambda: Case("gsm8k", FakeBackend({"generate": [PROGRAMS["12"], PROGRAMS["18a"], PROGRAMS["crash"], PROGRAMS["18b"]]}), "Nine apples twice: how many?", dict(samples=4, max_iterations=0, ways=("program",)), reference="18"),
    "gsm8k_votes3_round": lambda: Case("gsm8k", FakeBackend({"generate": [PROGRAMS["12"], PROGRAMS["crash"], PROGRAMS["18a"]], "feedback": ["# it is not correct"] * 3, "refine": [PROGRAMS["18b"], PROGRAMS["18a"], PROGRAMS["12"]]}), "Nine apples twice: how many?", dict(samples=3, max_iterations=1, final_feedback=True, ways=("program",)), reference="18"),
    # issue 31: samples written two ways in turn, weighted votes, a disputed draft's refinement shown the others
    "gsm8k_ways_votes5": lambda: Case("gsm8k", FakeBackend({"generate": [PROGRAMS["18a"], "9 twice is 12.\nThe answer is 12.", PROGRAMS["18b"], "The answer is 99.", PROGRAMS["12"]]}), "Nine apples twice: how many?", dict(samples=5, max_iterations=0, ways=("program", "steps")), reference="18"),
    "gsm8k_ways_disputed_round": lambda: Case("gsm8k", FakeBackend({"generate": [PROGRAMS["18a"], "9 twice is 12.\nThe answer is 12.", PROGRAMS["crash"]], "refine": [PROGRAMS["18b"]]}), "Nine apples twice: how many?", dict(samples=3, max_iterations=1, verifier_mode="verifier", ways=("program", "steps")), reference="18"),
    "gsm8k_ways_auto": lambda: Case("gsm8k", FakeBackend({"generate": [PROGRAMS["18a"], "The answer is 12.", PROGRAMS["18b"], "9 * 2 = 18.\nThe answer is 18."]}), "Nine apples twice: how many?", dict(strategy="auto", max_total_tokens=10_000, ways=("program", "steps")), reference="18"),
    "sum_votes_round": lambda: Case(sums(), fake(generate=["1+2 = 4", "1+2 = 3", "1+2 = 4"], feedback=["wrong", "correct"], refine=["1+2 = 3", "1+2 = 3", "1+2 = 5"]), "1, 2", dict(samples=3, max_iterations=2)),
    # the auto strategy at a few budgets
    "auto_large_budget": lambda: Case(words(), fake(generate=["a dog", "a dog"], feedback=["score: 2"] * 6, refine=["a dog", "a dog", "a dog runs", "a dog", "a dog", "a dog", "a dog runs in a park", "a dog", "a dog", "a dog"]), "dog, runs, park", dict(strategy="auto", max_total_tokens=100_000, max_iterations=4)),
    "auto_budget_pays_no_round": lambda: Case(words(), fake(generate=["a dog", "a dog"], feedback=["score: 2"] * 4, refine=["a dog runs"] * 4), "dog, runs, park", dict(strategy="auto", max_total_tokens=20)),
    "auto_budget_shrinks_width": lambda: Case(words(), fake(generate=["a dog", "a dog"], feedback=["score: 2"] * 6, refine=["a dog"] * 2 + ["a dog runs"] * 8), "dog, runs, park", dict(strategy="auto", max_total_tokens=75, max_iterations=3)),
    # issue 31: width first: spread scores widen to 4 first drafts before the round; an easy input stops at one
    "auto_width_first": lambda: Case(words(), fake(generate=["a dog", "a dog runs", "a park", "dog runs"], feedback=["score: 2"] * 4, refine=["a dog runs in a park"] * 4), "dog, runs, park", dict(strategy="auto", max_total_tokens=100_000, max_iterations=1)),
    "auto_easy_input": lambda: Case(words(), fake(generate=["a dog runs in a park"]), "dog, runs, park", dict(strategy="auto", max_total_tokens=100_000)),
    "auto_votes_waves": lambda: Case(sums(), fake(generate=["1+2 = 3", "1+2 = 4", "1+2 = 3", "1+2 = 4", "1+2 = 3", "1+2 = 3"], feedback=["correct"] * 2), "1, 2", dict(strategy="auto", max_total_tokens=10_000)),
    "auto_votes_waves_budget": lambda: Case(sums(), fake(generate=["1+2 = 3", "1+2 = 4", "1+2 = 3", "1+2 = 4"], feedback=["wrong"] * 2, refine=["1+2 = 3"] * 4), "1, 2", dict(strategy="auto", max_total_tokens=27)),
    "auto_votes_error_mid_wave": lambda: Case(sums(), fake(generate=["1+2 = 3", "1+2 = 4", "1+2 = 3", "1+2 = 4"]), "1, 2", dict(strategy="auto", max_total_tokens=30)),
}  # fmt: skip


# --- the record -------------------------------------------------------------------------


def short(text: str | None) -> str | None:
    """A prompt as the golden file keeps it: whole when short, else its length and digest."""
    if text is None or len(text) <= SHORT:
        return text
    return f"<{len(text)} chars sha256:{hashlib.sha256(text.encode()).hexdigest()[:16]}>"


def digest(value: Any) -> str | None:
    if value is None:
        return None
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:12]


def request_record(r: Any) -> dict[str, Any]:
    return {
        "role": r.role,
        "seed": r.seed,
        "temperature": r.temperature,
        "max_tokens": r.max_tokens,
        "stop": r.stop,
        "schema": digest(r.json_schema),
        "system": digest(r.system),
        "prompt": short(r.prompt),
    }


def step_record(step: Step) -> str:
    """One streamed step in a line: its kind and what the loop decided there."""
    if isinstance(step, DraftStep):
        chosen = [i for i, c in enumerate(step.candidates) if c.chosen]
        call = step.call.attempt if step.call else None
        return (
            f"draft it={step.iteration} accepted={step.accepted} attempt={call} "
            f"candidates={len(step.candidates)} chosen={chosen} draft={step.draft!r}"
        )
    if isinstance(step, FeedbackStep):
        fb = step.feedback
        return f"feedback it={step.iteration} source={fb.source} done={fb.done} total={fb.total} parse_error={fb.parse_error is not None}"
    if isinstance(step, DecisionStep):
        reason = step.reason.value if step.reason else None
        return f"decision it={step.iteration} stop={step.stop} reason={reason} detail={step.detail!r}"
    if isinstance(step, CallStep):
        c = step.call
        return f"call {c.role} it={c.iteration} attempt={c.attempt} ok={c.ok} error={c.error!r}"
    if isinstance(step, DeltaStep):
        return f"delta {step.role} it={step.iteration} attempt={step.attempt} {step.text!r}"
    assert isinstance(step, ResultStep)
    return "result"


def without_wall_clock(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_wall_clock(v) for k, v in value.items() if k not in WALL_CLOCK}
    if isinstance(value, list):
        return [without_wall_clock(v) for v in value]
    if isinstance(value, str):
        return ELAPSED.sub(r"\1<t>s", value)
    return value


def record(name: str) -> dict[str, Any]:
    """Case ``name`` run once: its requests, steps and result, without wall-clock values."""
    case = CASES[name]()
    options = {"retry_base_delay": 0.0, **case.options}
    engine = SelfRefine(case.task, case.model, feedback_model=case.feedback_model, **options)

    async def collect() -> list[Step]:
        return [s async for s in engine.astream(case.input, case.reference, deltas=case.deltas)]

    steps = asyncio.run(collect())
    result = steps[-1]
    assert isinstance(result, ResultStep)
    models = [case.model] + ([case.feedback_model] if case.feedback_model else [])
    return without_wall_clock(
        {
            "requests": [request_record(r) for m in models for r in m.requests],
            "cancelled": [r.role for m in models for r in m.cancelled],
            "steps": [step_record(s) for s in steps],
            "result": result.result.model_dump(mode="json", exclude_defaults=True, exclude={"fails"}),
        }
    )


def dumps(value: Any, indent: int = 0) -> str:
    """JSON with one short value a line: a list or object whose one-line form is longer
    than ``LINE`` is spread over lines, its items indented by one."""
    line = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if len(line) <= LINE or not isinstance(value, (dict, list)) or not value:
        return line
    pad = " " * (indent + 1)
    if isinstance(value, dict):
        items = [f"{pad}{json.dumps(k, ensure_ascii=False)}:{dumps(v, indent + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"
    items = [pad + dumps(v, indent + 1) for v in value]
    return "[\n" + ",\n".join(items) + "\n" + " " * indent + "]"


# --- the tests --------------------------------------------------------------------------


def golden() -> dict[str, Any]:
    return json.loads(GOLDEN.read_text(encoding="utf-8"))


def test_the_golden_file_holds_every_case_and_no_other():
    assert sorted(golden()) == sorted(CASES)


@pytest.mark.parametrize("name", list(CASES))
def test_the_run_is_the_recorded_trajectory(name):
    want = golden().get(name)
    assert want is not None, f"no golden trajectory for {name!r}: regenerate the file (see the module docstring)"
    got = record(name)
    if got != want:
        diff = difflib.unified_diff(dumps(want).splitlines(), dumps(got).splitlines(), "golden", "now", lineterm="")
        pytest.fail(f"case {name!r} ran differently from its golden trajectory:\n" + "\n".join(list(diff)[:120]))


def write() -> None:
    """Regenerate the golden file from the code on the path (a behaviour change: see above)."""
    data = {name: record(name) for name in CASES}
    GOLDEN.write_text(dumps(data) + "\n", encoding="utf-8")
    print(f"wrote {len(data)} cases to {GOLDEN} ({GOLDEN.stat().st_size} bytes)")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/engine/test_trajectories.py --write  (regenerates the golden file)")
    write()
