"""task_socket inside Spark's own Python workers: a read finds the socket its worker takes
tasks from (pyspark.worker's ``infile``), sets TCP_NODELAY and starts the acknowledging thread
there. What it saves per task is measured by bench/ (docs/benchmarks.md), not asserted here."""

from __future__ import annotations


def test_a_read_in_a_spark_worker_speeds_up_its_task_socket(spark):
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    class ProbeReader(DataSourceReader):
        def partitions(self):
            return [InputPartition(i) for i in range(4)]

        def read(self, partition):
            import os
            import socket
            import threading

            from spark_groupsource.executor import task_socket

            task_socket.speed_up_task_socket()
            fd = task_socket._worker_socket_fd()
            alive = any(t.name == "groupkafka-task-socket" for t in threading.enumerate())
            tcp = no_delay = False
            if fd is not None:
                with socket.socket(fileno=os.dup(fd)) as probe:
                    tcp = task_socket._tcp(probe)
                    no_delay = tcp and bool(probe.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            yield (partition.value, fd is not None, tcp, no_delay, alive)

    class Probe(DataSource):
        @classmethod
        def name(cls):
            return "tasksocketprobe"

        def schema(self):
            return "p int, found boolean, tcp boolean, no_delay boolean, acknowledging boolean"

        def reader(self, schema):
            return ProbeReader()

    spark.dataSource.register(Probe)
    rows = spark.read.format("tasksocketprobe").load().collect()
    assert sorted(r.p for r in rows) == [0, 1, 2, 3]
    # the test session keeps Spark's default: TCP between the JVM and its workers
    assert all(r.found and r.tcp and r.no_delay and r.acknowledging for r in rows), rows
