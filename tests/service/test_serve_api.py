"""``selfrefine serve``: where the refinement trace goes (``reasoning_content``, ``think`` or
``none``), shown by real clients (the ``openai`` SDK and simonw's ``llm``), the errors a
malformed request gets, and ``serve`` on a busy port. Real servers on 127.0.0.1; the model
is the in-package fake."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx2
import openai
import pytest
import test_serve
from click.testing import CliRunner
from test_serve import COMMONGEN, error_of, user

from selfrefine import FakeBackend
from selfrefine.cli import cli

serve = test_serve.serve  # the real-server fixture
FINAL = "Here dog and ball and park meet."  # the fake writer's refined sentence


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- malformed requests ---------------------------------------------------------------------


def test_malformed_json_body_says_what_is_wrong_not_an_offset(serve):
    served = serve()
    body = b'{"model": "selfrefine/commongen",\n "messages": [}'
    reply = httpx2.post(f"{served.url}/v1/chat/completions", content=body, headers={"content-type": "application/json"})
    assert reply.status_code == 400
    error = reply.json()["error"]
    assert error["param"] is None  # was "48": a character offset, no parameter at all
    assert error["code"] == "invalid_json"
    assert error["message"].startswith("the request body is not valid JSON: ")
    assert "line 2 column 15" in error["message"], error["message"]


@pytest.mark.parametrize("endpoint", ["chat", "refine"])
def test_unknown_option_lists_the_valid_ones(serve, endpoint):
    served = serve()
    if endpoint == "chat":
        body = {"model": COMMONGEN, "messages": user("dog, ball"), "selfrefine": {"max_iters": 1}}
    else:
        body = {"task": "commongen", "input": "dog, ball", "options": {"max_iters": 1}}
    reply = httpx2.post(f"{served.url}/v1/{'chat/completions' if endpoint == 'chat' else 'refine'}", json=body)
    assert reply.status_code == 400
    error = reply.json()["error"]
    assert error["code"] == "unknown_option"
    assert error["param"] == ("selfrefine" if endpoint == "chat" else "options") + ".max_iters"
    message = error["message"]
    assert "max_iters" in message and "valid options:" in message, message
    assert "(did you mean 'max_iterations'?)" in message.split("valid options:")[0], message
    for valid in ("max_iterations", "select", "history", "feedback_mode", "max_total_tokens"):
        assert valid in message.split("valid options:")[1]
    assert served.fake.requests == []


@pytest.mark.parametrize(
    ("asked", "meant"),
    [("max_iters", "max_iterations"), ("budget_tokens", "max_total_tokens"), ("budget-seconds", "max_seconds"),
     ("sample", "samples")],
)  # fmt: skip
def test_an_unknown_option_through_the_sdk_is_a_400_that_names_the_one_meant(serve, asked, meant):
    # the CLI's spellings (max_iters, budget_tokens) name the library's option; other slips the closest one
    served = serve()
    with pytest.raises(openai.BadRequestError) as caught:
        served.client(max_retries=0).chat.completions.create(
            model=COMMONGEN, messages=user("dog, ball"), extra_body={"selfrefine": {asked: 1}}
        )
    error = error_of(caught.value)
    assert error["message"].startswith(f"unknown option {asked!r} in selfrefine (did you mean {meant!r}?); "), error
    assert error["param"] == f"selfrefine.{asked}" and served.fake.requests == []


def test_unknown_refine_field_lists_the_valid_ones(serve):
    served = serve()
    reply = httpx2.post(f"{served.url}/v1/refine", json={"task": "commongen", "text": "dog, ball"})
    assert reply.status_code == 400
    message = reply.json()["error"]["message"]
    assert "text" in message and "input" in message.split("valid fields:")[1], message


@pytest.mark.parametrize("endpoint", ["chat", "refine"])
def test_a_bad_ways_is_400_naming_it_before_any_model_call(serve, endpoint):
    served = serve()
    ways = ["program", "program"]
    if endpoint == "chat":
        body = {"model": COMMONGEN, "messages": user("dog, ball"), "selfrefine": {"ways": ways}}
    else:
        body = {"task": "commongen", "input": "dog, ball", "options": {"ways": ways}}
    reply = httpx2.post(f"{served.url}/v1/{'chat/completions' if endpoint == 'chat' else 'refine'}", json=body)
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error["param"] == ("selfrefine" if endpoint == "chat" else "options") + ".ways"
    assert error["message"] == f"{error['param']}: way 'program' is named twice"
    assert served.fake.requests == []


def test_a_way_the_task_lacks_is_400_and_a_way_it_has_reaches_the_run(serve):
    programs = FakeBackend({"generate": ["def solution():\n    return 18", "The answer is 18."]})
    served = serve(programs, allow_code_tasks=True)
    options = {"samples": 2, "max_iterations": 0, "ways": ["program", "steps"]}
    body = {"task": "gsm8k", "input": "Nine twice?", "options": options}
    bad = httpx2.post(f"{served.url}/v1/refine", json={**body, "options": {**body["options"], "ways": ["prose"]}})
    assert bad.status_code == 400, bad.text
    assert "task 'gsm8k' has no way 'prose': its ways are program, steps, quantities" in bad.json()["error"]["message"]
    assert served.fake.requests == []
    good = httpx2.post(f"{served.url}/v1/refine", json=body)
    assert good.status_code == 200, good.text
    # both ways asked (program prompt, then the step-by-step one) and agreeing on 18
    prompts = [r.prompt for r in served.fake.requests]
    assert ["The answer is N." in p for p in prompts] == [False, True]
    assert good.json()["answer"] == "18"


# -- serve on a busy port -------------------------------------------------------------------


def test_serve_on_a_busy_port_fails_with_one_line_and_no_banner():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = CliRunner().invoke(
            cli, ["serve", "--model", "fake", "--port", str(port)], env={"SELFREFINE_API_KEY": None}
        )
    assert result.exit_code != 0
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1, result.output  # was: the "serve: http://…" banner, then uvicorn's log
    assert lines[0].startswith("Error:") and f"127.0.0.1:{port}" in lines[0] and "in use" in lines[0]


# -- where the trace goes -------------------------------------------------------------------


def _stream(client: openai.OpenAI, **kw) -> tuple[str, str]:
    """(content, reasoning_content) of a streamed completion."""
    content, reasoning = [], []
    for chunk in client.chat.completions.create(model=COMMONGEN, messages=user("dog, ball, park"), stream=True, **kw):
        if chunk.choices:
            content.append(chunk.choices[0].delta.content or "")
            reasoning.append(getattr(chunk.choices[0].delta, "reasoning_content", None) or "")
    return "".join(content), "".join(reasoning)


def _assert_trace(text: str) -> None:
    assert "### Draft 0 (first answer)\nHere dog and ball meet." in text
    assert "missing concepts: park" in text  # the JSON critique read as text (a stream also shows it as written)
    assert "refine draft 0" in text and "stop (feedback)" in text
    assert f"### Draft 1 (refined)\n{FINAL}" in text


@pytest.mark.parametrize("stream", [False, True])
def test_think_puts_the_trace_in_content(serve, stream):
    client = serve(reasoning_format="think").client()
    if stream:
        content, reasoning = _stream(client)
    else:
        message = client.chat.completions.create(model=COMMONGEN, messages=user("dog, ball, park")).choices[0].message
        content, reasoning = message.content, getattr(message, "reasoning_content", None) or ""
    assert reasoning == ""
    assert content.startswith("<think>\n### Draft 0")
    thought, answer = content.split("</think>\n\n")
    _assert_trace(thought)
    assert answer == FINAL


@pytest.mark.parametrize("stream", [False, True])
def test_the_request_chooses_where_the_trace_goes(serve, stream):
    client = serve().client()  # the server's default: reasoning_content
    for where in ("reasoning_content", "think", "none"):
        body = {"reasoning_format": where}
        if stream:
            content, reasoning = _stream(client, extra_body=body)
        else:
            message = (
                client.chat.completions.create(model=COMMONGEN, messages=user("dog, ball, park"), extra_body=body)
                .choices[0]
                .message
            )
            content, reasoning = message.content, getattr(message, "reasoning_content", None) or ""
        if where == "reasoning_content":  # a plain reply carries it too, not only in 'selfrefine'
            _assert_trace(reasoning)
            assert content == FINAL
        elif where == "think":
            assert reasoning == "" and content.startswith("<think>") and content.endswith("</think>\n\n" + FINAL)
        else:
            assert (content, reasoning) == (FINAL, "")


def test_an_unknown_reasoning_format_is_400_naming_the_valid_ones(serve):
    client = serve().client()
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(
            model=COMMONGEN, messages=user("dog"), extra_body={"reasoning_format": "deepseek"}
        )
    message = error_of(caught.value)["message"]
    assert "reasoning_format" in message and "'think'" in message and "'none'" in message, message


def test_serve_reasoning_format_option_is_in_help():
    result = CliRunner().invoke(cli, ["serve", "--help"])
    assert "--reasoning-format" in result.output and "think" in result.output


# -- simonw's llm, which ignores reasoning_content --------------------------------------------


@pytest.fixture
def selfrefine_serve(tmp_path: Path) -> Iterator[str]:
    """A real ``selfrefine serve --reasoning-format think`` child on the fake model (a
    writer whose critic never parses, so the trace holds a draft, a critique, a refinement)."""
    port = _free_port()
    command = [
        str(Path(sys.executable).with_name("selfrefine")),
        "serve",
        "--model",
        "fake",
        "-o",
        "reply=A dog catches a ball in the park.",
        "--port",
        str(port),
        "--max-iters",
        "1",
        "--reasoning-format",
        "think",
        "--log-level",
        "warning",
    ]
    env = {**os.environ, "SELFREFINE_API_KEY": ""}
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        test_serve.wait_until_serving(proc, port)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        proc.communicate(timeout=20)


def test_llm_shows_the_refinement_with_think(selfrefine_serve, tmp_path):
    pytest.importorskip("llm", reason="simonw's llm is in the test extra")
    from llm.cli import cli as llm

    home = tmp_path / "llm"
    home.mkdir()
    (home / "extra-openai-models.yaml").write_text(
        f'- model_id: selfrefine-chat\n  model_name: selfrefine/chat\n  api_base: "{selfrefine_serve}"\n'
        "  can_stream: true\n",
        encoding="utf-8",
    )
    env = {"LLM_USER_PATH": str(home), "OPENAI_API_KEY": ""}

    def run(*args: str) -> str:
        # llm's own command line, in this process (its imports once, not per command)
        done = CliRunner().invoke(llm, list(args), env=env, catch_exceptions=False)
        assert done.exit_code == 0, done.output
        return done.stdout

    for flags in ([], ["--no-stream"]):
        shown = run("-m", "selfrefine-chat", *flags, "Say hello to a dog.")
        # no instruction stated, none shown: the trace opens with the first draft, and no
        # derivation call was made (nothing in the request reads as an instruction)
        opening = "<think>\n### Draft 0 (first answer)\nA dog catches a ball in the park."
        assert shown.startswith(opening), shown
        assert "### Feedback on draft 0" in shown and "→ stop" in shown
        assert shown.rstrip().endswith("</think>\n\nA dog catches a ball in the park."), shown
    logged = json.loads(run("logs", "-n", "1", "--json"))
    assert "### Draft 0" in logged[0]["response"]  # the trace is kept in llm's log too


# -- the upstream model chosen per request ---------------------------------------------------

UPSTREAM_TASK = """name: {name}
description: answers as {name}
generate: "{tag} {{{{ input }}}}"
feedback: "{tag} critique {{{{ draft }}}}"
refine: "{tag} refine {{{{ draft }}}}"
max_iterations: 0
"""


@pytest.fixture
def upstream(serve, tmp_path):
    """A real OpenAI-compatible upstream: a second selfrefine server, with a key, serving two
    models (selfrefine/alpha, selfrefine/beta) whose answer says which one ran."""
    from selfrefine.backends.fake import FakeBackend
    from selfrefine.tasks import get_task

    tasks = []
    for name in ("alpha", "beta"):
        path = tmp_path / f"{name}.yaml"
        path.write_text(UPSTREAM_TASK.format(name=name, tag=name.upper()), encoding="utf-8")
        tasks.append(get_task(str(path)))
    fake = FakeBackend(default=lambda r: f"answered by {r.prompt.split()[0].lower()}")
    return serve(fake, extra_tasks=tasks, api_key="upstream-key")


def _chooser(serve, upstream, allowed=("selfrefine/beta",)):
    """The server under test: its model is selfrefine/alpha on the upstream; a request may
    choose the allowed models."""
    from selfrefine.backends.registry import get_backend
    from selfrefine.service import Upstream

    def make(name: str):
        return get_backend(f"openai:{name}", base_url=f"{upstream.url}/v1", api_key="upstream-key")

    return serve(
        make("selfrefine/alpha"), api_key="client-key", upstream=Upstream(("selfrefine/alpha", *allowed), make)
    )


def test_a_request_chooses_the_upstream_model(serve, upstream):
    served = _chooser(serve, upstream)
    client = served.client()  # its key is the client's, never the upstream's
    ask = {"messages": user("hello"), "extra_body": {"selfrefine": {"max_iterations": 0}}}
    plain = client.chat.completions.create(model="selfrefine/chat", **ask)
    assert plain.choices[0].message.content == "answered by alpha"
    chosen = client.chat.completions.create(model="selfrefine/chat@selfrefine/beta", **ask)
    assert chosen.choices[0].message.content == "answered by beta"
    assert chosen.model == "selfrefine/chat@selfrefine/beta"
    by_body = client.chat.completions.create(
        model="selfrefine/chat",
        messages=user("hello"),
        extra_body={"selfrefine": {"max_iterations": 0, "model": "selfrefine/beta"}},
    )
    assert by_body.choices[0].message.content == "answered by beta"
    native = httpx2.post(
        f"{served.url}/v1/refine",
        headers={"Authorization": "Bearer client-key"},
        json={"task": "chat", "input": "User: hello", "options": {"max_iterations": 0, "model": "selfrefine/beta"}},
    )
    assert native.json()["output"] == "answered by beta"
    ids = [m.id for m in client.models.list().data]  # /v1/models says how
    assert "selfrefine/commongen@selfrefine/beta" in ids and "selfrefine/chat" in ids


def test_an_upstream_model_not_allowed_is_400_before_any_call(serve, upstream):
    served = _chooser(serve, upstream)
    client = served.client()
    before = len(upstream.fake.requests)
    for ask in (
        {"model": "selfrefine/chat@selfrefine/gamma"},
        {"model": "selfrefine/chat", "extra_body": {"selfrefine": {"model": "gpt-4o"}}},
    ):
        with pytest.raises(openai.BadRequestError) as caught:
            client.chat.completions.create(messages=user("hello"), **ask)
        error = error_of(caught.value)
        assert error["code"] == "model_not_allowed"
        assert "allowed: selfrefine/alpha, selfrefine/beta" in error["message"]
    assert len(upstream.fake.requests) == before  # nothing reached the upstream
    with pytest.raises(openai.NotFoundError):  # the task part still has to exist
        client.chat.completions.create(model="selfrefine/nope@selfrefine/beta", messages=user("hello"))


def test_a_server_without_an_upstream_refuses_a_chosen_model(serve):
    client = serve().client()
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="selfrefine/commongen@gpt-4o", messages=user("dog, ball"))
    error = error_of(caught.value)
    assert error["code"] == "model_not_allowed" and "--upstream-model" in error["message"]


def test_upstream_model_needs_an_openai_compatible_model():
    result = CliRunner().invoke(
        cli,
        ["serve", "--model", "fake", "--upstream-model", "gpt-4o", "--port", str(_free_port())],
        env={"SELFREFINE_API_KEY": None},
    )
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert result.exit_code != 0 and len(lines) == 1 and lines[0].startswith("Error:"), result.output
    assert "--upstream-model needs --model openai:NAME" in lines[0]


# -- samples through the API ----------------------------------------------------------------


def test_a_request_asks_for_samples_in_either_spelling_and_gets_every_candidate(serve):
    served = serve(
        FakeBackend(
            {"generate": ["A dog.", "A dog and a ball."]}, default='{"missing_concepts": [], "commonsense": "NONE"}'
        )
    )
    options = {"samples": 2, "max_iterations": 0, "accept": "not-worse", "strategy": "fixed"}
    reply = httpx2.post(f"{served.url}/v1/refine", json={"task": "commongen", "input": "dog, ball", "options": options})
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["config"]["samples"] == 2 and body["config"]["accept"] == "not_worse"
    assert [c["chosen"] for c in body["iterations"][0]["candidates"]] == [False, True]
    assert body["output"] == "A dog and a ball."
    capped = httpx2.post(f"{served.url}/v1/refine",
                         json={"task": "commongen", "input": "dog, ball", "options": {"samples": 16, "max_iterations": 0}})  # fmt: skip
    assert capped.status_code == 200 and capped.json()["config"]["samples"] == 8  # the server's limit
