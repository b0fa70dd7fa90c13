"""A real Spark cluster on this machine: a standalone master and two workers (three separate JVMs, started with
PySpark's own ``spark-class``) on 127.0.0.1; the OD job (``trips --counts-out``) and the user-level release
(``release --mode user_level``) are submitted with ``spark-submit`` and odcore shipped as a zip (``--py-files``), as
on a site's cluster (docs/scaling.md). Their tables must equal the memory engine's, row for row."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from odcore.paths import REPO_ROOT

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(path: Path, text: str, proc: subprocess.Popen, seconds: float = 120) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if path.exists() and text in path.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            raise AssertionError(f"{proc.args[1:3]} exited with {proc.returncode}: {path.read_text()[-2000:]}")
        time.sleep(0.5)
    raise AssertionError(f"no {text!r} in {path} after {seconds} s: {path.read_text()[-2000:]}")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """(master URL, spark-submit path, environment) of a standalone master with two 1-core workers."""
    pyspark = pytest.importorskip("pyspark")
    if shutil.which("java") is None:
        pytest.skip("Spark needs Java 17+ (.ci/run installs openjdk-17-jre-headless)")
    home = Path(pyspark.__file__).parent
    tmp = tmp_path_factory.mktemp("spark-cluster")
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
           "SPARK_LOG_DIR": str(tmp / "logs"), "SPARK_WORKER_DIR": str(tmp / "work")}
    env.pop("PYTHONPATH", None)     # the job sees odcore only through --py-files, as on a cluster
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    procs: list[subprocess.Popen] = []
    logs = []
    try:
        cls = str(home / "bin" / "spark-class")
        log = tmp / "master.log"
        procs.append(subprocess.Popen(
            [cls, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
             "--webui-port", str(_free_port())], env=env, stdout=log.open("w"), stderr=subprocess.STDOUT))
        logs.append(log)
        _wait_for(log, "I have been elected leader", procs[0])
        for i in range(2):
            log = tmp / f"worker{i}.log"
            procs.append(subprocess.Popen(
                [cls, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1", "--cores", "1",
                 "--memory", "1g", "--webui-port", str(_free_port()), "--work-dir", str(tmp / f"work{i}")],
                env=env, stdout=log.open("w"), stderr=subprocess.STDOUT))
            logs.append(log)
        for p, log in zip(procs[1:], logs[1:], strict=True):
            _wait_for(log, "Successfully registered with master", p)
        yield url, str(home / "bin" / "spark-submit"), env, tmp
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()


def _odcore_zip(folder: Path) -> Path:
    """odcore as a zip for ``--py-files`` (what a site ships to its executors)."""
    out = folder / "odcore.zip"
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for f in sorted((REPO_ROOT / "odcore").rglob("*.py")):
            z.write(f, f.relative_to(REPO_ROOT).as_posix())
    return out


def _submit(cluster, argv: list[str]) -> subprocess.CompletedProcess:
    url, submit, env, tmp = cluster
    zipped = _odcore_zip(tmp)
    cmd = [submit, "--master", url, "--deploy-mode", "client", "--py-files", str(zipped),
           "--conf", f"spark.pyspark.python={sys.executable}", "--conf", "spark.driver.host=127.0.0.1",
           "--conf", "spark.executor.memory=700m", "--conf", "spark.sql.shuffle.partitions=4",
           "--conf", "spark.ui.enabled=false", str(REPO_ROOT / "odcore" / "__main__.py"), *argv]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, cwd=tmp)
    assert res.returncode == 0, res.stderr[-4000:]
    return res


def _city(tmp: Path) -> Path:
    """A small synthetic city (the bundled city's first 800 users) as Parquet."""
    from odcore.paths import SAMPLE_DATA_DIR

    df = pd.read_parquet(SAMPLE_DATA_DIR / "synthetic_city.parquet")
    users = np.sort(df["user"].unique())[:800]
    out = tmp / "city.parquet"
    df[df["user"].isin(users)].to_parquet(out)
    return out


def test_od_job_and_user_level_release_on_a_standalone_cluster(cluster, tmp_path):
    from odcore.cli import main

    city = _city(tmp_path)
    # the OD job: counts folder written by the cluster vs by the memory engine
    common = ["--input", str(city), "--cell-km2", "1.3"]
    _submit(cluster, ["trips", *common, "--engine", "spark", "--counts-out", str(tmp_path / "spark.csv")])
    assert main(["trips", *common, "--counts-out", str(tmp_path / "memory.csv")]) == 0
    a, b = (pd.read_csv(tmp_path / f"{e}.csv") for e in ("spark", "memory"))
    assert len(a) > 500
    pd.testing.assert_frame_equal(a, b)
    # the user-level release: bounded in Spark SQL on the executors, only aggregates back to the driver, noise on
    # the driver; the same published table, analysis table and figures
    rel = ["release", *common, "--mode", "user_level", "--max-pairs", "10", "--epsilon", "1", "--threshold", "5",
           "--seed", "11"]
    res = _submit(cluster, [*rel, "--engine", "spark", "--out", str(tmp_path / "rel-spark"), "--analysis-out",
                            str(tmp_path / "an-spark"), "--json"])
    assert main([*rel, "--out", str(tmp_path / "rel-memory"), "--analysis-out", str(tmp_path / "an-memory")]) == 0
    a, b = (pd.read_csv(tmp_path / f"an-{e}" / "DO_NOT_SHARE_analysis.csv", comment="#") for e in ("spark", "memory"))
    assert a["released"].sum() > 20
    pd.testing.assert_frame_equal(a, b)
    pub = [(tmp_path / f"rel-{e}" / "published.csv").read_bytes() for e in ("spark", "memory")]
    assert pub[0] == pub[1]
    sa, sb = (json.loads((tmp_path / f"an-{e}" / "DO_NOT_SHARE_summary.json").read_text()) for e in ("spark", "memory"))
    for k in ("od", "unique_trips_per_user_week", "budget_typical_user", "utility"):
        assert sa[k] == sb[k], k
    assert '"bounded_in": "spark"' in res.stdout
