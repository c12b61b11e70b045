"""The typed-records options, parsed into :class:`DecodeOptions`.

``config.parsing`` accepts these names (``config.names.DECODE_OPTIONS`` and the
``schemaRegistry.`` prefix) and hands them over untouched in ``CommonOptions.decode_params``;
this module validates them, so every mistake is an :class:`OptionError` naming the option at
``load()``, before any record moves.

=========================================  ==========================================================
``valueFormat`` / ``keyFormat``            ``binary`` (default: the bytes, Spark's Kafka schema),
                                           ``avro``, ``json`` (JSON Schema) or ``protobuf``: the
                                           Confluent wire format through a Schema Registry
``valueMessageName`` / ``keyMessageName``  protobuf: the reader message (default: the schema's
                                           first), as ``from_protobuf``'s ``messageName``
``schemaRegistry.url``                     the registry (comma-separated URLs: tried in turn)
``schemaRegistry.<property>``              confluent-kafka's ``SchemaRegistryClient`` configuration,
                                           its names: ``basic.auth.user.info`` (``user:password``,
                                           a secret), ``basic.auth.credentials.source``,
                                           ``ssl.ca.location``, ``ssl.certificate.location``,
                                           ``ssl.key.location``, ``ssl.key.password`` (a secret),
                                           ``timeout``, ``proxy``
``valueSubject`` / ``keySubject``          the subject of the reader schema; default: by the
                                           subject name strategy
``valueSubjectNameStrategy`` / ``key...``  ``TopicNameStrategy`` (default: ``<topic>-value`` /
                                           ``<topic>-key``), ``RecordNameStrategy`` (the record
                                           name), ``TopicRecordNameStrategy`` (``<topic>-<record>``)
``valueRecordName`` / ``keyRecordName``    the fully-qualified record name those two need
``valueSchemaVersion`` / ``keySchema...``  ``latest`` (default: the subject's latest version when the
                                           query starts) or a version number
``valueSchema`` / ``keySchema``            an inline reader schema (Avro or JSON Schema), instead
                                           of a subject
``mode``                                   ``FAILFAST`` (default) or ``PERMISSIVE``: Spark's
                                           ``from_avro`` option
``schemaRegistryOutageTimeoutMs``          how long the registry may stay unreachable before the
                                           query fails (default: ``brokerOutageTimeoutMs``)
=========================================  ==========================================================
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from spark_groupsource.config.options import CommonOptions
from spark_groupsource.config.secrets import KafkaParams, shown
from spark_groupsource.config.specs import SubscribeTopics
from spark_groupsource.errors import OptionError

__all__ = ["DecodeOptions", "SideOptions", "parse_decode_options", "FORMATS", "REGISTRY_PROPERTIES"]

FORMATS = ("binary", "avro", "json", "protobuf")
#: ``schemaRegistry.<property>`` accepted, as confluent-kafka's SchemaRegistryClient names them
REGISTRY_PROPERTIES = (
    "basic.auth.user.info",
    "basic.auth.credentials.source",
    "ssl.ca.location",
    "ssl.certificate.location",
    "ssl.key.location",
    "ssl.key.password",
    "timeout",
    "proxy",
)
_MODES = ("FAILFAST", "PERMISSIVE")
_PREFIX = "schemaregistry."


@dataclass(frozen=True)
class SideOptions:
    """How one column (``key`` or ``value``) is decoded."""

    column: str  # "key" or "value"
    format: str  # "binary", "avro", "json", "protobuf"
    subject: str | None = None  # None: an inline schema
    version: int | None = None  # None: latest
    inline_schema: str | None = None
    message: str | None = None  # protobuf: the reader message (None: the schema's first)
    #: the other topics' subjects (TopicNameStrategy/TopicRecordNameStrategy, several topics):
    #: their reader schemas must give the same columns as ``subject``'s
    also: tuple[str, ...] = ()

    @property
    def typed(self) -> bool:
        return self.format != "binary"

    def describe(self) -> str:
        if self.inline_schema is not None:
            return f"the inline {self.column}Schema"
        which = "latest version" if self.version is None else f"version {self.version}"
        return f"subject {self.subject!r} ({which})"


@dataclass(frozen=True)
class DecodeOptions:
    key: SideOptions
    value: SideOptions
    registry_url: str | None = None
    #: the SchemaRegistryClient configuration without ``url`` (repr redacts secrets)
    registry_conf: KafkaParams = field(default_factory=KafkaParams)
    permissive: bool = False
    outage_timeout_ms: int = 120_000

    @property
    def typed(self) -> bool:
        return self.key.typed or self.value.typed

    def client_conf(self) -> dict[str, str]:
        """The SchemaRegistryClient configuration (secrets inside: never logged)."""
        return {"url": self.registry_url or "", **dict(self.registry_conf)}


def parse_decode_options(opts: CommonOptions) -> DecodeOptions:
    """Validate the decode options of parsed stream/batch options."""
    raw: Mapping[str, str] = getattr(opts, "decode_params", None) or {}
    registry_conf: dict[str, str] = {}
    for key in sorted(raw):
        if key.startswith(_PREFIX) and key != "schemaregistry.url":
            prop = key[len(_PREFIX):]
            if prop not in REGISTRY_PROPERTIES:
                raise OptionError(
                    f"schemaRegistry.{prop}",
                    "is not a Schema Registry client property; accepted: "
                    + ", ".join(f"schemaRegistry.{p}" for p in REGISTRY_PROPERTIES),
                )
            registry_conf[prop] = raw[key]
    user_info = registry_conf.get("basic.auth.user.info")
    if user_info is not None and ":" not in user_info:
        raise OptionError("schemaRegistry.basic.auth.user.info", "expected user:password, got ***")
    if ("ssl.key.location" in registry_conf or "ssl.key.password" in registry_conf) and (
        "ssl.certificate.location" not in registry_conf
    ):
        raise OptionError("schemaRegistry.ssl.certificate.location",
                          "is required with schemaRegistry.ssl.key.location or schemaRegistry.ssl.key.password")
    key = _side(raw, "key", opts)
    value = _side(raw, "value", opts)
    url = raw.get("schemaregistry.url", "").strip() or None
    uses_registry = any(s.typed and s.inline_schema is None for s in (key, value))
    typed = key.typed or value.typed
    if uses_registry and url is None:
        which = "valueFormat" if value.typed else "keyFormat"
        raise OptionError("schemaRegistry.url", f"is required with {which}={(value if value.typed else key).format}: "
                          "the records' writer schemas are looked up there by id")
    if typed and url is None:
        raise OptionError("schemaRegistry.url", "is required: records in the Confluent wire format name their "
                          "writer schema by id, which only the registry can resolve")
    if url is not None:
        for u in url.split(","):
            if not u.strip().lower().startswith(("http://", "https://")):
                raise OptionError("schemaRegistry.url", f"expected http(s)://host:port[,...], got {url!r}")
    if not typed:
        for k in sorted(raw):
            if k.startswith(_PREFIX) or k in ("mode", "schemaregistryoutagetimeoutms") or k.startswith(
                ("valuesubject", "keysubject", "valueschema", "keyschema")
            ):
                raise OptionError(_spelled(k), "only applies with a typed valueFormat or keyFormat ("
                                  + ", ".join(FORMATS[1:]) + ")")
    mode = raw.get("mode", "FAILFAST").strip().upper()
    if mode not in _MODES:
        raise OptionError("mode", f"expected FAILFAST or PERMISSIVE, got {raw.get('mode')!r}")
    outage = raw.get("schemaregistryoutagetimeoutms")
    if outage is None:
        outage_ms = opts.broker_outage_timeout_ms
    else:
        try:
            outage_ms = int(outage.strip())
        except ValueError:
            outage_ms = 0
        if outage_ms < 1:
            raise OptionError("schemaRegistryOutageTimeoutMs", f"expected a positive integer, got {outage!r}")
    return DecodeOptions(
        key=key,
        value=value,
        registry_url=url,
        registry_conf=KafkaParams(registry_conf),
        permissive=mode == "PERMISSIVE",
        outage_timeout_ms=outage_ms,
    )


def _spelled(key: str) -> str:
    from spark_groupsource.config.names import option_name

    return option_name(key)


def _side(raw: Mapping[str, str], column: str, opts: CommonOptions) -> SideOptions:
    fmt_key = f"{column}format"
    fmt = raw.get(fmt_key, "binary").strip().lower()
    if fmt not in FORMATS:
        raise OptionError(f"{column}Format", f"expected one of {', '.join(FORMATS)}, got {shown(fmt_key, raw[fmt_key])}")
    subject = raw.get(f"{column}subject")
    version = raw.get(f"{column}schemaversion")
    inline = raw.get(f"{column}schema")
    strategy = raw.get(f"{column}subjectnamestrategy")
    message = raw.get(f"{column}messagename")
    if message is not None:
        message = message.strip()
        if fmt != "protobuf" or not message:
            raise OptionError(f"{column}MessageName", f"names the reader message of {column}Format=protobuf "
                              "(full name such as shop.Order, or the simple name): "
                              + ("it must not be empty" if not message else f"it does not apply to {column}Format={fmt}"))
    if fmt == "binary":
        for name, given in ((f"{column}Subject", subject), (f"{column}SchemaVersion", version),
                            (f"{column}Schema", inline), (f"{column}SubjectNameStrategy", strategy),
                            (f"{column}RecordName", raw.get(f"{column}recordname"))):
            if given is not None:
                raise OptionError(name, f"only applies with a typed {column}Format ({', '.join(FORMATS[1:])})")
        return SideOptions(column, fmt)
    record = raw.get(f"{column}recordname")
    strategy_name = _strategy(strategy, column)
    if record is not None:
        record = record.strip()
        if strategy_name == "TopicNameStrategy" or not record:
            raise OptionError(f"{column}RecordName", f"is the fully-qualified record name for {column}"
                              "SubjectNameStrategy=RecordNameStrategy or TopicRecordNameStrategy"
                              + (": it must not be empty" if not record else ", which is not set"))
    elif strategy_name != "TopicNameStrategy" and subject is None:
        raise OptionError(f"{column}RecordName", f"is required with {column}SubjectNameStrategy={strategy_name}: "
                          "the subject is named after the record (the Avro record's or Protobuf message's full "
                          "name, the JSON Schema's title), e.g. shop.Order")
    if subject is not None and strategy is not None:
        raise OptionError(f"{column}SubjectNameStrategy", f"does not apply when {column}Subject names the "
                          "subject itself: give one or the other")
    if inline is not None:
        if fmt == "protobuf":
            raise OptionError(f"{column}Schema", "an inline Protobuf reader schema is not supported (a .proto "
                              "text needs a compiler, which the Protobuf Python package lacks): give the "
                              f"subject with {column}Subject, and the message with {column}MessageName")
        if subject is not None or version is not None:
            raise OptionError(f"{column}Schema", f"an inline reader schema excludes {column}Subject and "
                              f"{column}SchemaVersion: give one or the other")
        _check_inline(inline, f"{column}Schema", fmt)
        return SideOptions(column, fmt, inline_schema=inline)
    number: int | None = None
    if version is not None and version.strip().lower() != "latest":
        try:
            number = int(version.strip())
        except ValueError:
            number = 0
        if number < 1:
            raise OptionError(f"{column}SchemaVersion", f"expected latest or a version number >= 1, got {version!r}")
    extra: tuple[str, ...] = ()
    if subject is not None:
        subject = subject.strip()
        if not subject:
            raise OptionError(f"{column}Subject", "must not be empty when given")
    elif strategy_name == "RecordNameStrategy":
        subject = record
    else:
        sub = opts.subscription
        if not isinstance(sub, SubscribeTopics):
            raise OptionError(
                f"{column}Subject",
                f"is required with {column}Format={fmt} and {strategy_name} unless the topics are listed "
                "with subscribe: a pattern's topics are not known when the columns are derived; give "
                f"{column}Subject, {column}SubjectNameStrategy=RecordNameStrategy with {column}RecordName, "
                f"or an inline {column}Schema",
            )
        suffix = column if strategy_name == "TopicNameStrategy" else record
        subjects = [f"{t}-{suffix}" for t in sorted(sub.topics)]
        subject, extra = subjects[0], tuple(subjects[1:])
    if fmt == "protobuf" and message is None and strategy_name != "TopicNameStrategy":
        message = record  # the message the subject is named after
    return SideOptions(column, fmt, subject=subject, version=number, message=message, also=extra)


_STRATEGIES = ("TopicNameStrategy", "RecordNameStrategy", "TopicRecordNameStrategy")


def _strategy(given: str | None, column: str) -> str:
    """Confluent's strategy by its class name (simple or Java's fully-qualified one)."""
    if given is None:
        return "TopicNameStrategy"
    name = given.strip().rsplit(".", 1)[-1]
    for s in _STRATEGIES:
        if name.lower() == s.lower():
            return s
    raise OptionError(f"{column}SubjectNameStrategy", f"expected one of {', '.join(_STRATEGIES)}, got {given!r}")


def _check_inline(text: str, option: str, fmt: str) -> None:
    example = ('{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}' if fmt == "avro" else
               '{"type":"object","properties":{"a":{"type":"integer"}}}')
    try:
        parsed = json.loads(text)
    except ValueError as exc:
        raise OptionError(option, f"is not JSON ({exc}); expected an {'Avro' if fmt == 'avro' else 'JSON'} "
                          f"schema such as {example}") from None
    if fmt == "json":
        from jsonschema.exceptions import SchemaError

        from spark_groupsource.decode.json_types import JsonTypeError, validator_of
        from spark_groupsource.decode.json_types import to_spark_type as json_type

        try:
            validator_of(parsed)
        except SchemaError as exc:
            raise OptionError(option, f"is not a valid JSON Schema: {exc.message}") from None
        try:
            json_type(parsed)
        except JsonTypeError as exc:
            raise OptionError(option, f"has no Spark type: {exc}") from None
        return
    import fastavro

    try:
        fastavro.parse_schema(parsed)
    except Exception as exc:  # noqa: BLE001 - fastavro raises several kinds for a bad schema
        raise OptionError(option, f"is not a valid Avro schema: {exc}") from None
    from spark_groupsource.decode.avro_types import AvroTypeError, to_spark_type

    try:
        to_spark_type(parsed)
    except AvroTypeError as exc:
        raise OptionError(option, f"has no Spark type: {exc}") from None
