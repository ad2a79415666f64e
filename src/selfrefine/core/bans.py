"""Token bans: what a check forbids outright, refused at decoding where the backend can.

A check such as "use no commas" or "use only capital letters" forbids characters. A 1.5B
model asked to remove commas kept them in 22 of 29 sentences (issue 45's probe), but a
decoder that never samples a token holding one writes none at all. A check says what it
forbids (``Instruction.ban``); a run with ``ban_tokens`` on sends the union of its checks'
bans with each draft's request (``CompletionRequest.ban``), and the llama.cpp backend masks
every vocabulary token that holds a forbidden character. A backend that cannot (an OpenAI
endpoint's ``logit_bias`` takes 300 tokens, too few for a character class over a 152k
vocabulary) asks by the prompt alone; the checks verify the reply either way.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict

Letters = Literal["upper", "lower"]


class TokenBan(BaseModel):
    """Characters no token of a reply may hold: ``chars`` literally, and with ``letters``
    every letter of that case ("upper": no capital letters, for "write in lowercase")."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    chars: str = ""
    letters: Letters | None = None

    def refuses(self, piece: str) -> bool:
        """Whether a token whose text is ``piece`` is never sampled under this ban."""
        if any(c in self.chars for c in piece):
            return True
        if self.letters == "upper":
            return any(c.isupper() or c.istitle() for c in piece)
        if self.letters == "lower":
            return any(c.islower() for c in piece)
        return False


def joined(bans: Iterable[TokenBan | None]) -> TokenBan | None:
    """Every ban at once (None: nothing banned). Letter cases that contradict each other
    (one check asks for lowercase, another for capitals) ban neither: the checks then
    decide, as they would without bans."""
    given = [b for b in bans if b is not None]
    if not given:
        return None
    chars = "".join(sorted({c for b in given for c in b.chars}))
    cases = {b.letters for b in given if b.letters is not None}
    letters = cases.pop() if len(cases) == 1 else None
    if not chars and letters is None:
        return None
    return TokenBan(chars=chars, letters=letters)
