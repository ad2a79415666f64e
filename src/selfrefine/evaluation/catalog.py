"""The datasets ``selfrefine eval --data NAME`` knows by name, and how a ``--data`` value
becomes rows.

Sets whose terms allow redistribution ship with the package (``evaluation/data/``, see
its README for source, licence and row count). The others are read from the user's own
copy: the file named here, in the folder ``$SELFREFINE_DATA`` (or given as a path).
``hf:ID`` loads a Hugging Face ``datasets`` id, or a local JSON/JSONL/CSV file through the
same optional package.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path

from ..core.errors import InputError
from .datasets import FORMATS, Example, load_examples, load_hub

DATA_DIR = Path(__file__).with_name("data")
TASK_DATA_DIR = Path(__file__).parent.parent / "tasks" / "data"  # sets written for a task, with it
DATA_ENV = "SELFREFINE_DATA"  # folder of the user's own copies of the sets not shipped
REFERENCE_CODE = "https://github.com/madaan/self-refine"


@dataclass(frozen=True)
class DataSet:
    name: str
    file: str
    tasks: tuple[str, ...]
    rows: int
    source: str
    licence: str
    shipped: bool
    get: str = ""  # where a set that is not shipped can be had
    folder: Path = DATA_DIR  # where a shipped set's file is

    def path(self) -> Path:
        return self.folder / self.file


SETS: dict[str, DataSet] = {
    s.name: s
    for s in (
        DataSet("gsm8k", "gsm8k.dev.jsonl", ("gsm8k",), 300, "GSM8K test (openai)", "MIT", True),
        DataSet("commongen_hard", "commongen_hard.dev.jsonl", ("commongen",), 100, "CommonGen-Hard", "MIT", True),
        DataSet("acronyms", "acronyms.dev.tsv", ("acronym",), 125, "self-refine acronyms", "Apache-2.0", True),
        DataSet(
            "pie_codenet_python",
            "pie_codenet_python.dev.jsonl",
            ("codeopt", "readability"),
            300,
            "PIE / Project CodeNet",
            "Apache-2.0",
            True,
        ),
        DataSet(
            "yelp_extreme",
            "yelp_extreme.dev.jsonl",
            ("sentiment",),
            200,
            "Yelp reviews",
            "Yelp dataset terms",
            False,
            f"data/tasks/yelp/yelp-extreme.jsonl of {REFERENCE_CODE}",
        ),
        DataSet(
            "fed",
            "fed.dev.json",
            ("dialogue",),
            250,
            "FED (Mehri & Eskenazi)",
            "none stated",
            False,
            f"data/prompt/responsegen/fed_data.json of {REFERENCE_CODE}",
        ),
        # written and labelled for this project (provenance in tasks/data/README.md)
        DataSet(
            "toxicity",
            "toxicity.dev.jsonl",
            ("toxicity",),
            12,
            "written for selfrefine",
            "Apache-2.0",
            True,
            folder=TASK_DATA_DIR,
        ),
        DataSet(
            "story",
            "story.dev.jsonl",
            ("story",),
            8,
            "written for selfrefine",
            "Apache-2.0",
            True,
            folder=TASK_DATA_DIR,
        ),
    )
}


def listing() -> list[dict[str, object]]:
    """One dict per known set, with where its file is (or would be) read from."""
    out = []
    for s in SETS.values():
        path = _own_copy(s) if not s.shipped else s.path()
        out.append({**asdict(s), "tasks": list(s.tasks), "folder": str(s.folder), "path": str(path) if path else None})
    return out


def _own_copy(s: DataSet) -> Path | None:
    folder = os.environ.get(DATA_ENV)
    path = Path(folder) / s.file if folder else None
    return path if path is not None and path.is_file() else None


def resolve(spec: str) -> Path:
    """The file of a ``--data`` value: an existing path, or the name of a known set."""
    path = Path(spec)
    if path.exists():
        return path
    known = SETS.get(spec) or SETS.get(spec.removesuffix(".dev.jsonl").removesuffix(".dev.tsv"))
    if known is None:
        names = ", ".join(SETS)
        raise InputError(
            f"--data {spec}: no such file, and no dataset of that name (known: {names}; "
            "`selfrefine datasets` lists them; hf:ID loads a Hugging Face dataset)"
        )
    if known.shipped:
        return known.path()
    copy = _own_copy(known)
    if copy is None:
        raise InputError(
            f"--data {spec}: {known.name} is not shipped (licence: {known.licence}); get it yourself ({known.get}), "
            f"save it as {known.file} in a folder named by ${DATA_ENV}, or pass its path to --data"
        )
    return copy


def load_data(task: str, spec: str, limit: int | None = None) -> tuple[list[Example], str]:
    """The rows of ``--data SPEC`` for ``task``, and what the run folder records as their source."""
    if spec.startswith("hf:"):
        return load_hub(spec[3:], limit=limit), spec
    path = resolve(spec)
    known = next((s for s in SETS.values() if spec in (s.name, s.file)), None)
    if known is not None and task in FORMATS and task not in known.tasks and not Path(spec).exists():
        raise InputError(
            f"--data {spec} holds rows for {', '.join(known.tasks)}, not {task}; "
            "`selfrefine datasets` lists each set's task"
        )
    return load_examples(task, path, limit), str(path.resolve())
