"""docs/results.md: every measured result on one page, from the stored results only (no model call).

    .venv/bin/python benchmarks/results.py               # rewrites docs/results.md
    .venv/bin/python benchmarks/results.py --out PATH    # writes the page elsewhere

Sources (what the benchmark scripts commit): ``docs/quality_summary.json``, the marked tables of
``docs/frontier.md`` (its run folders are not committed), ``docs/peers_summary.json``,
``docs/judges_rows/*.jsonl`` (read with ``_judges_report``), ``docs/judged_loop.json`` and
``docs/ifeval_summary.json``; an
absent one is "not yet run". A source's date is its last commit; a task's prompts are
``tasks/prompts/<task>/`` other than ``judge_*.j2`` plus its system message (dated by the commit
that introduced its current text). A row committed before its prompts changed says so in words.
"""

from __future__ import annotations

import argparse
import ast
import functools
import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from _judges_report import dates, fed_pairwise_section, fed_section, sense_by_kind, sense_section
from _results_summary import Sources, cells, interval, num, points_of, summary
from frontier import FRESH_END, FRESH_ROWS, FRESH_START, TABLE_END, TABLE_START

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
TASKS = ROOT / "src" / "selfrefine" / "tasks"
PY = ".venv/bin/python"


# --- dates from git --------------------------------------------------------------------------


def git(*args: str) -> str:
    try:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)
    except OSError:
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def parse(iso: str) -> datetime | None:
    return datetime.fromisoformat(iso).astimezone(UTC) if iso else None


def day(when: datetime | None) -> str:
    return when.strftime("%Y-%m-%d %H:%M UTC") if when else "not committed"


def last_commit(when: datetime | None) -> str:
    return f"last committed {day(when)}" if when else "not committed yet (commit it, then rerun this command)"


def committed(path: Path) -> datetime | None:
    """The date of the last commit that changed ``path``; None while it has uncommitted changes."""
    if not path.is_relative_to(ROOT):
        return None
    rel = str(path.relative_to(ROOT))
    if git("status", "--porcelain", "--", rel):
        return None
    return parse(git("log", "-1", "--format=%cI", "--", rel))


def block_committed(path: Path, start: str, end: str) -> datetime | None:
    """The date of the last commit that changed the lines between two markers of ``path`` (a
    new section elsewhere in the file does not make its old tables look newer); the file's
    last commit where git cannot tell; None while the file has uncommitted changes."""
    when = committed(path)
    if when is None:
        return None
    rel = str(path.relative_to(ROOT))
    return parse(git("log", "-1", "--format=%cI", "--no-patch", "-L", f"/{start}/,/{end}/:{rel}")) or when


def system_text(task: str) -> str | None:
    """The start of the task's system message as its module spells it (``system=...``)."""
    source = TASKS / f"{task}.py"
    if not source.exists():
        return None
    for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
        if isinstance(node, ast.keyword) and node.arg == "system":
            texts = [n.value for n in ast.walk(node.value) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
            return texts[0][:40] if texts else None
    return None


@functools.cache
def prompts_changed(task: str) -> datetime | None:
    folder = f"src/selfrefine/tasks/prompts/{task}"
    found = [parse(git("log", "-1", "--format=%cI", "--", folder, f":(exclude){folder}/judge_*"))]
    text = system_text(task)
    if text:
        found.append(parse(git("log", "-1", "--format=%cI", "-S", text, "--", f"src/selfrefine/tasks/{task}.py")))
    return max((d for d in found if d), default=None)


@functools.cache
def judge_changed(task: str) -> datetime | None:
    return parse(git("log", "-1", "--format=%cI", "--", f"src/selfrefine/tasks/prompts/{task}/judge_*"))


def freshness(task: str, measured: datetime | None, current_in: str | None = None) -> str:
    """In words: whether a number committed at ``measured`` ran the task's current prompts and judge."""
    if not git("rev-parse", "HEAD"):
        return "prompt dates unknown (no git history)"
    if measured is None:
        return "current prompts (uncommitted result)"
    notes = []
    prompts, judge = prompts_changed(task), judge_changed(task)
    if prompts and prompts > measured:
        where = f"the current prompts' one-step is in {current_in}" if current_in else "not measured with them yet"
        notes.append(
            f"**stale**: measured with the prompts as of {measured:%Y-%m-%d} (changed {day(prompts)}); {where}"
        )
    if judge and judge > measured:
        notes.append(f"before the loop's judge ({judge:%Y-%m-%d})")
    return "; ".join(notes) or "current prompts"


# --- formatting ------------------------------------------------------------------------------


def heading(title: str, source: str, when: str, command: str, page: str) -> list[str]:
    run, _, note = command.partition("  # ")
    return [
        f"## {title}",
        "",
        f"Source: {source}, {when}. Regenerate it: `{run}`{f' ({note})' if note else ''}. "
        f"Details: [{page}]({Path(page).name}).",
        "",
    ]


def load_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def not_run(source: str, command: str) -> list[str]:
    return [f"Not yet run: `{command}` writes `{source}`.", ""]


# --- the sources -----------------------------------------------------------------------------


def frontier_tables(start: str = TABLE_START, end: str = TABLE_END) -> list[list[str]]:
    """The tables between two markers of docs/frontier.md: the main block (points, DSPy at
    equal tokens, our frontier) or the fresh rows' (points, their note, DSPy, auto, frontier);
    a paragraph between tables is skipped."""
    text = (DOCS / "frontier.md").read_text(encoding="utf-8") if (DOCS / "frontier.md").exists() else ""
    if start not in text:
        return []
    block = text.partition(start)[2].partition(end)[0].strip()
    return [t.splitlines() for t in block.split("\n\n") if t.startswith("|")]


def frontier_section() -> list[str]:
    command = f"{PY} benchmarks/frontier.py --report-only"
    when = block_committed(DOCS / "frontier.md", TABLE_START, TABLE_END)
    lines = heading(
        "Quality against tokens, and DSPy at equal tokens",
        "the marked tables of `docs/frontier.md`",
        last_commit(when),
        f"{command}  # from runs/frontier, not committed",
        "docs/frontier.md",
    )
    tables = frontier_tables()
    if not tables:
        return lines + not_run("docs/frontier.md", command)
    points = points_of(tables[0])
    lines += [
        "The middle column is sampling alone: the best of 4 first drafts by the task's own checks, no "
        "critique; `--preset best` adds one round of critique and refinement to such a draft (gsm8k's "
        "preset is one greedy program), so the step from it to returned is what refinement adds.",
        "",
        "| task | n | one draft (`ours-k1-r0`) [95%] | best of 4 first drafts (`ours-k4-r0`) [95%] "
        "| `--preset best` returned [95%] | tokens/ex: one draft → best of 4 → best | prompts |",
        "|---|---|---|---|---|---|---|",
    ]
    for task in dict.fromkeys(task for task, _ in points):
        one, best = points.get((task, "ours-k1-r0")), points.get((task, "ours-best"))
        four = points.get((task, "ours-k4-r0"), {})
        if one and best:
            ret, tok = "returned [95%]", "tokens/ex"
            lines.append(
                f"| {task} | {one['n']} | {one[ret]} | {four.get(ret, '–')} | {best[ret]} "
                f"| {one[tok]} → {four.get(tok, '–')} → {best[tok]} | {freshness(task, when)} |"
            )
    return lines + ["", *[row for table in tables[1:] for row in [*table, ""]], *fresh_section()]


def fresh_section() -> list[str]:
    """The fresh rows of docs/frontier.md (rows no prompt, preset or rule was chosen on): each
    task's one draft, best of 4 first drafts and auto points, then DSPy and the fixed grid at
    equal tokens."""
    tables = frontier_tables(FRESH_START, FRESH_END)
    if not tables:
        return []
    when = block_committed(DOCS / "frontier.md", FRESH_START, FRESH_END)
    points = points_of(tables[0])
    autos = sorted({p for _, p in points if p.startswith("ours-auto-")}, key=lambda p: int(p.rpartition("-")[2]))
    lines = [
        f"### Fresh rows ({last_commit(when)})",
        "",
        "Rows not used to shape the prompts, presets or the auto rule (`FRESH_ROWS` of `benchmarks/frontier.py`), "
        "the first part of each task's run; tokens/ex in brackets.",
        "",
        "| task | rows | n | one draft | best of 4 first drafts | "
        + " | ".join(f"`{p}`" for p in autos)
        + " | prompts |",
        "|---|---|---|---|---|" + "---|" * len(autos) + "---|",
    ]
    for task in dict.fromkeys(task for task, _ in points):
        one = points.get((task, "ours-k1-r0"))
        if one is None:
            continue
        first = FRESH_ROWS.get(task, (0, 0))[0]
        shown = [_point(points.get((task, p))) for p in ("ours-k1-r0", "ours-k4-r0", *autos)]
        lines.append(
            f"| {task} | {first}–{first + int(one['n']) - 1} | {one['n']} | {' | '.join(shown)} | {freshness(task, when)} |"
        )
    return lines + ["", *[row for table in tables[1:] if table[0].startswith("| task | DSPy point") or
                          table[0].startswith("| task | auto point") for row in [*table, ""]]]  # fmt: skip


def _point(p: dict[str, str] | None) -> str:
    return "–" if p is None else f"{p['returned [95%]'].split()[0]} ({p['tokens/ex']})"


def frontier_tasks() -> set[str]:
    tables = frontier_tables()
    return {cells(row)[0] for row in tables[0][2:]} if tables else set()


def summary_source(
    file: str, script: str, title: str, runs: str, doc: str, flag: str = "--report-only"
) -> tuple[Any, Any, list[str]]:
    """A stored summary (``docs/<file>``, written by ``script flag``): its data (None: absent),
    when it was committed, and its heading, followed by "not yet run" when it is absent."""
    path, command = DOCS / file, f"{PY} benchmarks/{script} {flag}"
    data, when = load_json(path), committed(path)
    lines = heading(
        title,
        f"`docs/{file}`",
        f"generated {data['generated'][:10] if data else '–'}, {last_commit(when)}",
        f"{command}  # from {runs}, not committed",
        doc,
    )
    return data, when, lines + (not_run(f"docs/{file}", command) if data is None else [])


def quality_section() -> list[str]:
    data, when, lines = summary_source(
        "quality_summary.json", "quality.py", "Self-Refine against one step, every task and mode",
        "runs/quality", "docs/quality.md",
    )  # fmt: skip
    if data is None:
        return lines
    current = frontier_tasks()
    lines += [
        "| task | mode | n | one-step | returned | returned − one-step [95%] | judge: win / tie / loss | prompts |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in data["runs"]:
        judge = r.get("judge")
        wtl = f"{judge['win']:.2f} / {judge['tie']:.2f} / {judge['loss']:.2f}" if judge else ""
        where = "docs/frontier.md" if r["task"] in current else None
        lines.append(
            f"| {r['task']} | {r['mode']} | {r['n']} | {num(r['one_step'])} | {num(r['returned'])} "
            f"| {interval(r['delta'], signed=True)} | {wtl} | {freshness(r['task'], when, where)} |"
        )
    return [*lines, ""]


def peers_section() -> list[str]:
    data, when, lines = summary_source(
        "peers_summary.json", "vs_peers.py", "selfrefine against DSPy Refine, BestOfN and Predict",
        "runs/peers", "docs/peers.md",
    )  # fmt: skip
    if data is None:
        return lines
    current = frontier_tasks()
    lines += [
        "| task | system | n | one-step [95%] | returned [95%] | returned, 1st sentence [95%] | tokens/ex | prompts |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in data["summaries"]:
        ours = s["system"].startswith("selfrefine")
        where = "docs/frontier.md" if s["task"] in current else None
        fresh = freshness(s["task"], when, where) if ours else "DSPy's own (`benchmarks/_peers_dspy.py`)"
        lines.append(
            f"| {s['task']} | {s['system']} | {s['n']} | {interval(s['one_step'])} | {interval(s['returned'])} "
            f"| {interval(s.get('first_sentence'))} | {s['tokens']:.0f} | {fresh} |"
        )
    return [*lines, ""]


def judges_section() -> list[str]:
    out = DOCS / "judges_rows"
    command = f"{PY} benchmarks/judges.py --part PART --out docs/judges_rows  # --report-only rewrites docs/judges.md"
    lines = heading(
        "Judgments against labels: sense pairs and FED",
        "`docs/judges_rows/*.jsonl`",
        f"runs dated {dates(out)}, {last_commit(committed(out))}",
        command,
        "docs/judges.md",
    )
    if not list(out.glob("*.jsonl")):
        return lines + not_run("docs/judges_rows/", command.partition("  # ")[0])
    lines += ["### Sense: sensible against nonsense sentences with the same concepts", "", *sense_section(out), ""]
    lines += [*sense_by_kind(out), ""]
    for part, title in (("fed-turn", "turn"), ("fed-dialogue", "dialogue")):
        if list(out.glob(f"{part}.*.jsonl")):
            lines += [f"### FED, {title} level: Spearman correlation with the human mean", "", *fed_section(out, part)]
            lines += ["", *fed_pairwise_section(out, part), ""]
    return lines


def judged_loop_section() -> list[str]:
    path, command = DOCS / "judged_loop.json", f"{PY} benchmarks/judged_loop.py"
    data, when = load_json(path), committed(path)
    lines = heading(
        "The judge in the loop: one step against `--preset best`",
        "`docs/judged_loop.json`",
        last_commit(when) if data is not None else "not yet run",
        f"{command}  # resumable; --report-only from runs/judged_loop",
        "docs/judges.md",
    )
    if data is None:
        return lines + not_run("docs/judged_loop.json", command)
    lines += [
        "`best: first draft` is the best of the 4 first drafts the system chose before its round of refinement "
        "(sampling and the judge alone); `returned` is after the round.",
        "",
        "| set | task | rows | system | n | one-step | best: first draft | returned | returned − one-step [95%] "
        "| wins / ties / losses | tokens/ex: one-step → system | pairwise: best / tie / one-step | prompts |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in data:
        for system in ("best", "best-no-judge"):
            if system in s:
                lines.append(judged_row(s, system, when))
    return [*lines, ""]


def judged_row(s: dict[str, Any], system: str, when: datetime | None) -> str:
    r = s[system]
    pair = s.get("pairwise") if system == "best" else None
    pairwise = f"{pair['best']} / {pair['tie']} / {pair['one-step']}" if pair else ""
    return (
        f"| {s['set']} | {s['task']} | {s['rows']} | {system} | {r['n']} | {num(r['one_step'])} "
        f"| {num(r.get('first_draft'))} | {num(r['returned'])} | {interval(r['delta'], signed=True)} | {' / '.join(map(str, r['wins_ties_losses']))} "
        f"| {r['one_step_tokens_per_example']:.0f} → {r['tokens_per_example']:.0f} | {pairwise} | {freshness(s['task'], when)} |"
    )


def ifeval_section() -> list[str]:
    """IFEval on the chat task: each configuration against one step on the same prompts."""
    data, _, lines = summary_source(
        "ifeval_summary.json", "ifeval.py", "IFEval: chat's instructions checked by code",
        "benchmarks/runs/ifeval", "docs/ifeval.md", flag="--report",
    )  # fmt: skip
    if data is None:
        return lines
    both = data["derivation"].get("gated") or data["derivation"].get(
        "both"
    )  # gated: the model asked where code left wording
    if both:
        t, a = both["types"], both["arguments"]
        lines += [
            f"Checks derived from the request on {both['rows']} prompts (the model asked only where code's reading left an "
            "instruction's wording), against IFEval's own instruction lists: "
            f"types precision {t['precision']} / recall {t['recall']}, with arguments {a['precision']} / {a['recall']}.",
            "",
        ]
    lines += [
        "| configuration | prompts | prompt strict | one step, same prompts | Δ [95%] | better / worse "
        "| instruction strict | tokens/prompt | × one step's |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, c in data["configurations"].items():
        lines.append(
            f"| {name} | {c['prompts']} | {interval(c['prompt_strict'])} | {interval(c['one_step'])} "
            f"| {interval(c['delta_vs_one_step'], signed=True)} | {c['better']} / {c['worse']} "
            f"| {interval(c['instruction_strict'])} | {c['tokens']} | {c['tokens'] / c['one_step_tokens']:.1f} |"
        )
    return [*lines, ""]


# --- the summary (benchmarks/_results_summary.py words it) -----------------------------------


def summary_section() -> list[str]:
    """The page's opening, from the sources the sections below show."""
    loop = load_json(DOCS / "judged_loop.json") or []
    tables, fresh = frontier_tables(), frontier_tables(FRESH_START, FRESH_END)
    stale = not freshness("gsm8k", block_committed(DOCS / "frontier.md", TABLE_START, TABLE_END)).startswith("current")
    return summary(
        Sources(
            sets={s["set"]: s for s in loop if "best" in s and s["best"].get("one_step") is not None},
            points=points_of(tables[0]) if tables else {},
            dspy=next((t for t in tables if t[0].startswith("| task | DSPy point")), []),
            fresh=points_of(fresh[0]) if fresh else {},
            quality=load_json(DOCS / "quality_summary.json"),
            peers=load_json(DOCS / "peers_summary.json"),
            gsm8k_stale=stale,
            ifeval=load_json(DOCS / "ifeval_summary.json"),
        )
    )


# --- the page --------------------------------------------------------------------------------

INTRO = """\
# Results: every measured number on one page

Generated by `.venv/bin/python benchmarks/results.py` from the results the benchmark scripts
stored in `docs/` (no model is called); do not edit it by hand: commit what a benchmark wrote,
then run the command (`tests/project/test_results_page.py` fails when this page and its
sources disagree). Default model throughout: Qwen2.5-Coder-1.5B-Instruct Q4_K_M on 2 shared
CPU cores; intervals are 95% bootstrap intervals over the examples.

**Which numbers are current.** A source's date is its last commit. A task's prompts are its
files in `src/selfrefine/tasks/prompts/<task>/` (other than `judge_*.j2`) and its system message;
a row committed before its task's prompts last changed says **stale** in its `prompts` column,
with where the current prompts' one-step is measured. Since the judge's questions
(`judge_*.j2`) joined the loop, a loop's returned output can differ where code checks tie;
rows measured before say so.
"""


def page() -> str:
    sections = [summary_section(), frontier_section(), judged_loop_section(), ifeval_section(), judges_section(),
                quality_section(), peers_section()]  # fmt: skip
    return INTRO + "\n" + "\n".join("\n".join(s) for s in sections).rstrip() + "\n"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=DOCS / "results.md")
    args = p.parse_args(argv)
    args.out.write_text(page(), encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
