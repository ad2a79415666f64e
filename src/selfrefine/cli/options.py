"""The CLI's flags as typed records, and the one way the engine flags become an
:class:`~selfrefine.engine.spec.EngineSpec`.

A record of flags (:class:`Flags`) is a frozen dataclass whose fields are the flags: each
field declares its click option with :func:`flag`, and the field's name is the option's
parameter name, so the option and the value it fills are written once. ``Record.options()``
puts the options on a command in the fields' order and ``Record.of(params)`` fills the record
from click's parameters (a parameter without a field is an error).

The loop flags (``LoopFlags``) are built from :class:`~selfrefine.core.config.RefineConfig`,
where each option declares its flag's spellings and help (``Offer``) beside its type, default
and bounds: ``--max-iters`` (or ``--max-iterations``) fills ``max_iterations``,
``--no-constrain`` sets ``constrained`` to False, ``--samples`` takes the field's range, and
a choice flag offers exactly the field's values and takes either spelling (``not-worse`` or
``not_worse``), printed one way.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import Field, dataclass, fields
from types import UnionType
from typing import Annotated, Any, Self, TypeVar, Union, get_args, get_origin

import click
import yaml
from pydantic import TypeAdapter, ValidationError

from ..backends.registry import DEFAULT_MODEL, scheme_of
from ..core.config import RefineConfig, canonical, choices, offers
from ..core.errors import TaskFileError
from ..engine.drafting.registry import strategy_names
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


class StrategyName(click.Choice):
    """``--strategy``: the registered strategies (entry-point group ``selfrefine.strategies``),
    read when the flag is used or shown (a plugin installed later is offered), in either spelling."""

    def __init__(self) -> None:
        super().__init__([])

    @property  # type: ignore[override]
    def choices(self) -> list[str]:
        return list(strategy_names())

    @choices.setter
    def choices(self, value: object) -> None:
        pass  # click.Choice sets it once; the registry is the list

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        return super().convert(canonical(value), param, ctx)


class Listed(click.ParamType):
    """A list option as comma-separated names (``--ways program,steps``), checked by the
    option's own validators (RefineConfig's, so the CLI refuses what the library refuses)."""

    name = "list"

    def __init__(self, field: str) -> None:
        self.check = TypeAdapter(RefineConfig.model_fields[field].annotation)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, tuple):
            return value
        try:
            return self.check.validate_python(tuple(name.strip() for name in str(value).split(",")))
        except ValidationError as exc:
            self.fail(str(exc.errors()[0]["msg"]).removeprefix("Value error, "), param, ctx)


class DataFile(click.ParamType):
    """An option whose value is data (``--json-schema FILE``, ``--checks FILE``): a JSON or YAML
    file, read when the flag is given; a file that cannot be read or parsed is a usage error
    naming it. What the data must be is the option's own check (RefineConfig's)."""

    name = "file"
    MAX_BYTES = 1_000_000

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not isinstance(value, str):
            return value
        try:
            with open(value, "rb") as f:
                raw = f.read(self.MAX_BYTES + 1)
        except OSError as exc:
            self.fail(f"cannot read {value!r}: {exc.strerror or exc}", param, ctx)
        if len(raw) > self.MAX_BYTES:
            self.fail(f"{value!r} is over {self.MAX_BYTES:,} bytes", param, ctx)
        from ..tasks.taskfile import check_shape  # the task file's own caps (imported when a flag is read)

        try:
            data = yaml.safe_load(raw.decode("utf-8"))  # JSON is YAML
            check_shape(data, repr(value))  # a YAML alias bomb is refused before it is expanded
        except (UnicodeDecodeError, yaml.YAMLError) as exc:
            self.fail(f"{value!r} is not JSON or YAML: {' '.join(str(exc).split())}", param, ctx)
        except RecursionError:  # the YAML composer recurses once per level
            self.fail(f"{value!r} is nested too deeply", param, ctx)
        except TaskFileError as exc:
            self.fail(str(exc), param, ctx)
        return data


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
        help="Option of --judge-model's backend only (it gets no -o or --base-url), e.g. --judge-option "
        "base_url=URL; eval's --judge takes --eval-judge-option.",
    )


def _kind(annotation: Any) -> Any:
    """What an option's value is, without None and pydantic's validators: ``int``, ``bool``,
    ``list``, ``tuple``, ``Literal``, ..."""
    if get_origin(annotation) in (Union, UnionType):
        annotation = next(a for a in get_args(annotation) if a is not type(None))
    if get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    return get_origin(annotation) or annotation


class FiniteFloat(click.types.FloatParamType):
    """A number flag: finite ("nan" and "inf" are no setting: core/config.py ``Finite``)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


class FiniteRange(click.FloatRange):
    """A number flag within its bounds, finite (:class:`FiniteFloat`)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        return super().convert(FiniteFloat().convert(value, param, ctx), param, ctx)


def _bounded(kind: type, metadata: list[Any]) -> click.ParamType | type:
    """``int``/``float`` within the option's declared bounds (ge, gt, le, lt), as click types."""
    ge, gt, le, lt = (next((getattr(m, k) for m in metadata if hasattr(m, k)), None) for k in ("ge", "gt", "le", "lt"))
    if ge is None and gt is None and le is None and lt is None:
        return FiniteFloat() if kind is float else kind
    if kind is float:
        return FiniteRange(
            min=ge if gt is None else gt, max=le if lt is None else lt, min_open=gt is not None, max_open=lt is not None
        )
    if kind is int:
        return click.IntRange(min=ge if gt is None else gt + 1, max=le if lt is None else lt - 1)
    return kind


def loop_flag(name: str, help: str | None = None) -> Any:
    """The CLI flag of RefineConfig option ``name``, from its declaration (core/config.py
    ``Offer``): its spellings, its help (or ``help``: serve's caps say what they cap), and a
    type from the option's own type and bounds. A bool's flag sets the opposite of its
    default; any other option is unset (None) unless given, so that a --preset can set it,
    and the help shows the default."""
    offer, info = offers()[name], RefineConfig.model_fields[name]
    kind = _kind(info.annotation)
    attrs: dict[str, Any] = {"help": help or offer.help}
    if offer.metavar:
        attrs["metavar"] = offer.metavar
    if offer.metavar == "FILE":  # the data of a JSON or YAML file
        attrs["type"] = DataFile()
    elif kind is bool and "/" in offer.flags[0]:  # --x/--no-x: unset (the task's default) unless given
        attrs.update(is_flag=True, default=None)
    elif kind is bool:
        attrs.update(is_flag=True, flag_value=not info.default, default=info.default)
    elif kind is list:
        attrs["multiple"] = True
    elif name == "strategy":  # any registered strategy (the engine's registry), not a fixed list
        attrs["type"] = StrategyName()
    elif choices(name):
        attrs["type"] = Spelling(name)
    elif kind is tuple:
        attrs["type"] = Listed(name)
    else:
        attrs["type"] = _bounded(kind, info.metadata)
    if kind not in (bool, list) and info.default is not None:
        attrs["show_default"] = str(info.default)
    return flag(*offer.flags, **attrs)


def flags_of(values: Mapping[str, Any]) -> str:
    """RefineConfig fields and values as the flags that set them: ``--samples 4 --max-iters 1``."""
    names = {f.name: f.metadata["flag"][0][0] for f in LoopFlags.flags()}
    return " ".join(f"{names.get(k, '--' + k.replace('_', '-'))} {v}" for k, v in values.items())


class _Loop(Flags):
    def config(self, **extra: Any) -> RefineConfig:
        """The RefineConfig these flags set (a bad value is a ConfigError naming the option)."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}  # type: ignore[arg-type]
        return RefineConfig.build(**values, **extra)


# The loop's flags: one per RefineConfig option declared with CLI flags (core/config.py
# ``Offer``), each filling the field of its name, in the declarations' order.
LoopFlags = dataclasses.make_dataclass(
    "LoopFlags",
    [(name, Any, loop_flag(name)) for name, offer in offers().items() if offer.flags],
    bases=(_Loop,),
    frozen=True,
    kw_only=True,
    namespace={"__module__": __name__, "__doc__": "The loop's flags, each filling the RefineConfig field of its name."},
)


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
    the feedback role's). ``evaluation_judge``: eval's --judge, which a misplaced --judge-option names."""
    return {
        "model": main_model(flags.model, flags.options, flags.base_url),
        "feedback_model": role_model(
            flags.feedback_model, flags.feedback_options, "--feedback-option", "--feedback-model"
        ),
        "refine_model": role_model(flags.refine_model, flags.refine_options, "--refine-option", "--refine-model"),
        "judge_model": judge_model(flags, evaluation_judge),
    }


def judge_model(flags: ModelFlags, evaluation_judge: str | None = None) -> ModelSpec | None:
    """The loop's judge role's own model (--judge-model, with --judge-option); None where not given."""
    if flags.judge_options and flags.judge_model is None:
        eval_judge = "; eval's --judge takes --eval-judge-option" if evaluation_judge is not None else ""
        raise click.UsageError(
            "--judge-option needs --judge-model (it configures the loop's judge role only): without it "
            f"the judge role shares the feedback role's backend, which -o or --feedback-option configures{eval_judge}"
        )
    return role_model(flags.judge_model, flags.judge_options, "--judge-option", "--judge-model")


def evaluation_judge_model(judge: str | None, pairs: tuple[str, ...]) -> ModelSpec | None:
    """eval's --judge, the evaluation's judge, with --eval-judge-option; None where not given."""
    if pairs and judge is None:
        raise click.UsageError(
            "--eval-judge-option needs --judge (it configures the evaluation's judge only); "
            "the loop's --judge-model takes --judge-option"
        )
    return role_model(judge, pairs, "--eval-judge-option", "--judge")


def config_of(flags: Mapping[str, Any], **extra: Any) -> RefineConfig:
    """The RefineConfig of click's parameters (those of the loop flags; others ignored)."""
    return LoopFlags.of(flags, whole=False).config(**extra)


def engine_spec(task: str, flags: Mapping[str, Any], **extra: Any) -> EngineSpec:
    """The spec of click's parameters (those of the engine flags; others ignored)."""
    return EngineFlags.of(flags, whole=False).spec(task, **extra)
