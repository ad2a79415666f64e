"""Loaders for the benchmark files of the seven tasks (the reference code's formats).

``load_examples(task, path)`` reads one file and returns typed :class:`Example` rows whose
``input`` is what the task's ``prepare_input`` accepts and whose ``reference`` is what its
``metric`` compares with (None when the task has no reference). Bad data fails loudly
with the file and line, rather than being skipped: a silently shorter benchmark gives
numbers that look comparable but are not.

=============  ===================================  =======================================
task           file                                 input → reference (meta)
=============  ===================================  =======================================
gsm8k          JSONL ``input``, ``target``          question → target number
commongen      JSONL ``concepts`` (list)            "a, b, c" → None
acronym        TSV ``Acronym``, ``Title`` + header  title → acronym
sentiment      JSONL ``review``, ``target_sentiment`` JSON {"review", "target"} → target
dialogue       JSON array ``context``, ``response``  context → response or None (annotations)
codeopt        JSONL ``input``, ``target``, …       slow program → None (problem_id, target)
readability    the PIE JSONL, ``input``             program → None (problem_id)
chat           JSONL ``input`` or ``messages``,     request → ``checks`` (a mapping, or None)
               optional ``checks``
anything else  JSONL ``input``, opt. ``reference``  input → reference (or ``target``)
any task       ``.txt``: one input per line          line → None
=============  ===================================  =======================================

``load_hub(name)`` fetches a public set through the optional ``datasets`` package.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from ..checks.declared import Checks
from ..core.errors import InputError, TaskError


class Example(BaseModel):
    """One benchmark row: the task input, the reference for its metric, and the rest."""

    id: str
    input: str
    reference: Any = None
    meta: dict[str, Any] = Field(default_factory=dict)


Row = dict[str, Any]
Where = str  # "file:line" for error messages

PIE_META = (
    "problem_id",
    "target",
    "submission_id_v0",
    "submission_id_v1",
    "cpu_time_v0",
    "cpu_time_v1",
    "measured_runtime_v0",
    "measured_runtime_v1",
    "improvement_frac",
)


# --- reading ------------------------------------------------------------------------------


def _open(path: str | Path) -> Path:
    p = Path(path)
    if not p.exists():
        raise InputError(f"dataset file not found: {p}")
    if not p.is_file():
        raise InputError(f"dataset path is not a file: {p}")
    return p


def _read_text(p: Path) -> str:
    try:
        return p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read dataset file {p}: {exc}") from None


def iter_jsonl(path: str | Path) -> Iterator[tuple[Where, Row]]:
    """(``file:line``, object) per non-blank line; bad JSON names the file and line."""
    p = _open(path)
    for number, line in enumerate(_read_text(p).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except RecursionError:  # json's nesting limit: one line, not a traceback
            raise InputError(
                f'{p}: line {number}: JSON nested too deeply; a row is a flat object {{"input": ...}}'
            ) from None
        except ValueError as exc:
            hint = "; for one plain-text input per line, name the file .txt" if number == 1 else ""
            raise InputError(f"{p}: line {number}: bad JSON: {exc}{hint}") from None
        if not isinstance(row, dict):
            raise InputError(f"{p}: line {number}: expected a JSON object, got {type(row).__name__}")
        yield f"{p}: line {number}", row


def iter_json_array(path: str | Path) -> Iterator[tuple[Where, Row]]:
    """(``file: item N``, object) per item of a JSON array file (FED)."""
    p = _open(path)
    try:
        data = json.loads(_read_text(p))
    except RecursionError:
        raise InputError(f"{p}: JSON nested too deeply; expected an array of flat objects") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{p}: line {exc.lineno}: bad JSON: {exc.msg}") from None
    if not isinstance(data, list):
        raise InputError(f"{p}: expected a JSON array of objects, got {type(data).__name__}")
    for number, row in enumerate(data):
        if not isinstance(row, dict):
            raise InputError(f"{p}: item {number}: expected a JSON object, got {type(row).__name__}")
        yield f"{p}: item {number}", row


def iter_text_lines(path: str | Path) -> Iterator[tuple[Where, Row]]:
    """(``file:line``, {"input": line}) per non-blank line of a plain-text file."""
    p = _open(path)
    for number, line in enumerate(_read_text(p).splitlines(), start=1):
        if line.strip():
            yield f"{p}: line {number}", {"input": line.strip()}


def iter_tsv(path: str | Path, columns: tuple[str, ...]) -> Iterator[tuple[Where, Row]]:
    """(``file:line``, {column: value}) per row of a tab-separated file with a header."""
    p = _open(path)
    lines = _read_text(p).splitlines()
    reader = csv.reader(lines, delimiter="\t", quoting=csv.QUOTE_NONE)
    header = next(reader, None)
    if header is None:
        raise InputError(f"{p}: the file is empty; expected a header row {', '.join(columns)}")
    index = {name.strip().lower(): i for i, name in enumerate(header)}
    missing = [c for c in columns if c.lower() not in index]
    if missing:
        raise InputError(f"{p}: line 1: the header lacks column(s) {', '.join(missing)} (found: {', '.join(header)})")
    for number, cells in enumerate(reader, start=2):
        if not any(c.strip() for c in cells):
            continue
        if len(cells) < len(header):
            raise InputError(f"{p}: line {number}: expected {len(header)} tab-separated fields, got {len(cells)}")
        yield f"{p}: line {number}", {c: cells[index[c.lower()]].strip() for c in columns}


def need(row: Row, field: str, where: Where, kind: type | tuple[type, ...] = str) -> Any:
    """row[field], or an InputError naming the file, line and field."""
    if field not in row or row[field] is None:
        raise InputError(f"{where}: missing field {field!r}")
    value = row[field]
    if not isinstance(value, kind) or (isinstance(value, str) and not value.strip()):
        raise InputError(f"{where}: field {field!r} must be a non-empty {_kind_name(kind)}")
    return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join({str: "string", list: "list", int: "number", float: "number"}.get(k, k.__name__) for k in kinds)


# --- one converter per format ---------------------------------------------------------------


def _gsm8k(task: str, n: int, where: Where, row: Row) -> Example:
    target = need(row, "target", where, (int, float, str))
    return Example(id=f"{task}-{n}", input=need(row, "input", where), reference=target)


def _commongen(task: str, n: int, where: Where, row: Row) -> Example:
    concepts = need(row, "concepts", where, list)
    if not all(isinstance(c, str) and c.strip() for c in concepts):
        raise InputError(f"{where}: field 'concepts' must be a list of non-empty strings")
    return Example(id=f"{task}-{n}", input=", ".join(c.strip() for c in concepts))


def _acronym(task: str, n: int, where: Where, row: Row) -> Example:
    title, acronym = row["Title"], row["Acronym"]
    if not title:
        raise InputError(f"{where}: empty Title")
    return Example(id=f"{task}-{n}", input=title, reference=acronym or None)


def _sentiment(task: str, n: int, where: Where, row: Row) -> Example:
    review = need(row, "review", where)
    wanted = need(row, "target_sentiment", where).lower()
    if ("positive" in wanted) == ("negative" in wanted):
        raise InputError(f"{where}: field 'target_sentiment' must say positive or negative, got {wanted!r}")
    target = "positive" if "positive" in wanted else "negative"
    meta = {k: row[k] for k in ("sentiment", "target_sentiment", "score") if k in row}
    text = json.dumps({"review": review, "target": target}, ensure_ascii=False)
    return Example(id=f"{task}-{n}", input=text, reference=target, meta=meta)


def _dialogue(task: str, n: int, where: Where, row: Row) -> Example:
    context = need(row, "context", where)
    response = row.get("response")
    if response is not None and not isinstance(response, str):
        raise InputError(f"{where}: field 'response' must be a string")
    meta = {k: row[k] for k in ("system", "annotations") if k in row}
    return Example(id=f"{task}-{n}", input=context, reference=response or None, meta=meta)


def _pie(task: str, n: int, where: Where, row: Row) -> Example:
    program = need(row, "input", where)
    need(row, "problem_id", where)
    if task == "codeopt":
        need(row, "target", where)
    keys = PIE_META if task == "codeopt" else ("problem_id",)
    meta = {k: row[k] for k in keys if k in row}
    return Example(id=f"{task}-{n}", input=program, meta=meta)


def _generic(task: str, n: int, where: Where, row: Row) -> Example:
    reference = row.get("reference", row.get("target"))
    meta = {k: v for k, v in row.items() if k not in ("id", "input", "reference", "target")}
    ident = str(row["id"]) if row.get("id") is not None else f"{task}-{n}"
    return Example(id=ident, input=need(row, "input", where), reference=reference, meta=meta)


def _chat(task: str, n: int, where: Where, row: Row) -> Example:
    """A request (``input``, or ``messages`` as an OpenAI client sends them, which the chat
    task reads as JSON) and its ``checks``: the metric's reference, validated here so a bad
    regex or an unknown check stops the run before any model call."""
    if "messages" in row:
        if "input" in row:
            raise InputError(f"{where}: give 'input' or 'messages', not both")
        text = json.dumps(need(row, "messages", where, list), ensure_ascii=False)
    else:
        text = need(row, "input", where)
    checks = row.get("checks")
    if checks is not None:
        if not isinstance(checks, dict):
            raise InputError(f"{where}: field 'checks' must be an object such as {{\"max_words\": 49}}")
        try:
            Checks.parse(checks)
        except TaskError as exc:
            raise InputError(f"{where}: field 'checks': {exc}") from None
    meta = {k: v for k, v in row.items() if k not in ("id", "input", "messages", "checks")}
    ident = str(row["id"]) if row.get("id") is not None else f"{task}-{n}"
    return Example(id=ident, input=text, reference=checks, meta=meta)


def _text_line(task: str, n: int, where: Where, row: Row) -> Example:
    return Example(id=f"{task}-{n}", input=row["input"])


Converter = Callable[[str, int, Where, Row], Example]
FORMATS: dict[str, tuple[str, Converter]] = {
    "gsm8k": ("jsonl", _gsm8k),
    "commongen": ("jsonl", _commongen),
    "acronym": ("tsv", _acronym),
    "sentiment": ("jsonl", _sentiment),
    "dialogue": ("json", _dialogue),
    "codeopt": ("jsonl", _pie),
    "readability": ("jsonl", _pie),
    "chat": ("jsonl", _chat),
}


def load_examples(task: str, path: str | Path, limit: int | None = None) -> list[Example]:
    """Rows of a benchmark file for ``task`` (format per the table in the module docstring).

    Tasks not in the table read JSONL with ``input`` and optional ``reference``/``target``
    and ``id``. ``limit`` keeps the first N rows (lines past it are not read)."""
    if limit is not None and limit < 0:
        raise InputError(f"limit must be 0 or more, got {limit}")
    kind, convert = FORMATS.get(task, ("jsonl", _generic))
    if Path(path).suffix.lower() == ".txt":  # one input per line, for any task; no references
        kind, convert = "txt", _text_line
    if kind == "txt":
        rows = iter_text_lines(path)
    elif kind == "tsv":
        rows = iter_tsv(path, ("Acronym", "Title"))
    elif kind == "json":
        rows = iter_json_array(path)
    else:
        rows = iter_jsonl(path)
    out: list[Example] = []
    for n, (where, row) in enumerate(rows):
        if limit is not None and n >= limit:
            break
        out.append(convert(task, n, where, row))
    return out


# --- the Hugging Face Hub (optional) ------------------------------------------------------

# name → (hub path, config, split, input field, reference field)
HUB_SETS: dict[str, tuple[str, str | None, str, str, str | None]] = {
    "gsm8k": ("openai/gsm8k", "main", "test", "question", "answer"),
    "commongen": ("allenai/common_gen", None, "validation", "concepts", None),
}


def load_hub(name: str, split: str | None = None, limit: int | None = None) -> list[Example]:
    """A public set by name (see ``HUB_SETS``, or any hub path with an ``input`` column)
    through the optional ``datasets`` package; needs network access the first time. A
    local JSON/JSONL/CSV/Parquet file path is read by the same package, offline."""
    hint = "install it with `pip install datasets` and allow network access, or use load_examples() on a file"
    offline = any(
        os.environ.get(var, "").strip().lower() in ("1", "true", "yes")
        for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
    )
    try:
        import datasets as hf  # type: ignore[import-not-found]  # optional, not a dependency
    except ImportError:
        raise InputError(f"loading {name!r} from the Hugging Face Hub needs the `datasets` package; {hint}") from None
    path, config, default_split, field, ref_field = HUB_SETS.get(name, (name, None, "test", "input", "target"))
    files = {}
    if Path(name).is_file():  # a local copy, read by the same package (works offline)
        builder = {".csv": "csv", ".parquet": "parquet"}.get(Path(name).suffix.lower(), "json")
        path, files, default_split = builder, {"data_files": name}, "train"
    try:  # offline, `datasets` itself serves only what its cache holds
        rows = hf.load_dataset(path, config, split=split or default_split, **files)
    except Exception as exc:  # network, unknown name, missing split: all reported the same way
        if offline:
            raise InputError(
                f"loading {name!r} from the Hugging Face Hub needs network access, but "
                f"HF_HUB_OFFLINE/HF_DATASETS_OFFLINE is set and the local cache lacks it ({exc})"
            ) from None
        raise InputError(f"cannot load {path!r} from the Hugging Face Hub: {exc}") from None
    out: list[Example] = []
    for n, row in enumerate(rows):
        if limit is not None and n >= limit:
            break
        value = row.get(field)
        if value is None:
            raise InputError(f"{path}: row {n} has no {field!r} column (columns: {', '.join(row)})")
        text = ", ".join(value) if isinstance(value, list) else str(value)
        reference = row.get(ref_field) if ref_field else None
        if name == "gsm8k" and isinstance(reference, str):
            reference = reference.split("####")[-1].strip().replace(",", "")  # the final number
        out.append(Example(id=f"{name}-{n}", input=text, reference=reference))
    return out


__all__ = ["Example", "FORMATS", "HUB_SETS", "load_examples", "load_hub"]


def attach_tests(examples: Sequence[Example], tests: Mapping[str, list[Any]], source: str) -> list[Example]:
    """PIE examples with their problem's test cases as the metric's reference; every
    example must have tests (a missing one would silently get no metric)."""
    missing: dict[str, list[str]] = {}
    for e in examples:
        problem_id = str(e.meta.get("problem_id", ""))
        if problem_id not in tests:
            missing.setdefault(problem_id or "(none)", []).append(e.id)
    if missing:
        shown = "; ".join(
            f"{pid} (example {', '.join(ids[:3])}{', …' if len(ids) > 3 else ''})"
            for pid, ids in list(missing.items())[:5]
        )
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        raise InputError(
            f"{source} has no tests for problem id {shown}{more}; add them to the tests file "
            "(or select fewer examples with --limit)"
        )
    return [
        e.model_copy(
            update={"reference": [{"stdin": c.stdin, "expected": c.expected} for c in tests[str(e.meta["problem_id"])]]}
        )
        for e in examples
    ]
