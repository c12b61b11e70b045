"""Apache Kafka (KRaft) as a dev broker: one node, or ``brokers=N`` nodes on this machine.

Every node is a combined broker + controller (``process.roles=broker,controller``) and all of
them vote in the KRaft quorum, so a 3-node cluster keeps its controller when one node dies.
The jars come from, in order:

* the ``home`` argument (``--kafka-home`` of the command);
* ``$GROUPKAFKA_KAFKA_HOME``: an Apache Kafka distribution (its ``libs/``), or a directory laid
  out as ``lib/broker`` + ``lib/clients`` (the one this project's CI builds from source);
* ``../shared/kafka`` next to the project checkout (present on the project's CI machines only).

Every version runs with its own defaults: the storage is formatted with the installation's own
default metadata.version (``kafka-storage format`` without ``--release-version``), and the group
coordinator is the version's default one. On 3.x that is the classic protocol only, as on a
production 3.9 cluster; 3.9's KIP-848 *preview* (``group.coordinator.rebalance.protocols=
classic,consumer``, which switches to the new group coordinator) is opt-in through ``config`` /
``--broker-config`` and serves no librdkafka member (it needs ConsumerGroupHeartbeat v1; 3.9 has
v0). The suite runs Apache Kafka 3.9.1, 4.0.1 and 4.3.1.
Each node runs in its own process group with a parent-death signal, so a dev broker that is
killed takes its JVMs with it.
"""

from __future__ import annotations

import contextlib
import ctypes
import glob
import logging
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
import zipfile
from base64 import urlsafe_b64encode
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .errors import DevBrokerError

log = logging.getLogger("spark_groupsource.devbroker")

#: A Kafka distribution (``libs/``) or a ``lib/broker`` + ``lib/clients`` tree to run instead.
KAFKA_HOME_ENV = "GROUPKAFKA_KAFKA_HOME"
#: JVM heap options of every node (the default keeps a 3-node cluster under 1.5 GB).
KAFKA_HEAP_ENV = "GROUPKAFKA_KAFKA_HEAP_OPTS"
DEFAULT_HEAP = "-Xmx512m -Xms128m"
#: --broker-config key of the chaos suite's proxied listener (see KafkaCluster.proxied_ports)
PROXIED_PORTS_KEY = "groupkafka.proxied.ports"
#: How often a new cluster is started again on fresh ports when a node dies while starting.
_START_ATTEMPTS = 3

_PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHARED_KAFKA = os.path.normpath(os.path.join(_PROJECT_ROOT, "..", "shared", "kafka"))
#: The newest Kafka release on the project's machines (4.3.1), for the suite's version matrix.
SHARED_KAFKA_LATEST = os.path.normpath(os.path.join(_PROJECT_ROOT, "..", "shared", "kafka-latest"))
#: The 3.x release on the project's machines (3.9.1), the oldest Kafka the suite runs.
SHARED_KAFKA_39 = os.path.normpath(os.path.join(_PROJECT_ROOT, "..", "shared", "kafka-3.9"))

#: Broker settings of the dev cluster. They make groups form fast and accept the short session
#: timeouts tests use; none of them changes a protocol rule.
DEV_BROKER_CONFIG = {
    "num.partitions": "1",
    "group.min.session.timeout.ms": "1000",
    # KIP-848 groups: the broker owns session timeout and heartbeat interval; shorter than the
    # production defaults (45 s, 5 s) so that tests see assignments within a second or two
    "group.consumer.min.session.timeout.ms": "3000",
    "group.consumer.session.timeout.ms": "10000",
    "group.consumer.min.heartbeat.interval.ms": "250",
    "group.consumer.heartbeat.interval.ms": "500",
    "offsets.topic.num.partitions": "10",
    # no time retention: tests write records with timestamps years in the past, which a 7-day
    # retention (checked every 5 minutes) would delete mid-run; size limits stay as Kafka's
    "log.retention.ms": "-1",
    "log.segment.bytes": str(64 * 1024 * 1024),
    "log.cleaner.dedupe.buffer.size": str(8 * 1024 * 1024),
}

_LOG4J = """\
status = warn
shutdownHook = disable
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = ${sys:kafka.logs.dir}/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.file.ref = FILE
logger.state.name = state.change.logger
logger.state.level = warn
logger.log.name = kafka.log
logger.log.level = warn
logger.logmgr.name = org.apache.kafka.storage.internals.log
logger.logmgr.level = warn
"""


def parse_version(text: str) -> tuple[int, ...] | None:
    """``"4.3.1"`` -> (4, 3, 1); ``"4.0.0-SNAPSHOT"`` -> (4, 0, 0); None when it is no version."""
    parts = []
    for piece in text.strip().split("-", 1)[0].split("."):
        if not piece.isdigit():
            break
        parts.append(int(piece))
    return tuple(parts) if len(parts) >= 2 else None


def _jar_version(jar: str) -> str | None:
    """The version in a kafka-clients jar's ``kafka/kafka-version.properties``."""
    with contextlib.suppress(OSError, KeyError, zipfile.BadZipFile), zipfile.ZipFile(jar) as z:
        for line in z.read("kafka/kafka-version.properties").decode("latin-1").splitlines():
            key, sep, value = line.partition("=")
            if sep and key.strip() == "version":
                return value.strip()
    return None


@dataclass(frozen=True)
class KafkaDist:
    """Where a Kafka's jars are: the class path and a short description."""

    home: str
    classpath: str

    @property
    def version(self) -> str:
        """What the installation says it is: the kafka-clients jar's version properties, else
        the jar's file name."""
        for jar in sorted(glob.glob(os.path.join(self.home, "**", "kafka-clients-*.jar"), recursive=True)):
            name = os.path.basename(jar)[len("kafka-clients-"):-len(".jar")]
            if name and name[0].isdigit():
                return _jar_version(jar) or name
        return "unknown version"

    @property
    def version_tuple(self) -> tuple[int, ...] | None:
        return parse_version(self.version)


def java_binary() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and os.access(os.path.join(java_home, "bin", "java"), os.X_OK):
        return os.path.join(java_home, "bin", "java")
    found = shutil.which("java")
    if found is None:
        raise DevBrokerError("the kafka backend needs `java` (17+) on PATH or JAVA_HOME set")
    return found


def find_kafka(home: str | None = None) -> KafkaDist:
    """The Kafka jars to run (``home``, else ``$GROUPKAFKA_KAFKA_HOME``, else ../shared/kafka),
    or raise DevBrokerError saying where they were looked for."""
    explicit = (home or "").strip()
    override = os.environ.get(KAFKA_HOME_ENV, "").strip()
    candidates = [explicit or override or SHARED_KAFKA]
    for home in candidates:
        libs = os.path.join(home, "libs")
        if os.path.isdir(libs) and glob.glob(os.path.join(libs, "kafka_2.*.jar")):
            return KafkaDist(home, os.path.join(libs, "*"))
        broker, clients = os.path.join(home, "lib", "broker"), os.path.join(home, "lib", "clients")
        if glob.glob(os.path.join(broker, "kafka_2.*.jar")) and glob.glob(os.path.join(clients, "kafka-clients-*.jar")):
            return KafkaDist(home, f"{broker}/*{os.pathsep}{clients}/*")
    where = (f"--kafka-home {explicit}" if explicit
             else f"{KAFKA_HOME_ENV}={override}" if override else SHARED_KAFKA)
    raise DevBrokerError(
        f"Apache Kafka jars not found at {where} (want libs/kafka_2.*.jar, or lib/broker + lib/clients); "
        f"pass --kafka-home or set {KAFKA_HOME_ENV} to an Apache Kafka (KRaft, >= 3.7) distribution "
        f"to use the kafka backend"
    )


def check(home: str | None = None) -> str:
    dist = find_kafka(home)
    java_binary()
    return f"kafka: OK Apache Kafka {dist.version} at {dist.home}"


def kafka_missing(home: str | None = None) -> str | None:
    """Why the kafka backend cannot run on this machine (no jars, no java), or None."""
    try:
        check(home)
    except DevBrokerError as exc:
        return str(exc)
    return None


def _java_hash(text: str) -> int:
    """Java's String.hashCode (UTF-16 code units), as Kafka uses it to place a group."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i:i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def group_partition(group: str, partitions: int) -> int:
    """The ``__consumer_offsets`` partition Kafka places ``group`` on (its coordinator leads it):
    abs(hashCode(group)) % partitions, Kafka's Utils.abs taking MIN_VALUE to 0."""
    h = _java_hash(group)
    return 0 if h == -(1 << 31) else abs(h) % partitions


def group_coordinator(bootstrap: str, group: str, timeout: float = 60.0, not_on: int | None = None) -> int:
    """The node hosting ``group``'s coordinator on an Apache Kafka cluster: the leader of the
    group's ``__consumer_offsets`` partition (Kafka's own placement, abs(hashCode(group)) %
    partitions, which FindCoordinator answers too), read from Metadata until it has a leader
    other than ``not_on``. The topic must exist (the first FindCoordinator creates it)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0, "socket.timeout.ms": 5000})
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        try:
            parts = admin.list_topics("__consumer_offsets", timeout=5).topics["__consumer_offsets"].partitions
            if parts:
                leader = parts[group_partition(group, len(parts))].leader
                if leader >= 0 and leader != not_on:
                    return leader
            last = "the group's __consumer_offsets partition has no leader" if parts else "no __consumer_offsets"
        except Exception as exc:  # noqa: BLE001 - asked again until the deadline
            last = repr(exc)
        time.sleep(0.5)
    raise DevBrokerError(f"no coordinator of group {group} found within {timeout:.0f}s: {last}")


#: A line of a node's output that says why it stopped (the JVM prints the cause before the
#: last line, "Exiting Kafka due to fatal exception during startup").
_CAUSE = re.compile(r"(Caused by: )?[\w.$]+(Exception|Error): ")


def _tail_lines(path: str, size: int = 200_000) -> list[str]:
    """The non-empty lines of the last ``size`` bytes of a log (none if it cannot be read)."""
    with contextlib.suppress(OSError), open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        f.seek(max(0, f.tell() - size))
        return [ln.strip() for ln in f.read().decode(errors="replace").splitlines() if ln.strip()]
    return []


def _cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, base64url (what ``kafka-storage random-uuid`` makes);
    never starting with '-', which the storage tool would read as an option."""
    while True:
        cid = urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


def formatted_metadata_version(output: str) -> str | None:
    """The metadata.version in ``kafka-storage format``'s report ("Formatting ... with
    metadata.version 4.3-IV0."), or None."""
    found = re.search(r"metadata\.version\s+([0-9]+\.[0-9]+-IV[0-9]+)", output)
    return found.group(1) if found else None


def _preexec() -> None:  # pragma: no cover - runs in the forked child before exec
    os.setpgid(0, 0)
    with contextlib.suppress(Exception):  # SIGKILL when the forking thread dies
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)


@dataclass
class KafkaNode:
    """One KRaft node: its ports, its directory and, while it runs, its JVM."""

    node_id: int
    port: int
    controller_port: int
    workdir: str
    proc: subprocess.Popen[bytes] | None = None
    #: what ``kafka-storage format`` wrote (e.g. ``4.3-IV0``), None before or if it did not say
    metadata_version: str | None = None
    stopped_on_purpose: bool = field(default=False)
    #: extra client listener name -> its port (see KafkaCluster's ``extra_listeners``)
    listener_ports: dict[str, int] = field(default_factory=dict)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None and self.proc.poll() is None else None

    @property
    def log_path(self) -> str:
        return os.path.join(self.workdir, "server.log")


class KafkaCluster:
    """N Apache Kafka nodes on 127.0.0.1 with their data in a temporary directory.

    Nodes can be stopped, killed, frozen and restarted one by one (same ports, same data), as
    the chaos suite does to a real cluster.
    """

    def __init__(self, brokers: int = 1, config: Mapping[str, str] | None = None,
                 initial_rebalance_delay_ms: int = 100, workdir: str | None = None,
                 extra_listeners: Mapping[str, str] | None = None, home: str | None = None,
                 racks: Sequence[str] | None = None):
        """``home``: the Kafka installation (see :func:`find_kafka`). ``racks``: each node's
        ``broker.rack``, in node order. ``extra_listeners``: more client listeners, name -> security protocol (e.g.
        ``{"SASL": "SASL_PLAINTEXT", "MTLS": "SSL"}``), each on a port of its own per node
        (:meth:`listener_bootstrap`); PLAINTEXT stays the inter-broker listener. Their settings
        (SASL mechanisms, key stores, ``listener.name.<name>.*``) go in ``config``."""
        if brokers < 1:
            raise DevBrokerError(f"brokers must be >= 1, got {brokers}")
        if racks is not None and len(racks) != brokers:
            raise DevBrokerError(f"racks: one per node, got {len(racks)} for {brokers} nodes")
        self.racks = list(racks) if racks is not None else None
        self.dist = find_kafka(home)
        self.java = java_binary()
        self.brokers = brokers
        rf = str(min(3, brokers))
        self.config: dict[str, str] = {
            **DEV_BROKER_CONFIG,
            "group.initial.rebalance.delay.ms": str(initial_rebalance_delay_ms),
            "offsets.topic.replication.factor": rf,
            "transaction.state.log.replication.factor": rf,
            "transaction.state.log.min.isr": str(min(2, brokers)),
            "share.coordinator.state.topic.replication.factor": rf,
            "share.coordinator.state.topic.min.isr": str(min(2, brokers)),
            "default.replication.factor": rf,
            "min.insync.replicas": str(min(2, brokers)),
            **dict(config or {}),
        }
        self._own_dir = workdir is None
        self.workdir = workdir or tempfile.mkdtemp(prefix="groupkafka-kafka-")
        self.cluster_id = _cluster_id()
        self.nodes: list[KafkaNode] = []
        self.extra_listeners = {k.upper(): v.upper() for k, v in (extra_listeners or {}).items()}
        #: ``PROXIED_PORTS_KEY=p1,p2,...`` (one port per node, from ``--broker-config``): a PLAINTEXT
        #: listener PROXIED on each node, advertised at 127.0.0.1:p<node> instead of its own port,
        #: where a fault proxy of the chaos suite listens and forwards to it (chaos/netfaults.py)
        proxied = self.config.pop(PROXIED_PORTS_KEY, "")
        self.proxied_ports = [int(p) for p in proxied.split(",") if p.strip()]
        if self.proxied_ports:
            if len(self.proxied_ports) != brokers:
                raise DevBrokerError(f"{PROXIED_PORTS_KEY}: one port per node, got {proxied!r} for {brokers}")
            self.extra_listeners.setdefault("PROXIED", "PLAINTEXT")

    def listener_bootstrap(self, name: str) -> str:
        """Bootstrap servers of the extra listener ``name``."""
        return ",".join(f"127.0.0.1:{n.listener_ports[name.upper()]}" for n in self.nodes)

    @property
    def replication_factor(self) -> int:
        return min(3, self.brokers)

    @property
    def bootstrap(self) -> str:
        return ",".join(n.address for n in self.nodes)

    # -- set-up ---------------------------------------------------------------------------------
    def _allocate(self, port: int | None) -> None:
        from ._ports import listen_port, port_in_use

        if port is not None and port_in_use(port):
            raise DevBrokerError(f"port {port} is in use on 127.0.0.1")
        ports: list[int] = [port] if port is not None else []
        per_node = 2 + len(self.extra_listeners)
        while len(ports) < per_node * self.brokers:
            ports.append(listen_port(exclude=set(ports)))
        clients, controllers = ports[: self.brokers], ports[self.brokers : 2 * self.brokers]
        extra = iter(ports[2 * self.brokers :])
        for i in range(self.brokers):
            self.nodes.append(KafkaNode(i + 1, clients[i], controllers[i],
                                        os.path.join(self.workdir, f"node{i + 1}"),
                                        listener_ports={name: next(extra) for name in self.extra_listeners}))

    def _write_config(self, node: KafkaNode) -> str:
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in self.nodes)
        extra = "".join(f",{name}://127.0.0.1:{port}" for name, port in node.listener_ports.items())
        advertised = "".join(f",{name}://127.0.0.1:{self._advertised_port(node, name, port)}"
                             for name, port in node.listener_ports.items())
        protocols = "".join(f",{name}:{proto}" for name, proto in self.extra_listeners.items())
        props = {
            "process.roles": "broker,controller",
            "node.id": str(node.node_id),
            "controller.quorum.voters": voters,
            "listeners": f"PLAINTEXT://127.0.0.1:{node.port},CONTROLLER://127.0.0.1:{node.controller_port}{extra}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.port}{advertised}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": f"PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT{protocols}",
            "log.dirs": os.path.join(node.workdir, "data"),
            **({"broker.rack": self.racks[node.node_id - 1]} if self.racks else {}),
            **self.config,
        }
        os.makedirs(node.workdir, exist_ok=True)
        path = os.path.join(node.workdir, "server.properties")
        with open(path, "w") as f:
            f.writelines(f"{k}={v}\n" for k, v in props.items())
        with open(os.path.join(node.workdir, "log4j2.properties"), "w") as f:
            f.write(_LOG4J)
        return path

    def _advertised_port(self, node: KafkaNode, name: str, port: int) -> int:
        if name == "PROXIED" and self.proxied_ports:
            return self.proxied_ports[node.node_id - 1]
        return port

    def _jvm(self, node: KafkaNode, main: list[str], heap: str) -> list[str]:
        return [
            self.java, *heap.split(), "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={os.path.join(node.workdir, 'log4j2.properties')}",
            f"-Dkafka.logs.dir={node.workdir}",
            "-cp", self.dist.classpath, *main,
        ]

    def _format(self, node: KafkaNode, props: str, timeout: float) -> None:
        if os.path.exists(os.path.join(node.workdir, "data", "meta.properties")):
            return
        cmd = self._jvm(node, ["kafka.tools.StorageTool", "format", "-t", self.cluster_id, "-c", props],
                        "-Xmx256m")
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=max(1.0, timeout), check=False)
        except subprocess.TimeoutExpired:
            raise DevBrokerError(f"kafka storage format of node {node.node_id} did not finish within "
                                 f"{timeout:.0f}s (a loaded machine?)") from None
        if out.returncode != 0:
            tail = (out.stderr or out.stdout).strip().splitlines()[-3:]
            raise DevBrokerError(f"kafka storage format of node {node.node_id} failed: {' | '.join(tail)}")
        node.metadata_version = formatted_metadata_version(out.stdout)

    def _format_all(self, deadline: float) -> None:
        """Format every node's storage, all at once: each is a JVM start (seconds, far more on a
        loaded machine), and one after the other they ate most of a start's time budget."""
        from concurrent.futures import ThreadPoolExecutor

        log.info("kafka: formatting the storage of %d node(s)", len(self.nodes))
        started = time.monotonic()
        with ThreadPoolExecutor(max_workers=len(self.nodes)) as pool:
            futures = [pool.submit(self._format, node, self._write_config(node), deadline - started)
                       for node in self.nodes]
            for future in futures:
                future.result()
        log.info("kafka: storage formatted in %.1fs", time.monotonic() - started)

    def start(self, timeout: float = 120.0, port: int | None = None) -> None:
        """Format and start every node (the first on ``port`` if given); return when all of them
        serve Metadata, within ``timeout`` seconds for the whole of it. A node that dies while the
        new cluster starts (a port taken between choosing and binding it, seen once in CI) gets
        the whole cluster started again on fresh ports, up to ``_START_ATTEMPTS`` times within the
        same time; the dead node's logs are kept and named. Each step is logged with its time."""
        deadline = time.monotonic() + timeout
        attempts = 1 if port is not None else _START_ATTEMPTS
        for attempt in range(1, attempts + 1):
            self._allocate(port)
            try:
                self._format_all(deadline)
                for node in self.nodes:
                    self.start_node(node.node_id, wait=False)
                    log.info("kafka: node %d started (pid %s, port %d)", node.node_id, node.pid, node.port)
                self.wait_ready(max(1.0, deadline - time.monotonic()))
                log.info("kafka: %d node(s) serve Metadata", len(self.nodes))
                return
            except DevBrokerError as exc:
                died = self.died()
                kept = self._keep_logs()
                self._discard_nodes()
                where = f"; the nodes' logs are kept in {kept}" if kept else ""
                if died is None or attempt == attempts or time.monotonic() >= deadline:
                    raise DevBrokerError(f"{exc}{where}") from exc
                log.warning("kafka cluster start, attempt %d of %d: %s%s; starting again on fresh "
                            "ports", attempt, attempts, died, where)

    def _keep_logs(self) -> str | None:
        """Copy the nodes' logs out of the work directory (deleted on close) for a post-mortem."""
        kept = None
        for node in self.nodes:
            for name in ("stdout.log", "server.log"):
                path = os.path.join(node.workdir, name)
                if os.path.exists(path):
                    kept = kept or tempfile.mkdtemp(prefix="groupkafka-kafka-failed-")
                    with contextlib.suppress(OSError):
                        shutil.copy(path, os.path.join(kept, f"node{node.node_id}-{name}"))
        return kept

    def _discard_nodes(self) -> None:
        """Stop the nodes of a failed start and forget them, data included."""
        self._stop_all(20.0)
        for node in self.nodes:
            shutil.rmtree(node.workdir, ignore_errors=True)
        self.nodes = []

    def start_node(self, node_id: int, wait: bool = True, timeout: float = 90.0) -> None:
        """Start (or restart) one node with its old ports and data."""
        node = self.node(node_id)
        if node.pid is not None:
            return
        heap = os.environ.get(KAFKA_HEAP_ENV, DEFAULT_HEAP)
        props = os.path.join(node.workdir, "server.properties")
        stdout = open(os.path.join(node.workdir, "stdout.log"), "ab")  # noqa: SIM115 - child owns it
        try:
            node.proc = subprocess.Popen(
                self._jvm(node, ["kafka.Kafka", props], heap), stdin=subprocess.DEVNULL,
                stdout=stdout, stderr=subprocess.STDOUT, preexec_fn=_preexec, close_fds=True,
            )
        except OSError as exc:
            raise DevBrokerError(f"cannot start kafka node {node_id}: {exc}") from exc
        finally:
            stdout.close()
        node.stopped_on_purpose = False
        if wait:
            self.wait_ready(timeout, nodes=[node])

    def start_nodes(self, node_ids: list[int], timeout: float = 90.0) -> None:
        """Start several nodes at once, then wait for all of them: after the whole cluster went
        down, one node alone cannot serve (its controller quorum needs a majority)."""
        for node_id in node_ids:
            self.start_node(node_id, wait=False)
        self.wait_ready(timeout, nodes=[self.node(n) for n in node_ids])

    def wait_ready(self, timeout: float, nodes: list[KafkaNode] | None = None) -> None:
        """Until each node answers Metadata listing every running node (the cluster is formed)."""
        from confluent_kafka.admin import AdminClient

        started = time.monotonic()
        deadline = started + timeout
        for node in nodes or self.nodes:
            admin = AdminClient({"bootstrap.servers": node.address, "log_level": 0,
                                 "socket.timeout.ms": 5000})
            last = ""
            next_report = time.monotonic() + 15.0
            while True:
                reason = self.node_died(node)
                if reason:
                    raise DevBrokerError(reason)
                try:
                    md = admin.list_topics(timeout=1.0)
                    running = {n.node_id for n in self.nodes if n.pid is not None}
                    if running <= set(md.brokers):
                        break
                    last = f"metadata lists brokers {sorted(md.brokers)} of {sorted(running)}"
                except Exception as exc:
                    last = str(exc)
                now = time.monotonic()
                if now > deadline:
                    raise DevBrokerError(f"kafka node {node.node_id} not ready after {now - started:.0f}s "
                                         f"({last}); see {node.log_path}")
                if now > next_report:  # a slow start says what it waits for while it waits
                    log.info("kafka: node %d not ready after %.0fs: %s", node.node_id, now - started, last)
                    next_report = now + 15.0
                time.sleep(0.2)

    # -- faults ---------------------------------------------------------------------------------
    def node(self, node_id: int) -> KafkaNode:
        for n in self.nodes:
            if n.node_id == node_id:
                return n
        raise DevBrokerError(f"no kafka node {node_id}: nodes are 1..{self.brokers}")

    def signal_node(self, node_id: int, sig: int) -> None:
        """Send ``sig`` to one node's JVM (SIGKILL: a crash; SIGSTOP/SIGCONT: a freeze)."""
        node = self.node(node_id)
        if node.pid is None:
            raise DevBrokerError(f"kafka node {node_id} is not running")
        if sig in (signal.SIGKILL, signal.SIGTERM):
            node.stopped_on_purpose = True
        os.kill(node.pid, sig)
        if sig == signal.SIGKILL:
            assert node.proc is not None
            node.proc.wait(timeout=30)

    def stop_node(self, node_id: int, timeout: float = 60.0) -> None:
        """A clean stop (SIGTERM: controlled shutdown), SIGKILL after ``timeout``."""
        node = self.node(node_id)
        proc = node.proc
        if proc is None or proc.poll() is not None:
            return
        node.stopped_on_purpose = True
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGCONT)  # a frozen JVM cannot act on SIGTERM
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)

    def node_died(self, node: KafkaNode) -> str | None:
        if node.proc is None or node.stopped_on_purpose or node.proc.poll() is None:
            return None
        why = ""
        for path in (os.path.join(node.workdir, "stdout.log"), node.log_path):
            lines = _tail_lines(path)
            if lines:
                # the first exception says why (e.g. a port taken); the last error says what
                # Kafka did about it ("Exiting Kafka due to fatal exception during startup")
                causes = [ln for ln in lines if _CAUSE.match(ln)][:1]
                errors = [ln for ln in lines if " ERROR " in ln][-1:] or lines[-1:]
                why = " | ".join(dict.fromkeys([*causes, *errors]))
                break
        return (f"kafka node {node.node_id} exited unexpectedly (code {node.proc.returncode})"
                + (f": {why[:600]}" if why else f"; see {node.log_path}"))

    def died(self) -> str | None:
        for node in self.nodes:
            reason = self.node_died(node)
            if reason:
                return reason
        return None

    # -- tear-down ------------------------------------------------------------------------------
    def close(self, timeout: float = 20.0) -> None:
        """Stop every node (all at once: SIGTERM, SIGKILL after ``timeout``), delete the data."""
        self._stop_all(timeout)
        if self._own_dir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def _stop_all(self, timeout: float) -> None:
        procs = [n.proc for n in self.nodes if n.proc is not None and n.proc.poll() is None]
        for n in self.nodes:
            n.stopped_on_purpose = True
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p.pid, signal.SIGCONT)
            p.terminate()
        deadline = time.monotonic() + timeout
        for p in procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=30)

    def info(self) -> dict[str, object]:
        return {
            "kafka_home": self.dist.home,
            "kafka_version": self.dist.version,
            "metadata_version": self.nodes[0].metadata_version if self.nodes else None,
            "workdir": self.workdir,
            "nodes": [{"id": n.node_id, "port": n.port, "controller_port": n.controller_port,
                       "pid": n.pid, "log": n.log_path, "listener_ports": dict(n.listener_ports)}
                      for n in self.nodes],
        }
