"""Token probabilities in the backend contract: ``CompletionRequest.top_logprobs`` asks for
them, ``CompletionResponse.top_logprobs`` carries them (None where the backend returned
none), and :func:`answer_probabilities` reads a closed question's answer from them.

The ``openai:`` backend talks through the real SDK to a real threaded ``http.server`` on
127.0.0.1 that plays a server returning logprobs, one returning none, and one refusing the
parameter; the embedded backend reads them from llama.cpp's logits (integration tests)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import time
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import JsonServer, chat_completion

from selfrefine.backends import FakeBackend, TokenChoices, answer_probabilities
from selfrefine.backends.base import CompletionRequest, CompletionResponse
from selfrefine.backends.openai_compat import OpenAIBackend
from selfrefine.core.errors import BackendError, ModelNotFoundError, TransientBackendError
from selfrefine.evaluation.response_cache import CachedBackend, ResponseCache


def choices(top: dict[str, float], token: str | None = None) -> TokenChoices:
    token = token if token is not None else max(top, key=top.__getitem__)
    return TokenChoices(token=token, logprob=top.get(token, -30.0), top=top)


def request(**kw: Any) -> CompletionRequest:
    return CompletionRequest(role="feedback", prompt=kw.pop("prompt", "Is it sensible? Answer Yes or No."), **kw)


# -- answer_probabilities -----------------------------------------------------------------


def test_yes_is_normalised_over_yes_and_no():
    got = answer_probabilities(choices({"Yes": -0.1, "No": -2.4, "Maybe": -3.0}), ["Yes", "No"])
    p_yes, p_no = math.exp(-0.1), math.exp(-2.4)
    assert got == pytest.approx({"Yes": p_yes / (p_yes + p_no), "No": p_no / (p_yes + p_no)})


def test_spellings_of_one_answer_add_up():
    top = {"Yes": math.log(0.3), " yes": math.log(0.1), "YES": math.log(0.1), "No": math.log(0.5)}
    assert answer_probabilities(choices(top), ["yes", "no"]) == pytest.approx({"yes": 0.5, "no": 0.5})


def test_surrounding_punctuation_is_ignored_but_longer_words_are_not_answers():
    top = {"yes.": math.log(0.2), "Yesterday": math.log(0.6), '"No': math.log(0.2)}
    assert answer_probabilities(choices(top), ["Yes", "No"]) == pytest.approx({"Yes": 0.5, "No": 0.5})


def test_an_answer_missing_from_the_alternatives_gets_zero():
    got = answer_probabilities(choices({"Yes": -1.0, "The": -0.5}), ["Yes", "No"])
    assert got == {"Yes": 1.0, "No": 0.0}


def test_no_answer_among_the_alternatives_is_none_not_a_guess():
    assert answer_probabilities(choices({"The": -0.1, "I": -2.0}), ["Yes", "No"]) is None


def test_minus_infinity_is_probability_zero():
    top = {"Yes": -math.inf, "No": -0.7}
    assert answer_probabilities(choices(top, "No"), ["Yes", "No"]) == {"Yes": 0.0, "No": 1.0}
    assert answer_probabilities(choices({"Yes": -math.inf, "No": -math.inf}, "No"), ["Yes", "No"]) is None


def test_a_tie_is_even():
    assert answer_probabilities(choices({"A": -0.7, "B": -0.7}), ["A", "B"]) == {"A": 0.5, "B": 0.5}


def test_the_chosen_token_counts_when_the_top_leaves_it_out():
    got = answer_probabilities(
        TokenChoices(token=" No", logprob=math.log(0.25), top={"Yes": math.log(0.75)}), ["Yes", "No"]
    )
    assert got == pytest.approx({"Yes": 0.75, "No": 0.25})


def test_a_rating_expected_value():
    top = {"1": math.log(0.05), "3": math.log(0.2), " 4": math.log(0.5), "5": math.log(0.25), "The": -1.0}
    got = answer_probabilities(choices(top), ["1", "2", "3", "4", "5"])
    assert sum(p * int(k) for k, p in got.items()) == pytest.approx(3.9)


@pytest.mark.parametrize("answers", [[], ["Yes", "yes"], ["Yes", " "]])
def test_answers_must_be_distinct_words(answers):
    with pytest.raises(ValueError, match="distinct"):
        answer_probabilities(choices({"Yes": -0.1}), answers)


# -- the contract: an unasked request is unchanged -----------------------------------------


def test_a_request_without_top_logprobs_keeps_its_cache_key():
    req = request(system="sys", seed=3, stop=["\n"])
    old_fields = ("role", "prompt", "system", "max_tokens", "temperature", "seed", "stop", "json_schema")
    before = {"model": "m", "request": {f: req.model_dump(mode="json")[f] for f in old_fields}}
    old_key = hashlib.sha256(json.dumps(before, sort_keys=True).encode()).hexdigest()
    assert ResponseCache.key("m", req) == old_key
    assert ResponseCache.key("m", req.model_copy(update={"top_logprobs": 5})) != old_key


def test_top_logprobs_is_bounded_like_the_api():
    with pytest.raises(ValueError):
        request(top_logprobs=21)
    with pytest.raises(ValueError):
        request(top_logprobs=-1)


def test_cached_answers_keep_their_probabilities(tmp_path):
    fake = FakeBackend(default={"text": "Yes", "top_logprobs": [{"Yes": -0.1, "No": -2.4}]})
    backend = CachedBackend(fake, ResponseCache(tmp_path / "c.sqlite"))
    first = asyncio.run(backend.complete(request(top_logprobs=2)))
    again = asyncio.run(backend.complete(request(top_logprobs=2)))
    assert again.cached and backend.hits == 1
    assert again.top_logprobs == first.top_logprobs and first.top_logprobs is not None
    plain = asyncio.run(backend.complete(request()))  # another request: a miss, no probabilities
    assert backend.misses == 2 and plain.top_logprobs is None


# -- the fake -------------------------------------------------------------------------------


def test_the_fake_returns_scripted_probabilities_cut_to_k():
    fake = FakeBackend([{"text": "Yes", "top_logprobs": [{"No": -2.4, "Yes": -0.1, "Maybe": -4.0}]}])
    got = asyncio.run(fake.complete(request(top_logprobs=2)))
    assert got.text == "Yes" and got.completion_tokens == 1
    assert got.top_logprobs == [TokenChoices(token="Yes", logprob=-0.1, top={"Yes": -0.1, "No": -2.4})]


def test_the_fake_gives_none_where_not_asked_or_not_scripted():
    fake = FakeBackend([{"text": "Yes", "top_logprobs": [{"Yes": -0.1}]}, "No"])
    assert asyncio.run(fake.complete(request())).top_logprobs is None  # not asked
    assert asyncio.run(fake.complete(request(top_logprobs=5))).top_logprobs is None  # a plain string


def test_the_fake_streams_a_reply_object():
    fake = FakeBackend(default=lambda req: {"text": "Yes indeed", "top_logprobs": [{"Yes": -0.2}, {" indeed": -0.5}]})
    pieces: list[str] = []
    got = asyncio.run(fake.stream(request(top_logprobs=1), pieces.append))
    assert "".join(pieces) == got.text == "Yes indeed"
    assert [c.token for c in got.top_logprobs] == ["Yes", " indeed"]


def test_a_replies_file_can_script_probabilities(tmp_path):
    path = tmp_path / "replies.json"
    reply = {"text": "No", "top_logprobs": [{"No": -0.05, "Yes": -3.2}]}
    path.write_text(json.dumps({"feedback": [reply], "table": {"onion": reply}, "default": reply}))
    fake = FakeBackend.from_file(path)
    got = asyncio.run(fake.complete(request(top_logprobs=5)))
    assert answer_probabilities(got.top_logprobs[0], ["Yes", "No"])["No"] > 0.9


@pytest.mark.parametrize(
    "reply",
    [{"text": "No", "top_logprobs": [{"No": "high"}]}, {"top_logprobs": []}, {"text": "No", "logprobs": []}],
)
def test_a_bad_reply_object_in_a_file_is_refused(tmp_path, reply):
    path = tmp_path / "replies.json"
    path.write_text(json.dumps({"replies": [reply]}))
    with pytest.raises(ModelNotFoundError, match="must be a list of reply strings"):
        FakeBackend.from_file(path)


# -- openai: against a real local server ---------------------------------------------------


class Server(JsonServer):
    """An OpenAI-compatible server of kind ``gives`` (logprobs as asked), ``none`` (never any),
    ``refuses`` (400 naming logprobs, as a server without them), ``fails`` (500 naming them)
    or ``too long`` (400 to all)."""

    def __init__(self) -> None:
        super().__init__()
        self.kind = "gives"

    TOKENS = [("Yes", -0.1, {"Yes": -0.1, "No": -2.4, " Yes": -5.0}), (".", -0.01, {".": -0.01, "!": -4.6})]

    def answer(self, path: str, body: dict) -> tuple[int, dict]:
        asked = "logprobs" in body or "top_logprobs" in body
        if self.kind == "too long":
            return 400, {"error": {"message": "the prompt is too long", "type": "invalid_request_error"}}
        if asked and self.kind == "refuses":
            return 400, {"error": {"message": "logprobs is not supported", "type": "invalid_request_error"}}
        if asked and self.kind == "fails":  # llama_cpp.server with logits_all=False
            message = "logprobs is not supported for models created with logits_all=False"
            return 500, {"error": {"message": message, "type": "internal_server_error"}}
        give = asked and self.kind == "gives"
        usage = {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11}
        if path.endswith("/completions") and "/chat/" not in path:
            k = body.get("logprobs") or 0
            logprobs = {
                "tokens": [t for t, _, _ in self.TOKENS],
                "token_logprobs": [lp for _, lp, _ in self.TOKENS],
                "top_logprobs": [dict(list(top.items())[:k]) for _, _, top in self.TOKENS],
                "text_offset": [0, 3],
            }
            choice = {"index": 0, "text": "Yes.", "finish_reason": "stop", "logprobs": logprobs if give else None}
            return 200, {
                "id": "x",
                "object": "text_completion",
                "created": 1,
                "model": "m",
                "choices": [choice],
                "usage": usage,
            }
        k = body.get("top_logprobs") or 0
        content = [
            {"token": t, "logprob": lp, "bytes": None,
             "top_logprobs": [{"token": a, "logprob": b, "bytes": None} for a, b in list(top.items())[:k]]}
            for t, lp, top in self.TOKENS
        ]  # fmt: skip
        choice = {
            "index": 0,
            "finish_reason": "stop",
            "message": {"role": "assistant", "content": "Yes."},
            "logprobs": {"content": content} if give else None,
        }
        return 200, chat_completion(choice, usage)

    def chunks(self, reply: dict) -> Iterator[str]:
        """The chat reply as a stream: one chunk per token, its logprobs with it; then usage."""
        head = {"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "m"}
        logprobs = reply["choices"][0]["logprobs"]
        for i, (token, _, _) in enumerate(self.TOKENS):
            lp = {"content": [logprobs["content"][i]]} if logprobs else None
            delta = {"index": 0, "delta": {"content": token}, "logprobs": lp, "finish_reason": None}
            yield json.dumps({**head, "choices": [delta]})
        yield json.dumps({**head, "choices": [], "usage": reply["usage"]})


@pytest.fixture(scope="module")
def _server() -> Iterator[Server]:
    srv = Server()
    yield srv
    srv.close()


@pytest.fixture
def server(_server: Server) -> Server:
    _server.bodies, _server.kind = [], "gives"
    return _server


def ask(backend: OpenAIBackend, *requests: CompletionRequest, streamed: bool = False) -> list[CompletionResponse]:
    async def go() -> list[CompletionResponse]:
        try:
            if streamed:
                return [await backend.stream(r, lambda _: None) for r in requests]
            return [await backend.complete(r) for r in requests]
        finally:
            await backend.aclose()

    return asyncio.run(go())


def test_openai_chat_asks_for_top_logprobs_and_maps_them(server):
    [got] = ask(OpenAIBackend("m", base_url=server.base_url), request(top_logprobs=2))
    assert (server.bodies[0]["logprobs"], server.bodies[0]["top_logprobs"]) == (True, 2)
    assert got.text == "Yes." and got.top_logprobs == [
        TokenChoices(token="Yes", logprob=-0.1, top={"Yes": -0.1, "No": -2.4}),
        TokenChoices(token=".", logprob=-0.01, top={".": -0.01, "!": -4.6}),
    ]
    assert answer_probabilities(got.top_logprobs[0], ["Yes", "No"])["Yes"] == pytest.approx(0.909, abs=1e-3)


def test_openai_request_without_top_logprobs_sends_nothing_new(server):
    [got] = ask(OpenAIBackend("m", base_url=server.base_url), request())
    assert "logprobs" not in server.bodies[0] and "top_logprobs" not in server.bodies[0]
    assert got.top_logprobs is None


def test_openai_completion_endpoint_asks_for_logprobs_k(server):
    [got] = ask(OpenAIBackend("m", base_url=server.base_url, api="completion"), request(top_logprobs=3))
    assert server.bodies[0]["logprobs"] == 3 and "top_logprobs" not in server.bodies[0]
    assert got.top_logprobs[0] == TokenChoices(token="Yes", logprob=-0.1, top={"Yes": -0.1, "No": -2.4, " Yes": -5.0})


def test_openai_streamed_reply_carries_its_probabilities(server):
    [got] = ask(OpenAIBackend("m", base_url=server.base_url), request(top_logprobs=2), streamed=True)
    assert server.bodies[0]["stream"] is True and server.bodies[0]["top_logprobs"] == 2
    assert got.text == "Yes." and [c.token for c in got.top_logprobs] == ["Yes", "."]
    assert got.top_logprobs[0].top == {"Yes": -0.1, "No": -2.4}


def test_a_server_that_returns_none_gives_none(server):
    server.kind = "none"
    for streamed in (False, True):
        [got] = ask(OpenAIBackend("m", base_url=server.base_url), request(top_logprobs=5), streamed=streamed)
        assert got.text == "Yes." and got.top_logprobs is None


@pytest.mark.parametrize("kind", ["refuses", "fails"])
def test_a_server_that_refuses_logprobs_answers_without_them_from_then_on(server, kind):
    server.kind = kind
    first, second = ask(OpenAIBackend("m", base_url=server.base_url), request(top_logprobs=5), request(top_logprobs=5))
    assert [("logprobs" in b) for b in server.bodies] == [True, False, False]
    assert (first.text, first.top_logprobs, second.top_logprobs) == ("Yes.", None, None)


def test_a_refusal_for_another_reason_is_still_an_error(server):
    server.kind = "too long"
    with pytest.raises(BackendError, match=r"refused \(400\): the prompt is too long"):
        ask(OpenAIBackend("m", base_url=server.base_url), request(top_logprobs=5))
    assert len(server.bodies) == 1  # not asked again without logprobs


def test_malformed_logprobs_are_a_malformed_response(server, monkeypatch):
    monkeypatch.setattr(Server, "TOKENS", [("Yes", "high", {"Yes": -0.1})])
    with pytest.raises(TransientBackendError, match="malformed"):
        ask(OpenAIBackend("m", base_url=server.base_url), request(top_logprobs=1))


# -- embedded: read from llama.cpp's logits ------------------------------------------------

SENSE = "Does this sentence describe something that makes sense and could really happen? Answer Yes or No."
NONSENSE = "The chef chopped an onion, and the knife cried loudly as it was cut."
SENSIBLE = "In the kitchen, the chef used a knife to cut the onion."


@pytest.mark.integration
def test_embedded_probabilities_are_llama_cpps_own(smollm):
    """The recorder's top-k equals llama-cpp-python's own logprobs (``logits_all=True``);
    asking for them changes neither the reply nor streaming."""
    from llama_cpp import Llama

    req = CompletionRequest(role="generate", prompt="Name three fruits:", max_tokens=4, top_logprobs=5)
    got = asyncio.run(smollm.complete(req))
    plain = asyncio.run(smollm.complete(req.model_copy(update={"top_logprobs": None})))
    assert plain.text == got.text and plain.top_logprobs is None and len(got.top_logprobs) >= 4
    pieces: list[str] = []
    streamed = asyncio.run(smollm.stream(req, pieces.append))
    assert "".join(pieces) == streamed.text == got.text
    assert [c.token for c in streamed.top_logprobs] == [c.token for c in got.top_logprobs]
    llm = smollm._instance("generate")[0]
    tokens, stop = smollm._prompt_tokens(llm, req)
    ref = Llama(model_path=str(smollm.model_path), n_ctx=512, logits_all=True, verbose=False)
    try:
        out = ref.create_completion(prompt=tokens, max_tokens=4, temperature=0.0, stop=stop, logprobs=5)
    finally:
        ref.close()
    expected = out["choices"][0]["logprobs"]["top_logprobs"]
    for mine, theirs in zip(got.top_logprobs, expected, strict=False):
        assert set(mine.top) <= set(theirs)  # theirs adds the chosen token where it is not in the top
        for token, logprob in mine.top.items():
            assert logprob == pytest.approx(theirs[token], abs=1e-4)


@pytest.mark.integration
def test_embedded_judge_scores_the_sensible_sentence_higher(embedded):
    def p_yes(sentence: str) -> float:
        req = CompletionRequest(
            role="feedback", prompt=f"{SENSE}\n\nSentence: {sentence}", max_tokens=1, top_logprobs=20
        )
        start = time.perf_counter()
        got = asyncio.run(embedded.complete(req))
        p = answer_probabilities(got.top_logprobs[0], ["Yes", "No"])
        print(
            f"P(yes)={p['Yes']:.3f} {time.perf_counter() - start:.2f}s {got.prompt_tokens}+{got.completion_tokens} tokens: {sentence}"
        )
        return p["Yes"]

    assert p_yes(SENSIBLE) > 0.8 > 0.5 > p_yes(NONSENSE)


@pytest.mark.integration
@pytest.mark.server
def test_a_real_llama_cpp_server_returns_top_logprobs(llama_server):
    """``python -m llama_cpp.server`` (SmolLM2; ``logits_all`` is its default) returns
    logprobs on both endpoints, mapped one record per generated token."""
    req = request(prompt="Is the sky blue? Answer Yes or No.", max_tokens=2, top_logprobs=5)
    [chat] = ask(OpenAIBackend("smollm2", base_url=llama_server.base_url), req)
    req = req.model_copy(update={"prompt": "The capital of France is"})
    [plain] = ask(OpenAIBackend("smollm2", base_url=llama_server.base_url, api="completion"), req)
    for got in (chat, plain):
        assert len(got.top_logprobs) == got.completion_tokens
        first = got.top_logprobs[0]
        assert len(first.top) >= 5 and got.text.startswith(first.token)
        assert first.top[first.token] == pytest.approx(first.logprob) and max(first.top.values()) <= 0.0
