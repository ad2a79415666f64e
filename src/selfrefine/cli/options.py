"""The CLI's flags as typed records, and the one way the engine flags become an
:class:`~selfrefine.engine.spec.EngineSpec`.

A record of flags (:class:`Flags`) is a frozen dataclass whose fields are the flags: each
field declares its click option with :func:`flag`, and the field's name is the option's
parameter name, so the option and the value it fills are written once. ``Record.options()``
puts the options on a command in the fields' order and ``Record.of(params)`` fills the record
from click's parameters (a parameter without a field is an error). A flag spelled unlike the
field it sets says so in its own declaration: ``--max-iters`` fills ``max_iterations``,
``--no-constrain`` sets ``constrained`` to False.

The loop flags (:class:`LoopFlags`) are :class:`~selfrefine.core.config.RefineConfig`'s
fields: a choice flag offers exactly the field's values and takes either spelling
(``not-worse`` or ``not_worse``), printed one way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from dataclasses import Field, dataclass, fields
from typing import Any, Self, TypeVar

import click

from ..backends.registry import DEFAULT_MODEL, scheme_of
from ..core.config import RefineConfig, canonical, checked_ways, choices
from ..engine.spec import EngineSpec, ModelSpec

F = TypeVar("F", bound=Callable[..., Any])


def flag(*decls: str, **attrs: Any) -> Any:
    """A field that is a click option: ``decls`` and ``attrs`` as ``click.option`` takes
    them, without the parameter's name, which is the field's."""
    return dataclasses.field(metadata={"flag": (decls, attrs)})


def part(record: type[Flags]) -> Any:
    """A field that is another record of flags; its options come at this field's place."""
    return dataclasses.field(metadata={"part": record})


class Flags:
    """A record of flags (a frozen dataclass of :func:`flag` and :func:`part` fields)."""

    @classmethod
    def flags(cls) -> Iterator[Field[Any]]:
        """The flag fields, parts' included, in the order their options are shown."""
        for f in fields(cls):  # type: ignore[arg-type]
            yield from f.metadata["part"].flags() if "part" in f.metadata else [f]

    @classmethod
    def decorators(cls) -> list[Callable[[F], F]]:
        """One ``click.option`` per flag, each naming its field as the parameter."""
        return [click.option(*f.metadata["flag"][0], f.name, **f.metadata["flag"][1]) for f in cls.flags()]

    @classmethod
    def options(cls) -> Callable[[F], F]:
        """The options of every flag, as one decorator of a command."""

        def decorate(func: F) -> F:
            for option in reversed(cls.decorators()):
                func = option(func)
            return func

        return decorate

    @classmethod
    def of(cls, params: Mapping[str, Any], *, whole: bool = True) -> Self:
        """The record of click's parameters. ``whole``: they are exactly its flags (a flag
        declared on the command outside the record is an error); else the flags missing
        from ``params`` are None and other keys are ignored."""
        if whole and set(params) != {f.name for f in cls.flags()}:
            raise TypeError(f"{cls.__name__} does not match the parameters {sorted(params)}")
        values = {
            f.name: f.metadata["part"].of(params, whole=False) if "part" in f.metadata else params.get(f.name)
            for f in fields(cls)  # type: ignore[arg-type]
        }
        return cls(**values)


class Spelling(click.Choice):
    """A choice of RefineConfig's values that also takes them with hyphens (``not-worse``)."""

    def __init__(self, field: str) -> None:
        super().__init__(list(choices(field)))

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        return super().convert(canonical(value), param, ctx)


class WayNames(click.ParamType):
    """``--ways program,steps``: comma-separated names, checked as RefineConfig checks them."""

    name = "ways"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, tuple):
            return value
        try:
            return checked_ways(tuple(name.strip() for name in str(value).split(",")))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


def _default(field: str) -> Any:
    return RefineConfig.model_fields[field].default


@dataclass(frozen=True, kw_only=True)
class ModelFlags(Flags):
    """The model of every role and the feedback/refine/judge roles' own (``run``, ``eval``, ``serve``)."""

    model: str = flag(
        "--model",
        "-m",
        default=DEFAULT_MODEL,
        envvar="SELFREFINE_MODEL",
        show_default=True,
        help="embedded | embedded:NAME (see `selfrefine models`) | gguf:PATH | openai:NAME | fake[:REPLIES.json]",
    )
    options: tuple[str, ...] = flag(
        "--option",
        "-o",
        multiple=True,
        metavar="KEY=VALUE",
        help="Option of --model's backend (and of the roles that share it), e.g. -o n_ctx=8192, "
        "-o api=completion, -o concurrency=8; `selfrefine models` lists each backend's options.",
    )
    base_url: str | None = flag(
        "--base-url",
        metavar="URL",
        help="Server of an openai: --model (same as -o base_url=URL); unset: OPENAI_BASE_URL, "
        "which every openai: model without its own uses.",
    )
    feedback_model: str | None = flag("--feedback-model", help="A different model for the feedback role.")
    feedback_options: tuple[str, ...] = flag(
        "--feedback-option",
        multiple=True,
        metavar="KEY=VALUE",
        help="Option of --feedback-model's backend only, e.g. --feedback-option base_url=URL.",
    )
    refine_model: str | None = flag("--refine-model", help="A different model for the refine role.")
    refine_options: tuple[str, ...] = flag(
        "--refine-option", multiple=True, metavar="KEY=VALUE", help="Option of --refine-model's backend only."
    )
    judge_model: str | None = flag(
        "--judge-model",
        help="A different model for the loop's judge role: the closed yes/no, rating and A-or-B questions "
        "it answers from token probabilities while refining (default: the feedback role's model). "
        "Not eval's --judge, which measures the results afterwards.",
    )
    judge_options: tuple[str, ...] = flag(
        "--judge-option",
        multiple=True,
        metavar="KEY=VALUE",
        help="Option of the judges' own models only: --judge-model's backend and, in eval, --judge's "
        "(neither gets -o or --base-url), e.g. --judge-option base_url=URL.",
    )


@dataclass(frozen=True, kw_only=True)
class LoopFlags(Flags):
    """The loop's flags: each fills the RefineConfig field of its name."""

    max_iterations: int | None = flag(
        "--max-iters", type=click.IntRange(min=0), help="Maximum refinements (default: task's, else 4)."
    )
    history: str | None = flag(
        "--history",
        type=Spelling("history"),
        help="What the refiner sees: all earlier drafts+feedback, the previous pair, or none (default: the task's).",
    )
    select: str | None = flag(
        "--select",
        type=Spelling("select"),
        help="Return the last draft, the best-scored one, or the one the task's own verifier "
        "scores highest (ties: feedback score, then the earlier draft) (default: the task's).",
    )
    # unset (None) unless given, so that a --preset can set them; the help shows the default
    accept: str | None = flag(
        "--accept",
        type=Spelling("accept"),
        show_default=_default("accept"),
        help="not_worse (or not-worse): reject a refinement the task's verifier scores lower than the "
        "draft it refined, or that leaves it unchanged, and refine that draft again with the next seed.",
    )
    feedback_mode: str | None = flag(
        "--feedback-mode",
        type=Spelling("feedback_mode"),
        show_default=_default("feedback_mode"),
        help="The paper's ablation: task critic, a fixed generic message, or no feedback.",
    )
    verifier_mode: str | None = flag(
        "--verifier-mode",
        type=Spelling("verifier_mode"),
        show_default=_default("verifier_mode"),
        help="Feedback from the model (self), the task's own checks (verifier), or both (hybrid).",
    )
    seed: int = flag(
        "--seed",
        type=int,
        default=_default("seed"),
        show_default=True,
        help="Seed of the model's sampling: the same seed, model and input give the same run; the "
        "samples of a step and the retries of a rejected refinement take seeds derived from it.",
    )
    temperature: float | None = flag(
        "--temperature", type=click.FloatRange(min=0), help="Sampling temperature for every role."
    )
    max_tokens: int | None = flag("--max-tokens", type=click.IntRange(min=1), help="Completion tokens per call.")
    score_threshold: float | None = flag(
        "--score-threshold", type=float, help="Stop once the feedback score reaches this."
    )
    stop_contains: tuple[str, ...] = flag(
        "--stop-contains",
        multiple=True,
        help="Stop when the feedback says this phrase: whole words, any case, not negated ('not done' is no stop).",
    )
    stop_matches: tuple[str, ...] = flag(
        "--stop-matches", multiple=True, help="Stop when the feedback matches this regular expression."
    )
    max_total_tokens: int | None = flag(
        "--budget-tokens", type=click.IntRange(min=1), help="Stop after this many tokens in total."
    )
    max_seconds: float | None = flag(
        "--budget-seconds", type=click.FloatRange(min=0, min_open=True), help="Stop after this many seconds."
    )
    constrained: bool = flag(
        "--no-constrain",
        is_flag=True,
        flag_value=False,
        default=True,
        help="Do not constrain feedback to the task's JSON schema.",
    )
    samples: int | None = flag(
        "--samples",
        type=click.IntRange(1, 16),
        show_default=_default("samples"),
        help="Drafts sampled per step, each checked by the task's verifier: the first draft is the best "
        "sample, and a round's best refinement replaces its draft only if it scores higher.",
    )
    strategy: str | None = flag(
        "--strategy",
        type=Spelling("strategy"),
        show_default=_default("strategy"),
        help="auto: spend --budget-tokens between samples per step and rounds by what the verifier "
        "sees (the first draft starts with 1 sample, then doubles while the samples score differently; "
        "an answer task such as gsm8k starts with 2 votes; stop when the verifier is satisfied; wider "
        "after echoes or rejections, deeper after an accepted refinement).",
    )
    preset: str | None = flag(
        "--preset",
        type=Spelling("preset"),
        help="paper: the paper's loop (the defaults); best: the task's measured best configuration "
        "(docs/frontier.md). Options given explicitly win.",
    )
    final_feedback: bool = flag(
        "--final-feedback",
        is_flag=True,
        help="Critique the last draft even when that cannot change the result (with --select last "
        "at --max-iters the run otherwise skips that call).",
    )
    judging: bool = flag(
        "--no-judging",
        is_flag=True,
        flag_value=False,
        default=True,
        help="Do not ask the task's judge (yes/no questions read as probabilities) to rank the drafts "
        "that its code checks tie; the critic or the earlier draft decides instead.",
    )
    ways: tuple[str, ...] | None = flag(
        "--ways",
        type=WayNames(),
        metavar="WAY,...",
        help="ways to draw an answer task's voted samples from, in turn (default: the task's; gsm8k's ways: program, steps, quantities; default program)",
    )

    def config(self, **extra: Any) -> RefineConfig:
        """The RefineConfig these flags set (a bad value is a ConfigError naming the option)."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values.update(stop_contains=list(self.stop_contains or ()), stop_matches=list(self.stop_matches or ()))
        return RefineConfig.build(**values, **extra)


@dataclass(frozen=True, kw_only=True)
class EngineFlags(Flags):
    """What ``run`` and ``eval`` build their engine from: the model flags, the loop flags."""

    models: ModelFlags = part(ModelFlags)
    loop: LoopFlags = part(LoopFlags)

    def spec(self, task: str, evaluation_judge: str | None = None, **extra: Any) -> EngineSpec:
        """The engine's spec: ``task`` as given (a name or a task file's path), the flags,
        ``extra`` RefineConfig fields (``record_prompts``); ``evaluation_judge``: eval's --judge."""
        models = models_of(self.models, evaluation_judge)
        return EngineSpec(task=task, config=self.loop.config(**extra), **models)


# the loop flags' options alone; each one's parameter is named as the RefineConfig field it
# fills (tests/cli/test_options_one_source.py)
LOOP_OPTIONS = LoopFlags.decorators()


def flags_of(values: Mapping[str, Any]) -> str:
    """RefineConfig fields and values as the flags that set them: ``--samples 4 --max-iters 1``."""
    names = {f.name: f.metadata["flag"][0][0] for f in LoopFlags.flags()}
    return " ".join(f"{names.get(k, '--' + k.replace('_', '-'))} {v}" for k, v in values.items())


def key_values(pairs: tuple[str, ...], flag: str) -> dict[str, str]:
    """``KEY=VALUE`` flags as a dict; a malformed one is a usage error naming the flag."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{pair!r} is not KEY=VALUE", param_hint=flag)
        out[key.strip()] = value.strip()
    return out


def role_model(spec: str | None, pairs: tuple[str, ...], flag: str, model_flag: str) -> ModelSpec | None:
    """One role's own model and its options (which never reach another role's backend); also
    eval's --judge, the evaluation's judge."""
    if pairs and spec is None:
        raise click.UsageError(
            f"{flag} needs {model_flag}: without it that role shares --model's backend, which -o configures"
        )
    return ModelSpec(model=spec, options=key_values(pairs, flag)) if spec is not None else None


def main_model(model: str, pairs: tuple[str, ...], base_url: str | None) -> ModelSpec:
    """--model with -o and --base-url (also the options of the roles that share it)."""
    opts: dict[str, Any] = key_values(pairs, "--option")
    if base_url:
        model_cls = scheme_of(model).options_model()
        if model_cls is not None and "base_url" not in model_cls.model_fields:
            raise click.UsageError(
                f"--base-url sets the server of --model, and {model!r} has none; for another role's "
                "server use --feedback-option/--refine-option/--judge-option base_url=URL"
            )
        opts["base_url"] = base_url
    return ModelSpec(model=model, options=opts)


def models_of(flags: ModelFlags, evaluation_judge: str | None = None) -> dict[str, ModelSpec | None]:
    """The model flags as the spec's ModelSpecs (feedback/refine None: --model's; judge None:
    the feedback role's). ``evaluation_judge``: eval's --judge, which --judge-option also sets."""
    return {
        "model": main_model(flags.model, flags.options, flags.base_url),
        "feedback_model": role_model(
            flags.feedback_model, flags.feedback_options, "--feedback-option", "--feedback-model"
        ),
        "refine_model": role_model(flags.refine_model, flags.refine_options, "--refine-option", "--refine-model"),
        "judge_model": judge_models(flags, evaluation_judge)[0],
    }


def judge_models(flags: ModelFlags, evaluation_judge: str | None = None) -> tuple[ModelSpec | None, ModelSpec | None]:
    """The loop's judge role's own model (--judge-model) and eval's judge (--judge), each with
    the --judge-option options; either None where not given."""
    pairs = flags.judge_options
    if pairs and flags.judge_model is None and evaluation_judge is None:
        raise click.UsageError(
            "--judge-option needs --judge-model (or, in eval, --judge): without one the judge role "
            "shares the feedback role's backend, which -o or --feedback-option configures"
        )
    given = [(flags.judge_model, "--judge-model"), (evaluation_judge, "--judge")]
    loop, evaluation = (role_model(m, pairs if m else (), "--judge-option", f) for m, f in given)
    return loop, evaluation


def config_of(flags: Mapping[str, Any], **extra: Any) -> RefineConfig:
    """The RefineConfig of click's parameters (those of the loop flags; others ignored)."""
    return LoopFlags.of(flags, whole=False).config(**extra)


def engine_spec(task: str, flags: Mapping[str, Any], **extra: Any) -> EngineSpec:
    """The spec of click's parameters (those of the engine flags; others ignored)."""
    return EngineFlags.of(flags, whole=False).spec(task, **extra)
