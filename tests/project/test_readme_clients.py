"""Issue 46, item 20: the README's openai SDK clients of ``selfrefine serve`` wait as long as
a run may take, and never resend a request. The SDK's defaults (a 600 s timeout, 2 retries)
met runs of minutes: a slow request was sent three times, each starting its run over, and
failed. The serve section names the run's time budget and how to set it."""

from __future__ import annotations

import re

from test_readme import BLOCKS, README, SERVER

CLIENT = re.compile(r"OpenAI\((?P<args>[^)]*)\)")


def test_every_sdk_client_in_the_readme_sets_its_timeout_and_no_retries():
    clients = [(where, m["args"]) for where, code in BLOCKS if SERVER in code for m in CLIENT.finditer(code)]
    assert len(clients) == 3, clients  # the plain and streamed chat clients, and structured output
    for where, args in clients:
        timeout = re.search(r"\btimeout=(\d+)", args)
        assert timeout and int(timeout[1]) > 600, f"{where}: the client waits longer than a run's 600 s: {args}"
        assert "max_retries=0" in args, f"{where}: a slow request must not be resent (each resend reruns it)"


def test_the_serve_section_names_the_time_budget_and_the_clients_settings():
    section = README.read_text(encoding="utf-8").partition("## Serving it")[2].partition("\n## ")[0]
    for said in ("max_seconds", "--budget-seconds", "timeout", "max_retries=0", "--keep-alive"):
        assert said in section, said
