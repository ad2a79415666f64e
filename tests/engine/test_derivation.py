"""Checks derived from the request (engine/derivation.py) and the run's own checks
(engine/run_checks.py), on the fake model: derived before the first draft and shown, kept
only where the request states them, once per request, ranking and refining the drafts; a
bad check or a broken derivation never ends a run silently."""

from __future__ import annotations

import json

import pytest

from selfrefine import ChecksStep, ConfigError, DraftStep, FakeBackend, ProgressStep, SelfRefine
from selfrefine.checks.instructions import parse_checks
from selfrefine.cli.display import StepPrinter
from selfrefine.engine.derivation import DERIVED, grounded

REQUEST = "Give me three tips for sleeping better as a bulleted list. Do not use any commas."
BULLETS3 = {"type": "count", "unit": "bullets", "relation": "exactly", "n": 3}
NO_COMMA = {"type": "forbidden_chars", "chars": ","}
WORDS300 = {"type": "count", "unit": "words", "relation": "at least", "n": 300}  # the request says no such thing
GOOD = "* keep a schedule\n* dim the lights\n* skip late coffee"
BAD = "Sure, here are some tips:\n* keep a schedule, always\n* dim the lights"


def derived(*checks) -> str:
    return json.dumps({"checks": list(checks)})


def run(backend, request: str = REQUEST, **options):
    engine = SelfRefine("chat", backend, **options)
    steps = list(_steps(engine, request))
    return engine, steps, steps[-1].result


def _steps(engine, request):
    import asyncio

    async def collect():
        return [s async for s in engine.astream(request)]

    return asyncio.run(collect())


def test_the_request_is_turned_into_checks_before_the_first_draft_and_only_stated_ones_kept():
    backend = FakeBackend(
        {"checks": [derived(BULLETS3, NO_COMMA, WORDS300)], "generate": [GOOD], "feedback": ['{"issues": []}']}
    )
    _, steps, result = run(backend, max_iterations=1)
    assert isinstance(steps[0], ProgressStep)  # the derivation's call, announced
    first = steps[1]
    assert isinstance(first, ChecksStep) and isinstance(steps[2], DraftStep)  # shown before any draft
    # "Do not use any commas" is read by code (instructions/phrases.py); the model adds the
    # bullets no phrasing rule reads here ("three tips … as a bulleted list"), its comma check
    # gives way to the code's, and its 300 words, which the request never says, is dropped
    assert [c.check["type"] for c in first.checks] == ["forbidden_chars", "count"]
    [dropped] = first.dropped  # said with why, in the run's record too
    assert dropped.check == parse_checks([WORDS300])[0].model_dump(mode="json")
    assert dropped.reason == "the request does not state it" and result.checks_dropped == first.dropped
    # the dropped check is named, so a reader can tell whether the request meant it
    assert first.note == "the model also proposed a check the request does not state, dropped: at least 300 words"
    assert first.call is not None and first.call.purpose == "checks" and first.call.role == "feedback"
    assert [c.source for c in result.checks] == ["derived", "derived"]
    assert result.checks[0].says == "use no commas" and "3 bullet points" in result.checks[1].says
    assert result.iterations[0].verification.passed is True  # the draft passes both
    [derivation] = backend.prompts("feedback", purpose="checks")
    assert derivation.endswith(f"Request: {REQUEST}\nChecks:")  # the request, never a reference


def test_grounding_keeps_what_the_request_states_in_so_many_words():
    [bullets, comma, words, topic] = parse_checks(
        [BULLETS3, NO_COMMA, WORDS300, {"type": "keywords", "words": ["sleeping"]}]
    )
    assert grounded(bullets, REQUEST.lower()) and grounded(comma, REQUEST.lower())
    assert not grounded(words, REQUEST.lower())  # no "300" in the request
    assert not grounded(topic, REQUEST.lower())  # a topic's word is no instruction to use it
    asked = "Write about sleep and include the word 'sleeping' twice."
    assert grounded(topic, asked.lower())


def test_samples_are_ranked_by_the_checks_and_the_feedback_names_each_failed_one():
    backend = FakeBackend(
        {
            "checks": [derived(BULLETS3, NO_COMMA)],
            "generate": [BAD, GOOD, BAD],
            "feedback": ['{"issues": ["Be friendlier."]}'],
            "refine": [GOOD],
        },
        default='{"issues": []}',
    )
    _, _, result = run(backend, samples=3, max_iterations=0, judging=False)
    assert result.output == GOOD  # the only sample that passes both checks
    # one sample, then a round: the failed checks are named in the refinement's feedback
    backend = FakeBackend(
        {"checks": [derived(BULLETS3, NO_COMMA)], "generate": [BAD], "feedback": ['{"issues": ["Be friendlier."]}'],
         "refine": [GOOD]},
        default='{"issues": []}',
    )  # fmt: skip
    _, _, result = run(backend, max_iterations=1)
    feedback = result.iterations[0].feedback
    assert feedback.source == "hybrid" and "- Be friendlier." in feedback.text
    assert (
        "needs exactly 3 bullet points" in feedback.text and "remove the 1 comma" in feedback.text
    )  # its preamble dropped
    assert result.output == GOOD  # the refinement the failed checks asked for


def test_a_request_is_derived_once_per_engine():
    backend = FakeBackend({"checks": [derived(NO_COMMA)]}, default="* a\n* b\n* c")
    engine = SelfRefine("chat", backend, max_iterations=0)
    first, second = engine.run(REQUEST), engine.run(REQUEST)
    assert len(backend.prompts("feedback", purpose="checks")) == 1
    assert first.checks == second.checks and [c.check for c in second.checks] == [NO_COMMA]


def test_given_checks_extend_the_derived_ones_or_replace_them():
    backend = FakeBackend({"checks": [derived(NO_COMMA)]}, default=GOOD)
    _, _, result = run(backend, max_iterations=0, checks=[BULLETS3])
    assert [(c.source, c.check["type"]) for c in result.checks] == [("given", "count"), ("derived", "forbidden_chars")]
    backend = FakeBackend(default=GOOD)
    _, steps, result = run(backend, max_iterations=0, checks=[BULLETS3], derive_checks=False)
    assert [c.source for c in result.checks] == ["given"] and not backend.prompts("feedback", purpose="checks")
    assert isinstance(steps[0], ChecksStep) and steps[0].call is None  # shown, not derived: nothing announced


def test_a_bad_check_is_one_line_before_any_call():
    backend = FakeBackend(default="x")
    with pytest.raises(ConfigError, match=r"^invalid option checks: check 1 \(count\): unit"):
        SelfRefine("chat", backend, checks=[{"type": "count", "unit": "chapters", "relation": "exactly", "n": 2}])
    assert backend.requests == []


def test_an_unusable_derivation_keeps_what_code_read_and_says_so():
    backend = FakeBackend({"checks": ["not json", "still not", "nope"]}, default=GOOD)
    _, steps, result = run(backend, max_iterations=0)
    assert isinstance(steps[1], ChecksStep) and [c.check for c in steps[1].checks] == [NO_COMMA]
    assert "the model gave no usable checks" in steps[1].note and "1 read from the request's wording" in steps[1].note
    assert result.output == GOOD and result.stop_reason.value == "max_iterations"


def test_the_derivation_is_announced_the_moment_its_call_starts():
    # issue 46 item 19: minutes with nothing on screen while the derivation ran
    backend = FakeBackend({"checks": [derived(NO_COMMA)]}, default=GOOD, latency={"feedback": 0.05})
    engine = SelfRefine("chat", backend, max_iterations=0)
    seen: list[tuple[str, int]] = []  # each step's kind, and how many derivation calls the model had then

    async def collect():
        async for step in engine.astream(REQUEST, deltas=True):
            seen.append((step.kind, len(backend.prompts("feedback", purpose="checks"))))

    import asyncio

    asyncio.run(collect())
    assert seen[0] == ("progress", 0)  # said before the call was made, let alone answered
    assert seen[1] == ("checks", 1)


def test_the_live_view_says_the_derivation_has_started(capsys):
    from rich.console import Console

    printed = StepPrinter(Console(force_terminal=False, width=120), live=True)
    backend = FakeBackend({"checks": [derived(NO_COMMA)]}, default=GOOD)
    engine = SelfRefine("chat", backend, max_iterations=0)

    async def show():
        async for step in engine.astream(REQUEST, deltas=True):
            printed(step)

    import asyncio

    asyncio.run(show())
    out = capsys.readouterr().out
    said = out.index("deriving checks from the request…")
    assert said < out.index("checks of every draft (1)") < out.index("draft 0 (generate)")


def test_a_request_is_derived_once_per_model_across_engines():
    # a server makes one engine per set of options, all over the same backend: the second
    # request with the same text (other options) made the derivation call again (1,268 s)
    backend = FakeBackend({"checks": [derived(NO_COMMA)]}, default=GOOD)
    _, first, _ = run(backend, max_iterations=0)
    _, again, result = run(backend, max_iterations=1, samples=2)
    assert len(backend.prompts("feedback", purpose="checks")) == 1  # one derivation call for both runs
    assert not any(isinstance(s, ProgressStep) for s in again)  # no call, nothing to announce
    assert isinstance(again[0], ChecksStep) and again[0].call is None and "no model call" in again[0].note
    assert [c.check for c in result.checks] == [NO_COMMA]
    other = FakeBackend({"checks": [derived(BULLETS3)]}, default=GOOD)  # another model derives its own
    _, _, result = run(other, max_iterations=0)
    assert len(other.prompts("feedback", purpose="checks")) == 1
    assert [c.check["type"] for c in result.checks] == ["forbidden_chars", "count"]
    _, _, _ = run(backend, "Reply in under 40 words as a bulleted list. Do not use any commas.", max_iterations=0)
    assert len(backend.prompts("feedback", purpose="checks")) == 2  # another text: derived again


def test_the_derived_checks_cache_is_bounded():
    backend = FakeBackend(default=GOOD)
    before = dict(DERIVED.entries)
    try:
        DERIVED.entries.clear()
        for i in range(DERIVED.size + 5):
            DERIVED.put(backend, f"request {i}", True, ([], []))
        assert len(DERIVED.entries) == DERIVED.size
        assert DERIVED.get(backend, "request 0", True) is None  # the oldest went first
        assert DERIVED.get(backend, f"request {DERIVED.size + 4}", True) == ([], [])
        assert DERIVED.get(FakeBackend(), f"request {DERIVED.size + 4}", True) is None  # another model's: not reused
    finally:
        DERIVED.entries.clear()
        DERIVED.entries.update(before)


# issue 46 item 7: request text whose stated instructions make a check that cannot be built
LONG_KEYWORD = "x" * 70
UNBUILDABLE = {
    "0th paragraph": (
        "Write two paragraphs about cats. The 0th paragraph must start with the word hello.",
        '{"type": "paragraph_start", "nth": 0, "word": "hello"} (paragraph_start: nth: Input should be '
        "greater than or equal to 1)",
    ),
    "70-character keyword": (
        f'Write a sentence that includes the keyword "{LONG_KEYWORD}".',
        f'{{"type": "keywords", "words": ["{LONG_KEYWORD}"]}} (keywords: words.0: String should have at most 60 '
        "characters)",
    ),
    "40 instructions": (
        "Write a story. " + " ".join(f"Use the word w{i} at least {i + 1} times." for i in range(40)),
        '{"type": "word_frequency", "word": "w32", "relation": "at least", "n": 33} (more than 32 checks: the '
        "first 32 are kept)",
    ),
}


@pytest.mark.parametrize("request_text, said", UNBUILDABLE.values(), ids=UNBUILDABLE)
def test_a_stated_check_that_cannot_be_built_is_dropped_and_said_never_fatal(request_text, said):
    backend = FakeBackend({"checks": ['{"checks": []}'], "generate": ["A fine reply."]}, default='{"issues": []}')
    _, steps, result = run(backend, request_text, max_iterations=0)
    assert result.error is None and result.stop_reason.value == "max_iterations" and result.output == "A fine reply."
    [checked] = [s for s in steps if isinstance(s, ChecksStep)]
    assert said in checked.note  # named with why, in the trace
    assert said in [d.said() for d in result.checks_dropped]  # and in the run's record
    assert len(result.checks) <= 32
    assert checked.note.count("more than 32 checks") <= 1  # one reason said once, the rest counted


def test_a_malformed_check_the_model_lists_is_dropped_with_why():
    bad = {"type": "count", "unit": "chapters", "relation": "exactly", "n": 2}
    backend = FakeBackend({"checks": [derived(NO_COMMA, bad)], "generate": [GOOD]}, default='{"issues": []}')
    _, steps, result = run(backend, max_iterations=0)
    assert [c.check for c in result.checks] == [NO_COMMA]
    [dropped] = result.checks_dropped
    assert dropped.check == bad and dropped.reason.startswith("count: unit: Input should be 'words'")
    [checked] = [s for s in steps if isinstance(s, ChecksStep)]
    assert "1 check(s) read from the request could not be used" in checked.note


# issue 45 item 4: the derivation call cost ~920 tokens a request; the model is asked only
# where code's reading leaves an instruction's wording unread
def test_no_model_call_where_code_read_every_instruction_and_one_where_it_did_not():
    backend = FakeBackend({"checks": [derived(BULLETS3)]}, default=GOOD)
    read_all = "Write a haiku about tea in under 40 words. Do not use any commas."
    _, steps, result = run(backend, read_all, max_iterations=0)
    assert not backend.prompts("feedback", purpose="checks") and not any(isinstance(s, ProgressStep) for s in steps)
    [checked] = [s for s in steps if isinstance(s, ChecksStep)]
    assert checked.call is None and checked.note.startswith("code read every instruction")
    assert [c.check["type"] for c in result.checks] == ["count", "forbidden_chars"]
    plain = "Why is the sky blue?"  # no instruction's wording at all
    run(backend, plain, max_iterations=0)
    assert not backend.prompts("feedback", purpose="checks")
    unread = "Write a haiku about tea in under 40 words, as a bulleted list."  # the list's form: code reads no count
    _, steps, result = run(backend, unread, max_iterations=0)
    [asked] = backend.prompts("feedback", purpose="checks")
    assert asked.endswith(f"Request: {unread}\nChecks:") and isinstance(steps[0], ProgressStep)


def test_instructions_code_now_reads_need_no_model_call():
    # each was left to the model, and the call was skipped where code covered its group already
    backend = FakeBackend({"checks": [derived(BULLETS3)]}, default=GOOD)
    request = (
        'Write a toast. Highlight some key parts with "*". The word cheers should appear 2 to 3 times. '
        "Finish your toast with this exact phrase: To the couple!"
    )
    _, steps, result = run(backend, request, max_iterations=0)
    assert not backend.prompts("feedback", purpose="checks")
    assert [c.check for c in result.checks] == [
        {"type": "count", "unit": "highlights", "relation": "at least", "n": 1, "marker": ""},
        {"type": "ends_with", "phrase": "To the couple!"},
        {"type": "word_frequency", "word": "cheers", "relation": "at least", "n": 2},
        {"type": "word_frequency", "word": "cheers", "relation": "at most", "n": 3},
    ]


@pytest.mark.parametrize(
    "request_text, groups",
    [
        ("Answer in exactly 3 paragraphs.", ()),  # code reads it
        ("Answer in exactly 3 paragraphs and format it in markdown.", ("format",)),
        ("Wrap your entire response in JSON.", ()),
        ('Make sure the letter "q" appears often.', ("words",)),  # no number: code reads no frequency
        ("Tell me about the history of Rome.", ()),  # no instruction's wording
    ],
)
def test_coverage_names_the_wording_code_left_unread(request_text, groups):
    from selfrefine.checks.instructions import build_checks
    from selfrefine.checks.instructions.coverage import uncovered
    from selfrefine.checks.instructions.phrases import stated

    left = uncovered(request_text, build_checks(stated(request_text))[0])
    assert tuple(g for u in left for g in u.groups) == groups
