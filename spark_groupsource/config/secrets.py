"""Which option values are secrets, and maps that never show them (repr, errors, logs)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

REDACTED = "***"

_SECRET_WORDS = ("password", "secret", "jaas", "token", "credential", "user.info")
_SECRET_KEYS = frozenset(
    {"ssl.key.pem", "ssl_key_pem", "ssl.keystore.key", "sasl.oauthbearer.config"}
)


def is_secret(key: str) -> bool:
    """Whether the value of option/property ``key`` must never be shown."""
    k = key.lower()
    if k.startswith("kafka."):
        k = k[len("kafka."):]
    return k in _SECRET_KEYS or any(w in k for w in _SECRET_WORDS)


def redacted(config: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``config`` with every secret value replaced by ``"***"`` (safe to log)."""
    return {k: (REDACTED if is_secret(k) else v) for k, v in config.items()}


class KafkaParams(Mapping[str, str]):
    """A read-only string map whose ``repr`` redacts secrets (it is shown inside options)."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, str] | None = None):
        self._data = dict(data or {})

    def __getitem__(self, key: str) -> str:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return self._data == dict(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(frozenset(self._data.items()))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({redacted(self._data)!r})"

    __str__ = __repr__

    def __getstate__(self) -> dict[str, str]:
        return self._data

    def __setstate__(self, state: dict[str, str]) -> None:
        self._data = state


def shown(key: str, value: str) -> str:
    """``value`` quoted for an error message, or ``***`` when ``key`` names a secret."""
    return REDACTED if is_secret(key) else repr(value)


_ASSIGNED = re.compile(r"""([A-Za-z0-9_.\-]+)(['"]?\s*[=:]\s*)('[^']*'|"[^"]*"|[^\s,;(){}\[\]'"]+)""")


def scrubbed(text: str, values: Iterable[str] = ()) -> str:
    """Free text (an exception's message) safe to show: every ``values`` (the secrets a query was
    given) replaced by ``***``, and so is any value assigned to a secret-named key in it
    (``sasl.password=...``, ``'ssl_key_password': '...'``)."""
    for value in sorted((v for v in values if v), key=len, reverse=True):
        text = text.replace(value, REDACTED)

    def hide(m: re.Match[str]) -> str:
        return f"{m.group(1)}{m.group(2)}{REDACTED}" if is_secret(m.group(1)) else m.group(0)

    return _ASSIGNED.sub(hide, text)
