"""Shared by benchmarks/vs_peers.py and its DSPy worker (benchmarks/_peers_dspy.py).

Imports only selfrefine and the standard library, so both virtual environments (the
project's .venv and the benchmark-only benchmarks/.venv-peers with DSPy) can load it: the
inputs, the rewards handed to DSPy, the metric applied to every system's output, the
per-example record and the aggregation all live here, once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from selfrefine.core.errors import SelfRefineError
from selfrefine.evaluation.datasets import Example, load_examples
from selfrefine.evaluation.stats import (
    Interval,
    bootstrap_mean,
    mean_known,
    paired_bootstrap_diff,
)
from selfrefine.tasks import get_task
from selfrefine.tasks.commongen import concept_coverage, parse_concepts
from selfrefine.tasks.gsm8k import to_number

ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = ROOT.parent / "shared" / "datasets"
FILES = {
    "commongen": "commongen_hard.dev.jsonl",
    "gsm8k": "gsm8k.dev.jsonl",
    "acronym": "acronyms.dev.tsv",  # ours only (benchmarks/frontier.py)
    "sentiment": "yelp_extreme.dev.jsonl",
}
TASKS = ("commongen", "gsm8k")
OURS = ("selfrefine-paper", "selfrefine-best", "selfrefine-best-notworse")
THEIRS = ("dspy-predict", "dspy-bestofn", "dspy-refine")
SYSTEMS = OURS + THEIRS


def select_examples(task: str, limit: int, data_dir: Path = DATA_DIR) -> list[Example]:
    """The first ``limit`` rows of the task's dev file: fixed, never shuffled (sentiment: the
    first half of them from its to-positive rows, the rest from its to-negative rows, as
    benchmarks/quality.py takes them)."""
    if task != "sentiment":
        return load_examples(task, data_dir / FILES[task], limit)
    rows = load_examples(task, data_dir / FILES[task])
    half, first = len(rows) // 2, (limit + 1) // 2
    return rows[:first] + rows[half : half + limit - first]


def select_rows(task: str, first: int, last: int, data_dir: Path = DATA_DIR) -> list[Example]:
    """Rows ``first`` to ``last`` (inclusive, 0-based) of the task's dev file, in file order
    (every task the same way, sentiment too). A file with fewer rows is a one-line error."""
    rows = load_examples(task, data_dir / FILES[task], last + 1)
    if len(rows) <= last:
        raise SystemExit(f"{task}: rows {first}-{last} asked for, but {FILES[task]} has {len(rows)} rows")
    return rows[first:]


def parse_span(text: str) -> tuple[int, int]:
    """``FIRST-LAST`` (inclusive 0-based row indices, FIRST <= LAST) as two ints."""
    first, dash, last = text.strip().partition("-")
    if not (dash and first.isdigit() and last.isdigit() and int(first) <= int(last)):
        raise ValueError(f"bad row range {text!r}: expected FIRST-LAST, e.g. 56-99")
    return int(first), int(last)


# --- what every system's output is scored with ------------------------------------------


def normalise(task: str, text: str | None) -> str:
    """A system's raw answer as our loop would keep it: the task's own draft parser (the
    first line of a commongen reply; the ``solution()`` function of a gsm8k reply).
    Unparseable or empty text becomes "" and scores 0."""
    if not text or not text.strip():
        return ""
    try:
        return get_task(task).parse_draft(text)
    except SelfRefineError:
        return ""


def metric(task: str, example: Example, output: str | None) -> float:
    """Our task's metric on an output; no output, or a metric that raises, scores 0."""
    if not output:
        return 0.0
    t = get_task(task)
    try:
        value = t.metric(t.prepare_input(example.input), output, example.reference)
    except Exception:  # noqa: BLE001 - a crash in scoring counts as a wrong answer
        return 0.0
    return float(value or 0.0)


def first_sentence(text: str) -> str:
    """The text up to its first sentence end: commongen asks for one sentence, and coverage
    alone rewards a paragraph that names more concepts in more sentences."""
    return re.split(r"(?<=[.!?])\s+", text.strip(), maxsplit=1)[0] if text.strip() else ""


# The rewards DSPy's Refine and BestOfN optimise. They are the same reference-free checks
# as our tasks' verifiers (tests/project/test_vs_peers.py holds them equal); DSPy's Refine shows
# the reward's source to the model when it writes advice, so they are spelled out here.


def commongen_reward(args: dict, pred: Any) -> float:
    """Share of the given concepts that the sentence uses (any word form), counted by code."""
    sentence = normalise("commongen", pred.sentence)
    return concept_coverage(parse_concepts(args["concepts"]), sentence)


def gsm8k_reward(args: dict, pred: Any) -> float:
    """1.0 when the program defines solution() and calling it returns a number, else 0.0."""
    program = normalise("gsm8k", pred.program)
    if not program:
        return 0.0
    return 1.0 if to_number(get_task("gsm8k").answer(program)) is not None else 0.0


REWARDS = {"commongen": commongen_reward, "gsm8k": gsm8k_reward}


# --- one example's outcome ---------------------------------------------------------------


class Record(BaseModel):
    """One system on one example, as a JSONL line of runs/peers/<task>/<system>.jsonl."""

    id: str
    task: str
    system: str
    one_step: str = ""  # the first answer the system produced (draft 0 / first attempt)
    output: str = ""  # what the system returned
    one_step_metric: float = 0.0
    metric: float = 0.0
    crashed: bool = False  # raised, or returned nothing: scores 0
    error: str | None = None  # the exception, or a run error that still left an output
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    seconds: float = 0.0  # wall time of this example
    load: float | None = None  # the machine's 1-minute load average when it finished
    rewards: list[float] = []  # DSPy: the reward of each attempt, in order
    stop_reason: str | None = None  # ours: why the loop stopped
    cache_hits: int = 0  # ours: calls answered from the response cache (no model call, ~0 s)
    # ours: whether any draft the run produced (every sample and refinement, chosen or not)
    # scores 1.0 by the metric: the ceiling a better selection could reach (never shown to the loop)
    any_correct: bool | None = None


def read_records(path: Path) -> dict[str, Record]:
    """The finished examples of one (task, system) file, by id (a later line wins)."""
    if not path.exists():
        return {}
    out: dict[str, Record] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            rec = Record.model_validate_json(line)
            out[rec.id] = rec
    return out


def append_record(path: Path, record: Record) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(record.model_dump_json() + "\n")


def records_path(out: Path, task: str, system: str) -> Path:
    return out / task / f"{system}.jsonl"


# --- aggregation -------------------------------------------------------------------------


class Summary(BaseModel):
    """One system on one task, over the examples it finished among the selected ones."""

    task: str
    system: str
    n: int
    one_step: Interval | None
    returned: Interval | None
    first_sentence: Interval | None  # commongen: returned output cut after its first sentence
    crashed: int
    errors: int
    calls: float  # per example
    prompt_tokens: float
    completion_tokens: float
    tokens: float
    seconds: float
    words: float  # length of the returned output, in words
    load: float | None  # mean 1-minute load average (2 cores: above 2 means waiting for CPU)
    ids: list[str]


def summarise(task: str, system: str, records: Sequence[Record], examples: Sequence[Example] = ()) -> Summary:
    """Means and intervals over ``records``; with their ``examples`` (any order), commongen
    also gets the coverage of the returned output's first sentence."""
    n = len(records)
    by_id = {e.id: e for e in examples}
    strict = None
    if task == "commongen" and records and all(r.id in by_id for r in records):
        strict = bootstrap_mean([metric(task, by_id[r.id], first_sentence(r.output)) for r in records])

    def per_example(values: Iterable[float]) -> float:
        return sum(values) / n if n else 0.0

    return Summary(
        task=task,
        system=system,
        n=n,
        one_step=bootstrap_mean([r.one_step_metric for r in records]),
        returned=bootstrap_mean([r.metric for r in records]),
        first_sentence=strict,
        crashed=sum(r.crashed for r in records),
        errors=sum(1 for r in records if r.error and not r.crashed),
        calls=per_example(r.calls for r in records),
        prompt_tokens=per_example(r.prompt_tokens for r in records),
        completion_tokens=per_example(r.completion_tokens for r in records),
        tokens=per_example(r.prompt_tokens + r.completion_tokens for r in records),
        seconds=per_example(r.seconds for r in records),
        words=per_example(len(r.output.split()) for r in records),
        load=mean_known([r.load for r in records]),
        ids=[r.id for r in records],
    )


class Ratio(BaseModel):
    """Ours / theirs on the examples both finished: cost ratios and the metric's."""

    task: str
    ours: str
    theirs: str
    n: int
    tokens: float | None
    seconds: float | None
    metric: float | None  # returned metric, ours / theirs
    diff: Interval | None  # paired returned-metric difference, ours - theirs


def ratio(task: str, ours: Sequence[Record], theirs: Sequence[Record]) -> Ratio:
    by_id = {r.id: r for r in theirs}
    pairs = [(a, by_id[a.id]) for a in ours if a.id in by_id]

    def div(num: float, den: float) -> float | None:
        return num / den if den else None

    return Ratio(
        task=task,
        ours=ours[0].system if ours else "",
        theirs=theirs[0].system if theirs else "",
        n=len(pairs),
        tokens=div(
            sum(a.prompt_tokens + a.completion_tokens for a, _ in pairs),
            sum(b.prompt_tokens + b.completion_tokens for _, b in pairs),
        ),
        seconds=div(sum(a.seconds for a, _ in pairs), sum(b.seconds for _, b in pairs)),
        metric=div(sum(a.metric for a, _ in pairs), sum(b.metric for _, b in pairs)),
        diff=paired_bootstrap_diff([b.metric for _, b in pairs], [a.metric for a, _ in pairs]) if pairs else None,
    )


def fmt_interval(iv: Interval | None) -> str:
    return "–" if iv is None else f"{iv.estimate:.3f} [{iv.low:.3f}, {iv.high:.3f}]"


def fmt_ratio(x: float | None, digits: int = 3) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def table(summaries: Sequence[Summary], ratios: Sequence[Ratio]) -> str:
    """The markdown tables: one row per (task, system), then the ratios."""
    lines = [
        (
            "| task | system | n | one-step | returned | returned, 1st sentence | crashed/empty | errors | calls/ex "
            "| prompt tok/ex | completion tok/ex | wall s/ex | words/output | load |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in summaries:
        lines.append(
            f"| {s.task} | {s.system} | {s.n} | {fmt_interval(s.one_step)} | {fmt_interval(s.returned)} | "
            f"{fmt_interval(s.first_sentence)} | {s.crashed} | {s.errors} | {s.calls:.2f} | {s.prompt_tokens:.0f} | {s.completion_tokens:.0f} | "
            f"{s.seconds:.1f} | {s.words:.0f} | {fmt_ratio(s.load, 1)} |"
        )
    lines += [
        "",
        (
            "| task | ours / theirs | n (both finished) | tokens | wall s | returned metric | "
            "metric difference ours − theirs [95%] |"
        ),
        "|---|---|---|---|---|---|---|",
    ]
    for r in ratios:
        diff = "–" if r.diff is None else f"{r.diff.estimate:+.3f} [{r.diff.low:+.3f}, {r.diff.high:+.3f}]"
        lines.append(
            f"| {r.task} | {r.ours} / {r.theirs} | {r.n} | {fmt_ratio(r.tokens)} | {fmt_ratio(r.seconds)} | "
            f"{fmt_ratio(r.metric, 2)} | {diff} |"
        )
    return "\n".join(lines)


def write_between(doc: Path, start: str, end: str, text: str) -> None:
    """Put ``text`` between the two markers of a markdown file (a file without them is left
    as it is: the report is printed either way)."""
    if not doc.exists():
        return
    content = doc.read_text(encoding="utf-8")
    if start not in content or end not in content:
        return
    head, _, rest = content.partition(start)
    _, _, tail = rest.partition(end)
    doc.write_text(f"{head}{start}\n{text}\n{end}{tail}", encoding="utf-8")


def dump_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
