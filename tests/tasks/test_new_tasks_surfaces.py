"""The toxicity and story tasks from the CLI and the OpenAI-compatible API (fake model)."""

from __future__ import annotations

import json

from click.testing import CliRunner
from test_serve import start_server

from selfrefine.backends.fake import FakeBackend
from selfrefine.backends.roles import RoleBackends
from selfrefine.cli import cli
from selfrefine.service import ServeSettings
from selfrefine.service.tracing import Tracing

RUDE = "Shut up, you stupid idiot, the bus is late again."
POLITE = "Please be patient, the bus is late again."
STORY = "A small grey cat stole a loaf from the oven every morning, and the baker finally followed it home."
RATINGS = {k: {"reason": "fine", "score": 5} for k in ("coherence", "constraints", "interest", "premise")}
REPLIES = {
    "toxicity": {
        "generate": [RUDE.replace("stupid ", "")],
        "feedback": ['Still rude. "idiot" is an insult.', "NONE"],
        "refine": [POLITE],
    },
    "story": {"generate": [STORY], "feedback": [json.dumps(RATINGS)]},
}


def test_tasks_command_lists_both_with_their_metric():
    rows = {r["name"]: r for r in json.loads(CliRunner().invoke(cli, ["tasks", "--json"]).stdout)}
    assert "p_toxic" in rows["toxicity"]["metric"] and "judge" in rows["story"]["metric"]


def test_run_from_the_cli(tmp_path):
    for task, text, output in (
        ("toxicity", RUDE, POLITE),
        ("story", '{"premise": "A baker loses bread.", "elements": ["cat"]}', STORY),
    ):
        replies = tmp_path / f"{task}.json"
        replies.write_text(json.dumps({"replies": REPLIES[task]}))
        result = CliRunner().invoke(cli, ["run", task, text, "-m", f"fake:{replies}", "--json"])
        assert result.exit_code == 0, result.output
        data = json.loads(result.stdout.splitlines()[0])
        assert data["output"] == output and data["stop_reason"] == "feedback"


def test_run_through_the_api():
    replies = {
        "generate": [RUDE.replace("stupid ", ""), STORY],
        "feedback": ['Still rude. "idiot" is an insult.', "NONE", json.dumps(RATINGS)],
        "refine": [POLITE],
    }
    backend = FakeBackend(replies=replies)
    served = start_server(ServeSettings(backends=RoleBackends.of(backend), tracing=Tracing.off()))
    try:
        client = served.client()
        assert {"selfrefine/toxicity", "selfrefine/story"} <= {m.id for m in client.models.list().data}
        toxic = client.chat.completions.create(
            model="selfrefine/toxicity", messages=[{"role": "user", "content": RUDE}]
        )
        assert toxic.choices[0].message.content == POLITE
        story = client.chat.completions.create(
            model="selfrefine/story", messages=[{"role": "user", "content": "A baker loses bread."}]
        )
        assert story.choices[0].message.content == STORY and story.selfrefine["stop_reason"] == "feedback"
    finally:
        served.stop()
