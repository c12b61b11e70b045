"""The Schema Registry, through confluent-kafka's ``SchemaRegistryClient``.

Two questions are asked of it: the reader schema (the driver, once: a subject's latest or a
given version) and a record's writer schema by id (each executor worker, once per id: a
bounded cache per process, :data:`_WRITERS`). A registry that does not answer (no connection,
HTTP 5xx/408/429) is retried with exponential backoff (0.2 s doubling to 5 s) for at most
``schemaRegistryOutageTimeoutMs`` (default ``brokerOutageTimeoutMs``), then
:class:`RegistryUnavailableError` names the URL. A definite answer (404 no such subject, version
or id; 401/403) is never retried.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from spark_groupsource.decode.options import DecodeOptions, SideOptions
from spark_groupsource.errors import GroupKafkaError

__all__ = [
    "ReaderSchema",
    "RegistryError",
    "RegistryUnavailableError",
    "SchemaNotFoundError",
    "Registry",
    "registry_for",
]

log = logging.getLogger("spark_groupsource.decode")

#: valueFormat -> the registry's schemaType
KINDS = {"avro": "AVRO", "json": "JSON", "protobuf": "PROTOBUF"}

_BACKOFF_FIRST_S = 0.2
_BACKOFF_MAX_S = 5.0
#: writer schemas kept per worker process (parsed); the least recently used go first
WRITER_CACHE_SIZE = 1000

T = TypeVar("T")


class RegistryError(GroupKafkaError):
    """The Schema Registry refused or could not answer a question."""


class RegistryUnavailableError(RegistryError):
    """The Schema Registry did not answer for longer than the outage bound."""


class SchemaNotFoundError(RegistryError):
    """The registry answered that the subject, version or schema id does not exist."""

    def __init__(self, message: str, schema_id: int | None = None):
        super().__init__(message)
        self.schema_id = schema_id


@dataclass(frozen=True)
class ReaderSchema:
    """The reader schema of one column, resolved once on the driver."""

    schema_str: str  # Avro or JSON Schema JSON; Protobuf: the base64 FileDescriptorProto
    schema_id: int | None = None  # None: an inline schema
    subject: str | None = None
    version: int | None = None
    kind: str = "AVRO"  # the registry's schemaType: AVRO, JSON, PROTOBUF
    message: str | None = None  # Protobuf: the message's full name (None: the file's first)

    def describe(self) -> str:
        if self.schema_id is None:
            return "the inline schema"
        return f"schema id {self.schema_id} (subject {self.subject!r} version {self.version})"

    @property
    def parsed(self) -> Any:
        return json.loads(self.schema_str)


def _retryable(exc: BaseException) -> bool:
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    if isinstance(exc, SchemaRegistryError):
        return exc.http_status_code in (408, 429) or exc.http_status_code >= 500 or exc.http_status_code < 0
    try:
        import httpx2 as httpx  # what confluent-kafka >= 2.14 uses on Python >= 3.10
    except ImportError:  # pragma: no cover
        import httpx  # type: ignore[no-redef]
    return isinstance(exc, (httpx.TransportError, OSError))


class Registry:
    """One SchemaRegistryClient and the retry rule around it (thread-safe)."""

    def __init__(self, options: DecodeOptions, sleep: Callable[[float], None] = time.sleep):
        from confluent_kafka.schema_registry import SchemaRegistryClient

        self.url = options.registry_url or ""
        self.outage_timeout_s = options.outage_timeout_ms / 1000.0
        conf = options.client_conf()
        conf["max.retries"] = 0  # our own bounded retries below
        try:
            self.client = SchemaRegistryClient(conf)
        except (ValueError, TypeError, OSError) as exc:
            from spark_groupsource.errors import OptionError

            raise OptionError("schemaRegistry.url", f"the Schema Registry client refused its configuration: {exc}") from None
        self._sleep = sleep

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        from confluent_kafka.schema_registry.error import SchemaRegistryError

        deadline = time.monotonic() + self.outage_timeout_s
        delay = _BACKOFF_FIRST_S
        attempts = 0
        while True:
            attempts += 1
            try:
                return fn()
            except Exception as exc:  # noqa: BLE001 - sorted into retryable or not below
                if not _retryable(exc):
                    if isinstance(exc, SchemaRegistryError) and exc.http_status_code == 404:
                        raise SchemaNotFoundError(f"the Schema Registry at {self.url} has no {what}: "
                                                  f"{exc.error_message} (HTTP 404, error {exc.error_code})") from None
                    if isinstance(exc, SchemaRegistryError):
                        raise RegistryError(f"the Schema Registry at {self.url} refused {what}: "
                                            f"{exc.error_message} (HTTP {exc.http_status_code})") from None
                    raise
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RegistryUnavailableError(
                        f"the Schema Registry at {self.url} did not answer for {what} within "
                        f"schemaRegistryOutageTimeoutMs={int(self.outage_timeout_s * 1000)} ({attempts} attempts; "
                        f"last: {type(exc).__name__}: {exc}). Check that it is up and reachable from the "
                        "Spark driver and executors, or raise schemaRegistryOutageTimeoutMs") from None
                if attempts == 1:
                    log.warning("Schema Registry at %s: %s failed (%s: %s); retrying for up to %.0f s",
                                self.url, what, type(exc).__name__, exc, left)
                self._sleep(min(delay, left))
                delay = min(delay * 2, _BACKOFF_MAX_S)

    def reader_schema(self, side: SideOptions) -> ReaderSchema:
        """The reader schema of ``side`` now: inline, a version, or the subject's latest."""
        if side.inline_schema is not None:
            return ReaderSchema(side.inline_schema, kind=KINDS[side.format])
        subject = side.subject or ""
        if side.version is None:
            def latest() -> Any:
                self.client.clear_latest_caches()  # "latest" means now, not when this client first asked
                return self.client.get_latest_version(subject)

            found = self._call(f"latest version of subject {subject!r}", latest)
        else:
            found = self._call(f"version {side.version} of subject {subject!r}",
                               lambda: self.client.get_version(subject, side.version))
        schema = found.schema
        kind = KINDS[side.format]
        if (schema.schema_type or "AVRO") != kind:
            raise RegistryError(f"subject {subject!r} version {found.version} at {self.url} is a "
                                f"{schema.schema_type or 'AVRO'} schema, not {kind}: set {side.column}Format accordingly")
        if schema.references:
            raise RegistryError(f"subject {subject!r} version {found.version} has schema references (to other "
                                "subjects), which are not supported yet")
        text = schema.schema_str
        if kind == "PROTOBUF":  # the descriptor, as the serializers exchange it (.proto text has no parser here)
            text = self.schema_by_id(found.schema_id, kind)
        return ReaderSchema(text, found.schema_id, found.subject, found.version, kind, side.message)

    def versions_of(self, schema_id: int, subject: str | None) -> str:
        """``subject 'S' version N`` for a schema id (best effort, for messages)."""
        try:
            found = self.client.get_schema_versions(schema_id)
        except Exception:  # noqa: BLE001 - only a message is at stake
            return f"schema id {schema_id}"
        mine = [v for v in found if v.subject == subject] or list(found)
        if not mine:
            return f"schema id {schema_id}"
        return f"schema id {schema_id} (subject {mine[0].subject!r} version {mine[0].version})"

    def schema_by_id(self, schema_id: int, kind: str = "AVRO") -> str:
        """The text of schema ``schema_id`` (a record's writer schema): Avro or JSON Schema as
        registered, Protobuf as its base64 ``FileDescriptorProto`` (``?format=serialized``, what
        confluent-kafka's ProtobufDeserializer asks for)."""
        fmt = "serialized" if kind == "PROTOBUF" else None
        schema = self._call(f"schema id {schema_id}", lambda: self.client.get_schema(schema_id, fmt=fmt))
        if (schema.schema_type or "AVRO") != kind:
            raise RegistryError(f"schema id {schema_id} is a {schema.schema_type or 'AVRO'} schema, not {kind}")
        if schema.references:
            raise RegistryError(f"schema id {schema_id} has schema references (to other subjects), which are "
                                "not supported yet")
        return schema.schema_str


_REGISTRIES: dict[tuple, Registry] = {}
_LOCK = threading.Lock()


def registry_for(options: DecodeOptions) -> Registry:
    """One :class:`Registry` per configuration in this process."""
    key = (options.registry_url, tuple(sorted(options.registry_conf.items())), options.outage_timeout_ms)
    with _LOCK:
        found = _REGISTRIES.get(key)
        if found is None:
            found = _REGISTRIES[key] = Registry(options)
        return found


class WriterCache:
    """Parsed writer schemas by (registry URL, id), bounded, least recently used out first."""

    def __init__(self, size: int = WRITER_CACHE_SIZE):
        self.size = size
        self._data: OrderedDict[tuple[str, int, str], Any] = OrderedDict()
        self._lock = threading.Lock()
        self.fetched = 0

    def get(self, registry: Registry, schema_id: int, parse: Callable[[str], Any], kind: str = "AVRO") -> Any:
        key = (registry.url, schema_id, kind)
        with self._lock:
            if key in self._data:
                self._data.move_to_end(key)
                return self._data[key]
        value = parse(registry.schema_by_id(schema_id, kind))
        with self._lock:
            self.fetched += 1
            self._data[key] = value
            while len(self._data) > self.size:
                self._data.popitem(last=False)
        return value


#: this worker's writer schemas
WRITERS = WriterCache()
