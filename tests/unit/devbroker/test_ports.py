"""Ports for the dev brokers: servers listen below the kernel's ephemeral range."""

from __future__ import annotations

import random
import socket

from spark_groupsource.devbroker import _ports


def test_listen_port_is_free_and_below_the_ephemeral_range():
    low = _ports._ephemeral_low()
    for seed in range(20):
        port = _ports.listen_port(rng=random.Random(seed))
        assert _ports._LISTEN_LOW <= port < max(low, _ports._LISTEN_LOW + 1000)
        assert not _ports.port_in_use(port)


def test_listen_port_skips_taken_and_excluded_ports():
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        taken = held.getsockname()[1]
        # a generator that offers the taken port, then an excluded one, then the answer
        offered = iter([taken, 20001, 20002])

        class Fixed(random.Random):
            def randrange(self, *_):  # type: ignore[override]
                return next(offered)

        # 20002 itself might be taken on a busy machine: then listen_port goes on drawing
        try:
            port = _ports.listen_port(exclude={20001}, rng=Fixed())
        except StopIteration:
            return
        assert port == 20002


def test_ephemeral_low_reads_the_kernel_setting():
    low = _ports._ephemeral_low()
    assert 1024 <= low <= 65535
