"""A direct-fetch bound: what reading Kafka costs inside Spark without a client library's
per-record work.

``format("benchdirect")`` plans offsets like the floor (_floor_source.py: one input partition
per topic partition, a topic of ``rows`` records written round-robin from offset 0) but its
executors really read them from Kafka: Fetch requests (v4, one partition, 8 MiB) over a plain
socket, each response read into one buffer and its record batches parsed in C
(_direct_fetch.c, compiled at registration with ``cc``) straight into Arrow buffers. It is a
bound, not a client: one broker (the first bootstrap server leads every partition), no TLS or
SASL, uncompressed batches of non-null keys and values (anything else fails the task), no
retries. What it measures is the cost of a fetch path with no allocation, object or queue hop
per record, beside groupkafka's librdkafka path (issue 27: whether a fetch client of our own
would pay for itself).
"""

from __future__ import annotations

import ctypes
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import types

import _floor_source as floor
import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSource

from spark_groupsource.executor.heap import freeze_once, freeze_settled
from spark_groupsource.executor.task_socket import speed_up_task_socket
from spark_groupsource.schema import arrow_schema, spark_schema

FETCH_BYTES = 8 << 20
ROWS_PER_BATCH = 100_000  # handed over at this many rows or FETCH_BYTES of values
_ERRORS = {-1: "out of room", -2: "a compressed or control batch", -3: "a null key or value"}


def _library(path: str) -> types.ModuleType:
    """The worker's parser and receive buffer, kept across tasks."""
    holder = floor.worker_cache("_benchdirect_library")
    if not hasattr(holder, "parse"):
        lib = ctypes.CDLL(path)
        lib.parse.restype = ctypes.c_int
        lib.parse.argtypes = [ctypes.c_void_p, ctypes.c_long, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p,
                              ctypes.c_void_p]
        holder.parse, holder.buf = lib.parse, bytearray(FETCH_BYTES + (1 << 20))
    return holder


class _Columns:
    """One Arrow batch's buffers, filled by the parser; untouched pages cost nothing."""

    def __init__(self, next_offset: int):
        rows, size = 2 * ROWS_PER_BATCH, 2 * FETCH_BYTES
        self.kv, self.vv = np.empty(size, np.uint8), np.empty(size, np.uint8)
        self.ko, self.vo = np.empty(rows + 1, np.int32), np.empty(rows + 1, np.int32)
        self.ko[0] = self.vo[0] = 0  # the parser writes the end of each row after it
        self.offs, self.ts, self.types = np.empty(rows, np.int64), np.empty(rows, np.int64), np.empty(rows, np.int32)
        self.ptrs = np.array([a.ctypes.data for a in (self.kv, self.ko, self.vv, self.vo, self.offs, self.ts,
                                                      self.types)], np.uint64)
        self.caps = np.array([size, size, rows], np.int64)
        self.state = np.array([0, 0, 0, next_offset, 0], np.int64)  # rows, key/value bytes, next, done

    def batch(self, topic: str, partition: int) -> pa.RecordBatch:
        n, klen, vlen = (int(x) for x in self.state[:3])
        name = topic.encode()

        def binary(offsets, data, length, kind=None):
            return pa.Array.from_buffers(kind or pa.binary(), n, [None, pa.py_buffer(offsets[:n + 1]), pa.py_buffer(data[:length])])

        return pa.RecordBatch.from_arrays([
            binary(self.ko, self.kv, klen),
            binary(self.vo, self.vv, vlen),
            binary(np.arange(n + 1, dtype=np.int32) * len(name), np.frombuffer(name * n, np.uint8), n * len(name),
                   pa.string()),
            pa.array(np.full(n, partition, np.int32)),
            pa.array(self.offs[:n]),
            pa.Array.from_buffers(pa.timestamp("us", tz="UTC"), n, [None, pa.py_buffer(self.ts[:n])]),
            pa.array(self.types[:n]),
        ], schema=arrow_schema(False))


def _s16(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def _fetch_request(correlation: int, topic: str, partition: int, offset: int) -> bytes:
    body = (struct.pack(">hhi", 1, 4, correlation) + _s16("benchdirect")       # Fetch v4, header v1
            + struct.pack(">iiiib", -1, 500, 1, FETCH_BYTES, 0)                  # read_uncommitted
            + struct.pack(">i", 1) + _s16(topic) + struct.pack(">i", 1)
            + struct.pack(">iqi", partition, offset, FETCH_BYTES))
    return struct.pack(">i", len(body)) + body


def read_range(library: str, bootstrap: str, topic: str, partition: int, lo: int, hi: int):
    """Arrow batches of the records [lo, hi) of one partition."""
    holder = _library(library)
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    cols, correlation = _Columns(lo), 0
    with socket.create_connection((host, int(port))) as sock:
        while cols.state[3] < hi and not cols.state[4]:  # next offset below hi, no record at or past it yet
            correlation += 1
            sock.sendall(_fetch_request(correlation, topic, partition, int(cols.state[3])))
            head = bytearray(4)
            if sock.recv_into(head, 4, socket.MSG_WAITALL) != 4:
                raise ConnectionError("the broker closed the connection")
            (size,) = struct.unpack(">i", head)
            if size > len(holder.buf):
                holder.buf = bytearray(size)
            view, got = memoryview(holder.buf), 0
            while got < size:
                n = sock.recv_into(view[got:size], size - got)
                if not n:
                    raise ConnectionError("the broker closed the connection")
                got += n
            # correlation id, throttle, 1 topic (its name), 1 partition
            at = 8 + 4 + 2 + struct.unpack_from(">h", holder.buf, 12)[0] + 4
            _, error, high, _, aborted = struct.unpack_from(">ihqqi", holder.buf, at)
            if error:
                raise RuntimeError(f"Fetch of {topic} [{partition}] at {cols.state[3]}: error code {error}")
            if high <= cols.state[3]:  # a range past the log's end would be asked for ever
                raise RuntimeError(f"{topic} [{partition}] ends at {high}, below the range's next offset {cols.state[3]}")
            at += 26 + 16 * max(aborted, 0)
            (length,) = struct.unpack_from(">i", holder.buf, at)
            base = ctypes.addressof(ctypes.c_char.from_buffer(holder.buf)) + at + 4
            while length > 0:
                rc = holder.parse(base, length, hi, cols.ptrs.ctypes.data, cols.caps.ctypes.data,
                                  cols.state.ctypes.data)
                if rc != -1 or not cols.state[0]:
                    break
                # out of room at a whole record: hand the batch over, parse the rest (below next skipped)
                yield cols.batch(topic, partition)
                cols = _Columns(int(cols.state[3]))
            if length > 0 and rc:
                raise RuntimeError(f"{topic} [{partition}]: {_ERRORS.get(rc, rc)} (a bound, not a client)")
            rows, value_bytes, at_end = int(cols.state[0]), int(cols.state[2]), cols.state[3] >= hi or cols.state[4]
            if rows and (rows >= ROWS_PER_BATCH or value_bytes >= FETCH_BYTES or at_end):
                yield cols.batch(topic, partition)
                cols = _Columns(int(cols.state[3]))


class _DirectRange(floor._Range):
    def __init__(self, index: int, lo: int, hi: int, options: dict):
        super().__init__(index, hi - lo, 0)
        self.partition, self.lo, self.hi = index, lo, hi
        self.bootstrap, self.topic, self.library = options["bootstrap"], options["topic"], options["library"]


class DirectStreamReader(floor.FloorStreamReader):
    def __init__(self, options):
        super().__init__(options)
        self.options = dict(options)

    def partitions(self, start, end):
        return [_DirectRange(i, lo, hi, self.options)
                for i, (lo, hi) in enumerate(zip(start["o"], end["o"], strict=True)) if hi > lo]

    def read(self, partition: _DirectRange):
        freeze_once()  # what groupkafka and the floor do to a worker
        speed_up_task_socket()
        yield from read_range(partition.library, partition.bootstrap, partition.topic, partition.partition,
                              partition.lo, partition.hi)
        freeze_settled()


class DirectDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "benchdirect"

    def schema(self):
        return spark_schema(False)

    def streamReader(self, schema):
        return DirectStreamReader(self.options)


def compile_parser(directory: str | None = None) -> str | None:
    """The parser built into ``directory`` (default a new temporary one); None (with the reason
    printed) without cc."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        print("  (direct fetch bound: no C compiler; left out)")
        return None
    out = os.path.join(directory or tempfile.mkdtemp(prefix="benchdirect-"), "_direct_fetch.so")
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_direct_fetch.c")
    subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", out, src], check=True)
    return out


def register(spark) -> None:
    """Register ``benchdirect`` (by value, with the floor it builds on: the workers cannot
    import the bench directory); the query passes ``library``, the parser's path."""
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    cloudpickle.register_pickle_by_value(floor)
    spark.dataSource.register(DirectDataSource)
