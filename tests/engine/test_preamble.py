"""A draft's first line that announces it ("Sure! Here is the limerick…:") is dropped before
the task parses the draft, for every task; a first line ending with a colon that is content
stays (task/preamble.py)."""

from __future__ import annotations

import pytest

from selfrefine import FakeBackend, SelfRefine, Task
from selfrefine.checks.instructions import parse_checks
from selfrefine.task.preamble import preamble, without_preamble

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


# issue 46 item 17: seven kinds of first line that say more than "here it comes", each
# dropped before; the line is the reply's own (an answer, a reason, a fact), so it stays
@pytest.mark.parametrize(
    "reply",
    [
        "Yes, here are the reasons:\n1. It is cheaper.\n2. It is faster.",  # "yes" answers the question
        "Yes! Here is what I found:\nThe shop opens at nine.",
        "Certainly not! Here is why:\nThe bridge is closed.",  # a negated assent is an answer
        "Of course not, here are the facts:\n- It rained.",
        "Absolutely not. Here are the risks:\n- fire",
        "Okay, the answer is 42, and here are the steps:\n6 x 7 = 42",  # an answer before the "here"
        "Sure, I checked the schedule, and here are the trains:\n8:10, 9:40",
        "Here is why the answer is yes:\nThe law changed in 2020.",  # about the answer, not announcing it
        "Here are the reasons my answer is no:\n- cost",
        "Sure! Here is the answer: Paris. And here is why:\nIt is the seat of government.",  # content in the line
        "Here is my answer: the second option is better, because:\nit is cheaper.",
    ],
)
def test_a_first_line_that_says_more_than_an_announcement_stays(reply):
    assert preamble(reply) is None and without_preamble(reply) == reply


DEMANDED = "Here is my answer:\nParis is the capital of France."


def test_a_first_line_a_check_asks_for_stays():
    """The request demanded the line ("start your reply with 'Here is my answer:'"): dropping
    it would fail the draft that complied. A check of the first paragraph's first word too."""
    starts = parse_checks([{"type": "starts_with", "phrase": "Here is my answer:"}])
    first_word = parse_checks([{"type": "paragraph_start", "nth": 1, "word": "Here"}])
    other = parse_checks(
        [{"type": "starts_with", "phrase": "Paris"}, {"type": "paragraph_start", "nth": 2, "word": "x"}]
    )
    assert without_preamble(DEMANDED) == "Paris is the capital of France."  # no check asks for it: it announces
    assert without_preamble(DEMANDED, starts) == DEMANDED and without_preamble(DEMANDED, first_word) == DEMANDED
    assert without_preamble(DEMANDED, other) == "Paris is the capital of France."  # these do not ask for the line


def test_the_line_a_request_demands_is_kept_in_the_run_and_passes_its_check():
    request = "What is the capital of France? Start your reply with 'Here is my answer:' and keep it short."
    backend = FakeBackend({"checks": ['{"checks": []}'], "generate": [DEMANDED]}, default='{"issues": []}')
    result = SelfRefine("chat", backend, max_iterations=0).run(request)
    assert [c.check for c in result.checks] == [{"type": "starts_with", "phrase": "Here is my answer:"}]
    assert result.output == DEMANDED and result.iterations[0].verification.passed is True
    # a check given with the run asks for it as well
    given = [{"type": "paragraph_start", "nth": 1, "word": "Here"}]
    backend = FakeBackend({"generate": [DEMANDED]}, default='{"issues": []}')
    result = SelfRefine("chat", backend, max_iterations=0, checks=given, derive_checks=False).run("Capital of France?")
    assert result.output == DEMANDED and result.iterations[0].verification.passed is True
