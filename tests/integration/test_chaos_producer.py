"""The chaos producer's delivery reports against the log: a record reported delivered with no
offset (librdkafka's answer to DUPLICATE_SEQUENCE_NUMBER) is looked up; one the log does not
hold stays in the produced set with no offset (the tally counts it lost: an acknowledged write
must be there) and is named in ``absent``."""

from __future__ import annotations

import time

from chaos.traffic import SeqProducer


def test_unknown_offsets_are_confirmed_in_the_log(broker, new_topic):
    topic = new_topic(2)
    p = SeqProducer(broker.bootstrap, topic, 2, rate=200, seconds=0.2).start()
    deadline = time.monotonic() + 30
    while not p.done and time.monotonic() < deadline:
        time.sleep(0.05)
    p.finish(30)
    assert len(p.delivered) >= 10 and not p.failed
    real = dict(p.delivered)
    p.delivered[3] = (real[3][0], None)  # as librdkafka reports a duplicate-sequence answer
    p.delivered[5] = (real[5][0], -1)
    p.delivered[10_000] = (0, None)  # reported, but no such record was ever written
    assert p.confirm_unknown(broker.bootstrap, timeout=30) == {10_000: 0}
    assert p.delivered == {**real, 10_000: (0, None)} and p.absent == {10_000: 0}
    # asked again, the same answer: the found offsets stay, the absent record is still absent
    assert p.confirm_unknown(broker.bootstrap) == {10_000: 0} and p.delivered[3] == real[3]
