"""A run's checks besides the task's own: the ones given with the run (``checks``) and the
ones derived from its request (:mod:`.derivation`), in the vocabulary of
:mod:`.instructions`. They are one more source of each draft's code check: the scoreboard
(:mod:`.scoreboard`) stores their verdict with the task's own, once per distinct draft.
An engine resolves the given ones and its schema once (:class:`ChecksPolicy`, when its
settings are resolved); each run holds that policy (:class:`RunChecks`) beside the checks
derived from its own request.

- a task without a verifier (chat) is checked by them alone: the score is the share of
  checks a draft passes, the findings one line per failed check ("- needs exactly 3 bullet
  points (lines starting with * or -), has 5");
- a task with a verifier of its own gets both: it passes when both pass, its score is the
  mean of the two (each in [0, 1] for the tasks that take checks: a task file's), its
  answer the task's;
- a run with a JSON Schema (``json_schema``, ``response_model``) holds a
  :class:`SchemaCheck` beside its instruction checks: a draft that is not JSON, or breaks
  the schema (or the pydantic type, its validators included), fails with one finding per
  error, named by its JSON path ("- $.age: -3 is less than the minimum of 0"); the two
  verdicts count as one, passing when both pass, scored by their mean.

Checks are fixed before the first draft is checked, so a draft's verdict never changes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter, ValidationError

from ..checks.instructions import Instruction, parse_checks, regexes
from ..core.cancel import checkpoint
from ..core.config import RefineConfig
from ..core.errors import ConfigError, TaskError
from ..core.records import DroppedCheck, Finding, RequestCheck, Verification
from ..core.saferegex import within_budget
from ..core.stoprule import STOP_FLAGS
from ..core.structured import listed, parse_error, pydantic_errors, schema_errors

if TYPE_CHECKING:
    from ..task.task import Task


def given_checks(data: Sequence[dict] | None) -> tuple[Instruction, ...]:
    """The run's own checks (``RefineConfig.checks``), parsed: a bad one is a ConfigError
    naming it, before any model call."""
    if not data:
        return ()
    try:
        return tuple(parse_checks(list(data)))
    except TaskError as exc:
        raise ConfigError(f"invalid option checks: {exc}") from None


def within_run_budget(
    task_regexes: Sequence[tuple[str, int]], stop_matches: Sequence[str], given: Sequence[Instruction]
) -> None:
    """Every regex of one run within the one budget they share
    (:func:`~selfrefine.core.saferegex.within_budget`): the task's (its score regex, stop
    patterns and checks: :meth:`~.declaration.Declaration.regexes`), the run's stop patterns
    and its regex checks, however each came (a task file's mapping or list, an API request,
    the CLI); a ConfigError before any model call otherwise."""
    asked = [*((p, STOP_FLAGS) for p in stop_matches), *regexes(given)]
    if not asked:  # the task's own were bounded together when it was made
        return
    try:
        within_budget([*task_regexes, *asked], "regexes (the task's, the stop patterns and the regex checks)")
    except ValueError as exc:
        raise ConfigError(f"invalid options: {exc}") from None


@dataclass(frozen=True)
class SchemaCheck:
    """A run's JSON Schema as a check of its drafts; ``adapter``: the pydantic type it was made
    from (``response_model``), which then validates instead, its custom validators included;
    ``name``: the type's or the schema's title."""

    schema: dict[str, Any]
    adapter: TypeAdapter[Any] | None = None
    name: str | None = None

    @classmethod
    def of(cls, schema: dict[str, Any], model: Any = None) -> SchemaCheck:
        """The check of ``schema``, validated by pydantic type ``model`` where one is given."""
        if model is None:
            title = schema.get("title")
            return cls(schema, None, title if isinstance(title, str) else None)
        return cls(schema, TypeAdapter(model), getattr(model, "__name__", None))

    def value(self, draft: str) -> tuple[Any, list[str]]:
        """The draft's JSON value (None when it is not JSON) and each of its errors (none: it validates)."""
        error = parse_error(draft)
        if error is not None:
            return None, [f"$: the reply is not JSON: {error}"]
        value = json.loads(draft)
        if self.adapter is None:
            return value, schema_errors(self.schema, value)
        from ..core.structured import value_shape_error  # only a pydantic type's check needs it here

        too_deep = value_shape_error(value)  # pydantic recurses into a recursive type too
        if too_deep is not None:
            return value, [too_deep]
        try:
            self.adapter.validate_json(draft)
        except ValidationError as exc:
            return value, pydantic_errors(exc.errors())
        except Exception as exc:  # noqa: BLE001 - a validator's own failure on a hostile draft is its finding
            return value, [f"$: the validator raised {type(exc).__name__}: {exc}"]
        return value, []

    def parsed(self, draft: str) -> Any:
        """The draft's JSON value when it validates, else None."""
        value, errors = self.value(draft)
        return None if errors else value

    def verify(self, draft: str) -> Verification:
        """The verdict: passed when it validates; scored 1, else 0.5 shared out over its errors
        (fewer is better), 0 when it is not JSON."""
        value, errors = self.value(draft)
        if not errors:
            return Verification(text="the JSON validates against the schema", passed=True, score=1.0)
        score = 0.0 if value is None and errors[0].startswith("$: the reply is not JSON") else 0.5 / len(errors)
        text = "\n".join(f"- {e}" for e in listed(errors))
        finding = Finding(check=self.record().says, text=text, repair=schema_repair(errors), kind="json_schema")
        return Verification(text=text, passed=False, score=round(score, 6), findings=[finding])

    def record(self) -> RequestCheck:
        """The check as the run's record states it (the schema itself is in the run's config)."""
        named = {"name": self.name} if self.name else {}
        says = f"JSON that validates against the schema{f' {self.name}' if self.name else ''}"
        return RequestCheck(source="schema", check={"type": "json_schema", **named}, says=says)


@dataclass(frozen=True)
class ChecksPolicy:
    """The run's checks besides the task's own, as one engine resolves them: the ones given
    with it, parsed, its JSON Schema, and whether more are derived from the request
    (:mod:`.derivation`) and from which of its texts. Every run of the engine holds this one
    (:attr:`RunChecks.policy`)."""

    given: tuple[Instruction, ...] = ()
    derive: bool = False
    source: str = "input"  # "input" (the request itself) or "prompt" (the rendered generate prompt)
    schema: SchemaCheck | None = None  # the JSON Schema the drafts must validate against

    @classmethod
    def of(cls, config: RefineConfig, task: Task, response_model: Any = None) -> ChecksPolicy:
        """The run's checks, parsed and bounded: once per engine (``Settings.resolve``)."""
        defaults = task.declared.defaults
        derive = _derives(config, task)
        schema = SchemaCheck.of(config.json_schema, response_model) if config.json_schema is not None else None
        given = given_checks(config.checks)
        within_run_budget(task.declared.regexes(), config.stop_matches, given)
        return cls(given=given, derive=derive, source=defaults.checks_from, schema=schema)

    @property
    def on(self) -> bool:
        """Whether the run checks its drafts besides the task's own verifier."""
        return bool(self.given) or self.derive or self.schema is not None

    @staticmethod
    def asked(config: RefineConfig, task: Task) -> bool:
        """What :attr:`on` will say, read from the options without parsing the checks (a bad
        one is refused when :meth:`of` parses them): answering yes/no reparsed them each time."""
        return bool(config.checks) or _derives(config, task) or config.json_schema is not None


def _derives(config: RefineConfig, task: Task) -> bool:
    """Whether checks are derived from the request: the run's option over the task's default."""
    return config.derive_checks if config.derive_checks is not None else task.declared.defaults.derive_checks


@dataclass
class RunChecks:
    """The checks of one run's drafts besides the task's own, by where they came from: the
    engine's (given, the schema: its :class:`ChecksPolicy`, held, not copied) and the run's
    request's (derived)."""

    policy: ChecksPolicy = field(default_factory=ChecksPolicy)
    derived: list[Instruction] = field(default_factory=list)
    dropped: list[DroppedCheck] = field(default_factory=list)  # derived ones left out, each with why

    @property
    def given(self) -> tuple[Instruction, ...]:
        return self.policy.given

    @property
    def schema(self) -> SchemaCheck | None:
        return self.policy.schema

    @property
    def active(self) -> bool:
        """Whether the run checks its drafts besides the task's own verifier."""
        return bool(self.all) or self.schema is not None

    @property
    def all(self) -> list[Instruction]:
        """Every check, the given first, none twice (a derived one the run already gives is dropped)."""
        return [c for _, c in self._sourced()]

    def _sourced(self) -> list[tuple[str, Instruction]]:
        seen: dict[str, tuple[str, Instruction]] = {}
        for source, checks in (("given", self.given), ("derived", self.derived)):
            for check in checks:
                seen.setdefault(check.model_dump_json(), (source, check))
        return list(seen.values())

    def records(self) -> list[RequestCheck]:
        """The checks as the run's record states them (the schema's last)."""
        records = [
            RequestCheck(source=source, check=c.model_dump(mode="json"), says=c.describe())  # type: ignore[arg-type]
            for source, c in self._sourced()
        ]
        return records + ([self.schema.record()] if self.schema is not None else [])

    def verify(self, draft: str) -> Verification | None:
        """The checks' verdict on a draft (None: the run has none)."""
        checks = self.all
        schema = self.schema.verify(draft) if self.schema is not None else None
        if not checks:
            return schema
        found = failed_findings(checks, draft)
        failed = [f.text for f in found]
        score = (len(checks) - len(failed)) / len(checks)
        text = "\n".join(f"- {f}" for f in failed) or "every check passes"
        verdict = Verification(text=text, passed=not failed, score=round(score, 6), findings=found)
        return verdict if schema is None else both(verdict, schema)


def failed_findings(checks: Sequence[Instruction], draft: str) -> list[Finding]:
    """Each check ``draft`` fails, in order: the check in words, its finding and its repair."""
    found = []
    for check in checks:
        outcome = _checked(check, draft)
        if not outcome.passed:
            found.append(check.finding(draft, outcome))
    return found


def schema_repair(errors: Sequence[str]) -> str:
    """The repair of a draft a JSON Schema refuses: its first errors, by JSON path."""
    if errors and errors[0].startswith("$: the reply is not JSON"):
        return f"Reply with JSON only, nothing around it ({errors[0].removeprefix('$: ')}); keep its content."
    named = "; ".join(listed(list(errors))[:3])
    return f"Fix the JSON so it validates against the schema ({named}); change nothing else."


def _checked(check: Instruction, draft: str) -> Any:
    """One check's outcome; first, a run cancelled meanwhile stops here (these run in a
    thread, which nothing else can stop: :mod:`~selfrefine.core.cancel`)."""
    checkpoint()
    return check.check(draft)


def both(checks: Verification, schema: Verification) -> Verification:
    """The instruction checks' verdict and the schema's as one: the findings of both, passed
    when both pass, scored by their mean."""
    failed = [v.text for v in (checks, schema) if not v.passed]
    score = round(((checks.score or 0.0) + (schema.score or 0.0)) / 2, 6)
    findings = [*schema.findings, *checks.findings]  # the shape first: a check reads the JSON's text
    return Verification(
        text="\n".join(failed) or "every check passes", passed=not failed, score=score, findings=findings
    )


def combined(own: Verification | None, requested: Verification | None) -> Verification | None:
    """A draft's code check from the task's verifier and the run's checks."""
    if requested is None:
        return own
    if own is None:
        return requested
    score = None if own.score is None else round((own.score + (requested.score or 0.0)) / 2, 6)
    passed = None if own.passed is None and requested.passed else own.passed is not False and bool(requested.passed)
    text = f"{own.text}\n{requested.text}".strip()
    findings = [*own.findings, *requested.findings]
    return own.model_copy(update={"text": text, "passed": passed, "score": score, "findings": findings})
