"""Network faults on real sockets (issue 53): a fault proxy of ours in front of each broker of the
run's 3-node Kafka cluster, and the scenarios that cut one query's driver or executors off.

The cluster gets a second client listener, PROXIED, advertised at the proxies' ports
(``spark_groupsource.devbroker`` ``groupkafka.proxied.ports``): a query bootstrapped there is
told (Metadata, FindCoordinator) to reach every broker through its proxy, while the producer, the
offset sampler and the brokers' own replication use the PLAINTEXT listener and never pass one.
Each accepted connection is put to a *role* from the process that opened it (the peer's socket
inode in /proc/net/tcp, found among the fds of a watched member's processes): ``driver:<member>``
(the member's driver-side processes: its group member, planner and offset reader) or
``exec:<member>`` (the executors' Python workers, children of pyspark's worker daemon); anything
else is ``other`` and always passes. A rule (broker node, role) -> mode decides what its
connections do:

- ``pass``: bytes forwarded both ways;
- ``drop``: nothing is read or forwarded any more (new connections are accepted and held): the
  peers see a silent network, their kernel buffers fill and their requests time out, as with
  packets dropped on the wire; data held is delivered at the heal, as TCP's retransmits would;
- ``reset``: every connection of the role is closed with a TCP RST (SO_LINGER 0), and each new
  one is accepted and reset at once.

The proxy also reads the Kafka framing of what it forwards (requests and responses, matched by
correlation id) for the group's own calls: JoinGroup, SyncGroup (with the assignment),
Heartbeat and OffsetCommit. The verdict gets two checks from it that no sink can give:

- no commit accepted after its member was fenced: an OffsetCommit answered without error, sent
  after a response told that (member id, generation) UNKNOWN_MEMBER_ID or ILLEGAL_GENERATION, or
  carrying a generation older than one the coordinator had already handed out;
- never two members assigned one partition in the same generation (SyncGroup responses; the
  group's description, sampled for every scenario, is judged by chaos/history.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import socket
import struct
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from chaos import clockstep
from chaos import kafka_faults as kf
from chaos import run as _run
from chaos.procs import Member, descendants
from chaos.run import SESSION_S, Run
from spark_groupsource.devbroker._kafka import PROXIED_PORTS_KEY

MODES = ("pass", "drop", "reset")
JOIN_GROUP, HEARTBEAT, SYNC_GROUP, OFFSET_COMMIT = 11, 12, 14, 8
#: the first flexible (compact, tagged) version of each API we read
_FLEXIBLE = {JOIN_GROUP: 6, HEARTBEAT: 4, SYNC_GROUP: 4, OFFSET_COMMIT: 8}
FENCING_ERRORS = {22: "ILLEGAL_GENERATION", 25: "UNKNOWN_MEMBER_ID"}
#: Outage bounds of the queries that must ride out a cut (brokerOutageTimeoutMs, groupJoinTimeoutMs)
BOUND_MS = kf.OUTAGE_BOUND_MS


# -- the Kafka framing, as far as the checks need it ------------------------------------------
class _Buf:
    def __init__(self, data: bytes):
        self.d, self.i = data, 0

    def take(self, n: int) -> bytes:
        if self.i + n > len(self.d):
            raise ValueError("short")
        out = self.d[self.i:self.i + n]
        self.i += n
        return out

    def i16(self) -> int:
        return struct.unpack(">h", self.take(2))[0]

    def i32(self) -> int:
        return struct.unpack(">i", self.take(4))[0]

    def uvarint(self) -> int:
        shift = out = 0
        while True:
            b = self.take(1)[0]
            out |= (b & 0x7F) << shift
            if not b & 0x80:
                return out
            shift += 7

    def string(self, flexible: bool) -> str | None:
        n = self.uvarint() - 1 if flexible else self.i16()
        return None if n < 0 else self.take(n).decode(errors="replace")

    def bytes_(self, flexible: bool) -> bytes:
        n = self.uvarint() - 1 if flexible else self.i32()
        return b"" if n < 0 else self.take(n)

    def array_len(self, flexible: bool) -> int:
        return self.uvarint() - 1 if flexible else self.i32()

    def tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())


def parse_request(frame: bytes) -> tuple[int, int, int, dict] | None:
    """(api_key, version, correlation id, fields) of a group request we read; None otherwise."""
    b = _Buf(frame)
    api, version, corr = b.i16(), b.i16(), b.i32()
    if api not in _FLEXIBLE:
        return None
    flexible = version >= _FLEXIBLE[api]
    b.string(False)  # client id: a nullable STRING in every request header version
    if flexible:
        b.tags()
    try:
        group = b.string(flexible)
        if api == JOIN_GROUP:
            return api, version, corr, {"group": group}
        generation = b.i32()
        member = b.string(flexible)
    except ValueError:
        return api, version, corr, {}
    return api, version, corr, {"group": group, "generation": generation, "member": member}


def _assignment(data: bytes) -> list[tuple[str, int]]:
    """The (topic, partition)s of a ConsumerProtocolAssignment."""
    if not data:
        return []
    b = _Buf(data)
    b.i16()
    out = []
    for _ in range(b.i32()):
        topic = b.string(False) or ""
        out += [(topic, b.i32()) for _ in range(b.i32())]
    return out


def parse_response(api: int, version: int, frame: bytes) -> dict:
    flexible = version >= _FLEXIBLE[api]
    b = _Buf(frame)
    b.i32()  # correlation id
    if flexible:
        b.tags()
    if api == OFFSET_COMMIT:
        if version >= 3:
            b.i32()
        errors = []
        for _ in range(b.array_len(flexible)):
            b.string(flexible)
            for _ in range(b.array_len(flexible)):
                b.i32()
                errors.append(b.i16())
                if flexible:
                    b.tags()
            if flexible:
                b.tags()
        return {"errors": errors}
    if (api == HEARTBEAT and version >= 1) or (api == JOIN_GROUP and version >= 2) or \
            (api == SYNC_GROUP and version >= 1):
        b.i32()  # throttle
    out: dict = {"error": b.i16()}
    if api == JOIN_GROUP:
        out["generation"] = b.i32()
        if version >= 7:
            b.string(True)
        b.string(flexible)
        b.string(flexible)  # leader
        if version >= 9:
            b.take(1)
        out["member"] = b.string(flexible)
    elif api == SYNC_GROUP:
        if version >= 5:
            b.string(True)
            b.string(True)
        with contextlib.suppress(ValueError, struct.error):
            out["assigned"] = _assignment(b.bytes_(flexible))
    return out


@dataclass
class WireEvent:
    t: float  # harness monotonic time of the response
    sent: float  # ... of the request
    role: str
    node: int
    api: int
    request: dict
    response: dict


class _Frames:
    """Splits one direction's byte stream into Kafka frames (4-byte size prefix)."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.broken = False

    def feed(self, data: bytes) -> list[bytes]:
        if self.broken:
            return []
        self.buf += data
        out = []
        while len(self.buf) >= 4:
            n = struct.unpack(">i", self.buf[:4])[0]
            if n < 0 or n > 200 * 1024 * 1024:
                self.broken = True
                return out
            if len(self.buf) < 4 + n:
                break
            out.append(bytes(self.buf[4:4 + n]))
            del self.buf[:4 + n]
        return out


# -- the proxies -------------------------------------------------------------------------------
def _peer_inode(port: int, server_port: int) -> int | None:
    want_local = f"0100007F:{port:04X}"
    want_remote = f"0100007F:{server_port:04X}"
    with contextlib.suppress(OSError), open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            parts = line.split()
            if parts[1] == want_local and parts[2] == want_remote:
                return int(parts[9])
    return None


def _owner(inode: int, pids: list[int]) -> int | None:
    target = f"socket:[{inode}]"
    for pid in pids:
        fd_dir = f"/proc/{pid}/fd"
        try:
            names = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in names:
            with contextlib.suppress(OSError):
                if os.readlink(f"{fd_dir}/{fd}") == target:
                    return pid
    return None


@dataclass
class Conn:
    node: int
    role: str
    client: socket.socket
    upstream: socket.socket | None = None
    closed: bool = False


@dataclass
class FaultNet:
    """One proxy per broker node; rules (node, role) -> mode; the wire log of the group calls."""

    run_dir: str
    listeners: list[socket.socket] = field(default_factory=list)
    upstream: dict[int, int] = field(default_factory=dict)  # node -> its PROXIED listener port
    rules: dict[tuple[int, str], str] = field(default_factory=dict)
    watched: dict[str, Member] = field(default_factory=dict)
    events: list[WireEvent] = field(default_factory=list)
    conns: list[Conn] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)  # accepted connections per (node, role, mode)
    closed: bool = False

    def __post_init__(self) -> None:
        self.lock = threading.Lock()

    # set-up
    def bind(self, nodes: int) -> dict[str, str]:
        for _ in range(nodes):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", 0))
            s.listen(128)
            self.listeners.append(s)
        return {PROXIED_PORTS_KEY: ",".join(str(s.getsockname()[1]) for s in self.listeners)}

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{s.getsockname()[1]}" for s in self.listeners)

    def attach(self, r: Run) -> None:
        for n in r.broker.kafka.nodes():
            self.upstream[int(n["id"])] = int(n["listener_ports"]["PROXIED"])
        for i, s in enumerate(self.listeners):
            threading.Thread(target=self._accept, args=(i + 1, s), daemon=True, name=f"proxy-{i + 1}").start()

    def watch(self, m: Member) -> Member:
        self.watched[m.name] = m
        return m

    # rules
    def set(self, nodes, role: str, mode: str) -> None:
        assert mode in MODES
        with self.lock:
            for node in nodes:
                self.rules[(node, role)] = mode
            if mode == "reset":
                for c in self.conns:
                    if c.node in nodes and c.role == role and not c.closed:
                        _reset(c)

    def heal(self) -> None:
        with self.lock:
            self.rules.clear()

    def mode(self, node: int, role: str) -> str:
        return self.rules.get((node, role), "pass")

    # the proxy
    def _role(self, peer_port: int, server_port: int) -> str:
        inode = None
        for _ in range(5):  # the client's side of the connection is listed once connect() returned
            inode = _peer_inode(peer_port, server_port)
            if inode:
                break
            time.sleep(0.02)
        if not inode:
            return "other"
        for name, m in list(self.watched.items()):
            workers = set(m.python_workers())
            family = [m.pid, *descendants(m.pid)]
            pid = _owner(inode, [p for p in family if p in workers] + [p for p in family if p not in workers])
            if pid is not None:
                return f"exec:{name}" if pid in workers else f"driver:{name}"
        return "other"

    def _accept(self, node: int, s: socket.socket) -> None:
        while not self.closed:
            try:
                client, addr = s.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(node, client, addr[1], s.getsockname()[1]),
                             daemon=True).start()

    def _serve(self, node: int, client: socket.socket, peer_port: int, server_port: int) -> None:
        role = self._role(peer_port, server_port)
        c = Conn(node, role, client)
        with self.lock:
            self.conns.append(c)
            mode = self.mode(node, role)
            self.counts[(node, role, mode)] += 1
        if mode == "reset":
            _reset(c)
            return
        up_frames, down_frames = _Frames(), _Frames()
        pending: dict[int, tuple[int, int, dict, float]] = {}
        try:
            while not c.closed and not self.closed:
                mode = self.mode(node, role)
                if mode == "reset":
                    with self.lock:
                        _reset(c)
                    return
                if mode == "drop":
                    time.sleep(0.1)
                    continue
                if c.upstream is None:
                    c.upstream = socket.create_connection(("127.0.0.1", self.upstream[node]), timeout=10)
                    c.upstream.settimeout(None)
                ready, _, _ = select.select([client, c.upstream], [], [], 0.1)
                for sock in ready:
                    if self.mode(node, role) != "pass":
                        break
                    data = sock.recv(65536)
                    if not data:
                        return
                    now = time.monotonic()
                    if sock is client:
                        for frame in up_frames.feed(data):
                            with contextlib.suppress(ValueError, struct.error, IndexError):
                                req = parse_request(frame)
                                if req is not None:
                                    pending[req[2]] = (req[0], req[1], req[3], now)
                        c.upstream.sendall(data)
                    else:
                        for frame in down_frames.feed(data):
                            with contextlib.suppress(ValueError, struct.error, IndexError):
                                corr = struct.unpack(">i", frame[:4])[0]
                                if corr in pending:
                                    api, version, request, sent = pending.pop(corr)
                                    resp = parse_response(api, version, frame)
                                    with self.lock:
                                        self.events.append(WireEvent(now, sent, role, node, api, request, resp))
                        client.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                if not c.closed:
                    client.close()
            with contextlib.suppress(OSError, AttributeError):
                c.upstream.close()
            c.closed = True

    def close(self) -> None:
        self.closed = True
        for s in self.listeners:
            with contextlib.suppress(OSError):
                s.close()
        with self.lock:
            for c in self.conns:
                with contextlib.suppress(OSError):
                    c.client.close()
                with contextlib.suppress(OSError, AttributeError):
                    c.upstream.close()
                c.closed = True


def _reset(c: Conn) -> None:
    with contextlib.suppress(OSError):
        c.client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        c.client.close()
    with contextlib.suppress(OSError, AttributeError):
        c.upstream.close()
    c.closed = True


# -- the checks --------------------------------------------------------------------------------
def fenced_commits(events: list[WireEvent]) -> list[str]:
    """OffsetCommits answered without error after their (member, generation) was fenced, or
    carrying a generation older than one the coordinator had handed out before they were sent."""
    fenced: dict[tuple[str, int], float] = {}
    generations: list[tuple[float, int]] = []
    for e in sorted(events, key=lambda e: e.t):
        key = (e.request.get("member"), e.request.get("generation"))
        if e.api == JOIN_GROUP and e.response.get("error") == 0:
            generations.append((e.t, e.response.get("generation", -1)))
        if e.api in (HEARTBEAT, SYNC_GROUP) and e.response.get("error") in FENCING_ERRORS:
            fenced.setdefault(key, e.t)
        if e.api == OFFSET_COMMIT:
            errors = e.response.get("errors", [])
            if any(err in FENCING_ERRORS for err in errors):
                fenced.setdefault(key, e.t)
    problems = []
    for e in events:
        if e.api != OFFSET_COMMIT or not e.response.get("errors") or any(e.response["errors"]):
            continue
        key = (e.request.get("member"), e.request.get("generation"))
        if key in fenced and e.sent > fenced[key]:
            problems.append(f"commit of {key} accepted {e.sent - fenced[key]:.1f}s after it was fenced")
        newer = [g for t, g in generations if t < e.sent and g > (key[1] or 0)]
        if key[1] is not None and key[1] >= 0 and newer:
            problems.append(f"commit of {key} accepted after generation {max(newer)} was formed")
    return problems


def double_assignments(events: list[WireEvent]) -> list[str]:
    """Two members assigned one partition in one generation (the SyncGroup answers the proxy
    read; the coordinator's descriptions are the history checker's, chaos/history.py)."""
    by_gen: dict[int, dict[str, set]] = defaultdict(dict)
    for e in events:
        if e.api == SYNC_GROUP and e.response.get("error") == 0 and "assigned" in e.response:
            by_gen[e.request.get("generation", -1)][e.request.get("member")] = set(e.response["assigned"])
    problems = []
    for gen, members in by_gen.items():
        seen: dict = {}
        for member, tps in members.items():
            for tp in tps:
                if tp in seen and seen[tp] != member:
                    problems.append(f"generation {gen}: {tp} assigned to {seen[tp]} and {member}")
                seen[tp] = member
    return problems


def summary(net: FaultNet) -> str:
    commits = [e for e in net.events if e.api == OFFSET_COMMIT]
    refused = [e for e in commits if any(e.response.get("errors", []))]
    gens = sorted({e.response.get("generation") for e in net.events if e.api == JOIN_GROUP
                   and e.response.get("error") == 0})
    syncs = sum(1 for e in net.events if e.api == SYNC_GROUP and "assigned" in e.response)
    conns = ", ".join(f"{role}@{node} {mode} {n}" for (node, role, mode), n in sorted(net.counts.items())
                      if role != "other")
    return (f"wire: {len(commits)} commits ({len(refused)} refused), generations {gens[:1]}..{gens[-1:]} "
            f"({len(gens)}), {syncs} assignments read, connections {conns}")


# -- the scenarios -----------------------------------------------------------------------------
def _prepare(r: Run) -> dict[str, str]:
    r.net = FaultNet(r.dir)  # type: ignore[attr-defined]
    return r.net.bind(3)  # type: ignore[attr-defined]


def _net(r: Run) -> FaultNet:
    net: FaultNet = r.net  # type: ignore[attr-defined]
    net.attach(r)

    def check(_batches) -> list[str]:
        net.close()
        problems = fenced_commits(net.events) + double_assignments(net.events)
        r.notes.append(summary(net))
        with open(os.path.join(r.dir, "wire.jsonl"), "w") as f:
            for e in net.events:
                f.write(json.dumps(e.__dict__) + "\n")
        if not any(e.api == OFFSET_COMMIT for e in net.events):
            problems.append("the proxy saw no OffsetCommit: the group's calls did not pass it")
        return problems

    r.checks.append(check)
    return net


def _cut(r: Run, net: FaultNet, nodes, role: str, mode: str, seconds: float, what: str) -> None:
    net.set(set(nodes), role, mode)
    r.event(f"{mode}: {role} cut off from broker(s) {sorted(nodes)} ({what}) for {seconds:.0f}s")
    r.sleep(seconds)
    net.heal()
    r.event("healed")


def _log_checks(r: Run, owner: str, lost_touch: bool) -> None:
    """The product's log: the lost coordinator said once with its duration, and the client's
    connection errors collapsed into counted warnings (at most a few a minute)."""
    if lost_touch:
        r.outcome.expect_logged += [r"lost touch with its group coordinator", r"back in touch with its group coordinator.* after \d"]

    def check(_batches) -> list[str]:
        from chaos.run import _read

        text = "\n".join(_read(m.log_path) for m in r.history if m.name == owner)
        raw = sum(1 for ln in text.splitlines() if " kafka." in ln and ("WARNING" in ln or "ERROR" in ln)
                  and "repeated" not in ln)
        collapsed = text.count("repeated")
        r.notes.append(f"{owner}'s log: {raw} kafka-python warnings/errors, {collapsed} collapsed lines, "
                       f"{text.count('lost touch with its group coordinator')} lost-touch lines")
        return [f"{owner}'s log has {raw} raw kafka-python connection warnings (expected them collapsed)"] \
            if raw > 40 else []

    r.checks.append(check)


def _coordinator_cut(r: Run, mode: str) -> None:
    """Two queries through the proxies; a's driver cut off from the group coordinator only for
    twice the session timeout, its executors still fetching: a is fenced, b takes its
    partitions, a rejoins after the heal."""
    net = _net(r)
    _log_checks(r, "a", lost_touch=True)
    r.produce()
    a = net.watch(r.start("a", bootstrap=net.bootstrap))
    b = net.watch(r.start("b", bootstrap=net.bootstrap))
    r.wait_reading(a, batches=2)
    r.wait_reading(b)
    r.sleep(3)
    coord = kf.coordinator(r)
    _cut(r, net, [coord], "driver:a", mode, 2 * SESSION_S, "the coordinator")
    r.sleep(20)


def _driver_cut(r: Run, mode: str) -> None:
    """One query; its driver cut off from every broker for 20 s, within its 90 s bounds."""
    net = _net(r)
    _log_checks(r, "a", lost_touch=True)
    r.produce()
    a = net.watch(r.start("a", bootstrap=net.bootstrap, brokerOutageTimeoutMs=str(BOUND_MS),
                          groupJoinTimeoutMs=str(BOUND_MS)))
    r.wait_reading(a, batches=2)
    _cut(r, net, [1, 2, 3], "driver:a", mode, 20, f"every broker; bounds {BOUND_MS // 1000}s")
    r.sleep(15)


def _leader_cut(r: Run, mode: str) -> None:
    """One query; its executors cut off from the leader of most of the topic's partitions for
    20 s (the driver still reaches it), within the 90 s bounds."""
    net = _net(r)
    _log_checks(r, "a", lost_touch=False)
    r.produce()
    a = net.watch(r.start("a", bootstrap=net.bootstrap, brokerOutageTimeoutMs=str(BOUND_MS),
                          groupJoinTimeoutMs=str(BOUND_MS)))
    r.wait_reading(a, batches=2)
    leader = kf.busiest_leader(r)
    _cut(r, net, [leader], "exec:a", mode, 20, "a partition leader")
    r.sleep(15)


def _scenario(fn, mode):
    def run(r: Run) -> None:
        fn(r, mode)

    run.__doc__ = f"{fn.__doc__} ({mode})"
    return run


# -- clock jumps (our LD_PRELOAD shim, chaos/clockstep.c) ----------------------------------------
@contextlib.contextmanager
def _stepped(lib: str, path: str):
    """The members started inside get the clock-step shim (wall clock offset from ``path``,
    monotonic real); it reaches their JVM and its Python workers through the environment."""
    env = {**clockstep.env(lib, path),
           # the sink's batch times stay on the harness's (real) wall clock: chaos/sink.py
           "CHAOS_WALL_MINUS_MONOTONIC": repr(time.time() - time.monotonic())}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _step(r: Run, path: str, offset_s: int, why: str) -> None:
    clockstep.step(path, offset_s)
    r.event(f"clock of the queries' processes set to real {offset_s:+d}s ({why})")


START_WAIT_S = _run.START_WAIT_S


def _restart_slowly(r: Run, node: int) -> None:
    """The killed node started again, waited for up to START_WAIT_S (the dev broker's default
    90 s was not enough at load 50, two runs on 2026-12-02); then until it serves Metadata."""
    from confluent_kafka.admin import AdminClient

    t = time.monotonic()
    try:
        r.broker.kafka.start_node(node, timeout=START_WAIT_S)
    except Exception as exc:  # noqa: BLE001 - still starting: waited for below
        r.event(f"broker {node} not serving yet ({str(exc)[:80]}); waiting")
    admin = AdminClient({"bootstrap.servers": r.broker.bootstrap, "log_level": 0})
    while node not in admin.list_topics(timeout=5).brokers:
        if time.monotonic() - t > START_WAIT_S:
            raise RuntimeError(f"broker {node} not serving {START_WAIT_S:.0f}s after its restart")
        time.sleep(1)
    r.event(f"broker {node} restarted (serving after {time.monotonic() - t:.1f}s)")


def clock_jumps(r: Run) -> None:
    """a's and b's drivers and executors on the clock-step shim: the wall clock stepped +5 min
    and -5 min during a broker outage (kill -9 of the busiest leader, 20 s), then -3 min and
    +3 min while a second query joins and the group rebalances; monotonic clocks untouched (an
    NTP step)."""
    net = _net(r)
    lib = clockstep.build(os.path.join(r.dir, "clockstep"))
    path = os.path.join(r.dir, "clock_offset")
    _step(r, path, 0, "start")
    r.produce()
    with _stepped(lib, path):
        a = net.watch(r.start("a", bootstrap=net.bootstrap, brokerOutageTimeoutMs=str(BOUND_MS),
                              groupJoinTimeoutMs=str(BOUND_MS)))
    # the harness's wait, no bound of the product's: the faults start once a reads, and Spark
    # alone took 3.5-6 min to start a query at load 50-70 (three runs failed at 240 s, 2026-12-02)
    r.wait_reading(a, batches=2, timeout=START_WAIT_S)
    victim = kf.busiest_leader(r)
    r.broker.kafka.kill_node(victim)
    r.event(f"kill -9 broker {victim}")
    r.sleep(5)
    _step(r, path, 300, "forward 5 min during the outage")
    r.sleep(7)
    _step(r, path, -300, "back 10 min during the outage")
    r.sleep(8)
    _restart_slowly(r, victim)
    r.sleep(8)
    with _stepped(lib, path):
        b = net.watch(r.start("b", bootstrap=net.bootstrap))
    r.sleep(2)
    _step(r, path, -480, "back 3 min more as b joins")
    r.wait_reading(b, timeout=START_WAIT_S)
    _step(r, path, -300, "forward 3 min during the rebalance")
    r.sleep(10)
    _step(r, path, 0, "back to real time")
    r.sleep(10)


NET_SCENARIOS = {f"net_{kind}_{mode}": _scenario(fn, mode)
                 for kind, fn in (("coordinator", _coordinator_cut), ("driver", _driver_cut), ("leader", _leader_cut))
                 for mode in ("drop", "reset")}
ALL = {**NET_SCENARIOS, "clock_jumps": clock_jumps}
# chaos.run.BEFORE_BROKER: the proxies bound before the cluster starts (its PROXIED listener
# advertises their ports)
for _name in ALL:
    _run.__dict__.setdefault("BEFORE_BROKER", {})[_name] = _prepare
ABOUT = {
    "net_coordinator_drop": "a's driver cut off from the coordinator only (silent drop), 2x session; executors fetch",
    "net_coordinator_reset": "a's driver cut off from the coordinator only (TCP resets), 2x session; executors fetch",
    "net_driver_drop": "a's driver cut off from every broker (silent drop) 20 s, bounds 90 s",
    "net_driver_reset": "a's driver cut off from every broker (TCP resets) 20 s, bounds 90 s",
    "net_leader_drop": "a's executors cut off from the busiest partition leader (silent drop) 20 s",
    "net_leader_reset": "a's executors cut off from the busiest partition leader (TCP resets) 20 s",
    "clock_jumps": "a's wall clock (LD_PRELOAD shim) stepped +-5 min in a broker outage, +-3 min in a rebalance",
}
