"""conf/precompile_pyspark.py: bytecode added beside every module of a zip, used by zipimport."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "conf"))

from precompile_pyspark import has_bytecode, precompile  # noqa: E402


def make_zip(path: Path) -> None:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("pkg/__init__.py", "")
        z.writestr("pkg/mod.py", "VALUE = 42\n")


def test_bytecode_is_added_once_and_imported_from_the_zip(tmp_path: Path) -> None:
    archive = tmp_path / "pyspark.zip"
    make_zip(archive)
    assert not has_bytecode(archive)
    assert precompile(str(archive)) is True
    with zipfile.ZipFile(archive) as z:
        names = set(z.namelist())
    assert {"pkg/__init__.pyc", "pkg/mod.pyc", "pkg/mod.py"} <= names
    assert precompile(str(archive)) is False  # idempotent
    # the interpreter loads the module from its .pyc: with the source blanked out of the zip,
    # the value can only come from the bytecode
    blanked = tmp_path / "blanked.zip"
    with zipfile.ZipFile(archive) as src, zipfile.ZipFile(blanked, "w") as dst:
        for name in src.namelist():
            dst.writestr(name, "" if name.endswith(".py") else src.read(name))
    out = subprocess.run(
        [sys.executable, "-c", "import pkg.mod; print(pkg.mod.VALUE, pkg.mod.__spec__.loader.__class__.__name__)"],
        env={"PYTHONPATH": str(blanked)}, capture_output=True, text=True, check=True,
    )
    assert out.stdout.split() == ["42", "zipimporter"]
