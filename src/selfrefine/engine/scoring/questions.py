"""Judgments: closed questions answered as the model's probabilities, not one sample.

A :class:`Questions` asks a question whose answer is one token — "Yes"/"No", a rating "1".."5",
"A"/"B" — with one prefill and one decoded token, and reads how much probability the model
puts on each answer (``CompletionRequest.top_logprobs``;
:func:`~selfrefine.backends.probabilities.answer_probabilities`). A sampled "NONE" or "7/10"
throws that away: on the default model, one such question ranks the sensible sentence of
a pair above the nonsensical one far more often than the critic's sampled verdict does.

- the score of a yes/no question is P(yes); of a rating, its expected value Σ p(k)·k
  (G-Eval); of a comparison, P(the first text is better), asked in both orders and
  averaged, and a verdict that flips with the order is a tie (0.5): small judges favour a
  position;
- where a backend returns no probabilities (a server without ``logprobs``), or none of the
  answers is among the likely tokens, the judgment is the share of ``samples`` sampled
  verdicts, and says so (``method="sampled"``, ``note``);
- every judgment is a :class:`~selfrefine.core.records.Judgment`, and its calls are the
  run's own (:class:`~.calls.Caller`: budgets, retries, records).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from ...backends.base import CompletionRequest
from ...backends.probabilities import answer_key, answer_probabilities
from ...core.errors import ParseError
from ...core.records import Judgment, Role
from ...core.seeds import JUDGE_SEED
from ..calls import Caller

YES_NO = ("Yes", "No")
TOP_LOGPROBS = 20  # alternatives read at the answer token (OpenAI's maximum)
SAMPLED_VERDICTS = 5  # verdicts sampled where no probabilities come back


@dataclass(frozen=True)
class Question:
    """A rendered closed question: its answers, and for a rating the value of each."""

    name: str
    prompt: str
    answers: tuple[str, ...] = YES_NO
    values: tuple[float, ...] | None = None  # a rating: the score is Σ p(answer)·value

    @classmethod
    def rating(cls, name: str, prompt: str, scale: int = 5) -> Question:
        """A rating from 1 to ``scale``, scored by its expected value."""
        return cls(
            name, prompt, tuple(str(k) for k in range(1, scale + 1)), tuple(float(k) for k in range(1, scale + 1))
        )


class Questions:
    """Asks closed questions through a run's caller, as ``role`` (the judging model's)."""

    def __init__(
        self, caller: Caller, role: Role = "feedback", *, system: str | None = None, samples: int = SAMPLED_VERDICTS
    ) -> None:
        self.caller, self.role, self.system, self.samples = caller, role, system, samples

    async def ask(self, t: int, question: Question) -> Judgment:
        """One question, answered by the probabilities of its answer tokens (or sampled)."""
        request = CompletionRequest(
            role=self.role,
            prompt=question.prompt,
            system=self.system,
            max_tokens=1,
            temperature=0.0,
            seed=JUDGE_SEED,
            top_logprobs=TOP_LOGPROBS,
        )
        [(response, call)] = await self.caller.call(self.role, t, request)
        steps = response.top_logprobs
        probabilities = answer_probabilities(steps[0], question.answers) if steps else None
        if probabilities is not None:
            return _judgment(question, probabilities)
        why = "the backend returned no token probabilities" if not steps else "no answer was among the likely tokens"
        if self.caller.tokens_left() < self.samples * (call.prompt_tokens + 3):
            raise ParseError(f"{why}, and {self.samples} sampled verdicts would overrun the token budget")
        return await self._sampled(t, question, request, why)

    async def compare(self, t: int, name: str, first_shown_first: str, second_shown_first: str) -> Judgment:
        """Whether text X beats text Y: ``first_shown_first`` shows X as A and Y as B,
        ``second_shown_first`` the other way round; the score is P(X is better), averaged
        over both orders, 0.5 when the verdict flips with the order."""
        ab = await self.ask(t, Question(f"{name}: A vs B", first_shown_first, ("A", "B")))
        ba = await self.ask(t, Question(f"{name}: B vs A", second_shown_first, ("A", "B")))
        x_first, x_second = ab.answers["A"], ba.answers["B"]
        flipped = (x_first > 0.5) != (x_second > 0.5) and 0.5 not in (x_first, x_second)
        score = 0.5 if flipped else (x_first + x_second) / 2
        notes = [n for n in (ab.note, ba.note) if n]
        if flipped:
            notes.append(f"the verdict flipped with the order ({x_first:.2f} and {x_second:.2f}): a tie")
        sampled = "sampled" in (ab.method, ba.method)
        return Judgment(
            question=name,
            answers={"first": score, "second": 1.0 - score},
            score=score,
            method="sampled" if sampled else "probabilities",
            samples=ab.samples + ba.samples,
            note="; ".join(notes),
        )

    async def _sampled(self, t: int, question: Question, request: CompletionRequest, why: str) -> Judgment:
        """The share of sampled verdicts that give each answer (a reply's first word)."""
        sampling = request.model_copy(update={"temperature": 1.0, "max_tokens": 3, "top_logprobs": None})
        replies = await self.caller.call(self.role, t, sampling, self.samples)
        keys = {answer_key(a): a for a in question.answers}
        said = [keys.get(answer_key((r.text.split() or [""])[0])) for r, _ in replies]
        counts = Counter(a for a in said if a is not None)
        if not counts:
            shown = ", ".join(repr(r.text[:20]) for r, _ in replies)
            raise ParseError(f"the judge answered none of {'/'.join(question.answers)} ({why}; it said {shown})")
        total = sum(counts.values())
        probabilities = {a: counts[a] / total for a in question.answers}
        note = f"{why}: {total} of {len(replies)} sampled verdicts"
        return _judgment(question, probabilities, method="sampled", samples=len(replies), note=note)


def _judgment(question: Question, probabilities: dict[str, float], **extra: object) -> Judgment:
    if question.values is not None:
        score = sum(probabilities[a] * v for a, v in zip(question.answers, question.values, strict=True))
    else:
        score = probabilities[question.answers[0]]
    return Judgment(question=question.name, answers=probabilities, score=score, **extra)  # type: ignore[arg-type]
