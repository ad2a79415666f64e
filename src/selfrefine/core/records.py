"""Typed records of a Self-Refine run: calls, feedback, iterations, steps and the result.

Everything that crosses a module boundary is one of these pydantic models, so a run
serialises to JSON and back without loss (``RunResult.model_dump_json`` /
``RunResult.model_validate_json``).
"""

from __future__ import annotations

import json
from enum import Enum
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, FiniteFloat

from .config import RefineConfig
from .later import Later

Role = Literal["generate", "feedback", "refine", "judge"]
# the roles with prompts of their own: templates, temperatures, max tokens, stop sequences
ROLES: tuple[Role, ...] = ("generate", "feedback", "refine")
# every role a backend plays: the prompt roles and the judge (closed questions, engine/scoring/questions.py)
MODEL_ROLES: tuple[Role, ...] = (*ROLES, "judge")


class StopReason(str, Enum):
    """Why the loop ended. Exactly one reason is reported per run."""

    FEEDBACK = "feedback"  # the feedback carried the task's stop signal
    SCORE = "score_threshold"  # the feedback score reached the threshold
    MAX_ITERATIONS = "max_iterations"  # the refinement cap was reached
    NO_CHANGE = "no_change"  # a refinement returned the same draft
    TOKEN_BUDGET = "token_budget"  # total tokens reached the budget
    TIME_BUDGET = "time_budget"  # wall time reached the budget
    ERROR = "error"  # a backend failed after its retries; finished drafts are kept
    # strategy auto: the task's verifier is satisfied with the draft; under a JSON Schema: the
    # draft validates (and passes the run's checks)
    VERIFIED = "verified"

    def __str__(self) -> str:  # print(result.stop_reason) and f-strings show "no_change", as --json does
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


class CallRecord(Later):
    """One model call (including failed attempts and retries)."""

    LATER = ("purpose",)

    role: Role
    iteration: int
    attempt: int = 1
    model: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0  # in the backend, once it accepted the call
    wait_seconds: float = 0.0  # queued behind the backend's concurrency limit
    ok: bool = True
    cached: bool = False  # answered from the response cache (no model call)
    cached_prompt_tokens: int | None = None  # prompt tokens the engine reused, if it says
    error: str | None = None
    # why the model stopped writing: "stop" (it finished), "length" (cut off at max_tokens),
    # ...; None when the backend does not say (and in records written before it was kept)
    finish_reason: str | None = None
    prompt: str | None = None  # filled only with RefineConfig.record_prompts
    response: str | None = None
    # what the call was for besides its role's step: "checks", the derivation of the
    # request's checks before the first draft (a critic's call: the feedback role's model)
    purpose: str | None = None


class Usage(BaseModel):
    """Totals over a run's calls."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    # prompt tokens the engine reused from its prefix cache, over calls whose engine says
    cached_prompt_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @classmethod
    def of(cls, calls: list[CallRecord]) -> Usage:
        return cls(
            calls=len(calls),
            prompt_tokens=sum(c.prompt_tokens for c in calls),
            completion_tokens=sum(c.completion_tokens for c in calls),
            seconds=round(sum(c.seconds for c in calls), 6),
            cached_prompt_tokens=sum(c.cached_prompt_tokens or 0 for c in calls),
        )


class Feedback(BaseModel):
    """A critique of one draft: the raw text plus whatever the task parsed out of it."""

    text: str
    # scores are finite: a "nan" would win every comparison of "best" selection, an "inf" meet any threshold
    scores: dict[str, FiniteFloat] = Field(default_factory=dict)  # per-aspect scores
    total: FiniteFloat | None = None  # drives "best" selection and score thresholds
    # the critique says the draft needs no more work (a stop signal for the loop); None when
    # the task cannot tell. Run folders written before the rename stored it as "stop".
    done: bool | None = Field(default=None, validation_alias=AliasChoices("done", "stop"))
    fields: dict[str, str | list[str]] = Field(default_factory=dict)  # other parsed parts
    source: Literal["model", "generic", "none", "verifier", "hybrid"] = "model"
    parse_error: str | None = None  # set when every parse attempt failed
    verification: Verification | None = None  # tool findings, in verifier/hybrid mode

    def __str__(self) -> str:  # templates and displays see the raw text
        return self.text


class Judgment(BaseModel):
    """A closed question put to the model (is it done? does it make sense? a rating? A or
    B?), answered as probabilities: the model's own weight on each answer, read from the
    probabilities of the answer tokens, or where a backend gives none, the share of ``samples``
    sampled verdicts (``method`` says which)."""

    question: str  # what was asked: an aspect ("sense"), or a comparison ("sense: A vs B")
    answers: dict[str, float]  # each answer's probability, normalised over the answers
    score: float  # P(the first answer: "yes", "A"), or a rating's expected value
    method: Literal["probabilities", "sampled"] = "probabilities"
    samples: int = 1  # replies read: one with probabilities, k sampled verdicts without
    note: str = ""  # what else the judgment needs said (a fallback, an order flip)


class Finding(Later):
    """One check a draft fails: the check in words, what it found, and the short instruction
    that repairs it, in the check's own words with its arguments ("Rewrite the text entirely in
    lowercase letters; change nothing else."), for a focused refinement (engine/focused.py)."""

    LATER = ("kind", "extend")

    check: str  # the check in words, the same for every draft it reads: "use only lowercase letters"
    text: str  # what it found in this draft: "has 3 capital letters (first in 'The')"
    repair: str | None = None  # None: the check says no repair of its own
    # the check's kind, to count by: an instruction's type ("case", "forbidden_chars"),
    # "json_schema", or a task's own ("program"); None: a check that names none (its words do)
    kind: str | None = None
    # where more text after the draft's end repairs it (too few words or sentences): what the
    # continuation must add ("at least 230 more words"); None: the draft must be edited
    extend: str | None = None


class Verification(Later):
    """What a task's own checks (code, not the model) found in a draft, and where drafts
    were ranked, what the task's judge (the model's probabilities) said of it."""

    LATER = ("judged", "judgments", "findings")

    text: str  # findings as plain text for the refiner, e.g. "Missing concepts: ball"
    passed: bool | None = None  # True: the checks found nothing left to fix
    score: FiniteFloat | None = None  # e.g. concept coverage; finite, as a feedback's scores
    answer: str | None = None  # the answer the check found (gsm8k: solution()'s value), for votes
    # the task's judge on the draft (engine/judge.py), asked only where drafts are ranked and
    # the code checks cannot tell them apart: the mean P(yes) over the judged aspects
    judged: FiniteFloat | None = None
    judgments: list[Judgment] = Field(default_factory=list)  # one per aspect, with its probabilities
    # each failed check on its own, with its repair, where the checks say them (the run's checks,
    # a task file's list, a schema, commongen's concepts, gsm8k's program); empty: not said
    findings: list[Finding] = Field(default_factory=list)

    @property
    def repair(self) -> str | None:
        """The repair of the first failed check that says one (None: none does)."""
        return next((f.repair for f in self.findings if f.repair), None)


Feedback.model_rebuild()


class RequestCheck(BaseModel):
    """One check of a run's drafts besides the task's own (``RefineConfig.checks`` or derived
    from the request: checks/instructions), as the run used it."""

    source: Literal["given", "derived", "schema"]  # schema: the run's JSON Schema (engine/run_checks.py)
    check: dict[str, Any]  # the check as data: {"type": "count", "unit": "words", ...}
    says: str  # the instruction in words: "at most 50 words"


class FailedCheck(BaseModel):
    """A check the returned output fails: what the check asks, in words, and what it found.
    Computed by the run's own checks (the task's verifier, the checks given or derived, the
    schema), never by the reference answer."""

    source: Literal["task", "given", "derived", "schema"]  # task: the task's own verifier (a task file's checks:)
    says: str  # the instruction in words: "use no commas"
    finding: str  # what the output does wrong: "remove the 3 commas"


class DroppedCheck(BaseModel):
    """A check derived from the request that the run does not use, and why: one that cannot
    be built ("nth: Input should be greater than or equal to 1"), one past the cap on a
    run's checks, or one the request does not state (engine/derivation.py)."""

    check: dict[str, Any]  # as it was read or listed: {"type": "paragraph_start", "nth": 0, ...}
    reason: str  # in words

    def said(self) -> str:
        """The check (its data, cut) and why it was left out, on one line."""
        data = json.dumps(self.check, ensure_ascii=False)
        return f"{data if len(data) <= 120 else data[:119] + '…'} ({self.reason})"


def dropped_said(dropped: list[DroppedCheck], shown: int = 5) -> str:
    """Dropped checks on one line, each named with why; the ones dropped for a reason already
    said are counted, not repeated (40 stated instructions said "more than 32 checks" 8 times)."""
    firsts: dict[str, tuple[DroppedCheck, int]] = {}
    for d in dropped:
        first, n = firsts.get(d.reason, (d, 0))
        firsts[d.reason] = (first, n + 1)
    said = [d.said() + (f", and {n - 1} more for that reason" if n > 1 else "") for d, n in firsts.values()]
    more = f"; and {len(said) - shown} more" if len(said) > shown else ""
    return "; ".join(said[:shown]) + more


class Candidate(Later):
    """One of the ``samples`` drafts sampled for one step (``RefineConfig.samples`` > 1):
    its text, the task's check of it and the call that produced it. The chosen one became
    the iteration's draft; the others stay here so a run's record shows what lost."""

    LATER = ("way",)

    draft: str
    verification: Verification | None = None
    call: CallRecord | None = None
    chosen: bool = False
    # the critic on this sample, when the verifier tied it with others at the top (the
    # critic then chooses, and the chosen sample's critique is its step's feedback)
    feedback: Feedback | None = None
    # the way it was written, when the task has several (gsm8k: "program" or "steps")
    way: str | None = None


class Focus(BaseModel):
    """What a focused refinement (``refine_form`` "focused", "rewrite" or "by_kind": engine/focused.py) was
    for: one failed check's repair, the form that asked for it, the how-manieth try of it, and
    whether it was kept, and if not, why (a benchmark counts kept tries per ``kind`` and ``form``)."""

    check: str  # the check in words: "use only lowercase letters"
    repair: str  # the instruction the prompt gave: "Rewrite the text entirely in lowercase letters; …"
    # the check's kind (Finding.kind: "case", "json_schema", …; a check that names none: its words)
    kind: str | None = None  # None: a record from before kinds were recorded
    form: str = "focused"  # the form whose prompt asked: "focused" (edit in place) or "rewrite" (by_kind: per kind)
    sample: int = 1  # the try of this repair on this draft (1, 2, …: repair_samples)
    kept: bool = False
    # whether the check it was for passes on the new draft, kept or not (a repair that fixes its
    # check and breaks another is rejected); None: a record from before it was kept
    fixed: bool | None = None
    why: str = ""  # why it was rejected: "the check it was for still fails: …" ("" when kept)


class Iteration(Later):
    """Draft y_t and the feedback fb_t on it (None when the loop stopped before feedback).

    ``verification`` is the task's own check of the draft, computed once per draft when the
    run needs it (``select="verified"``, ``accept="not_worse"``, verifier/hybrid feedback).
    ``accepted`` is False for a refinement rejected by ``accept="not_worse"``: its feedback
    is the verifier's findings and it is never the returned output."""

    LATER = ("focus",)

    index: int
    draft: str
    feedback: Feedback | None = None
    verification: Verification | None = None
    accepted: bool = True
    # the finish reason of the call that wrote the draft: "length" when it was cut off at
    # the token limit (None: the backend did not say, or a record from before it was kept)
    finish_reason: str | None = None
    candidates: list[Candidate] = Field(default_factory=list)  # samples > 1: every sample of this step
    focus: Focus | None = None  # a focused refinement: the check it was for, kept or why not


class ModelInfo(BaseModel):
    """The model file a backend runs, for run records and cache keys."""

    name: str  # catalogue name (``embedded``, ``embedded:smollm2-135m``) or ``gguf:PATH``
    path: str
    size: int
    sha256: str | None = None  # pinned and verified for catalogued models; None otherwise


class RunConfig(RefineConfig):
    """What a run ran with: its options as given, the policies the task's defaults resolved
    them to, and each role's model (name, and file where there is one)."""

    # rows written by older versions may hold keys since removed: still load them
    model_config = ConfigDict(extra="ignore")

    models: dict[str, str] = Field(default_factory=dict)  # role -> model name
    model_files: dict[str, ModelInfo] = Field(default_factory=dict)  # role -> model file

    def __getitem__(self, key: str) -> object:
        """``result.config["select"]``: dict-style reads, as when this was a plain dict."""
        return getattr(self, key)


class RunResult(Later):
    """Everything about one Self-Refine run; serialises to JSON and back."""

    LATER = ("checks", "parsed", "checks_dropped", "fails")

    task: str
    input: str
    iterations: list[Iteration] = Field(default_factory=list)
    output: str | None = None
    answer: str | None = None  # derived final answer (e.g. the value a program returns)
    selected: int | None = None  # index of the iteration whose draft is `output`
    stop_reason: StopReason
    error: str | None = None
    calls: list[CallRecord] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    config: RunConfig = Field(default_factory=RunConfig)
    metric: float | None = None  # the task's metric on `output`, when a reference was given
    metric_error: str | None = None  # the metric hook raised on `output` (metric is then None)
    answer_error: str | None = None  # the answer hook raised on `output` (answer is then None)
    checks: list[RequestCheck] = Field(default_factory=list)  # the run's checks besides the task's own
    checks_dropped: list[DroppedCheck] = Field(default_factory=list)  # derived checks left out, with why
    # a run with a JSON Schema (json_schema, response_model): the output's JSON value when it
    # validates, else None
    parsed: Any = None
    # the checks the returned output still fails ([]: it passes every one); None: code checks
    # nothing in this run (no verifier, checks or schema), or there is no output
    fails: list[FailedCheck] | None = None

    def _unset(self, name: str) -> bool:
        if name == "parsed":  # a run with a schema says None (it did not validate); others leave it out
            return self.config.json_schema is None
        if name == "fails":  # [] says the output passes every check
            return self.fails is None
        return super()._unset(name)

    @property
    def drafts(self) -> list[str]:
        return [it.draft for it in self.iterations]


# --- the loop as a stream of typed steps (smolagents-style) -------------------------


class DraftStep(Later):
    LATER = ("focus",)

    kind: Literal["draft"] = "draft"
    iteration: int
    draft: str
    call: CallRecord | None = None
    candidates: list[Candidate] = Field(default_factory=list)  # samples > 1: the chosen one and the rest
    accepted: bool = True  # False: a refinement accept="not_worse" rejected (never returned)
    focus: Focus | None = None  # a focused refinement: the check it was for, kept or why not


class FeedbackStep(BaseModel):
    kind: Literal["feedback"] = "feedback"
    iteration: int
    feedback: Feedback


class DecisionStep(BaseModel):
    """What the loop decided after a feedback: refine again, or stop and why."""

    kind: Literal["decision"] = "decision"
    iteration: int
    stop: bool
    reason: StopReason | None = None
    detail: str = ""


class ChecksStep(BaseModel):
    """The checks a run's drafts must pass besides the task's own, known before the first
    draft: the ones given and the ones derived from the request (``call``: the derivation's)."""

    kind: Literal["checks"] = "checks"
    checks: list[RequestCheck]
    call: CallRecord | None = None
    note: str = ""  # what else is worth saying ("the derivation gave no usable check: …")
    dropped: list[DroppedCheck] = Field(default_factory=list)  # derived checks left out, each with why


class ProgressStep(BaseModel):
    """Work that takes a while has started; its result comes in a later step. ``what``:
    ``"checks"``, the derivation of the request's checks (a model call before the first
    draft, minutes on a small machine), said the moment it starts so the wait is not silent."""

    kind: Literal["progress"] = "progress"
    what: Literal["checks"]
    text: str  # what a reader sees: "deriving checks from the request…"


class CallStep(BaseModel):
    """A call that failed and will be retried (or gave up); successful calls ride on steps."""

    kind: Literal["call"] = "call"
    call: CallRecord


class DeltaStep(BaseModel):
    """A piece of a reply while the model writes it (only with ``astream(..., deltas=True)``):
    call ``attempt`` of ``role`` on draft ``iteration``. The pieces of one call concatenate
    to its recorded response; a new attempt (a retry) starts over. The draft or feedback
    step that follows carries the parsed result, as without deltas."""

    kind: Literal["delta"] = "delta"
    role: Role
    iteration: int
    attempt: int = 1
    text: str
    sample: int | None = None  # the step's sample it belongs to (1, 2, …), when the step samples several


class ResultStep(BaseModel):
    kind: Literal["result"] = "result"
    result: RunResult


Step = DraftStep | FeedbackStep | DecisionStep | ChecksStep | ProgressStep | CallStep | DeltaStep | ResultStep
