"""The Schema Registry, through confluent-kafka's ``SchemaRegistryClient``.

Two questions are asked of it: the reader schema (the driver, once: a subject's latest or a
given version) and a record's writer schema by id (each executor worker, once per id: a
bounded cache per process, :data:`WRITERS`). Either comes with its references resolved as
confluent-kafka's deserializers resolve them: each reference fetched by subject and version
(deleted versions included, as they ask), recursively, each (subject, version) once per process,
a cycle refused naming its subjects. The result, :class:`ResolvedSchema`, is the whole closure:
it is what travels to the executors with the plan, and what a format builds its schema from
(:mod:`.references`). A registry that does not answer (no connection,
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
    "Referenced",
    "ResolvedSchema",
    "RegistryError",
    "RegistryUnavailableError",
    "SchemaNotFoundError",
    "ReferenceNotFoundError",
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


class ReferenceNotFoundError(SchemaNotFoundError):
    """A schema refers to a subject version the registry does not have (deleted, or never there)."""


@dataclass(frozen=True)
class Referenced:
    """One schema of another subject that a schema refers to."""

    name: str  # as the referrer names it: Protobuf's import path, Avro's type name, JSON Schema's $ref URI
    subject: str
    version: int
    schema_str: str  # as ResolvedSchema.schema_str


@dataclass(frozen=True)
class ResolvedSchema:
    """A schema and every schema it refers to (its closure): all a format needs to read with it."""

    schema_str: str  # Avro or JSON Schema JSON; Protobuf: the base64 FileDescriptorProto
    schema_id: int | None = None  # None: an inline schema
    subject: str | None = None
    version: int | None = None
    kind: str = "AVRO"  # the registry's schemaType: AVRO, JSON, PROTOBUF
    message: str | None = None  # Protobuf: the message's full name (None: the file's first)
    #: the closure, each schema after those it refers to (a schema referred to twice: once)
    references: tuple[Referenced, ...] = ()

    def describe(self) -> str:
        if self.schema_id is None:
            return "the inline schema"
        return f"schema id {self.schema_id} (subject {self.subject!r} version {self.version})"

    @property
    def parsed(self) -> Any:
        return json.loads(self.schema_str)


#: a reader schema is a resolved schema (the name says which role it plays)
ReaderSchema = ResolvedSchema


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

    def __init__(self, options: DecodeOptions, sleep: Callable[[float], None] = time.sleep, client: Any = None):
        """``client``: a SchemaRegistryClient to use instead of one made from the options (the
        tests' confluent-kafka in-memory registry, for what Karapace cannot hold)."""
        from confluent_kafka.schema_registry import SchemaRegistryClient

        self.url = options.registry_url or ""
        self.outage_timeout_s = options.outage_timeout_ms / 1000.0
        conf = options.client_conf()
        conf["max.retries"] = 0  # our own bounded retries below
        try:
            self.client = client or SchemaRegistryClient(conf)
            self._text = client or SchemaRegistryClient(conf)
        except (ValueError, TypeError, OSError) as exc:
            from spark_groupsource.errors import OptionError

            raise OptionError("schemaRegistry.url", f"the Schema Registry client refused its configuration: {exc}") from None
        self._sleep = sleep
        self._lock = threading.Lock()
        #: referenced schemas by (subject, version, kind): a version's schema never changes
        self._refs: dict[tuple[str, int, str], tuple[Any, int]] = {}
        #: schemas with their references by (id, kind, message)
        self._resolved: dict[tuple[int, str, str | None], ResolvedSchema] = {}

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
        described = f"subject {found.subject!r} version {found.version} (schema id {found.schema_id})"
        text, refs = self._with_references(schema, found.schema_id, kind, (found.subject, found.version), described)
        resolved = ResolvedSchema(text, found.schema_id, found.subject, found.version, kind, side.message, refs)
        with self._lock:
            self._resolved[(found.schema_id, kind, side.message)] = resolved
        return resolved

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

    def _by_id(self, schema_id: int, kind: str, serialized: bool = False) -> Any:
        # two clients: confluent-kafka's caches a schema by id whatever format it was asked in
        client = self.client if serialized else self._text
        fmt = "serialized" if serialized else None
        schema = self._call(f"schema id {schema_id}", lambda: client.get_schema(schema_id, fmt=fmt))
        if (schema.schema_type or "AVRO") != kind:
            raise RegistryError(f"schema id {schema_id} is a {schema.schema_type or 'AVRO'} schema, not {kind}")
        return schema

    def schema_by_id(self, schema_id: int, kind: str = "AVRO") -> str:
        """The text of schema ``schema_id`` (its references aside): Avro or JSON Schema as
        registered, Protobuf as its base64 ``FileDescriptorProto`` (``?format=serialized``, what
        confluent-kafka's ProtobufDeserializer asks for)."""
        return self._by_id(schema_id, kind, serialized=kind == "PROTOBUF").schema_str

    def _with_references(self, schema: Any, schema_id: int, kind: str, root: tuple[str, int] | None,
                         described: str) -> tuple[str, tuple[Referenced, ...]]:
        """The text a format reads ``schema`` (as registered, with its references) with, and its
        closure. Protobuf: base64 descriptors; with references compiled from the .proto texts
        (:mod:`.protobuf_text`), without, the registry's serialized form."""
        refs = self.closure(schema.references or (), kind, root, described)
        if kind != "PROTOBUF":
            return schema.schema_str, refs
        if not refs:
            return self.schema_by_id(schema_id, kind), refs
        from spark_groupsource.decode.protobuf_text import compile_closure

        try:
            top, files = compile_closure(schema.schema_str, [(r.name, r.schema_str) for r in refs])
        except (ValueError, ImportError) as exc:  # protoc's complaint, or no protoc (ProtocMissingError)
            raise RegistryError(f"{described}: {exc}") from None
        return top, tuple(Referenced(r.name, r.subject, r.version, files[r.name]) for r in refs if r.name in files)

    def resolved_by_id(self, schema_id: int, kind: str = "AVRO", message: str | None = None) -> ResolvedSchema:
        """Schema ``schema_id`` (a record's writer schema, a pinned reader) with its references
        (once per process: an id's schema and its references' versions never change)."""
        with self._lock:
            found = self._resolved.get((schema_id, kind, message))
        if found is not None:
            return found
        schema = self._by_id(schema_id, kind)
        text, refs = self._with_references(schema, schema_id, kind, None, f"schema id {schema_id}")
        found = ResolvedSchema(text, schema_id, kind=kind, message=message, references=refs)
        with self._lock:
            self._resolved[(schema_id, kind, message)] = found
        return found

    def closure(self, references: Any, kind: str, root: tuple[str, int] | None, described: str
                ) -> tuple[Referenced, ...]:
        """Every schema ``references`` lead to (recursively), each after those it refers to;
        Protobuf's well-known imports are left to the protobuf package, as the deserializer does."""
        out: list[Referenced] = []
        done: set[tuple[str, str, int]] = set()

        def walk(refs: Any, chain: tuple[tuple[str, int], ...], referrer: str) -> None:
            for ref in refs:
                if kind == "PROTOBUF" and _builtin(ref.name or ""):
                    continue
                if not ref.name or ref.subject is None or ref.version is None:
                    raise RegistryError(f"{referrer} has a schema reference without a name, subject or version "
                                        f"({ref.name!r}, {ref.subject!r}, {ref.version!r})")
                schema, version = self._referenced(ref.subject, ref.version, kind, ref.name, referrer)
                here = (ref.subject, version)
                if here in chain:
                    path = " -> ".join(f"{s!r} version {v}" for s, v in (*chain, here) if s)
                    raise RegistryError(f"the schema references of {described} form a cycle: {path}; a schema "
                                        "cannot contain itself")
                key = (ref.name, ref.subject, version)
                if key in done:
                    continue
                walk(schema.references or (), (*chain, here), f"subject {ref.subject!r} version {version}")
                done.add(key)
                out.append(Referenced(ref.name, ref.subject, version, schema.schema_str))

        walk(references, (root or ("", 0),), described)
        return tuple(out)

    def _referenced(self, subject: str, version: int, kind: str, name: str, referrer: str) -> tuple[Any, int]:
        """The schema of a reference (fetched once per process for a fixed version)."""
        key = (subject, version, kind)
        with self._lock:
            found = self._refs.get(key)
        if found is not None:
            return found
        what = f"version {version} of subject {subject!r} (reference {name!r} of {referrer})"
        try:  # as registered (Protobuf: the .proto text, see _with_references); deleted versions too
            got = self._call(what, lambda: self._text.get_version(subject, version, True))
        except SchemaNotFoundError:
            raise ReferenceNotFoundError(f"{referrer} refers to {name!r} as subject {subject!r} version {version}, "
                                         f"which the Schema Registry at {self.url} does not have (HTTP 404: deleted, "
                                         "or never registered there)") from None
        if (got.schema.schema_type or "AVRO") != kind:
            raise RegistryError(f"{referrer} refers to {name!r}, subject {subject!r} version {got.version}, a "
                                f"{got.schema.schema_type or 'AVRO'} schema, not {kind}")
        found = (got.schema, int(got.version))
        if isinstance(version, int) and version > 0:  # "latest" (-1) is asked again next time
            with self._lock:
                self._refs[key] = found
        return found


def _builtin(name: str) -> bool:
    """The imports confluent-kafka's Protobuf serde never registers (their descriptors ship with it)."""
    return name.startswith(("confluent/", "google/protobuf/", "google/type/"))


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

    def get(self, registry: Registry, schema_id: int, parse: Callable[[ResolvedSchema], Any],
            kind: str = "AVRO") -> Any:
        key = (registry.url, schema_id, kind)
        with self._lock:
            if key in self._data:
                self._data.move_to_end(key)
                return self._data[key]
        value = parse(registry.resolved_by_id(schema_id, kind))
        with self._lock:
            self.fetched += 1
        self.put(registry.url, schema_id, kind, value)
        return value

    def put(self, url: str, schema_id: int, kind: str, value: Any) -> None:
        """Keep ``value`` (e.g. the reader schema that came with the plan: no fetch for its id)."""
        with self._lock:
            self._data[(url, schema_id, kind)] = value
            self._data.move_to_end((url, schema_id, kind))
            while len(self._data) > self.size:
                self._data.popitem(last=False)


#: this worker's writer schemas
WRITERS = WriterCache()
