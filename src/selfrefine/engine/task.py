"""The task abstraction: three prompt templates, a feedback parser, a stop rule, a metric.

A task is data plus a few small hooks. Built-in tasks are thin subclasses whose templates
are packaged files (``selfrefine/tasks/prompts/<name>/<role>.j2``); a user's task is the
same class built from strings, in Python or from a YAML file (:mod:`selfrefine.taskfile`)::

    task = Task(
        name="haiku",
        generate="Write a haiku about {{ input }}.",
        feedback="Critique this haiku and end with 'Score: N/10'.\\n{{ draft }}",
        refine="Haiku: {{ draft }}\\nCritique: {{ feedback }}\\nImproved haiku:",
        score=r"Score:\\s*(\\d+)",
        stop_contains=["perfect"],
        score_threshold=9,
    )
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

from ..core.errors import DraftParseError, FeedbackParseError, InputError, TaskError
from ..core.records import Feedback, Verification
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


def compile_score(pattern: str | re.Pattern[str] | None) -> re.Pattern[str] | None:
    """Compile a score regex whose first group is the number; errors name the problem."""
    if pattern is None or isinstance(pattern, re.Pattern):
        return pattern
    try:
        rx = re.compile(pattern, re.IGNORECASE | re.MULTILINE)
    except re.error as exc:
        raise TaskError(f"score regex {pattern!r} is invalid: {exc}") from None
    if rx.groups < 1:
        raise TaskError(f"score regex {pattern!r} needs a group around the number, e.g. 'Score: (\\d+)'")
    return rx


class Task:
    """Base class of every task. Override the hooks below for task-specific behaviour."""

    # --- class-level defaults (subclasses override; constructor arguments win) --------
    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    prompt_dir: ClassVar[str | None] = None  # packaged templates folder, for built-ins
    metric_name: ClassVar[str | None] = None
    stop_description: ClassVar[str] = ""
    extra_variables: ClassVar[frozenset[str]] = frozenset()
    max_input_chars: ClassVar[int] = 20_000
    default_system: ClassVar[str | None] = None
    default_generic_feedback: ClassVar[str] = "Improve the answer."
    default_temperature: ClassVar[Mapping[str, float]] = {"generate": 0.0, "feedback": 0.0, "refine": 0.0}
    default_max_tokens: ClassVar[Mapping[str, int]] = {"generate": 300, "feedback": 300, "refine": 300}
    default_feedback_schema: ClassVar[dict[str, Any] | None] = None
    # text at which the engine stops generating, per role (cuts rambling on completion APIs)
    default_stop_sequences: ClassVar[Mapping[str, Sequence[str]]] = {}
    default_stop_contains: ClassVar[Sequence[str]] = ()
    default_score: ClassVar[str | None] = None
    default_score_threshold: ClassVar[float | None] = None
    default_max_iterations: ClassVar[int | None] = None
    runs_code: ClassVar[bool] = False  # executes model-written programs (serve offers it only when allowed)
    judge_criteria: ClassVar[str | None] = None  # what a pairwise judge compares (eval --judge)
    default_history: ClassVar[str] = "full"  # the paper's per-task choices differ
    default_select: ClassVar[str] = "last"

    def __init__(
        self,
        name: str | None = None,
        *,
        generate: str | None = None,
        feedback: str | None = None,
        refine: str | None = None,
        refine_nofeedback: str | None = None,
        description: str | None = None,
        system: str | None = None,
        score: str | re.Pattern[str] | None = None,
        stop_contains: Iterable[str] | None = None,
        score_threshold: float | None = None,
        max_iterations: int | None = None,
        generic_feedback: str | None = None,
        temperature: Mapping[str, float] | float | None = None,
        max_tokens: Mapping[str, int] | int | None = None,
        feedback_schema: dict[str, Any] | None = None,
        stop_sequences: Mapping[str, Sequence[str]] | Sequence[str] | None = None,
        history: str | None = None,
        select: str | None = None,
    ) -> None:
        self.name = name or type(self).name
        if not self.name:
            raise TaskError("a task needs a name")
        self.description = description if description is not None else type(self).description
        self.system = system if system is not None else self.default_system
        self.generic_feedback = generic_feedback or self.default_generic_feedback
        self.score_pattern = compile_score(score if score is not None else self.default_score)
        contains = stop_contains if stop_contains is not None else self.default_stop_contains
        self.stop_contains = [s for s in contains if s]
        self.score_threshold = score_threshold if score_threshold is not None else self.default_score_threshold
        self.max_iterations = max_iterations if max_iterations is not None else self.default_max_iterations
        self.temperature = _per_role(self.default_temperature, temperature)
        self.max_tokens = _per_role(self.default_max_tokens, max_tokens)
        self.feedback_schema = feedback_schema if feedback_schema is not None else self.default_feedback_schema
        sequences = _per_role({}, stop_sequences)
        self.stop_sequences = {
            role: list(sequences.get(role, self.default_stop_sequences.get(role, ()))) for role in REQUIRED_ROLES
        }
        if history is not None:
            if history not in ("full", "last", "none"):
                raise TaskError(f"history must be full, last or none, not {history!r}")
            self.default_history = history  # type: ignore[misc]
        if select is not None:
            if select not in ("last", "best", "verified"):
                raise TaskError(f"select must be last, best or verified, not {select!r}")
            self.default_select = select  # type: ignore[misc]
        given = dict(generate=generate, feedback=feedback, refine=refine, refine_nofeedback=refine_nofeedback)
        self.templates = self._compile_templates(given)

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

    # --- hooks ----------------------------------------------------------------------------

    def prepare_input(self, text: str) -> str:
        """Validate and normalise one input; raise InputError with a clear message."""
        if text is None or not str(text).strip():
            raise InputError(f"input for task {self.name!r} is empty")
        text = str(text).strip()
        if len(text) > self.max_input_chars:
            raise InputError(
                f"input for task {self.name!r} is {len(text):,} characters; the limit is "
                f"{self.max_input_chars:,}"
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
            match = self.score_pattern.search(raw)
            if match is None:
                raise FeedbackParseError(f"no score matching {self.score_pattern.pattern!r} in the feedback")
            try:
                total = float(match.group(1))
            except (TypeError, ValueError):
                raise FeedbackParseError(f"score {match.group(1)!r} is not a number") from None
        return Feedback(text=raw, total=total, done=self.says_done(raw))

    def says_done(self, text: str) -> bool | None:
        """True/False when the task has stop phrases, None when it has none."""
        if not self.stop_contains:
            return None
        low = text.lower()
        return any(s.lower() in low for s in self.stop_contains)

    def metric(self, input: str, output: str, reference: Any = None) -> float | None:
        """The task's quality measure of an output (None: the task has no metric)."""
        return None

    def verify(self, input: str, draft: str) -> Verification | None:
        """Tool findings on a draft (missing concepts, execution errors, failing tests).

        Tasks that can check themselves override this; it drives ``verifier_mode``
        ``verifier`` and ``hybrid``. It never sees the reference answer: feedback must not
        leak the label. None: this task has no verifier."""
        return None

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
        return type(self).verify is not Task.verify

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
            parts.append("feedback contains " + " / ".join(repr(s) for s in self.stop_contains))
        if self.score_threshold is not None:
            parts.append(f"score >= {self.score_threshold:g}")
        return "; ".join(parts) or "fixed rounds"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


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
