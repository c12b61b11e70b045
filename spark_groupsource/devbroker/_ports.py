"""Loopback ports for the dev brokers: a free one, or whether one is taken."""

from __future__ import annotations

import random
import socket

#: Where :func:`listen_port` draws from when the kernel's ephemeral range cannot be read.
_FALLBACK_EPHEMERAL_LOW = 32768
_LISTEN_LOW = 10000


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def _ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return _FALLBACK_EPHEMERAL_LOW


def listen_port(host: str = "127.0.0.1", exclude: frozenset[int] | set[int] = frozenset(),
                rng: random.Random | None = None) -> int:
    """A free port below the kernel's ephemeral range, for a server that binds it later.

    :func:`free_port` hands out an ephemeral port: until the server binds it, any outgoing
    connection on the machine (a client of another test's broker) may get it as its local
    port, and the server then fails to start. Ports below the ephemeral range are never given
    to outgoing connections; drawing at random keeps parallel test workers apart."""
    rng = rng or random.SystemRandom()
    high = max(_LISTEN_LOW + 1000, _ephemeral_low())
    for _ in range(200):
        port = rng.randrange(_LISTEN_LOW, high)
        if port not in exclude and not port_in_use(port, host):
            return port
    return free_port(host)  # the whole range looks taken: take what the kernel gives
