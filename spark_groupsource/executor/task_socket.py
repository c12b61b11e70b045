"""No Nagle and no delayed-ACK waits on the socket a Python worker takes its tasks from.

Over TCP (Spark's default between an executor and its Python workers) every task of a Python
source waited about 40 ms before it started, measured with strace on the workers (2026-11-27,
Spark 4.3.0, this machine): the JVM sends a task's header (about 21 KB) and then, in a second
send, its input (1.5 KB). The JVM's socket has Nagle's algorithm on, so the second send waits
for the worker to acknowledge the first; the worker's kernel delays that acknowledgement
(having answered the previous task with data, it is in "pingpong" mode and waits for an
answer to ride on) until its delayed-ACK timer fires, 40 ms on Linux. The worker's own writes
(Arrow batches, then the task's end markers) wait the same way on the JVM's acknowledgements.
A task held a slot about 65 ms, 19 ms with Unix domain sockets
(``spark.python.unix.domain.socket.enabled``, Spark 4.1+), which have neither.

What the worker can do about its end of the socket: ``TCP_NODELAY`` (its writes go out at
once; PySpark writes through a 64 KiB buffer, so no tiny packets follow) and a thread that
waits for data to arrive (epoll, edge-triggered) and then sets ``TCP_QUICKACK``, which sends
the pending acknowledgement at once and leaves pingpong mode, so the JVM's second send is not
held. No byte is read or written here; a Unix domain socket is left alone. Once per worker
process, from its first read; the thread ends with the socket or the process.
"""

from __future__ import annotations

import logging
import os
import select
import socket
import sys
import threading

__all__ = ["speed_up_task_socket"]

log = logging.getLogger("spark_groupsource.fetch")

_lock = threading.Lock()
_tried = False  # a worker process takes all its tasks from one socket: look for it once


def _worker_socket_fd() -> int | None:
    """The file descriptor of the socket this worker reads its tasks from: ``infile`` of
    pyspark.worker's ``main(infile, outfile)``, which runs the task that called us."""
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_name == "main" and code.co_filename.endswith(os.path.join("pyspark", "worker.py")):
            infile = frame.f_locals.get("infile")
            try:
                return infile.fileno() if infile is not None else None
            except (AttributeError, OSError, ValueError):
                return None
        frame = frame.f_back
    return None


def _tcp(sock: socket.socket) -> bool:
    return sock.family in (socket.AF_INET, socket.AF_INET6) and sock.type == socket.SOCK_STREAM


def _acknowledge(sock: socket.socket) -> None:
    """Each time data arrives, acknowledge it at once (until the socket closes)."""
    poller = select.epoll()
    poller.register(sock.fileno(), select.EPOLLIN | select.EPOLLET)
    try:
        while True:
            for _fd, events in poller.poll():
                if events & (select.EPOLLHUP | select.EPOLLERR):
                    return
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
    except OSError:
        return
    finally:
        poller.close()
        sock.close()


def speed_up_task_socket() -> bool:
    """Set TCP_NODELAY on this worker's task socket and start its acknowledging thread (once
    per process: later tasks pay one flag check; TCP on Linux only). True if this call did."""
    global _tried
    if _tried or not hasattr(socket, "TCP_QUICKACK") or not hasattr(select, "epoll"):
        return False
    fd = _worker_socket_fd()
    if fd is None:
        return False  # not in a Spark worker's task: the next read looks again
    with _lock:
        if _tried:
            return False
        _tried = True
    try:
        # a descriptor of our own: the worker's may be closed and its number reused
        sock = socket.socket(fileno=os.dup(fd))
    except OSError:
        return False
    try:
        if not _tcp(sock):
            sock.close()
            return False
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except OSError:
        sock.close()
        return False
    threading.Thread(target=_acknowledge, args=(sock,), daemon=True, name="groupkafka-task-socket").start()
    log.debug("task socket (fd %d): TCP_NODELAY, acknowledged at once", fd)
    return True
