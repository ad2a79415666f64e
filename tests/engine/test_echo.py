"""A draft that repeats the request is no answer (checks/incomplete.py ``echoes``): the
engine's check fails it for every task whose ``echo`` is not "off", with a finding, also on a
task without a verifier, and neither the judge nor the critic can then rank it above a real
answer. Rewriting tasks declare ``echo="off"``: a rewrite may rightly stay close to its input."""

from __future__ import annotations

import json
import math
import textwrap

import pytest

from selfrefine import FakeBackend, SelfRefine, Task
from selfrefine.checks.incomplete import ECHO, INCOMPLETE_SCORE, echo_slack, echoes
from selfrefine.engine.scoring.ranking import UNSCORED, score
from selfrefine.tasks import get_task
from selfrefine.tasks.taskfile import load_task

TEN = "please write one short product description for this ceramic dripper"  # 10 words
PRODUCT = "Aurora ceramic pour-over coffee dripper, $29."  # issue 38's input, and its echo
ANSWER = "Hand-glazed Aurora pours a slow, even cup: ceramic keeps the heat steady, for $29."


def test_an_exact_repeat_is_an_echo_whatever_the_case_punctuation_or_spacing():
    assert echoes(PRODUCT, PRODUCT, "exact") and echoes("aurora CERAMIC pour over coffee dripper 29", PRODUCT, "exact")
    assert not echoes(ANSWER, PRODUCT, "near")
    assert not echoes(PRODUCT, PRODUCT, "off")


def test_a_near_echo_adds_or_drops_at_most_one_word_in_ten_of_the_request():
    assert echo_slack(9) == 0 and echo_slack(10) == 1 and echo_slack(20) == 2
    # ten words: one added word is still the request; two are not (the boundary)
    assert echoes(f"{TEN} today", TEN, "near") and not echoes(f"{TEN} today please", TEN, "near")
    # under ten words only a word-for-word repeat: one word more or less is a (poor) answer
    nine = TEN.removeprefix("please ")
    assert echoes(nine, nine, "near") and not echoes(f"{nine} today", nine, "near")
    assert not echoes("dog runs", "dog, runs, park", "near")
    assert echoes(TEN.replace("please ", ""), TEN, "near")  # one dropped
    # a changed word counts twice (dropped and added): 20 words allow one change, not two
    twenty = f"{TEN} and keep it under forty words for the shop page"
    assert len(twenty.split()) == 20
    assert echoes(twenty.replace("shop", "store"), twenty, "near")
    assert not echoes(twenty.replace("shop", "store").replace("forty", "fifty"), twenty, "near")
    assert not echoes(f"{TEN} today", TEN, "exact")  # exact: no word added


def test_a_short_request_answered_in_kind_is_no_echo():
    assert not echoes("Good morning!", "Good morning", "exact")  # two words: a greeting back
    assert echoes("How are you?", "how are you", "exact")  # three: checked


TASK_FILE = textwrap.dedent(
    """\
    name: blurb
    generate: |
      Write a product description under 40 words for: {{ input }}
    feedback: |
      Description: {{ draft }}
      Name one problem, or say NONE.
    refine: |
      Description: {{ draft }}
      Problem: {{ feedback }}
      Improved description:
    stop:
      contains: NONE
    judge: |
      Product: {{ input }}
      Description: {{ draft }}
      Is this a good product description? Answer Yes or No.
    """
)


def judge_likes_the_echo(request) -> str | dict:
    """The issue's judge: P(Yes) 0.86 for the echo, less for a real answer; the critic: NONE."""
    if request.role == "judge":
        p = 0.86 if f"Description: {PRODUCT}" in request.prompt else 0.6
        return {"text": "Yes", "top_logprobs": [{"Yes": math.log(p), "No": math.log(1 - p)}]}
    if request.role == "generate":
        return PRODUCT if (request.seed or 0) % 2 == 0 else ANSWER
    return "NONE"


def test_a_task_file_with_only_a_judge_fails_the_echo(tmp_path):
    path = tmp_path / "blurb.yaml"
    path.write_text(TASK_FILE)
    task = load_task(path)
    assert not task.has_verifier and task.declared.defaults.echo == "near"
    # one step: the echo is failed with the finding, though the critic says NONE
    fake = FakeBackend({"generate": [PRODUCT], "refine": [ANSWER]}, default="NONE")
    result = SelfRefine(task, fake, max_iterations=1).run(PRODUCT)
    check = result.iterations[0].verification
    assert check is not None and check.passed is False and check.score is None and check.text == ECHO
    # the critique's "done" does not stop the run: the finding goes to the refinement
    assert result.iterations[0].feedback.done is False and ECHO in fake.prompts("refine")[0]
    assert result.output == ANSWER and result.iterations[1].verification is None


def test_the_judge_cannot_rank_the_echo_above_a_real_answer(tmp_path):
    path = tmp_path / "blurb.yaml"
    path.write_text(TASK_FILE)
    fake = FakeBackend(default=judge_likes_the_echo)
    result = SelfRefine(load_task(path), fake, samples=2, max_iterations=0, temperature=0.7).run(PRODUCT)
    drafts = {c.draft: c for c in result.iterations[0].candidates}
    assert set(drafts) == {PRODUCT, ANSWER}
    assert result.output == ANSWER and drafts[ANSWER].chosen
    echo = drafts[PRODUCT].verification
    assert echo.passed is False and score(echo) < score(drafts[ANSWER].verification) == UNSCORED


def test_a_verified_task_scores_the_echo_below_every_draft():
    task = Task(
        "blurb",
        generate="Describe: {{ input }}",
        feedback="{{ draft }}",
        refine="{{ draft }} {{ feedback }}",
        verify={"max_words": 40},
    )
    fake = FakeBackend({"generate": [PRODUCT]}, default="ok")
    result = SelfRefine(task, fake, max_iterations=0, select="verified").run(PRODUCT)
    check = result.iterations[0].verification
    assert check.passed is False and check.score == INCOMPLETE_SCORE and check.text.startswith(ECHO)


def test_chat_fails_only_a_word_for_word_repeat_of_the_last_user_message():
    request = "Fix the typos in this sentence: the cat sat on teh mat and lookd around"
    assert get_task("chat").declared.defaults.echo == "exact"
    messages = [{"role": "user", "content": "Hi!"}, {"role": "assistant", "content": "Hello!"}]
    conversation = json.dumps([*messages, {"role": "user", "content": request}])
    replies = {"generate": [request.upper() + "!", "the cat sat on the mat and looked around"]}
    fake = FakeBackend(replies, default='{"issues": []}')
    with SelfRefine("chat", fake, samples=2, max_iterations=0, temperature=0.7) as engine:
        result = engine.run(conversation)
    echo, fixed = result.iterations[0].candidates
    assert echo.verification.passed is False and echo.verification.text == ECHO
    assert fixed.verification is None and result.output == fixed.draft  # close to the request, and an answer


@pytest.mark.parametrize("name", ["sentiment", "toxicity", "readability", "codeopt"])
def test_rewriting_tasks_declare_that_a_draft_may_stay_close_to_its_input(name):
    assert get_task(name).declared.defaults.echo == "off"


@pytest.mark.parametrize("name", ["commongen", "acronym", "gsm8k", "story", "dialogue"])
def test_generative_tasks_fail_an_echo(name):
    assert get_task(name).declared.defaults.echo == "near"
