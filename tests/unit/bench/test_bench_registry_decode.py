"""bench/registry_decode.py's ``from_avro`` reader runs only with a spark-avro jar: which path it
takes, and why it is left out otherwise (``make bench`` on a plain clone has none)."""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))
from registry_decode import FROM_AVRO_CLASS, spark_avro_jar  # noqa: E402


def _jar(path: Path, *names: str) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        for name in names:
            z.writestr(name, b"")
    return path


def test_no_jar_given_leaves_the_reader_out_saying_how_to_give_one():
    for given in (None, ""):
        jar, why = spark_avro_jar(given)
        assert jar is None
        assert "--spark-avro-jar" in why and "SPARK_AVRO_JAR" in why


def test_a_jar_with_from_avros_expression_is_taken_as_an_absolute_path(tmp_path, monkeypatch):
    _jar(tmp_path / "spark-avro.jar", "META-INF/MANIFEST.MF", FROM_AVRO_CLASS)
    monkeypatch.chdir(tmp_path)
    assert spark_avro_jar("spark-avro.jar") == (str(tmp_path / "spark-avro.jar"), None)


def test_a_missing_file_a_non_jar_and_a_jar_without_spark_avro_are_refused_by_name(tmp_path):
    missing = tmp_path / "nowhere.jar"
    assert spark_avro_jar(str(missing)) == (None, f"the spark-avro jar {missing} does not exist")
    text = tmp_path / "text.jar"
    text.write_text("not a zip")
    jar, why = spark_avro_jar(str(text))
    assert jar is None and why.startswith(f"{text} is not a jar")
    other = _jar(tmp_path / "spark-sql-kafka.jar", "org/apache/spark/sql/kafka010/KafkaSourceProvider.class")
    jar, why = spark_avro_jar(str(other))
    assert jar is None and "not a spark-avro jar" in why

