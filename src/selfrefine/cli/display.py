"""Live terminal rendering of a run's steps with rich."""

from __future__ import annotations

from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.panel import Panel
from rich.text import Text

from ..checks.incomplete import cut_off
from ..core.records import (
    CallRecord,
    CallStep,
    ChecksStep,
    DecisionStep,
    DeltaStep,
    DraftStep,
    FeedbackStep,
    ProgressStep,
    ResultStep,
    RunResult,
    Step,
    StopReason,
)
from ..core.wording import feedback_text, output_standing, plural, score_note, typed_reply, verifier_note


class StepPrinter:
    """Prints each step as it arrives: draft panels, feedback panels, decisions, summary.

    ``live``: drafts and critiques are also shown while the model writes them (the
    :class:`DeltaStep` pieces of ``astream(..., deltas=True)``): on a terminal in a panel
    that grows in place and gives way to the step's own panel; elsewhere (a pipe, a file)
    as their title and then their text as it comes, before that panel."""

    def __init__(self, console: Console | None = None, *, metric_name: str | None = None, live: bool = False) -> None:
        self.console = console or Console(highlight=False)
        self.metric_name = metric_name  # what the task's metric measures, for the summary
        self.live = live
        self.writing: Writing | None = None

    def __call__(self, step: Step) -> None:
        if isinstance(step, DeltaStep):
            self._delta(step)
            return
        if self.writing is not None:
            self.writing.end()
            self.writing = None
        if isinstance(step, DraftStep):
            self._draft(step)
        elif isinstance(step, FeedbackStep):
            self._feedback(step)
        elif isinstance(step, DecisionStep):
            self._decision(step)
        elif isinstance(step, ChecksStep):
            self._checks(step)
        elif isinstance(step, ProgressStep):  # said as it starts: the wait that follows is not silent
            self.console.print(f"[magenta]{escape(step.text)}[/magenta]")
        elif isinstance(step, CallStep):
            call = step.call
            self.console.print(
                f"[dim]  {call.role} call (iteration {call.iteration}, attempt {call.attempt}) "
                f"failed: {escape(call.error or '')}[/dim]"
            )
        elif isinstance(step, ResultStep):
            self.summary(step.result)

    def _delta(self, step: DeltaStep) -> None:
        if not self.live:
            return
        if self.writing is None or self.writing.key != (step.role, step.iteration, step.attempt):
            if self.writing is not None:  # a retry of the call: its own block
                self.writing.end()
            self.writing = Writing(self.console, step)
        self.writing.add(step.text)

    def _draft(self, step: DraftStep) -> None:
        role = "generate" if step.iteration == 0 else "refine"
        cost = draft_cost(step)
        title = f"draft {step.iteration} ({role})"
        if len(step.candidates) > 1:
            title += f", best of {len(step.candidates)} samples"
        cut = step.call is not None and cut_off(step.call.finish_reason)
        if cut:
            title += ", cut off at the token limit"
        if step.focus is not None:  # a focused refinement: the check it was for, kept or why not
            form = "" if step.focus.form == "focused" else f"{step.focus.form}, "  # "(rewrite, try 1)"
            title += f", repair for {step.focus.check!r} ({form}try {step.focus.sample}): "
            title += "kept" if step.focus.kept else f"rejected: {step.focus.why}"
        elif not step.accepted:
            title += ", rejected: not better than the draft it refines"
        border = "red" if cut or not step.accepted else "cyan"
        self.console.print(Panel(Text(step.draft), title=title, subtitle=cost, border_style=border))
        for line in candidate_lines(step):
            self.console.print(line, highlight=False)

    def _feedback(self, step: FeedbackStep) -> None:
        fb = step.feedback
        if fb.source == "none":
            self.console.print("[dim]  (no feedback: ablation mode 'none')[/dim]")
            return
        notes = []
        if fb.total is not None:
            notes.append(score_note(fb))
        if fb.done is not None:
            notes.append(f"stop signal: {'yes' if fb.done else 'no'}")
        if fb.parse_error:
            notes.append(f"unparsed: {fb.parse_error}")
        title = f"feedback {step.iteration}" + (f" ({fb.source})" if fb.source != "model" else "")
        # typed (JSON) critiques read as their fields; an unparsed one is shown as it came
        body = Text(feedback_text(fb))
        self.console.print(Panel(body, title=title, subtitle=", ".join(notes), border_style="yellow"))

    def _checks(self, step: ChecksStep) -> None:
        """The checks every draft must pass besides the task's own, before the first draft."""
        lines = [f"{c.says}  [{c.source}]" for c in step.checks] or [
            "none: the request states no instruction code can check"
        ]
        if step.note:
            lines.append(f"({step.note})")
        cost = ""
        if step.call is not None:
            cost = f"{step.call.prompt_tokens}+{step.call.completion_tokens} tokens, {step.call.seconds:.1f}s"
        title = f"checks of every draft ({len(step.checks)})"
        self.console.print(Panel(Text("\n".join(lines)), title=title, subtitle=cost, border_style="magenta"))

    def _decision(self, step: DecisionStep) -> None:
        if step.stop:
            reason = step.reason.value if step.reason else "stop"
            self.console.print(f"[bold red]■ stop[/bold red]: {reason} — {escape(step.detail)}")
        else:
            note = f" [dim]({escape(step.detail)})[/dim]" if step.detail and step.detail != "refine" else ""
            self.console.print(f"[green]→ refine[/green]{note}")

    def summary(self, result: RunResult) -> None:
        u = result.usage
        self.console.rule("result")
        if result.output is not None:
            title = f"output (draft {result.selected})"
            if result.selected is not None and cut_off(result.iterations[result.selected].finish_reason):
                title = f"output (draft {result.selected}, cut off at the token limit)"
            self.console.print(Panel(Text(result.output), title=title, border_style="green"))
        if result.answer is not None:
            self.console.print(f"answer: [bold]{escape(result.answer)}[/bold]")
        if result.metric is not None:
            what = f" — {escape(self.metric_name)}" if self.metric_name else ""
            self.console.print(f"metric{what}: {result.metric:.3g}")
        if result.metric_error is not None:
            self.console.print(f"[yellow]metric failed: {escape(result.metric_error)}[/yellow]")
        self.console.print(
            f"stop reason: [bold]{result.stop_reason.value}[/bold]; {plural(len(result.iterations), 'draft')}; "
            f"{plural(u.calls, 'call')}, {u.prompt_tokens} prompt + {u.completion_tokens} completion tokens, "
            f"{u.seconds:.1f}s in model calls"
        )
        self.console.print(f"[dim]{escape(calls_by_role(result))}[/dim]")
        if result.fails is not None:  # the run had code checks: say where the output stands
            self.console.print(escape(output_standing(result.fails)))
        over = overspent(result)
        if over:
            self.console.print(f"[yellow]{escape(over)}[/yellow]")


class Writing:
    """One reply while the model writes it (see :class:`StepPrinter`)."""

    def __init__(self, console: Console, step: DeltaStep) -> None:
        self.console, self.key, self.text = console, (step.role, step.iteration, step.attempt), ""
        self.role, self.printed = step.role, 0  # printed: the characters of the text printed so far (a pipe)
        what = f"feedback {step.iteration}" if step.role == "feedback" else f"draft {step.iteration} ({step.role})"
        if step.sample is not None:  # one of the step's samples, not a retry
            self.title = f"{what}, sample {step.sample}, writing…"
        else:
            self.title = what + (f", attempt {step.attempt}" if step.attempt > 1 else "") + ", writing…"
        self.view: Live | None = None
        if console.is_terminal:
            self.view = Live(self._panel(), console=console, transient=True, refresh_per_second=10)
            self.view.start()
        else:
            console.print(f"[dim]{escape(self.title)}[/dim]")

    def add(self, text: str) -> None:
        self.text += text
        if self.view is not None:
            self.view.update(self._panel())
        else:
            shown = self._shown()
            self.console.print(shown[self.printed :], end="", markup=False, highlight=False, soft_wrap=True)
            self.printed = len(shown)

    def _shown(self) -> str:
        """The text as shown while it is written: a critique written as JSON is held back (its
        step's panel shows it read as its fields, not as raw JSON)."""
        return "" if self.role == "feedback" and typed_reply(self.text) is not False else self.text

    def end(self) -> None:
        if self.view is not None:
            self.view.stop()  # transient: the step's own panel takes its place
        else:
            self.console.print()

    def _panel(self) -> Panel:
        """The text so far, its last lines when it is taller than the terminal."""
        rows, shown = max(3, self.console.height - 4), self._shown()
        if not shown and self.text.strip():
            shown = f"(a structured critique, shown read when it is complete: {len(self.text)} characters so far)"
        lines = shown[-rows * max(20, self.console.width - 4) :].split("\n")[-rows:]
        return Panel(Text("\n".join(lines)), title=self.title, border_style="dim")


def candidate_lines(step: DraftStep) -> list[Text]:
    """One line per sample of a step: its verifier score, chosen or not, its text cut short."""
    lines = []
    for i, cand in enumerate(step.candidates, 1):
        check = cand.verification
        score = verifier_note(check, cand.way)
        if cand.call is not None and cut_off(cand.call.finish_reason):
            score += ", cut off"
        mark = "✓ chosen" if cand.chosen else "  lost  "
        first = " ".join(cand.draft.split())
        short = first if len(first) <= 60 else first[:59] + "…"
        lines.append(Text(f"  {mark} sample {i} ({score}): {short}", style="" if cand.chosen else "dim"))
    return lines


def draft_cost(step: DraftStep) -> str:
    """A draft panel's footer: what its own calls cost (one call, or all the step's samples;
    critiques and the judge's questions are in the result's line by role)."""
    calls = [c.call for c in step.candidates if c.call is not None] or ([step.call] if step.call else [])
    if not calls:
        return ""
    prompt, completion = sum(c.prompt_tokens for c in calls), sum(c.completion_tokens for c in calls)
    seconds = sum(c.seconds for c in calls)
    what = f"{len(calls)} samples: " if len(calls) > 1 else ""
    return f"{what}{prompt} prompt + {completion} completion tokens, {seconds:.1f}s"


def calls_by_role(result: RunResult) -> str:
    """The run's calls by role, with each role's model: ``by role: generate 4 calls, 1200
    tokens (embedded); judge 3 calls, 180 tokens (embedded)`` (the judge's model is the one
    that judged the drafts; the panels' footers are the drafts' own calls)."""
    roles: dict[str, list[CallRecord]] = {}
    for call in result.calls:
        roles.setdefault(call.role, []).append(call)
    parts = []
    for role, calls in roles.items():
        tokens = sum(c.prompt_tokens + c.completion_tokens for c in calls)
        models = ", ".join(dict.fromkeys(c.model for c in calls if c.model)) or "?"
        parts.append(f"{role} {plural(len(calls), 'call')}, {tokens} tokens ({models})")
    return "by role: " + "; ".join(parts) if parts else "no model calls"


def overspent(result: RunResult) -> str | None:
    """Said when a token budget ended the run above it: the budget is checked before each
    call, so the call in flight when it ran out finished and counts whole."""
    budget, used = result.config.max_total_tokens, result.usage.total_tokens
    if result.stop_reason is not StopReason.TOKEN_BUDGET or budget is None or used <= budget:
        return None
    return (
        f"The token budget was {budget} and the run used {used} ({used / budget:.1f}× the budget): a budget is "
        "checked before each call, so the call in flight when it ran out finished and counts whole."
    )
