"""conf/cpu_sampler.py's roles, from command lines as ps shows them on a CI run."""

from __future__ import annotations

import importlib.util
import os

_PATH = os.path.join(os.path.dirname(__file__), "..", "..", "..", "conf", "cpu_sampler.py")
_spec = importlib.util.spec_from_file_location("cpu_sampler", _PATH)
cpu_sampler = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cpu_sampler)


def test_each_process_of_a_run_gets_its_role():
    role = cpu_sampler.role_of
    assert role(["/usr/bin/java", "-Xmx512m", "-cp", "x", "kafka.Kafka", "server.properties"]) == "kafka-broker"
    assert role(["/usr/bin/java", "-cp", "x", "org.apache.spark.deploy.SparkSubmit", "pyspark-shell"]) == "spark-jvm"
    assert role(["/work/.venv/bin/python", "-m", "pyspark.daemon"]) == "spark-python-worker"
    assert role(["python", "-m", "pytest", "-n", "2"]) == "pytest"
    assert role(["java", "-Xmx256m", "-cp", "lib/clients/*", "kafkatest.JsonConsumer", "--group", "g"]) == "java-consumer"
    assert role(["/usr/bin/java", "-cp", "y", "org.example.Main"]) == "java-other"
    assert role(["/usr/bin/make", "test"]) == "make"
    assert role([]) == "kernel"
