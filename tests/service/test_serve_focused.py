"""A request may ask for focused refinement (issue 45 item 2): ``refine_form`` and
``repair_samples`` per request, spelled as the library and the CLI spell them, and the
result's iterations say which check each refinement was for and whether it was kept.
A real server on 127.0.0.1 over the in-package fake writer."""

from __future__ import annotations

import httpx2
import test_serve

from selfrefine import FakeBackend

serve = test_serve.serve  # the real-server fixture


def test_a_request_asks_for_focused_refinement(serve):
    served = serve(
        FakeBackend({"generate": ["Here dog and ball meet."], "refine": ["Here dog and ball and park meet."]})
    )
    options = {"refine_form": "focused", "repair_samples": 1, "max_iterations": 1}
    body = {"task": "commongen", "input": "dog, ball, park", "options": options}
    reply = httpx2.post(f"{served.url}/v1/refine", json=body, timeout=30)
    assert reply.status_code == 200, reply.text
    result = reply.json()
    assert result["config"]["refine_form"] == "focused" and result["config"]["verifier_mode"] == "verifier"
    focus = result["iterations"][1]["focus"]
    assert focus["check"] == "use every concept" and focus["repair"].startswith("Use the word 'park'")
    assert focus["kept"] is True and result["output"] == "Here dog and ball and park meet."
    bad = httpx2.post(f"{served.url}/v1/refine", json={**body, "options": {"refine_form": "sideways"}}, timeout=30)
    assert bad.status_code == 400 and "refine_form" in bad.text, bad.text
