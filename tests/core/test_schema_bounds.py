"""Issue 46 items 3, 4 and 8: a JSON Schema from an untrusted author is checked once, its
patterns search only what their bound assumed, and a schema or reply that would recurse
without end is refused or named, never a RecursionError.

On c3793c2 a 5,000-property schema was checked three times per request (1-4 s each), a
``pattern`` searched a 100,000-character value whole (seconds per pattern, quadratic), a
``{"$ref": "#"}`` loop and a 150-deep reply to a tree schema raised RecursionError."""

from __future__ import annotations

import json
import time

import pytest
from pydantic import BaseModel

from selfrefine import FakeBackend, SelfRefine, refine
from selfrefine.core import structured
from selfrefine.core.errors import ConfigError
from selfrefine.core.structured import MAX_CHECKED, MAX_VALUE_DEPTH, checked_schema, schema_errors
from selfrefine.engine.run_checks import SchemaCheck


def wide(n: int, title: str) -> dict:
    return {"title": title, "type": "object", "properties": {str(i): {} for i in range(n)}}


def seconds(call) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def test_a_schema_is_checked_once_however_often_it_is_validated():
    schema = wide(5000, "once")
    first = seconds(lambda: checked_schema(schema))
    again = seconds(lambda: [checked_schema(json.loads(json.dumps(schema))) for _ in range(3)])  # an equal copy
    assert again < first / 3, (first, again)  # the run's config and its record found the verdict kept


def test_a_refused_schema_is_refused_again_without_a_second_check():
    schema = {**wide(5000, "refused"), "maxItems": 10**9}
    with pytest.raises(ValueError, match="over 10,000") as caught:
        checked_schema(schema)
    started = time.perf_counter()
    with pytest.raises(ValueError) as again:
        checked_schema(schema)
    assert str(again.value) == str(caught.value) and time.perf_counter() - started < 0.5


def test_the_kept_verdicts_are_bounded():
    for i in range(MAX_CHECKED + 5):
        checked_schema({"title": f"t{i}", "type": "string"})
    assert len(structured._CHECKED) <= MAX_CHECKED


def test_shared_values_are_counted_before_the_schema_is_written_out():
    # a YAML alias bomb in library form: ten levels of ten shared lists is 10**10 values
    bomb: object = ["x"] * 10
    for _ in range(9):
        bomb = [bomb] * 10
    took = seconds(lambda: pytest.raises(ValueError, checked_schema, {"enum": bomb}))
    assert took < 2
    with pytest.raises(ValueError, match="more than 64,000 characters"):
        checked_schema({"enum": bomb})


def test_a_pattern_is_not_searched_through_a_string_longer_than_its_bound():
    schema = {"type": "object", "properties": {"a": {"pattern": "a.*b"}, "b": {"pattern": "b.*c"}}}
    value = {"a": "a" * 100_000, "b": "b" * 100_000}  # c3793c2: whole searches, ~8 s each here
    took = seconds(lambda: schema_errors(schema, value))
    errors = schema_errors(schema, value)
    assert took < 1.5, took
    assert errors == [
        "$.a: a string of 100,000 characters is longer than the 5,000 a pattern is matched against; /a.*b/ was not tried",
        "$.b: a string of 100,000 characters is longer than the 5,000 a pattern is matched against; /b.*c/ was not tried",
    ]
    assert schema_errors(schema, {"a": "xaxxb", "b": "c"}) == ["$.b: 'c' does not match 'b.*c'"]


def test_the_searches_of_one_validation_share_one_bound():
    schema = {"type": "array", "items": {"type": "string", "pattern": "a.*b"}}
    errors = schema_errors(schema, ["a" * 5000] * 40)  # each within the bound, 40 of them over it
    assert len(errors) == 40 and errors[-1].endswith(
        "was not tried: the reply's strings are more than the schema's patterns may search"
    )
    assert errors[0].startswith("$[0]: 'aaaa") and "not tried" not in errors[0]  # the first ones were searched


def test_property_names_are_matched_within_the_bound_too():
    schema = {"type": "object", "patternProperties": {"^x": {"type": "integer"}}, "additionalProperties": False}
    assert schema_errors(schema, {"x1": 1, "y": 2}) == ["$: 'y' does not match any of the regexes: '^x'"]
    assert schema_errors(schema, {"x1": "one"}) == ["$.x1: 'one' is not of type 'integer'"]
    long_name = {"x" * 6000: 1}
    assert schema_errors(schema, long_name) == ["$: a property name is 6,000 characters; the limit is 5,000"]
    plain = {"type": "object", "properties": {"a": {}}, "additionalProperties": False}
    assert schema_errors(plain, {"a": 1, "b": 2, "c": 3}) == [
        "$: Additional properties are not allowed ('b', 'c' were unexpected)"
    ]


@pytest.mark.parametrize(
    ("schema", "says"),
    [
        ({"$ref": "#"}, "$ref '#' loops back to itself"),
        (
            {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"anyOf": [{"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"},
            "loops",
        ),
        ({"$defs": {"a": {"not": {"$ref": "#/$defs/a"}}}, "$ref": "#/$defs/a"}, "loops"),
        ({"$ref": "#/$defs/missing"}, "$ref '#/$defs/missing' points to nothing in the schema"),
    ],
)
def test_a_reference_loop_is_refused_before_any_model_call(schema, says):
    fake = FakeBackend(default="{}")
    with pytest.raises(ConfigError) as caught:  # c3793c2: accepted, then RecursionError on the first draft
        SelfRefine("chat", fake, json_schema=schema)
    assert str(caught.value).startswith("invalid option json_schema: ") and says in str(caught.value)
    assert fake.requests == []


TREE = {
    "$defs": {
        "T": {
            "type": "object",
            "properties": {"v": {"type": "integer"}, "c": {"type": "array", "items": {"$ref": "#/$defs/T"}}},
        }
    },
    "$ref": "#/$defs/T",
}


def deep_tree(levels: int) -> dict:
    tree: dict = {"v": 1, "c": []}
    for _ in range(levels):
        tree = {"v": 1, "c": [tree]}
    return tree


def test_a_recursive_schema_that_descends_is_fine_and_a_deep_reply_is_a_finding():
    assert checked_schema(TREE) is TREE and schema_errors(TREE, deep_tree(10)) == []
    # c3793c2: RecursionError (a 500 through serve) once the reply is 150 levels deep
    assert schema_errors(TREE, deep_tree(150)) == [f"$: the JSON is nested deeper than {MAX_VALUE_DEPTH} levels"]


class Tree(BaseModel):
    value: int
    children: list[Tree] = []


def test_a_deep_reply_to_a_recursive_pydantic_type_is_a_finding_of_the_run():
    node: dict = {"value": 1, "children": []}
    for _ in range(40):  # 81 levels of JSON
        node = {"value": 1, "children": [node]}
    deep, shallow = json.dumps(node), json.dumps({"value": 1, "children": [{"value": 2}]})
    check = SchemaCheck.of(Tree.model_json_schema(), Tree)
    verdict = check.verify(deep)
    assert not verdict.passed and "nested deeper than" in verdict.text
    fake = FakeBackend({"generate": [deep], "refine": [shallow]}, default='{"issues": []}')
    result = refine("chat", "A tree.", fake, response_model=Tree, derive_checks=False)
    assert result.parsed == {"value": 1, "children": [{"value": 2}]}
    assert "nested deeper than" in result.iterations[0].feedback.text
