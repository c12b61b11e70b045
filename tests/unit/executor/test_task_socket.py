"""task_socket on real loopback sockets: the write-write-read stall of a task's start (strace
on Spark's workers, 2026-11-27) and the thread that ends it. Linux only (TCP_QUICKACK, epoll)."""

from __future__ import annotations

import os
import socket
import sys
import threading
import time

import pytest

from spark_groupsource.executor import task_socket

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="TCP_QUICKACK and epoll are Linux's"
)


def _pair() -> tuple[socket.socket, socket.socket]:
    """(jvm, worker): a TCP connection over loopback, as between an executor and its worker."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        jvm = socket.create_connection(server.getsockname())
        worker, _ = server.accept()
    return jvm, worker


def _quick(sock: socket.socket) -> bool:
    """Linux reports TCP_QUICKACK as 1 while the socket is out of pingpong mode."""
    return bool(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK))


def _task_waits(jvm: socket.socket, worker: socket.socket, rounds: int) -> list[float]:
    """Seconds the worker waits for each task's input: the JVM sends a header, then the input
    in a second send (Nagle's algorithm on, as Spark's socket), after a round trip that put
    the worker's socket in pingpong mode (its acknowledgements wait to ride on an answer)."""
    waits = []
    for _ in range(rounds):
        for _ in range(3):  # the previous task: the JVM sends, the worker answers at once
            jvm.sendall(b"h" * 2000)
            worker.recv(65536)
            worker.sendall(b"r" * 2000)
            jvm.recv(65536)
        assert not _quick(worker), "no pingpong mode: the kernel would not delay this ACK"
        jvm.sendall(b"H" * 21_000)  # the next task's header...
        got = 0
        while got < 21_000:
            got += len(worker.recv(65536))
        t0 = time.monotonic()
        jvm.sendall(b"I" * 1_500)  # ...and its input: held until the header is acknowledged
        worker.recv(65536)
        waits.append(time.monotonic() - t0)
    return waits


def test_without_the_thread_each_task_waits_for_the_delayed_ack():
    """The control: Linux's delayed-ACK timer is at least 40 ms, so every round waits that long."""
    jvm, worker = _pair()
    with jvm, worker:
        waits = _task_waits(jvm, worker, rounds=3)
    assert min(waits) >= 0.035, waits


def test_with_the_thread_the_input_follows_the_header_at_once():
    """With the thread, the header is acknowledged as it arrives and the input follows. Under
    load the thread can be scheduled late in a round; one round under 35 ms (the control never
    has one: the kernel's timer is at least 40 ms) shows it acknowledges before the timer would.
    Up to 60 rounds, stopping at the first quick one: at load 30 (a 3-worker test run beside a
    soak, 2026-12-02) ten rounds all took 42-49 ms."""
    jvm, worker = _pair()
    with jvm, worker:
        ours = socket.socket(fileno=os.dup(worker.fileno()))
        t = threading.Thread(target=task_socket._acknowledge, args=(ours,), daemon=True)
        t.start()
        waits: list[float] = []
        for _ in range(60):
            waits += _task_waits(jvm, worker, rounds=1)
            if waits[-1] < 0.035:
                break
        assert min(waits) < 0.035, waits
        jvm.close()  # the peer goes away: the thread ends, closing its own descriptor
        worker.shutdown(socket.SHUT_RDWR)
        t.join(10)
        assert not t.is_alive()


def test_unix_domain_sockets_are_left_alone():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with a, b:
        assert not task_socket._tcp(a)
    jvm, worker = _pair()
    with jvm, worker:
        assert task_socket._tcp(worker)


def test_outside_a_spark_worker_nothing_starts():
    assert task_socket._worker_socket_fd() is None
    assert task_socket.speed_up_task_socket() is False
