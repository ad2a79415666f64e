"""General chat task: conversation input, prompts, "issues" feedback parsing, the loop."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from selfrefine import SelfRefine, StopReason
from selfrefine.backends.base import chat_messages, flat_prompt
from selfrefine.backends.fake import FakeBackend
from selfrefine.core.bans import TokenBan
from selfrefine.core.errors import (
    ConfigError,
    DraftParseError,
    FeedbackParseError,
    InputError,
)
from selfrefine.tasks import BUILTIN_TASKS, PAPER_TASKS, get_task, task_names
from selfrefine.tasks.chat import NO_ISSUES, Chat, ChatMessage, conversation_text


def msg(role: str, content: str) -> ChatMessage:
    return ChatMessage(role=role, content=content)


@pytest.fixture
def task() -> Chat:
    return Chat()


def parse(task: Chat, raw: str):
    return task.parse_feedback(raw, input="What is 2 + 2?", draft="5")


# --- the conversation -------------------------------------------------------------------------


def test_a_single_user_message_is_its_content():
    assert conversation_text([msg("user", "  What is 2 + 2?\n")]) == "What is 2 + 2?"
    # an empty turn (e.g. an assistant tool call with no text) is left out
    assert conversation_text([msg("assistant", " "), msg("user", "Hi")]) == "Hi"


def test_several_messages_are_a_transcript_ending_with_the_last_user_turn():
    text = conversation_text(
        [
            msg("system", "Answer in French."),
            msg("user", "Hi!"),
            msg("assistant", "Bonjour !"),
            msg("user", "How are you?\nBe brief."),
        ]
    )
    assert text == ("System: Answer in French.\n\nUser: Hi!\n\nAssistant: Bonjour !\n\nUser: How are you?\nBe brief.")


@pytest.mark.parametrize(
    "messages, message",
    [
        ([], "empty"),
        ([msg("user", "   ")], "empty"),
        ([msg("system", "Be nice.")], "no user message"),
        ([msg("system", "Be nice."), msg("assistant", "Hello!")], "no user message"),
        ([msg("user", "Hi"), msg("assistant", "Hello!")], "ends with an assistant message"),
    ],
)
def test_a_conversation_without_a_last_user_message_is_rejected(messages, message):
    with pytest.raises(InputError, match=message):
        conversation_text(messages)


def test_chat_message_roles_are_checked():
    with pytest.raises(ValidationError):
        ChatMessage(role="tool", content="x")
    assert ChatMessage.model_validate({"role": "user", "content": "hi"}) == msg("user", "hi")


def test_inputs_plain_transcript_and_json_messages(task):
    assert task.prepare_input("  Why is the sky blue?  ") == "Why is the sky blue?"
    transcript = "User: Hi\nAssistant: Hello!\nUser: Tell me a joke."
    assert task.prepare_input(transcript) == transcript
    # "System:" alone does not make a transcript: no User turn
    assert task.prepare_input("System: Linux. How do I list files?") == "System: Linux. How do I list files?"
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Why?"}]
    assert task.prepare_input(json.dumps(messages)) == "System: Be brief.\n\nUser: Why?"
    assert task.prepare_input(json.dumps({"messages": messages[1:]})) == "Why?"
    # JSON that is not a list of messages is a request like any other
    assert task.prepare_input('{"a": 1} is this valid JSON?') == '{"a": 1} is this valid JSON?'
    assert task.prepare_input('{"a": 1}') == '{"a": 1}'


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "empty"),
        ("User: Hi\nAssistant: Hello!", "ends with an Assistant turn"),
        ("User: Hi\nsystem: Be brief.", "ends with a System turn"),
        (json.dumps([{"role": "wizard", "content": "x"}]), "roles are system, user, assistant"),
        (json.dumps([{"role": "assistant", "content": "Hello!"}]), "no user message"),
    ],
)
def test_bad_inputs_say_what_to_fix(task, text, message):
    with pytest.raises(InputError, match=message):
        task.prepare_input(text)


def test_input_size_limit(task):
    task.prepare_input("x" * task.max_input_chars)
    with pytest.raises(InputError, match="limit"):
        task.prepare_input("x" * (task.max_input_chars + 1))
    long = [{"role": "user", "content": "x" * task.max_input_chars}, {"role": "user", "content": "y"}]
    with pytest.raises(InputError, match="limit"):
        task.prepare_input(json.dumps(long))


# --- prompts ----------------------------------------------------------------------------------


def test_critique_and_refinement_show_the_conversation_as_a_transcript(task):
    transcript = "System: Be brief.\n\nUser: Why?"
    feedback = task.render("feedback", transcript, draft="Because.")
    assert feedback.endswith(f"Conversation:\n{transcript}\nDraft reply: Because.\nFeedback:")
    assert f"Conversation:\n{transcript}\n" in task.render("refine", transcript, draft="Because.", feedback="- f")
    assert task.declared.system and "last User message" in task.declared.system


def test_the_conversation_parsed_back_into_messages(task):
    """A prepared input (a plain request, a labelled transcript, JSON messages) is the
    conversation draft 0 answers: each turn runs from its label to the next line that starts
    with one, any case, over several lines; empty turns are left out."""
    assert task.conversation(task.prepare_input("Why is the sky blue?")) == [
        {"role": "user", "content": "Why is the sky blue?"}
    ]
    transcript = "system: Be brief.\nUSER: Hi\nsecond line: still the user\n\nAssistant:\n\nUser:   Tell me a joke. "
    assert task.conversation(task.prepare_input(transcript)) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi\nsecond line: still the user"},
        {"role": "user", "content": "Tell me a joke."},
    ]
    messages = [
        {"role": "system", "content": "Answer in French."},
        {"role": "user", "content": "Hi!\nUser: quoted, not a turn"},
        {"role": "assistant", "content": "Bonjour !"},
        {"role": "user", "content": "How are you?"},
    ]
    # JSON messages become a transcript (conversation_text) and come back as turns; a line of
    # a message that starts with a role label would start a turn (a transcript cannot tell)
    back = task.conversation(task.prepare_input(json.dumps(messages)))
    assert [m["role"] for m in back] == ["system", "user", "user", "assistant", "user"]
    assert task.conversation(json.dumps(messages)) == messages  # unprepared JSON: as it is
    # "System:" alone is no transcript: the request as one user message
    assert task.conversation("System: Linux. How do I list files?") == [
        {"role": "user", "content": "System: Linux. How do I list files?"}
    ]


def test_draft_0_is_the_models_own_reply_to_the_users_messages():
    """No transcript wrapper, no task system prompt: the generate request is the user's own
    messages (system turn kept, history as turns), the prompt its last user message; the
    critique still shows the transcript under the task's system prompt."""
    messages = [
        {"role": "system", "content": "You are a concise travel assistant."},
        {"role": "user", "content": "I have three days in Lisbon."},
        {"role": "assistant", "content": "Lovely! What do you enjoy most?"},
        {"role": "user", "content": "Food. Give me a plan in three lines."},
    ]
    fake = FakeBackend({"generate": ["Day 1: Alfama\nDay 2: Belém\nDay 3: LX Factory"]}, default='{"issues": []}')
    result = SelfRefine("chat", fake, max_iterations=1, record_prompts=True).run(json.dumps(messages))
    derivation, generate, feedback = fake.requests  # the request's checks are derived first
    assert derivation.purpose == "checks" and "Food. Give me a plan in three lines." in derivation.prompt
    assert generate.role == "generate" and generate.system is None
    assert chat_messages(generate) == messages and generate.prompt == messages[-1]["content"]
    assert "Conversation:" not in flat_prompt(generate) and "Assistant's reply" not in flat_prompt(generate)
    assert feedback.system == Chat().declared.system and "Conversation:\nSystem: You are a concise" in feedback.prompt
    # the record shows the conversation that was sent
    assert result.calls[1].prompt == flat_prompt(generate) and result.calls[1].prompt.endswith("Assistant:")
    # one user message alone is sent as that message, no system message added
    fake = FakeBackend(default="Paris.")
    SelfRefine("chat", fake, max_iterations=0).run("Capital of France?")
    assert chat_messages(fake.requests[1]) == [{"role": "user", "content": "Capital of France?"}]


def test_samples_of_draft_0_send_the_same_messages_with_their_seeds():
    replies = {"generate": lambda r: f"answer {r.seed}", "judge": lambda r: "Yes", "feedback": lambda r: "{}"}
    fake = FakeBackend(default=lambda r: replies[r.role](r))
    SelfRefine("chat", fake, samples=3, max_iterations=0).run("User: Hi\nAssistant: Hello!\nUser: Why?")
    gens = [r for r in fake.requests if r.role == "generate"]
    assert len(gens) == 3 and len({r.seed for r in gens}) == 3
    assert all(chat_messages(r) == chat_messages(gens[0]) for r in gens)
    assert [m["role"] for m in chat_messages(gens[0])] == ["user", "assistant", "user"]


def test_a_preamble_and_a_repeated_cue_are_not_part_of_the_draft():
    fake = FakeBackend(
        {"generate": ['Sure! Here is the limerick about a cat that includes the word "moonlight":\nA cat.']},
        default='{"issues": []}',
    )
    assert SelfRefine("chat", fake, max_iterations=0).run("A limerick about a cat, please.").output == "A cat."


def test_an_echo_finding_joins_the_critics_issues(task):
    from selfrefine.core.records import Verification

    check = Verification(text="The draft repeats the request.", passed=False)
    none = task.combine(parse(task, '{"issues": []}'), check, input="Q", draft="Q")
    assert none.done is False and none.text == "- The draft repeats the request."
    some = task.combine(parse(task, '{"issues": ["Too long."]}'), check, input="Q", draft="Q")
    assert some.fields["issues"] == ["Too long.", "The draft repeats the request."] and some.source == "hybrid"


def test_refine_prompt_shows_drafts_and_feedback_in_order_and_extends_byte_for_byte(task):
    one = task.render("refine", "Q?", draft="d0", feedback="- f0", history=[])
    two = task.render("refine", "Q?", draft="d1", feedback="- f1", history=[{"draft": "d0", "feedback": "- f0"}])
    assert two.startswith(one) and two.endswith("Improved answer:")
    assert two.index("d0") < two.index("- f0") < two.index("d1") < two.index("- f1")
    nofb = task.render("refine_nofeedback", "Q?", draft="d1", history=[{"draft": "d0", "feedback": "- f0"}])
    assert "f0" not in nofb and nofb.index("d0") < nofb.index("d1")


def test_a_refinement_ends_where_it_would_go_on_with_the_prompts_own_pattern():
    # a small model that finishes the improved reply often continues the refine prompt's
    # pattern ("Feedback on this version: The text is now funny..."); the refine call stops
    # at that label, so the critique of itself never becomes part of the reply
    fake = FakeBackend(
        {
            "generate": ["THE DRAFT."],
            "feedback": ['{"issues": ["End with a full stop."]}', '{"issues": []}'],
            "refine": ["THE BETTER DRAFT.\n\nFeedback on this version:\nThe text is now funny."],
        }
    )
    result = SelfRefine("chat", fake, max_iterations=1, derive_checks=False).run("Say it in capitals.")
    refine = [r for r in fake.requests if r.role == "refine"][0]
    assert "\nFeedback on this version:" in refine.stop and "Feedback on this version:" in refine.prompt
    assert result.iterations[1].draft == "THE BETTER DRAFT."


def test_preset_best_on_chat_is_the_configuration_measured_best_on_ifeval():
    # docs/ifeval.md (issue 45): drafts until one passes the derived checks (at most 3), decoded
    # under their bans, then one repair a failed check, in its kind's form, one try each, and no
    # call once 2,000 tokens are spent (chosen on the tuning rows)
    config = SelfRefine("chat", FakeBackend(), preset="best").config
    got = (config.strategy, config.samples, config.refine_form, config.repair_samples, config.max_iterations)
    assert got == ("sequential", 3, "by_kind", 1, 2) and config.judging is False
    assert config.ban_tokens is True and config.max_total_tokens == 2000


def test_preset_best_on_chat_stops_at_a_passing_draft_and_repairs_a_failing_one():
    request = "Name three fruits. Do not use any commas."  # code reads the comma check: no derivation call
    fake = FakeBackend({"generate": ["Apple and pear and plum."]})
    result = SelfRefine("chat", fake, preset="best").run(request)
    assert [r.role for r in fake.requests] == ["generate"] and result.fails == []  # one draft: it passes
    fake = FakeBackend({"generate": ["Apple, pear, plum."] * 3, "refine": ["Apple and pear and plum."]})
    result = SelfRefine("chat", fake, preset="best").run(request)
    assert [r.role for r in fake.requests] == ["generate"] * 3 + ["refine"]  # no critic, no judge
    assert {r.ban for r in fake.requests} == {TokenBan(chars=",")}  # each draft decoded under the check's ban
    focus = result.iterations[-1].focus
    assert result.output == "Apple and pear and plum." and focus.kept and focus.form == "rewrite"  # commas: rewrite


def test_draft_drops_a_repeated_cue(task):
    assert task.parse_draft("Improved answer:\nParis is the capital.") == "Paris is the capital."
    assert task.parse_draft("**Answer:** Paris.") == "Paris."
    assert task.parse_draft("The answer: Paris.") == "The answer: Paris."  # not a leading cue
    with pytest.raises(DraftParseError):
        task.parse_draft("Answer:   ")


# --- feedback ---------------------------------------------------------------------------------


def test_an_empty_issue_list_is_the_stop_signal(task):
    for raw in ('{"issues": []}', '```json\n{"issues": []}\n```', '{"issues": ["No issues."]}', '{"issues": ["none"]}'):
        fb = parse(task, raw)
        assert fb.done is True and fb.text == NO_ISSUES and fb.fields["issues"] == [], raw


def test_issues_become_a_list_for_the_refiner(task):
    sum_wrong, terse = "Wrong sum: 2 + 2 is 4, not 5.", "Too terse: add one line of working."
    raw = json.dumps({"issues": [sum_wrong, sum_wrong, terse]})  # a repeated issue counts once
    fb = parse(task, raw)
    assert fb.done is False and fb.parse_error is None
    assert fb.text == "- Wrong sum: 2 + 2 is 4, not 5.\n- Too terse: add one line of working."
    assert fb.fields["issues"] == ["Wrong sum: 2 + 2 is 4, not 5.", "Too terse: add one line of working."]
    # an object per issue is joined into one line
    fb = parse(task, '{"issues": [{"problem": "Wrong sum", "fix": "say 4"}]}')
    assert fb.fields["issues"] == ["Wrong sum: say 4"]


def test_text_feedback_is_parsed_too(task):
    assert parse(task, "No issues.").done is True
    assert parse(task, "The reply is correct and clear. No issues.").done is True
    fb = parse(task, "Issues:\n- Wrong sum: it is 4.\n2. Add the working.")
    assert fb.done is False and fb.fields["issues"] == ["Wrong sum: it is 4.", "Add the working."]
    prose = parse(task, "The sum is wrong: 2 + 2 is 4. No other issues.")
    assert prose.done is False and prose.fields["issues"] == ["The sum is wrong: 2 + 2 is 4. No other issues."]
    assert parse(task, "No issues with the tone, but the sum is wrong.").done is False


@pytest.mark.parametrize(
    "raw, message",
    [
        ("   ", "empty"),
        ('{"issues": ["Wrong sum', "cut off"),
        ('{"issues": [1, }', "does not parse"),
        ('{"problems": []}', 'lacks "issues"'),
        ('{"issues": 3}', "must be a list"),
    ],
)
def test_malformed_feedback_raises_a_parse_error(task, raw, message):
    with pytest.raises(FeedbackParseError, match=message):
        parse(task, raw)


def test_says_done_only_on_a_plain_no_issues(task):
    assert task.says_done("No issues.") is True
    assert task.says_done("No issues.\n- but the sum is wrong") is False
    assert task.says_done('{"issues": ["Wrong') is False


def test_checked_by_the_requests_own_checks_and_ranked_by_a_judge(task):
    assert not task.has_verifier and task.metric("Q?", "A.") is None
    assert list(task.declared.judges) == ["follows", "correct"]  # what ranks its drafts (engine/judge.py)
    # the request's checks are derived (engine/derivation.py): they verify chat's drafts, in hybrid mode
    engine = SelfRefine(task, FakeBackend(default="x"), select="verified")
    assert engine.settings.checks.derive and engine.settings.verifier_mode == "hybrid"
    # without them, only the judge ranks
    SelfRefine(task, FakeBackend(default="x"), select="verified", derive_checks=False)
    with pytest.raises(ConfigError, match="no verifier and its judge is off"):
        SelfRefine(task, FakeBackend(default="x"), select="verified", judging=False, derive_checks=False)
    with pytest.raises(ConfigError, match="has no verifier; use verifier_mode 'self'"):
        SelfRefine(
            task, FakeBackend(default="x"), verifier_mode="hybrid", derive_checks=False
        )  # the judge writes no findings


def test_chat_is_built_in_after_the_papers_seven():
    assert list(PAPER_TASKS) == ["sentiment", "dialogue", "codeopt", "readability", "gsm8k", "acronym", "commongen"]
    # then the project page's other two tasks (issue 23), then chat
    assert list(BUILTIN_TASKS) == [*PAPER_TASKS, "story", "toxicity", "chat"] and task_names()[:10] == list(
        BUILTIN_TASKS
    )
    assert isinstance(get_task("chat"), Chat)
    roles = {n for n in get_task("chat").declared.templates if not n.startswith("judge_")}
    assert roles == {"generate", "feedback", "refine", "refine_nofeedback"}


# --- the loop ---------------------------------------------------------------------------------


def test_loop_refines_until_the_critique_finds_no_issues():
    backend = FakeBackend(
        {
            "generate": ["2 + 2 = 5."],
            "feedback": [json.dumps({"issues": ["Wrong sum: 2 + 2 is 4, not 5."]}), '{"issues": []}'],
            "refine": ["2 + 2 = 4."],
        }
    )
    result = SelfRefine("chat", backend, max_iterations=3).run("What is 2 + 2?")
    assert result.stop_reason is StopReason.FEEDBACK
    assert result.output == "2 + 2 = 4." and result.drafts == ["2 + 2 = 5.", "2 + 2 = 4."]
    assert [it.feedback.done for it in result.iterations] == [False, True]
    assert result.iterations[1].feedback.text == NO_ISSUES
    [refine] = backend.prompts("refine")
    assert "Conversation:\nUser: What is 2 + 2?" in refine
    assert refine.index("2 + 2 = 5.") < refine.index("- Wrong sum: 2 + 2 is 4, not 5.")
    critiques = [r for r in backend.requests if r.role == "feedback" and r.purpose is None]
    assert len(critiques) == 2 and all(r.json_schema for r in critiques)
    # "What is 2 + 2?" has no instruction's wording: no derivation call, and no checks
    assert not [r for r in backend.requests if r.purpose == "checks"] and result.checks == []


def test_malformed_critiques_end_as_parse_errors_not_crashes():
    backend = FakeBackend({"generate": ["Paris."], "refine": ["Paris is the capital."]}, default='{"issues": ["cut')
    result = SelfRefine("chat", backend, max_iterations=1).run("Capital of France?")
    assert result.stop_reason is StopReason.MAX_ITERATIONS and result.output == "Paris is the capital."
    fb = result.iterations[0].feedback
    assert fb.parse_error and "cut off" in fb.parse_error and fb.done is False
    # each critique asked 1 + parse_retries times; the last draft's is skipped (select "last" at the cap)
    assert len([r for r in backend.requests if r.role == "feedback" and r.purpose is None]) == 1 * 3


# --- the real default model -------------------------------------------------------------------


@pytest.mark.integration
def test_chat_on_the_default_embedded_model(embedded):
    result = SelfRefine("chat", embedded, max_iterations=1, max_tokens=80, temperature=0.0, record_prompts=True).run(
        "What is the capital of France? Answer in one short sentence."
    )
    assert result.stop_reason in (StopReason.FEEDBACK, StopReason.MAX_ITERATIONS), result.error
    assert "Paris" in result.output
    fb = result.iterations[0].feedback
    assert fb.parse_error is None, fb
    assert fb.done == (fb.fields["issues"] == [])
    # constrained decoding: the critic's reply is the schema's JSON object
    reply = [c for c in result.calls if c.role == "feedback" and c.iteration == 0][-1].response
    assert isinstance(json.loads(reply)["issues"], list), reply


@pytest.mark.integration
def test_draft_0_is_what_the_plain_model_replies(embedded):
    """One step on chat is exactly what llama-cpp-python's own ``create_chat_completion``
    gives for the user's messages with the same seed and sampling: no prompt of the task."""
    from llama_cpp import Llama

    from selfrefine.core.seeds import attempt_seed

    messages = [
        {"role": "system", "content": "Answer in one short sentence."},
        {"role": "user", "content": "Name a fruit."},
        {"role": "assistant", "content": "An apple."},
        {"role": "user", "content": "Name another one and say what colour it is."},
    ]
    result = SelfRefine("chat", embedded, max_iterations=0, max_tokens=40, seed=3).run(json.dumps(messages))
    [call] = [c for c in result.calls if c.role == "generate"]
    plain = Llama(
        model_path=str(embedded.model_path),
        n_ctx=1024,
        n_threads=embedded.n_threads,
        n_batch=embedded.n_batch,
        n_ubatch=embedded.n_ubatch,
        verbose=False,
    )
    try:
        out = plain.create_chat_completion(
            messages=messages, max_tokens=40, temperature=0.7, seed=attempt_seed(3, 1, 0), repeat_penalty=1.0
        )
    finally:
        plain.close()
    assert call.response == out["choices"][0]["message"]["content"]
    assert call.prompt_tokens == out["usage"]["prompt_tokens"]
