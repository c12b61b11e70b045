"""The release installed as users install it, each in a fresh virtual environment, and a topic
read on Apache Kafka from there (release/read_topic.py): `make dist-check` runs all three.

``newest``       the wheel with the newest version of every dependency its ranges allow
                 (``pip install --upgrade --upgrade-strategy eager``, no constraints file):
                 what a user who installs it today beside nothing else gets.
``no-compiler``  the sdist built where no C compiler exists: ``CC``, ``CXX`` and ``LDSHARED``
                 a program that fails, and a ``PATH`` from which every compiler (gcc, cc,
                 c++, clang, ...) is left out. It must install (the extensions are optional),
                 read on the pure-Python paths, and say once per Python worker what is absent
                 and what that costs.
``lowest``       the wheel with every dependency at its lower bound (conf/constraints-lowest.txt),
                 the unit tests of the checkout run in that environment, and the read.

    python release/user_install.py {newest,no-compiler,lowest} [--dist dist]
                                   [--kafka-home ../shared/kafka-latest] [--records 3000]

The environments live in build/user-install/<check>/ (made anew each run). Exit 1 when a check
fails; the last line is the verdict.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
READER = os.path.join(ROOT, "release", "read_topic.py")
LOWEST = os.path.join(ROOT, "conf", "constraints-lowest.txt")
#: the compiler drivers a build could find on PATH: left out of the no-compiler PATH
COMPILER = re.compile(r"^(.*-)?(gcc|g\+\+|cc|c\+\+|c89|c99|cpp|clang|clang\+\+|tcc|icc|ld|as)(-[0-9.]+)?$")
#: the line the fetch path says where it falls back (spark_groupsource/executor/fetch.py)
FALLBACK = re.compile(r"reading with confluent-kafka's Consumer, not the native fetch path: .*pid (\d+)\)")


def _clean_env(venv: str) -> dict[str, str]:
    """The environment a user's shell would have with this venv active: nothing of the
    checkout (no PYTHONPATH), no constraints or requirements of ours handed to pip."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PIP_CONSTRAINT", "PIP_REQUIREMENT", "PYSPARK_PYTHON",
                        "PYSPARK_DRIVER_PYTHON", "GROUPKAFKA_LOG_LEVEL")}
    env["VIRTUAL_ENV"] = venv
    env["PATH"] = os.path.join(venv, "bin") + os.pathsep + env.get("PATH", "")
    env["PYSPARK_PYTHON"] = os.path.join(venv, "bin", "python")
    return env


def _run(cmd: list[str], env: dict[str, str], cwd: str | None = None, log: str | None = None) -> str:
    """Run, echo the command, return its output (stdout and stderr together); fail loudly."""
    print("+", " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if log:
        with open(log, "a") as f:
            f.write(proc.stdout)
    if proc.returncode != 0:
        print(proc.stdout[-6000:], file=sys.stderr)
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(cmd)}")
    return proc.stdout


def _venv(name: str, keep: bool = False) -> tuple[str, str]:
    base = os.path.join(ROOT, "build", "user-install", name)
    venv = os.path.join(base, "venv")
    if keep and os.path.isdir(venv):
        return venv, base
    shutil.rmtree(base, ignore_errors=True)
    os.makedirs(base)
    venv = os.path.join(base, "venv")
    # the interpreter this runs on, not a venv of it: a fresh environment from the base Python
    subprocess.run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", venv], check=True)
    return venv, base


def _no_compiler_path(base: str) -> tuple[str, str]:
    """A folder of links to every program on PATH except the compilers, and a program that
    fails, for CC and friends."""
    farm = os.path.join(base, "bin-without-compilers")
    os.makedirs(farm)
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        if not os.path.isdir(folder):
            continue
        for name in os.listdir(folder):
            target = os.path.join(folder, name)
            if COMPILER.match(name) or os.path.lexists(os.path.join(farm, name)):
                continue
            if os.access(target, os.X_OK) and not os.path.isdir(target):
                os.symlink(target, os.path.join(farm, name))
    fail = os.path.join(base, "no-c-compiler")
    with open(fail, "w") as f:
        f.write("#!/bin/sh\necho 'no C compiler on this machine' >&2\nexit 1\n")
    os.chmod(fail, 0o755)
    return farm, fail


def _read(venv: str, env: dict[str, str], kafka_home: str, records: int, log: str) -> tuple[dict, str]:
    """release/read_topic.py in the venv, from an empty folder (Spark's workers put their working
    folder on sys.path: the repository root there would hide the install)."""
    reader = os.path.join(os.path.dirname(log), "read_topic.py")
    shutil.copy(READER, reader)
    with tempfile.TemporaryDirectory(prefix="groupkafka-user-") as cwd:
        out = _run([os.path.join(venv, "bin", "python"), reader, "--kafka-home", kafka_home,
                    "--records", str(records)], env, cwd=cwd, log=log)
    result = json.loads([line for line in out.splitlines() if line.startswith("{")][-1])
    return result, out


def check(kind: str, dist: str, kafka_home: str, records: int, keep: bool = False) -> list[str]:
    kept = keep and os.path.isdir(os.path.join(ROOT, "build", "user-install", kind, "venv"))
    venv, base = _venv(kind, keep)
    log = os.path.join(base, "output.log")
    env = _clean_env(venv)
    pip = [os.path.join(venv, "bin", "python"), "-m", "pip", "install", "--quiet"]
    wheels, sdists = glob.glob(os.path.join(dist, "*.whl")), glob.glob(os.path.join(dist, "*.tar.gz"))
    if len(wheels) != 1 or len(sdists) != 1:
        raise SystemExit(f"{dist}: expected one wheel and one sdist (make dist), found {wheels + sdists}")
    failures: list[str] = []
    started = time.monotonic()
    if kept:
        print(f"+ the {kind} venv of an earlier run, as it was installed ({venv})")
    elif kind == "newest":
        _run([*pip, "--upgrade", "--upgrade-strategy", "eager", wheels[0]], env, log=log)
    elif kind == "lowest":
        # the runtime dependencies at their lower bounds; the test tools beside them, held to them
        _run([*pip, "-c", LOWEST, wheels[0], "pytest", "pytest-timeout", "hypothesis", "chispa",
              "build"], env, log=log)
    if kind == "no-compiler":
        farm, fail = os.path.join(base, "bin-without-compilers"), os.path.join(base, "no-c-compiler")
        if not kept:
            farm, fail = _no_compiler_path(base)
        env = {**env, "CC": fail, "CXX": fail, "LDSHARED": f"{fail} -shared",
               "PATH": os.path.join(venv, "bin") + os.pathsep + farm}
        found = [c for c in ("gcc", "cc", "c++", "g++", "clang") if shutil.which(c, path=env["PATH"])]
        if found:
            raise SystemExit(f"compilers still on the no-compiler PATH: {found}")
        if not kept:
            _run([*pip[:-1], "--verbose", sdists[0]], env, log=log)  # the build's log: the extensions skipped
    freeze = _run([os.path.join(venv, "bin", "python"), "-m", "pip", "freeze"], env, log=log)
    with open(os.path.join(base, "freeze.txt"), "w") as f:
        f.write(freeze)
    if kind == "lowest":
        _check_lowest(freeze, failures)
        tests = _run([os.path.join(venv, "bin", "python"), "-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider",
                      "-q", "-m", "not integration", "tests/unit"], {**env, "PYTHONPATH": ROOT}, cwd=ROOT, log=log)
        print(tests.strip().splitlines()[-1])
    result, out = _read(venv, env, kafka_home, records, log)
    failures += result["failures"]
    said = FALLBACK.findall(out)
    if kind == "no-compiler":
        if result["native_fetch"] == "available" or result["native_avro"] == "available":
            failures.append(f"a C extension was built without a compiler: {result['native_fetch']}, {result['native_avro']}")
        if not said:
            failures.append("the fallback to the pure-Python fetch path was never said")
        if len(said) != len(set(said)):
            failures.append(f"the fallback was said more than once by one Python worker: pids {said}")
    else:
        if result["native_fetch"] != "available" or result["native_avro"] != "available":
            failures.append(f"the wheel's native paths are not there: {result['native_fetch']}, {result['native_avro']}")
        if said:
            failures.append(f"the fallback was said where the native path is built: {len(said)} times")
    result["fallback_said"] = len(said)
    result["minutes"] = round((time.monotonic() - started) / 60, 1)
    print(json.dumps({k: result[k] for k in ("version", "versions", "native_fetch", "native_avro", "batch_rows",
                                              "stream_rows", "committed", "fallback_said", "minutes")}))
    return failures


def _check_lowest(freeze: str, failures: list[str]) -> None:
    """Every pin of conf/constraints-lowest.txt is what got installed (a pin that pip could not
    honour would have failed the install; one left out of the file would not be tested)."""
    installed = dict(line.split("==", 1) for line in freeze.splitlines() if "==" in line)
    installed = {k.lower().replace("_", "-"): v for k, v in installed.items()}
    with open(LOWEST) as f:
        pins = [line.split("#")[0].strip() for line in f if line.split("#")[0].strip()]
    for pin in pins:
        name, version = pin.split("==")
        if installed.get(name.lower()) != version:
            failures.append(f"{name}: {installed.get(name.lower())} installed, not the lowest {version}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kind", choices=("newest", "no-compiler", "lowest"))
    parser.add_argument("--dist", default=os.path.join(ROOT, "dist"))
    parser.add_argument("--kafka-home", default=os.path.join(os.path.dirname(ROOT), "shared", "kafka-latest"))
    parser.add_argument("--records", type=int, default=3000)
    parser.add_argument("--keep", action="store_true", help="reuse the venv an earlier run installed")
    args = parser.parse_args()
    if not os.path.isdir(args.kafka_home):
        print(f"no Apache Kafka at {args.kafka_home} (--kafka-home)", file=sys.stderr)
        return 1
    failures = check(args.kind, os.path.abspath(args.dist), os.path.abspath(args.kafka_home), args.records, args.keep)
    for f in failures:
        print(f"FAIL {args.kind}: {f}", file=sys.stderr)
    print(f"{args.kind}: {'FAILED' if failures else 'passed'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
