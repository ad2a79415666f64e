"""Votes across ways of solving, measured from one pool of samples per problem.

    .venv/bin/python benchmarks/ways_pool.py --rows 0-29 --base-url http://127.0.0.1:18080/v1
    .venv/bin/python benchmarks/ways_pool.py --rows 0-29 --report-only

Each gsm8k problem gets ``--samples`` first drafts through the library (``samples=K,
max_iterations=0``, gsm8k's ways in turn: the greedy program, the greedy step-by-step answer,
then sampled ones at the task's sampling temperature, seeds 0..K-1), behind the frontier's
response cache, so ``ours-kK-r0`` and ``ours-auto-B`` runs over the same rows later reuse
these calls. Each sample's way, answer and correctness (by the reference, only here, never in
the loop) is stored per row in ``runs/ways_pool/gsm8k.jsonl``; the report then reads the
selection rules off the same samples, paired: one greedy program, one greedy step-by-step
answer, votes of the first k samples of one way or of both ways in turn (raw and
way-weighted), and "any sample correct" (the ceiling no selection can pass).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from _peers import ROOT, select_rows
from vs_peers import MODEL_NAME

from selfrefine.backends.base import CompletionRequest
from selfrefine.backends.openai_compat import OpenAIBackend
from selfrefine.backends.probabilities import answer_probabilities
from selfrefine.engine.loop import SelfRefine
from selfrefine.engine.scoring.questions import TOP_LOGPROBS
from selfrefine.engine.scoring.votes import majority_answer, tally, way_weights
from selfrefine.evaluation.response_cache import CachedBackend, ResponseCache
from selfrefine.evaluation.stats import bootstrap_mean, paired_bootstrap_diff
from selfrefine.tasks.gsm8k import GSM8K, to_number

OUT = ROOT / "runs" / "ways_pool" / "gsm8k.jsonl"
TASK = GSM8K()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", default="0-29", help="inclusive 0-based rows of gsm8k.dev.jsonl, FIRST-LAST")
    p.add_argument("--samples", type=int, default=8)
    p.add_argument("--base-url", default="http://127.0.0.1:18080/v1")
    p.add_argument("--cache", type=Path, default=ROOT / "runs" / "frontier" / "responses.sqlite")
    p.add_argument("--ways", default="program,steps", help="the ways in turn (gsm8k's: program, steps, quantities)")
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--judge", action="store_true", help="also ask the task's judge (P(Yes), 'reading') on each sample")
    p.add_argument("--report-only", action="store_true")
    args = p.parse_args(argv)
    first, last = (int(x) for x in args.rows.split("-"))
    args.span = (first, last)
    args.ways = tuple(args.ways.split(","))
    return args


def stored(out: Path) -> dict[str, dict]:
    if not out.exists():
        return {}
    return {r["id"]: r for r in map(json.loads, out.read_text().splitlines()) if r.get("samples")}


async def draw(args: argparse.Namespace) -> None:
    done = stored(args.out)

    def need(row: dict | None) -> bool:  # not drawn yet, or not judged yet when asked
        return row is None or (args.judge and any("judged" not in x for x in row["samples"]))

    todo = [e for e in select_rows("gsm8k", *args.span) if need(done.get(e.id))]
    backend = CachedBackend(
        OpenAIBackend(MODEL_NAME, base_url=args.base_url, request_n="off"), ResponseCache(args.cache)
    )
    engine = SelfRefine("gsm8k", backend, samples=args.samples, max_iterations=0, ways=args.ways)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    try:
        for example in todo:
            result = await engine.arun(example.input, example.reference)
            target = to_number(example.reference)
            samples = []
            for c in result.iterations[0].candidates if result.iterations else []:
                answer = c.verification.answer if c.verification else None
                correct = (
                    answer is not None
                    and target is not None
                    and abs(float(answer) - target) <= 1e-4 * max(1, abs(target))
                )
                sample = {"way": c.way, "answer": answer, "correct": bool(correct)}
                if args.judge and answer is not None:
                    sample["judged"] = await judged(backend, example.input, c.draft)
                samples.append(sample)
            tokens = result.usage.prompt_tokens + result.usage.completion_tokens
            row = {"id": example.id, "samples": samples, "tokens": tokens, "error": result.error}
            done.pop(example.id, None)
            with args.out.open("a") as f:
                f.write(json.dumps(row) + "\n")
            print(example.id, [(s["way"][0], s["answer"], s["correct"]) for s in samples], tokens, flush=True)
    finally:
        await backend.aclose()


async def judged(backend: CachedBackend, question: str, draft: str) -> float | None:
    """P(Yes) of gsm8k's judge question ("reading") on a draft, asked as the loop asks it."""
    prompt = TASK.render("judge_reading", question, draft=draft)
    request = CompletionRequest(
        role="judge", prompt=prompt, max_tokens=1, temperature=0.0, seed=0, top_logprobs=TOP_LOGPROBS
    )
    steps = (await backend.complete(request)).top_logprobs
    found = answer_probabilities(steps[0], ("Yes", "No")) if steps else None
    return found["Yes"] if found else None


def judge_broken(samples: list[dict]) -> bool:
    """The vote, its tie (no single top answer) broken by the judge's mean P(Yes) per answer."""
    counts = tally([s["answer"] for s in samples])
    if not counts:
        return False
    top = max(counts.values())
    tied = [a for a, n in counts.items() if n == top]
    if len(tied) > 1:

        def mean_judged(a: str) -> float:
            got = [s["judged"] for s in samples if s["answer"] == a and s.get("judged") is not None]
            return sum(got) / len(got) if got else -1.0

        tied.sort(key=mean_judged, reverse=True)
    return any(s["correct"] for s in samples if s["answer"] == tied[0])


def judge_best(samples: list[dict]) -> bool:
    """The sample the judge scores highest (ties: the earlier)."""
    scored = [s for s in samples if s.get("judged") is not None]
    return max(scored, key=lambda s: s["judged"])["correct"] if scored else False


def voted(samples: list[dict], weighted: bool) -> bool:
    """Whether the majority of these samples' answers is correct (ties: the first seen)."""
    answers = [s["answer"] for s in samples]
    weights = way_weights([s["way"] for s in samples], answers) if weighted else None
    top = majority_answer(tally(answers, weights))
    return any(s["correct"] for s in samples if s["answer"] == top) if top is not None else False


def rules(samples: list[dict]) -> dict[str, bool]:
    program = [s for s in samples if s["way"] == "program"]
    other = next(s for s in samples if s["way"] != "program")
    out = {"one greedy program": program[0]["correct"], f"one greedy {other['way']}": other["correct"]}
    for k in (2, 4, 8):
        if len(program) >= k:
            out[f"vote of {k} programs"] = voted(program[:k], False)
        if len(samples) >= k:
            out[f"vote of {k}, ways in turn"] = voted(samples[:k], False)
            out[f"vote of {k}, ways in turn, weighted"] = voted(samples[:k], True)
    if any("judged" in s for s in samples):
        for k in (2, 4):
            if len(program) >= k:
                out[f"vote of {k} programs, ties to the judge"] = judge_broken(program[:k])
            if len(samples) >= k:
                out[f"vote of {k}, ways in turn, ties to the judge"] = judge_broken(samples[:k])
        out["the judge's best of all"] = judge_best(samples)
    out[f"any of {len(samples)} correct"] = any(s["correct"] for s in samples)
    return out


def report(args: argparse.Namespace) -> str:
    rows = [r for r in stored(args.out).values() if args.span[0] <= int(r["id"].rsplit("-", 1)[-1]) <= args.span[1]]
    k = min((len(r["samples"]) for r in rows), default=0)  # every row read with the same number of samples
    table = [rules(r["samples"][:k]) for r in rows if k >= 2]
    if any(set(t) != set(table[0]) for t in table):  # judged and unjudged rows: the judged ones only
        rows = [r for r in rows if all("judged" in s or s["answer"] is None for s in r["samples"])]
        table = [rules(r["samples"][:k]) for r in rows]
    if not table:
        return "no rows yet"
    base = [float(t["one greedy program"]) for t in table]
    lines = [
        f"gsm8k rows {args.span[0]}-{args.span[1]}: n={len(table)}, tokens/problem for the pool {sum(r['tokens'] for r in rows) / len(rows):.0f}",
        "| rule | solved [95%] | − one greedy program [95%] |",
        "|---|---|---|",
    ]
    for name in table[0]:
        vals = [float(t[name]) for t in table]
        m, d = bootstrap_mean(vals), paired_bootstrap_diff(base, vals)
        lines.append(
            f"| {name} | {m.estimate:.3f} [{m.low:.3f}, {m.high:.3f}] | {d.estimate:+.3f} [{d.low:+.3f}, {d.high:+.3f}] |"
        )
    text = "\n".join(lines)
    print(text)
    return text


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if not args.report_only:
        asyncio.run(draw(args))
    report(args)


if __name__ == "__main__":
    sys.exit(main())
