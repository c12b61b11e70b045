"""One small exception hierarchy, so callers catch ``AssignmentError`` and nothing broader."""

from __future__ import annotations

from collections.abc import Iterable


class AssignmentError(Exception):
    """Base of every error raised by the assignment package."""


class UnknownAssignorError(AssignmentError):
    """A strategy name that is neither built in nor a loadable ``pkg.mod:Class``."""

    def __init__(self, spec: str, builtins: Iterable[str], reason: str | None = None) -> None:
        names = ", ".join(sorted(builtins))
        detail = f": {reason}" if reason else ""
        super().__init__(
            f"unknown assignor {spec!r}{detail}; expected one of the built-ins ({names}) "
            "or a dotted path 'package.module:Class' to an Assignor subclass"
        )
        self.spec = spec


class InvalidAssignmentError(AssignmentError):
    """An assignor produced something the group must not act on."""

    def __init__(self, assignor: str, message: str) -> None:
        super().__init__(f"assignor {assignor!r} produced an invalid assignment: {message}")
        self.assignor = assignor


class ProtocolDecodeError(AssignmentError):
    """A member's subscription or assignment bytes are truncated or corrupt."""

    def __init__(self, what: str, message: str, member_id: str | None = None) -> None:
        who = f" of member {member_id!r}" if member_id is not None else ""
        super().__init__(f"cannot decode {what}{who}: {message}")
        self.member_id = member_id


class AssignorConfigError(AssignmentError):
    """A bad option value, or input the configured assignor cannot serve."""

    def __init__(self, option: str, message: str) -> None:
        super().__init__(f"{option}: {message}")
        self.option = option
