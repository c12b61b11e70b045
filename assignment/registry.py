"""Assignors by wire name, or user classes by dotted path; resolved once at setup."""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from assignment.base import Assignor
from assignment.copartition import CoPartitionAssignor
from assignment.errors import AssignorConfigError, UnknownAssignorError
from assignment.range import RangeAssignor
from assignment.redundant import RedundantAssignor
from assignment.roundrobin import RoundRobinAssignor
from assignment.sticky import CooperativeStickyAssignor, StickyAssignor

BUILTIN: dict[str, type[Assignor]] = {
    "range": RangeAssignor,
    "roundrobin": RoundRobinAssignor,
    "sticky": StickyAssignor,
    "cooperative-sticky": CooperativeStickyAssignor,
    "copartition": CoPartitionAssignor,
    "redundant": RedundantAssignor,
}


def _load_class(spec: str) -> type:
    if ":" in spec:
        module_name, _, attr = spec.partition(":")
    else:
        module_name, _, attr = spec.rpartition(".")
    if not module_name or not attr:
        raise UnknownAssignorError(spec, BUILTIN)
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise UnknownAssignorError(spec, BUILTIN, f"cannot import module {module_name!r} ({e})") from e
    obj = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise UnknownAssignorError(
                spec, BUILTIN, f"module {module_name!r} has no attribute {attr!r}"
            ) from None
    return obj  # type: ignore[return-value]


def create_assignor(spec: str, options: Mapping[str, str] | None = None) -> Assignor:
    """A built-in name (``range``...) or ``pkg.mod:Class`` / ``pkg.mod.Class``."""
    name = spec.strip()
    opts = {k.lower(): v for k, v in (options or {}).items()}
    if not name:
        raise UnknownAssignorError(spec, BUILTIN, "empty name")
    cls = BUILTIN.get(name.lower())
    if cls is None:
        if "." not in name and ":" not in name:
            raise UnknownAssignorError(spec, BUILTIN)
        cls = _load_class(name)
        if not (isinstance(cls, type) and issubclass(cls, Assignor)):
            raise UnknownAssignorError(
                spec, BUILTIN, f"{cls!r} is not a subclass of assignment.base.Assignor"
            )
        if getattr(cls, "__abstractmethods__", None):
            raise UnknownAssignorError(spec, BUILTIN, f"{cls.__name__} is abstract")
    assignor = cls.from_options(opts)
    if not assignor.name:
        raise AssignorConfigError("assignor", f"{cls.__name__} has an empty protocol name")
    return assignor


def create_assignors(spec_list: str, options: Mapping[str, str] | None = None) -> list[Assignor]:
    """A comma-separated priority list, as ``partition.assignment.strategy``."""
    entries = [e.strip() for e in spec_list.split(",")]
    if not spec_list.strip() or any(not e for e in entries):
        raise AssignorConfigError(
            "partition.assignment.strategy",
            f"expected a comma-separated list of assignors, e.g. 'cooperative-sticky,range', "
            f"got {spec_list!r} (empty entry)",
        )
    out: list[Assignor] = []
    seen: set[str] = set()
    for e in entries:
        a = create_assignor(e, options)
        if a.name in seen:
            raise AssignorConfigError(
                "partition.assignment.strategy", f"assignor {a.name!r} is listed twice in {spec_list!r}"
            )
        seen.add(a.name)
        out.append(a)
    return out
