"""The JSON decode's validity check (spark_groupsource/decode/json_validate.py) against
jsonschema's verdict: the fast path may only ever say yes where jsonschema says yes, on
documents generated for schemas of every keyword family of drafts 4, 6 and 7."""

from __future__ import annotations

from functools import cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_groupsource.decode.json_validate import Validity

D4, D6, D7 = (f"http://json-schema.org/draft-0{n}/schema#" for n in (4, 6, 7))

ORDER = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"}, "customer": {"type": "string", "minLength": 2}, "quantity": {"type": "integer", "minimum": 1},
        "price": {"type": "number", "exclusiveMaximum": 1000}, "paid": {"type": "boolean"},
        "status": {"enum": ["NEW", "PAID", 1, None, True]}, "note": {"type": ["string", "null"]},
        "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True, "maxItems": 3},
        "address": {"type": "object", "properties": {"zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
                    "required": ["zip"], "additionalProperties": False},
    },
    "required": ["id", "customer"],
}
SCHEMAS = {
    "order-7": {"$schema": D7, **ORDER},
    "order-6": {"$schema": D6, **ORDER},
    "order-4": {"$schema": D4, **{**ORDER, "properties": {**ORDER["properties"],
                                                           "price": {"type": "number", "maximum": 1000, "exclusiveMaximum": True}}}},
    "combinators-7": {
        "$schema": D7, "definitions": {"pos": {"type": "integer", "minimum": 0}},
        "type": "object",
        "properties": {
            "a": {"oneOf": [{"$ref": "#/definitions/pos"}, {"type": "string", "maxLength": 3}]},
            "b": {"anyOf": [{"type": "null"}, {"type": "number", "multipleOf": 0.5}]},
            "c": {"allOf": [{"type": "array"}, {"contains": {"const": 1}}]},
            "d": {"not": {"type": "object"}},
            "e": {"if": {"type": "integer"}, "then": {"minimum": 10}, "else": {"type": "string"}},
        },
        "patternProperties": {"^x-": {"type": "boolean"}},
        "propertyNames": {"maxLength": 4},
        "dependencies": {"a": ["b"]},
        "minProperties": 1,
    },
    "arrays-6": {"$schema": D6, "type": "array", "items": [{"type": "integer"}, {"type": "string"}],
                 "additionalItems": {"type": "boolean"}, "uniqueItems": True, "contains": {"type": "integer"}},
}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 20) | st.sampled_from([0.5, 1.0, 2.0, -1.5, 1e300, 10.0])
    | st.sampled_from(["", "a", "ab", "abcd", "12345", "1234x", "NEW", "PAID", "é"]),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.sampled_from(["zip", "a", "b", "c", "d", "e", "x-1", "long-name", "id"]), inner, max_size=4),
    max_leaves=8,
)
KEYS = ["id", "customer", "quantity", "price", "paid", "status", "note", "tags", "address", "a", "b", "c", "d", "e", "x-a"]
documents = json_values | st.dictionaries(st.sampled_from(KEYS), json_values, max_size=9) | st.lists(json_values, max_size=5)


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_the_fast_path_is_compiled_for_drafts_4_to_7(name):
    assert Validity(SCHEMAS[name]).fast is not None


@pytest.mark.parametrize("name", sorted(SCHEMAS))
@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=documents)
def test_verdicts_agree_with_jsonschema(name, doc):
    v = _validity(name)
    want = v.validator.is_valid(doc)
    assert v.is_valid(doc) == want
    assert not (_fast_verdict(v, doc) and not want), f"the fast path accepts what jsonschema rejects: {doc!r}"


@cache
def _validity(name: str) -> Validity:
    return Validity(SCHEMAS[name])


def _fast_verdict(v: Validity, doc) -> bool:
    try:
        v.fast(doc)
        return True
    except Exception:  # noqa: BLE001
        return False


def test_known_edges_agree():
    v = Validity(SCHEMAS["order-7"])
    for doc in ({"id": 1.0, "customer": "ab"},  # an integral float is an integer from draft 6 on
                {"id": True, "customer": "ab"},  # a boolean is not an integer
                {"id": 1, "customer": "ab", "tags": [1, True]},
                {"id": 1, "customer": "ab", "tags": ["a", "a"]},
                {"id": 1, "customer": "ab", "status": 1.0},
                {"id": 1, "customer": "ab", "status": False},
                {"id": 1, "customer": "é"},  # one character
                {"id": 1, "customer": "ab", "address": {"zip": "12345\n"}}):
        assert v.is_valid(doc) == v.validator.is_valid(doc), doc
        assert not (_fast_verdict(v, doc) and not v.validator.is_valid(doc)), doc


def test_without_a_draft_4_to_7_jsonschema_alone_decides():
    # no $schema: jsonschema takes the newest draft (2020-12), whose keywords differ
    assert Validity(ORDER).fast is None
    assert Validity({"$schema": "https://json-schema.org/draft/2020-12/schema", **ORDER}).fast is None
    assert not Validity(ORDER).is_valid({"id": "x", "customer": "ab"})


def test_a_remote_ref_is_never_fetched_by_the_fast_path():
    schema = {"$schema": D7, "type": "object", "properties": {"a": {"$ref": "https://example.invalid/a.json"}}}
    assert Validity(schema).fast is None


def test_the_error_names_what_is_wrong_and_where():
    v = Validity(SCHEMAS["order-7"])
    message, where = v.error({"id": 1, "customer": "ab", "address": {"zip": "1"}})
    assert "does not match" in message and where == "$.address.zip"
