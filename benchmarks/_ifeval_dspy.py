"""DSPy side of benchmarks/ifeval_dspy.py; runs in benchmarks/.venv-peers (DSPy pinned there).

    benchmarks/.venv-peers/bin/python benchmarks/_ifeval_dspy.py --point dspy-bestofn-n4:bestofn:4 \
        --api-base http://127.0.0.1:PORT/v1 --inputs IN.jsonl --out DIR --temperature 0.7 --max-tokens 600

``dspy.BestOfN`` or ``dspy.Refine`` over a plain ``request -> reply`` predictor, on IFEval
prompts one after another (each prompt through every ``--point`` in turn, so a run stopped
early leaves the points on the same prompts); the reward is the share of the request's
derived checks (ours, given in ``--inputs`` beside each prompt, as the engine derived them)
that the reply passes, threshold 1.0. Each finished prompt is appended to
``DIR/<point>.jsonl`` and skipped on a rerun; no prompt starts after ``--stop-at``. Calls
and tokens are counted as benchmarks/_peers_dspy.py counts them (DSPy's global LM history:
every attempt and Refine's advice calls). The official verifiers score the replies later,
in the project's environment (benchmarks/ifeval_dspy.py): this side never sees them.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import time
from pathlib import Path

import dspy
from _peers_dspy import _FAILED, _rollout_id
from dspy.clients import base_lm

from selfrefine.checks.instructions import InstructionChecks, build_checks

CHECKS: dict[str, InstructionChecks | None] = {}  # request text -> its derived checks (None: none derived)


def reward(args, pred) -> float:
    """The share of the request's derived checks that the reply passes (no checks: 1.0)."""
    checks = CHECKS[args["request"]]
    return 1.0 if checks is None else checks(args["request"], pred.reply or "").score


def build(system: str, n: int, lm: dspy.LM):
    base = dspy.Predict("request -> reply")
    base.set_lm(lm)
    cls = dspy.Refine if system == "refine" else dspy.BestOfN
    return cls(module=base, N=n, reward_fn=reward, threshold=1.0)


def run_one(program, row: dict) -> dict:
    rewards: list[float] = []
    first: list[str] = []  # the first attempt's reply (rollout id 0)

    def recording(args, pred):  # the modules keep the plain reward's source for their advice
        value = reward(args, pred)
        rewards.append(value)
        if _rollout_id() == 0:
            first.append(pred.reply or "")
        return value

    program.reward_fn = recording
    base_lm.GLOBAL_HISTORY.clear()
    printed, error, pred = io.StringIO(), None, None
    t0 = time.perf_counter()
    try:
        with contextlib.redirect_stdout(printed):
            pred = program(request=row["prompt"])
    except Exception as exc:  # noqa: BLE001 - a crash is a measured outcome
        if "Connection refused" in str(exc):
            raise SystemExit(f"the server at the API base stopped: {exc}") from None
        error = f"{type(exc).__name__}: {exc}"[:500]
    failed = _FAILED.findall(printed.getvalue())
    if any("Connection refused" in msg for _, msg in failed):
        raise SystemExit("the server at the API base stopped during an attempt")
    if failed and error is None:
        error = "; ".join(f"attempt with rollout id {rid} failed: {msg}" for rid, msg in failed)[:500]
    usage = [h.get("usage") or {} for h in base_lm.GLOBAL_HISTORY]
    return {
        "key": row["key"],
        "output": (getattr(pred, "reply", "") or "") if pred is not None else "",
        "first": first[0] if first else "",
        "rewards": rewards,
        "calls": len(base_lm.GLOBAL_HISTORY),
        "prompt_tokens": sum(int(u.get("prompt_tokens") or 0) for u in usage),
        "completion_tokens": sum(int(u.get("completion_tokens") or 0) for u in usage),
        "seconds": round(time.perf_counter() - t0, 2),
        "error": error,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--point", action="append", required=True, help="NAME:bestofn|refine:N (repeatable)")
    p.add_argument("--api-base", required=True)
    p.add_argument("--model-name", default="qwen2.5-coder-1.5b-instruct")
    p.add_argument("--inputs", type=Path, required=True, help="JSONL rows: key, prompt, checks (dumps)")
    p.add_argument("--out", type=Path, required=True, help="a directory: one NAME.jsonl per point")
    p.add_argument("--stop-at", type=float, default=float("inf"), help="start no prompt after this (epoch seconds)")
    p.add_argument("--temperature", type=float, required=True, help="the base LM's (each attempt: the module's)")
    p.add_argument("--max-tokens", type=int, required=True)
    p.add_argument("--advice-max-tokens", type=int, default=1024, help="for Refine's advice (OfferFeedback)")
    args = p.parse_args()

    def lm(max_tokens: int) -> dspy.LM:
        return dspy.LM(f"openai/{args.model_name}", api_base=args.api_base, api_key="local",
                       temperature=args.temperature, max_tokens=max_tokens, cache=False, num_retries=2)  # fmt: skip

    dspy.configure(lm=lm(args.advice_max_tokens))  # Refine writes its advice with the global LM
    answer_lm = lm(args.max_tokens)
    points = [(name, system, int(n)) for name, system, n in (p.split(":") for p in args.point)]
    inputs = [json.loads(x) for x in args.inputs.read_text().splitlines() if x.strip()]
    args.out.mkdir(parents=True, exist_ok=True)
    done = {name: _keys(args.out / f"{name}.jsonl") for name, _, _ in points}
    for row in inputs:
        if time.time() > args.stop_at:
            print("stopping: past --stop-at", file=sys.stderr, flush=True)
            break
        checks = build_checks(row["checks"])[0]
        CHECKS[row["prompt"]] = InstructionChecks(checks) if checks else None
        for name, system, n in points:
            if row["key"] in done[name]:
                continue
            got = run_one(build(system, n, answer_lm), row)
            with (args.out / f"{name}.jsonl").open("a", encoding="utf-8") as f:
                f.write(json.dumps(got, ensure_ascii=False) + "\n")
            print(f"{name} key {got['key']}: rewards {got['rewards']} calls {got['calls']} tokens "
                  f"{got['prompt_tokens']}+{got['completion_tokens']} {got['seconds']:.0f}s {got['error'] or ''}",
                  file=sys.stderr, flush=True)  # fmt: skip


def _keys(path: Path) -> set[int]:
    return {json.loads(x)["key"] for x in path.read_text().splitlines() if x.strip()} if path.exists() else set()


if __name__ == "__main__":
    main()
