"""Run options of the Self-Refine loop."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from functools import cache
from typing import Annotated, Any, Literal, TypedDict, get_args

import annotated_types
from pydantic import (
    AfterValidator,
    AllowInfNan,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from .errors import ConfigError
from .later import Later
from .stoprule import checked_patterns
from .structured import checked_schema

History = Literal["full", "last", "none"]
Select = Literal["last", "best", "verified"]
Accept = Literal["any", "not_worse"]
FeedbackMode = Literal["actionable", "generic", "none"]
VerifierMode = Literal["self", "verifier", "hybrid"]
Preset = Literal["paper", "best"]
RefineForm = Literal["history", "focused", "rewrite", "by_kind"]
REPAIR_FORMS = (
    "focused",
    "rewrite",
    "by_kind",
)  # the refine forms that repair one failed check at a time (engine/focused.py)

MAX_WAYS = 8
UNRECORDED_WHEN_UNSET = (
    "ways", "checks", "derive_checks", "json_schema", "refine_form", "repair_samples", "ban_tokens",
)  # fmt: skip
DEFAULT_REPAIR_SAMPLES = 2
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

# a number a setting takes: NaN and infinity are refused, naming the field ("Input should be a
# finite number"), wherever settings are read (options, task files, requests, backend options),
# not when the first model call cannot encode them as JSON
Finite = Annotated[float, AllowInfNan(False)]

# a JSON Schema the drafts must validate against: checked before any model call (core/structured.py)
JsonSchema = Annotated[dict[str, Any], BeforeValidator(checked_schema)]

# the task's ways a run's samples are drawn from (the API's request option is built from this
# type, so it validates the same)
Ways = Annotated[tuple[str, ...], BeforeValidator(_not_one_string), AfterValidator(checked_ways)]


@dataclass(frozen=True)
class Offer:
    """Where a :class:`RefineConfig` option is offered besides the library, declared on its
    field (``Annotated[type, Offer(...)]``) beside its type, default and bounds.

    flags: the CLI's spellings of its flag, the first shown first and the others aliases (the
      library's name where the CLI's is shorter: ``--max-iters``, ``--max-iterations``); a bool's
      flag sets the opposite of its default (``--no-constrain``). Empty: no CLI flag.
    api: a request to ``selfrefine serve`` may set it.
    help: what ``--help`` says of the flag.
    metavar: the flag's name for its value, where the type's own would not say it.
    """

    flags: tuple[str, ...] = ()
    api: bool = False
    help: str | None = None
    metavar: str | None = None


class RefineConfig(Later):
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
    refine_form: ``history`` (None, the default) – the paper's refine prompt: the draft, its
      feedback and the earlier versions per ``history``; ``focused`` – one failed check at a
      time: a short prompt with the request, the current draft and that check's repair
      instruction, kept only when that check passes and no passing check breaks, else the
      next failed check is tried (engine/focused.py). ``rewrite`` – the same, but the prompt
      writes again from the request with the failed instruction stated first ("Important:
      use no commas."), without the draft. ``by_kind`` – each check kind in the form measured
      to fix it (rewrite for forbidden characters, focused for the rest: docs/ifeval.md), and
      a draft missing what more text can add (too few words) continued: the model writes what
      follows its end, which is appended. All need code checks.
    repair_samples: how many times a focused or rewrite repair is asked for before the next
      failed check is tried (the first that passes wins; None: 2).
    ban_tokens: every draft decoded with the tokens its checks forbid outright refused
      ("use no commas": no token holding a comma; "use only capital letters": none holding
      a lowercase letter; core/bans.py), where the backend can (the embedded llama.cpp
      model); elsewhere the request asks by its words alone. None: off.
    verifier_mode (tasks that can check themselves, e.g. by running code):
      ``self`` – the model's own critique only (paper); ``verifier`` – the task's tool
      findings replace the critic call; ``hybrid`` – the critique plus the tool findings.
    """

    model_config = ConfigDict(extra="forbid")
    LATER = UNRECORDED_WHEN_UNSET  # options added after runs were recorded: dumped only when set

    # Each option is declared here once: its type, default and bounds (the one cap), and in
    # ``Offer`` its CLI flag(s) and help and whether a request to the server may set it; the
    # CLI's loop flags (cli/options.py) and the API's request options (service/schemas.py)
    # are built from these declarations. ``RunOptions`` below repeats the names and types for
    # type checkers (tests/engine/test_library_api.py holds the two identical).
    max_iterations: Annotated[
        int | None,
        Offer(("--max-iters", "--max-iterations"), api=True, help="Maximum refinements (default: task's, else 4)."),
    ] = Field(default=None, ge=0, description="refinements; None: the task's default or 4")
    # None: the task's default (full for most tasks)
    history: Annotated[
        History | None,
        Offer(
            ("--history",),
            api=True,
            help="What the refiner sees: all earlier drafts+feedback, the previous pair, or none (default: the task's).",
        ),
    ] = None
    # None: the task's default (last for most tasks)
    select: Annotated[
        Select | None,
        Offer(
            ("--select",),
            api=True,
            help="Return the last draft, the best-scored one, or the one the task's own verifier "
            "scores highest (ties: feedback score, then the earlier draft) (default: the task's).",
        ),
    ] = None
    feedback_mode: Annotated[
        FeedbackMode,
        Offer(
            ("--feedback-mode",),
            api=True,
            help="The paper's ablation: task critic, a fixed generic message, or no feedback.",
        ),
    ] = "actionable"
    verifier_mode: Annotated[
        VerifierMode,
        Offer(
            ("--verifier-mode",),
            api=True,
            help="Feedback from the model (self), the task's own checks (verifier), or both (hybrid).",
        ),
    ] = "self"
    # not_worse: reject refinements the verifier scores lower
    accept: Annotated[
        Accept,
        Offer(
            ("--accept",),
            api=True,
            help="not_worse (or not-worse): reject a refinement the task's verifier scores lower than the "
            "draft it refined, or that leaves it unchanged, and refine that draft again with the next seed.",
        ),
    ] = "any"
    stop_on_feedback: bool = True  # honour the task's stop signal in the feedback
    # extra stop phrases (whole words, never negated) and patterns (regexes): core/stoprule.py
    stop_contains: Annotated[
        list[str],
        Offer(
            ("--stop-contains",),
            help="Stop when the feedback says this phrase: whole words, any case, not negated ('not done' is no stop).",
        ),
    ] = Field(default_factory=list)
    stop_matches: Annotated[
        list[str], Offer(("--stop-matches",), help="Stop when the feedback matches this regular expression.")
    ] = Field(default_factory=list)
    # None: the task's default threshold, if any
    score_threshold: Annotated[
        Finite | None, Offer(("--score-threshold",), help="Stop once the feedback score reaches this.")
    ] = None
    stop_on_no_change: bool = True
    max_total_tokens: Annotated[
        int | None,
        Offer(("--budget-tokens", "--max-total-tokens"), api=True, help="Stop after this many tokens in total."),
    ] = Field(default=None, gt=0)
    max_seconds: Annotated[
        Finite | None,
        Offer(("--budget-seconds", "--max-seconds"), api=True, help="Stop after this many seconds."),
    ] = Field(default=None, gt=0)
    seed: Annotated[
        int | None,
        Offer(
            ("--seed",),
            api=True,
            help="Seed of the model's sampling: the same seed, model and input give the same run; the "
            "samples of a step and the retries of a rejected refinement take seeds derived from it "
            "(core/seeds.py).",
        ),
    ] = 0
    # overrides the task for all roles
    temperature: Annotated[
        Finite | None, Offer(("--temperature",), api=True, help="Sampling temperature for every role.")
    ] = Field(default=None, ge=0)
    # overrides the task for all roles
    max_tokens: Annotated[int | None, Offer(("--max-tokens",), api=True, help="Completion tokens per call.")] = Field(
        default=None, gt=0
    )
    # decode under a JSON schema where the backend can: the critic's reply under the task's
    # feedback schema, and with json_schema the drafts under the run's
    constrained: Annotated[
        bool,
        Offer(
            ("--no-constrain",),
            help="Do not constrain replies to a JSON schema (the critic's to the task's feedback schema, the "
            "drafts to --json-schema's): they are still parsed and checked.",
        ),
    ] = True
    parse_retries: int = Field(default=2, ge=0)
    backend_retries: int = Field(default=4, ge=0)
    retry_base_delay: Finite = Field(default=1.0, ge=0)
    retry_max_delay: Finite = Field(default=30.0, ge=0)
    record_prompts: bool = False
    # at the refinement cap, a critique that cannot change the returned draft is skipped
    # (select "last"; select "verified" when no other draft ties with the last on the
    # verifier), and samples tied at the top go to the first instead of the critic; True
    # asks for those critiques anyway
    final_feedback: Annotated[
        bool,
        Offer(
            ("--final-feedback",),
            api=True,
            help="Critique the last draft even when that cannot change the result (with --select last "
            "at --max-iters the run otherwise skips that call).",
        ),
    ] = False
    # drafts sampled per step: the first draft and each round's refinement are the best of
    # this many by the task's verifier (1: the paper's loop); le=16 is the option's one cap (a
    # server's smaller one is its policy: service/engines.py Caps)
    samples: Annotated[
        int,
        Offer(
            ("--samples",),
            api=True,
            help="Drafts sampled per step, each checked by the task's verifier: the first draft is the best "
            "sample, and a round's best refinement replaces its draft only if it scores higher.",
        ),
    ] = Field(default=1, ge=1, le=16, description="drafts sampled per step (1: the paper's loop)")
    # auto: spend max_total_tokens between samples per step and rounds by what the verifier
    # sees (engine/drafting/auto_rule.py has the rule); or another registered strategy's name
    strategy: Annotated[
        Strategy,
        Offer(
            ("--strategy",),
            api=True,
            help="fixed: the same number of samples every step (--samples; 1: the paper's loop); auto: spend "
            "--budget-tokens between samples per step and rounds by what the verifier sees (the first draft "
            "starts with 1 sample, then doubles while the samples score differently; an answer task such as "
            "gsm8k starts with 2 votes; stop when the verifier is satisfied; wider after echoes or rejections, "
            "deeper after an accepted refinement; at most 8 drafts a step, or --samples K); or a strategy a "
            "package registers (selfrefine.strategies).",
        ),
    ] = "fixed"
    # where drafts are ranked (several samples, select "verified", accept "not_worse") and the
    # code checks tie them, ask the task's judge (its yes/no questions, read as probabilities:
    # engine/judge.py); off: ties go to the critic, or to the earlier draft
    judging: Annotated[
        bool,
        Offer(
            ("--no-judging",),
            api=True,
            help="Do not ask the task's judge (yes/no questions read as probabilities) to rank the drafts "
            "that its code checks tie; the critic or the earlier draft decides instead.",
        ),
    ] = True
    # an answer task's several first drafts (votes: samples > 1, strategy auto) are drawn in
    # turn from these of the task's ways to write one (Task.ways, e.g. gsm8k's program and
    # steps) and voted with weights; None: the task's default ways (gsm8k: its programs); one way: no mixing
    ways: Annotated[
        Ways | None,
        Offer(
            ("--ways",),
            api=True,
            metavar="WAY,...",
            help="ways to draw an answer task's voted samples from, in turn (default: the task's; gsm8k's "
            "ways: program, steps, quantities; default program)",
        ),
    ] = None
    # checks of the drafts besides the task's own, as data (checks/instructions: e.g. {"type":
    # "count", "unit": "words", "relation": "at most", "n": 50}); with derive_checks they
    # extend the checks derived from the request, without it they are the run's checks
    checks: Annotated[
        list[dict[str, Any]] | None,
        Offer(
            ("--checks",),
            api=True,
            metavar="FILE",
            help="A JSON or YAML file with a list of checks every draft must pass (e.g. [{type: count, unit: "
            'words, relation: at most, n: 50}]; the README\'s "Checks derived from the request" lists the types): they rank and refine '
            "the drafts like a task's own checks, beside the ones derived from the request; their findings sit "
            "beside the critic's, which cannot end the run while one fails (verifier mode hybrid, unless set).",
        ),
    ] = Field(default=None, max_length=32)
    # before the first draft, the model turns the request's explicit, checkable instructions
    # into checks (engine/derivation.py); None: the task's default (chat: on)
    derive_checks: Annotated[
        bool | None,
        Offer(
            ("--derive-checks/--no-derive-checks",),
            api=True,
            help="Before the first draft, turn the request's explicit instructions (counts, words, format, "
            "case, language, ...) into code checks that rank and refine the drafts (default: the task's; "
            "chat: on).",
        ),
    ] = None
    # structured output: every draft is JSON that validates against this schema (decoded under it
    # where the backend can, its prompt told the shape), a failing draft is refined with its
    # errors, a valid one stops the run, and RunResult.parsed is the JSON value (engine/run_checks.py
    # SchemaCheck); the library's response_model= gives a pydantic type's schema instead
    json_schema: Annotated[
        JsonSchema | None,
        Offer(
            ("--json-schema",),
            api=True,
            metavar="FILE",
            help="A JSON (or YAML) file with a JSON Schema: every draft must be JSON that validates against it "
            "(decoded under it where the backend can); validation errors are refined away, a valid draft stops "
            "the run, and the output's JSON is the result's parsed value.",
        ),
    ] = None
    # a named configuration: "paper" is the paper's loop (these defaults); "best" the task's
    # measured best (TaskDefaults.best); options given explicitly win over the preset's
    preset: Annotated[
        Preset | None,
        Offer(
            ("--preset",),
            api=True,
            help="paper: the paper's loop (the defaults); best: the task's measured best configuration "
            "(docs/frontier.md). Options given explicitly win.",
        ),
    ] = None
    # None: "history", the paper's form (recorded only when set, so runs before it read the same)
    refine_form: Annotated[
        RefineForm | None,
        Offer(
            ("--refine-form",),
            api=True,
            help="history: the paper's refine prompt (draft, feedback, earlier versions; the default); focused: one "
            "failed check at a time, a short prompt with the request, the draft and that check's repair, kept only "
            "when it passes and no passing check breaks; rewrite: the same, written again from the request with the "
            "failed instruction stated first, without the draft; by_kind: each check kind in the form measured to fix "
            "it (rewrite for forbidden characters, focused for the rest), and a draft missing what more text can add "
            "(too few words) continued, the model's continuation appended.",
        ),
    ] = None
    repair_samples: Annotated[
        int | None,
        Offer(
            ("--repair-samples",),
            api=True,
            help=f"With --refine-form focused or rewrite: tries of each repair before the next failed check (default "
            f"{DEFAULT_REPAIR_SAMPLES}; the first that passes wins).",
        ),
    ] = Field(default=None, ge=1, le=8)
    ban_tokens: Annotated[
        bool | None,
        Offer(
            ("--ban-tokens/--no-ban-tokens",),
            api=True,
            help="Decode every draft with the tokens its checks forbid outright refused: no token holding a comma "
            "under 'use no commas', none holding a lowercase letter under 'use only capital letters' (the embedded "
            "llama.cpp model; a remote model is asked by the request's words alone). Default: off; chat's "
            "--preset best: on.",
        ),
    ] = None

    @model_validator(mode="before")
    @classmethod
    def _one_spelling(cls, values: Any) -> Any:
        return spelled_once(values)

    @field_validator("stop_matches")
    @classmethod
    def _patterns(cls, value: list[str]) -> list[str]:
        return checked_patterns(value)

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
    return f"unknown option {name!r}{did_you_mean(name, valid)}; valid options: {', '.join(valid)}"


def did_you_mean(name: str, valid: list[str]) -> str:
    """`` (did you mean 'max_iterations'?)`` for a name that is not one of ``valid``: the
    option a CLI spelling of it names (``max_iters``, ``--budget-tokens``), else the closest
    valid name; empty when none is close."""
    named = cli_spellings().get(name.strip().lstrip("-").replace("-", "_"))
    close = [named] if named in valid else difflib.get_close_matches(name, valid, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


@cache
def offers() -> dict[str, Offer]:
    """Each RefineConfig option offered outside the library, by name, in declaration order."""
    found = {}
    for name, info in RefineConfig.model_fields.items():
        offer = next((m for m in info.metadata if isinstance(m, Offer)), None)
        if offer is not None:
            found[name] = offer
    return found


def upper_bound(name: str) -> float | None:
    """The one cap of RefineConfig option ``name`` (its ``le``), or None where it has none."""
    return next((m.le for m in RefineConfig.model_fields[name].metadata if isinstance(m, annotated_types.Le)), None)


@cache
def cli_spellings() -> dict[str, str]:
    """The option each CLI flag sets, by the flag as a name (``max_iters``: ``max_iterations``)."""
    return {f.lstrip("-").replace("-", "_"): name for name, offer in offers().items() for f in offer.flags}


@cache
def choice_options() -> frozenset[str]:
    """The RefineConfig options whose value is one of a few words (``accept``, ``select``, ...)."""
    return frozenset(name for name in RefineConfig.model_fields if choices(name))


def spelled_once(values: Any) -> Any:
    """Keyword values (a dict) with each choice option's value in its one spelling (``canonical``)."""
    if not isinstance(values, dict):
        return values
    return {k: canonical(v) if k in choice_options() else v for k, v in values.items()}


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
    checks: list[dict[str, Any]] | None
    derive_checks: bool | None
    json_schema: dict[str, Any] | None
    preset: Preset | None
    refine_form: RefineForm | None
    repair_samples: int | None
    ban_tokens: bool | None


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
