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
        free = _ports.listen_port()
        excluded = _ports.listen_port(exclude={free})
        # a generator that offers the taken port, then the excluded one, then a free one
        offered = iter([taken, excluded, free])

        class Fixed(random.Random):
            def randrange(self, *_):  # type: ignore[override]
                return next(offered)

        assert _ports.listen_port(exclude={excluded}, rng=Fixed()) == free


def test_ephemeral_low_reads_the_kernel_setting():
    low = _ports._ephemeral_low()
    assert 1024 <= low <= 65535
