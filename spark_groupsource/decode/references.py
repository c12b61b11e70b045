"""Schema references (a schema using types registered under other subjects), per format, pure.

The registry module fetches a schema's closure (:class:`.registry.ResolvedSchema`); this module
turns it into what each format reads with, as confluent-kafka's deserializers do:

- Avro: the referenced schemas' named types (under the reference's name and each type's full
  name, as ``_resolve_named_schema`` stores them), put into the referring schema at their first
  use (:func:`avro_schema`): one self-contained schema, what fastavro's ``load_schema`` with a
  repository makes of it too. Everything downstream (Spark type, fastavro, the C decoder)
  then reads a plain schema.
- JSON Schema: each referenced schema a resource under the reference's name, its ``$ref`` URI
  (:func:`json_resources`), as the deserializer's ``referencing.Registry``.
- Protobuf: each referenced file added to one descriptor pool under its import path
  (:func:`.protobuf_types.pool_of`).
"""

from __future__ import annotations

import json
from typing import Any

from spark_groupsource.decode.registry import Referenced

__all__ = ["avro_schema", "avro_text", "json_resources"]

_AVRO_PRIMITIVES = frozenset(("null", "boolean", "int", "long", "float", "double", "bytes", "string"))
_AVRO_NAMED = ("record", "error", "enum", "fixed")


def _full_name(name: str, namespace: str | None) -> str:
    return name if "." in name or not namespace else f"{namespace}.{name}"


def _namespace_of(full: str) -> str:
    return full.rsplit(".", 1)[0] if "." in full else ""


def _definitions(schema: Any, namespace: str | None, out: dict[str, Any]) -> None:
    """Every named type defined in ``schema`` (nested ones too) by full name."""
    if isinstance(schema, list):
        for s in schema:
            _definitions(s, namespace, out)
    elif isinstance(schema, dict):
        kind = schema.get("type")
        if kind in _AVRO_NAMED and isinstance(schema.get("name"), str):
            full = _full_name(schema["name"], schema.get("namespace", namespace))
            out.setdefault(full, (schema, _namespace_of(full)))
            for f in schema.get("fields") or ():
                if isinstance(f, dict):
                    _definitions(f.get("type"), _namespace_of(full), out)
        elif kind in ("array", "map"):
            _definitions(schema.get("items" if kind == "array" else "values"), namespace, out)
        elif isinstance(kind, (dict, list)):
            _definitions(kind, namespace, out)


def avro_schema(schema: Any, references: tuple[Referenced, ...]) -> Any:
    """``schema`` (parsed JSON) with every named type it takes from ``references`` defined at its
    first use; as it is without references."""
    if not references:
        return schema
    named: dict[str, Any] = {}
    for ref in references:
        parsed = json.loads(ref.schema_str)
        found: dict[str, Any] = {}
        _definitions(parsed, None, found)
        named.update(found)
        if isinstance(parsed, dict) and isinstance(parsed.get("name"), str):
            full = _full_name(parsed["name"], parsed.get("namespace"))
            named.setdefault(ref.name, (parsed, _namespace_of(full)))
    defined: set[str] = set()

    def walk(node: Any, namespace: str | None) -> Any:
        if isinstance(node, str):
            if node in _AVRO_PRIMITIVES:
                return node
            full = _full_name(node, namespace)
            for candidate in (full, node):
                if candidate in defined:
                    return candidate
                if candidate in named:
                    definition, ns = named[candidate]
                    return walk(definition, ns)
            return node  # unknown: fastavro names it
        if isinstance(node, list):
            return [walk(n, namespace) for n in node]
        if not isinstance(node, dict):
            return node
        kind = node.get("type")
        if kind in _AVRO_NAMED and isinstance(node.get("name"), str):
            full = _full_name(node["name"], node.get("namespace", namespace))
            if full in defined:
                return full
            defined.add(full)
            out = dict(node)
            out["name"], out["namespace"] = full.rsplit(".", 1)[-1], _namespace_of(full)
            if "fields" in node:
                out["fields"] = [dict(f, type=walk(f.get("type"), _namespace_of(full))) if isinstance(f, dict) else f
                                 for f in node["fields"]]
            return out
        if kind == "array" and "items" in node:
            return dict(node, items=walk(node["items"], namespace))
        if kind == "map" and "values" in node:
            return dict(node, values=walk(node["values"], namespace))
        if isinstance(kind, (str, list, dict)):
            return dict(node, type=walk(kind, namespace))
        return node

    return walk(schema, None)


def avro_text(schema_str: str, references: tuple[Referenced, ...]) -> str:
    """:func:`avro_schema` as JSON text (the text itself when there are no references)."""
    if not references:
        return schema_str
    return json.dumps(avro_schema(json.loads(schema_str), references))


def json_resources(references: tuple[Referenced, ...]) -> dict[str, Any]:
    """The referenced JSON Schemas by ``$ref`` URI (the reference's name)."""
    return {ref.name: json.loads(ref.schema_str) for ref in references}
