"""Structured output in the library (issue 38 item 3): a JSON Schema (``json_schema``) or a
pydantic type (``response_model=``) is a check of the run's drafts; a failing draft is refined
with its errors, named by JSON path, until it validates; a valid draft stops the run, and
``RunResult.parsed`` is the output's JSON value. Drafts are requested under the schema, with
the shape in their system message. The model is the in-package fake, which records each
request it gets."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel, Field, field_validator

from selfrefine import FakeBackend, SelfRefine, StopReason, refine
from selfrefine.core.errors import ConfigError
from selfrefine.core.structured import json_text, schema_errors
from selfrefine.engine.run_checks import SchemaCheck

PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
    "required": ["name", "age"],
}


class Even(BaseModel):
    name: str
    age: int = Field(ge=0)

    @field_validator("age")
    @classmethod
    def even(cls, age: int) -> int:
        if age % 2:
            raise ValueError("age must be even")
        return age


def model(generate: list[str], refine: list[str]) -> FakeBackend:
    """Scripted drafts; the critic finds no issue (so only the schema's errors drive the loop)."""
    return FakeBackend({"generate": generate, "refine": refine}, default='{"issues": []}')


def test_a_custom_validator_fails_the_first_draft_and_its_error_is_refined_away():
    fake = model(['{"name": "Ana", "age": 3}'], ['{"name": "Ana", "age": 4}'])
    result = refine("chat", "Invent a person.", fake, response_model=Even)
    # the refine prompt shows the validator's own words, at its JSON path, with the value it got
    [prompt] = fake.prompts("refine")
    assert "$.age: age must be even (got 3)" in prompt
    assert result.output == '{"name": "Ana", "age": 4}' and result.parsed == {"name": "Ana", "age": 4}
    # the valid draft stops the run before any critique of it
    assert result.stop_reason is StopReason.VERIFIED and len(result.iterations) == 2
    assert [r.role for r in fake.requests if r.purpose is None] == ["generate", "feedback", "refine"]
    assert result.iterations[0].verification.passed is False and result.iterations[1].verification.passed


def test_json_schema_errors_name_their_path_and_the_fence_around_a_reply_is_dropped():
    fake = model(['Here it is:\n```json\n{"name": "Bo", "age": -3}\n```'], ['{"name": "Bo", "age": 30}'])
    result = refine("chat", "Invent a person.", fake, json_schema=PERSON, derive_checks=False)
    assert result.iterations[0].draft == '{"name": "Bo", "age": -3}'  # the JSON of the reply, as written
    assert "- $.age: -3 is less than the minimum of 0" in fake.prompts("refine")[0]
    assert result.parsed == {"name": "Bo", "age": 30}
    assert result.config.json_schema == PERSON and result.config.select == "verified"
    assert result.checks[-1].source == "schema"


def test_drafts_are_asked_under_the_schema_and_told_its_shape_the_critic_is_not():
    fake = model(['{"name": "Ana"}'], ['{"name": "Ana", "age": 2}'])
    refine("chat", "Invent a person.", fake, json_schema=PERSON, derive_checks=False)
    drafts = [r for r in fake.requests if r.role in ("generate", "refine")]
    assert [r.json_schema for r in drafts] == [PERSON, PERSON]
    first, refined = drafts
    # draft 0 answers the conversation as it is: the shape is its only system turn
    assert first.system is None and first.turns[0].role == "system" and '"minimum":0' in first.turns[0].content
    assert '"minimum":0' in refined.system and refined.system.startswith("You are")  # the task's, then the shape
    [critic] = [r for r in fake.requests if r.role == "feedback"]
    assert critic.json_schema != PERSON and '"minimum"' not in (critic.system or "")


def test_unconstrained_drafts_are_validated_and_still_told_the_shape():
    fake = model(['{"name": "Ana", "age": 2}'], [])
    result = refine("chat", "Invent a person.", fake, json_schema=PERSON, constrained=False, derive_checks=False)
    [draft] = [r for r in fake.requests if r.role == "generate"]
    assert draft.json_schema is None and '"minimum":0' in draft.turns[0].content
    assert result.parsed == {"name": "Ana", "age": 2}


def test_a_run_that_never_validates_returns_its_best_draft_and_no_parsed_value():
    fake = model(["not JSON at all"], ['{"name": "Ana", "age": -1}', '{"name": "Ana", "age": -1, "x": 1}'])
    result = refine("chat", "Invent a person.", fake, json_schema=PERSON, derive_checks=False, max_iterations=2)
    assert result.parsed is None
    # not JSON scores 0, one error 0.5: the returned draft is the JSON one with one error
    assert result.output == '{"name": "Ana", "age": -1}'
    assert result.iterations[0].verification.text.startswith("- $: the reply is not JSON: Expecting value")
    assert json.loads(result.model_dump_json())["parsed"] is None  # said, not left out: the run had a schema


def test_a_run_without_a_schema_records_no_parsed_value_and_asks_for_no_json():
    fake = FakeBackend(default="Hello there.")
    result = refine("chat", "Say hi.", fake, max_iterations=0, derive_checks=False)
    assert "parsed" not in result.model_dump() and "json_schema" not in result.model_dump()["config"]
    assert all(r.json_schema is None for r in fake.requests if r.role == "generate")


def test_samples_under_a_schema_are_each_the_json_of_their_reply():
    fake = FakeBackend(
        {"generate": ['```json\n{"name": "A", "age": 1}\n```', 'Sure! {"name": "B", "age": 2} Done.']},
        default='{"issues": []}',
    )
    result = refine("chat", "Invent a person.", fake, json_schema=PERSON, derive_checks=False, samples=2, judging=False)
    assert [c.draft for c in result.iterations[0].candidates] == ['{"name": "A", "age": 1}', '{"name": "B", "age": 2}']
    assert result.parsed in ({"name": "A", "age": 1}, {"name": "B", "age": 2})


@pytest.mark.parametrize(
    ("schema", "says"),
    [
        ({"type": "nope"}, "not a valid JSON Schema: $.type:"),
        ({"properties": {"a": {"$ref": "https://example.com/a.json"}}}, "only local references"),
        ({"type": "string", "pattern": "(a+)+$"}, "$.pattern: regex /(a+)+$/"),
        ({"type": "array", "maxItems": 10**9}, "$.maxItems: 1000000000 is over 10,000"),
        ([1, 2], "a JSON Schema is a JSON object"),
    ],
)
def test_an_invalid_schema_is_a_config_error_before_any_model_call(schema, says):
    fake = FakeBackend(default="{}")
    with pytest.raises(ConfigError) as caught:
        SelfRefine("chat", fake, json_schema=schema)
    assert str(caught.value).startswith("invalid option json_schema: ") and says in str(caught.value)
    assert fake.requests == []


def test_response_model_and_a_different_json_schema_are_refused_together():
    with pytest.raises(ConfigError, match="give response_model or json_schema, not both"):
        SelfRefine("chat", FakeBackend(default="{}"), response_model=Even, json_schema=PERSON)


def test_response_model_takes_any_pydantic_type_and_its_schema_is_recorded():
    fake = model(['[{"name": "A", "age": 2}, {"name": "B", "age": 4}]'], [])
    result = refine("chat", "Two people.", fake, response_model=list[Even], derive_checks=False)
    assert result.parsed == [{"name": "A", "age": 2}, {"name": "B", "age": 4}]
    assert result.config.json_schema["type"] == "array"


def test_schema_and_instruction_checks_are_one_verdict():
    # a given check and the schema: the draft passes when both pass, scored by their mean
    checks = [{"type": "keywords", "words": ["Ana"]}]
    fake = model(['{"name": "Bo", "age": 1}'], ['{"name": "Ana", "age": 1}'])
    result = refine("chat", "Invent Ana.", fake, json_schema=PERSON, checks=checks, derive_checks=False)
    first, second = (it.verification for it in result.iterations)
    assert first.passed is False and first.score == 0.5 and "Ana" in first.text
    assert second.passed and result.stop_reason is StopReason.VERIFIED


def test_json_text_and_schema_errors():
    assert json_text(' {"a": 1} ') == '{"a": 1}'
    assert json_text("x ```json\n[1, 2]\n``` y") == "[1, 2]"
    assert json_text('The answer: {"a": {"b": [1]}} and {"c": 2}') == '{"a": {"b": [1]}}'
    assert json_text("no json here") == "no json here"
    errors = schema_errors(
        {"type": "object", "properties": {"xs": {"type": "array", "items": {"type": "integer"}}}}, {"xs": [1, "2"]}
    )
    assert errors == ["$.xs[1]: '2' is not of type 'integer'"]
    check = SchemaCheck.of(PERSON)
    assert check.verify('{"name": "A"}').text == "- $: 'age' is a required property"


def test_the_shape_is_told_prefix_stably():
    # the schema is in the system message, the same for every draft of the run: each refine
    # prompt still extends the one before (prefix caches rely on it)
    fake = model(['{"name": "A"}'], ['{"name": "B"}', '{"name": "C"}'])
    refine("chat", "Invent a person.", fake, json_schema=PERSON, derive_checks=False, max_iterations=2, history="full")
    first, second = (r for r in fake.requests if r.role == "refine")
    assert first.system == second.system and second.prompt.startswith(first.prompt)


def test_an_echoed_refinement_of_an_invalid_draft_is_refined_again_not_the_end():
    # under a schema accept is "not_worse": the sampled refiner's echo of an invalid draft is
    # rejected and the draft refined again with a new seed (it ended the run as "no change")
    bad = '{"name": "Ana", "age": 3}'
    fake = model([bad], [bad, '{"name": "Ana", "age": 4}'])
    result = refine("chat", "Invent a person.", fake, response_model=Even, max_iterations=3)
    assert [it.accepted for it in result.iterations] == [True, False, True]
    assert result.parsed == {"name": "Ana", "age": 4} and result.stop_reason is StopReason.VERIFIED
    assert result.config.accept == "not_worse" and result.config.history == "none"
    first, second = (r for r in fake.requests if r.role == "refine")
    assert first.seed != second.seed  # the retry is a new sample
    assert second.prompt.count(bad) == 1  # its prompt shows the draft and its errors, not the echo before it
