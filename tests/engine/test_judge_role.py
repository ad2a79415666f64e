"""The judge is a role like feedback and refine: a run's closed questions (engine/scoring/questions.py)
asked as role "judge" go to the judge's backend, the feedback role's unless the engine is
given a judge model, and are recorded as the judge's calls (fake models, no server)."""

from __future__ import annotations

import asyncio

from selfrefine import FakeBackend, SelfRefine
from selfrefine.core.records import MODEL_ROLES, ROLES, Usage
from selfrefine.engine.calls import Caller, CallLog
from selfrefine.engine.scoring.questions import Question, Questions

YES = {"text": "Yes", "top_logprobs": [{"Yes": -0.1, "No": -2.4}]}


def ask(engine: SelfRefine) -> tuple[float, CallLog]:
    """One yes/no question asked as the judge role through a run's caller."""
    log = CallLog()
    caller = Caller(engine.settings.calls, engine.backends, log)
    judgment = asyncio.run(Questions(caller, role="judge").ask(0, Question("sense", "Does it make sense?")))
    return judgment.score, log


def test_the_judge_role_is_a_model_role_without_prompts_of_its_own():
    assert MODEL_ROLES == ("generate", "feedback", "refine", "judge") and "judge" not in ROLES


def test_a_judge_question_goes_to_the_judge_model_and_is_its_call():
    main, judge = FakeBackend(default="A dog.", name="main"), FakeBackend(default=YES, name="judge")
    score, log = ask(SelfRefine("commongen", main, judge_model=judge))
    assert [r.role for r in judge.requests] == ["judge"] and not main.requests
    assert [(c.role, c.model) for c in log.calls] == [("judge", "judge")]
    assert Usage.of(log.calls).calls == 1 and 0.9 < score < 1


def test_without_a_judge_model_the_critic_s_model_judges():
    main, critic = FakeBackend(default="A dog.", name="main"), FakeBackend(default=YES, name="critic")
    _, log = ask(SelfRefine("commongen", main, feedback_model=critic))
    assert [r.role for r in critic.requests] == ["judge"] and not main.requests
    assert [(c.role, c.model) for c in log.calls] == [("judge", "critic")]
    alone = FakeBackend(default=YES, name="alone")
    _, log = ask(SelfRefine("commongen", alone))  # one model: it plays the judge too
    assert [(c.role, c.model) for c in log.calls] == [("judge", "alone")]


def test_a_replies_file_scripts_the_judge_role(tmp_path):
    replies = tmp_path / "r.json"
    replies.write_text('{"judge": [{"text": "No", "top_logprobs": [{"No": -0.05, "Yes": -3.0}]}], "default": "x"}')
    backend = FakeBackend.from_file(replies)
    score, _ = ask(SelfRefine("commongen", backend))
    assert score < 0.1
