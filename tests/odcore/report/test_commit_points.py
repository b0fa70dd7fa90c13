"""Outputs of several files commit at one point: a run killed (``kill -9``) at the step between two commits leaves
the previous set, or a pair its reader refuses in one line, never a mix read as one.

The step is reached exactly through :func:`odcore.paths.pause_for_test` (``ODCORE_TEST_PAUSE=POINT:FILE``: the
process writes FILE there and waits), so the kill is not left to chance.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from odcore.data.synth import SynthConfig, generate_city
from odcore.errors import ODCoreError
from odcore.od.odtable import read_counts_file
from odcore.paths import PAUSE_ENV, REPO_ROOT
from odcore.report import figures
from odcore.report.published import check_release


@pytest.fixture(scope="module")
def city(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("commit") / "city.parquet"
    generate_city(SynthConfig(users=150, weeks=1), 4).to_parquet(p, index=False)
    return p


def _run(*argv: str) -> None:
    r = subprocess.run([sys.executable, "-m", "odcore", *argv], cwd=REPO_ROOT, capture_output=True, text=True,
                       timeout=300, check=False)
    assert r.returncode == 0, r.stderr


def _kill_at(point: str, tmp_path: Path, *argv: str) -> None:
    """Run ``python -m odcore argv`` until it reaches ``point``, then kill it with SIGKILL."""
    marker = tmp_path / f"{point}.reached"
    env = {**os.environ, PAUSE_ENV: f"{point}:{marker}"}
    proc = subprocess.Popen([sys.executable, "-m", "odcore", *argv], cwd=REPO_ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 240
        while not marker.exists():
            if proc.poll() is not None:
                pytest.fail(f"{argv[0]} ended before {point}: {proc.stderr.read().decode()[-500:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"{argv[0]} never reached {point}")
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL


@pytest.mark.slow
def test_release_killed_between_its_two_folders(city, tmp_path):
    out, an = tmp_path / "pub", tmp_path / "an"
    args = ["release", "--input", str(city), "--threshold", "5", "--out", str(out), "--analysis-out", str(an)]
    _run(*args, "--seed", "1")
    old = {p.name: p.read_bytes() for p in out.iterdir()}
    assert check_release(out, an)["kind"] == "odcore-private-record-do-not-share"   # a whole set reads
    _kill_at("release", tmp_path, *args, "--seed", "2")
    # the analysis folder was swapped in, the published one not: the published set is the old one, whole ...
    assert {p.name: p.read_bytes() for p in out.iterdir()} == old
    # ... and the pair is refused as one release, in one line naming both folders
    with pytest.raises(ODCoreError, match=r"are of two different runs of release") as e:
        check_release(out, an)
    assert "\n" not in str(e.value)
    _run(*args, "--seed", "3")   # the next run replaces both (and removes the killed run's temporaries)
    check_release(out, an)
    assert not [p for p in tmp_path.iterdir() if ".odcore-tmp-" in p.name]


def test_counts_file_killed_between_its_two_files(city, tmp_path):
    od = tmp_path / "od.csv"
    _run("trips", "--input", str(city), "--counts-out", str(od))
    table, geo = read_counts_file(od)
    assert len(table) > 0
    assert geo["odcore_counts"]["file"] == "od.csv"
    _kill_at("counts-out", tmp_path, "trips", "--input", str(city), "--cell-km2", "5", "--counts-out", str(od))
    # the new zones (5 km²) beside the old counts (1.3 km²): refused, not read as zones of that table
    with pytest.raises(ODCoreError, match=r"od\.csv and od\.zones\.geojson are not from the same write") as e:
        read_counts_file(od)
    assert "\n" not in str(e.value)
    _run("trips", "--input", str(city), "--cell-km2", "5", "--counts-out", str(od))
    table5, _ = read_counts_file(od)
    assert len(table5) < len(table)


def test_counts_file_refuses_a_missing_or_foreign_zones_file(city, tmp_path):
    od = tmp_path / "w.parquet"
    _run("trips", "--input", str(city), "--counts-out", str(od))
    read_counts_file(od)
    geo = tmp_path / "w.zones.geojson"
    doc = json.loads(geo.read_text())
    doc.pop("odcore_counts")
    geo.write_text(json.dumps(doc))
    with pytest.raises(ODCoreError, match="not from the same write"):
        read_counts_file(od)
    geo.unlink()
    with pytest.raises(ODCoreError, match=r"no zones file w\.zones\.geojson"):
        read_counts_file(od)


@pytest.mark.slow
@pytest.mark.browser
def test_figures_killed_while_writing_leave_the_previous_set(tmp_path):
    if figures.find_browser() is None:
        pytest.skip("no Chromium: figures cannot be drawn")
    out = tmp_path / "figs"
    args = ["figures", "--out", str(out), "--only", "fig1_per_count,budget_weeks", "--formats", "svg"]
    _run(*args, "--epsilon", "0.5")
    old = {p.name: p.read_bytes() for p in out.iterdir()}
    manifest = json.loads(old["figures_manifest.json"])
    assert sorted(manifest["files"]) == sorted(n for n in old if n != "figures_manifest.json")
    _kill_at("figures", tmp_path, *args, "--epsilon", "2")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == old   # every file of the previous set, unchanged
    _run(*args, "--epsilon", "2")
    new = {p.name: p.read_bytes() for p in out.iterdir()}
    assert new.keys() == old.keys()
    assert new["fig1_per_count.csv"] != old["fig1_per_count.csv"]
    assert not [p for p in tmp_path.iterdir() if ".odcore-tmp-" in p.name]
