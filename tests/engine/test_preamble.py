"""A draft's first line that announces it ("Sure! Here is the limerick…:") is dropped before
the task parses the draft, for every task; a first line ending with a colon that is content
stays (engine/preamble.py)."""

from __future__ import annotations

import pytest

from selfrefine import FakeBackend, SelfRefine, Task
from selfrefine.engine.preamble import preamble, without_preamble

LIMERICK = "There once was a cat in the night\nwho danced in the moonlight so bright"


@pytest.mark.parametrize(
    "reply, kept",
    [
        # issue 38's drafts
        (f'Sure! Here is the limerick about a cat that includes the word "moonlight":\n{LIMERICK}', LIMERICK),
        (
            "Certainly. Here are three questions you could ask:\n\n1. Why?\n2. How?\n3. When?",
            "1. Why?\n2. How?\n3. When?",
        ),
        ("Here is the improved reply:\nParis is the capital of France.", "Paris is the capital of France."),
        (
            "Certainly, here's the Assistant's reply to the last User message of the conversation:\n\nHello Ana!",
            "Hello Ana!",
        ),
        # the same kinds of line, with markdown, another assent, a curly apostrophe
        ("**Here is a revised version of the email:**\nDear Sam,", "Dear Sam,"),
        ("Of course! Below are four tips:\n- one\n- two", "- one\n- two"),
        ("Here’s the answer you asked for:\n42", "42"),
        ("Okay, here is my response:\r\nYes.", "Yes."),
    ],
)
def test_a_preamble_about_the_reply_is_dropped(reply, kept):
    assert without_preamble(reply) == kept


@pytest.mark.parametrize(
    "reply",
    [
        "Ingredients:\n- 2 eggs\n- flour",  # a heading is content
        "Here are the steps to follow:\n1. Mix.\n2. Bake.",  # about the topic, not the reply
        "Here's the thing:\nnobody knows.",
        "Dear Sam:\nThe heater is broken.",
        "def solution():\n    return 7",
        "Day 1: Alfama\nDay 2: Belém",
        "SECTION 1:\nStart slowly.",
        "Note: here is the answer:\nno, this line is content with a colon inside",
        "Sure! Here is the answer:",  # nothing follows: the line is all there is, kept
        "Sure! Here is the limerick: There once was a cat",  # not a line of its own
        "Certainly the best answer is this one:\nrest",  # an assent without "here is"
    ],
)
def test_a_first_line_that_is_content_stays(reply):
    assert preamble(reply) is None and without_preamble(reply) == reply


def test_every_task_parses_its_draft_without_the_preamble():
    """A task that keeps only its first line (as sentiment and toxicity do) would otherwise
    keep the preamble as the whole draft; the engine drops it before the task parses."""

    class FirstLine(Task):
        def parse_draft(self, text: str) -> str:
            return super().parse_draft(text.strip().splitlines()[0])

    task = FirstLine("first", generate="{{ input }}", feedback="{{ draft }}", refine="{{ draft }} {{ feedback }}")
    replies = {"generate": ["Sure! Here is the rewritten review:\nThe food was wonderful.\n"], "refine": ["x"]}
    result = SelfRefine(task, FakeBackend(replies, default="fine"), max_iterations=0).run("The food was awful.")
    assert result.output == "The food was wonderful."
    # with several samples too (each parsed the same way)
    sampled = FakeBackend({"generate": ["Here is the improved reply:\nA.", "B."]}, default="fine")
    task_v = FirstLine(
        "first", generate="{{ input }}", feedback="{{ draft }}", refine="{{ draft }}", verify=lambda i, d: 1.0
    )
    result = SelfRefine(task_v, sampled, samples=2, max_iterations=0, temperature=0.7).run("Q")
    assert [c.draft for c in result.iterations[0].candidates] == ["A.", "B."]
