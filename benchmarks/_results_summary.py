"""The numbered sentences that open docs/results.md, and the formatting its tables share: pure
functions of the stored results that ``results.py`` reads (no file, no git, no model here), so
every number they say is one of the sources' or a difference of two."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

Points = dict[tuple[str, str], dict[str, str]]  # a points table by (task, point): its cells by column


@dataclass(frozen=True)
class Sources:
    """What the summary reads: docs/judged_loop.json's sets that ran ``best`` (by name), the
    frontier's points and its DSPy-at-equal-tokens table, the fresh rows' points, the
    every-mode and DSPy summaries, whether gsm8k's frontier rows predate its prompts, and the
    IFEval summary."""

    sets: dict[str, dict[str, Any]]
    points: Points
    dspy: list[str]
    fresh: Points
    quality: Any
    peers: Any
    gsm8k_stale: bool
    ifeval: Any = None


def summary(src: Sources) -> list[str]:
    """The page's opening: what a reader can act on, in numbered sentences (a sixth on IFEval
    once it has run), and what to read with care; nothing where no source has run (no sentence
    is written from memory)."""
    sets = src.sets
    said = [s for s in (helps_sentence(sets), sampling_sentence(sets), cost_sentence(sets),
                        frontier_sentence(src.points), dspy_sentence(src.dspy, src.gsm8k_stale),
                        ifeval_sentence(src.ifeval)) if s]  # fmt: skip
    if not said:
        return []
    count = COUNTS.get(len(said), str(len(said)))
    return [f"## In {count} sentences", "", *[f"{i}. {s}" for i, s in enumerate(said, 1)], "", *care_paragraph(src)]


COUNTS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}


# --- numbers as the tables show them -----------------------------------------------------------


def num(x: float | None) -> str:
    return "–" if x is None else f"{x:.3f}"


def interval(d: dict[str, Any] | None, signed: bool = False) -> str:
    if not d:
        return "–"
    f = "{:+.3f}" if signed else "{:.3f}"
    return f"{f.format(d['estimate'])} [{f.format(d['low'])}, {f.format(d['high'])}]"


def points_of(table: list[str]) -> dict[tuple[str, str], dict[str, str]]:
    """A points table by (task, point), each row's cells by column name."""
    header = cells(table[0])
    return {(c[0], c[1]): dict(zip(header, c)) for c in (cells(row) for row in table[2:])}


def value(cell: str | None) -> float | None:
    """The estimate of a cell such as ``0.556 [0.488, 0.633]`` (None for ``–`` or no cell)."""
    try:
        return float(cell.split()[0]) if cell else None
    except ValueError:
        return None


def cells(row: str) -> list[str]:
    return [c.strip() for c in row.strip().strip("|").split("|")]


# --- the sentences ---------------------------------------------------------------------------


def signed(x: float) -> str:
    return f"{x:+.3f}"


def helps_sentence(sets: dict[str, dict[str, Any]]) -> str | None:
    """Where refinement (the whole `--preset best` loop) helps and by how much, on rows nobody tuned on."""
    if not sets:
        return None

    def one(s: dict[str, Any]) -> str:
        r = s["best"]
        return f"{s['set']} ({num(r['one_step'])} → {num(r['returned'])}, {interval(r['delta'], signed=True)})"

    ups = [one(s) for s in sets.values() if s["best"]["delta"]["estimate"] > 0]
    downs = [one(s) for s in sets.values() if s["best"]["delta"]["estimate"] <= 0]
    text = (
        "**Where it helps, and by how much.** On rows not used to write the prompts, `--preset best` (4 samples "
        "chosen by the task's code checks, then its judge, and on most tasks one round of critique and refinement) "
        "scores "
        f"above one draft on {', '.join(ups)}"
    )
    if not downs:
        return text + "."
    return text + f", and below it on {', '.join(downs)}: use it where it gains, keep the default loop where it loses."


def sampling_sentence(sets: dict[str, dict[str, Any]]) -> str | None:
    """How much of that the choice among samples does before any refinement."""
    firsts = [(s["set"], s["best"]["first_draft"], s["best"]["returned"], s["best"].get("max_iterations"))
              for s in sets.values()]  # fmt: skip
    # the round's gain from the rounded figures the tables show, so the sentence adds up as read
    parts = [
        f"{name} {num(a)} "
        + ("(its preset runs no round)" if n == 0 else f"(the round: {signed(round(b, 3) - round(a, 3))})")
        for name, a, b, n in firsts
        if a is not None
    ]
    if not parts:
        return None
    return (
        "**Sampling does most of it, not the critique.** The best of the 4 first drafts, before any refinement, "
        f"already reaches {', '.join(parts)} (the `best: first draft` column beside `returned` below): where "
        "tokens are tight, `--samples 4 --max-iters 0` keeps most of the gain."
    )


def cost_sentence(sets: dict[str, dict[str, Any]]) -> str | None:
    """What the loop costs against one draft, in tokens per input."""
    costs = [
        (s["set"], s["best"]["one_step_tokens_per_example"], s["best"]["tokens_per_example"]) for s in sets.values()
    ]
    costs = [(name, a, b) for name, a, b in costs if a]
    if not costs:
        return None
    ratios = [b / a for _, a, b in costs]
    listed = ", ".join(f"{name} {a:.0f} → {b:.0f}" for name, a, b in costs)
    return (
        f"**At what token cost.** It takes {min(ratios):.0f}–{max(ratios):.0f}× the tokens of one draft "
        f"(tokens per input: {listed})."
    )


def frontier_sentence(points: Points) -> str | None:
    """Sampling alone against a round of refinement at equal tokens (commongen, docs/frontier.md)."""
    names = ("ours-k1-r1-v", "ours-k3-r0", "ours-k4-r0", "ours-k4-r1-v", "ours-best")
    p = {n: points.get(("commongen", n)) for n in names}
    if any(v is None for v in p.values()):
        return None

    def at(n: str) -> str:
        return f"{p[n]['returned [95%]'].split()[0]} at {p[n]['tokens/ex']} tokens"  # type: ignore[index]

    best, four = p["ours-best"], p["ours-k4-r0"]
    gain = (value(best["returned [95%]"]) or 0.0) - (value(four["returned [95%]"]) or 0.0)  # type: ignore[index]
    times = float(best["tokens/ex"]) / float(four["tokens/ex"])  # type: ignore[index]
    return (
        "**Against sampling alone.** On commongen (`docs/frontier.md`, the first 20 rows) a draft more is worth more "
        f"per token than a round until about four drafts (one draft and one round: {at('ours-k1-r1-v')}; the best "
        f"of 3 drafts: {at('ours-k3-r0')}); the best of 4 drafts gives {at('ours-k4-r0')}, and a round on top "
        f"{at('ours-k4-r1-v')} (`--preset best`: {at('ours-best')}), so refinement adds {signed(gain)} there "
        f"for {times:.1f} times the tokens."
    )


def dspy_sentence(dspy: list[str], gsm8k_stale: bool) -> str | None:
    """Ours against DSPy at no more tokens than each DSPy point (docs/frontier.md)."""
    if not dspy:
        return None
    rows = [cells(r) for r in dspy[2:]]
    cg = [r for r in rows if r[0] == "commongen" and r[5] != "–"]
    gsm = [value(r[5]) for r in rows if r[0] == "gsm8k" and r[5] != "–"]
    if not cg or not gsm:
        return None
    returned = ", ".join(f"{r[5]} against {r[1].removeprefix('dspy-')}" for r in cg)
    first = ", ".join(r[6] for r in cg)
    fresh = ", measured with the gsm8k prompts before today's (stale)" if gsm8k_stale else ""
    return (
        "**Against DSPy** at no more tokens than each DSPy point: on commongen ours is level as returned "
        f"({returned}) and ahead on the first sentence, the one sentence the task asks for ({first}), since DSPy's "
        f"coverage comes from writing several; on gsm8k one greedy program of ours is ahead of every DSPy point on "
        f"the means ({signed(min(gsm))} to {signed(max(gsm))}){fresh}."  # type: ignore[type-var]
    )


def ifeval_sentence(ifeval: Any) -> str | None:
    """IFEval: what checks derived from a chat request buy over one step, and at what cost."""
    configs = (ifeval or {}).get("configurations", {})
    others = {n: c for n, c in configs.items() if n != "one-step" and c.get("delta_vs_one_step")}
    if not others:
        return None

    preset = (ifeval or {}).get("preset")

    def one(name: str, c: dict[str, Any]) -> str:
        label = f"{name} (chat's `--preset best`)" if name == preset else name
        return (
            f"{label} {num(c['one_step']['estimate'])} → {num(c['prompt_strict']['estimate'])} "
            f"({interval(c['delta_vs_one_step'], signed=True)}, {c['better']} better / {c['worse']} worse, "
            f"{c['prompts']} prompts, {c['tokens'] / c['one_step_tokens']:.1f}× the tokens)"
        )

    text = (
        "**Instructions checked by code (IFEval, chat).** On report prompts no rule was tuned on, the share of "
        "prompts whose every instruction the official verifiers pass, one step → with checks derived from the "
        f"request: {'; '.join(one(n, c) for n, c in others.items())}"
    )
    derivation = ifeval.get("derivation") or {}
    both = derivation.get("gated") or derivation.get("both")
    if both:
        t = both["types"]
        text += f"; the derived checks name IFEval's own instruction types with precision {t['precision']} and recall {t['recall']}"
    return text + "."


def care_paragraph(src: Sources) -> list[str]:
    """Why commongen's one-draft baseline differs between tables, and where coverage rose without sense."""
    ones, sets = [], src.sets
    k1, f1 = src.points.get(("commongen", "ours-k1-r0")), src.fresh.get(("commongen", "ours-k1-r0"))
    if k1:
        ones.append(f"{value(k1['returned [95%]']):.3f} on rows 0–19 (the frontier, llama-server)")
    if f1:
        ones.append(f"{value(f1['returned [95%]']):.3f} on rows 56–{55 + int(f1['n'])} (its fresh rows)")
    if "commongen" in sets:
        ones.append(
            f"{num(sets['commongen']['best']['one_step'])} on rows {sets['commongen']['rows']} (the judge in the loop, the embedded model in-process)"
        )
    ones += stale_one_steps(src.quality, src.peers)
    if not ones:
        return []
    lines = [
        "**Read with care.** One draft is one sample at temperature 0.7, and its commongen coverage differs between "
        f"the tables below because their rows, engine and prompts differ: {'; '.join(ones)}. Compare a system only "
        "with the one-draft number of its own table (every Δ below is paired that way)."
    ]
    if "commongen" in sets:
        lines.append(
            "Coverage also rose without sense: on the 20–30 concepts of each commongen_hard row, every returned "
            "output is one long chain of clauses that uses most of them, and a hand-read of the 20 returned sentences "
            "of rows 56–75 found none a reader accepts as a scene, nor any one-step draft (`docs/judges.md`, "
            '"In the loop"); the higher coverage there is a count of words, not a better sentence.'
        )
    return [" ".join(lines), ""]


def stale_one_steps(quality: Any, peers: Any) -> list[str]:
    """Commongen's one-step in the tables measured with earlier prompts (every mode; DSPy Refine)."""
    out = []
    found = sorted({r["one_step"] for r in (quality or {}).get("runs", []) if r["task"] == "commongen"} - {None})
    if found:
        out.append(f"{num(found[0])} in the every-mode table")
    mine = [s["one_step"]["estimate"] for s in (peers or {}).get("summaries", [])
            if s["task"] == "commongen" and s["system"].startswith("selfrefine") and s.get("one_step")]  # fmt: skip
    if mine:
        out.append(f"{num(min(mine))}–{num(max(mine))} for our systems in the table against DSPy Refine")
    if out:
        out[-1] += " (those two with earlier prompts: stale)" if len(out) > 1 else " (earlier prompts: stale)"
    return out
