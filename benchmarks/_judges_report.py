"""docs/judges.md from the rows of benchmarks/judges.py: every figure with its 95% bootstrap
interval (2,000 resamples of the items, seed 0; a sense pair keeps its two sentences together)."""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

RESAMPLES = 2000
Stat = Callable[[np.ndarray], float]


def bootstrap(n: int, stat: Stat) -> tuple[float, float, float]:
    """``stat`` on all ``n`` items, and the 2.5/97.5 percentiles over resampled items."""
    point = stat(np.arange(n))
    rng = np.random.default_rng(0)
    values = [stat(rng.integers(0, n, n)) for _ in range(RESAMPLES)]
    values = [v for v in values if not np.isnan(v)]
    if not values:
        return point, float("nan"), float("nan")
    return point, float(np.percentile(values, 2.5)), float(np.percentile(values, 97.5))


def shown(interval: tuple[float, float, float]) -> str:
    point, lo, hi = interval
    if np.isnan(point):
        return "–"
    return f"{point:.3f} [{lo:.3f}, {hi:.3f}]"


def read(out: Path, part: str, method: str) -> list[dict[str, Any]]:
    """The measured items of a part and method (failed ones: :func:`failures`)."""
    return [r for r in read_all(out, part, method) if "error" not in r]


def failures(out: Path) -> list[str]:
    """One line per part and method with items that failed (the judge answered none of its answers)."""
    lines = []
    for path in sorted(out.glob("*.jsonl")):
        failed = [r for r in read_all(out, *path.stem.split(".", 1)) if "error" in r]
        if failed:
            lines.append(f"- {path.stem}: {len(failed)} item(s) failed, e.g. {failed[0]['error'][:160]!r}")
    return lines


def read_all(out: Path, part: str, method: str) -> list[dict[str, Any]]:
    path = out / f"{part}.{method}.jsonl"
    if not path.exists():
        return []
    rows = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            rows[row["key"]] = row
    return list(rows.values())


# --- statistics ------------------------------------------------------------------------------


def auc(pos: np.ndarray, neg: np.ndarray) -> float:
    """P(a positive scores above a negative), ties half."""
    if not len(pos) or not len(neg):
        return float("nan")
    diff = pos[:, None] - neg[None, :]
    return float(((diff > 0).sum() + 0.5 * (diff == 0).sum()) / diff.size)


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """scipy's ``spearmanr(x, y).statistic``, computed as it computes it (the correlation of the
    two columns of average ranks) without its p-value and checks: the bootstraps call it
    ~40,000 times, and spearmanr's overhead was most of building docs/results.md."""
    if len(x) < 3 or np.all(x == x[0]) or np.all(y == y[0]) or np.isnan(x).any() or np.isnan(y).any():
        return float("nan")
    return float(np.corrcoef(np.column_stack((ranks(x), ranks(y))), rowvar=False)[1, 0])


def ranks(v: np.ndarray) -> np.ndarray:
    """1-based ranks, ties given their mean (``scipy.stats.rankdata``, method average): the
    same floats, as each is a whole or half number."""
    order = np.argsort(v, kind="mergesort")
    ordered = v[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])  # where each run of ties begins
    ends = np.r_[starts[1:], len(v)]
    out = np.empty(len(v))
    out[order] = np.repeat((starts + ends + 1) / 2.0, ends - starts)
    return out


def mean_of(values: np.ndarray) -> Stat:
    return lambda idx: float(np.mean(values[idx])) if len(idx) else float("nan")


def cost(rows: Sequence[dict[str, Any]], judgments_per_row: int) -> str:
    """Tokens (prompt + completion) and seconds per judgment."""
    n = len(rows) * judgments_per_row
    if not n:
        return "–"
    prompt = sum(r["prompt_tokens"] for r in rows) / n
    completion = sum(r["completion_tokens"] for r in rows) / n
    seconds = sum(r["seconds"] for r in rows) / n
    return f"{prompt:.0f} + {completion:.1f} tokens, {seconds:.2f} s"


# --- sense -----------------------------------------------------------------------------------


def sense_section(out: Path) -> list[str]:
    lines = [
        "| method | pairs | sensible accepted | nonsense accepted | pairwise accuracy | ties / unparsed "
        "| pointwise AUC | cost per judgment |",
        "|---|---|---|---|---|---|---|---|",
    ]
    critic, pointwise, pairwise = (read(out, "sense", m) for m in ("critic", "pointwise", "pairwise"))
    if critic:
        lines.append(critic_line(critic))
    if pointwise:
        lines.append(pointwise_line(pointwise))
    if pairwise:
        lines.append(pairwise_line(pairwise))
    if not (critic or pointwise or pairwise):
        lines.append("| (not run) | | | | | | | |")
    return lines


def critic_line(rows: list[dict[str, Any]]) -> str:
    ok = [r for r in rows if r["sensible"]["approved"] is not None and r["nonsense"]["approved"] is not None]
    good = np.array([r["sensible"]["approved"] for r in ok], float)
    bad = np.array([r["nonsense"]["approved"] for r in ok], float)
    right = good * (1 - bad)  # approves the sensible one and rejects the other
    unparsed = len(rows) - len(ok)
    return (
        f"| (i) today's critic (sampled `commonsense` verdict) | {len(ok)} | {shown(bootstrap(len(ok), mean_of(good)))} "
        f"| {shown(bootstrap(len(ok), mean_of(bad)))} | {shown(bootstrap(len(ok), mean_of(right)))} "
        f"| – / {unparsed} | – | {cost(rows, 2)} |"
    )


def pointwise_line(rows: list[dict[str, Any]]) -> str:
    good = np.array([r["sensible"]["score"] for r in rows])
    bad = np.array([r["nonsense"]["score"] for r in rows])
    n = len(rows)
    accuracy = mean_of((good > bad).astype(float))
    ties = int((good == bad).sum())
    sampled = sum(r[s]["how"] == "sampled" for r in rows for s in ("sensible", "nonsense"))
    note = f" ({sampled} sampled)" if sampled else ""
    return (
        f"| (ii) P(Yes) to one question{note} | {n} | {shown(bootstrap(n, mean_of((good > 0.5).astype(float))))} "
        f"| {shown(bootstrap(n, mean_of((bad > 0.5).astype(float))))} | {shown(bootstrap(n, accuracy))} | {ties} / – "
        f"| {shown(bootstrap(n, lambda i: auc(good[i], bad[i])))} | {cost(rows, 2)} |"
    )


def pairwise_line(rows: list[dict[str, Any]]) -> str:
    scores = np.array([r["score"] for r in rows])
    n = len(rows)
    flips = sum("flipped" in (r["note"] or "") for r in rows)
    right = (scores > 0.5).astype(float)
    return (
        f"| (iii) `compare`, both orders (flip = tie) | {n} | – | – | {shown(bootstrap(n, mean_of(right)))} "
        f"| {int((scores == 0.5).sum())} / – | – | {cost(rows, 2)} |\n"
        f"|   position-consistent (same verdict in both orders) | {n} | – | – | "
        f"{shown(bootstrap(n, mean_of(np.array([0.0 if 'flipped' in (r['note'] or '') else 1.0 for r in rows]))))} "
        f"| {flips} flips | – | |"
    )


def sense_by_kind(out: Path) -> list[str]:
    methods = [(m, {r["key"]: r for r in read(out, "sense", m)}) for m in ("critic", "pointwise", "pairwise")]
    kinds = sorted({r["kind"] for _, rows in methods for r in rows.values()})
    lines = ["| kind | critic: right | P(Yes): right | compare: right |", "|---|---|---|---|"]
    for kind in kinds:
        cells = []
        for method, rows in methods:
            mine = [r for r in rows.values() if r["kind"] == kind]
            right = [pair_right(method, r) for r in mine]
            right = [x for x in right if x is not None]
            cells.append(f"{sum(right)} of {len(right)}" if right else "–")
        lines.append(f"| {kind} | {' | '.join(cells)} |")
    return lines


def pair_right(method: str, row: dict[str, Any]) -> bool | None:
    if method == "critic":
        good, bad = row["sensible"]["approved"], row["nonsense"]["approved"]
        return None if good is None or bad is None else bool(good and not bad)
    if method == "pointwise":
        return row["sensible"]["score"] > row["nonsense"]["score"]
    return row["score"] > 0.5


# --- FED -------------------------------------------------------------------------------------


def fed_section(out: Path, part: str) -> list[str]:
    critic, rating = read(out, part, "critic"), read(out, part, "rating")
    aspects = list(dict.fromkeys(a for r in critic + rating for a in r["scores"]))
    if not aspects:
        return ["(not run)"]
    methods = ("(a) critic, sampled", "(b) rating, probabilities")
    lines = ["| aspect | " + " | ".join(f"{m} (n)" for m in methods) + " | (b) − (a), same items (n) |"]
    lines.append("|---|---|---|---|")
    for aspect in aspects:
        cells = [spearman_cell(rows, aspect) for rows in (critic, rating)]
        lines.append(f"| {aspect} | {' | '.join(cells)} | {paired_cell(critic, rating, aspect)} |")
    lines.append(f"| cost per judgment | {cost(critic, 1)} | {cost(rating, len(aspects))} | |")
    return lines


def paired_cell(critic: list[dict[str, Any]], rating: list[dict[str, Any]], aspect: str) -> str:
    """The rating's Spearman minus the critic's on the items both scored, resampled together."""
    theirs = {r["key"]: r for r in critic if r["scores"].get(aspect) is not None and aspect in r["human"]}
    both = [(theirs[r["key"]], r) for r in rating if r["key"] in theirs and r["scores"].get(aspect) is not None]
    if len(both) < 3:
        return "–"
    a = np.array([c["scores"][aspect] for c, _ in both], float)
    b = np.array([r["scores"][aspect] for _, r in both], float)
    y = np.array([r["human"][aspect] for _, r in both], float)
    return f"{shown(bootstrap(len(both), lambda i: spearman(b[i], y[i]) - spearman(a[i], y[i])))} ({len(both)})"


def spearman_cell(rows: list[dict[str, Any]], aspect: str) -> str:
    known = [r for r in rows if r["scores"].get(aspect) is not None and aspect in r["human"]]
    if not known:
        return "–"
    x = np.array([r["scores"][aspect] for r in known], float)
    y = np.array([r["human"][aspect] for r in known], float)
    return f"{shown(bootstrap(len(known), lambda i: spearman(x[i], y[i])))} ({len(known)})"


def fed_pairwise_section(out: Path, part: str) -> list[str]:
    rows = read(out, part, "pairwise")
    if not rows:
        return ["(not run)"]
    pointwise = {m: {r["key"]: r["scores"].get("Overall") for r in read(out, part, m)} for m in ("critic", "rating")}
    decided = [r for r in rows if r["human"]["x"] != r["human"]["y"]]
    lines = ["| judge | pairs decided by the humans | agreement | judge ties |", "|---|---|---|---|"]
    verdicts = {"(c) `compare`, both orders": [r["score"] - 0.5 for r in decided]}
    for method, label in (("critic", "(a) critic's Overall, compared"), ("rating", "(b) rating's Overall, compared")):
        if pointwise[method]:
            verdicts[label] = [derived(pointwise[method], r["key"]) for r in decided]
    for label, margins in verdicts.items():
        lines.append(agreement_line(label, decided, margins))
    lines.append(f"| cost per `compare` (two questions) | | {cost(rows, 1)} | |")
    return lines


def derived(scores: dict[str, float | None], key: str) -> float | None:
    x, y = key.split("|")
    if scores.get(x) is None or scores.get(y) is None:
        return None
    return scores[x] - scores[y]


def agreement_line(label: str, rows: list[dict[str, Any]], margins: list[float | None]) -> str:
    pairs = [(r, m) for r, m in zip(rows, margins, strict=True) if m is not None]
    human = np.array([np.sign(r["human"]["x"] - r["human"]["y"]) for r, _ in pairs])
    judge = np.array([np.sign(m) for _, m in pairs])
    agree = (human == judge).astype(float)  # a judge tie counts as a disagreement
    return f"| {label} | {len(pairs)} | {shown(bootstrap(len(pairs), mean_of(agree)))} | {int((judge == 0).sum())} |"


# --- the page --------------------------------------------------------------------------------


def dates(out: Path) -> str:
    found = set()
    for path in out.glob("*.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                found.add(json.loads(line).get("date", "?"))
    return ", ".join(sorted(found)) or "–"


def write_report(out: Path, doc: Path, intro: str | None = None) -> str:
    models = sorted({r.get("model", "?") for p in out.glob("*.jsonl") for r in read_all(out, *p.stem.split(".", 1))})
    parts = [
        "# Judgments against labels (issue 29)",
        "",
        intro if intro is not None else "Generated by `benchmarks/judges.py` from its rows.",
        "",
        f"Model: {', '.join(models) or '–'}; machine: {platform.machine()}, {os.cpu_count()} cores visible "
        f"(2 shared with other jobs); runs dated {dates(out)}. Intervals: 95% bootstrap over items.",
        "",
        "## Sense: sensible against nonsense sentences with the same concepts",
        "",
        *sense_section(out),
        "",
        *sense_by_kind(out),
        "",
        "## FED, turn level: Spearman correlation with the human mean",
        "",
        *fed_section(out, "fed-turn"),
        "",
        "### Pairs of responses (Overall): agreement with the human means",
        "",
        *fed_pairwise_section(out, "fed-turn"),
        "",
        "## FED, dialogue level",
        "",
        *fed_section(out, "fed-dialogue"),
        "",
        *fed_pairwise_section(out, "fed-dialogue"),
        "",
        *(["## Failed items", "", *failures(out), ""] if failures(out) else []),
    ]
    text = "\n".join(parts)
    write_generated(doc, text)
    return text


START, END = "<!-- judges:start -->", "<!-- judges:end -->"


def write_generated(doc: Path, text: str) -> None:
    """The generated text between the doc's markers (what is around them is written by hand);
    a doc without them is written whole."""
    content = doc.read_text(encoding="utf-8") if doc.exists() else ""
    if START in content and END in content:
        head, _, rest = content.partition(START)
        tail = rest.partition(END)[2]
    else:
        head, tail = "", ""
    doc.write_text(f"{head}{START}\n{text}\n{END}{tail}", encoding="utf-8")
