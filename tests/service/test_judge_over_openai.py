"""The loop's judge against a real local OpenAI-compatible server on 127.0.0.1: where the
server returns token probabilities the judgment reads them; where it returns none, the judge
samples verdicts and the record says so; the run is never lost either way."""

from __future__ import annotations

import math

import pytest
from conftest import JsonServer, chat_completion

from selfrefine import SelfRefine
from selfrefine.backends.openai_compat import OpenAIBackend

REPLIES = {0: "Apple, which is a sweet and crunchy fruit that grows on trees.", 1: "Apple"}


class Judging(JsonServer):
    """Chat completions: a draft per seed, and a judge's one-token answer ("Yes" for the short
    reply, "No" for the long one), with top_logprobs only when ``gives``."""

    def __init__(self, gives: bool) -> None:
        super().__init__()
        self.gives = gives

    def answer(self, path: str, body: dict) -> tuple[int, dict]:
        prompt = body["messages"][-1]["content"]
        judged = "Answer Yes or No." in prompt
        if judged:
            yes = "Assistant reply:\nApple\n" in prompt
            p = 0.9 if yes else 0.2
            text = "Yes" if yes else "No"
            top = [
                {"token": "Yes", "logprob": math.log(p), "bytes": None},
                {"token": "No", "logprob": math.log(1 - p), "bytes": None},
            ]
            content = [
                {"token": text, "logprob": math.log(p if text == "Yes" else 1 - p), "bytes": None, "top_logprobs": top}
            ]
            logprobs = {"content": content} if self.gives and body.get("logprobs") else None
        else:
            text, logprobs = REPLIES[body.get("seed", 0) % 2], None
        choice = {
            "index": 0,
            "finish_reason": "stop",
            "message": {"role": "assistant", "content": text},
            "logprobs": logprobs,
        }
        usage = {"prompt_tokens": 40, "completion_tokens": 1 if judged else 8, "total_tokens": 41}
        return 200, chat_completion(choice, usage)

    def chunks(self, reply: dict):
        import json

        head = {"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "m"}
        text = reply["choices"][0]["message"]["content"]
        yield json.dumps({**head, "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": "stop"}]})
        yield json.dumps({**head, "choices": [], "usage": reply["usage"]})


@pytest.mark.parametrize("gives", [True, False], ids=["top_logprobs", "none"])
def test_the_judge_reads_the_servers_probabilities_or_samples_and_says_so(gives):
    server = Judging(gives)
    try:
        backend = OpenAIBackend("m", base_url=server.base_url, api_key="local")
        result = SelfRefine("chat", backend, samples=2, max_iterations=0).run("Name a fruit. Answer in one word.")
    finally:
        server.close()
    assert result.error is None and result.output == "Apple"
    kept = result.iterations[0].verification
    follows = kept.judgments[0]
    judge_bodies = [b for b in server.bodies if "Answer Yes or No." in b["messages"][-1]["content"]]
    probes = [b for b in judge_bodies if b.get("top_logprobs")]
    assert len(probes) == 4 and all(
        b["max_tokens"] == 1 and b["top_logprobs"] == 20 for b in probes
    )  # 2 texts × 2 aspects
    if gives:
        assert len(judge_bodies) == 4
        assert follows.method == "probabilities" and round(follows.score, 3) == 0.9 and follows.samples == 1
    else:
        assert follows.method == "sampled" and follows.samples == 5 and follows.score == 1.0
        assert "no token probabilities" in follows.note
        assert all(b["temperature"] == 1.0 for b in judge_bodies if not b.get("top_logprobs"))
    # besides the request's checks, derived once, only drafts and the judge's questions
    assert all(c.role in ("generate", "judge") or c.purpose == "checks" for c in result.calls)
