"""Issue 45's sections of docs/ifeval.md: the repair forms compared on the tuning rows, how
often a repair fixes its check (per kind and form), the refinement's own share against
sampling at matched tokens, and where the tokens go. Reads the rows benchmarks/ifeval.py
wrote (``--part run``); the figures of an earlier session whose rows were not kept come from
benchmarks/data/ifeval_summary_2026-11-27.json, said as such."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

FORMS = ("seq-4-focused", "seq-4-rewrite", "seq-4-history")
EARLIER = Path(__file__).resolve().parent / "data" / "ifeval_summary_2026-11-27.json"
Rows = dict[int, dict[str, Any]]
Loader = Callable[[str, str, Path], Rows]


def passed(row: dict[str, Any], which: str = "returned") -> bool:
    return all(row[which]["strict"])


def forms_table(load: Loader, out: Path, part: str = "tune") -> list[str]:
    """Each repair form on the same rows: its own first step (the sequential drafts) against
    what it returned, the prompts a repair ran on, and its tokens."""
    lines = [
        "| form | prompts | sequential drafts, prompt strict | returned | better / worse | prompts repaired | "
        "tokens/prompt | of them repairs |",
        "|---|---|---|---|---|---|---|---|",
    ]
    got = {name: load(name, part, out) for name in FORMS}
    keys = sorted(set.intersection(*(set(g) for g in got.values()))) if all(got.values()) else []
    for name in FORMS:
        rows = [got[name][k] for k in keys] if keys else list(got[name].values())
        if not rows:
            continue
        first = sum(passed(r, "draft0") for r in rows)
        final = sum(passed(r) for r in rows)
        better = sum(passed(r) and not passed(r, "draft0") for r in rows)
        worse = sum(passed(r, "draft0") and not passed(r) for r in rows)
        repaired = sum(1 for r in rows if r.get("refinements", 0))
        tokens = sum(r["tokens"] for r in rows) / len(rows)
        refine = sum(r.get("by_purpose", {}).get("refine", 0) for r in rows) / len(rows)
        lines.append(
            f"| {name.removeprefix('seq-4-')} | {len(rows)} | {first}/{len(rows)} | {final}/{len(rows)} | "
            f"{better} / {worse} | {repaired} | {tokens:.0f} | {refine:.0f} |"
        )
    return lines


def kinds_table(load: Loader, out: Path, part: str, names: tuple[str, ...] = FORMS) -> list[str]:
    """Per check kind and form: repairs tried, how many fixed their own check, how many were
    kept (fixed, and no check that passed broke)."""
    per: dict[str, dict[str, list[int]]] = {}
    for name in names:
        for row in load(name, part, out).values():
            for focus in row.get("focus", []):
                kind = focus.get("kind") or focus.get("check", "?")
                kind += " (continued)" if focus.get("form") == "extend" else ""  # a too-short draft's repair
                cell = per.setdefault(kind, {}).setdefault(name, [0, 0, 0])
                cell[0] += 1
                cell[1] += bool(focus.get("fixed"))
                cell[2] += bool(focus.get("kept"))
    if not per:
        return []
    lines = [
        "| check kind | " + " | ".join(n.removeprefix("seq-4-") for n in names) + " |",
        "|---" * (len(names) + 1) + "|",
    ]
    for kind in sorted(per):
        cells = [("{} tried, {} fixed, {} kept".format(*per[kind][n])) if n in per[kind] else "-" for n in names]
        lines.append(f"| {kind} | " + " | ".join(cells) + " |")
    return lines


def purposes_table(load: Loader, out: Path, part: str, names: tuple[str, ...]) -> list[str]:
    """Tokens per prompt by what the calls were for, and first drafts per prompt."""
    lines = ["| configuration | prompts | derivation | drafts | repairs / refinements | critique | judge | first drafts/prompt |",
             "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for name in names:
        rows = list(load(name, part, out).values())
        if not rows or "by_purpose" not in rows[0]:
            continue
        mean = lambda key, rows=rows: sum(r["by_purpose"].get(key, 0) for r in rows) / len(rows)  # noqa: E731
        drafts = sum(r.get("drafts0", 1) for r in rows) / len(rows)
        lines.append(
            f"| {name} | {len(rows)} | {mean('checks'):.0f} | {mean('generate'):.0f} | {mean('refine'):.0f} | "
            f"{mean('feedback'):.0f} | {mean('judge'):.0f} | {drafts:.2f} |"
        )
    return lines


def earlier_configs() -> list[str]:
    """The configurations an earlier session measured on the first 70 report rows, whose rows
    were not kept (today's one step reproduces its one step exactly: 0.400 at 273 tokens)."""
    if not EARLIER.exists():
        return []
    data = json.loads(EARLIER.read_text(encoding="utf-8"))["configurations"]
    lines = ["| configuration (2026-11-27) | prompts | prompt strict | Δ vs one step [95%] | better / worse | tokens/prompt | × one step's |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    for name, c in data.items():
        if name == "one-step":
            continue
        d, p = c["delta_vs_one_step"], c["prompt_strict"]
        lines.append(
            f"| {name} | {c['prompts']} | {p['estimate']:.3f} | {d['estimate']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}] | "
            f"{c['better']} / {c['worse']} | {c['tokens']} | {c['tokens'] / c['one_step_tokens']:.1f} |"
        )
    return lines


def earlier_derivation() -> dict[str, Any]:
    """The derivation's quality with the model asked on every row (2026-11-27's recorded replies)."""
    return json.loads(EARLIER.read_text(encoding="utf-8"))["derivation"] if EARLIER.exists() else {}


def drafts_only(row: dict[str, Any]) -> dict[str, Any]:
    """A repair run's row as its first step alone: the kept first draft returned, the repairs'
    tokens left out (the drafts are the same calls: one seed per sample)."""
    refine = row.get("by_purpose", {}).get("refine", 0)
    purposes = {k: v for k, v in row.get("by_purpose", {}).items() if k != "refine"}
    return {**row, "returned": row["draft0"], "output": row["first"], "tokens": row["tokens"] - refine,
            "by_purpose": purposes, "focus": [], "refinements": 0}  # fmt: skip


def share_table(load: Loader, out: Path, part: str, pairs: list[tuple[str, str]]) -> list[str]:
    """Configuration A against B on the prompts both ran: prompt strict, the paired
    difference with its 95% interval, better / worse, and tokens per prompt."""
    from selfrefine.evaluation.stats import paired_bootstrap_diff

    lines = ["| A | B | prompts | A prompt strict | B prompt strict | A − B [95%] | better / worse | A tokens | B tokens |",
             "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for a, b in pairs:
        ra, rb = load(a, part, out), load(b, part, out)
        keys = [k for k in ra if k in rb]
        if not keys:
            continue
        xa, xb = [float(passed(ra[k])) for k in keys], [float(passed(rb[k])) for k in keys]
        d = paired_bootstrap_diff(xb, xa)
        ta, tb = (sum(r[k]["tokens"] for k in keys) / len(keys) for r in (ra, rb))
        better, worse = sum(x > y for x, y in zip(xa, xb)), sum(x < y for x, y in zip(xa, xb))
        lines.append(
            f"| {a} | {b} | {len(keys)} | {sum(xa) / len(keys):.3f} | {sum(xb) / len(keys):.3f} | "
            f"{d.estimate:+.3f} [{d.low:+.3f}, {d.high:+.3f}] | {better} / {worse} | {ta:.0f} | {tb:.0f} |"
        )
    return lines
