"""release/check_dist.py: what a wheel and an sdist must hold and must not, each rule shown to
catch a crafted archive that breaks it; and the real archives, built as pip builds them."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "release"))

from check_dist import (  # noqa: E402
    EXTENSIONS,
    SCRIPT,
    Archive,
    problems,
    read_sdist,
    read_wheel,
    source_modules,
    source_version,
)

import spark_groupsource  # noqa: E402

MODULES = source_modules()
VERSION = source_version()
META = (f"Metadata-Version: 2.4\nName: spark-groupsource\nVersion: {VERSION}\n"
        "License-Expression: Apache-2.0\nLicense-File: LICENSE\n\n")
SO = tuple(e + ".cpython-311-x86_64-linux-gnu.so" for e in EXTENSIONS)
WHEEL = Archive("wheel", f"spark_groupsource-{VERSION}-cp311-cp311-linux_x86_64.whl",
                frozenset({*MODULES, *SO, f"spark_groupsource-{VERSION}.dist-info/licenses/LICENSE"}),
                META, f"[console_scripts]\n{SCRIPT}\n")
SDIST = Archive("sdist", f"spark_groupsource-{VERSION}.tar.gz",
                frozenset({*MODULES, "pyproject.toml", "setup.py", "LICENSE", "README.md",
                           *(e + ".c" for e in EXTENSIONS)}), META)


def test_the_version_is_one_source_and_the_installed_metadata_says_it() -> None:
    assert spark_groupsource.__version__ == VERSION == importlib.metadata.version("spark-groupsource")


def test_well_formed_archives_pass() -> None:
    assert problems(WHEEL, MODULES, VERSION, require_extensions=True) == []
    assert problems(SDIST, MODULES, VERSION, require_extensions=True) == []
    pure = dataclasses.replace(WHEEL, name=f"spark_groupsource-{VERSION}-py3-none-any.whl", names=WHEEL.names - set(SO))
    assert problems(pure, MODULES, VERSION, require_extensions=False) == []


@pytest.mark.parametrize("change, caught", [
    (lambda a: dataclasses.replace(a, names=a.names - {"pyspark_groupkafka.py"}), "missing modules: pyspark_groupkafka.py"),
    (lambda a: dataclasses.replace(a, names=a.names - {"spark_groupsource/devbroker/_server.py"}), "missing modules"),
    (lambda a: dataclasses.replace(a, names=a.names | {"tests/helpers.py"}), "ships what it must not: tests/helpers.py"),
    (lambda a: dataclasses.replace(a, names=a.names | {"bench/fetch_cpu.py"}), "ships what it must not"),
    (lambda a: dataclasses.replace(a, names=a.names | {"spark_groupsource/__pycache__/x.cpython-311.pyc"}), "must not"),
    (lambda a: dataclasses.replace(a, metadata=a.metadata.replace(VERSION, "9.9.9")), "Version '9.9.9'"),
    (lambda a: dataclasses.replace(a, metadata=a.metadata.replace("License-File: LICENSE\n", "")), "License-File"),
    (lambda a: dataclasses.replace(a, metadata=a.metadata.replace("Apache-2.0", "MIT")), "License-Expression"),
])
def test_a_rule_both_archives_keep_is_caught(change, caught) -> None:
    for archive in (WHEEL, SDIST):
        assert any(caught in p for p in problems(change(archive), MODULES, VERSION, False)), archive.kind


@pytest.mark.parametrize("change, caught", [
    (lambda a: dataclasses.replace(a, names=a.names - {SO[0]}), "platform wheel without every C extension"),
    (lambda a: dataclasses.replace(a, name=a.name.replace("cp311-cp311-linux_x86_64", "py3-none-any")),
     "none-any wheel with compiled extensions"),
    (lambda a: dataclasses.replace(a, names={n for n in a.names if "licenses/" not in n}), "licenses/LICENSE"),
    (lambda a: dataclasses.replace(a, entry_points=""), "console script"),
    (lambda a: dataclasses.replace(a, names=a.names | {EXTENSIONS[0] + ".c"}), "C sources in the wheel"),
])
def test_a_wheel_rule_is_caught(change, caught) -> None:
    assert any(caught in p for p in problems(change(WHEEL), MODULES, VERSION, False))


def test_a_none_any_wheel_is_refused_where_the_extensions_were_required() -> None:
    pure = dataclasses.replace(WHEEL, name=f"spark_groupsource-{VERSION}-py3-none-any.whl", names=WHEEL.names - set(SO))
    assert any("were required" in p for p in problems(pure, MODULES, VERSION, require_extensions=True))


@pytest.mark.parametrize("change, caught", [
    (lambda a: dataclasses.replace(a, names=a.names - {EXTENSIONS[1] + ".c"}), "no spark_groupsource/decode/_avro_arrow.c"),
    (lambda a: dataclasses.replace(a, names=a.names - {"setup.py"}), "no setup.py"),
    (lambda a: dataclasses.replace(a, names=a.names - {"LICENSE"}), "no LICENSE"),
    (lambda a: dataclasses.replace(a, names=a.names | {SO[1]}), "compiled extensions in the sdist"),
])
def test_an_sdist_rule_is_caught(change, caught) -> None:
    assert any(caught in p for p in problems(change(SDIST), MODULES, VERSION, False))


@pytest.mark.timeout(600)
def test_the_built_sdist_and_wheel_hold_what_they_must(tmp_path: Path) -> None:
    # as `make dist` and pip build them: the sdist, then the wheel from it, in an isolated
    # build environment (setuptools from the index, not the venv's)
    subprocess.run([sys.executable, "-m", "build", "--outdir", str(tmp_path), str(ROOT)], check=True,
                   stdout=subprocess.DEVNULL)
    wheel, sdist = read_wheel(str(next(tmp_path.glob("*.whl")))), read_sdist(str(next(tmp_path.glob("*.tar.gz"))))
    assert problems(wheel, MODULES, VERSION, require_extensions=True) == []
    assert problems(sdist, MODULES, VERSION, require_extensions=True) == []
    assert len(wheel.names) > len(MODULES) and len(sdist.names) > len(MODULES)
