"""A run's checks besides the task's own: the ones given with the run (``checks``) and the
ones derived from its request (:mod:`.derivation`), in the vocabulary of
:mod:`.instructions`. They are one more source of each draft's code check: the scoreboard
(:mod:`.scoreboard`) stores their verdict with the task's own, once per distinct draft.

- a task without a verifier (chat) is checked by them alone: the score is the share of
  checks a draft passes, the findings one line per failed check ("- needs exactly 3 bullet
  points (lines starting with * or -), has 5");
- a task with a verifier of its own gets both: it passes when both pass, its score is the
  mean of the two (each in [0, 1] for the tasks that take checks: a task file's), its
  answer the task's.

Checks are fixed before the first draft is checked, so a draft's verdict never changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..core.errors import ConfigError, TaskError
from ..core.records import RequestCheck, Verification
from .instructions import Instruction, parse_checks


def given_checks(data: Sequence[dict] | None) -> tuple[Instruction, ...]:
    """The run's own checks (``RefineConfig.checks``), parsed: a bad one is a ConfigError
    naming it, before any model call."""
    if not data:
        return ()
    try:
        return tuple(parse_checks(list(data)))
    except TaskError as exc:
        raise ConfigError(f"invalid option checks: {exc}") from None


@dataclass
class RunChecks:
    """The checks of one run's drafts besides the task's own, by where they came from."""

    given: tuple[Instruction, ...] = ()
    derived: list[Instruction] = field(default_factory=list)

    @property
    def all(self) -> list[Instruction]:
        """Every check, the given first, none twice (a derived one the run already gives is dropped)."""
        return [c for _, c in self._sourced()]

    def _sourced(self) -> list[tuple[str, Instruction]]:
        seen: dict[str, tuple[str, Instruction]] = {}
        for source, checks in (("given", self.given), ("derived", self.derived)):
            for check in checks:
                seen.setdefault(check.model_dump_json(), (source, check))
        return list(seen.values())

    def records(self) -> list[RequestCheck]:
        """The checks as the run's record states them."""
        return [
            RequestCheck(source=source, check=c.model_dump(mode="json"), says=c.describe())  # type: ignore[arg-type]
            for source, c in self._sourced()
        ]

    def verify(self, draft: str) -> Verification | None:
        """The checks' verdict on a draft (None: the run has none)."""
        checks = self.all
        if not checks:
            return None
        failed = [o.finding for o in (c.check(draft) for c in checks) if not o.passed]
        score = (len(checks) - len(failed)) / len(checks)
        text = "\n".join(f"- {f}" for f in failed) or "every check passes"
        return Verification(text=text, passed=not failed, score=round(score, 6))


def combined(own: Verification | None, requested: Verification | None) -> Verification | None:
    """A draft's code check from the task's verifier and the run's checks."""
    if requested is None:
        return own
    if own is None:
        return requested
    score = None if own.score is None else round((own.score + (requested.score or 0.0)) / 2, 6)
    passed = None if own.passed is None and requested.passed else own.passed is not False and bool(requested.passed)
    return own.model_copy(update={"text": f"{own.text}\n{requested.text}".strip(), "passed": passed, "score": score})
