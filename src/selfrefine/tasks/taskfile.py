"""User tasks as YAML files, no Python needed.

Example (``examples/haiku.yaml``, with ``checks`` added)::

    name: haiku
    description: a haiku about a topic
    generate: |
      Write a haiku about {{ input }}.
    feedback: |
      Haiku: {{ draft }}
      List concrete problems, then end with "Score: N/10".
    refine: |
      Topic: {{ input }}
      {% for h in history %}Earlier haiku: {{ h.draft }}
      Its critique: {{ h.feedback }}
      {% endfor %}Haiku: {{ draft }}
      Critique: {{ feedback }}
      Write an improved haiku.
    score: 'Score:\\s*(\\d+)'
    stop:
      contains: "no problems"
      score_at_least: 9
    max_iterations: 3
    checks:             # optional: a verifier without code (selfrefine.checks.declared)
      min_lines: 3
      max_lines: 3
      must_not_match: '(?i)\bsorry\b'
    judge: |            # optional: a yes/no question the model's probabilities answer
      Haiku: {{ draft }}
      Is this a vivid haiku about {{ input }}? Answer Yes or No.

``checks`` is either that mapping or a list of checks in the vocabulary of
:mod:`selfrefine.checks.instructions` (``- {type: count, unit: lines, relation: exactly, n:
3}``); a file with checks is measured by them: its metric is the share of its checks an
output passes, so ``selfrefine eval`` reports draft 0 against the returned draft. They steer the
run by default (``verifier_mode: hybrid``): a critic's "done" cannot end it while a check fails.
``derive_checks: true`` also derives checks from each request's rendered ``generate``
prompt before the first draft (:mod:`selfrefine.engine.derivation`): the instructions the
prompt states ("under 40 words") become checks that rank and refine the drafts.

Every problem is reported as one message naming the file and the key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationError

from ..checks.declared import Checks
from ..checks.instructions import InstructionChecks
from ..core.config import Finite, RefineForm
from ..core.errors import TaskError, TaskFileError
from ..task.task import REPAIR_BEST, Task

MAX_TASK_FILE_BYTES = 1_000_000
MAX_NESTING = 64  # far deeper than any real schema; deeper would overflow a recursive parser
MAX_NODES = 100_000  # values after alias expansion: a "billion laughs" file stops here


class StopSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    contains: str | list[str] | None = None  # whole words, never negated ("not done" is no stop)
    matches: str | list[str] | None = None  # regular expressions, taken as written
    score_at_least: Finite | None = None


# a task file's ``checks:``: the mapping of regexes and counts (checks/declared.py), or a list of
# instruction checks (checks/instructions); which one is read from the value's shape, so an
# error names the keys of the form it was written in
CheckSpec = Annotated[
    Annotated[Checks, Tag("mapping")] | Annotated[list[dict[str, Any]], Tag("list")],
    Discriminator(lambda value: "list" if isinstance(value, list) else "mapping"),
]


# a temperature for every role, or {role: temperature}; which one is read from the value's
# shape, so an error names the key and not both forms
PerRoleTemperature = Annotated[
    Annotated[Finite, Tag("number")] | Annotated[dict[str, Finite], Tag("per role")],
    Discriminator(lambda value: "per role" if isinstance(value, dict) else "number"),
]


class TaskSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1)
    description: str = ""
    generate: str
    feedback: str
    refine: str
    refine_nofeedback: str | None = None
    system: str | None = None
    score: str | None = None
    stop: StopSpec | None = None
    max_iterations: int | None = Field(default=None, ge=0)
    generic_feedback: str | None = None
    temperature: PerRoleTemperature | None = None
    max_tokens: int | dict[str, int] | None = None
    feedback_schema: dict[str, Any] | None = None
    stop_sequences: list[str] | dict[str, list[str]] | None = None
    history: Literal["full", "last", "none"] | None = None
    select: Literal["last", "best", "verified"] | None = None
    # the task's verifier: regexes, word and line counts, required words; or a list of checks
    # (checks/instructions); also what the file's outputs are measured by
    checks: CheckSpec | None = None
    derive_checks: bool = False  # derive each request's checks from its generate prompt (engine/derivation.py)
    # the judge: a yes/no question, or {aspect: question}, ranking drafts the checks tie (engine/judge.py)
    judge: str | dict[str, str] | None = None
    best: dict[str, Any] | None = None  # what --preset best sets, measured on this task
    # which drafts repeat the input instead of answering it (checks/incomplete.py): near (the
    # default), exact (a word-for-word repeat only), off (a rewriting task)
    echo: Literal["near", "exact", "off"] | None = None
    # how the checks steer: hybrid (the default with checks: their findings beside the critic's,
    # and a critic's "done" cannot end the run while a check fails), verifier (findings only), self
    verifier_mode: Literal["self", "verifier", "hybrid"] | None = None
    # how a draft that fails its checks is refined: focused (the default with checks: one failed
    # check's repair at a time, engine/focused.py), rewrite, or history (the paper's prompt)
    refine_form: RefineForm | None = None


def load_task(path: str | Path) -> Task:
    """Load and validate a YAML task file; raise TaskFileError naming what is wrong."""
    p = Path(path).expanduser()
    data = _read_yaml(p)
    try:
        spec = TaskSpec.model_validate(data)
    except ValidationError as exc:
        raise TaskFileError(f"task file {p}: {_describe(exc)}") from None
    try:
        task = task_from_spec(spec)
    except TaskError as exc:
        raise TaskFileError(f"task file {p}: {exc}") from None
    for template in task.declared.templates.values():  # a render's error names the file too
        template.origin = str(p)
    return task


class FileTask(Task):
    """A task file with checks: measured by them (the share passed); a file without checks is a
    plain :class:`Task`, with no metric."""

    metric_name = "share of the task file's checks passed (code)"

    def metric(self, input: str, output: str, reference: Any = None) -> float | None:
        return self.declared.verifier(input, output).score


def task_from_spec(spec: TaskSpec) -> Task:
    stop = spec.stop or StopSpec()
    contains = [stop.contains] if isinstance(stop.contains, str) else (stop.contains or [])
    matches = [stop.matches] if isinstance(stop.matches, str) else (stop.matches or [])
    checks = InstructionChecks(spec.checks) if isinstance(spec.checks, list) else spec.checks
    kind = FileTask if checks is not None else Task  # without checks a file has no metric
    checked = checks is not None or spec.derive_checks  # code checks its drafts
    repair_best = (
        checked and spec.best is None
    )  # the path measured on IFEval (docs/ifeval.md), unless the file says its own
    return kind(
        spec.name,
        generate=spec.generate,
        feedback=spec.feedback,
        refine=spec.refine,
        refine_nofeedback=spec.refine_nofeedback,
        description=spec.description,
        system=spec.system,
        score=spec.score,
        stop_contains=contains,
        stop_matches=matches,
        score_threshold=stop.score_at_least,
        max_iterations=spec.max_iterations,
        generic_feedback=spec.generic_feedback,
        temperature=spec.temperature,
        max_tokens=spec.max_tokens,
        feedback_schema=spec.feedback_schema,
        stop_sequences=spec.stop_sequences,
        history=spec.history,
        select=spec.select,
        verify=checks,
        judge=spec.judge,
        best=REPAIR_BEST if repair_best else spec.best,
        best_measured="on chat's IFEval prompts, not this task" if repair_best else None,
        derive_checks=spec.derive_checks,
        echo=spec.echo,
        verifier_mode=spec.verifier_mode or ("hybrid" if checked else None),
        refine_form=spec.refine_form or ("focused" if checked else None),
    )


def _read_yaml(p: Path) -> dict[str, Any]:
    try:
        if p.stat().st_size > MAX_TASK_FILE_BYTES:
            raise TaskFileError(f"task file {p} is larger than {MAX_TASK_FILE_BYTES:,} bytes")
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TaskFileError(f"task file not found: {p}") from None
    except IsADirectoryError:
        raise TaskFileError(f"task file {p} is a directory") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskFileError(f"cannot read task file {p}: {exc}") from None
    try:
        data = yaml.safe_load(text)
    except RecursionError:  # the YAML composer recurses once per level
        raise TaskFileError(_too_deep(f"task file {p}")) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise TaskFileError(f"task file {p} is not valid YAML{where}: {problem}") from None
    if not isinstance(data, dict):
        raise TaskFileError(f"task file {p} must be a YAML mapping with keys name, generate, feedback, refine")
    check_shape(data, f"task file {p}")
    return data


def _too_deep(what: str) -> str:
    return (
        f"{what} is nested more than {MAX_NESTING} levels deep; flatten its lists and mappings (e.g. feedback_schema)"
    )


def check_shape(data: Any, what: str) -> None:
    """No deeper than MAX_NESTING (validation, templates and grammars recurse) and no more
    than MAX_NODES values once YAML aliases are expanded (a loop: no recursion to overflow);
    a TaskFileError naming ``what`` (the file: a task file, a ``--json-schema`` file) otherwise."""
    todo, visited = [(data, 1)], 0
    while todo:
        node, level = todo.pop()
        if not isinstance(node, (dict, list)):
            continue
        if level > MAX_NESTING:  # also ends a self-referencing alias
            raise TaskFileError(_too_deep(what))
        visited += len(node)
        if visited > MAX_NODES:
            raise TaskFileError(
                f"{what} expands to more than {MAX_NODES:,} values (YAML aliases?); write it out without aliases"
            )
        todo.extend((child, level + 1) for child in (node.values() if isinstance(node, dict) else node))


_SECTIONS: dict[str, type[BaseModel]] = {"stop": StopSpec, "checks": Checks}
_BRANCHES = ("mapping", "list", "number", "per role")  # the tagged unions' forms, left out of the keys an error names


def _describe(exc: ValidationError) -> str:
    messages = []
    for err in exc.errors():
        loc = err["loc"]
        if loc[:1] in (("checks",), ("temperature",)) and loc[1:2] and loc[1] in _BRANCHES:
            loc = (loc[0], *loc[2:])
        key = ".".join(str(p) for p in loc) or "(top level)"
        if err["type"] == "missing":
            messages.append(f"missing key {key!r}")
        elif err["type"] == "extra_forbidden":
            section = TaskSpec if len(loc) == 1 else _SECTIONS.get(str(loc[0])) if len(loc) == 2 else None
            known = f" (known: {', '.join(section.model_fields)})" if section is not None else ""
            messages.append(f"unknown key {key!r}{known}")
        else:
            messages.append(f"key {key!r}: {err['msg'].removeprefix('Value error, ')}")
    return "; ".join(dict.fromkeys(messages))
