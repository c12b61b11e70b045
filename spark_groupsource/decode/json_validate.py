"""Executor side: one JSON document's validity against the reader JSON Schema, fast.

``jsonschema`` is the authority (what confluent-kafka's ``JSONDeserializer`` validates with),
but it costs about 80 us a document for an 11-field object, 90% of the whole JSON decode and
ten times what a pandas UDF spends (bench/decode_formats.py). ``fastjsonschema`` compiles the
schema to Python code and checks the same document in about 4 us. It is used where it means the
same thing and only to say yes:

- only for schemas that name draft 4, 6 or 7 in ``$schema`` (the drafts it implements; without
  ``$schema`` jsonschema takes the newest draft, whose keywords differ), with formats not checked
  and no defaults filled in (jsonschema's defaults, as the deserializer's), and no ``$ref``
  fetched over the network (a schema whose compile would fetch one is left to jsonschema, and
  so is a schema with schema references to other subjects);
- a document it rejects is judged again by jsonschema, whose verdict stands and whose error
  names what is wrong, so a difference between the two can only ever accept a document
  jsonschema would too (tests/unit/decode/test_json_validate.py compares their verdicts on
  generated documents).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from spark_groupsource.decode.json_types import validator_of

__all__ = ["Validity"]

#: the ``$schema`` URIs (without a trailing "#") of the drafts fastjsonschema implements
FAST_DRAFTS = frozenset(f"{scheme}://json-schema.org/draft-0{n}/schema" for scheme in ("http", "https") for n in (4, 6, 7))


def _no_fetch(uri: str) -> Any:
    raise LookupError(f"not fetched: {uri}")


def _fast(schema: Any) -> Callable[[Any], Any] | None:
    """fastjsonschema's compiled check of ``schema``, or None where it would not mean the same."""
    if not isinstance(schema, dict) or str(schema.get("$schema", "")).rstrip("#") not in FAST_DRAFTS:
        return None
    try:
        import fastjsonschema

        handlers = {scheme: _no_fetch for scheme in ("http", "https", "ftp", "file")}
        return fastjsonschema.compile(schema, handlers=handlers, use_default=False, use_formats=False)
    except Exception:  # noqa: BLE001 - its JsonSchemaDefinitionException, a refused fetch: jsonschema decides
        return None


class Validity:
    """``is_valid(doc)`` and, for an invalid one, ``error(doc)``: (message, JSON path)."""

    def __init__(self, schema: Any, resources: Mapping[str, Any] | None = None):
        self.validator = validator_of(schema, resources)  # checks the schema (SchemaError if bad)
        self.fast = None if resources else _fast(schema)

    def is_valid(self, doc: Any) -> bool:
        fast = self.fast
        if fast is not None:
            try:
                fast(doc)
                return True
            except Exception:  # noqa: BLE001 - JsonSchemaValueException, or its code on an odd value
                pass
        return self.validator.is_valid(doc)

    def error(self, doc: Any) -> tuple[str, str]:
        from jsonschema.exceptions import best_match

        err = best_match(self.validator.iter_errors(doc))
        return (err.message, err.json_path) if err is not None else ("invalid", "$")
