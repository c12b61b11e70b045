"""What a release's wheel and sdist must hold, and must not: checked on the built archives.

The wheel is what users install: every module of the packages ``spark_groupsource`` (its
subpackages too, the dev broker among them: the documented ``groupkafka-devbroker`` tool) and
``assignment``, ``pyspark_groupkafka`` (PySpark finds it and registers ``format("groupkafka")``),
the two C extensions when it is a platform wheel (a ``none-any`` wheel has none), the licence,
the console script, the version of ``spark_groupsource/_version.py``. The sdist is what a user
without a matching wheel builds from: the same sources, ``setup.py`` and the extensions' C files.
Neither holds the project's tests, chaos suites, soak, benchmarks, demo, jobs, docs or build
debris (compiled extensions in an sdist, byte code).

    python release/check_dist.py dist [--require-extensions]
"""

from __future__ import annotations

import argparse
import ast
import email
import glob
import os
import sys
import tarfile
import zipfile
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("spark_groupsource", "assignment")
MODULES = ("pyspark_groupkafka.py",)
EXTENSIONS = ("spark_groupsource/executor/_rdkafka_arrow", "spark_groupsource/decode/_avro_arrow")
C_SOURCES = tuple(e + ".c" for e in EXTENSIONS)
SCRIPT = "groupkafka-devbroker = spark_groupsource.devbroker._server:main"
#: top-level folders of the checkout that are the project's, not the product's
NOT_SHIPPED = ("tests/", "chaos/", "soak/", "bench/", "demo/", "jobs/", "docs/", "conf/", "release/",
               ".ci/", ".venv/", "build/", "dist/")


@dataclass(frozen=True)
class Archive:
    """A built archive's file names (relative to its root: the sdist's top folder stripped)
    and the text of its metadata file (the wheel's METADATA, the sdist's PKG-INFO)."""

    kind: str  # "wheel" or "sdist"
    name: str
    names: frozenset[str]
    metadata: str
    entry_points: str = ""


def source_modules(root: str = ROOT) -> set[str]:
    """The product's modules in the checkout: every .py under the packages, and the modules."""
    out = set(MODULES)
    for package in PACKAGES:
        for folder, dirs, files in os.walk(os.path.join(root, package)):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            out.update(os.path.relpath(os.path.join(folder, f), root) for f in files if f.endswith(".py"))
    return out


def source_version(root: str = ROOT) -> str:
    """``__version__`` of spark_groupsource/_version.py, read as setuptools reads it (no import)."""
    with open(os.path.join(root, "spark_groupsource", "_version.py")) as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__version__" for t in node.targets):
            return ast.literal_eval(node.value)
    raise ValueError("spark_groupsource/_version.py has no __version__")


def read_wheel(path: str) -> Archive:
    with zipfile.ZipFile(path) as z:
        names = frozenset(z.namelist())
        meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
        eps = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        return Archive("wheel", os.path.basename(path), names, z.read(meta).decode(),
                       z.read(eps[0]).decode() if eps else "")


def read_sdist(path: str) -> Archive:
    with tarfile.open(path) as t:
        members = [m for m in t.getmembers() if m.isfile()]
        names = frozenset(m.name.split("/", 1)[1] for m in members if "/" in m.name)
        top = members[0].name.split("/", 1)[0]
        info = t.extractfile(f"{top}/PKG-INFO")
        return Archive("sdist", os.path.basename(path), names, info.read().decode() if info else "")


def problems(archive: Archive, modules: set[str], version: str, require_extensions: bool) -> list[str]:
    """Each rule the archive breaks, in words (empty: it is fine)."""
    out = []
    names = archive.names
    missing = sorted(modules - names)
    if missing:
        out.append(f"missing modules: {', '.join(missing[:8])}{' ...' if len(missing) > 8 else ''}")
    stray = sorted(n for n in names if n.startswith(NOT_SHIPPED) or "__pycache__/" in n or n.endswith(".pyc"))
    if stray:
        out.append(f"ships what it must not: {', '.join(stray[:8])}{' ...' if len(stray) > 8 else ''}")
    meta = email.message_from_string(archive.metadata)
    if meta.get("Name") != "spark-groupsource":
        out.append(f"metadata Name is {meta.get('Name')!r}, not 'spark-groupsource'")
    if meta.get("Version") != version:
        out.append(f"metadata Version {meta.get('Version')!r} is not spark_groupsource/_version.py's {version!r}")
    if meta.get("License-Expression") != "Apache-2.0":
        out.append(f"metadata License-Expression is {meta.get('License-Expression')!r}, not 'Apache-2.0'")
    if "LICENSE" not in (meta.get_all("License-File") or []):
        out.append("metadata names no License-File LICENSE")
    built = [e for e in EXTENSIONS if any(n.startswith(e) and n.endswith(".so") for n in names)]
    if archive.kind == "wheel":
        if not any(n.endswith(".dist-info/licenses/LICENSE") for n in names):
            out.append("no .dist-info/licenses/LICENSE")
        if SCRIPT not in archive.entry_points.replace("  ", " "):
            out.append(f"entry_points.txt lacks the console script {SCRIPT!r}")
        platform = not archive.name.endswith("-none-any.whl")
        if platform and len(built) != len(EXTENSIONS):
            out.append(f"a platform wheel without every C extension: has {built or 'none'}")
        if not platform and built:
            out.append(f"a none-any wheel with compiled extensions: {built}")
        if require_extensions and not platform:
            out.append("a none-any wheel where the C extensions were required (was a compiler at hand?)")
        if any(n.endswith(".c") for n in names):
            out.append("C sources in the wheel")
    else:
        for needed in ("pyproject.toml", "setup.py", "LICENSE", "README.md", *C_SOURCES):
            if needed not in names:
                out.append(f"no {needed}")
        if built or any(n.endswith(".so") for n in names):
            out.append("compiled extensions in the sdist")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dist", help="the folder `python -m build` wrote")
    parser.add_argument("--require-extensions", action="store_true",
                        help="the wheel must be a platform wheel with both C extensions")
    args = parser.parse_args(argv)
    wheels = glob.glob(os.path.join(args.dist, "*.whl"))
    sdists = glob.glob(os.path.join(args.dist, "*.tar.gz"))
    if len(wheels) != 1 or len(sdists) != 1:
        print(f"{args.dist}: expected one wheel and one sdist, found {wheels + sdists}", file=sys.stderr)
        return 1
    modules, version = source_modules(), source_version()
    failed = False
    for archive in (read_wheel(wheels[0]), read_sdist(sdists[0])):
        found = problems(archive, modules, version, args.require_extensions)
        for p in found:
            print(f"{archive.name}: {p}", file=sys.stderr)
        failed |= bool(found)
        if not found:
            print(f"{archive.name}: {len(archive.names)} files, {len(modules)} modules, version {version}: ok")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
