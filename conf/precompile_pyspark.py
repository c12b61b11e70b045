"""Add bytecode to PySpark's ``python/lib/pyspark.zip``, so Spark's Python workers start faster.

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` first on the path of the Python processes it
starts (a streaming query's driver-side runner, planning and simple workers). PyPI's zip holds
sources only, so each of those processes compiles the PySpark modules it imports anew: measured
on this project's machines, importing ``pyspark.worker`` and ``pyspark.sql.datasource`` took
0.75 CPU-s from the stock zip and 0.29 with bytecode. On a loaded machine the difference decides
whether a worker connects back within Spark's fixed 10 s (``PythonWorkerFactory``: "Python
worker failed to connect back").

Run it with the interpreter Spark's workers use (``PYSPARK_PYTHON``): the bytecode is for that
Python version; another version ignores it and compiles the sources as before. Idempotent;
``make setup`` runs it on the project's venv, and a cluster image can run it once after
``pip install``. Usage: ``python conf/precompile_pyspark.py [path/to/pyspark.zip]``.
"""

from __future__ import annotations

import compileall
import os
import py_compile
import sys
import tempfile
import warnings
import zipfile


def stock_zip() -> str:
    import pyspark

    return os.path.join(os.path.dirname(pyspark.__file__), "python", "lib", "pyspark.zip")


def has_bytecode(path: str) -> bool:
    with zipfile.ZipFile(path) as z:
        return any(n.endswith(".pyc") for n in z.namelist())


def precompile(path: str) -> bool:
    """Rewrite ``path`` with a legacy ``.pyc`` beside every ``.py`` (where zipimport looks for
    them). Unchecked-hash pycs: the zip's timestamps say nothing about a file's source, and the
    whole zip is replaced when PySpark is. Returns whether the zip was rewritten."""
    if has_bytecode(path):
        return False
    with tempfile.TemporaryDirectory(dir=os.path.dirname(path)) as tmp:
        tree = os.path.join(tmp, "tree")
        with zipfile.ZipFile(path) as z:
            z.extractall(tree)
        with warnings.catch_warnings():  # PySpark's own tests hold a few SyntaxWarnings
            warnings.simplefilter("ignore")
            compileall.compile_dir(
                tree, quiet=2, legacy=True, invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH
            )
        out = os.path.join(tmp, "pyspark.zip")
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
            for root, dirs, files in os.walk(tree):
                dirs.sort()
                for name in sorted(files):
                    full = os.path.join(root, name)
                    z.write(full, os.path.relpath(full, tree))
        os.replace(out, path)
    return True


def main(argv: list[str]) -> int:
    path = argv[1] if len(argv) > 1 else stock_zip()
    if not os.path.exists(path):
        print(f"precompile_pyspark: no {path}; nothing to do")
        return 0
    done = precompile(path)
    print(f"precompile_pyspark: {path}: {'bytecode added' if done else 'already has bytecode'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
