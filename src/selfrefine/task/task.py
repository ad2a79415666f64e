"""The task abstraction: what a task declares (prompts, judge questions, ways, defaults,
checks: :mod:`.declaration`, compiled once) and the hooks that make its behaviour (prepare an
input, parse a reply, check a draft, derive an answer, measure an output).

Built-in tasks are thin subclasses whose templates are packaged files
(``selfrefine/tasks/prompts/<name>/<role>.j2``); a user's task is the same class built from
strings, in Python or from a YAML file (:mod:`selfrefine.tasks.taskfile`)::

    task = Task(
        name="haiku",
        generate="Write a haiku about {{ input }}.",
        feedback="Critique this haiku and end with 'Score: N/10'.\\n{{ draft }}",
        refine="Haiku: {{ draft }}\\nCritique: {{ feedback }}\\nImproved haiku:",
        score=r"Score:\\s*(\\d+)",
        stop_contains=["perfect"],
        score_threshold=9,
        verify=lambda input, draft: len(draft.splitlines()) == 3,  # optional: a verifier (checks/declared.py)
    )
"""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Mapping
from typing import Any, ClassVar

from ..checks.declared import Checks, Verifier
from ..core.errors import DraftParseError, FeedbackParseError, InputError, TaskError
from ..core.records import Feedback, Verification
from ..core.saferegex import MAX_REGEX_CHARS
from ..core.stoprule import stop_hit
from .declaration import (
    REQUIRED_ROLES,
    TEMPLATE_ROLES,
    Capabilities,
    Declaration,
    Sources,
    TaskDefaults,
    compile_score,
    merged,
)

__all__ = [
    "JUDGED_BEST",
    "LOOP_BEST",
    "REQUIRED_ROLES",
    "SYSTEM_RULES",
    "TEMPLATE_ROLES",
    "Capabilities",
    "PreparedInput",
    "Task",
    "TaskDefaults",
    "compile_score",
    "prepared_input",
    "system_message",
]

# What every built-in task's system message tells a chat model after saying who it is
SYSTEM_RULES = (
    "Follow the instructions exactly and reply only in the format asked for. "
    "An example in a message is a different case, shown only for the format: never copy its content."
)


def system_message(who: str) -> str:
    """A built-in task's system message: who the model is and what it is asked, then the rules."""
    return f"You are {who}. {SYSTEM_RULES}"


# the loop --preset best runs on a task that declares it: several samples chosen by the
# verifier, one round of refinement on hybrid feedback (measured on commongen and acronym,
# docs/frontier.md)
LOOP_BEST: dict[str, Any] = {"samples": 4, "max_iterations": 1, "verifier_mode": "hybrid"}
# the same on a task without code checks, whose judge ranks the samples (engine/judge.py)
JUDGED_BEST: dict[str, Any] = {"samples": 4, "max_iterations": 1}
# on a task whose drafts code checks against stated instructions (chat, a task file with
# checks): first drafts one at a time until one passes every check (at most 3), each decoded
# with what its checks forbid outright refused (core/bans.py); then one failed check's repair
# at a time in its kind's form (a draft too short continued), one try each, at most 2, each
# kept only when nothing breaks; no judge among drafts the checks tie; no call started once
# 2,000 tokens are spent. Chosen on IFEval's tuning rows (drafts and repairs: the accuracy of
# 4 drafts and 2 tries a repair at 0.76 of the tokens; bans and continuations: better there at
# no more tokens; the budget: the smallest of 1,500-3,000 that lost nothing there), reported
# on others (docs/ifeval.md: issue 45)
REPAIR_BEST: dict[str, Any] = {
    "strategy": "sequential",
    "samples": 3,
    "max_iterations": 2,
    "refine_form": "by_kind",
    "repair_samples": 1,
    "judging": False,
    "ban_tokens": True,
    "max_total_tokens": 2000,
}


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
    declared: Declaration  # what it declares, compiled once (__init__)

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
            cls.defaults = merged(cls.defaults, legacy)
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
        ``{aspect: template}``; :mod:`.judge`), then any field of :class:`TaskDefaults` to
        override (``score``, ``stop_contains``, ``temperature`` as one value or per role, ...).
        Everything is compiled here, once (:class:`~.declaration.Declaration`): ``declared``."""
        self.name = name or type(self).name
        if not self.name:
            raise TaskError("a task needs a name")
        self.description = description if description is not None else type(self).description
        given = dict(generate=generate, feedback=feedback, refine=refine, refine_nofeedback=refine_nofeedback)
        self.declared = Declaration.of(Sources.of(type(self), self.name), given, judge, defaults)
        if verify is not None:
            self.declared = self._verified(verify)

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

    def conversation(self, input: str) -> list[dict[str, str]] | None:
        """The conversation the first draft answers as it is, as chat messages
        (``{"role", "content"}``, the last a user message): sent through the model's own chat
        template with no prompt of the task around it, so draft 0 is what the plain model
        replies (chat). None (the default): draft 0 answers the ``generate`` template's prompt."""
        return None

    def parse_draft(self, text: str) -> str:
        """Turn raw generator/refiner output into a draft; raise DraftParseError if unusable."""
        draft = text.strip()
        if not draft:
            raise DraftParseError("the model returned an empty draft")
        return draft

    def parse_way(self, way: str | None, text: str) -> str:
        """A first draft written one of the task's ``ways``, as a draft (default: ``parse_draft``)."""
        return self.parse_draft(text)

    def parse_feedback(self, text: str, *, input: str, draft: str) -> Feedback:
        """Parse raw feedback; raise FeedbackParseError to have that one call retried."""
        raw = text.strip()
        if not raw:
            raise FeedbackParseError("the model returned empty feedback")
        total = None
        pattern = self.declared.score_pattern
        if pattern is not None:
            start = max(0, len(raw) - MAX_REGEX_CHARS)  # a bounded search: the score ends a critique
            match = pattern.search(raw, start)
            if match is None:
                where = f" (its last {MAX_REGEX_CHARS:,} characters)" if start else ""
                raise FeedbackParseError(f"no score matching {pattern.pattern!r} in the feedback{where}")
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
        contains, matches = self.declared.stop_contains, self.declared.stop_matches
        if not contains and not matches:
            return None
        return stop_hit(text, contains, matches) is not None

    def metric(self, input: str, output: str, reference: Any = None) -> float | None:
        """The task's quality measure of an output (None: the task has no metric)."""
        return None

    def verify(self, input: str, draft: str) -> Verification | None:
        """Tool findings on a draft (missing concepts, execution errors, failing tests).

        Tasks that can check themselves override this, or are given ``verify=`` (a function
        or checks); it drives ``verifier_mode`` ``verifier`` and ``hybrid``, ``select``
        ``verified``, ``accept`` ``not_worse`` and ``samples``. It never sees the reference
        answer: feedback must not leak the label. None: this task has no verifier."""
        verifier = self.declared.verifier
        return verifier(input, draft) if verifier is not None else None

    def with_verifier(self, verify: Verifier | Checks | Mapping[str, Any]) -> Task:
        """A copy of this task checked by ``verify`` (``SelfRefine(task, verify=fn)``)."""
        task = copy.copy(self)
        task.declared = task._verified(verify)
        return task

    def _verified(self, verify: Verifier | Checks | Mapping[str, Any]) -> Declaration:
        if type(self).capabilities.verifier:
            raise TaskError(
                f"task {self.name!r} has its own verifier ({type(self).__name__}.verify); "
                "verify= is for a task without one"
            )
        return self.declared.with_verifier(verify)

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

    def answer(self, output: str) -> str | None:
        """The final answer derived from an output, when it differs from the output itself
        (e.g. the value returned by running a program). None: the output is the answer."""
        return None

    @property
    def has_verifier(self) -> bool:
        return self.declared.capabilities.verifier

    @property
    def has_judge(self) -> bool:
        """Whether the task's judge can rank drafts (it has at least one question)."""
        return bool(self.declared.judges)

    # --- rendering ------------------------------------------------------------------------

    def render(self, template: str, input: str, **variables: Any) -> str:
        """The prompt of one of the task's templates (:class:`~.declaration.Declaration`):
        a loop role (``generate``, ``feedback``, ``refine``, ``refine_nofeedback``), a judge
        question (``judge_<aspect>``) or a way's first draft (``generate_<way>``)."""
        found = self.declared.templates.get(template)
        if found is None:
            raise TaskError(f"task {self.name!r} has no {template!r} template")
        context = {"draft": "", "feedback": "", "history": [], "iteration": 0}
        context.update(self.context(input))
        context.update(variables)
        context["input"] = input
        # No trailing newline: the prompt ends on the cue the answer follows ("Rewrite:"),
        # so iteration t's refine prompt is a byte prefix of iteration t+1's, where that
        # cue is followed by the next draft. Prefix caches (llama.cpp, servers) rely on it.
        return found.render(context).strip()

    def summary(self) -> dict[str, str]:
        """The task in words: what it does, when it stops, how it is measured, the loop it runs
        by default and what ``--preset best`` runs (the configuration measured best on it)."""
        return {
            "name": self.name,
            "description": self.description,
            "stop": self.stop_description or self.declared.stop_text(),
            "metric": self.metric_name or "-",
            "default": self.declared.default_text(),
            "best": self.declared.best_text(),
        }

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


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
