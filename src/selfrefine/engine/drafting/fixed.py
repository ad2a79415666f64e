"""``strategy="fixed"`` (the default): the same number of samples every step — one, the
paper's loop (:class:`~.one.OneDraft`), or ``samples`` K, the best of K by the task's
verifier or judge (:class:`~.best_of.BestOfK`), by votes on an answer task
(:class:`~.voting.Votes`)."""

from __future__ import annotations

from ..settings import Settings
from .base import Drafter, Strategy
from .best_of import BestOfK
from .one import OneDraft
from .voting import Votes


class Fixed(Strategy):
    """``samples`` drafts each step (1: the paper's loop)."""

    name = "fixed"
    summary = "the same number of samples every step (--samples, 1 by default: the paper's loop)"

    def drafter(self, settings: Settings) -> Drafter:
        sampling = settings.sampling
        if not sampling.several:
            return OneDraft()
        return Votes(sampling.samples) if sampling.votes else BestOfK(sampling.samples)
