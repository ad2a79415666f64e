"""The flags that describe an engine, shared by ``run``, ``eval`` and ``serve``, and the
one way they become an :class:`~selfrefine.engine.spec.EngineSpec`.

The loop flags are generated from :class:`~selfrefine.core.config.RefineConfig`: each flag
names the field it sets (``FLAG_FIELDS``), a choice flag offers exactly the field's values
and takes either spelling (``not-worse`` or ``not_worse``), printed one way.
"""

from __future__ import annotations

from typing import Any

import click

from ..backends.registry import DEFAULT_MODEL, scheme_of
from ..core.config import RefineConfig, canonical, choices
from ..engine.spec import EngineSpec, ModelSpec

# loop flag (its click name) -> the RefineConfig field it sets
FLAG_FIELDS = {
    "max_iters": "max_iterations",
    "history": "history",
    "select": "select",
    "accept": "accept",
    "feedback_mode": "feedback_mode",
    "verifier_mode": "verifier_mode",
    "seed": "seed",
    "temperature": "temperature",
    "max_tokens": "max_tokens",
    "score_threshold": "score_threshold",
    "stop_contains": "stop_contains",
    "stop_matches": "stop_matches",
    "budget_tokens": "max_total_tokens",
    "budget_seconds": "max_seconds",
    "no_constrain": "constrained",
    "final_feedback": "final_feedback",
    "samples": "samples",
    "strategy": "strategy",
    "preset": "preset",
}
MODEL_FLAGS = ("model", "options", "base_url", "feedback_model", "feedback_options", "refine_model", "refine_options")


class Spelling(click.Choice):
    """A choice of RefineConfig's values that also takes them with hyphens (``not-worse``)."""

    def __init__(self, field: str) -> None:
        super().__init__(list(choices(field)))

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        return super().convert(canonical(value), param, ctx)


def _default(field: str) -> Any:
    return RefineConfig.model_fields[field].default


BACKEND_OPTIONS = [
    click.option(
        "--model",
        "-m",
        default=DEFAULT_MODEL,
        envvar="SELFREFINE_MODEL",
        show_default=True,
        help="embedded | embedded:NAME (see `selfrefine models`) | gguf:PATH | openai:NAME | fake[:REPLIES.json]",
    ),
    click.option(
        "--option",
        "-o",
        "options",
        multiple=True,
        metavar="KEY=VALUE",
        help="Option of --model's backend (and of the roles that share it), e.g. -o n_ctx=8192, "
        "-o api=completion, -o concurrency=8; `selfrefine models` lists each backend's options.",
    ),
    click.option(
        "--base-url",
        metavar="URL",
        help="Server of an openai: --model (same as -o base_url=URL); unset: OPENAI_BASE_URL, "
        "which every openai: model without its own uses.",
    ),
    click.option("--feedback-model", help="A different model for the feedback role."),
    click.option(
        "--feedback-option",
        "feedback_options",
        multiple=True,
        metavar="KEY=VALUE",
        help="Option of --feedback-model's backend only, e.g. --feedback-option base_url=URL.",
    ),
    click.option("--refine-model", help="A different model for the refine role."),
    click.option(
        "--refine-option",
        "refine_options",
        multiple=True,
        metavar="KEY=VALUE",
        help="Option of --refine-model's backend only.",
    ),
]
LOOP_OPTIONS = [
    click.option("--max-iters", type=click.IntRange(min=0), help="Maximum refinements (default: task's, else 4)."),
    click.option(
        "--history",
        type=Spelling("history"),
        help="What the refiner sees: all earlier drafts+feedback, the previous pair, or none (default: the task's).",
    ),
    click.option(
        "--select",
        type=Spelling("select"),
        help="Return the last draft, the best-scored one, or the one the task's own verifier "
        "scores highest (ties: feedback score, then the earlier draft) (default: the task's).",
    ),
    # unset (None) unless given, so that a --preset can set them; the help shows the default
    click.option(
        "--accept",
        type=Spelling("accept"),
        show_default=_default("accept"),
        help="not_worse (or not-worse): reject a refinement the task's verifier scores lower than the "
        "draft it refined, or that leaves it unchanged, and refine that draft again with the next seed.",
    ),
    click.option(
        "--feedback-mode",
        type=Spelling("feedback_mode"),
        show_default=_default("feedback_mode"),
        help="The paper's ablation: task critic, a fixed generic message, or no feedback.",
    ),
    click.option(
        "--verifier-mode",
        type=Spelling("verifier_mode"),
        show_default=_default("verifier_mode"),
        help="Feedback from the model (self), the task's own checks (verifier), or both (hybrid).",
    ),
    click.option("--seed", type=int, default=_default("seed"), show_default=True),
    click.option("--temperature", type=click.FloatRange(min=0), help="Sampling temperature for every role."),
    click.option("--max-tokens", type=click.IntRange(min=1), help="Completion tokens per call."),
    click.option("--score-threshold", type=float, help="Stop once the feedback score reaches this."),
    click.option(
        "--stop-contains",
        multiple=True,
        help="Stop when the feedback says this phrase: whole words, any case, not negated ('not done' is no stop).",
    ),
    click.option("--stop-matches", multiple=True, help="Stop when the feedback matches this regular expression."),
    click.option("--budget-tokens", type=click.IntRange(min=1), help="Stop after this many tokens in total."),
    click.option("--budget-seconds", type=click.FloatRange(min=0, min_open=True), help="Stop after this many seconds."),
    click.option("--no-constrain", is_flag=True, help="Do not constrain feedback to the task's JSON schema."),
    click.option(
        "--samples",
        type=click.IntRange(1, 16),
        show_default=_default("samples"),
        help="Drafts sampled per step, each checked by the task's verifier: the first draft is the best "
        "sample, and a round's best refinement replaces its draft only if it scores higher.",
    ),
    click.option(
        "--strategy",
        type=Spelling("strategy"),
        show_default=_default("strategy"),
        help="auto: spend --budget-tokens between samples per step and rounds by what the verifier "
        "sees (start with 2 samples; stop when it is satisfied; wider after echoes or rejections, "
        "deeper after an accepted refinement).",
    ),
    click.option(
        "--preset",
        type=Spelling("preset"),
        help="paper: the paper's loop (the defaults); best: the task's measured best configuration "
        "(docs/frontier.md). Options given explicitly win.",
    ),
    click.option(
        "--final-feedback",
        is_flag=True,
        help="Critique the last draft even when that cannot change the result (with --select last "
        "at --max-iters the run otherwise skips that call).",
    ),
]


def backend_options(func: Any) -> Any:
    """The model flags alone (``serve`` takes loop options per request)."""
    for option in reversed(BACKEND_OPTIONS):
        func = option(func)
    return func


def engine_options(func: Any) -> Any:
    for option in reversed(BACKEND_OPTIONS + LOOP_OPTIONS):
        func = option(func)
    return func


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
    """One role's own model and its options (which never reach another role's backend)."""
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


def models_of(flags: dict[str, Any]) -> dict[str, ModelSpec | None]:
    """The model flags as the spec's three ModelSpecs (feedback/refine None: --model's)."""
    return {
        "model": main_model(flags["model"], flags["options"], flags["base_url"]),
        "feedback_model": role_model(
            flags["feedback_model"], flags["feedback_options"], "--feedback-option", "--feedback-model"
        ),
        "refine_model": role_model(flags["refine_model"], flags["refine_options"], "--refine-option", "--refine-model"),
    }


def config_of(flags: dict[str, Any], **extra: Any) -> RefineConfig:
    """The loop flags as a RefineConfig (a bad value is a ConfigError naming the option)."""
    values = {field: flags.get(flag) for flag, field in FLAG_FIELDS.items()}
    values["constrained"] = not flags.get("no_constrain")
    values["stop_contains"] = list(flags.get("stop_contains") or ())
    values["stop_matches"] = list(flags.get("stop_matches") or ())
    return RefineConfig.build(**values, **extra)


def engine_spec(task: str, flags: dict[str, Any], **extra: Any) -> EngineSpec:
    """What ``run`` and ``eval`` build: the task, the loop flags, the model flags."""
    return EngineSpec(task=task, config=config_of(flags, **extra), **models_of(flags))
