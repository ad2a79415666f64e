"""A request may ask for the rewrite form of focused refinement (issue 45 item 2): ``refine_form``
"rewrite" in the ``selfrefine`` options, spelled as the library and the CLI spell it; an unknown
form is a 400 naming the option. A real server on 127.0.0.1 over the in-package fake writer."""

from __future__ import annotations

import openai
import pytest
import test_serve

from selfrefine import FakeBackend

serve = test_serve.serve  # the real-server fixture
LOWER = {"type": "case", "letters": "lower"}


def test_a_chat_request_asks_for_the_rewrite_form_and_an_unknown_form_is_refused(serve):
    served = serve(FakeBackend({"generate": ["The Cat sat."], "refine": ["the cat sat."]}))
    client = served.client()
    options = {"refine_form": "rewrite", "checks": [LOWER], "derive_checks": False, "max_iterations": 1}
    messages = [{"role": "user", "content": "Tell me about the cat."}]
    reply = client.chat.completions.create(
        model="selfrefine/chat", messages=messages, extra_body={"selfrefine": options}
    )
    result = reply.selfrefine
    assert result["config"]["refine_form"] == "rewrite" and reply.choices[0].message.content == "the cat sat."
    focus = result["iterations"][1]["focus"]
    assert (focus["form"], focus["kind"], focus["check"], focus["kept"]) == (
        "rewrite",
        "case",
        "use only lowercase letters",
        True,
    )
    [prompt] = served.fake.prompts("refine")
    assert prompt.startswith("Important: use only lowercase letters.") and "The Cat sat." not in prompt
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(
            model="selfrefine/chat", messages=messages, extra_body={"selfrefine": {**options, "refine_form": "redo"}}
        )
    error = test_serve.error_of(caught.value)
    assert caught.value.status_code == 400 and "refine_form" in error["message"], error
