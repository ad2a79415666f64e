"""Critiques that leak their examples: how often the commongen critic asks for a word that
is neither in the input nor in the draft (issue 20, item 6; the "cut" and "goggles" failures).

    .venv/bin/python benchmarks/critique_leaks.py --label after                 # embedded model
    .venv/bin/python benchmarks/critique_leaks.py --label after --base-url http://127.0.0.1:PORT/v1
    .venv/bin/python benchmarks/critique_leaks.py --report-only

For each of the first ``--limit`` commongen dev inputs: the first draft (the task's
generate prompt at its temperature, seed 0), then one critique of it, through the library
(``max_iterations=0`` with ``final_feedback``: one generate and one feedback call). Each row
keeps the critic's raw reply; the report counts, per label:

- **raw**: replies that ask for something neither in the input nor in the draft: a
  "missing concept" that is not one of the input's, or a word of the prompt's own examples
  (``CommonGen.example_words``: their concept lists and quoted words) in the commonsense
  verdict;
- **seen by the refiner**: the same count on the critique as the refiner sees it (the raw
  reply parsed again by today's ``parse_feedback``: the input's concepts only, and a
  verdict that names a leaked word dropped);
- **old parser**: what the parser before item 6 let through (it filtered the missing list
  but passed every commonsense verdict on).

Rows go to ``--out/<label>.jsonl`` as they finish (resumable); the table goes into
``docs/quality.md`` between its leak markers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
from pathlib import Path

from _peers import ROOT, select_examples, write_between

from selfrefine.core.config import RefineConfig
from selfrefine.core.errors import SelfRefineError
from selfrefine.engine.loop import SelfRefine
from selfrefine.tasks.commongen import CommonGen, mentions
from selfrefine.tasks.parsing import json_object

START, END = "<!-- leaks:start -->", "<!-- leaks:end -->"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--label", default="current", help="names this run's file, e.g. the prompts' version")
    p.add_argument("--limit", type=int, default=100)
    p.add_argument("--model", default="embedded", help="a model spec, when no --base-url is given")
    p.add_argument("--base-url", help="an OpenAI-compatible server (e.g. the frontier's llama-server)")
    p.add_argument("--out", type=Path, default=ROOT / "runs" / "leaks")
    p.add_argument("--doc", type=Path, default=ROOT / "docs" / "quality.md")
    p.add_argument(
        "--prompts-from", metavar="REV", help="the commongen prompts of this git revision (default: the tree's)"
    )
    p.add_argument("--report-only", action="store_true")
    return p.parse_args(argv)


def backend_of(args: argparse.Namespace):
    if args.base_url:
        from selfrefine.backends.openai_compat import OpenAIBackend

        return OpenAIBackend("qwen2.5-coder-1.5b-instruct", base_url=args.base_url, concurrency=1)
    from selfrefine.backends.registry import get_backend

    return get_backend(args.model)


def task_of(rev: str | None) -> CommonGen:
    """The commongen task, with the prompts of git revision ``rev`` when one is given."""
    if rev is None:
        return CommonGen()
    prompts = {}
    for role in ("generate", "feedback", "refine", "refine_nofeedback"):
        path = f"src/selfrefine/tasks/prompts/commongen/{role}.j2"
        shown = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=ROOT, capture_output=True, text=True, check=True)
        prompts[role] = shown.stdout
    return CommonGen(**prompts)


async def run(args: argparse.Namespace) -> None:
    path = args.out / f"{args.label}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    done = {json.loads(line)["id"] for line in path.read_text().splitlines()} if path.exists() else set()
    engine = SelfRefine(
        task_of(args.prompts_from),
        backend_of(args),
        config=RefineConfig(max_iterations=0, final_feedback=True, select="last"),
    )
    try:
        for example in select_examples("commongen", args.limit):
            if example.id in done:
                continue
            result = await engine.arun(example.input)
            it = result.iterations[0]
            feedback_calls = [c for c in result.calls if c.role == "feedback" and c.ok]
            row = {
                "id": example.id,
                "input": result.input,
                "draft": it.draft,
                "raw": feedback_calls[-1].response if feedback_calls else None,
                "seen": it.feedback.text if it.feedback else None,
                "parse_error": it.feedback.parse_error if it.feedback else "no feedback",
                # the words of the examples in the prompts this run used (labels differ in them)
                "examples": sorted(engine.task.example_words),
            }
            with path.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(row) + "\n")
            print(f"{args.label} {example.id}: {leaks(row)}", file=sys.stderr, flush=True)
    finally:
        await engine.aclose()


def leaks(row: dict) -> dict[str, list[str]]:
    """The words one critique asks for that are in neither the input nor the draft."""
    task = CommonGen()
    task.__dict__["example_words"] = frozenset(row["examples"])  # the examples of the run's prompts
    raw = task.critique_leaks(row["raw"] or "", input=row["input"], draft=row["draft"])
    # what the refiner sees: the parsed critique (its missing list holds input concepts only),
    # so a leak there is a leaked word its verdict still names; the old parser passed the
    # raw verdict on unchanged
    try:  # parsed again, so every label is counted with today's parser (on its prompts' examples)
        seen = task.parse_feedback(row["raw"] or "", input=row["input"], draft=row["draft"]).text
    except SelfRefineError:  # an unparsed critique reaches the refiner as its raw text
        seen = row["raw"] or ""
    return {
        "raw": raw,
        "seen": [w for w in raw if mentions(verdict(seen), w)],
        "old parser": [w for w in raw if mentions(verdict(row["raw"]), w)],
    }


def verdict(text: str | None) -> str:
    """The commonsense verdict of a critique (JSON, or the "Commonsense:" line form)."""
    try:
        return str(json_object(text or "").get("commonsense", ""))
    except AttributeError:
        return ""


def report(args: argparse.Namespace) -> str:
    lines = [
        "| prompts | critiques | raw: ask for a word in neither input nor draft | seen by the refiner | "
        "old parser | words |",
        "|---|---|---|---|---|---|",
    ]
    for path in sorted(args.out.glob("*.jsonl")):
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        found = [leaks(r) for r in rows]
        words: dict[str, int] = {}
        for f in found:
            for w in f["raw"]:
                words[w] = words.get(w, 0) + 1
        top = ", ".join(f"{w} ({n})" for w, n in sorted(words.items(), key=lambda kv: -kv[1])[:8]) or "–"
        n = len(rows)
        counts = [sum(bool(f[k]) for f in found) for k in ("raw", "seen", "old parser")]
        lines.append(f"| {path.stem} | {n} | {counts[0]} of {n} | {counts[1]} of {n} | {counts[2]} of {n} | {top} |")
    text = "\n".join(lines)
    write_between(args.doc, START, END, text)
    print(text)
    return text


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if not args.report_only:
        asyncio.run(run(args))
    report(args)


if __name__ == "__main__":
    main()
