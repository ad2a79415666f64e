"""A request's ban (core/bans.py) as llama.cpp decodes it: every vocabulary token whose text
holds a forbidden character gets a logit of minus infinity, so it is never sampled.

The vocabulary's token texts are read once per model (0.4 s for Qwen's 152k tokens), and
each distinct ban's mask once (a boolean array; "no commas" masks 860 tokens, "no capital
letters" 36,149). Control tokens (end of turn) read as empty text and are never masked: a
reply can always end. Masking costs one vectorised assignment per generated token.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from ..core.bans import TokenBan

MAX_MASKS = 32  # distinct bans kept per model (a server sees each request's own)


class BanMasks:
    """The masks of one backend's model, built on first use; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pieces: list[str] | None = None
        self._masks: dict[TokenBan, np.ndarray] = {}

    def processor(self, llm: Any, ban: TokenBan) -> Any:
        """A ``LogitsProcessorList`` that refuses ``ban`` (for ``create_completion``)."""
        from llama_cpp import LogitsProcessorList

        mask = self.mask(llm, ban)

        def refuse(_ids: Any, scores: np.ndarray) -> np.ndarray:
            scores[mask[: len(scores)]] = -np.inf
            return scores

        return LogitsProcessorList([refuse])

    def mask(self, llm: Any, ban: TokenBan) -> np.ndarray:
        """Which of ``llm``'s tokens ``ban`` refuses (True: never sampled)."""
        with self._lock:
            found = self._masks.get(ban)
            if found is None:
                pieces = self._vocabulary(llm)
                found = np.fromiter((ban.refuses(p) for p in pieces), dtype=bool, count=len(pieces))
                self._masks[ban] = found
                while len(self._masks) > MAX_MASKS:
                    self._masks.pop(next(iter(self._masks)))
            return found

    def _vocabulary(self, llm: Any) -> list[str]:
        if self._pieces is None:
            # a byte-fallback token is part of a character: its text reads as U+FFFD, no letter
            self._pieces = [llm.detokenize([i]).decode("utf-8", "replace") for i in range(llm.n_vocab())]
        return self._pieces
