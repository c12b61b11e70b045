"""Protobuf schemas with references, from their ``.proto`` text: compiled with ``protoc``.

A schema that imports files of other subjects is read from its text and its references' texts
(``/schemas/ids/{id}`` and ``/subjects/{s}/versions/{v}``), as Confluent's Java deserializer
reads them, and compiled with the ``protoc`` of ``grpcio-tools`` into one descriptor set. The
serialized form (``?format=serialized``, what confluent-kafka's Python deserializer asks for) is
not used for them: Karapace 3.16 answers it with HTTP 500 for a schema with references, and
ignores it for a subject's version. The result is what :func:`.protobuf_types.pool_of` takes:
base64 ``FileDescriptorProto`` of the schema and of each import, under its import path.
"""

from __future__ import annotations

import base64
import os
import tempfile
import threading
from collections.abc import Sequence

__all__ = ["compile_closure", "ProtocMissingError"]

_ROOT = "groupkafka_schema/root.proto"
_FD2 = threading.Lock()  # one protoc at a time: its stderr is the process's fd 2, redirected


class ProtocMissingError(ImportError):
    """grpcio-tools (protoc) is not installed."""


def _b64(proto: object) -> str:
    return base64.standard_b64encode(proto.SerializeToString()).decode("ascii")  # type: ignore[attr-defined]


def compile_closure(root: str, imports: Sequence[tuple[str, str]]) -> tuple[str, dict[str, str]]:
    """``root`` (.proto text) and ``imports`` ((import path, .proto text), each a reference) ->
    the base64 descriptors of the root and of each import by path. ``ValueError`` naming
    protoc's complaint when they do not compile."""
    try:
        import grpc_tools
        from grpc_tools import protoc
    except ImportError:
        raise ProtocMissingError("a Protobuf schema with references (imports of other subjects) is compiled from "
                                 "its .proto text with protoc: install grpcio-tools (pip install grpcio-tools) "
                                 "on the driver and the executors") from None
    from google.protobuf import descriptor_pb2

    well_known = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    with tempfile.TemporaryDirectory(prefix="groupkafka-proto-") as tmp:
        for path, text in [*imports, (_ROOT, root)]:
            if os.path.isabs(path) or ".." in path.split("/"):
                raise ValueError(f"an import path outside the schema's tree: {path!r}")
            target = os.path.join(tmp, path)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "w", encoding="utf-8") as f:
                f.write(text)
        out = os.path.join(tmp, "set.pb")
        errors = os.path.join(tmp, "errors.txt")
        rc = _protoc(protoc, ["protoc", f"-I{tmp}", f"-I{well_known}", f"--descriptor_set_out={out}",
                              "--include_imports", _ROOT], errors)
        if rc != 0:
            with open(errors, encoding="utf-8", errors="replace") as f:
                said = f.read().strip().replace(tmp + os.sep, "")
            raise ValueError(f"protoc could not compile the schema with its references: {said or f'exit {rc}'}")
        with open(out, "rb") as f:
            files = {fd.name: fd for fd in descriptor_pb2.FileDescriptorSet.FromString(f.read()).file}
    top = files.pop(_ROOT)
    top.name = ""  # named as the registry's serialized form names it (pool_of calls it "default")
    return _b64(top), {path: _b64(files[path]) for path, _ in imports if path in files}


def _protoc(protoc: object, args: list[str], errors: str) -> int:
    """protoc's exit code, its stderr (written by its C++ code to fd 2) into ``errors``."""
    with _FD2:
        saved = os.dup(2)
        try:
            with open(errors, "w") as f:
                os.dup2(f.fileno(), 2)
                return int(protoc.main(args))  # type: ignore[attr-defined]
        finally:
            os.dup2(saved, 2)
            os.close(saved)
