"""The DevBroker library API."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import pytest
from confluent_kafka.admin import AdminClient

from helpers import children_of, pid_alive
from spark_groupsource.devbroker import DevBroker, DevBrokerError, ExternalBroker
from spark_groupsource.errors import GroupKafkaError

pytestmark = pytest.mark.integration


def _topics(bootstrap: str) -> dict[str, int]:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    return {name: len(t.partitions) for name, t in md.topics.items() if not name.startswith("_")}


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"backend": "redpanda"}, "unknown backend 'redpanda'"),
        ({"backend": "mock", "broker_config": {"a": "b"}}, "--broker-config is only supported with kafka"),
        ({"backend": "tansu", "brokers": 2}, "tansu runs a single broker"),
        ({"backend": "mock", "brokers": 0}, "brokers must be an integer >= 1"),
        ({"backend": "mock", "topics": {"demo": 0}}, "bad partition count 0"),
        ({"backend": "mock", "topics": {"bad name": 1}}, "bad topic name 'bad name'"),
        ({"backend": "mock", "topics": ["demo"]}, "topics must be a mapping"),
        ({"backend": "mock", "port": 9092}, "--port is not supported with the mock"),
    ],
)
def test_bad_arguments_fail_fast(kwargs, message):
    with pytest.raises(DevBrokerError, match=message) as info:
        DevBroker(**kwargs)
    assert isinstance(info.value, GroupKafkaError)


@pytest.mark.parametrize("backend", ["mock", "tansu"])
def test_context_manager_lifecycle_and_topics(backend):
    with DevBroker(backend, topics={"demo": 8}) as b:
        assert b.alive and b.backend == backend
        assert b.bootstrap.startswith("127.0.0.1:")
        assert b.recommended_session_timeout_ms == (3000 if backend == "mock" else 6000)
        assert (b.mock is None) == (backend == "tansu")
        kids = children_of(b.pid)
        assert len(kids) == (1 if backend == "tansu" else 0)

        assert b.create_topic("demo", 8) is False  # already there: fine
        assert b.create_topic("more", 3) is True
        with pytest.raises(DevBrokerError, match="already exists with 3 partitions, not 5"):
            b.create_topic("more", 5)
        assert _topics(b.bootstrap) == {"demo": 8, "more": 3}
        assert b.topics == {"demo": 8, "more": 3}
        pid = b.pid
    assert not b.alive and b.pid is None
    assert not pid_alive(pid)
    for kid in kids:
        assert not pid_alive(kid)
    b.stop()  # idempotent
    with pytest.raises(DevBrokerError, match="not running"):
        b.create_topic("x", 1)


def test_tansu_fixed_port_in_use_is_reported(tansu_broker):
    port = int(tansu_broker.bootstrap.rsplit(":", 1)[1])
    with pytest.raises(DevBrokerError, match=f"port {port} is in use"):
        DevBroker("tansu", port=port).start()


def test_mock_multi_broker_metadata():
    with DevBroker("mock", brokers=3, topics={"spread": 6}) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        assert sorted(admin.list_topics(timeout=10).brokers) == [1, 2, 3]
        # the mock picks leaders at random: place two, then read them back
        b.mock.set_partition_leader("spread", 0, 3)
        b.mock.set_partition_leader("spread", 1, 1)
        parts = admin.list_topics(timeout=10).topics["spread"].partitions
        assert (parts[0].leader, parts[1].leader) == (3, 1)
        with pytest.raises(DevBrokerError, match="broker_down\\(7\\) failed"):
            b.mock.broker_down(7)


@pytest.mark.parametrize("backend", ["mock", "tansu"])
def test_no_orphans_when_the_owner_is_killed(backend):
    """SIGKILL the process that owns a DevBroker: its broker processes go away by themselves."""
    script = textwrap.dedent(
        f"""
        import sys, time
        from spark_groupsource.devbroker import DevBroker
        b = DevBroker({backend!r}).start()
        print(b.pid, flush=True)
        time.sleep(120)
        """
    )
    owner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        child = int(owner.stdout.readline())
        family = {child} | children_of(child)
        assert len(family) == (2 if backend == "tansu" else 1)
    finally:
        owner.kill()
        owner.wait(10)
    deadline = time.monotonic() + 10
    while any(pid_alive(p) for p in family) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(pid_alive(p) for p in family)


def test_external_broker_object(tansu_broker):
    ext = ExternalBroker(tansu_broker.bootstrap)
    with ext:
        assert ext.backend == "external" and ext.mock is None
        assert ext.recommended_session_timeout_ms == 10000
        assert ext.create_topic("ext-topic", 2) is True
        assert ext.create_topic("ext-topic", 2) is False
    assert _topics(tansu_broker.bootstrap)["ext-topic"] == 2
    with pytest.raises(DevBrokerError, match="empty"):
        ExternalBroker("  ")


def test_the_hosts_admin_client_logs_to_the_broker_log_not_stderr(tmp_path, capfd):
    """A broker that stops under the host's live admin client makes librdkafka log refused
    reconnects: the command's stderr must carry only its own errors, so they go to its log."""
    from spark_groupsource.devbroker._server import TansuHost

    path = tmp_path / "broker.log"
    with open(path, "ab", buffering=0) as log:
        host = TansuHost(None, log)
        host.start()
        try:
            assert host.proc is not None
            host.proc.kill()
            host.proc.wait(timeout=10)
            with pytest.raises(DevBrokerError):
                host.create_topic("after-the-broker-died", 1, timeout=3)
            host.serve_admin_log()
        finally:
            host.close()
    assert "Connection refused" in path.read_text()
    assert "Connection refused" not in capfd.readouterr().err
