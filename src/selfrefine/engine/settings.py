"""A run's effective settings, resolved once: each run option over the task's default.

The rule "the run's option if given, else the task's default" lives here and nowhere else;
the loop, the call mechanics and the records read the resolved values, and
``RunResult.config`` records them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.config import DEFAULT_MAX_ITERATIONS, RefineConfig
from ..core.errors import ConfigError
from ..core.records import ROLES, Role, RunConfig
from .strategy import START_WIDTH
from .task import Task


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
class Settings:
    """What one engine's runs read: every value resolved (the run never reads ``config``,
    which is kept, after its preset, for the record)."""

    config: RefineConfig
    calls: CallPolicy
    max_iterations: int
    history: str
    select: str
    score_threshold: float | None
    temperature: dict[Role, float]
    max_tokens: dict[Role, int]
    stop_sequences: dict[Role, list[str]]
    feedback_mode: str
    verifier_mode: str
    accept: str
    stop_on_feedback: bool
    stop_contains: list[str]
    stop_matches: list[str]
    stop_on_no_change: bool
    final_feedback: bool
    seed: int | None
    parse_retries: int
    constrained: bool
    auto: bool  # strategy "auto": the budget chooses each round's samples
    samples: int  # samples of a step: the option, or the auto strategy's first width
    greedy_first: dict[Role, bool]  # a sampled step of this role starts with its greedy draft
    sample_temperature: float = 0.7  # of each of several samples (samples > 1, strategy auto)
    votes: bool = False  # several samples of an answer task: agreement is part of the score
    judging: bool = False  # the task's judge ranks drafts the code checks tie (engine/judged.py)
    ways: tuple[str, ...] = ()  # the ways an answer task's first samples are written in turn

    @classmethod
    def resolve(cls, config: RefineConfig, task: Task) -> Settings:
        """Each option over the task's default; a combination the task cannot run is a
        ConfigError naming the fix."""
        config = with_preset(config, task)
        _check_fits(config, task)
        _check_sampling(config, task)
        auto = config.strategy == "auto"
        several = config.samples > 1 or auto
        given = config.max_iterations
        default = task.max_iterations if task.max_iterations is not None else DEFAULT_MAX_ITERATIONS
        temperature = {r: config.temperature if config.temperature is not None else task.temperature[r] for r in ROLES}
        return cls(
            config=config,
            calls=CallPolicy.of(config),
            max_iterations=given if given is not None else default,
            history=config.history or task.default_history,
            # several samples are chosen by the verifier, and so is the returned draft
            select=config.select or ("verified" if several else task.default_select),
            score_threshold=config.score_threshold if config.score_threshold is not None else task.score_threshold,
            temperature=temperature,
            max_tokens={r: config.max_tokens or task.max_tokens[r] for r in ROLES},
            stop_sequences={r: list(task.stop_sequences[r]) for r in ROLES},
            **_loop_options(config),
            auto=auto,
            samples=START_WIDTH if auto else config.samples,
            # a role the task drafts greedily (gsm8k) keeps its greedy draft among the samples,
            # unless the run set a temperature of its own
            greedy_first={r: temperature[r] == 0 and config.temperature is None for r in ROLES},
            sample_temperature=config.temperature if config.temperature is not None else task.sampling_temperature,
            votes=several and task.capabilities.answer,
            judging=config.judging and task.has_judge,
            ways=_ways(config, task, several and task.capabilities.answer),
        )

    @property
    def several_samples(self) -> bool:
        """Several samples per step (samples > 1, or the auto strategy)."""
        return self.samples > 1 or self.auto

    @property
    def critic(self) -> bool:
        """Whether a round's feedback comes from the critic (not the code's findings alone)."""
        return self.feedback_mode == "actionable" and self.verifier_mode != "verifier"

    @property
    def verify_every_draft(self) -> bool:
        """Whether each draft is verified as it arrives (selection or acceptance need it)."""
        return self.select == "verified" or self.accept == "not_worse" or self.several_samples

    @property
    def refine_samples(self) -> bool:
        """Whether the refiner samples (temperature > 0), so a new seed gives a new reply."""
        return self.temperature["refine"] > 0

    def recorded(self) -> dict[str, Any]:
        """The options as run: the config with the resolved policies (a run's record, an
        eval folder's meta)."""
        values = self.config.model_dump(mode="json")
        values.update(max_iterations=self.max_iterations, history=self.history, select=self.select)
        return values

    def run_config(self, models: dict[str, str], model_files: dict[str, Any]) -> RunConfig:
        """The record of what a run ran with: the options, the resolved policies, the models."""
        return RunConfig(**self.recorded(), models=models, model_files=model_files)


def _loop_options(config: RefineConfig) -> dict[str, Any]:
    """The options the loop reads as given (no task default applies to them)."""
    names = (
        "feedback_mode verifier_mode accept stop_on_feedback stop_contains stop_matches stop_on_no_change "
        "final_feedback seed parse_retries constrained"
    ).split()
    return {name: getattr(config, name) for name in names}


def with_preset(config: RefineConfig, task: Task) -> RefineConfig:
    """The config with its preset's values for the options it does not set itself."""
    if config.preset != "best":
        return config  # "paper" is RefineConfig's own defaults
    if task.best_preset is None:  # not measured on this task: settings of other tasks would be a guess
        raise ConfigError(
            f"preset 'best' is a task's measured best configuration, and task {task.name!r} declares none; "
            "give the options yourself (e.g. samples=4, max_iterations=1, verifier_mode='hybrid'), or declare "
            "them as the task's best (TaskDefaults best=, a task file's best:)"
        )
    values = task.best_preset if ranks(config, task) else {}
    update = {k: v for k, v in values.items() if k not in config.model_fields_set}
    return RefineConfig.build(**{**config.model_dump(exclude_unset=True), **update})


def ranks(config: RefineConfig, task: Task) -> bool:
    """Whether the run can rank drafts: by the task's code checks, or by its judge."""
    return task.has_verifier or (task.has_judge and config.judging)


def _ways(config: RefineConfig, task: Task, votes: bool) -> tuple[str, ...]:
    """The ways the first samples are written: the run's, or the task's default (all its ways
    unless it names fewer); none without votes."""
    given = config.ways
    if given is None:
        return tuple(task.ways if task.default_ways is None else task.default_ways) if votes else ()
    unknown = [w for w in given if w not in task.ways]
    if unknown:
        has = f"its ways are {', '.join(task.ways)}" if task.ways else "it writes its drafts one way"
        raise ConfigError(f"task {task.name!r} has no way {unknown[0]!r}: {has} (ways, --ways)")
    if not votes and len(given) > 1:
        raise ConfigError(
            "ways choose how an answer task's several samples are written: give samples > 1 or strategy auto"
        )
    return tuple(given) if votes else ()


def _check_fits(config: RefineConfig, task: Task) -> None:
    name = task.name
    if config.verifier_mode != "self" and not task.has_verifier:
        raise ConfigError(f"task {name!r} has no verifier; use verifier_mode 'self' or a task that checks itself")
    if ranks(config, task):
        return
    lacks = _lacks(config, task)
    if (config.select or task.default_select) == "verified":
        raise ConfigError(
            f"task {name!r} {lacks}, so select 'verified' cannot rank its drafts; "
            "use select 'last' or 'best', or a task that checks itself"
        )
    if config.accept != "any":
        raise ConfigError(
            f"task {name!r} {lacks}, so accept 'not_worse' cannot compare drafts; "
            "use accept 'any' or a task that checks itself"
        )


def _lacks(config: RefineConfig, task: Task) -> str:
    """What a task that cannot rank drafts lacks, as the error says it."""
    if task.has_judge and not config.judging:
        return "has no verifier and its judge is off (judging false, --no-judging)"
    return "has no verifier and no judge"


def _check_sampling(config: RefineConfig, task: Task) -> None:
    """Several samples need a verifier to choose among them and a temperature above 0; the
    auto strategy needs a token budget to spend."""
    if config.samples == 1 and config.strategy == "fixed":
        return
    what = f"samples {config.samples}" if config.strategy == "fixed" else "strategy auto"
    if not ranks(config, task):
        raise ConfigError(
            f"{what} needs a task with a verifier or a judge to choose among samples; "
            f"task {task.name!r} {_lacks(config, task)} (use samples 1)"
        )
    if config.temperature == 0:
        raise ConfigError(
            f"{what} needs sampling, and temperature 0 makes every sample the same draft; "
            "leave the temperature unset (the task's sampling temperature) or set one above 0"
        )
    if config.strategy == "auto" and config.max_total_tokens is None:
        raise ConfigError("strategy auto spends a token budget: give one (--budget-tokens N, max_total_tokens)")
