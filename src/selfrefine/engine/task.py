"""The task abstraction: three prompt templates, a feedback parser, a stop rule, a metric.

A task is data plus a few small hooks. Built-in tasks are thin subclasses whose templates
are packaged files (``selfrefine/tasks/prompts/<name>/<role>.j2``); a user's task is the
same class built from strings, in Python or from a YAML file (:mod:`selfrefine.tasks.taskfile`)::

    task = Task(
        name="haiku",
        generate="Write a haiku about {{ input }}.",
        feedback="Critique this haiku and end with 'Score: N/10'.\\n{{ draft }}",
        refine="Haiku: {{ draft }}\\nCritique: {{ feedback }}\\nImproved haiku:",
        score=r"Score:\\s*(\\d+)",
        stop_contains=["perfect"],
        score_threshold=9,
        verify=lambda input, draft: len(draft.splitlines()) == 3,  # optional: a verifier (engine/checks.py)
    )
"""

from __future__ import annotations

import copy
import math
import re
import warnings
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from ..core.config import RefineConfig
from ..core.errors import DraftParseError, FeedbackParseError, InputError, TaskError
from ..core.records import Feedback, Verification
from ..core.saferegex import MAX_REGEX_CHARS, bounded
from ..core.stoprule import checked_patterns, compile_pattern, stop_hit
from .checks import Checks, FunctionVerifier, Verifier
from .templates import BASE_VARIABLES, Template, packaged_template

TEMPLATE_ROLES = ("generate", "feedback", "refine", "refine_nofeedback")

# What every built-in task's system message tells a chat model after saying who it is
SYSTEM_RULES = (
    "Follow the instructions exactly and reply only in the format asked for. "
    "An example in a message is a different case, shown only for the format: never copy its content."
)


def system_message(who: str) -> str:
    """A built-in task's system message: who the model is and what it is asked, then the rules."""
    return f"You are {who}. {SYSTEM_RULES}"


REQUIRED_ROLES = ("generate", "feedback", "refine")

# the loop --preset best runs on a task that declares it: several samples chosen by the
# verifier, one round of refinement on hybrid feedback (measured on commongen and acronym,
# docs/frontier.md)
LOOP_BEST: dict[str, Any] = {"samples": 4, "max_iterations": 1, "verifier_mode": "hybrid"}
# the same on a task without code checks, whose judge ranks the samples (engine/judged.py)
JUDGED_BEST: dict[str, Any] = {"samples": 4, "max_iterations": 1}


def compile_score(pattern: str | re.Pattern[str] | None) -> re.Pattern[str] | None:
    """Compile a score regex whose first group is the number; errors name the problem. It
    runs on model output: bounded like a stop pattern (core/saferegex.py), it searches at
    most the critique's last ``MAX_REGEX_CHARS`` characters."""
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
    temperature: dict[str, float] = Field(default_factory=lambda: dict.fromkeys(REQUIRED_ROLES, 0.0))
    # the temperature of each of several samples (RefineConfig.samples > 1), also for a task
    # whose single sample is greedy (gsm8k): K greedy samples would be one sample K times
    sampling_temperature: float = Field(default=0.7, gt=0)
    max_tokens: dict[str, int] = Field(default_factory=lambda: dict.fromkeys(REQUIRED_ROLES, 300))
    feedback_schema: dict[str, Any] | None = None
    # text at which the engine stops generating, per role (cuts rambling on completion APIs)
    stop_sequences: dict[str, list[str]] = Field(default_factory=dict)
    # stop phrases (whole words, never negated) and stop patterns (regexes): core/stoprule.py
    stop_contains: list[str] = Field(default_factory=list)
    stop_matches: list[str] = Field(default_factory=list)
    score: str | None = None
    score_threshold: float | None = None
    max_iterations: int | None = None
    history: Literal["full", "last", "none"] = "full"  # the paper's per-task choices differ
    select: Literal["last", "best", "verified"] = "last"
    # what preset "best" sets (options given explicitly win), the configuration measured
    # best on this task (e.g. LOOP_BEST; {}: the paper's loop); None: none was measured, and
    # preset "best" is refused rather than run with settings measured on other tasks
    best: dict[str, Any] | None = None

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


class Task:
    """Base class of every task. Override the hooks below for task-specific behaviour."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    prompt_dir: ClassVar[str | None] = None  # packaged templates folder, for built-ins
    metric_name: ClassVar[str | None] = None
    stop_description: ClassVar[str] = ""
    extra_variables: ClassVar[frozenset[str]] = frozenset()
    max_input_chars: ClassVar[int] = 20_000
    # an input is one line (a concept list, a title): several lines would be several inputs,
    # so `run` refuses them rather than join them (eval reads a .txt as one input per line)
    one_line_input: ClassVar[bool] = False
    judge_criteria: ClassVar[str | None] = None  # what a pairwise judge compares (eval --judge)
    # the aspects the loop's judge asks about a draft, each a yes/no question in the packaged
    # template prompts/<task>/judge_<aspect>.j2 (a user's task: judge=)
    judge_aspects: ClassVar[tuple[str, ...]] = ()
    # ways to write a first draft (votes draw samples from each in turn): the first is the
    # ``generate`` template's, each other one has its packaged ``generate_<way>.j2``
    ways: ClassVar[tuple[str, ...]] = ()
    default_ways: ClassVar[tuple[str, ...] | None] = None  # what votes draw from unless asked (None: all)
    defaults: ClassVar[TaskDefaults] = TaskDefaults()
    capabilities: ClassVar[Capabilities] = Capabilities()
    _verifier: Verifier | None = None  # given as verify= (a function or checks), not by overriding

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        legacy = {
            k.removeprefix("default_"): v
            for k, v in vars(cls).items()
            if k.startswith("default_") and k.removeprefix("default_") in TaskDefaults.model_fields
        }
        if legacy:  # the class variables of before 0.2, still honoured
            warnings.warn(
                f"task class {cls.__name__}: default_* class variables are deprecated; set "
                f"defaults = {cls.__mro__[1].__name__}.defaults.with_(...)",
                DeprecationWarning,
                stacklevel=2,
            )
            cls.defaults = _merged(cls.defaults, legacy)
        for hook in ("verify", "answer"):
            overridden = getattr(cls, hook) is not getattr(Task, hook)
            if overridden and not getattr(cls.capabilities, "verifier" if hook == "verify" else "answer"):
                flag = "verifier" if hook == "verify" else "answer"
                raise TaskError(
                    f"task class {cls.__name__} overrides {hook}() but does not declare it: "
                    f"set capabilities = Capabilities({flag}=True)"
                )

    def __init__(
        self,
        name: str | None = None,
        *,
        generate: str | None = None,
        feedback: str | None = None,
        refine: str | None = None,
        refine_nofeedback: str | None = None,
        description: str | None = None,
        verify: Verifier | Checks | Mapping[str, Any] | None = None,
        judge: str | Mapping[str, str] | None = None,
        **defaults: Any,
    ) -> None:
        """Templates as strings (a built-in's come from its packaged files), a verifier
        without subclassing (``verify``: a function, or :class:`~.checks.Checks` or their dict, see
        :mod:`.checks`), the judge's yes/no questions (``judge``: one template, or
        ``{aspect: template}``; :mod:`.judged`), then any field of :class:`TaskDefaults` to
        override (``score``, ``stop_contains``, ``temperature`` as one value or per role, ...)."""
        self.name = name or type(self).name
        if not self.name:
            raise TaskError("a task needs a name")
        self.description = description if description is not None else type(self).description
        self._apply(_merged(type(self).defaults, defaults))
        given = dict(generate=generate, feedback=feedback, refine=refine, refine_nofeedback=refine_nofeedback)
        self.templates = self._compile_templates(given)
        self.judges = self._compile_judges(judge)
        self.way_templates = self._compile_ways()
        if verify is not None:
            self._set_verifier(verify)

    def _apply(self, d: TaskDefaults) -> None:
        """The task's effective defaults as attributes the engine reads."""
        self.system, self.generic_feedback = d.system, d.generic_feedback
        self.score_pattern = compile_score(d.score)
        self.stop_contains = [s for s in d.stop_contains if s.strip()]
        self.stop_matches = [compile_pattern(p) for p in d.stop_matches]
        self.score_threshold, self.max_iterations = d.score_threshold, d.max_iterations
        self.temperature, self.max_tokens = dict(d.temperature), dict(d.max_tokens)
        self.sampling_temperature = d.sampling_temperature
        self.feedback_schema = d.feedback_schema
        self.stop_sequences = {role: list(d.stop_sequences.get(role, ())) for role in REQUIRED_ROLES}
        self.default_history, self.default_select = d.history, d.select
        self.best_preset = dict(d.best) if d.best is not None else None

    def _compile_templates(self, given: Mapping[str, str | None]) -> dict[str, Template]:
        allowed = BASE_VARIABLES | self.extra_variables
        out: dict[str, Template] = {}
        for role in TEMPLATE_ROLES:
            source = given.get(role)
            if source is None and self.prompt_dir:
                source = packaged_template(self.prompt_dir, role)
            if source is None:
                if role in REQUIRED_ROLES:
                    raise TaskError(f"task {self.name!r} has no {role!r} template")
                continue
            out[role] = Template(f"{self.name}/{role}", source, allowed)
        return out

    def _compile_judges(self, given: str | Mapping[str, str] | None) -> dict[str, Template]:
        """The judge's questions by aspect: given (one template is the aspect "judge"), or the
        built-in's packaged ``judge_<aspect>.j2``."""
        if given is None:
            sources = {a: packaged_template(self.prompt_dir or "", f"judge_{a}") for a in self.judge_aspects}
        else:
            sources = {"judge": given} if isinstance(given, str) else dict(given)
        out: dict[str, Template] = {}
        for aspect, source in sources.items():
            if not isinstance(aspect, str) or not aspect.strip() or not isinstance(source, str) or not source.strip():
                raise TaskError(f"task {self.name!r}: judge {aspect!r} needs a name and a yes/no question template")
            out[aspect] = Template(f"{self.name}/judge {aspect}", source, BASE_VARIABLES | self.extra_variables)
        return out

    def _compile_ways(self) -> dict[str, Template]:
        """The first-draft templates of the ways after the first (packaged ``generate_<way>.j2``)."""
        out: dict[str, Template] = {}
        for way in self.ways[1:]:
            source = packaged_template(self.prompt_dir or "", f"generate_{way}")
            if source is None:
                raise TaskError(f"task {self.name!r} declares way {way!r} but has no generate_{way}.j2 template")
            out[way] = Template(f"{self.name}/generate {way}", source, BASE_VARIABLES | self.extra_variables)
        return out

    def render_way(self, way: str, input: str) -> str:
        """The first-draft prompt of one of the task's ``ways`` (the first: ``generate``'s)."""
        if not self.ways or way == self.ways[0]:
            return self.render("generate", input)
        if way not in self.way_templates:
            raise TaskError(f"task {self.name!r} has no way {way!r}; its ways: {', '.join(self.ways) or 'none'}")
        context = {"draft": "", "feedback": "", "history": [], "iteration": 0, **self.context(input), "input": input}
        return self.way_templates[way].render(context).strip()

    def parse_way(self, way: str | None, text: str) -> str:
        """A first draft written one of the task's ``ways``, as a draft (default: ``parse_draft``)."""
        return self.parse_draft(text)

    @property
    def has_judge(self) -> bool:
        """Whether the task's judge can rank drafts (it has at least one question)."""
        return bool(self.judges)

    def render_judge(self, aspect: str, input: str, draft: str) -> str:
        """The judge's question on one aspect of ``draft``: a yes/no question."""
        context = {"draft": draft, "feedback": "", "history": [], "iteration": 0, **self.context(input)}
        context["input"] = input
        return self.judges[aspect].render(context).strip()

    # --- hooks ----------------------------------------------------------------------------

    def prepare_input(self, text: str) -> str:
        """Validate and normalise one input; raise InputError with a clear message."""
        if text is None or not str(text).strip():
            raise InputError(f"input for task {self.name!r} is empty")
        text = str(text).strip()
        if len(text) > self.max_input_chars:
            raise InputError(
                f"input for task {self.name!r} is {len(text):,} characters; the limit is {self.max_input_chars:,}"
            )
        return text

    def context(self, input: str) -> dict[str, Any]:
        """Extra template variables derived from the input (see ``extra_variables``)."""
        return {}

    def parse_draft(self, text: str) -> str:
        """Turn raw generator/refiner output into a draft; raise DraftParseError if unusable."""
        draft = text.strip()
        if not draft:
            raise DraftParseError("the model returned an empty draft")
        return draft

    def parse_feedback(self, text: str, *, input: str, draft: str) -> Feedback:
        """Parse raw feedback; raise FeedbackParseError to have that one call retried."""
        raw = text.strip()
        if not raw:
            raise FeedbackParseError("the model returned empty feedback")
        total = None
        if self.score_pattern is not None:
            start = max(0, len(raw) - MAX_REGEX_CHARS)  # a bounded search: the score ends a critique
            match = self.score_pattern.search(raw, start)
            if match is None:
                where = f" (its last {MAX_REGEX_CHARS:,} characters)" if start else ""
                raise FeedbackParseError(f"no score matching {self.score_pattern.pattern!r} in the feedback{where}")
            try:
                total = float(match.group(1))
            except (TypeError, ValueError):
                raise FeedbackParseError(f"score {match.group(1)!r} is not a number") from None
            if not math.isfinite(total):  # "nan" would win every comparison, "inf" meet any threshold
                raise FeedbackParseError(f"score {match.group(1)!r} is not a finite number")
        return Feedback(text=raw, total=total, done=self.says_done(raw))

    def says_done(self, text: str) -> bool | None:
        """True/False when the task has stop phrases or patterns, None when it has none.
        A phrase counts as whole words and not when negated ("not done"): core/stoprule.py."""
        if not self.stop_contains and not self.stop_matches:
            return None
        return stop_hit(text, self.stop_contains, self.stop_matches) is not None

    def metric(self, input: str, output: str, reference: Any = None) -> float | None:
        """The task's quality measure of an output (None: the task has no metric)."""
        return None

    def verify(self, input: str, draft: str) -> Verification | None:
        """Tool findings on a draft (missing concepts, execution errors, failing tests).

        Tasks that can check themselves override this, or are given ``verify=`` (a function
        or checks); it drives ``verifier_mode`` ``verifier`` and ``hybrid``, ``select``
        ``verified``, ``accept`` ``not_worse`` and ``samples``. It never sees the reference
        answer: feedback must not leak the label. None: this task has no verifier."""
        return self._verifier(input, draft) if self._verifier is not None else None

    def with_verifier(self, verify: Verifier | Checks | Mapping[str, Any]) -> Task:
        """A copy of this task checked by ``verify`` (``SelfRefine(task, verify=fn)``)."""
        task = copy.copy(self)
        task._set_verifier(verify)
        return task

    def _set_verifier(self, verify: Verifier | Checks | Mapping[str, Any]) -> None:
        if type(self).capabilities.verifier:
            raise TaskError(
                f"task {self.name!r} has its own verifier ({type(self).__name__}.verify); "
                "verify= is for a task without one"
            )
        if isinstance(verify, Mapping):  # checks as a task file writes them
            verify = Checks.parse(verify)
        self._verifier = verify if isinstance(verify, Checks) else FunctionVerifier(verify)
        # this object's capabilities (the class's stay as declared)
        self.capabilities = type(self).capabilities.model_copy(update={"verifier": True})  # type: ignore[misc]

    def combine(self, critique: Feedback, check: Verification, *, input: str, draft: str) -> Feedback:
        """Hybrid feedback: the model's critique plus the tool findings; the draft is done
        only when both agree. Tasks whose findings settle part of the critique (e.g. which
        concepts are missing) override this so the refiner never sees the two disagree."""
        return critique.model_copy(
            update={
                "text": f"{critique.text}\n{check.text}".strip(),
                "done": bool(critique.done) and check.passed is not False,
                "source": "hybrid",
                "verification": check,
            }
        )

    @property
    def has_verifier(self) -> bool:
        return self.capabilities.verifier

    def answer(self, output: str) -> str | None:
        """The final answer derived from an output, when it differs from the output itself
        (e.g. the value returned by running a program). None: the output is the answer."""
        return None

    # --- rendering ------------------------------------------------------------------------

    def render(self, role: str, input: str, **variables: Any) -> str:
        template = self.templates.get(role)
        if template is None:
            raise TaskError(f"task {self.name!r} has no {role!r} template")
        context = {"draft": "", "feedback": "", "history": [], "iteration": 0}
        context.update(self.context(input))
        context.update(variables)
        context["input"] = input
        # No trailing newline: the prompt ends on the cue the answer follows ("Rewrite:"),
        # so iteration t's refine prompt is a byte prefix of iteration t+1's, where that
        # cue is followed by the next draft. Prefix caches (llama.cpp, servers) rely on it.
        return template.render(context).strip()

    def summary(self) -> dict[str, str]:
        return {
            "name": self.name,
            "description": self.description,
            "stop": self.stop_description or self._stop_text(),
            "metric": self.metric_name or "-",
        }

    def _stop_text(self) -> str:
        parts = []
        if self.stop_contains:
            parts.append("feedback says " + " / ".join(repr(s) for s in self.stop_contains) + " (not negated)")
        if self.stop_matches:
            parts.append("feedback matches " + " / ".join(repr(p.pattern) for p in self.stop_matches))
        if self.score_threshold is not None:
            parts.append(f"score >= {self.score_threshold:g}")
        return "; ".join(parts) or "fixed rounds"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


def _merged(base: TaskDefaults, given: dict[str, Any]) -> TaskDefaults:
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


class PreparedInput(str):
    """An input as a task's ``prepare_input`` returned it, with that task: the engine
    (:func:`prepared_input`) runs it as it is on that same Task object, so ``selfrefine
    run`` prepares its input once, before any model loads, where a bad input must fail."""

    task: Task

    @classmethod
    def of(cls, task: Task, text: str) -> PreparedInput:
        prepared = cls(task.prepare_input(text))
        prepared.task = task
        return prepared


def prepared_input(task: Task, input: str) -> str:
    """``input`` as ``task`` prepares it: a PreparedInput of this very task as it is (a
    plain str), any other string through ``task.prepare_input``."""
    if isinstance(input, PreparedInput) and input.task is task:
        return str(input)
    return task.prepare_input(input)
