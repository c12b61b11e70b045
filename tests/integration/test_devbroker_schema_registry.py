"""``python -m spark_groupsource.devbroker --backend kafka --schema-registry``: Karapace beside
the broker, its URL on the second line, stopped with the broker (issue 55)."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading

import pytest

from chaos.procs import cmdline, descendants
from helpers import pid_alive

pytestmark = pytest.mark.integration

CMD = [sys.executable, "-m", "spark_groupsource.devbroker"]


def _lines(proc: subprocess.Popen) -> queue.Queue[str]:
    """The command's stdout lines as they come (a thread: select on a buffered pipe would miss
    the second line when both arrive in one read)."""
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line.strip())

    threading.Thread(target=read, daemon=True).start()
    return lines


def _next(lines: queue.Queue[str], timeout: float) -> str:
    try:
        return lines.get(timeout=timeout)
    except queue.Empty:
        raise AssertionError(f"no output within {timeout}s") from None


def test_command_runs_a_schema_registry_and_stops_it():
    """About 15-60 s (a Kafka node and Karapace start; longer the first time, when Karapace is
    installed into its cache venv): the URL registers a schema, SIGTERM takes every process of
    the command down (the JVM, the guard, start.sh and Karapace) and removes their files."""
    from spark_groupsource.devbroker import kafka_missing
    from spark_groupsource.devbroker._karapace import karapace_missing

    for missing in (kafka_missing(), karapace_missing()):
        if missing:
            pytest.skip(missing)
    proc = subprocess.Popen([*CMD, "--backend", "kafka", "--schema-registry", "--topic", "sr-cmd:1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines = _lines(proc)
        first = _next(lines, 300)  # Kafka (120 s startup bound) then Karapace (90 s)
        assert first.startswith("BOOTSTRAP=127.0.0.1:"), first
        second = _next(lines, 30)
        assert second.startswith("SCHEMA_REGISTRY=http://127.0.0.1:"), second
        url = second.split("=", 1)[1]

        from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

        avro = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]}
        client = SchemaRegistryClient({"url": url})
        schema_id = client.register_schema("sr-cmd-value", Schema(json.dumps(avro), "AVRO"))
        assert json.loads(client.get_schema(schema_id).schema_str) == avro
        assert client.get_latest_version("sr-cmd-value").schema_id == schema_id

        procs = descendants(proc.pid)
        karapace = [p for p in procs if "bin/karapace" in cmdline(p)]
        jvms = [p for p in procs if "kafka.Kafka" in cmdline(p)]
        assert len(karapace) == 1 and len(jvms) == 1, [cmdline(p) for p in procs]
        workdirs = [a.split("=", 1)[1] for a in cmdline(jvms[0]).split() if a.startswith("-Dkafka.logs.dir=")]
        workdirs += [os.path.dirname(a) for a in cmdline(karapace[0]).split() if a.endswith("karapace.json")]
        assert len(workdirs) == 2

        proc.terminate()
        assert proc.wait(60) == 0
        assert lines.empty()  # two lines on stdout in total
        assert proc.stderr is not None and proc.stderr.read() == ""
        assert [p for p in procs if pid_alive(p)] == [], "processes outlived the command"
        assert not any(os.path.exists(d) for d in workdirs)
    finally:
        if proc.poll() is None:  # a failed assertion: still stop it cleanly, files and all
            proc.terminate()
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


@pytest.mark.parametrize(
    "args, env, code, message",
    [
        (["--backend", "mock", "--schema-registry"], {}, 2, "--schema-registry needs --backend kafka"),
        (["--backend", "tansu", "--schema-registry"], {}, 2, "--schema-registry needs --backend kafka"),
        (["--backend", "kafka", "--karapace-home", "/"], {}, 2,
         "--karapace-home is only supported with --schema-registry"),
        # before any broker starts: seconds, not a Kafka start
        (["--backend", "kafka", "--schema-registry"], {"GROUPKAFKA_KARAPACE": "/nonexistent/karapace"}, 1,
         "--schema-registry needs Karapace, not found at GROUPKAFKA_KARAPACE=/nonexistent/karapace "
         "(install.sh missing); pass --karapace-home DIR or set GROUPKAFKA_KARAPACE"),
        (["--backend", "kafka", "--schema-registry", "--karapace-home", "/nonexistent/k"], {}, 1,
         "--schema-registry needs Karapace, not found at --karapace-home /nonexistent/k"),
    ],
)
def test_schema_registry_errors_name_what_to_set(args, env, code, message):
    res = subprocess.run([*CMD, *args], capture_output=True, text=True, timeout=60,
                         env={**os.environ, **env})
    assert res.returncode == code, res.stderr
    assert res.stdout == ""
    [line] = res.stderr.strip().splitlines()
    assert line.startswith("devbroker: error: ") and message in line, line
