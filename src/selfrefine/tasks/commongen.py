"""Constrained generation (CommonGen-Hard style): one sentence that uses every concept.

Feedback names the missing concepts and any commonsense problem, "NONE" when fine; the
loop stops when both are NONE. Feedback is constrained to a small JSON object where the
backend supports it, and a plain "Missing: …/Commonsense: …" text form is parsed too.
The metric is concept coverage computed by code with lemmatisation (lemminflect), never
taken from the model's feedback; the same check is the task's verifier, beside a second one
by code: the output reads as one scene, not the concepts listed one after another
(:mod:`.scene`; :func:`is_list_like` counts the returned outputs it flags).
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

from ..checks.incomplete import INCOMPLETE_METRIC, is_refusal, refusal_check
from ..core.errors import FeedbackParseError, InputError
from ..core.records import Feedback, Finding, Verification
from ..task.task import LOOP_BEST, Capabilities, Task, TaskDefaults
from .parsing import json_object
from .scene import scene_problem

FEEDBACK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        # length caps keep a tiny model from rambling past max_tokens and cutting the JSON
        "missing_concepts": {"type": "array", "items": {"type": "string", "maxLength": 40}, "maxItems": 30},
        "commonsense": {"type": "string", "maxLength": 200},
    },
    "required": ["missing_concepts", "commonsense"],
}

_WORD = re.compile(r"[a-z]+")
_NONE = {"", "none", "none.", "n/a", "no", "nothing"}


def parse_concepts(text: str) -> list[str]:
    """Concepts from "a, b, c", "a b c" or a JSON list; lower-cased, de-duplicated."""
    text = text.strip()
    items: list[str]
    if text.startswith("["):
        try:
            items = [str(x) for x in json.loads(text)]
        except (ValueError, TypeError):
            raise InputError("concepts look like a JSON list but do not parse") from None
    else:
        items = re.split(r"[,\n;]+" if re.search(r"[,\n;]", text) else r"\s+", text)
    concepts = [c.strip().lower() for c in items if c.strip()]
    return list(dict.fromkeys(concepts))


@functools.lru_cache(maxsize=4096)
def lemmas(word: str) -> frozenset[str]:
    """Every lemma of a word under any part of speech, plus the word itself.

    lemminflect ships its lemma tables inside the PyPI package, so this works offline.
    """
    from lemminflect import getAllLemmas, getAllLemmasOOV

    found = {word}
    for group in (getAllLemmas(word), getAllLemmasOOV(word, upos="NOUN"), getAllLemmasOOV(word, upos="VERB")):
        for forms in group.values():
            found.update(f.lower() for f in forms)
    return frozenset(found)


def concept_coverage(concepts: list[str], sentence: str) -> float:
    """Share of concepts that the sentence uses, matching words by lemma.

    "cut" matches "cutting", "knife" matches "knives", "cry" matches "cried". A multi-word
    concept needs its words, lemmatised, in order and adjacent.
    """
    if not concepts:
        return 0.0
    words = [lemmas(w) for w in _WORD.findall(sentence.lower())]
    return sum(_uses(concept, words) for concept in concepts) / len(concepts)


def _uses(concept: str, words: list[frozenset[str]]) -> bool:
    parts = [lemmas(p) for p in _WORD.findall(concept.lower())]
    if not parts:
        return False
    n = len(parts)
    return any(all(parts[k] & words[i + k] for k in range(n)) for i in range(len(words) - n + 1))


def missing_concepts(concepts: list[str], sentence: str) -> list[str]:
    return [c for c in concepts if concept_coverage([c], sentence) == 0.0]


_QUOTED = re.compile(r'"([a-z]+)"')
# words an instruction may quote that are no example ("joined by commas, "while" or "and"")
_FUNCTION_WORDS = frozenset(
    "a an and as at but by for from in into is it of on or so the then to when where while with".split()
)
_APPROVAL = re.compile(
    r"\b(correct|makes? (perfect )?sense|sensible|fine|coherent|logical|no (commonsense )?(problems?|issues?)|"
    r"nothing to fix|does not (need|require)|doesn'?t (need|require))\b",
    re.I,
)
_OBJECTION = re.compile(
    r"\b(but|however|although|though|should|instead|cannot|can'?t|could|would|incorrect|illogical|unclear|"
    r"wrong|odd|strange|awkward|unrealistic|impossible|not (make sense|correct|logical|sensible|coherent)|"
    r"doesn'?t make sense|fix|replace|change|rewrite|remove|add|missing|lacks?)\b",
    re.I,
)


def repeats(verdict: str, draft: str) -> bool:
    """Whether a verdict only repeats the sentence (a small critic echoes its input): it names
    no problem, and passed on it tells the refiner nothing."""

    def norm(text: str) -> str:
        return " ".join(_WORD.findall(text.lower()))

    v, d = norm(verdict), norm(draft)
    return bool(v) and bool(d) and (v in d or (d in v and len(v) <= len(d) + 20))


def approves(verdict: str) -> bool:
    """Whether a commonsense verdict says in prose that the sentence is fine ("The sentence
    is correct and does not require any improvement."): a small critic writes that instead of
    "NONE", and read as a problem it sends a sound sentence to the refiner. A verdict with
    any objection or fix in it is not an approval."""
    return bool(_APPROVAL.search(verdict)) and not _OBJECTION.search(verdict)


def example_words(sources: list[str]) -> frozenset[str]:
    """The words a prompt's own examples show the model: the concepts of its example cases
    ("Concepts: ski, mountain, …" in the fixed text) and the words its instructions quote
    ("cut"); the names of the feedback's JSON fields are not examples."""
    words: set[str] = set()
    for source in sources:
        for line in source.splitlines():
            if "{{" in line or "{%" in line:
                continue  # the case at hand, not an example
            if line.startswith("Concepts:"):
                words.update(parse_concepts(line.removeprefix("Concepts:")))
            elif "{" not in line:  # a JSON example line names fields, not words
                words.update(_QUOTED.findall(line))
    return frozenset(words - set(FEEDBACK_SCHEMA["properties"]) - _FUNCTION_WORDS)


def leaked_words(
    asked: list[str], commonsense: str, concepts: list[str], draft: str, examples: frozenset[str]
) -> list[str]:
    """What a critique asks for that is neither in the input nor in the draft: a "missing
    concept" that is not one of the input's, and a word of the prompt's own examples in its
    commonsense verdict (the "goggles" and "cut" failures: the critic copies its examples)."""

    def used(word: str, text: str) -> bool:
        return mentions(text, word)

    given = " ".join(concepts)
    leaks = [m for m in asked if m.strip().lower() not in _NONE and not any(used(c, m) for c in concepts)]
    for word in sorted(examples):  # "cut", "cuts" and "cutting" name one word: counted once
        if used(word, commonsense) and not used(word, given + " " + draft) and not any(used(k, word) for k in leaks):
            leaks.append(word)
    return leaks


def verdict_leaks(
    asked: list[str], commonsense: str, concepts: list[str], draft: str, examples: frozenset[str]
) -> list[str]:
    """The leaked words (:func:`leaked_words`) that the commonsense verdict itself names."""
    return [w for w in leaked_words(asked, commonsense, concepts, draft, examples) if mentions(commonsense, w)]


def mentions(text: str, word: str) -> bool:
    return concept_coverage([word], text) > 0


class CommonGen(Task):
    name = "commongen"
    description = "Constrained generation: one sentence that uses every concept (CommonGen-Hard)"
    prompt_dir = "commongen"
    metric_name = "concept coverage (code)"
    stop_description = (
        "feedback reports no missing concept and no commonsense problem "
        "(with the code's checks, and the sentence reads as one scene, not a list)"
    )
    extra_variables = frozenset({"concepts"})
    defaults = TaskDefaults(
        # short: a one-sample call costs about what DSPy's does (docs/frontier.md); the
        # longer rules cost ~60 tokens a call and measured no better (rows outside the frontier's)
        system="You are a careful writer. Reply only in the format asked for.",
        generic_feedback="Improve the sentence.",
        temperature={"generate": 0.7, "feedback": 0.7, "refine": 0.7},  # the paper's text-task default
        # several samples: as DSPy's BestOfN draws them (docs/peers.md), for more varied drafts
        sampling_temperature=1.0,
        max_tokens={"generate": 160, "feedback": 200, "refine": 160},  # 20-30 concepts need room
        feedback_schema=FEEDBACK_SCHEMA,
        stop_sequences={role: ["\nConcepts:"] for role in ("generate", "feedback", "refine")},
        best=LOOP_BEST,  # measured on this task (docs/frontier.md)
    )
    capabilities = Capabilities(verifier=True)
    judge_aspects = ("sense",)
    one_line_input = True  # `run` refuses several lines: eval --data FILE takes one input a line

    def prepare_input(self, text: str) -> str:
        text = super().prepare_input(text)
        concepts = parse_concepts(text)
        if not concepts:
            raise InputError("commongen needs at least one concept, e.g. 'dog, frisbee, catch'")
        return ", ".join(concepts)

    def context(self, input: str) -> dict[str, Any]:
        return {"concepts": parse_concepts(input)}

    def parse_draft(self, text: str) -> str:
        text = re.sub(r"^\s*(improved sentence|sentence)\s*:\s*", "", text.strip(), flags=re.I)
        first = text.strip().splitlines()[0].strip() if text.strip() else ""
        return super().parse_draft(first)

    def parse_feedback(self, text: str, *, input: str, draft: str) -> Feedback:
        raw = text.strip()
        if not raw:
            raise FeedbackParseError("the model returned empty feedback")
        missing, commonsense = _parse_json(raw) or _parse_lines(raw)
        concepts = parse_concepts(input)
        named = list(dict.fromkeys(m.strip() for m in missing if m.strip().lower() not in _NONE))
        # Only this input's concepts count, in the input's order and spelling: a small critic
        # repeats names in a loop or names words from elsewhere (an example's concepts)
        known = [c for c in concepts if any(concept_coverage([c], m) for m in named)]
        others = [m for m in named if not any(concept_coverage([c], m) for c in concepts)]
        commonsense = " ".join(commonsense.split()) or "NONE"
        # a verdict that names a word of the prompt's examples, or a "missing concept" the
        # input does not have, absent from the draft too, is not about this sentence: the
        # refiner would write it in ("a cut of the towel")
        copied = verdict_leaks(named, commonsense, concepts, draft, self.example_words)
        dropped = commonsense if copied else None
        commonsense = "NONE" if copied or approves(commonsense) or repeats(commonsense, draft) else commonsense
        sensible = commonsense.lower() in _NONE
        return Feedback(
            # the refiner sees the cleaned critique; the raw reply stays in the call record
            text=json.dumps({"missing_concepts": known, "commonsense": commonsense}),
            done=not known and sensible,
            # the critic's own view of coverage: drives "best" selection, not the metric
            total=round(1 - len(known) / len(concepts), 4) if concepts else None,
            fields={
                "missing_concepts": known,
                **({"not_concepts": others} if others else {}),  # named, but not the input's
                "commonsense": commonsense,
                **({"copied_from_examples": copied, "dropped_commonsense": dropped} if copied else {}),
            },
        )

    @functools.cached_property
    def example_words(self) -> frozenset[str]:
        """The words of this task's own prompt examples (see :func:`example_words`)."""
        return example_words([t.source for t in self.declared.templates.values()])

    def critique_parts(self, raw: str) -> tuple[list[str], str]:
        """A critic's raw reply as (the concepts it calls missing, its commonsense verdict);
        ([], "") when it does not parse."""
        try:
            return _parse_json(raw) or _parse_lines(raw)
        except FeedbackParseError:
            return [], ""

    def critique_leaks(self, raw: str, *, input: str, draft: str) -> list[str]:
        """What a critic's raw reply asks for that is neither in the input nor in the draft
        (the count benchmarks/critique_leaks.py keeps; [] when the reply does not parse)."""
        asked, commonsense = self.critique_parts(raw)
        return leaked_words(asked, commonsense, parse_concepts(input), draft, self.example_words)

    def metric(self, input: str, output: str, reference: Any = None) -> float:
        if is_refusal(output):  # "I cannot write a sentence with dog, ball" names every concept
            return INCOMPLETE_METRIC
        return concept_coverage(parse_concepts(input), output)

    def combine(self, critique: Feedback, check: Verification, *, input: str, draft: str) -> Feedback:
        """Hybrid: the missing concepts counted by code replace the critic's list (a small
        critic misses "cried" for "cry"); the commonsense verdict stays the model's. A draft
        that fails the scene check is not done; the feedback names that check (and its repair)
        once no concept is missing: one instruction at a time, adding concepts first, as a
        focused refinement orders them (the paper's round on a list that misses concepts is
        asked what it was asked before)."""
        if critique.parse_error is not None:
            return super().combine(critique, check, input=input, draft=draft)
        concepts = parse_concepts(input)
        missing = missing_concepts(concepts, draft)
        commonsense = str(critique.fields.get("commonsense") or "NONE")
        scene = next((f for f in check.findings if f.check == SCENE_CHECK), None)
        said = {"scene": scene_said(scene)} if scene is not None and not missing else {}
        return critique.model_copy(
            update={
                "text": json.dumps({"missing_concepts": missing, "commonsense": commonsense, **said}),
                "done": not missing and commonsense.lower() in _NONE and scene is None,
                "total": check.score,
                "fields": {
                    **critique.fields,
                    "missing_concepts": missing,
                    "critic_missing": critique.fields.get("missing_concepts", []),
                    **said,
                },
                "source": "hybrid",
                "verification": check,
            }
        )

    def verify(self, input: str, draft: str) -> Verification:
        """Missing concepts counted by code, and whether the draft reads as one scene (not a
        list: :func:`scene_finding`); commonsense is left to the model's critique.

        The scene check fails the draft (``passed``) and says its repair, so a focused
        refinement acts on it and a run does not stop on a list. Its share of the score is
        half a concept's (:data:`SCENE_SHARE`): drafts rank by score first (engine/scoring),
        so a scene outranks a list that uses the same concepts (without it the two tie and
        the earlier, the list, is returned) but never one that uses a concept more; a scene
        rewrite that drops a concept scores lower and is not kept (never worse), and a list
        made of a scene newly fails a check that passed, so it is not kept either. Its
        thresholds never flag one sentence with fewer than ten pieces and no run of six short
        listed fragments (:mod:`.scene`), so a good one-sentence output passes.
        """
        refused = refusal_check(draft)
        if refused is not None:
            return refused
        concepts = parse_concepts(input)
        missing = missing_concepts(concepts, draft)
        text = "Missing concepts (checked by code): " + (", ".join(missing) if missing else "NONE")
        findings = concept_findings(concepts, missing)
        score = concept_coverage(concepts, draft)
        scene = scene_finding(draft, concepts)
        if scene is not None:
            text += "\n" + scene.text
            findings.append(scene)
            score -= SCENE_SHARE / max(len(concepts), 1)
        return Verification(text=text, passed=not findings, score=score, findings=findings)


SCENE_CHECK = "one scene in one or two sentences, not a list"
SCENE_SHARE = 0.5  # of one concept's share of the score: what a list loses against a scene
SCENE_REPAIR = "Rewrite it as one or two sentences that describe a single scene using every concept; no lists."


SCENE_FOUND = "Not one scene (checked by code): "


def scene_finding(text: str, concepts: list[str]) -> Finding | None:
    """The failed scene check of a text that lists its concepts instead of describing one
    scene (:func:`~.scene.scene_problem` says how), with its repair; None when it reads as one."""
    problem = scene_problem(text, lambda fragment: concept_coverage(concepts, fragment) > 0)
    if problem is None:
        return None
    return Finding(check=SCENE_CHECK, text=SCENE_FOUND + problem.text, repair=SCENE_REPAIR)


def scene_said(finding: Finding) -> str:
    """A scene finding as the critique's feedback says it: what was found, then its repair."""
    return f"{finding.text.removeprefix(SCENE_FOUND)}. {finding.repair or SCENE_REPAIR}"


def is_list_like(text: str, concepts: list[str] | str) -> bool:
    """Whether the scene check flags ``text`` as a list of its concepts (a line or item per
    concept, more than two sentences, a chain of clauses, a run of short listed fragments),
    for the share of returned outputs it flags. ``concepts``: a list, or an input as
    :func:`parse_concepts` reads it."""
    words = parse_concepts(concepts) if isinstance(concepts, str) else [c.strip().lower() for c in concepts]
    return scene_finding(text, words) is not None


CONCEPT_GROUP = 5  # concepts per check of their own where an input has more (concept_findings)


def concept_findings(concepts: list[str], missing: list[str]) -> list[Finding]:
    """The missing concepts as failed checks, one per group of :data:`CONCEPT_GROUP` of the
    input's concepts in its order (one check, "use every concept", where the input has no
    more): a focused refinement asks for one small group at a time, as a small model can do
    it (asked for 20 words at once, the default model twice returned its draft unchanged,
    on dev row 0), and a repair is kept only when its whole group is used and no complete
    group loses a concept. Each group's check is named by its concepts, the same in every draft."""
    groups = [concepts[i : i + CONCEPT_GROUP] for i in range(0, len(concepts), CONCEPT_GROUP)]
    absent = set(missing)
    findings = []
    for group in groups:
        lacking = [c for c in group if c in absent]
        if lacking:
            check = "use every concept" if len(groups) == 1 else f"use the concepts {_and(group)}"
            text = "Missing concepts (checked by code): " + ", ".join(lacking)
            findings.append(Finding(check=check, text=text, repair=concepts_repair(lacking)))
    return findings


def _and(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def concepts_repair(missing: list[str]) -> str:
    """The repair of a sentence that misses concepts: "Use the words 'ball' and 'kick' in the sentence." """
    said = [f"'{w}'" for w in missing]
    return f"Use the {'word' if len(said) == 1 else 'words'} {_and(said)} in the sentence; keep it one natural scene."


def _parse_json(raw: str) -> tuple[list[str], str] | None:
    if "{" not in raw:
        return None
    data = json_object(raw, cut_off_is_error=True)
    if data is None:
        raise FeedbackParseError("feedback JSON does not parse")
    if "missing_concepts" not in data:
        raise FeedbackParseError("feedback JSON lacks 'missing_concepts'")
    missing = data.get("missing_concepts")
    if isinstance(missing, str):
        missing = [m for m in re.split(r"[,;]", missing)]
    if not isinstance(missing, list):
        raise FeedbackParseError("'missing_concepts' must be a list")
    return [str(m).strip() for m in missing if str(m).strip()], str(data.get("commonsense", ""))


def _parse_lines(raw: str) -> tuple[list[str], str]:
    miss = re.search(r"(?:concepts?\s+)?missing(?:\s+concepts?)?\s*:\s*(.*)", raw, re.I)
    sense = re.search(r"commonsense(?:\s+problems?)?\s*:\s*(.*)", raw, re.I)
    if miss is None and sense is None:
        raise FeedbackParseError("feedback names neither missing concepts nor commonsense problems")
    missing = [m.strip() for m in re.split(r"[,;]", miss.group(1))] if miss else []
    return [m for m in missing if m], sense.group(1) if sense else ""
