"""The house's prompt rules, held for every built-in task (docs/writing-a-task.md, "The
prompt rules of a built-in task"): prompts are prefix-stable (few-shot block, then the
example, then the history in order), every role starts with the same few-shot block, and
the no-feedback template shows the drafts without any feedback.

Prefix caches (llama.cpp's KV cache, llama-server's slots, vLLM's prefix cache) only help
when iteration t+1's prompt extends iteration t's byte for byte and every example's prompt
starts with the same few-shot block. A task that breaks a rule says so in :data:`EXCEPTIONS`,
with why; an exception the task does not need fails like a broken rule.
"""

from __future__ import annotations

import itertools
import json
import re

import pytest

from selfrefine import SelfRefine
from selfrefine.backends.base import CompletionRequest
from selfrefine.backends.fake import FakeBackend
from selfrefine.checks.instructions import build_checks
from selfrefine.checks.instructions.coverage import uncovered
from selfrefine.checks.instructions.phrases import stated
from selfrefine.engine.derivation import TEMPLATE
from selfrefine.tasks import get_task

PROGRAM = "n = int(input())\ntotal = 0\nfor i in range(n):\n    total += i\nprint(total)"

INPUTS = {
    "sentiment": ["positive: The soup was cold and the room was loud.", "negative: Friendly staff and fresh bread."],
    "dialogue": [
        "User: I adopted a puppy today!",
        "User: My exam is tomorrow.\nSystem: Good luck!\nUser: I am nervous.",
    ],
    "codeopt": [PROGRAM, PROGRAM.replace("total += i", "total += i * i")],
    "readability": [PROGRAM, "a=int(input())\nprint(a*2)"],
    "gsm8k": [
        "Tom has 3 apples and buys 4 more. How many apples does he have?",
        "A pen costs $2. How much do 5 pens cost?",
    ],
    "acronym": ["Scalable Tree Boosting for Accurate Ranking", "Learning to Reason with Graph Networks"],
    "commongen": ["dog, frisbee, park, catch", "kitchen, knife, onion, cut"],
    "chat": ["Why is the sky blue?", "System: Answer in French.\n\nUser: How are you? Reply as a bulleted list."],
    "toxicity": ["Shut up, you idiot, the bus is late again.", "This damn app crashes every time I open it."],
    "story": ["A baker finds a loaf missing every morning.", '{"premise": "A robot escapes.", "elements": ["door"]}'],
}

ACRONYM_RATINGS = {
    k: {"reason": "could be better", "score": 2}
    for k in ("ease_of_pronunciation", "ease_of_spelling", "positive_connotation", "relation_to_title", "well_known")
}
DIALOGUE_RATINGS = {
    **{k: 1 for k in ("relevant", "informative", "interesting", "consistent", "helpful", "engaging")},
    **{k: 1 for k in ("specific", "safe", "user_understanding", "fluent")},
    "reason": "Too short; ask a question.",
}


def draft(task: str, n: int) -> str:
    """A parseable draft that differs on every call (so "no change" never stops the loop)."""
    return {
        "sentiment": f"The soup was lovely and the room was calm, visit {n}.",
        "dialogue": f"That is great news, number {n}! What is its name?",
        "codeopt": f"n = int(input())\nprint(n * (n - 1) // 2 + {n} - {n})",
        "readability": f"count = int(input())\nprint(count * 2 + {n} - {n})",
        "gsm8k": f"def solution():\n    apples = 3 + 4 + {n} - {n}\n    return apples",
        "acronym": ["STAR", "TREX", "BOAR", "RANK", "STORM", "BEAR"][n % 6],
        "commongen": f"The dog caught the frisbee in the park, time {n}.",
        "chat": f"Sunlight scatters off air molecules, blue most of all (take {n}).",
        "toxicity": f"Please be patient, the bus is late again (take {n}).",
        "story": f"The baker waited by the oven, night {n}, and saw a cat take the bread.",
    }[task]


def feedback(task: str) -> str:
    """Parseable feedback that never says stop."""
    return {
        "sentiment": 'Not fully positive. "cold" is negative. Praise the soup.',
        "dialogue": json.dumps(DIALOGUE_RATINGS),
        "codeopt": "# the loop is O(n); use the closed form\n# this code is slow",
        "readability": "Rename n to count.",
        "gsm8k": "# the sum is right but check the units\n# it is wrong",
        "acronym": json.dumps(ACRONYM_RATINGS),
        "commongen": json.dumps({"missing_concepts": ["catch"], "commonsense": "NONE"}),
        "chat": json.dumps({"issues": ["Too vague: name Rayleigh scattering."]}),
        "toxicity": 'Still rude. "be patient" sounds curt: say it kindly.',
        "story": json.dumps(
            {k: {"reason": "could be better", "score": 3} for k in ("coherence", "constraints", "interest", "premise")}
        ),
    }[task]


def scripted(task: str) -> FakeBackend:
    counter = itertools.count()

    def reply(request: CompletionRequest) -> str:
        return feedback(task) if request.role == "feedback" else draft(task, next(counter))

    return FakeBackend(default=reply)


def static_head(source: str) -> str:
    """The template's text before its first variable or tag: the few-shot block."""
    return re.split(r"\{\{|\{%", source, maxsplit=1)[0].strip()


TASKS = sorted(INPUTS)

# the rules, by the name an exception gives
RULES = {
    "prefix-stable": "refine prompt t+1 extends prompt t byte for byte, the history in order",
    "few-shot:generate": "the generate prompt starts with the template's few-shot block, the same for every example",
    "few-shot:feedback": "the feedback prompt starts with the template's few-shot block, the same for every example",
    "few-shot:refine": "the refine prompt starts with the template's few-shot block, the same for every example",
    "no-feedback": "refine_nofeedback starts with its few-shot block and shows the drafts in order, no feedback",
}
# task -> rule -> why it breaks it: the one place a built-in task is let off a rule
EXCEPTIONS: dict[str, dict[str, str]] = {
    "chat": {
        "few-shot:generate": "its first draft answers the user's own conversation as the user wrote it (issue 38): "
        "the prompt is theirs, with no block of ours in front",
    },
}


def excused(name: str, rule: str) -> bool:
    return rule in EXCEPTIONS.get(name, {})


def hold(name: str, rule: str, kept: bool) -> None:
    """The task keeps the rule, or breaks it as its exception says (an exception holds only
    while the task needs it)."""
    if excused(name, rule):
        assert not kept, f"{name} keeps the rule {rule}: drop its exception"
    else:
        assert kept, f"{name} breaks the rule {rule}: {RULES[rule]}"


def test_every_exception_names_a_built_in_task_a_rule_and_a_reason():
    for name, broken in EXCEPTIONS.items():
        assert name in INPUTS, f"{name}: not a built-in task"
        for rule, why in broken.items():
            assert rule in RULES, f"{name}: {rule!r} is not a rule ({', '.join(RULES)})"
            assert len(why.split()) >= 5, f"{name} breaks {rule!r}: say why"


def test_every_builtin_task_is_checked():
    from selfrefine.tasks import BUILTIN_TASKS

    assert set(BUILTIN_TASKS) == set(INPUTS)


@pytest.mark.parametrize("name", TASKS)
@pytest.mark.parametrize("feedback_mode", ["actionable", "none"])
def test_refine_prompt_extends_the_previous_one_byte_for_byte(name, feedback_mode):
    task = get_task(name)
    backend = scripted(name)
    result = SelfRefine(task, backend, max_iterations=3, feedback_mode=feedback_mode).run(INPUTS[name][0])
    refines = backend.prompts("refine")
    assert len(refines) == 3, (result.stop_reason, result.error)
    extends = all(
        later.startswith(earlier) and len(later) > len(earlier) for earlier, later in zip(refines, refines[1:])
    )
    # the history really is in the prompt, in order
    positions = [refines[-1].rfind(d) for d in result.drafts[:3]]
    hold(name, "prefix-stable", extends and -1 not in positions and positions == sorted(positions))


@pytest.mark.parametrize("name", TASKS)
def test_every_role_starts_with_the_same_few_shot_block_for_every_example(name):
    task = get_task(name)
    backend = scripted(name)
    engine = SelfRefine(task, backend, max_iterations=2)
    for text in INPUTS[name]:
        engine.run(text)
    for role in ("generate", "feedback", "refine"):
        head = static_head(task.declared.templates[role].source)
        prompts = backend.prompts(role)
        assert len(prompts) >= 2
        hold(name, f"few-shot:{role}", len(head) > 100 and all(prompt.startswith(head) for prompt in prompts))
    # chat: its checks are derived from each request whose instruction wording code leaves unread
    derivations = backend.prompts("feedback", purpose="checks")
    head = static_head(TEMPLATE.source)
    asked = [t for t in INPUTS[name] if uncovered(t, build_checks(stated(t))[0])] if name == "chat" else []
    assert all(p.startswith(head) for p in derivations) and len(derivations) == len(asked)
    assert len(asked) == (1 if name == "chat" else 0)  # the bulleted list: code reads no count there


@pytest.mark.parametrize("name", TASKS)
def test_the_no_feedback_template_shows_the_drafts_and_no_feedback(name):
    task = get_task(name)
    template = task.declared.templates["refine_nofeedback"]  # the paper's ablation without feedback
    first, second = draft(name, 0), draft(name, 1)
    history = [{"draft": first, "feedback": "FEEDBACK-MARK"}]
    prompt = task.render("refine_nofeedback", INPUTS[name][0], draft=second, feedback="FEEDBACK-MARK", history=history)
    head = static_head(template.source)
    shown = first in prompt and second in prompt and prompt.index(first) < prompt.rindex(second)
    generic = task.declared.defaults.generic_feedback  # feedback_mode "generic": a fixed note of the task's own
    kept = len(head) > 100 and prompt.startswith(head) and "FEEDBACK-MARK" not in prompt and shown
    hold(name, "no-feedback", kept and bool(generic) and generic != "Improve the answer.")
