"""Judgments against labels: today's sampled critic against probability-scored and pairwise
questions to the same model, on sentence pairs (sense) and on FED's human ratings (issue 29).

    .venv/bin/python benchmarks/judges.py --part sense                       # all three methods
    .venv/bin/python benchmarks/judges.py --part fed-turn --limit 60 --methods rating,pairwise
    .venv/bin/python benchmarks/judges.py --report-only                      # docs/judges.md

Parts and methods (``--methods``; each finished item is appended to
``--out/<part>.<method>.jsonl`` and skipped on a rerun, so a run is resumable):

- ``sense`` (benchmarks/data/sense_pairs.jsonl: pairs of sentences with the same concepts,
  one sensible, one a reader rejects): ``critic``: commongen's own feedback prompt and
  parser on each sentence (its ``commonsense`` verdict "NONE" approves it), as the loop
  calls it; ``pointwise``: P(Yes) to :data:`QUESTIONS` ``sense``; ``pairwise``: the judge's
  ``compare`` of the two sentences, asked in both orders;
- ``fed-turn`` / ``fed-dialogue`` (../shared/datasets/fed.dev.json, five human ratings per
  aspect): ``critic`` (turn level): the dialogue task's feedback prompt, its 1-3 aspect
  scores as sampled (each FED aspect mapped to the nearest critic aspect, Overall to their
  mean); ``rating``: a 1-5 rating per aspect scored by its expected value; ``pairwise``:
  two items side by side, which is better overall, in both orders.

``--limit`` takes a random subset (``--seed``) of the items, the same for every method.
The question wordings are data (:data:`QUESTIONS`, :data:`FED_ASPECTS`), never tuned per
row. The report (``--doc``) is written from the rows alone (``_judges_report.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from _cli import names

from selfrefine.backends.base import CompletionRequest
from selfrefine.core.errors import SelfRefineError
from selfrefine.core.seeds import attempt_seed
from selfrefine.engine.calls import Caller, CallLog
from selfrefine.engine.loop import SelfRefine
from selfrefine.tasks import get_task

ROOT = Path(__file__).resolve().parent.parent
SENSE_DATA = ROOT / "benchmarks" / "data" / "sense_pairs.jsonl"
FED_DATA = ROOT.parent / "shared" / "datasets" / "fed.dev.json"
PARTS = ("sense", "fed-turn", "fed-dialogue")
METHODS = {
    "sense": ("critic", "pointwise", "pairwise"),
    "fed-turn": ("critic", "rating", "pairwise"),
    "fed-dialogue": ("rating", "pairwise"),
}
QUESTIONS = {
    "sense": "Does this sentence describe something that makes sense and could really happen? "
    "Answer Yes or No.\n\nSentence: {sentence}",
    "sense_pair": "Which sentence describes something that makes more sense and could really happen?\n"
    "A: {a}\nB: {b}\nAnswer A or B.",
    # the item first, the question last: the aspects of one item share their prefix
    "fed_rating": "{item}\n\n{definition} Rate it from 1 (very poor) to 5 (excellent). Answer with one digit.",
    "fed_pair": "Two {what}s, A and B.\n\n{what_cap} A:\n{a}\n\n{what_cap} B:\n{b}\n\n"
    "{definition} Which {what} is better overall? Answer A or B.",
}
# FED's own questions to its annotators (Mehri and Eskenazi 2020), per aspect
FED_ASPECTS = {
    "fed-turn": {
        "Overall": "What is your overall impression of the response?",
        "Interesting": "To the average person, is the response interesting?",
        "Relevant": "Is the response relevant to the conversation?",
        "Specific": "Is the response specific to the conversation, or generic?",
        "Engaging": "Is the response engaging?",
        "Correct": "Is the response correct, or was there a misunderstanding of the conversation?",
        "Semantically appropriate": "Is the response semantically appropriate?",
        "Understandable": "Is the response understandable?",
        "Fluent": "Is the response fluently written?",
    },
    "fed-dialogue": {
        "Overall": "What is your overall impression of the system in this dialogue?",
        "Coherent": "Throughout the dialogue, is the system coherent and maintaining a good conversation flow?",
        "Consistent": "Is the system consistent in the information it provides throughout the conversation?",
        "Informative": "Throughout the dialogue, does the system provide unique and non-generic information?",
        "Likeable": "Does the system display a likeable personality?",
    },
}
# the dialogue critic's aspect nearest to each FED turn aspect (Overall: the mean of all)
CRITIC_ASPECT = {
    "Interesting": "interesting",
    "Relevant": "relevant",
    "Specific": "specific",
    "Engaging": "engaging",
    "Correct": "consistent",
    "Semantically appropriate": "relevant",
    "Understandable": "fluent",
    "Fluent": "fluent",
}
DEFAULT_ASPECTS = {"fed-turn": "Overall,Interesting,Relevant,Specific", "fed-dialogue": "Overall"}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--part", default="sense", help=f"one of {', '.join(PARTS)}")
    p.add_argument("--methods", help="comma-separated (default: all of the part's)")
    p.add_argument("--aspects", help="FED aspects, comma-separated (default: Overall and three)")
    p.add_argument("--model", default="embedded", help="a model spec (default: the embedded model)")
    p.add_argument("--limit", type=int, help="a random subset of this many items (default: all)")
    p.add_argument("--seed", type=int, default=0, help="of the subset and of the FED pairs")
    p.add_argument("--data", type=Path, help="the part's data file (default: its usual place)")
    p.add_argument("--out", type=Path, default=Path("/tmp/judges"), help="rows, one JSONL file per part and method")
    p.add_argument("--doc", type=Path, default=ROOT / "docs" / "judges.md")
    p.add_argument("--report-only", action="store_true")
    p.add_argument("--no-report", action="store_true", help="run only; write no doc")
    args = p.parse_args(argv)
    [args.part] = names(args.part, PARTS, "part")
    args.methods = names(args.methods or ",".join(METHODS[args.part]), METHODS[args.part], "method")
    aspects = tuple(FED_ASPECTS.get(args.part, {}))
    args.aspects = names(args.aspects or DEFAULT_ASPECTS.get(args.part, ""), aspects, "aspect") if aspects else []
    args.data = args.data or (SENSE_DATA if args.part == "sense" else FED_DATA)
    return args


# --- data ------------------------------------------------------------------------------------


def load_sense(path: Path = SENSE_DATA) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def load_fed(part: str, path: Path = FED_DATA) -> list[dict[str, Any]]:
    """The part's FED items, each with a key and the human mean per aspect."""
    if not path.exists():
        sys.exit(f"no FED data: expected {path}")
    turn = part == "fed-turn"
    rows = [r for r in json.loads(path.read_text(encoding="utf-8")) if ("response" in r) == turn]
    prefix = "turn" if turn else "dialogue"
    return [{**r, "key": f"{prefix}-{i:03d}", "human": human_means(r["annotations"])} for i, r in enumerate(rows)]


def human_means(annotations: dict[str, list]) -> dict[str, float]:
    """The mean of each aspect's numeric ratings ("N/A (...)" answers left out)."""
    means = {}
    for aspect, ratings in annotations.items():
        numbers = [float(x) for x in ratings if isinstance(x, (int, float))]
        if numbers:
            means[aspect] = sum(numbers) / len(numbers)
    return means


def subset(items: list[dict[str, Any]], limit: int | None, seed: int) -> list[dict[str, Any]]:
    """``limit`` items (default all) in an order drawn with ``seed``: the items a run finished
    before it was stopped are a random sample too, and a larger limit extends a smaller one."""
    order = random.Random(seed).sample(range(len(items)), len(items))
    return [items[i] for i in order[:limit]]


def fed_pairs(items: list[dict[str, Any]], seed: int) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Each item against the next one of a seeded shuffle (a cycle): as many pairs as items."""
    order = list(items)
    random.Random(seed + 1).shuffle(order)
    if len(order) < 2:
        return []
    return [(order[i], order[(i + 1) % len(order)]) for i in range(len(order))] if len(order) > 2 else [tuple(order)]


def fed_text(item: dict[str, Any]) -> str:
    """The item as the judge sees it: the conversation, then the response (turn level)."""
    context = item["context"].strip()
    if "response" not in item:
        return f"Conversation:\n{context}"
    return f"Conversation:\n{context}\n\nNext response:\n{item['response'].strip()}"


# --- records ---------------------------------------------------------------------------------


def rows_path(out: Path, part: str, method: str) -> Path:
    return out / f"{part}.{method}.jsonl"


def read_rows(path: Path) -> dict[str, dict[str, Any]]:
    if not path.exists():
        return {}
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return {r["key"]: r for r in rows}


def append_row(path: Path, row: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(row) + "\n")


class Meter:
    """Calls through one run's caller, with the tokens and seconds of each measured item."""

    def __init__(self, engine: SelfRefine) -> None:
        self.engine = engine
        self.log = CallLog()
        self.caller = Caller(engine.settings.calls, engine.backends, self.log)

    async def measure(self, work: Callable[[], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
        """``work``'s row with the cost of its calls (prompt and completion tokens, seconds)."""
        first, started = len(self.log.calls), time.monotonic()
        row = await work()
        calls = self.log.calls[first:]
        return {
            **row,
            "calls": len(calls),
            "prompt_tokens": sum(c.prompt_tokens for c in calls),
            "completion_tokens": sum(c.completion_tokens for c in calls),
            "seconds": round(time.monotonic() - started, 3),
            "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        }


# --- today's critic, as the loop calls it ------------------------------------------------------


async def critique(meter: Meter, input: str, draft: str) -> tuple[Any, str]:
    """The task's feedback call on ``draft`` (its prompt, sampling, schema and parse retries, as
    the loop makes it): (the parsed Feedback or None, the raw reply)."""
    engine = meter.engine
    task, settings = engine.task, engine.settings.requests
    prompt = task.render("feedback", input, draft=draft)
    schema = task.declared.defaults.feedback_schema if settings.constrained else None
    raw = ""
    for attempt in range(1, settings.parse_retries + 2):
        temperature = max(settings.temperature["feedback"], 0.7) if attempt > 1 else settings.temperature["feedback"]
        request = CompletionRequest(
            role="feedback",
            prompt=prompt,
            system=task.declared.system,
            max_tokens=settings.max_tokens["feedback"],
            temperature=temperature,
            seed=attempt_seed(settings.seed, attempt),
            stop=settings.stop_sequences["feedback"],
            json_schema=schema,
        )
        [(response, _)] = await meter.caller.call("feedback", 0, request)
        raw = response.text
        try:
            return task.parse_feedback(raw, input=input, draft=draft), raw
        except SelfRefineError:
            continue
    return None, raw


def engine_for(task: str, model: str) -> SelfRefine:
    return SelfRefine(get_task(task), model)


def judge_for(meter: Meter):
    from selfrefine.engine.scoring.questions import (
        Questions,  # issue 29's judge (lands with the backend's probabilities)
    )

    return Questions(meter.caller)


def judgment_fields(judgment: Any) -> dict[str, Any]:
    return {
        "score": judgment.score,
        "answers": judgment.answers,
        "how": judgment.method,
        "samples": judgment.samples,
        "note": judgment.note,
    }


# --- sense -----------------------------------------------------------------------------------


async def sense_critic(meter: Meter, pair: dict[str, Any]) -> dict[str, Any]:
    input = ", ".join(pair["concepts"])
    row: dict[str, Any] = {"key": pair["id"], "kind": pair["kind"]}
    for side in ("sensible", "nonsense"):
        feedback, raw = await critique(meter, input, pair[side])
        verdict = feedback.fields.get("commonsense") if feedback is not None else None
        row[side] = {"approved": None if verdict is None else verdict == "NONE", "verdict": verdict, "raw": raw}
    return row


async def sense_pointwise(meter: Meter, pair: dict[str, Any]) -> dict[str, Any]:
    from selfrefine.engine.scoring.questions import Question

    judge = judge_for(meter)
    row: dict[str, Any] = {"key": pair["id"], "kind": pair["kind"]}
    for side in ("sensible", "nonsense"):
        question = Question("makes sense", QUESTIONS["sense"].format(sentence=pair[side]))
        row[side] = judgment_fields(await judge.ask(0, question))
    return row


async def sense_pairwise(meter: Meter, pair: dict[str, Any]) -> dict[str, Any]:
    judge = judge_for(meter)
    good, bad = pair["sensible"], pair["nonsense"]
    ab = QUESTIONS["sense_pair"].format(a=good, b=bad)
    ba = QUESTIONS["sense_pair"].format(a=bad, b=good)
    judgment = await judge.compare(0, "makes more sense", ab, ba)
    return {"key": pair["id"], "kind": pair["kind"], **judgment_fields(judgment)}


# --- FED -------------------------------------------------------------------------------------


async def fed_critic(meter: Meter, item: dict[str, Any], aspects: list[str]) -> dict[str, Any]:
    task = meter.engine.task
    response = item["response"].strip().removeprefix("System:").strip()
    feedback, raw = await critique(meter, task.prepare_input(item["context"]), response)
    scores = dict(feedback.scores) if feedback is not None and feedback.scores else {}
    judged = {a: critic_score(scores, a) for a in aspects}
    return {"key": item["key"], "human": item["human"], "scores": judged, "critic": scores, "raw": raw}


def critic_score(scores: dict[str, float], aspect: str) -> float | None:
    if not scores:
        return None
    if aspect == "Overall":
        return sum(scores.values()) / len(scores)
    return scores.get(CRITIC_ASPECT.get(aspect, ""))


async def fed_rating(meter: Meter, item: dict[str, Any], part: str, aspects: list[str]) -> dict[str, Any]:
    from selfrefine.engine.scoring.questions import Question

    judge = judge_for(meter)
    judged = {}
    for aspect in aspects:
        prompt = QUESTIONS["fed_rating"].format(item=fed_text(item), definition=FED_ASPECTS[part][aspect])
        judged[aspect] = judgment_fields(await judge.ask(0, Question.rating(aspect, prompt)))
    return {
        "key": item["key"],
        "human": item["human"],
        "scores": {a: j["score"] for a, j in judged.items()},
        "judged": judged,
    }


async def fed_pairwise(meter: Meter, pair: tuple[dict[str, Any], dict[str, Any]], part: str) -> dict[str, Any]:
    x, y = pair
    what = "conversation with its next response" if part == "fed-turn" else "dialogue"
    fields = {"what": what, "what_cap": what.split()[0].capitalize(), "definition": FED_ASPECTS[part]["Overall"]}
    xy = QUESTIONS["fed_pair"].format(a=fed_text(x), b=fed_text(y), **fields)
    yx = QUESTIONS["fed_pair"].format(a=fed_text(y), b=fed_text(x), **fields)
    judgment = await judge_for(meter).compare(0, "better overall", xy, yx)
    humans = {"x": x["human"]["Overall"], "y": y["human"]["Overall"]}
    return {"key": f"{x['key']}|{y['key']}", "human": humans, **judgment_fields(judgment)}


# --- the run ---------------------------------------------------------------------------------


def work_items(args: argparse.Namespace, method: str) -> list[tuple[str, Callable[[Meter], Awaitable[dict]]]]:
    """(key, the coroutine that measures it) for each item of the part and method."""
    if args.part == "sense":
        pairs = subset(load_sense(args.data), args.limit, args.seed)
        run = {"critic": sense_critic, "pointwise": sense_pointwise, "pairwise": sense_pairwise}[method]
        return [(p["id"], lambda m, p=p: run(m, p)) for p in pairs]
    items = subset(load_fed(args.part, args.data), args.limit, args.seed)
    if method == "pairwise":
        return [
            (f"{x['key']}|{y['key']}", lambda m, q=(x, y): fed_pairwise(m, q, args.part))
            for x, y in fed_pairs(items, args.seed)
        ]
    if method == "critic":
        return [(i["key"], lambda m, i=i: fed_critic(m, i, args.aspects)) for i in items]
    return [(i["key"], lambda m, i=i: fed_rating(m, i, args.part, args.aspects)) for i in items]


async def run(args: argparse.Namespace) -> None:
    task = "commongen" if args.part == "sense" else "dialogue"
    engine = engine_for(task, args.model)
    meter = Meter(engine)
    try:
        for method in args.methods:
            path = rows_path(args.out, args.part, method)
            done = read_rows(path)
            for key, work in work_items(args, method):
                if key in done:
                    continue
                try:
                    row = await meter.measure(lambda w=work: w(meter))
                except SelfRefineError as exc:  # kept as a failed item, counted by the report
                    row = {"key": key, "error": str(exc), "seconds": 0.0}
                append_row(path, {**row, "model": args.model})
                print(f"{args.part} {method} {key}: {row['seconds']:.1f}s", file=sys.stderr, flush=True)
    finally:
        await engine.aclose()


# the runs behind docs/judges.md, in the order they ran (one at a time, on the embedded model)
# (a run stopped at its time limit leaves the first items of its seeded order: a random subset)
COMMANDS = (
    ".venv/bin/python benchmarks/judges.py --part sense --methods pointwise,pairwise",
    "timeout 900 .venv/bin/python benchmarks/judges.py --part fed-turn --methods rating --limit 60",
    "timeout 720 .venv/bin/python benchmarks/judges.py --part fed-turn --methods pairwise --limit 60",
    "timeout 1200 .venv/bin/python benchmarks/judges.py --part sense --methods critic",
    "timeout 660 .venv/bin/python benchmarks/judges.py --part sense --methods critic   # resumed",
)


def intro() -> str:
    """The page's head: what was asked, in which words, by which commands."""
    wordings = "\n".join(f"- `{name}`: {json.dumps(text)}" for name, text in QUESTIONS.items())
    commands = "\n".join(f"    {c}" for c in COMMANDS)
    return f"""Generated by `benchmarks/judges.py` from its rows (`--report-only` rewrites this page).
Today's critic is each task's own feedback prompt and parser, sampled as the loop calls it
(commongen: a sentence is approved when its `commonsense` verdict is "NONE"; dialogue: the
critic's 1-3 aspect scores). The judge (`selfrefine.engine.scoring.questions.Questions`) asks one closed
question with one prefill and one decoded token and reads the answer tokens' probabilities:
P(Yes); a 1-5 rating as Σ p(k)·k; A or B asked in both orders, averaged, and a verdict that
flips with the order is a tie (0.5). The wordings (data in `benchmarks/judges.py`, the same
for every row; `{{definition}}` is FED's own question for the aspect):

{wordings}

Commands:

{commands}"""


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if not args.report_only:
        asyncio.run(run(args))
    if not args.no_report:
        from _judges_report import write_report

        print(write_report(args.out, args.doc, intro()))


if __name__ == "__main__":
    main()
