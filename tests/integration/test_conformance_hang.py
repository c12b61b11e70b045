"""The conformance suite's own check: a groupkafka that hangs fails a case, it never passes
as "both readers fail" (docs/conformance.md, "How it runs").
"""

from __future__ import annotations

import pytest
from conformance.harness import SKIP_WITHOUT_SPARK_SOURCE, StreamPair, WaitTimedOut
from conformance.kafka_ops import create_topic, now_ms, send

pytestmark = SKIP_WITHOUT_SPARK_SOURCE

#: How long the case waits on the hung reader (the harness's own waits are 90 s).
HANG_S = 15


def test_a_hang_fails_the_case(spark, kafka_broker, unique_name, tmp_path, closed_port):
    """test_starting_timestamp_without_a_match's "both fail" step, with groupkafka's bootstrap a
    loopback port held bound where nothing listens: Spark's source fails at once (no record at
    or after the starting timestamp), groupkafka waits for a broker (up to groupJoinTimeoutMs,
    2 minutes). Before the harness told a wait that ran out from a reader's error, this step
    passed ("both failed": Spark's error and the 90 s wait's AssertionError); now it raises
    WaitTimedOut naming groupkafka, and so fails the case."""
    bs, topic = kafka_broker.bootstrap, unique_name("hang")
    create_topic(bs, topic, 1)
    send(bs, topic, ["1", "2"], partition=0, timestamp=now_ms() - 5000)
    opts = {"subscribe": topic, "startingTimestamp": str(now_ms() + 60_000)}
    with StreamPair(spark, bs, tmp_path, opts,
                    gk_options={"kafka.bootstrap.servers": f"127.0.0.1:{closed_port}"}) as pair:
        pair.start()
        with pytest.raises(WaitTimedOut, match=r"groupkafka: the query did not catch up"):
            pair.failures_of(timeout=HANG_S)
        assert pair["kafka"].failure() and "No offset matched" in pair["kafka"].failure(), (
            f"Spark's source should have failed at once: {pair['kafka'].failure()}")
        assert pair["groupkafka"].query.isActive and pair["groupkafka"].failure() is None, (
            "groupkafka was to hang, not fail: the case no longer shows a hang")
