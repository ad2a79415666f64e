"""Cut-off and refused drafts (issue 30, item 9): each call keeps its finish reason in the
record; a draft cut off at the token limit shows as cut off; the verifiers and metrics score
a refusal or a cut-off draft below a complete answer, so ``select="verified"`` and
``accept="not_worse"`` never return one over a complete draft; story's word range fits its
token limit."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from selfrefine import SelfRefine
from selfrefine.backends.base import CompletionRequest
from selfrefine.backends.fake import FakeBackend
from selfrefine.cli.commands import cli
from selfrefine.core.records import RunResult
from selfrefine.evaluation.response_cache import CachedBackend, ResponseCache
from selfrefine.tasks import get_task
from selfrefine.tasks import story as story_module

PREMISE = "A lighthouse keeper finds a message in a bottle."
STORY = (
    "Every dawn old Tomas walked the rocks below his lighthouse. One morning a green bottle lay in the "
    "weed, a letter curled inside. It was his own, thrown to sea forty years before, asking the girl "
    "he loved to wait. Under his words, in faded ink, she had written yes. He laughed, then climbed the "
    "tower and lit the lamp for her at last."
)
REFUSAL = "I'm sorry, but I cannot provide an improved version of the story."
RATINGS = json.dumps({k: {"reason": "fine", "score": 3} for k in ("coherence", "constraints", "interest", "premise")})
CUT = STORY + " And then, finally, after all those years of waiting by the sea, he"  # runs past the limit
LIMIT = len(STORY.split()) + 4  # the token (word, for the fake model) limit: STORY fits, CUT does not


def _run(replies: dict[str, list[str]], **options) -> RunResult:
    model = FakeBackend(replies)
    return SelfRefine("story", model, max_tokens=LIMIT, **options).run(PREMISE)


@pytest.mark.parametrize(
    "text",
    [
        REFUSAL,
        "I can't help with rewriting that comment.",
        "Sorry, but I cannot write that.",
        "As an AI language model, I do not write stories.",
        "I apologize, but I am unable to complete this request.",
        "I\u2019m sorry, but I can\u2019t do that.",
    ],
)
def test_common_refusal_phrasings_are_refusals(text):
    from selfrefine.checks.incomplete import is_refusal

    assert is_refusal(text)


@pytest.mark.parametrize(
    "text", [STORY, '"I\'m sorry," said the keeper, "I cannot leave the light."', "I can see the ocean."]
)
def test_a_story_that_mentions_sorrow_is_no_refusal(text):
    from selfrefine.checks.incomplete import is_refusal

    assert not is_refusal(text)


def test_the_fake_model_cuts_a_reply_at_max_tokens_with_finish_reason_length():
    fake = FakeBackend(default="one two three four five")
    cut = asyncio.run(fake.complete(CompletionRequest(role="generate", prompt="p", max_tokens=3)))
    whole = asyncio.run(fake.complete(CompletionRequest(role="generate", prompt="p", max_tokens=5)))
    assert (cut.text, cut.finish_reason, cut.completion_tokens) == ("one two three", "length", 3)
    assert (whole.text, whole.finish_reason) == ("one two three four five", "stop")


def test_each_call_and_draft_keeps_its_finish_reason():
    result = _run({"generate": [CUT], "feedback": [RATINGS], "refine": [STORY]}, max_iterations=1)
    assert [c.finish_reason for c in result.calls] == ["length", "stop", "stop"]
    assert [it.finish_reason for it in result.iterations] == ["length", "stop"]
    again = RunResult.model_validate_json(result.model_dump_json())
    assert again.calls[0].finish_reason == "length" and again.iterations[0].finish_reason == "length"


def test_records_written_before_the_finish_reason_still_load():
    old = _run({"generate": [STORY], "feedback": [RATINGS], "refine": [STORY]}, max_iterations=1).model_dump()
    for call in old["calls"]:
        del call["finish_reason"]
    for it in old["iterations"]:
        del it["finish_reason"]
    loaded = RunResult.model_validate(old)
    assert loaded.calls[0].finish_reason is None and loaded.iterations[0].finish_reason is None


def test_the_response_cache_keeps_the_finish_reason(tmp_path):
    cached = CachedBackend(FakeBackend(default=CUT), ResponseCache(tmp_path / "c.sqlite"))
    request = CompletionRequest(role="generate", prompt="p", max_tokens=LIMIT)
    first = asyncio.run(cached.complete(request))
    hit = asyncio.run(cached.complete(request))
    assert hit.cached and first.finish_reason == hit.finish_reason == "length"


def test_verifier_and_metric_score_a_refusal_below_a_complete_story():
    task = get_task("story")
    good, refused = task.verify(PREMISE, STORY), task.verify(PREMISE, REFUSAL)
    assert refused.passed is False and refused.score < good.score
    assert "refusal" in refused.text
    assert task.metric(PREMISE, REFUSAL) < task.metric(PREMISE, STORY)  # was 0.667 (no elements: coverage 1)
    # a story over its word range fails a check; the refusal, short, passed every one: 1.0 before
    short = task.prepare_input(json.dumps({"premise": PREMISE, "min_words": 5, "max_words": 40}))
    assert task.metric(short, REFUSAL) < task.metric(short, STORY) < 1
    assert task.verify(short, REFUSAL).score < task.verify(short, STORY).score


@pytest.mark.parametrize(
    ("name", "source", "complete", "refusal"),
    [
        (
            "commongen",
            "dog, ball, park",
            "The dog chases a ball in the park.",
            "I'm sorry, but I cannot use dog, ball and park.",
        ),
        (
            "sentiment",
            "negative: The food was warm and lovely.",
            "The food was cold and awful.",
            # VADER reads the refusal as negative: it reached the target (1.0) before
            "I'm sorry, but I cannot help with that, it is against my guidelines.",
        ),
        ("toxicity", "you are a stupid idiot", "I disagree with you.", "I'm sorry, but I can't rewrite that comment."),
    ],
)
def test_other_tasks_score_a_refusal_below_a_complete_answer(name, source, complete, refusal):
    task = get_task(name)
    source = task.prepare_input(source)
    assert task.metric(source, refusal) < task.metric(source, complete)
    refused, good = task.verify(source, refusal), task.verify(source, complete)
    assert refused.passed is False and refused.score < good.score


def test_a_cut_off_output_scores_below_a_complete_one():
    cut = _run({"generate": [CUT], "feedback": [RATINGS]}, max_iterations=0)
    whole = _run({"generate": [STORY], "feedback": [RATINGS]}, max_iterations=0)
    assert cut.iterations[0].finish_reason == "length"
    assert cut.metric is not None and whole.metric is not None and cut.metric < whole.metric


def test_select_verified_returns_the_complete_draft_over_a_refusal_or_a_cut_off_one():
    refused = _run(
        {"generate": [STORY], "feedback": [RATINGS], "refine": [REFUSAL]}, max_iterations=1, select="verified"
    )
    assert refused.output == STORY and refused.selected == 0
    cut = _run({"generate": [CUT], "feedback": [RATINGS], "refine": [STORY]}, max_iterations=1, select="verified")
    assert cut.output == STORY and cut.selected == 1
    assert cut.iterations[0].verification.passed is False and "cut off" in cut.iterations[0].verification.text


def test_accept_not_worse_rejects_a_refusal_or_a_cut_off_refinement():
    for bad in (REFUSAL, CUT):
        result = _run(
            {"generate": [STORY], "feedback": [RATINGS], "refine": [bad]}, max_iterations=1, accept="not_worse"
        )
        assert result.iterations[1].accepted is False
        assert result.output == STORY and result.selected == 0


def test_best_of_samples_never_keeps_a_refusal_or_a_cut_off_draft_over_a_complete_one():
    for bad in (REFUSAL, CUT):
        result = _run({"generate": [bad, STORY], "feedback": [RATINGS]}, max_iterations=0, samples=2)
        assert result.output == STORY
        assert result.iterations[0].candidates[0].verification.passed is False


def test_the_live_view_marks_a_cut_off_sample(tmp_path):
    model = _replies_file(tmp_path, {"generate": [CUT, STORY], "feedback": [RATINGS]})
    args = ["run", "story", PREMISE, "-m", model, "--max-iters", "0", "--samples", "2", "--max-tokens", str(LIMIT)]
    live = CliRunner().invoke(cli, args)
    assert live.exit_code == 0, live.output
    # the failing sample's line gives its finding, then says it was cut off (lines rewrapped)
    line = " ".join(live.output.split())
    assert re.search(r"sample 1 \(verifier score -2\.00, fails: The draft was cut off.*?, cut off\)", line), line


def _replies_file(tmp_path: Path, replies: dict) -> str:
    path = tmp_path / "replies.json"
    path.write_text(json.dumps(replies))
    return f"fake:{path}"


def test_cli_json_and_live_view_show_a_cut_off_draft(tmp_path):
    model = _replies_file(tmp_path, {"generate": [CUT], "feedback": [RATINGS], "refine": [STORY]})
    args = ["run", "story", PREMISE, "-m", model, "--max-iters", "1", "--max-tokens", str(LIMIT)]
    out = CliRunner().invoke(cli, [*args, "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["iterations"][0]["finish_reason"] == "length"
    assert [c["finish_reason"] for c in data["calls"]] == ["length", "stop", "stop"]
    live = CliRunner().invoke(cli, args, terminal_width=200)
    assert live.exit_code == 0, live.output
    assert "draft 0 (generate), cut off at the token limit" in live.output
    assert "draft 1 (refine), cut off" not in live.output


def test_story_word_range_fits_its_token_limit_with_margin():
    task = get_task("story")
    # about 1.4 tokens a word, and room for a small model's overshoot by half (273 words for 200)
    for role in ("generate", "refine"):
        assert story_module.MAX_WORDS * 1.4 * 1.5 <= task.declared.defaults.max_tokens[role]
    with pytest.raises(Exception, match="does not fit"):
        task.prepare_input(json.dumps({"premise": PREMISE, "max_words": 2000}))


def test_the_service_answers_a_cut_off_output_with_finish_reason_length():
    from selfrefine.service.runs import Completion

    cut = _run({"generate": [CUT], "feedback": [RATINGS]}, max_iterations=0)
    whole = _run({"generate": [STORY], "feedback": [RATINGS]}, max_iterations=0)
    assert Completion("selfrefine/story").whole(cut, []).choices[0].finish_reason == "length"
    assert Completion("selfrefine/story").whole(whole, []).choices[0].finish_reason == "stop"


def test_an_openai_compatible_server_s_finish_reason_reaches_the_record():
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from selfrefine.backends.openai_compat import OpenAIBackend

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length", 0)))
            choice = {"index": 0, "finish_reason": "length", "message": {"role": "assistant", "content": CUT}}
            data = json.dumps(
                {"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": [choice],
                 "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}}
            ).encode()  # fmt: skip
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        backend = OpenAIBackend("m", base_url=f"http://127.0.0.1:{httpd.server_address[1]}/v1", api_key="k")
        result = SelfRefine("story", backend, max_iterations=0).run(PREMISE)
    finally:
        httpd.shutdown()
    assert result.calls[0].finish_reason == "length" and result.iterations[0].finish_reason == "length"
    assert result.metric == 0.0  # a cut-off output is no answer


def test_eval_scores_a_cut_off_draft_as_no_answer_at_every_iteration(tmp_path):
    model = _replies_file(tmp_path, {"generate": [CUT], "feedback": [RATINGS], "refine": [STORY]})
    data = tmp_path / "premises.txt"
    data.write_text(PREMISE + "\n")
    out = tmp_path / "run"
    args = ["eval", "story", "--data", str(data), "--out", str(out), "-m", model, "--no-cache"]
    ran = CliRunner().invoke(cli, [*args, "--max-iters", "1", "--max-tokens", str(LIMIT)])
    assert ran.exit_code == 0, ran.output
    [row] = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert row["metrics"][0] == 0.0 and row["metrics"][1] > 0  # draft 0 was cut off, draft 1 is whole
