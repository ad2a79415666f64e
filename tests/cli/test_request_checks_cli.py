"""``selfrefine run`` on request text that states a check which cannot be built (issue 46
item 7: exit 2 with a pydantic message before): the check is dropped and named, the run goes on."""

from __future__ import annotations

import json

from click.testing import CliRunner

from selfrefine.cli.commands import cli

CHECKS_NONE = json.dumps({"checks": []})  # the derivation (a feedback call) lists nothing


def test_a_check_that_cannot_be_built_is_named_and_the_run_goes_on(tmp_path):
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps({"replies": {"feedback": [CHECKS_NONE], "generate": ["Hello cats."]}}))
    request = "Write two paragraphs about cats. The 0th paragraph must start with the word hello."
    args = ["run", "chat", request, "--model", f"fake:{replies}", "--max-iters", "0"]
    shown = CliRunner().invoke(cli, args)
    assert shown.exit_code == 0, shown.output
    assert "could not be used" in shown.output and "greater than or equal to 1" in shown.output
    result = json.loads(CliRunner().invoke(cli, [*args, "--json"]).output)
    [dropped] = result["checks_dropped"]
    assert dropped["check"] == {"type": "paragraph_start", "nth": 0, "word": "hello"}
    assert dropped["reason"] == "paragraph_start: nth: Input should be greater than or equal to 1"
    assert result["output"] == "Hello cats." and result["stop_reason"] == "max_iterations"
