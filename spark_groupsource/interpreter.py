"""Detect Spark running the connector in the wrong Python interpreter, and say how to fix it.

Spark starts its Python workers with ``PYSPARK_PYTHON`` (default: ``python3`` from PATH), not
with the interpreter that runs the user's script. A script run as ``.venv/bin/python job.py``
without an activated venv gets workers without pyarrow or confluent-kafka; when such a worker
can still import this package (from a checkout on its path) it fails here with the fix,
instead of an ImportError deep in a PySpark traceback.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import sys
from pathlib import Path

from spark_groupsource.errors import InterpreterError

__all__ = ["DISTRIBUTION", "REQUIRED_MODULES", "check_interpreter", "missing_modules"]

DISTRIBUTION = "spark-groupsource"
#: Modules the driver-side runner and the executors import (module -> pip name).
REQUIRED_MODULES = {"pyarrow": "pyarrow", "confluent_kafka": "confluent-kafka", "kafka": "kafka-python"}


def missing_modules() -> list[str]:
    """Pip names of the required modules this interpreter cannot import."""
    return [pip for mod, pip in REQUIRED_MODULES.items() if importlib.util.find_spec(mod) is None]


def _installed() -> bool:
    try:
        importlib.metadata.distribution(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def _suggested_python() -> str:
    """The checkout's ``.venv/bin/python`` when this package is imported from a checkout."""
    venv_python = Path(__file__).resolve().parents[1] / ".venv" / "bin" / "python"
    return str(venv_python) if venv_python.exists() else "<your venv>/bin/python"


def check_interpreter() -> None:
    """Raise :class:`InterpreterError` when this interpreter cannot run the connector."""
    missing = missing_modules()
    if not missing:
        return
    where = "is not where spark-groupsource is installed" if not _installed() else (
        "has spark-groupsource but not its dependencies")
    raise InterpreterError(
        f"Spark runs this data source in the Python interpreter {sys.executable}, which {where} "
        f"(missing: {', '.join(missing)}). Spark starts its Python workers with PYSPARK_PYTHON "
        f"(default: python3 from PATH), not with the interpreter running your script: set "
        f"PYSPARK_PYTHON={_suggested_python()} before the SparkSession starts, or activate "
        f"that venv."
    )
