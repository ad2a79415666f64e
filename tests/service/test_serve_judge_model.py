"""The API's judge model is the server's: `selfrefine serve --judge-model MODEL` gives the
loop's judge role its own backend for every request (a request chooses no role's model; an
upstream model it chooses plays every role, the judge included). Fake models, a real server."""

from __future__ import annotations

import dataclasses
import json

import httpx2
from test_serve import start_server

from selfrefine.cli import cli
from selfrefine.cli.serve import ServeFlags, _settings
from selfrefine.core.records import RunResult
from selfrefine.service.tracing import Tracing


def test_a_served_run_records_the_server_s_judge_model(tmp_path):
    judge = tmp_path / "judge.json"
    judge.write_text(json.dumps({"default": "Yes"}))
    args = ["-m", "fake", "-o", "reply=A dog and a ball.", "--judge-model", f"fake:{judge}"]
    settings = _settings(ServeFlags.of(cli.commands["serve"].make_context("serve", args).params))
    served = start_server(dataclasses.replace(settings, tracing=Tracing.off()))
    try:
        reply = httpx2.post(
            f"{served.url}/v1/refine",
            json={"task": "commongen", "input": "dog, ball", "options": {"max_iterations": 0}},
        )
    finally:
        served.stop()
    assert reply.status_code == 200, reply.text
    models = RunResult.model_validate(reply.json()).config.models
    # the judge's model, named without its file on the server (issue 39 item 12)
    assert models == {"generate": "fake", "feedback": "fake", "refine": "fake", "judge": "fake:<server file>"}
    assert str(judge) not in reply.text
