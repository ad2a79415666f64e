"""A run's effective settings, resolved once: each run option over the task's default.

The rule "the run's option if given, else the task's default" lives here and nowhere else;
the loop, the call mechanics and the records read the resolved values, grouped by what
reads them (:class:`CallPolicy`, :class:`RequestPolicy`, :class:`SamplingPolicy`,
:class:`StopPolicy`, :class:`JudgePolicy`), and ``RunResult.config`` records them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from ..core.config import DEFAULT_MAX_ITERATIONS, DEFAULT_REPAIR_SAMPLES, REPAIR_FORMS, RefineConfig
from ..core.errors import ConfigError
from ..core.records import ROLES, Role, RunConfig
from ..core.structured import checked_schema
from ..task.task import Task
from .run_checks import ChecksPolicy


class StrategyRules:
    """What resolving the settings asks of a strategy, with the defaults: the base class of
    :class:`~selfrefine.engine.drafting.base.Strategy`, which adds the drafter it makes (the
    drafting package builds on this module, so the rules live here, stated once)."""

    name: ClassVar[str]
    summary: ClassVar[str] = ""  # one line for help texts

    def several(self, config: RefineConfig) -> bool:
        """Whether its steps sample several drafts (then chosen by the task's verifier or
        judge, and on an answer task by votes); default: ``samples`` > 1."""
        return config.samples > 1

    def check(self, config: RefineConfig, task: Task) -> None:
        """Raise ConfigError for options or a task it cannot run (default: several samples
        need a verifier or judge, and sampling)."""
        if self.several(config):
            check_sampling(f"samples {config.samples}", config, task)

    def needs_verification(self, settings: Settings) -> bool:
        """Whether its drafters need every draft verified as it arrives (default: when they
        sample several, which the verifier chooses among)."""
        return settings.sampling.several


Strategies = Callable[[str], StrategyRules]  # a strategy by name (drafting.registry.find_strategy)


@dataclass(frozen=True)
class CallPolicy:
    """What a run's :class:`~.calls.Caller` obeys: retries, their delays, the budgets."""

    backend_retries: int
    retry_base_delay: float
    retry_max_delay: float
    max_total_tokens: int | None
    max_seconds: float | None
    record_prompts: bool

    @classmethod
    def of(cls, config: RefineConfig) -> CallPolicy:
        return cls(
            backend_retries=config.backend_retries,
            retry_base_delay=config.retry_base_delay,
            retry_max_delay=config.retry_max_delay,
            max_total_tokens=config.max_total_tokens,
            max_seconds=config.max_seconds,
            record_prompts=config.record_prompts,
        )


@dataclass(frozen=True)
class RequestPolicy:
    """What each request of a role carries, and how an unparsable reply is asked again."""

    temperature: dict[Role, float]
    max_tokens: dict[Role, int]
    stop_sequences: dict[Role, list[str]]
    seed: int | None
    parse_retries: int
    constrained: bool  # the critic's reply decoded under the task's JSON schema
    ban_tokens: bool  # a draft decoded with what its checks forbid refused (core/bans.py)

    @classmethod
    def of(cls, config: RefineConfig, task: Task) -> RequestPolicy:
        given = config.temperature
        return cls(
            temperature={r: given if given is not None else task.declared.defaults.temperature[r] for r in ROLES},
            max_tokens={r: config.max_tokens or task.declared.defaults.max_tokens[r] for r in ROLES},
            stop_sequences={r: list(task.declared.stop_sequences[r]) for r in ROLES},
            seed=config.seed,
            parse_retries=config.parse_retries,
            constrained=config.constrained,
            ban_tokens=bool(config.ban_tokens),
        )


@dataclass(frozen=True)
class SamplingPolicy:
    """How many drafts a step samples, and how: the strategy and what it was given."""

    strategy: str  # the run's strategy by name (drafting.registry.find_strategy): it makes each run's drafter
    samples: int  # the samples option
    several: bool  # the strategy samples several drafts a step
    votes: bool  # several samples of an answer task: agreement is part of the score
    temperature: float  # of each of several samples
    greedy_first: dict[Role, bool]  # a sampled step of this role starts with its greedy draft
    ways: tuple[str, ...]  # the ways an answer task's first samples are written in turn

    @classmethod
    def of(cls, config: RefineConfig, task: Task, strategy: StrategyRules) -> SamplingPolicy:
        several = strategy.several(config)
        votes = several and task.declared.capabilities.answer
        defaults = task.declared.defaults
        return cls(
            strategy=config.strategy,
            samples=config.samples,
            several=several,
            votes=votes,
            temperature=config.temperature if config.temperature is not None else defaults.sampling_temperature,
            # a role the task drafts greedily (gsm8k) keeps its greedy draft among the
            # samples, unless the run set a temperature of its own
            greedy_first={r: defaults.temperature[r] == 0 and config.temperature is None for r in ROLES},
            ways=_ways(config, task, votes),
        )


@dataclass(frozen=True)
class StopPolicy:
    """When the run stops (:mod:`.stopping`), besides the budgets."""

    max_iterations: int
    on_feedback: bool  # the feedback's own done signal stops
    contains: list[str]
    matches: list[str]
    score_threshold: float | None
    on_no_change: bool
    final_feedback: bool  # critique the last draft even when that cannot change the result

    @classmethod
    def of(cls, config: RefineConfig, task: Task) -> StopPolicy:
        given, default = config.max_iterations, task.declared.defaults.max_iterations
        threshold = task.declared.defaults.score_threshold
        return cls(
            max_iterations=given if given is not None else default if default is not None else DEFAULT_MAX_ITERATIONS,
            on_feedback=config.stop_on_feedback,
            contains=config.stop_contains,
            matches=config.stop_matches,
            score_threshold=config.score_threshold if config.score_threshold is not None else threshold,
            on_no_change=config.stop_on_no_change,
            final_feedback=config.final_feedback,
        )


@dataclass(frozen=True)
class JudgePolicy:
    """Whether the task's judge ranks the drafts its code checks tie (:mod:`.judge`): the one
    answer to "is the judge on"."""

    on: bool  # judging asked, the task has a judge, and no votes rank the samples (tied votes share one answer)
    available: bool  # judging asked and the task has a judge (it could rank drafts)

    @classmethod
    def of(cls, config: RefineConfig, task: Task, votes: bool) -> JudgePolicy:
        available = config.judging and task.has_judge
        return cls(on=available and not votes, available=available)


@dataclass(frozen=True)
class Settings:
    """What one engine's runs read: every value resolved (the run never reads ``config``,
    which is kept, after its preset, for the record)."""

    config: RefineConfig
    calls: CallPolicy
    requests: RequestPolicy
    sampling: SamplingPolicy
    stops: StopPolicy
    judge: JudgePolicy
    checks: ChecksPolicy
    history: str
    select: str
    accept: str
    feedback_mode: str
    verifier_mode: str
    refine_form: str = "history"  # "focused", "rewrite", "by_kind": one failed check at a time (engine/focused.py)
    repair_samples: int = DEFAULT_REPAIR_SAMPLES

    @classmethod
    def resolve(cls, config: RefineConfig, task: Task, strategies: Strategies, response_model: Any = None) -> Settings:
        """Each option over the task's default; a combination the task or the strategy
        cannot run is a ConfigError naming the fix. ``strategies``: a strategy by name;
        ``response_model``: a pydantic type the drafts must validate as (its schema becomes
        ``json_schema``)."""
        config = with_schema_defaults(with_response_model(with_preset(config, task), response_model))
        config = with_task_verifier_mode(with_focused_defaults(with_task_refine_form(config, task)), task)
        _check_fits(config, task)
        strategy = strategies(config.strategy)
        strategy.check(config, task)
        sampling = SamplingPolicy.of(config, task, strategy)
        return cls(
            config=config,
            calls=CallPolicy.of(config),
            requests=RequestPolicy.of(config, task),
            sampling=sampling,
            stops=StopPolicy.of(config, task),
            judge=JudgePolicy.of(config, task, sampling.votes),
            checks=ChecksPolicy.of(config, task, response_model),
            history=config.history or task.declared.defaults.history,
            # several samples are chosen by the verifier, and so is the returned draft
            select=config.select or ("verified" if sampling.several else task.declared.defaults.select),
            accept=config.accept,
            feedback_mode=config.feedback_mode,
            verifier_mode=config.verifier_mode,
            refine_form=config.refine_form or "history",
            repair_samples=config.repair_samples or DEFAULT_REPAIR_SAMPLES,
        )

    @property
    def critic(self) -> bool:
        """Whether a round's feedback comes from the critic (not the code's findings alone)."""
        return self.feedback_mode == "actionable" and self.verifier_mode != "verifier"

    def draft_schema(self) -> dict[str, Any] | None:
        """The JSON Schema a draft's reply is decoded under (None: none, or not constrained)."""
        schema = self.checks.schema
        return schema.schema if schema is not None and self.requests.constrained else None

    @property
    def refine_samples(self) -> bool:
        """Whether the refiner samples (temperature > 0), so a new seed gives a new reply."""
        return self.requests.temperature["refine"] > 0

    def recorded(self) -> dict[str, Any]:
        """The options as run: the config with the resolved policies (a run's record, an
        eval folder's meta)."""
        values = self.config.model_dump(mode="json")
        values.update(max_iterations=self.stops.max_iterations, history=self.history, select=self.select)
        return values

    def run_config(self, models: dict[str, str], model_files: dict[str, Any]) -> RunConfig:
        """The record of what a run ran with: the options, the resolved policies, the models."""
        return RunConfig(**self.recorded(), models=models, model_files=model_files)


def with_preset(config: RefineConfig, task: Task) -> RefineConfig:
    """The config with its preset's values for the options it does not set itself."""
    if config.preset != "best":
        return config  # "paper" is RefineConfig's own defaults
    best = task.declared.defaults.best
    if best is None:  # not measured on this task: settings of other tasks would be a guess
        raise ConfigError(
            f"preset 'best' is a task's measured best configuration, and task {task.name!r} declares none; "
            "give the options yourself (e.g. samples=4, max_iterations=1, verifier_mode='hybrid'), or declare "
            "them as the task's best (TaskDefaults best=, a task file's best:)"
        )
    values = best if ranks(config, task) else {}
    update = {k: v for k, v in values.items() if k not in config.model_fields_set}
    return RefineConfig.build(**{**config.model_dump(exclude_unset=True), **update})


def ranks(config: RefineConfig, task: Task) -> bool:
    """Whether the run can rank drafts: by code checks (the task's, or the run's own), or by
    the task's judge."""
    return verifies(config, task) or (task.has_judge and config.judging)


def verifies(config: RefineConfig, task: Task) -> bool:
    """Whether code checks the run's drafts: the task's verifier, or checks given with the run
    or derived from its request."""
    return task.has_verifier or ChecksPolicy.asked(config, task)


def with_task_verifier_mode(config: RefineConfig, task: Task) -> RefineConfig:
    """The config with the task's verifier mode where the run sets none and code checks its
    drafts (chat: "hybrid", so the failed checks are named beside the critic's issues, and the
    critic's "done" cannot end the run while one fails); under a JSON Schema, a task without one
    gets "verifier": the schema's errors are the feedback; with checks given (``checks``), "hybrid"."""
    mode = task.declared.defaults.verifier_mode
    if mode is None and config.json_schema is not None:
        mode = "verifier"
    elif mode is None and config.checks:  # checks given with the run steer it, as chat's do
        mode = "hybrid"
    if mode is None or "verifier_mode" in config.model_fields_set or not verifies(config, task):
        return config
    return config.model_copy(update={"verifier_mode": mode})


def with_schema_defaults(config: RefineConfig) -> RefineConfig:
    """Under a JSON Schema, what the run does not set itself: ``select`` "verified" (the best
    draft by the schema is returned), ``accept`` "not_worse" (a refinement that scores lower,
    or a sampled one that repeats its draft, is refined again with a new seed instead of being
    kept, or of ending the run as "no change" while the draft is still invalid) and ``history``
    "none" (the errors say what to fix; a small model shown its earlier drafts, the rejected
    echoes too, copies them: docs/structured.md)."""
    if config.json_schema is None:
        return config
    unset = {"select": "verified", "accept": "not_worse", "history": "none"}
    return config.model_copy(update={k: v for k, v in unset.items() if k not in config.model_fields_set})


def with_response_model(config: RefineConfig, response_model: Any) -> RefineConfig:
    """The config with ``response_model``'s JSON Schema as its ``json_schema`` (recorded so),
    once the type has one; a different schema given beside it is a ConfigError."""
    if response_model is None:
        return config
    schema = model_schema(response_model)
    if config.json_schema is not None and config.json_schema != schema:
        raise ConfigError("give response_model or json_schema, not both: the model's schema is the run's schema")
    return config.model_copy(update={"json_schema": schema})


def model_schema(response_model: Any) -> dict[str, Any]:
    """The JSON Schema of a pydantic type (a BaseModel, a dataclass, ``list[Item]``, ...)."""
    from pydantic import PydanticUserError, TypeAdapter

    try:
        schema = TypeAdapter(response_model).json_schema()
    except (PydanticUserError, TypeError, ValueError) as exc:
        raise ConfigError(f"response_model {response_model!r} has no JSON Schema: {exc}") from None
    try:
        return checked_schema(schema)
    except ValueError as exc:
        raise ConfigError(f"response_model {response_model!r}: {exc}") from None


def _ways(config: RefineConfig, task: Task, votes: bool) -> tuple[str, ...]:
    """The ways the first samples are written: the run's, or the task's default (all its ways
    unless it names fewer); none without votes."""
    given = config.ways
    if given is None:
        declared = task.declared
        return tuple(declared.ways if declared.default_ways is None else declared.default_ways) if votes else ()
    ways = task.declared.ways
    unknown = [w for w in given if w not in ways]
    if unknown:
        has = f"its ways are {', '.join(ways)}" if ways else "it writes its drafts one way"
        raise ConfigError(f"task {task.name!r} has no way {unknown[0]!r}: {has} (ways, --ways)")
    if not votes and len(given) > 1:
        raise ConfigError(
            "ways choose how an answer task's several samples are written: give samples > 1 or strategy auto"
        )
    return tuple(given) if votes else ()


def with_task_refine_form(config: RefineConfig, task: Task) -> RefineConfig:
    """The task's refine form where the run sets none (a task file with checks: "focused")."""
    form, critic_alone = task.declared.defaults.refine_form, task.declared.defaults.verifier_mode == "self"
    if form is None or config.refine_form is not None or critic_alone or not verifies(config, task):
        return config
    return config.model_copy(update={"refine_form": form})


def with_focused_defaults(config: RefineConfig) -> RefineConfig:
    """Under a repair form (``refine_form`` "focused", "rewrite", "by_kind"), ``verifier_mode``
    "verifier" where the run sets none: the refine prompt says one check's repair and no critique, so a critic call would
    be spent on text nothing reads; the checks' findings are the feedback (and say when to stop)."""
    if config.refine_form not in REPAIR_FORMS or "verifier_mode" in config.model_fields_set:
        return config
    return config.model_copy(update={"verifier_mode": "verifier"})


def _check_fits(config: RefineConfig, task: Task) -> None:
    name = task.name
    if config.refine_form in REPAIR_FORMS and not verifies(config, task):
        raise ConfigError(
            f"refine_form {config.refine_form!r} repairs one failed check at a time, and task {name!r} has no code "
            "checks; give checks (checks, derive_checks), use a task that checks itself, or refine_form 'history'"
        )
    if config.verifier_mode != "self" and not verifies(config, task):
        raise ConfigError(
            f"task {name!r} has no verifier; use verifier_mode 'self', a task that checks itself, or checks "
            "(checks, derive_checks)"
        )
    if ranks(config, task):
        return
    lacks = lacks_ranking(config, task)
    if (config.select or task.declared.defaults.select) == "verified":
        raise ConfigError(
            f"task {name!r} {lacks}, so select 'verified' cannot rank its drafts; "
            "use select 'last' or 'best', or a task that checks itself"
        )
    if config.accept != "any":
        raise ConfigError(
            f"task {name!r} {lacks}, so accept 'not_worse' cannot compare drafts; "
            "use accept 'any' or a task that checks itself"
        )


def lacks_ranking(config: RefineConfig, task: Task) -> str:
    """What a task that cannot rank drafts lacks, as the error says it."""
    if task.has_judge and not config.judging:
        return "has no verifier and its judge is off (judging false, --no-judging)"
    return "has no verifier and no judge"


def check_sampling(what: str, config: RefineConfig, task: Task) -> None:
    """What several samples a step need (``what`` names the option that asks for them): a
    verifier or a judge to choose among them, and a temperature above 0."""
    if not ranks(config, task):
        raise ConfigError(
            f"{what} needs a task with a verifier or a judge to choose among samples; "
            f"task {task.name!r} {lacks_ranking(config, task)} (use samples 1)"
        )
    if config.temperature == 0:
        raise ConfigError(
            f"{what} needs sampling, and temperature 0 makes every sample the same draft; "
            "leave the temperature unset (the task's sampling temperature) or set one above 0"
        )
