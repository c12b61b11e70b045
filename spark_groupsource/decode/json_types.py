"""JSON Schema -> Spark type, for ``valueFormat=json`` (pure: no registry, no Spark session).

JSON Schema describes what a document may be, not one layout, so only the schemas with one
natural Spark type are taken; the others are refused at ``load()`` with the reason:

==============================================  ==========================================
JSON Schema (the reader schema)                 Spark
==============================================  ==========================================
``object`` with ``properties``                  struct, in ``properties`` order; a field
                                                is nullable unless ``required`` and not
                                                nullable itself; other properties dropped
``object`` without ``properties``               map<string, V>: V from a schema in
                                                ``additionalProperties``, else string
``array`` with ``items`` a schema               array (containsNull: items nullable)
``string`` (any ``format``) / string ``enum``   string
``integer`` / integer ``enum``                  bigint
``number``, ``[integer, number]``               double
``boolean``                                     boolean
``null`` in ``type``, ``enum`` or a member of   the type, nullable
``oneOf``/``anyOf`` (beside one other member)
``{}``, ``true``, no ``type`` (any value)       string: the JSON text (a string as it is),
                                                as Spark's JSON reader fills a string column
``$ref`` to this schema (``#/$defs/...``,       the referred schema
``#/definitions/...``, ``$id``/anchors)
``$ref`` to another subject's schema            the referred schema (a schema reference,
(the URI a schema reference is named by)        resolved by the registry module)
==============================================  ==========================================

Refused (:class:`JsonTypeError`): recursion through ``$ref``; ``$ref`` that resolves neither
within the schema nor to a schema reference; ``oneOf``/``anyOf``
of several non-null members (other than integer and number); ``type`` arrays of several
non-null types (the same exception); ``allOf`` of more than one member; tuple ``items``/
``prefixItems``; ``enum``/``const`` mixing kinds; ``false``.

:func:`shaper` compiles the conversion of a decoded document into what
``pyarrow.array(values, type=...)`` takes: a property absent from a record gets the reader
schema's ``default`` (as Avro's resolution fills an added field; confluent-kafka's
JSONDeserializer hands the dict on as it is), any-value nodes become their JSON text; ``None``
when no conversion is needed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    DoubleType,
    LongType,
    MapType,
    NullType,
    StringType,
    StructField,
    StructType,
)

__all__ = ["JsonTypeError", "to_spark_type", "shaper", "SparkField", "validator_of"]


class JsonTypeError(ValueError):
    """The JSON Schema has no (single) Spark type."""


@dataclass(frozen=True)
class SparkField:
    data_type: DataType
    nullable: bool


@dataclass(frozen=True)
class _Node:
    """One schema node, resolved: its Spark type and how a decoded value is shaped for Arrow."""

    data_type: DataType
    nullable: bool
    shape: Callable[[Any], Any] | None = None  # None: the value passes as it is


def _text(v: Any) -> Any:
    if v is None or isinstance(v, str):
        return v
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False)


_ANY = _Node(StringType(), True, _text)
_SCALARS: dict[str, DataType] = {"string": StringType(), "integer": LongType(), "number": DoubleType(),
                                 "boolean": BooleanType(), "null": NullType()}
_STRUCTURAL = ("properties", "additionalProperties", "items", "prefixItems", "patternProperties")


def _registry(resources: Mapping[str, Any] | None) -> Any:
    """A ``referencing.Registry`` of the referenced schemas, each under its ``$ref`` URI (as
    confluent-kafka's JSONDeserializer builds it); nothing is fetched from the network."""
    from referencing import Registry

    registry = Registry()
    for uri, contents in (resources or {}).items():
        registry = registry.with_resource(uri, _resource(contents))
    return registry


class _Converter:
    def __init__(self, root: Any, resources: Mapping[str, Any] | None = None):
        from referencing import Resource
        from referencing.jsonschema import DRAFT7

        if isinstance(root, dict) or isinstance(root, bool):
            resource = Resource.from_contents(root, default_specification=DRAFT7)
        else:
            raise JsonTypeError(f"a JSON Schema is an object or a boolean, not {type(root).__name__}")
        registry = _registry(resources).with_resource("urn:groupkafka:reader", resource)
        self.root = root
        self.resolver = registry.resolver_with_root(resource)

    def node(self, schema: Any, path: str, resolver: Any, refs: tuple[str, ...]) -> _Node:
        if schema is True:
            return _ANY
        if schema is False:
            raise JsonTypeError(f"{path}: the schema false admits no value")
        if not isinstance(schema, dict):
            raise JsonTypeError(f"{path}: not a schema: {schema!r}")
        if "$ref" in schema:
            ref = schema["$ref"]
            if ref in refs:
                raise JsonTypeError(f"{path}: recursive $ref {ref!r} has no Spark type (a struct cannot "
                                    "contain itself)")
            try:
                found = resolver.lookup(ref)
            except Exception as exc:  # noqa: BLE001 - referencing's Unresolvable and its kin
                raise JsonTypeError(f"{path}: $ref {ref!r} does not resolve within the schema or its schema "
                                    f"references ({type(exc).__name__}); a schema of another subject is "
                                    "referred to by a schema reference named with this URI") from None
            return self.node(found.contents, f"{path}($ref {ref})", found.resolver, (*refs, ref))
        resolver = resolver.in_subresource(_resource(schema)) if "$id" in schema else resolver
        if "allOf" in schema:
            members = schema["allOf"]
            if len(members) != 1 or any(k in schema for k in ("type", *_STRUCTURAL)):
                raise JsonTypeError(f"{path}: allOf of several schemas has no single Spark type")
            return self.node(members[0], f"{path}/allOf/0", resolver, refs)
        for key in ("oneOf", "anyOf"):
            if key in schema:
                return self._union(schema[key], f"{path}/{key}", resolver, refs)
        if "enum" in schema or "const" in schema:
            values = schema["enum"] if "enum" in schema else [schema["const"]]
            return self._enum(values, path)
        kinds = schema.get("type")
        if kinds is None:
            if "properties" in schema or "additionalProperties" in schema:
                kinds = "object"
            elif "items" in schema or "prefixItems" in schema:
                kinds = "array"
            else:
                return _ANY
        if isinstance(kinds, str):
            kinds = [kinds]
        nullable = "null" in kinds
        rest = [k for k in kinds if k != "null"]
        if not rest:
            return _Node(NullType(), True)
        if set(rest) == {"integer", "number"}:
            return _Node(DoubleType(), nullable)
        if len(rest) > 1:
            raise JsonTypeError(f"{path}: type {kinds} has several non-null types, no single Spark type")
        kind = rest[0]
        if kind == "object":
            return self._object(schema, path, resolver, refs, nullable)
        if kind == "array":
            return self._array(schema, path, resolver, refs, nullable)
        if kind not in _SCALARS:
            raise JsonTypeError(f"{path}: unknown type {kind!r}")
        return _Node(_SCALARS[kind], nullable)

    def _union(self, members: list[Any], path: str, resolver: Any, refs: tuple[str, ...]) -> _Node:
        nodes = [self.node(m, f"{path}/{i}", resolver, refs) for i, m in enumerate(members)]
        nullable = any(isinstance(n.data_type, NullType) for n in nodes)
        rest = [n for n in nodes if not isinstance(n.data_type, NullType)]
        if not rest:
            return _Node(NullType(), True)
        if len(rest) == 1:
            n = rest[0]
            return _Node(n.data_type, nullable or n.nullable, n.shape)
        if all(isinstance(n.data_type, (LongType, DoubleType)) for n in rest):
            return _Node(DoubleType(), nullable or any(n.nullable for n in rest))
        raise JsonTypeError(f"{path}: {len(rest)} non-null alternatives have no single Spark type")

    @staticmethod
    def _enum(values: list[Any], path: str) -> _Node:
        nullable = None in values
        rest = [v for v in values if v is not None]
        if all(isinstance(v, str) for v in rest):
            return _Node(StringType(), nullable)
        if all(isinstance(v, int) and not isinstance(v, bool) for v in rest):
            return _Node(LongType(), nullable)
        if all(isinstance(v, bool) for v in rest):
            return _Node(BooleanType(), nullable)
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in rest):
            return _Node(DoubleType(), nullable)
        raise JsonTypeError(f"{path}: enum/const values of several kinds have no single Spark type")

    def _object(self, schema: dict, path: str, resolver: Any, refs: tuple[str, ...], nullable: bool) -> _Node:
        props = schema.get("properties")
        if props is None:
            extra = schema.get("additionalProperties", True)
            value = _ANY if extra is True or extra == {} else self.node(extra, f"{path}/additionalProperties",
                                                                      resolver, refs)
            shape = value.shape
            map_shape = None if shape is None else (lambda d, s=shape: None if d is None else
                                                    {k: s(v) for k, v in d.items()})
            return _Node(MapType(StringType(), value.data_type, value.nullable), nullable, map_shape)
        required = set(schema.get("required") or ())
        fields, shapes, defaults = [], [], []
        for name, sub in props.items():
            n = self.node(sub, f"{path}/properties/{name}", resolver, refs)
            fields.append(StructField(name, n.data_type, n.nullable or name not in required))
            shapes.append(n.shape)
            has_default = isinstance(sub, dict) and "default" in sub
            defaults.append((has_default, sub.get("default") if has_default else None))
        struct = StructType(fields)
        if all(s is None for s in shapes) and not any(d for d, _ in defaults):
            return _Node(struct, nullable)
        plan = [(f.name, s, d, dv) for f, s, (d, dv) in zip(fields, shapes, defaults, strict=True)]

        def shape(doc: Any) -> Any:
            if doc is None:
                return None
            out = {}
            for name, s, has_default, default in plan:
                if name in doc:
                    v = doc[name]
                elif has_default:
                    v = default
                else:
                    continue
                out[name] = v if s is None else s(v)
            return out

        return _Node(struct, nullable, shape)

    def _array(self, schema: dict, path: str, resolver: Any, refs: tuple[str, ...], nullable: bool) -> _Node:
        items = schema.get("items", True)
        if isinstance(items, list) or "prefixItems" in schema:
            raise JsonTypeError(f"{path}: tuple items (items as a list, prefixItems) have no single Spark type")
        n = self.node(items, f"{path}/items", resolver, refs)
        shape = n.shape
        arr_shape = None if shape is None else (lambda a, s=shape: None if a is None else [s(v) for v in a])
        return _Node(ArrayType(n.data_type, n.nullable), nullable, arr_shape)


def _resource(schema: dict) -> Any:
    from referencing import Resource
    from referencing.jsonschema import DRAFT7

    return Resource.from_contents(schema, default_specification=DRAFT7)


def _root(schema: Any, resources: Mapping[str, Any] | None) -> _Node:
    conv = _Converter(schema, resources)
    return conv.node(schema, "#", conv.resolver, ())


def to_spark_type(schema: Any, resources: Mapping[str, Any] | None = None) -> SparkField:
    """The Spark type of a (parsed) JSON Schema whose ``$ref`` may name ``resources`` (the
    schemas of its references by URI); :class:`JsonTypeError` when it has none."""
    n = _root(schema, resources)
    return SparkField(n.data_type, n.nullable)


def shaper(schema: Any, resources: Mapping[str, Any] | None = None) -> Callable[[Any], Any] | None:
    """Decoded document -> the value ``pa.array`` takes for :func:`to_spark_type` (None: as is)."""
    return _root(schema, resources).shape


def validator_of(schema: Any, resources: Mapping[str, Any] | None = None) -> Any:
    """jsonschema's validator for ``schema``'s draft, the schema checked (SchemaError if bad),
    its ``$ref`` to ``resources`` resolved from them."""
    from jsonschema.validators import validator_for

    cls = validator_for(schema)
    cls.check_schema(schema)
    if not resources:
        return cls(schema)
    return cls(schema, registry=_registry(resources))
