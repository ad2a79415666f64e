"""Token probabilities of a llama.cpp reply, read from the logits as it is generated.

llama-cpp-python returns ``logprobs`` only from a model created with ``logits_all=True``,
which keeps the logits of every prompt position: 152k floats per token on Qwen, for every
call, asked or not. The distribution a reply's token is drawn from is only the last
position's, which llama.cpp computes anyway. :class:`TopRecorder` reads it for the calls
that ask: for the duration of one call it wraps the instance's ``sample`` (which
``Llama.generate`` calls once per generated token, right after computing the logits it
samples from), copies that position's logits, lets the unchanged sampler pick the token,
and records the token with the ``k`` most likely alternatives (a log-softmax over the
vocabulary). The sampler chain is not touched, so the reply is the one the call gives
without recording; a call that asks for no probabilities never meets the recorder.

The probabilities are the model's own (temperature 1, before any grammar or penalty), as
OpenAI's ``logprobs`` are.
"""

from __future__ import annotations

import math
from typing import Any

from .base import TokenChoices


class TopRecorder:
    """``with TopRecorder(llm, k) as rec: llm.create_completion(...)``; then ``rec.steps``:
    one :class:`TokenChoices` per sampled token, a closing end-of-turn token included."""

    def __init__(self, llm: Any, k: int) -> None:
        self.llm = llm
        self.k = max(0, int(k))
        self.steps: list[TokenChoices] = []

    def __enter__(self) -> TopRecorder:
        self._sample = self.llm.sample
        self.llm.sample = self._recorded  # this instance only, under the role's lock
        return self

    def __exit__(self, *exc: object) -> None:
        vars(self.llm).pop("sample", None)  # the class's method again

    def _recorded(self, *args: Any, idx: int | None = None, **kwargs: Any) -> int:
        logprobs = self._logprobs(-1 if idx is None else idx - self.llm.n_tokens)
        token = int(self._sample(*args, idx=idx, **kwargs))
        if logprobs is not None:
            self.steps.append(self._choices(logprobs, token))
        return token

    def _logprobs(self, row: int) -> Any:
        import numpy as np

        pointer = self.llm._ctx.get_logits_ith(row)
        if not pointer:
            return None
        logits = np.ctypeslib.as_array(pointer, shape=(self.llm.n_vocab(),)).astype(np.float64)
        top = logits.max()
        return logits - (top + math.log(np.exp(logits - top).sum()))

    def _choices(self, logprobs: Any, token: int) -> TokenChoices:
        import numpy as np

        k = min(self.k, len(logprobs))
        best = np.argpartition(-logprobs, k - 1)[:k].tolist() if k else []
        top: dict[str, float] = {}
        for i in sorted(best, key=lambda i: -logprobs[i]):
            piece = self._piece(i)
            # two tokens that read the same (e.g. bytes of one character): their text's probability
            top[piece] = float(np.logaddexp(top[piece], logprobs[i])) if piece in top else float(logprobs[i])
        return TokenChoices(token=self._piece(token), logprob=float(logprobs[token]), top=top)

    def _piece(self, token: int) -> str:
        return self.llm.detokenize([token], special=True).decode("utf-8", errors="replace")
