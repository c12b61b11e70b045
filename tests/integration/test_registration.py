"""``format("groupkafka")`` with no register() call, from a directory outside the checkout:
after ``make setup`` (editable install) and after ``pip install`` of the built wheel. Also the
interpreter hint when Spark's workers run a Python without the package's dependencies."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from test_stream_support import produce

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent("""
    import json, sys
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
             .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
             .getOrCreate())
    df = (spark.read.format("groupkafka").option("kafka.bootstrap.servers", sys.argv[1])
          .option("subscribe", sys.argv[2]).load())
    import spark_groupsource
    print("RESULT " + json.dumps({"rows": df.count(), "module": spark_groupsource.__file__}))
    spark.stop()
""")


def _run(python: str, cwd: Path, script_dir: Path, *args: str, env_python: str | None = None
         ) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_DRIVER_PYTHON")}
    env["PYSPARK_PYTHON"] = env_python or python
    script = script_dir / "my_job.py"
    script.write_text(SCRIPT)
    return subprocess.run([python, str(script), *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


def _result(r: subprocess.CompletedProcess) -> dict:
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
    assert r.returncode == 0 and lines, r.stderr[-3000:]
    return json.loads(lines[-1][len("RESULT "):])


def _topic(broker, unique_name) -> str:
    name = unique_name("topic")
    broker.create_topic(name, 2)
    return name


def test_auto_registration_from_outside_the_checkout(mock_broker, unique_name, tmp_path):
    topic = _topic(mock_broker, unique_name)
    produce(mock_broker.bootstrap, topic, 6, 2)
    got = _result(_run(sys.executable, tmp_path, tmp_path, mock_broker.bootstrap, topic))
    assert got["rows"] == 6
    assert got["module"].startswith(str(ROOT))  # the editable install of this checkout


def test_auto_registration_from_the_built_wheel(mock_broker, unique_name, tmp_path):
    topic = _topic(mock_broker, unique_name)
    produce(mock_broker.bootstrap, topic, 5, 2)
    src = tmp_path / "src"
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.split()
    for f in files:
        if (ROOT / f).is_file():
            (src / f).parent.mkdir(parents=True, exist_ok=True)
            (src / f).write_bytes((ROOT / f).read_bytes())
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(dist), str(src)],
                   check=True, timeout=300, capture_output=True)
    (wheel,) = dist.glob("spark_groupsource-*.whl")
    # a fresh venv: the wheel in its own site-packages, the third-party packages from ours
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python")
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    import pyspark

    (site / "deps.pth").write_text(str(Path(pyspark.__file__).parents[1]) + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-deps",
                    "--no-index", str(wheel)], check=True, timeout=300, capture_output=True)
    run_dir = tmp_path / "elsewhere"
    run_dir.mkdir()
    got = _result(_run(python, run_dir, run_dir, mock_broker.bootstrap, topic))
    assert got["rows"] == 5
    assert got["module"].startswith(str(site))  # the wheel's copy, not the checkout


def test_workers_without_the_dependencies_get_the_pyspark_python_hint(tmp_path):
    """Spark's workers run a bare interpreter that can import the package (the checkout is
    the working directory) but not its dependencies: load() names the fix."""
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=120)
    r = _run(sys.executable, ROOT, tmp_path, "127.0.0.1:1", "t", env_python=str(bare / "bin" / "python"))
    assert r.returncode != 0
    assert "spark_groupsource.errors.InterpreterError" in r.stderr, r.stderr[-3000:]
    assert f"PYSPARK_PYTHON={ROOT / '.venv' / 'bin' / 'python'}" in r.stderr
    assert "missing: pyarrow, confluent-kafka, kafka-python" in r.stderr
