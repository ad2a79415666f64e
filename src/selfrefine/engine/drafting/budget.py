"""The auto strategy's view of a run's token budget: what is left, and what the next calls
will cost (:class:`~.strategy.Costs`), estimated from the run's own call log."""

from __future__ import annotations

from ..context import RunContext
from .auto_rule import Costs


class TokenBudget:
    """The run's ``max_total_tokens`` as the auto strategy spends it."""

    def remaining(self, run: RunContext) -> float:
        """Tokens the budget has left."""
        return (run.settings.calls.max_total_tokens or 0) - run.state.log.tokens()

    def affords_critiques(self, run: RunContext, critiques: int) -> bool:
        """Whether ``critiques`` more critiques fit in what is left."""
        return self.remaining(run) >= self.costs(run).critique * critiques

    def affords_judgments(self, run: RunContext, questions: int) -> bool:
        """Whether ``questions`` judge questions fit in what is left (each priced as a
        critique: its prompt holds a draft; its one-token answer is priced high, to be safe)."""
        return self.remaining(run) >= self.costs(run).critique * questions

    def costs(self, run: RunContext, prompt: str | None = None) -> Costs:
        """The next calls' tokens: the latest call of each kind plus what the history grew by
        since (the draft and critique a round adds); before a kind's first call, from the
        calls its prompt would hold (a critique reads a draft, a refinement the critique).
        A rendered refinement ``prompt`` is priced by its length, at the generate prompt's
        tokens per character (the refine template can be twice the generate one). A call made
        for a purpose of its own (the derivation of a request's checks: a feedback call with a
        long prompt of its own) prices no round's critique or sample."""
        ok = [c for c in run.state.log.calls if c.ok and c.purpose is None]
        latest = {c.role: c for c in ok}  # the last call of each role
        drafts = [c.completion_tokens for c in ok if c.role in ("generate", "refine")]
        written = sum(drafts) / len(drafts) if drafts else 0.0
        gen, fb, ref = latest.get("generate"), latest.get("feedback"), latest.get("refine")
        first = float(gen.prompt_tokens + gen.completion_tokens) if gen else 0.0
        said = fb.completion_tokens if fb else 0
        if fb is not None:
            critique = fb.prompt_tokens + fb.completion_tokens + written + said
        else:  # its prompt holds the draft; its reply is about a draft's length
            critique = first + written
        if ref is not None:
            sample = ref.prompt_tokens + ref.completion_tokens + written + said
        else:  # its prompt holds the critique's prompt and reply
            sample = critique + written
        if prompt is not None and gen is not None:
            per_char = gen.prompt_tokens / max(1, run.state.first_prompt_chars)
            sample = max(sample, per_char * len(prompt) + written)
        return Costs(sample=sample, critique=critique, draft=first or None)
