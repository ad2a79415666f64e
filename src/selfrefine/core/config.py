"""Run options of the Self-Refine loop."""

from __future__ import annotations

import difflib
import re
from typing import Annotated, Any, Literal, TypedDict, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_validator,
    model_serializer,
)

from .errors import ConfigError
from .stoprule import checked_patterns

History = Literal["full", "last", "none"]
Select = Literal["last", "best", "verified"]
Accept = Literal["any", "not_worse"]
FeedbackMode = Literal["actionable", "generic", "none"]
VerifierMode = Literal["self", "verifier", "hybrid"]
Preset = Literal["paper", "best"]

MAX_WAYS = 8
_WAY_NAME = re.compile(r"[A-Za-z0-9_-]{1,32}")


def _not_one_string(value: Any) -> Any:
    if isinstance(value, str):
        raise ValueError(f"a list of the task's ways, e.g. ['program', 'steps'], not the string {value!r}")
    return value


def checked_ways(ways: tuple[str, ...]) -> tuple[str, ...]:
    """``ways`` unchanged once each is a way's name (letters, digits, ``_``, ``-``; at most
    32 characters), none twice, at most 8 (a bad one raises ValueError naming it). Whether
    the task has those ways is the engine's check."""
    if not ways:
        raise ValueError("no way named: leave it unset for the task's default ways, or name one or more")
    if len(ways) > MAX_WAYS:
        raise ValueError(f"{len(ways)} ways named; at most {MAX_WAYS}")
    for i, name in enumerate(ways):
        if not _WAY_NAME.fullmatch(name):
            raise ValueError(f"way {name!r} is not a name: letters, digits, '_' and '-', at most 32 characters")
        if name in ways[:i]:
            raise ValueError(f"way {name!r} is named twice")
    return ways


def checked_strategy(name: str) -> str:
    """A strategy's name as given, once it is a name (which strategies exist is the engine's
    check: engine/drafting/registry.py, entry-point group ``selfrefine.strategies``)."""
    if not _WAY_NAME.fullmatch(name):
        raise ValueError(f"strategy {name!r} is not a name: letters, digits, '_' and '-', at most 32 characters")
    return name


# how a run spends its calls: "fixed" (the default), "auto", or a third party's registered strategy
Strategy = Annotated[str, AfterValidator(checked_strategy)]

# the task's ways a run's samples are drawn from (the API's request option is built from this
# type, so it validates the same)
Ways = Annotated[tuple[str, ...], BeforeValidator(_not_one_string), AfterValidator(checked_ways)]


class RefineConfig(BaseModel):
    """Every knob of one run. Defaults follow the paper.

    history:
      ``full`` – the refiner sees every earlier draft and feedback (paper default);
      ``last`` – only the previous draft/feedback pair besides the current one;
      ``none`` – only the current draft and its feedback (as the reference code does for
      code optimisation and readability).
    select: ``last`` returns the final (accepted) draft (paper default); ``best`` the draft
      with the highest feedback score, ties going to the later draft; ``verified`` the draft
      with the highest score of the task's own reference-free verifier (``Task.verify``),
      ties broken by the critic's done signal, then the feedback score (none ranks lowest),
      then by the earlier draft.
      Needs a task with a verifier. Rejected refinements (see ``accept``) are never returned.
    accept: ``any`` keeps every refinement (paper); ``not_worse`` rejects a refinement whose
      verifier score is lower than that of the draft it refined, or that repeats that draft
      unchanged (which under ``any`` ends the run as "no change"): it is kept in the record
      (``Iteration.accepted`` False) with the verifier's findings as its feedback (no critic
      call), and the next round refines the better draft again, with the rejected attempt
      in its history and the seed moved on by the number of rejections, so a sampled
      refiner draws a new sample. ``max_iterations`` counts refinements attempted. Needs a
      verifier. With a small model that copies what its prompt shows, pair it with
      ``history="none"`` (docs/peers.md measures both).
    feedback_mode: ``actionable`` – the task's own critic; ``generic`` – a fixed
      "improve it" message instead of a critic call; ``none`` – refine without feedback.
    verifier_mode (tasks that can check themselves, e.g. by running code):
      ``self`` – the model's own critique only (paper); ``verifier`` – the task's tool
      findings replace the critic call; ``hybrid`` – the critique plus the tool findings.
    """

    model_config = ConfigDict(extra="forbid")

    max_iterations: int | None = Field(default=None, ge=0, description="refinements; None: the task's default or 4")
    history: History | None = None  # None: the task's default (full for most tasks)
    select: Select | None = None  # None: the task's default (last for most tasks)
    feedback_mode: FeedbackMode = "actionable"
    verifier_mode: VerifierMode = "self"
    accept: Accept = "any"  # not_worse: reject refinements the verifier scores lower
    stop_on_feedback: bool = True  # honour the task's stop signal in the feedback
    # extra stop phrases (whole words, never negated) and patterns (regexes): core/stoprule.py
    stop_contains: list[str] = Field(default_factory=list)
    stop_matches: list[str] = Field(default_factory=list)
    score_threshold: float | None = None  # None: the task's default threshold, if any
    stop_on_no_change: bool = True
    max_total_tokens: int | None = Field(default=None, gt=0)
    max_seconds: float | None = Field(default=None, gt=0)
    seed: int | None = 0
    temperature: float | None = Field(default=None, ge=0)  # overrides the task for all roles
    max_tokens: int | None = Field(default=None, gt=0)  # overrides the task for all roles
    constrained: bool = True  # send the task's JSON schema for feedback where supported
    parse_retries: int = Field(default=2, ge=0)
    backend_retries: int = Field(default=4, ge=0)
    retry_base_delay: float = Field(default=1.0, ge=0)
    retry_max_delay: float = Field(default=30.0, ge=0)
    record_prompts: bool = False
    # at the refinement cap, a critique that cannot change the returned draft is skipped
    # (select "last"; select "verified" when no other draft ties with the last on the
    # verifier), and samples tied at the top go to the first instead of the critic; True
    # asks for those critiques anyway
    final_feedback: bool = False
    # drafts sampled per step: the first draft and each round's refinement are the best of
    # this many by the task's verifier (1: the paper's loop)
    samples: int = Field(default=1, ge=1, le=16, description="drafts sampled per step (1: the paper's loop)")
    # auto: spend max_total_tokens between samples per step and rounds by what the verifier
    # sees (engine/drafting/auto_rule.py has the rule); or another registered strategy's name
    strategy: Strategy = "fixed"
    # where drafts are ranked (several samples, select "verified", accept "not_worse") and the
    # code checks tie them, ask the task's judge (its yes/no questions, read as probabilities:
    # engine/judge.py); off: ties go to the critic, or to the earlier draft
    judging: bool = True
    # an answer task's several first drafts (votes: samples > 1, strategy auto) are drawn in
    # turn from these of the task's ways to write one (Task.ways, e.g. gsm8k's program and
    # steps) and voted with weights; None: the task's default ways (gsm8k: its programs); one way: no mixing
    ways: Ways | None = None
    # a named configuration: "paper" is the paper's loop (these defaults); "best" the task's
    # measured best (TaskDefaults.best); options given explicitly win over the preset's
    preset: Preset | None = None

    @field_validator(
        "history", "select", "accept", "feedback_mode", "verifier_mode", "strategy", "preset", mode="before"
    )
    @classmethod
    def _one_spelling(cls, value: Any) -> Any:
        return canonical(value)

    @field_validator("stop_matches")
    @classmethod
    def _patterns(cls, value: list[str]) -> list[str]:
        return checked_patterns(value)

    @model_serializer(mode="wrap")
    def _unset_ways_unrecorded(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """``ways`` unset is left out of the dump, so the record of a run that does not set
        it is the one it was before the option existed (an eval folder it resumes included)."""
        values: dict[str, Any] = handler(self)
        if values.get("ways", ...) is None:
            del values["ways"]
        return values

    @classmethod
    def build(cls, **values: object) -> RefineConfig:
        """Like the constructor, but a bad value is a ConfigError naming the option."""
        try:
            return cls(**{k: v for k, v in values.items() if v is not None})
        except ValidationError as exc:
            unknown = [e for e in exc.errors() if e["type"] == "extra_forbidden"]
            if unknown:
                raise ConfigError(unknown_option(str(unknown[0]["loc"][0]), list(cls.model_fields))) from None
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "config"
            raise ConfigError(f"invalid option {where}: {first['msg'].removeprefix('Value error, ')}") from None


def unknown_option(name: str, valid: list[str]) -> str:
    """The error for an option name that does not exist: the closest valid name, and all of them."""
    close = difflib.get_close_matches(name, valid, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"unknown option {name!r}{hint}; valid options: {', '.join(valid)}"


class RunOptions(TypedDict, total=False):
    """:class:`RefineConfig`'s fields as keyword arguments (``SelfRefine(task, **options)``,
    ``refine(...)``), typed for editors and type checkers; the names the API's options and
    the CLI's flags set (tests/engine/test_library_api.py keeps this list identical to the fields)."""

    max_iterations: int | None
    history: History | None
    select: Select | None
    feedback_mode: FeedbackMode
    verifier_mode: VerifierMode
    accept: Accept
    stop_on_feedback: bool
    stop_contains: list[str]
    stop_matches: list[str]
    score_threshold: float | None
    stop_on_no_change: bool
    max_total_tokens: int | None
    max_seconds: float | None
    seed: int | None
    temperature: float | None
    max_tokens: int | None
    constrained: bool
    parse_retries: int
    backend_retries: int
    retry_base_delay: float
    retry_max_delay: float
    record_prompts: bool
    final_feedback: bool
    samples: int
    strategy: Strategy
    judging: bool
    ways: tuple[str, ...] | list[str] | None
    preset: Preset | None


DEFAULT_MAX_ITERATIONS = 4


def canonical(value: Any) -> Any:
    """A choice in its one printed spelling: ``not-worse`` and ``not_worse`` are the same
    value everywhere (CLI, library, API), stored and shown as ``not_worse``."""
    return value.strip().replace("-", "_") if isinstance(value, str) else value


def choices(field: str) -> tuple[str, ...]:
    """The values a choice option of :class:`RefineConfig` takes (the CLI and the API
    offer exactly these)."""
    found: list[str] = []
    for arg in get_args(RefineConfig.model_fields[field].annotation):  # Literal[...] or Literal[...] | None
        found += [arg] if isinstance(arg, str) else [v for v in get_args(arg) if isinstance(v, str)]
    return tuple(found)
