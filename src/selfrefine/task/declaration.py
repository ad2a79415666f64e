"""What a task declares, compiled once: its prompts (the loop's roles, the judge's aspects,
the ways to write a first draft), its defaults, its capabilities and its checks.

A :class:`~.task.Task` is its declaration plus its behaviour: the hooks that prepare an
input, parse a reply, check a draft, measure an output (:mod:`.task`). The declaration is
built when the task object is made (:meth:`Declaration.compile`): every template is parsed
and checked for unknown variables there, every pattern compiled, every default merged and
validated, so a mistake in a task fails when it is loaded, and a run only reads.

- :class:`TaskDefaults`: the defaults a run's options override, as one typed record;
- :class:`Capabilities`: what a task can do besides its prompts;
- :class:`Declaration`: all of it compiled; the templates by name — ``generate``,
  ``feedback``, ``refine``, ``refine_nofeedback``, ``judge_<aspect>``, ``generate_<way>``,
  the names of a built-in's packaged files (``selfrefine/tasks/prompts/<task>/<name>.j2``).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from ..checks.declared import Checks, FunctionVerifier, Verifier
from ..checks.instructions import InstructionChecks
from ..core.config import Finite, RefineConfig, RefineForm
from ..core.errors import TaskError
from ..core.saferegex import bounded, within_budget
from ..core.stoprule import checked_patterns, compile_pattern
from .templates import BASE_VARIABLES, Template, packaged_template

TEMPLATE_ROLES = ("generate", "feedback", "refine", "refine_nofeedback")
REQUIRED_ROLES = ("generate", "feedback", "refine")


def compile_score(pattern: str | re.Pattern[str] | None) -> re.Pattern[str] | None:
    """Compile a score regex whose first group is the number; errors name the problem. It
    runs on model output: bounded like a stop pattern (core/saferegex.py), it searches at
    most the critique's last ``MAX_REGEX_CHARS`` characters (:meth:`~.task.Task.parse_feedback`)."""
    if pattern is None:
        return pattern
    source, flags = (pattern.pattern, pattern.flags) if isinstance(pattern, re.Pattern) else (pattern, _SCORE_FLAGS)
    try:
        rx = bounded(source, flags)
    except ValueError as exc:
        raise TaskError(f"score {exc}") from None
    if rx.groups < 1:
        raise TaskError(f"score regex {source!r} needs a group around the number, e.g. 'Score: (\\d+)'")
    return rx


_SCORE_FLAGS = re.IGNORECASE | re.MULTILINE


class TaskDefaults(BaseModel):
    """A task's defaults, in one typed record: the run's options override them (and the
    constructor's keyword arguments do, for one task object)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    system: str | None = None
    generic_feedback: str = "Improve the answer."
    temperature: dict[str, Finite] = Field(default_factory=lambda: dict.fromkeys(REQUIRED_ROLES, 0.0))
    # the temperature of each of several samples (RefineConfig.samples > 1), also for a task
    # whose single sample is greedy (gsm8k): K greedy samples would be one sample K times
    sampling_temperature: Finite = Field(default=0.7, gt=0)
    max_tokens: dict[str, int] = Field(default_factory=lambda: dict.fromkeys(REQUIRED_ROLES, 300))
    feedback_schema: dict[str, Any] | None = None
    # text at which the engine stops generating, per role (cuts rambling on completion APIs)
    stop_sequences: dict[str, list[str]] = Field(default_factory=dict)
    # stop phrases (whole words, never negated) and stop patterns (regexes): core/stoprule.py
    stop_contains: list[str] = Field(default_factory=list)
    stop_matches: list[str] = Field(default_factory=list)
    score: str | None = None
    score_threshold: Finite | None = None
    max_iterations: int | None = None
    history: Literal["full", "last", "none"] = "full"  # the paper's per-task choices differ
    select: Literal["last", "best", "verified"] = "last"
    # what preset "best" sets (options given explicitly win), the configuration measured
    # best on this task (e.g. LOOP_BEST; {}: the paper's loop); None: none was measured, and
    # preset "best" is refused rather than run with settings measured on other tasks
    best: dict[str, Any] | None = None
    # what ``best`` was measured to gain and cost, in words with its source (``selfrefine tasks``)
    best_measured: str | None = None
    # derive checks from the request before the first draft (engine/derivation.py), reading the
    # input itself ("input": chat, whose input is the user's request) or the rendered generate
    # prompt ("prompt": a task file, whose template states the instructions); the run's
    # derive_checks overrides it
    derive_checks: bool = False
    checks_from: Literal["input", "prompt"] = "prompt"
    # the verifier mode a run uses unless it sets one (None: RefineConfig's, "self"); where
    # the task ranks by checks it has, "hybrid" puts their findings beside the critic's issues
    verifier_mode: Literal["self", "verifier", "hybrid"] | None = None
    # the refine form a run uses unless it sets one (None: "history", the paper's prompt); a
    # task file with checks repairs one failed check at a time ("focused": engine/focused.py)
    refine_form: RefineForm | None = None
    # which drafts repeat the input instead of answering it, failed by the engine's check
    # (checks/incomplete.py ``echoes``): "near", a generative task's (every task unless it
    # says otherwise): the input repeated, or nearly; "exact": only a word-for-word repeat
    # (chat, whose requests may ask to rewrite a text they hold); "off": a rewriting task's
    # (sentiment, toxicity, readability, codeopt), whose answer may rightly stay close to its
    # input, and whose own checks measure what it changed
    echo: Literal["near", "exact", "off"] = "near"

    @field_validator("temperature", "max_tokens", mode="before")
    @classmethod
    def _all_roles(cls, value: Any, info: ValidationInfo) -> Any:
        """One number for every role, or a {role: number} mapping (other roles: the default)."""
        if isinstance(value, (int, float)):
            return dict.fromkeys(REQUIRED_ROLES, value)
        if isinstance(value, Mapping):
            return _per_role(cls.model_fields[info.field_name].get_default(call_default_factory=True), value)
        return value

    @field_validator("stop_matches")
    @classmethod
    def _patterns(cls, value: list[str]) -> list[str]:
        return checked_patterns(value)

    @field_validator("best")
    @classmethod
    def _run_options(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        unknown = sorted(set(value or ()) - set(RefineConfig.model_fields) - {"preset"})
        if unknown:
            raise ValueError(
                f"unknown run option(s) {', '.join(unknown)}; valid: {', '.join(RefineConfig.model_fields)}"
            )
        return value

    def with_(self, **values: Any) -> TaskDefaults:
        """These defaults with some replaced (a subclass of a task adjusting its parent's)."""
        return self.model_copy(update=values)


class Capabilities(BaseModel):
    """What a task can do besides the three prompts, declared by the task (a subclass that
    overrides ``verify`` or ``answer`` without declaring it is refused at class creation)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    verifier: bool = False  # verify() checks a draft without the reference
    answer: bool = False  # answer() derives the final answer from an output (votes need it)
    runs_code: bool = False  # executes model-written programs (serve offers it only when allowed)
    judge_only: bool = False  # no metric of its own: quality is measured by a pairwise judge


@dataclass(frozen=True)
class Sources:
    """What a task class declares as class variables, read once by :meth:`Declaration.compile`."""

    name_key: tuple[str, str]  # the class and the task's name: what a compiled declaration is kept under
    name: str
    prompt_dir: str | None
    extra_variables: frozenset[str]
    judge_aspects: tuple[str, ...]
    ways: tuple[str, ...]
    default_ways: tuple[str, ...] | None
    defaults: TaskDefaults
    capabilities: Capabilities

    @classmethod
    def of(cls, task: Any, name: str) -> Sources:
        """The declarations of task class ``task`` (a :class:`~.task.Task`), for a task named ``name``."""
        return cls(
            name_key=(f"{task.__module__}.{task.__qualname__}", name),
            name=name,
            prompt_dir=task.prompt_dir,
            extra_variables=task.extra_variables,
            judge_aspects=task.judge_aspects,
            ways=task.ways,
            default_ways=task.default_ways,
            defaults=task.defaults,
            capabilities=task.capabilities,
        )


# compiled declarations of task classes by (class, name), with the sources they were compiled from
_COMPILED: dict[tuple[str, str], tuple[Sources, Declaration]] = {}
_COMPILED_LOCK = threading.Lock()


@dataclass(frozen=True)
class Declaration:
    """A task's declarations, compiled: templates by name, the judge's aspects, the ways,
    the defaults as the engine reads them, the capabilities and the verifier given as data
    or a function (``verify=``)."""

    templates: Mapping[str, Template]
    judges: tuple[str, ...]  # the judge's aspects: each a yes/no question, template judge_<aspect>
    ways: tuple[str, ...]  # ways to write a first draft (the first: ``generate``'s template)
    default_ways: tuple[str, ...] | None  # what votes draw from unless asked (None: all)
    capabilities: Capabilities
    verifier: Verifier | None  # given as verify= (a function or checks), not by overriding
    defaults: TaskDefaults
    score_pattern: re.Pattern[str] | None
    stop_matches: list[re.Pattern[str]]

    @classmethod
    def compile(
        cls,
        sources: Sources,
        given: Mapping[str, str | None],
        judge: str | Mapping[str, str] | None,
        overrides: Mapping[str, Any],
    ) -> Declaration:
        """Everything a task declares, checked and compiled (a TaskError or TemplateError
        names what is wrong): ``given`` templates by role (a built-in's come from its files),
        ``judge`` questions, ``overrides`` of the defaults."""
        defaults = merged(sources.defaults, dict(overrides))
        score_pattern = compile_score(defaults.score)
        stop_matches = [compile_pattern(p) for p in defaults.stop_matches]
        templates = {**_roles(sources, given), **_judges(sources, judge), **_ways(sources)}
        declared = cls(
            templates=templates,
            judges=tuple(n.removeprefix("judge_") for n in templates if n.startswith("judge_")),
            ways=sources.ways,
            default_ways=sources.default_ways,
            capabilities=sources.capabilities,
            verifier=None,
            defaults=defaults,
            score_pattern=score_pattern,
            stop_matches=stop_matches,
        )
        return declared.within_budget()

    @classmethod
    def of(
        cls,
        sources: Sources,
        given: Mapping[str, str | None],
        judge: str | Mapping[str, str] | None,
        overrides: Mapping[str, Any],
    ) -> Declaration:
        """:meth:`compile`, once per task class and name where nothing is given beyond its
        class's declarations (a built-in made again per engine shares its compiled templates:
        a declaration is never changed, only replaced)."""
        if any(v is not None for v in given.values()) or judge is not None or overrides:
            return cls.compile(sources, given, judge, overrides)
        with _COMPILED_LOCK:
            found = _COMPILED.get(sources.name_key)
        if found is not None and found[0] == sources:
            return found[1]
        declared = cls.compile(sources, given, judge, overrides)
        with _COMPILED_LOCK:
            _COMPILED[sources.name_key] = (sources, declared)
        return declared

    def with_verifier(self, verify: Verifier | Checks | Mapping[str, Any]) -> Declaration:
        """This declaration checked by ``verify`` (a function, or checks as data)."""
        if isinstance(verify, Mapping):  # checks as a task file writes them
            verify = Checks.parse(verify)
        verifier = verify if isinstance(verify, Checks) else FunctionVerifier(verify)
        verified = replace(
            self, verifier=verifier, capabilities=self.capabilities.model_copy(update={"verifier": True})
        )
        return verified.within_budget()

    def regexes(self) -> list[tuple[str, int]]:
        """Every regex the task brings, each with its flags: its score regex, its stop
        patterns and its checks' regexes (a mapping's or a list's)."""
        found = [(p.pattern, p.flags) for p in (self.score_pattern, *self.stop_matches) if p is not None]
        checks = self.verifier.fn if isinstance(self.verifier, FunctionVerifier) else self.verifier
        return found + (checks.regexes() if isinstance(checks, (Checks, InstructionChecks)) else [])

    def within_budget(self) -> Declaration:
        """This declaration, once its regexes together stay within one budget
        (:func:`~selfrefine.core.saferegex.within_budget`); a TaskError otherwise."""
        try:
            within_budget(self.regexes(), "regexes (score, stop patterns and checks)")
        except ValueError as exc:
            raise TaskError(f"the task's {exc}") from None
        return self

    # -- the defaults as the engine reads them ------------------------------------------------

    @property
    def system(self) -> str | None:
        return self.defaults.system

    @property
    def stop_contains(self) -> list[str]:
        return [s for s in self.defaults.stop_contains if s.strip()]

    @property
    def stop_sequences(self) -> dict[str, list[str]]:
        return {role: list(self.defaults.stop_sequences.get(role, ())) for role in REQUIRED_ROLES}

    def default_text(self) -> str:
        """The loop a run gets without options, in words."""
        d = self.defaults
        rounds = f"{d.max_iterations} rounds" if d.max_iterations is not None else "4 rounds"
        parts = [f"one draft a step, {rounds}, select {d.select}, history {d.history}"]
        if d.derive_checks:
            parts.append("checks derived from the request")
        if d.verifier_mode not in (None, "self"):
            parts.append(f"{d.verifier_mode} feedback")
        if d.refine_form not in (None, "history"):
            parts.append(f"{d.refine_form} repairs: one failed check at a time")
        return "; ".join(parts)

    def best_text(self) -> str:
        """What ``--preset best`` runs, as run options (none: it is refused)."""
        best = self.defaults.best
        if best is None:
            return "none measured (refused)"
        if not best:
            return "the paper's loop"
        options = ", ".join(f"{k}={v}" for k, v in best.items())
        measured = self.defaults.best_measured
        return f"{options} (measured: {measured})" if measured else options

    def stop_text(self) -> str:
        """The task's own stop rules in words (``selfrefine tasks``)."""
        parts = []
        if self.stop_contains:
            parts.append("feedback says " + " / ".join(repr(s) for s in self.stop_contains) + " (not negated)")
        if self.stop_matches:
            parts.append("feedback matches " + " / ".join(repr(p.pattern) for p in self.stop_matches))
        if self.defaults.score_threshold is not None:
            parts.append(f"score >= {self.defaults.score_threshold:g}")
        return "; ".join(parts) or "fixed rounds"


def _roles(sources: Sources, given: Mapping[str, str | None]) -> dict[str, Template]:
    """The loop's templates: given, or the built-in's packaged files."""
    allowed = BASE_VARIABLES | sources.extra_variables
    out: dict[str, Template] = {}
    for role in TEMPLATE_ROLES:
        source = given.get(role)
        if source is None and sources.prompt_dir:
            source = packaged_template(sources.prompt_dir, role)
        if source is None:
            if role in REQUIRED_ROLES:
                raise TaskError(f"task {sources.name!r} has no {role!r} template")
            continue
        out[role] = Template(f"{sources.name}/{role}", source, allowed)
    return out


def _judges(sources: Sources, given: str | Mapping[str, str] | None) -> dict[str, Template]:
    """The judge's questions by aspect (template ``judge_<aspect>``): given (one template is
    the aspect "judge"), or the built-in's packaged ``judge_<aspect>.j2``."""
    if given is None:
        prompts = sources.prompt_dir or ""
        found = {a: packaged_template(prompts, f"judge_{a}") for a in sources.judge_aspects}
    else:
        found = {"judge": given} if isinstance(given, str) else dict(given)
    out: dict[str, Template] = {}
    for aspect, source in found.items():
        if not isinstance(aspect, str) or not aspect.strip() or not isinstance(source, str) or not source.strip():
            raise TaskError(f"task {sources.name!r}: judge {aspect!r} needs a name and a yes/no question template")
        allowed = BASE_VARIABLES | sources.extra_variables
        out[f"judge_{aspect}"] = Template(f"{sources.name}/judge {aspect}", source, allowed)
    return out


def _ways(sources: Sources) -> dict[str, Template]:
    """The first-draft templates of the ways after the first (packaged ``generate_<way>.j2``)."""
    out: dict[str, Template] = {}
    for way in sources.ways[1:]:
        source = packaged_template(sources.prompt_dir or "", f"generate_{way}")
        if source is None:
            raise TaskError(f"task {sources.name!r} declares way {way!r} but has no generate_{way}.j2 template")
        allowed = BASE_VARIABLES | sources.extra_variables
        out[f"generate_{way}"] = Template(f"{sources.name}/generate {way}", source, allowed)
    return out


def merged(base: TaskDefaults, given: dict[str, Any]) -> TaskDefaults:
    """``base`` with the constructor's overrides; per-role fields take one value for all roles."""
    unknown = sorted(set(given) - set(TaskDefaults.model_fields))
    if unknown:
        raise TaskError(f"unknown task option(s) {', '.join(unknown)}; valid: {', '.join(TaskDefaults.model_fields)}")
    values = {k: v for k, v in given.items() if v is not None}
    for key in ("temperature", "max_tokens"):
        if key in values:
            values[key] = _per_role(getattr(base, key), values[key])
    if "stop_sequences" in values:
        values["stop_sequences"] = {r: list(v) for r, v in _per_role({}, values["stop_sequences"]).items()}
    if isinstance(values.get("score"), re.Pattern):
        values["score"] = values["score"].pattern
    compile_score(values.get("score"))  # a bad regex is a TaskError naming it
    try:
        return TaskDefaults.model_validate({**base.model_dump(), **values})
    except ValidationError as exc:
        first = exc.errors()[0]
        msg = first["msg"].removeprefix("Value error, ")
        raise TaskError(f"task option {'.'.join(map(str, first['loc']))}: {msg}") from None


def _per_role(defaults: Mapping[str, Any], given: Any) -> dict[str, Any]:
    """Per-role values from one value for all roles, or a {role: value} mapping."""
    out = dict(defaults)
    if isinstance(given, Mapping):
        unknown = set(given) - set(REQUIRED_ROLES)
        if unknown:
            raise TaskError(f"unknown role(s) {sorted(unknown)}; roles are generate, feedback, refine")
        out.update(given)
    elif given is not None:
        out = {role: given for role in REQUIRED_ROLES}
    return out
