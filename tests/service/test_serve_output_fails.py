"""The API says which checks the returned output still fails (issue 45, item 5): ``fails`` in
``/v1/refine``'s result and in a chat completion's ``selfrefine`` data, and the trace's last
line, whole and streamed.
A real server on 127.0.0.1 over the in-package fake writer."""

from __future__ import annotations

import json

import httpx2
import test_serve
from test_serve import COMMONGEN, user

serve = test_serve.serve  # the real-server fixture

MISSING_PARK = {"source": "task", "says": "the commongen task's own check"}


def test_refine_api_result_names_the_failed_checks(serve):
    served = serve()
    body = {"task": "commongen", "input": "dog, ball, park", "options": {"max_iterations": 0}}
    reply = httpx2.post(f"{served.url}/v1/refine", json=body, timeout=30)
    assert reply.status_code == 200, reply.text
    result = reply.json()
    assert result["output"] == "Here dog and ball meet."  # the fake writer leaves out the last concept
    [failed] = result["fails"]
    assert {k: failed[k] for k in ("source", "says")} == MISSING_PARK and "park" in failed["finding"]
    passing = httpx2.post(f"{served.url}/v1/refine", json={**body, "options": {}}, timeout=30).json()
    assert passing["output"] == "Here dog and ball and park meet." and passing["fails"] == []


def test_chat_completion_data_names_the_failed_checks_whole_and_streamed(serve):
    served = serve()
    client = served.client()
    whole = client.chat.completions.create(
        model=COMMONGEN, messages=user("dog, ball, park"), extra_body={"selfrefine": {"max_iterations": 0}}
    )
    assert [f["says"] for f in whole.selfrefine["fails"]] == [MISSING_PARK["says"]]
    # the trace's last word, as the CLI's last line
    said = whole.choices[0].message.reasoning_content  # type: ignore[attr-defined]
    assert said.rstrip().endswith("returned output fails: the commongen task's own check")
    body = {"model": COMMONGEN, "messages": user("dog, ball, park"), "stream": True}
    with httpx2.stream("POST", f"{served.url}/v1/chat/completions", json=body, timeout=30) as stream:
        events = [line.removeprefix("data: ") for line in stream.iter_lines() if line.startswith("data: {")]
    final = [json.loads(e) for e in events if '"selfrefine"' in e][-1]
    assert final["selfrefine"]["fails"] == []  # refined: every concept is in
    chunks = [json.loads(e) for e in events if '"choices":[{' in e]
    reasoning = "".join(c["choices"][0]["delta"].get("reasoning_content") or "" for c in chunks)
    assert reasoning.rstrip().endswith("returned output passes every check")
