"""A TCP proxy in front of a test broker's PROXIED listener that can hold or reset every
connection: a network fault on real sockets for a test (the chaos suite's fuller proxy, with
its per-process roles and wire log, is chaos/netfaults.py).

The broker is started with ``PROXIED_PORTS_KEY`` set to :attr:`FaultProxy.port`, so a client
bootstrapped at :attr:`FaultProxy.bootstrap` reaches it, and its coordinator, only through here.
``hold()``: nothing is read or forwarded and new connections are accepted and held (a silent
network; what was held is delivered at ``heal()``). ``reset()``: every connection closed with an
RST, and new ones too, until ``heal()``.
"""

from __future__ import annotations

import contextlib
import select
import socket
import struct
import threading

from spark_groupsource.devbroker._kafka import PROXIED_PORTS_KEY


class FaultProxy:
    def __init__(self) -> None:
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port: int = self._listener.getsockname()[1]
        self.upstream: int | None = None
        self.mode = "pass"
        self.accepted = 0
        self._lock = threading.Lock()
        self._conns: list[socket.socket] = []
        self._closed = False

    @property
    def broker_config(self) -> dict[str, str]:
        return {PROXIED_PORTS_KEY: str(self.port)}

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, upstream_port: int) -> FaultProxy:
        """Forward to the broker's PROXIED listener at ``upstream_port``."""
        self.upstream = upstream_port
        threading.Thread(target=self._accept, daemon=True, name="faultproxy").start()
        return self

    def hold(self) -> None:
        self.mode = "hold"

    def reset(self) -> None:
        with self._lock:
            self.mode = "reset"
            for c in self._conns:
                _rst(c)

    def heal(self) -> None:
        self.mode = "pass"

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            for c in self._conns:
                with contextlib.suppress(OSError):
                    c.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        if self.mode == "reset":
            _rst(client)
            return
        try:
            server = socket.create_connection(("127.0.0.1", self.upstream), timeout=5)
        except OSError:
            _rst(client)
            return
        with self._lock:
            self._conns.append(client)
        peers = {client: server, server: client}
        try:
            while not self._closed:
                if self.mode == "reset":
                    _rst(client)
                    return
                if self.mode == "hold":
                    threading.Event().wait(0.05)
                    continue
                readable, _, _ = select.select(list(peers), [], [], 0.05)
                for s in readable:
                    data = s.recv(65536)
                    if not data:
                        return
                    peers[s].sendall(data)
        except OSError:
            return
        finally:
            for s in (client, server):
                with contextlib.suppress(OSError):
                    s.close()
            with self._lock:
                if client in self._conns:
                    self._conns.remove(client)


def _rst(s: socket.socket) -> None:
    """Close with an RST (SO_LINGER 0), as a host rejecting the connection does."""
    with contextlib.suppress(OSError):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
