"""The typed-records options (issue 55), parsed into :class:`DecodeOptions`.

``config.parsing`` accepts these names (``config.names.DECODE_OPTIONS`` and the
``schemaRegistry.`` prefix) and hands them over untouched in ``CommonOptions.decode_params``;
this module validates them, so every mistake is an :class:`OptionError` naming the option at
``load()``, before any record moves.

=========================================  ==========================================================
``valueFormat`` / ``keyFormat``            ``binary`` (default: the bytes, Spark's Kafka schema) or
                                           ``avro`` (Confluent wire format through a Schema Registry)
``schemaRegistry.url``                     the registry (comma-separated URLs: tried in turn)
``schemaRegistry.<property>``              confluent-kafka's ``SchemaRegistryClient`` configuration,
                                           its names: ``basic.auth.user.info`` (``user:password``,
                                           a secret), ``basic.auth.credentials.source``,
                                           ``ssl.ca.location``, ``ssl.certificate.location``,
                                           ``ssl.key.location``, ``ssl.key.password`` (a secret),
                                           ``timeout``, ``proxy``
``valueSubject`` / ``keySubject``          the subject of the reader schema; default
                                           TopicNameStrategy: ``<topic>-value`` / ``<topic>-key``
``valueSchemaVersion`` / ``keySchema...``  ``latest`` (default: the subject's latest version when the
                                           query starts) or a version number
``valueSchema`` / ``keySchema``            an inline Avro reader schema (JSON), instead of a subject
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

FORMATS = ("binary", "avro")
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
    format: str  # "binary" or "avro"
    subject: str | None = None  # None: an inline schema
    version: int | None = None  # None: latest
    inline_schema: str | None = None

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
                raise OptionError(_spelled(k), "only applies with valueFormat or keyFormat avro")
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
    Column = column.capitalize()
    fmt_key = f"{column}format"
    fmt = raw.get(fmt_key, "binary").strip().lower()
    if fmt not in FORMATS:
        more = " (protobuf and json are not implemented yet)" if fmt in ("protobuf", "json") else ""
        raise OptionError(f"{column}Format", f"expected one of {', '.join(FORMATS)}, got {shown(fmt_key, raw[fmt_key])}{more}")
    subject = raw.get(f"{column}subject")
    version = raw.get(f"{column}schemaversion")
    inline = raw.get(f"{column}schema")
    strategy = raw.get(f"{column}subjectnamestrategy")
    if fmt == "binary":
        for name, given in ((f"{column}Subject", subject), (f"{column}SchemaVersion", version),
                            (f"{column}Schema", inline), (f"{column}SubjectNameStrategy", strategy)):
            if given is not None:
                raise OptionError(name, f"only applies with {column}Format=avro")
        return SideOptions(column, fmt)
    if strategy is not None and strategy.strip() not in ("TopicNameStrategy",):
        raise OptionError(f"{column}SubjectNameStrategy",
                          f"only TopicNameStrategy is implemented, got {strategy!r}: give the subject with "
                          f"{column}Subject, or an inline {column}Schema")
    if inline is not None:
        if subject is not None or version is not None:
            raise OptionError(f"{column}Schema", f"an inline reader schema excludes {column}Subject and "
                              f"{column}SchemaVersion: give one or the other")
        _check_inline(inline, f"{column}Schema")
        return SideOptions(column, fmt, inline_schema=inline)
    number: int | None = None
    if version is not None and version.strip().lower() != "latest":
        try:
            number = int(version.strip())
        except ValueError:
            number = 0
        if number < 1:
            raise OptionError(f"{column}SchemaVersion", f"expected latest or a version number >= 1, got {version!r}")
    if subject is not None:
        subject = subject.strip()
        if not subject:
            raise OptionError(f"{column}Subject", "must not be empty when given")
    else:
        sub = opts.subscription
        if not isinstance(sub, SubscribeTopics) or len(sub.topics) != 1:
            raise OptionError(
                f"{column}Subject",
                f"is required with {column}Format=avro unless exactly one topic is subscribed: the "
                f"reader schema (one {Column} column type for every row) comes from one subject, by "
                f"default <topic>-{column} (TopicNameStrategy); or give an inline {column}Schema",
            )
        subject = f"{sub.topics[0]}-{column}"
    return SideOptions(column, fmt, subject=subject, version=number)


def _check_inline(text: str, option: str) -> None:
    try:
        parsed = json.loads(text)
    except ValueError as exc:
        raise OptionError(option, f"is not JSON ({exc}); expected an Avro schema such as "
                          '{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}') from None
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
