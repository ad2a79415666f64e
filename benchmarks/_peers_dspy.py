"""DSPy side of benchmarks/vs_peers.py; runs in benchmarks/.venv-peers (DSPy pinned there).

    benchmarks/.venv-peers/bin/python benchmarks/_peers_dspy.py --task commongen --system refine \
        --api-base http://127.0.0.1:PORT/v1 --limit 20 --out runs/peers

One system (``predict`` / ``bestofn`` / ``refine``) on the first ``--limit`` inputs of a
task (or on ``--rows FIRST-LAST``, inclusive 0-based rows of its dev file), one example after another; each finished example is appended to
``OUT/<task>/dspy-<system>.jsonl`` and skipped on a rerun. Calls and tokens come from
DSPy's global LM history (the copies that Refine and BestOfN make of the LM keep a history
of their own, so the per-LM one would miss them).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import sys
import time
from pathlib import Path

import dspy
from _peers import (
    DATA_DIR,
    REWARDS,
    Record,
    append_record,
    metric,
    normalise,
    parse_span,
    read_records,
    records_path,
    select_examples,
    select_rows,
)
from dspy.clients import base_lm


class ConceptsToSentence(dspy.Signature):
    """Write one fluent, sensible sentence that uses every concept in a list. Any word form counts ("cut" may
    appear as "cuts" or "cutting"). With many concepts, a long sentence is fine, but it must stay one coherent
    scene."""

    concepts: str = dspy.InputField(desc="comma-separated concepts")
    sentence: str = dspy.OutputField(desc="one sentence on one line")


class SolveWithProgram(dspy.Signature):
    """Solve a math word problem by writing a Python function `solution()` that computes the answer step by step
    and returns it as a number. Name each quantity after what it means, and write only the code."""

    question: str = dspy.InputField()
    program: str = dspy.OutputField(desc="Python code defining `def solution():` that returns the answer")


SIGNATURES = {
    "commongen": (ConceptsToSentence, "concepts", "sentence"),
    "gsm8k": (SolveWithProgram, "question", "program"),
}
# Refine prints "Refine: Attempt failed with rollout id 0: ...", BestOfN "... Attempt 1 failed with rollout id 0"
_FAILED = re.compile(r"failed with rollout id (\d+): (.*)")


def build(system: str, task: str, n: int, lm: dspy.LM):
    signature, _, _ = SIGNATURES[task]
    base = dspy.Predict(signature)
    base.set_lm(lm)
    if system == "predict":
        return base
    cls = dspy.Refine if system == "refine" else dspy.BestOfN
    return cls(module=base, N=n, reward_fn=REWARDS[task], threshold=1.0)


def _rollout_id() -> int | None:
    """The rollout id of the attempt being scored: the LM copy of the predictor that made the
    last prediction in the trace (Refine and BestOfN give attempt i the id i). An attempt can
    fail after it was scored (Refine's advice call), so the failure messages cannot tell."""
    trace = dspy.settings.trace or []
    lm = getattr(trace[-1][0], "lm", None) if trace else None
    return lm.kwargs.get("rollout_id") if lm is not None else None


def run_example(program, system: str, task: str, example) -> Record:
    _, field_in, field_out = SIGNATURES[task]
    rewards: list[float] = []
    first: list[str] = []  # the answer of the first attempt (rollout id 0), if it got one
    if system != "predict":
        reward = REWARDS[task]

        def recording(args, pred):  # Refine/BestOfN kept the plain reward's source for their advice
            value = reward(args, pred)
            rewards.append(value)
            if _rollout_id() == 0:
                first.append(getattr(pred, field_out, "") or "")
            return value

        program.reward_fn = recording
    base_lm.GLOBAL_HISTORY.clear()
    printed = io.StringIO()
    error = None
    pred = None
    t0 = time.perf_counter()
    try:
        with contextlib.redirect_stdout(printed):
            pred = program(**{field_in: example.input})
    except Exception as exc:  # noqa: BLE001 - a crash is a measured outcome
        if "Connection refused" in str(exc):  # the server is gone: no outcome of DSPy's to record
            raise SystemExit(f"the server at the API base stopped: {exc}") from None
        error = f"{type(exc).__name__}: {exc}"[:500]
    seconds = time.perf_counter() - t0
    failed = _FAILED.findall(printed.getvalue())
    if any("Connection refused" in msg for _, msg in failed):
        raise SystemExit("the server at the API base stopped during an attempt")
    if failed and error is None:
        error = "; ".join(f"attempt with rollout id {rid} failed: {msg}" for rid, msg in failed)[:500]
    raw = (getattr(pred, field_out, "") or "") if pred is not None else ""
    output = normalise(task, raw)
    if system == "predict":
        one_step = output
    else:  # the first attempt's answer; nothing when that attempt raised before it answered
        one_step = normalise(task, first[0]) if first else ""
    usage = [h.get("usage") or {} for h in base_lm.GLOBAL_HISTORY]
    return Record(
        id=example.id,
        task=task,
        system=f"dspy-{system}",
        one_step=one_step,
        output=output,
        one_step_metric=metric(task, example, one_step),
        metric=metric(task, example, output),
        crashed=not output,
        error=error if error or output else "returned nothing",
        calls=len(base_lm.GLOBAL_HISTORY),
        prompt_tokens=sum(int(u.get("prompt_tokens") or 0) for u in usage),
        completion_tokens=sum(int(u.get("completion_tokens") or 0) for u in usage),
        cached_prompt_tokens=sum(int((u.get("prompt_tokens_details") or {}).get("cached_tokens") or 0) for u in usage),
        seconds=round(seconds, 3),
        load=round(os.getloadavg()[0], 2),
        rewards=rewards,
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", choices=sorted(SIGNATURES), required=True)
    p.add_argument("--system", choices=["predict", "bestofn", "refine"], required=True)
    p.add_argument("--api-base", required=True, help="the OpenAI-compatible server, e.g. http://127.0.0.1:8080/v1")
    p.add_argument("--model-name", default="qwen2.5-coder-1.5b-instruct")
    rows = p.add_mutually_exclusive_group(required=True)
    rows.add_argument("--limit", type=int, help="the first N rows of the task's dev file")
    rows.add_argument("--rows", help="FIRST-LAST: those rows (inclusive, 0-based) of the task's dev file")
    p.add_argument("--data-dir", type=Path, default=DATA_DIR, help="where the dev files are")
    p.add_argument("--n", type=int, default=3, help="Refine/BestOfN attempts")
    p.add_argument("--temperature", type=float, required=True)
    p.add_argument("--max-tokens", type=int, required=True, help="for the answers")
    p.add_argument("--advice-max-tokens", type=int, default=1024, help="for Refine's advice (OfferFeedback)")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--name", help="the system's name in the records and their file (default: dspy-SYSTEM)")
    args = p.parse_args()
    name = args.name or f"dspy-{args.system}"
    try:
        span = parse_span(args.rows) if args.rows else None
    except ValueError as exc:
        p.error(str(exc))

    def lm(max_tokens: int) -> dspy.LM:
        return dspy.LM(
            f"openai/{args.model_name}",
            api_base=args.api_base,
            api_key="local",
            temperature=args.temperature,
            max_tokens=max_tokens,
            cache=False,
            num_retries=2,
        )

    # Refine copies the module's LM for its attempts and writes its advice with the global
    # one: the answer gets our roles' token cap, the advice (two fields, ~4k-token prompt)
    # room enough not to be cut off mid-JSON, which would lose the advice.
    dspy.configure(lm=lm(args.advice_max_tokens))
    answer_lm = lm(args.max_tokens)
    path = records_path(args.out, args.task, name)
    done = read_records(path)
    chosen = (
        select_rows(args.task, *span, args.data_dir) if span else select_examples(args.task, args.limit, args.data_dir)
    )
    examples = [e for e in chosen if e.id not in done]
    print(f"{name} {args.task}: {len(examples)} to run, {len(done)} done", file=sys.stderr, flush=True)
    for example in examples:
        record = run_example(build(args.system, args.task, args.n, answer_lm), args.system, args.task, example)
        record = record.model_copy(update={"system": name})
        append_record(path, record)
        print(
            f"{name} {args.task} {record.id}: metric {record.one_step_metric:.3f} -> {record.metric:.3f}"
            f"  calls {record.calls}  tokens {record.prompt_tokens}+{record.completion_tokens}  "
            f"{record.seconds:.1f} s{'  CRASHED ' + (record.error or '') if record.crashed else ''}",
            file=sys.stderr,
            flush=True,
        )


if __name__ == "__main__":
    main()
