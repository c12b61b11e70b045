"""`make demo` in a short configuration: it runs (a dev broker, a producer, two Spark query
processes and a librdkafka consumer in one group), writes a picture and a summary, and what it
recorded matches the scenario it played."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import run_tree

ROOT = Path(__file__).resolve().parents[2]
PARTITIONS = 4

pytestmark = [pytest.mark.integration, pytest.mark.extended(why="make demo itself, ~250 s; its parts have their own tests")]


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    if os.environ.get("GROUPKAFKA_TEST_BOOTSTRAP"):
        pytest.skip("the demo starts its own embedded mock broker; GROUPKAFKA_TEST_BOOTSTRAP points tests elsewhere")
    out = tmp_path_factory.mktemp("demo")
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    result = run_tree(
        [sys.executable, "-m", "demo", "--out", str(out), "--partitions", str(PARTITIONS),
         "--rate", "60", "--dwell", "4"],
        cwd=ROOT, env=env, timeout=800,
    )
    return result, out


def _data(out: Path) -> dict:
    return json.loads((out / "data.json").read_text())


def test_demo_runs_and_writes_picture_and_summary(demo_run):
    result, out = demo_run
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    png = out / "ownership.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    import matplotlib.image as mpimg

    from demo.plot import COLOURS

    pixels = mpimg.imread(png)[:, :, :3]
    for member in ("A", "B", "consumer"):  # each owner's bars are drawn
        rgb = [int(COLOURS[member][i:i + 2], 16) / 255 for i in (1, 3, 5)]
        close = (abs(pixels - rgb) < 0.02).all(axis=2)
        assert close.sum() > 500, f"{member}'s colour covers {close.sum()} pixels"
    summary = (out / "summary.txt").read_text()
    assert "lost: 0\n" in summary and "duplicates:" in summary
    assert str(out / "ownership.png") in result.stdout


def test_demo_records_match_the_scenario(demo_run):
    result, out = demo_run
    assert result.returncode == 0, result.stderr[-3000:]
    data = _data(out)
    from demo import timeline as tl

    assert data["error"] is None
    phases = {label: t for t, label in data["phases"]}
    assert list(phases) == ["A starts", "B starts", "consumer joins", "B stops", "consumer leaves", "producer stops"]
    ivals = [tl.Interval(**i) for i in data["intervals"]]
    # never two owners of one partition at once (cooperative-sticky hands over, never shares)
    assert tl.overlaps(ivals) == []
    # at the end of each phase every partition has exactly the phase's members as owners
    expect = {"A starts": {"A"}, "B starts": {"A", "B"}, "consumer joins": {"A", "B", "consumer"},
              "B stops": {"A", "consumer"}, "consumer leaves": {"A"}}
    labels = list(phases)
    for i, label in enumerate(labels[:-1]):
        at = phases[labels[i + 1]] - 0.5
        owners = [tl.owner_at(ivals, p, at) for p in range(PARTITIONS)]
        assert None not in owners, (label, owners)
        assert set(owners) == expect[label], (label, owners)
    # B owned partitions only between its join and its stop; the consumer likewise
    b = [i for i in ivals if i.member == "B"]
    assert b and all(phases["B starts"] <= i.start and i.end <= data["exits"]["B"] for i in b)
    assert data["exits"]["B"] <= phases["consumer leaves"]
    c = [i for i in ivals if i.member == "consumer"]
    assert c and all(phases["consumer joins"] <= i.start and i.end <= phases["producer stops"] for i in c)
    # what each query planned (Spark's progress) lies inside its logged ownership
    assert data["batches"]["A"] > 0 and data["batches"]["B"] > 0
    assert data["planned_outside_ownership"] == []
    # no record lost; everybody read something; duplicates only from handovers (bounded)
    s = data["stats"]
    assert s["lost"] == [] and s["produced"] > 0 and not data["producer_errors"]
    assert all(s["read_by"][m] > 0 for m in ("A", "B", "consumer"))
    assert sum(s["read_by"].values()) == s["produced"] + s["duplicates"]
    assert s["duplicates"] < s["produced"] / 2
    # lag was sampled throughout and ended at zero: everything committed
    lag = data["lag"]
    assert len(lag["A"]) > 10
    assert sum(series[-1][1] for series in lag.values()) == 0
