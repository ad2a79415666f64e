"""What the returned output still fails, check by check (``RunResult.fails``).

Every result ends by naming the checks its output fails ("returned output fails: use no
commas"), computed by the run's own checks, never by the reference answer:

- each instruction check by itself, in its own words (``describe()``): a task file's
  ``checks:``, the checks given with the run and those derived from its request;
- the run's JSON Schema, its errors as the finding;
- a task's verifier of its own (commongen's concepts, gsm8k's program), and the engine's
  checks of every draft (an echo of the request, a reply cut off at the token limit): their
  verdict, where the checks above do not already explain it.

None: code checks nothing in this run, or there is no output.
"""

from __future__ import annotations

from ..checks.declared import Checks
from ..checks.instructions import Instruction, InstructionChecks
from ..core.records import FailedCheck, Verification
from .context import RunContext
from .verify_threads import verify_in_thread


def task_checks(run: RunContext) -> list[Instruction] | None:
    """The task's verifier as instruction checks (a task file's ``checks:``); None: the task
    has none, or one that code of its own runs (a function, a built-in's ``verify``)."""
    verifier = run.task.declared.verifier
    if isinstance(verifier, Checks):
        return verifier.instructions  # what its keys spell, built when it was read
    inner = getattr(verifier, "fn", None)  # a FunctionVerifier around InstructionChecks
    return list(inner.checks) if isinstance(inner, InstructionChecks) else None


async def output_fails(run: RunContext, output: str | None, finish_reason: str | None) -> list[FailedCheck] | None:
    """The checks ``output`` fails ([]: none); None where nothing checks it."""
    checks, task = run.state.checks, run.task
    if output is None or not (task.has_verifier or checks.active):
        return None
    own = task_checks(run) if task.has_verifier else []
    sourced = [("task", c) for c in own or []] + [(s, c) for s, c in checks._sourced()]
    fails = [
        FailedCheck(source=source, says=check.describe(), finding=outcome.finding)  # type: ignore[arg-type]
        for source, check in sourced
        if not (outcome := check.check(output)).passed
    ]
    if checks.schema is not None:
        _, errors = checks.schema.value(output)
        if errors:
            fails.append(FailedCheck(source="schema", says=checks.schema.record().says, finding="; ".join(errors[:5])))
    verdict, alone = await _verdict(run, output, finish_reason, opaque=own is None)
    if verdict is not None and verdict.passed is False and (alone or not fails):
        says = f"the {task.name} task's own check" if task.has_verifier else "the engine's check of every draft"
        fails.append(FailedCheck(source="task", says=says, finding=verdict.text))
    return fails


async def _verdict(
    run: RunContext, output: str, finish_reason: str | None, *, opaque: bool
) -> tuple[Verification | None, bool]:
    """The code's verdict on the output as the run's drafts get it (cached per draft), and
    whether it is the task's own verifier's alone: where that is code of its own and the run
    has checks besides, whose findings are named one by one."""
    if opaque and run.task.has_verifier and run.state.checks.active:
        own = await verify_in_thread(run.task, run.state.input, output, run.settings.calls.max_seconds, run.state.log)
        return own, True
    key = await run.board.check(output, finish_reason, run.checked)
    return run.board.checks.get(key), False
