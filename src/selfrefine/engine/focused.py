"""Focused refinement (``refine_form`` "focused", "rewrite" or "by_kind"): one failed check at a time.

The paper's refine prompt shows the whole history and asks to fix every issue; a 1.5B model
mostly returns what it was given (issue 45). A focused round instead takes the current
draft's first failed check that says a repair (:class:`~selfrefine.core.records.Finding`)
and asks for that one check alone in a short prompt, no earlier versions, no critique. How
it asks is the round's :class:`RepairForm`, one per ``refine_form`` (:data:`FORMS`):

- ``focused`` edits the draft in place (``engine/prompts/refine_focused.j2``): the request,
  the current draft, the check's repair. Request and draft come first, so the tries on one
  draft share their prompt's prefix;
- ``rewrite`` writes again from the request (``engine/prompts/refine_rewrite.j2``): the
  instruction the draft failed first, as a request states it ("Important: use no commas.";
  a task's own check or a schema: its repair), then the request; no draft, which a small
  model would copy. The tries of one check share their whole prompt;
- ``by_kind`` asks each check kind in the form measured to fix it (:data:`KIND_FORMS`):
  on IFEval's tuning rows the focused form fixed "no commas" 0 times in 8 tries and rewrite
  2 in 4, while rewrite fixed counts 0 in 6 and focused 3 in 10 (docs/ifeval.md); and a
  draft too short for its count (``Finding.extend``: "at least 230 more words") is continued
  (``engine/prompts/refine_extend.j2``): the model writes only what follows the draft's
  end, which is appended, where a focused edit rewrote the whole reply and stayed short.

Both are judged alike:

- a repair is kept only when the check it was run for passes and no check that passed
  breaks (never worse, by the same checks); otherwise it is rejected (kept in the record,
  ``Iteration.focus`` says why) and tried again, sampled, up to ``repair_samples`` times,
  then the next failed check is tried; the first that passes wins;
- every try is a refinement: the refinement cap and the budgets apply as to any other;
- a round whose every repair is rejected ends the run (``no_change``): the draft it started
  from stays the best by its checks;
- a draft whose failed checks say no repair (a task verifier that names none) is refined the
  paper's way (the loop's own path).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from importlib import resources

from ..checks.instructions import KINDS
from ..core.errors import ParseError
from ..core.records import (
    CallRecord,
    DecisionStep,
    FeedbackStep,
    Finding,
    Focus,
    Iteration,
    Step,
    StopReason,
    Verification,
)
from ..task.templates import Template
from .context import RunContext, raw_reply, verifier_feedback
from .drafting.base import Drafted
from .scoring.ranking import worse
from .scoring.scoreboard import same_text
from .scoring.selection import rejection_detail
from .stopping import StopRules


def _template(form: str) -> Template:
    source = resources.files("selfrefine.engine").joinpath(f"prompts/refine_{form}.j2").read_text(encoding="utf-8")
    return Template(f"refine {form}", source, {"request", "draft", "repair"})


def repair_of(finding: Finding) -> str:
    """The focused form's instruction: the check's repair, an edit of the draft it sees."""
    return finding.repair or ""


def requirement_of(finding: Finding) -> str:
    """The rewrite form's instruction: a check of the vocabulary as a request states it ("use
    no commas": its repair speaks of a draft the prompt does not show); a task's own check or
    a schema says its repair, which names what is missing (the concepts, the schema's errors)."""
    return finding.check if finding.kind in KINDS else repair_of(finding)


@dataclass(frozen=True)
class RepairForm:
    """How a focused round asks for one failed check: its name (the ``refine_form``), its
    packaged template, and the words of the finding the prompt gives (``instruction``)."""

    name: str
    template: Template
    instruction: Callable[[Finding], str]  # what the prompt asks for (recorded as ``Focus.repair``)

    appends: bool = False  # the reply continues the draft (appended to it) rather than replacing it

    def prompt(self, request: str, draft: str, finding: Finding) -> str:
        """The prompt for ``finding`` on ``draft`` (a form may leave the draft out)."""
        return self.template.render({"request": request, "draft": draft, "repair": self.instruction(finding)}).strip()

    def repaired(self, draft: str, reply: str) -> str:
        """The repaired draft: the reply, or where this form continues, the draft and the reply
        after it; an empty reply leaves the draft as it was (the repair changed nothing)."""
        if not reply.strip():
            return draft
        return f"{draft.rstrip()}\n\n{reply.strip()}" if self.appends else reply

    def of(self, finding: Finding) -> RepairForm:  # noqa: ARG002 - one form for every kind
        """The form that asks for ``finding``'s repair: this one."""
        return self


FOCUSED = RepairForm("focused", _template("focused"), repair_of)
REWRITE = RepairForm("rewrite", _template("rewrite"), requirement_of)
EXTEND = RepairForm("extend", _template("extend"), lambda finding: finding.extend or "", appends=True)
# the check kinds a form other than focused repairs better (measured on IFEval's tuning rows)
KIND_FORMS: dict[str, RepairForm] = {"forbidden_chars": REWRITE}


@dataclass(frozen=True)
class FormByKind:
    """``refine_form="by_kind"``: each finding's repair asked in its kind's form (``forms``),
    ``default`` for the kinds not listed. ``Focus.form`` records the form each try used."""

    name: str
    forms: dict[str, RepairForm]
    default: RepairForm
    extend: RepairForm | None = None  # the form of a draft too short for its check (Finding.extend)

    def of(self, finding: Finding) -> RepairForm:
        if self.extend is not None and finding.extend:
            return self.extend
        return self.forms.get(finding.kind or "", self.default)


BY_KIND = FormByKind("by_kind", KIND_FORMS, FOCUSED, EXTEND)
FORMS: dict[str, RepairForm | FormByKind] = {f.name: f for f in (FOCUSED, REWRITE, BY_KIND)}  # config.REPAIR_FORMS


def whole_sentences(text: str) -> str:
    """``text`` up to the end of its last whole sentence ("" when it has none): a continuation
    the token limit cut mid-sentence is kept to where it reads as finished, so the draft it
    extends is whole (a draft cut off would be demoted by its checks, its gain lost)."""
    ends = [m.end() for m in re.finditer(r"[.!?][\"')\]*]*(?=\s|$)", text)]
    return text[: ends[-1]].rstrip() if ends else ""


async def repair_targets(run: RunContext, t: int) -> list[Finding]:
    """Draft t's failed checks that say a repair, in the order the checks are listed."""
    check = await run.verify(t)
    return [f for f in check.findings if f.repair] if check is not None else []


def rejected_why(before: Verification | None, after: Verification | None, target: str, unchanged: bool) -> str:
    """Why a repair for check ``target`` is not kept ("" when it is): its check still fails, a
    check that passed breaks, or it scores lower by the checks."""
    if unchanged:
        return "the repair changed nothing"
    if after is None:
        return "no check could read it"
    still = next((f for f in after.findings if f.check == target), None)
    if still is not None:
        return f"the check it was for still fails: {still.text}"
    failed_before = {f.check for f in before.findings} if before is not None else set()
    broke = [f.check for f in after.findings if f.check not in failed_before]
    if broke:
        return "it breaks a check that passed: " + "; ".join(broke)
    if worse(after, before):
        return "it scores lower by the checks"
    return ""


class FocusedRound:
    """One focused round on draft t: each failed check's repair in turn, each tried up to
    ``repair_samples`` times, until one is kept or a stop rule holds.
    ``drafted``: the loop's steps for a new draft (its call steps, then the draft step);
    ``form``: how each repair is asked for (the prompt; the judging is the same)."""

    def __init__(
        self,
        run: RunContext,
        stops: StopRules,
        t: int,
        drafted: Callable[[Drafted], list[Step]],
        form: RepairForm | FormByKind = FOCUSED,
    ) -> None:
        self.run, self.stops, self.t, self.drafted, self.form = run, stops, t, drafted, form

    async def steps(self, targets: list[Finding]) -> AsyncIterator[Step]:
        run, state, t = self.run, self.run.state, self.t
        before = run.board.of_iteration(t)
        for finding in targets:
            for sample in range(1, run.settings.repair_samples + 1):
                it, call = await self._try(finding, sample)
                it.focus = await self._judged(it, before, finding, sample)
                why = it.focus.why
                if not why:
                    for step in self.drafted(Drafted(it, call)):
                        yield step
                    state.accepted(t, it.index)
                    return
                steps = self._rejected(it, call, why)
                for step in steps:
                    yield step
                if state.stopped:
                    return
        detail = f"no focused repair of draft {t} was kept: each failed check's repair was tried and rejected"
        yield state.decided(DecisionStep(iteration=t, stop=True, reason=StopReason.NO_CHANGE, detail=detail))

    async def _judged(self, it: Iteration, before: Verification | None, finding: Finding, sample: int) -> Focus:
        """The record of one try, judged by the checks: a task's own check that names no kind is
        counted by its words; ``fixed`` whether its own check passes, kept or not."""
        after = await self.run.verify(it.index)
        unchanged = same_text(it.draft, self.run.state.iterations[self.t].draft)
        why = rejected_why(before, after, finding.check, unchanged)
        fixed = after is not None and all(f.check != finding.check for f in after.findings)
        form = self.form.of(finding)
        return Focus(
            check=finding.check,
            kind=finding.kind or finding.check,
            form=form.name,
            repair=form.instruction(finding),
            sample=sample,
            kept=not why,
            fixed=fixed,
            why=why,
        )

    def _rejected(self, it: Iteration, call: CallRecord, why: str) -> list[Step]:
        """A rejected repair's steps: its draft, the checks' findings as its feedback, and the
        decision (the cap and the budgets apply; the round tries the next repair, or stops)."""
        run, state, t = self.run, self.run.state, self.t
        it.accepted, it.feedback = False, verifier_feedback(run.board.of_iteration(it.index))
        steps = [*self.drafted(Drafted(it, call)), FeedbackStep(iteration=it.index, feedback=it.feedback)]
        state.rejected(t, it.index)
        decision = state.decided(self.stops.after(it.index, None))
        detail = rejection_detail(f"repair rejected: {why}", t, decision)
        return [*steps, decision.model_copy(update={"detail": detail})]

    async def _try(self, finding: Finding, sample: int) -> tuple[Iteration, CallRecord]:
        """One repair call on draft t, appended to the run's iterations (not yet judged). A
        second try samples (temperature at least 0.7, a new seed): greedy would repeat itself."""
        run, state = self.run, self.run.state
        n, parent = len(state.iterations), state.iterations[self.t]
        form = self.form.of(finding)
        prompt = form.prompt(run.asked, parent.draft, finding)
        reseed, first = state.rejections(), 1 if sample == 1 else 2
        reply = ""
        for attempt in range(first, first + run.settings.requests.parse_retries + 1):
            request = run.request("refine", prompt, None, attempt, reseed)
            [(response, call)] = await run.caller.call("refine", n, request, stream=True)
            try:
                reply = run.parse_draft(response.text)
                break
            except ParseError as exc:
                state.log.failed(call, f"parse: {exc}")
                reply = raw_reply(call)
        finish = call.finish_reason
        if form.appends and finish == "length":  # a continuation cut at the token limit ends at its last sentence
            reply, finish = whole_sentences(reply), "stop"
        it = Iteration(index=n, draft=form.repaired(parent.draft, reply), finish_reason=finish)
        state.iterations.append(it)
        return it, call
