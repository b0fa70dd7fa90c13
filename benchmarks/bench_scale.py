"""Scaling of the trace -> weekly OD step: ``python -m odcore trips`` per engine, side by side, in one run.

Inputs are synthetic cities written in chunks by ``python -m odcore synth --out DIR`` (a folder of Parquet files):
0.1 M, 0.5 M, 1 M and 5 M users x 1 week and 1 M users x 4 weeks (``--quick``: 20 k and 50 k users). Datasets are
generated once and kept under ``$ODCORE_BENCH_DATA`` (default ``/tmp/odcore-bench``); generation time is reported.
``ODCORE_BENCH_SIZES=100000x1,1000000x4`` and ``ODCORE_BENCH_ENGINES=memory,duckdb`` choose a subset.

Each (size, engine) runs ``python -m odcore trips --input DIR --engine E --json`` in a fresh process; wall time and
the peak resident memory of the whole process tree (the Python process plus, for Spark, its JVM and Python workers;
sampled every 0.1 s from /proc) are measured, and its CPU seconds (user + system, ``getrusage`` of the waited-for
children: less sensitive than wall time to other jobs on a shared machine; the 1-minute load is noted). A memory-engine run is skipped, with the reason printed, when its memory
per user-week measured at a smaller size predicts more than ``LIMIT_GIB`` (DuckDB and Spark are bounded by their
own memory settings), and a Spark run above ``SPARK_MAX_USERS`` users (``$ODCORE_BENCH_SPARK_MAX_USERS``, default
100,000: local mode on two cores took 67 s at 100,000 users and 418 s at 1 M, so all sizes would take over an
hour).
Every finished run's OD table summary is compared with the DuckDB run of the same input (users, trips, unique trips,
OD pairs, largest count).

Then the peer on real GPS (:func:`run_peer`): the Cabspotting folder (``$ODCORE_BENCH_CABSPOTTING``, default
``/work/shared/data/cabspotting_sf``; skipped when absent) through the peer's DuckDB SQL, the memory engine streamed
in groups of cab files on two threads (``memory``) or two worker processes (``memory-processes``), the memory engine on the loaded folder
(``memory-loaded``) and the DuckDB engine on the same box and degree grid (:mod:`benchmarks.peer_od`; the peer's
query without DISTINCT of the fixes, as the folder has no duplicate fix: the faster form), each a fresh process
started with ``nice``, the order alternating from round to round (peer first, then last); the memory engine's
default command (``odcore trips``: robust box, UTM grid, the loaded folder) is measured alongside. The tables are
compared row for row. CPU seconds include the worker processes (children the run waits for).
``python -m benchmarks.bench_scale --peer-only --rounds 3`` runs this part alone.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.peer_od import COLUMNS as PEER_COLUMNS
from odapp.live import tree_rss_bytes

REPO = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("ODCORE_BENCH_DATA", "/tmp/odcore-bench"))
LIMIT_GIB = 10.0
SPARK_MAX_USERS = int(os.environ.get("ODCORE_BENCH_SPARK_MAX_USERS", 100_000))
DUCKDB_MEMORY_LIMIT = "3GB"
SIZES = [(100_000, 1), (500_000, 1), (1_000_000, 1), (5_000_000, 1), (1_000_000, 4)]
QUICK_SIZES = [(20_000, 1), (50_000, 1)]
ENGINES = ("memory", "duckdb", "spark")
LAST_CPU = 0.0
KEYS = ("users", "trips", "unique_trips", "od_pairs", "max_count")


def run_measured(argv: list[str], env: dict | None = None) -> tuple[float, float, str, int]:
    """(wall seconds, peak tree RSS in GiB, stdout, return code) of a command; its CPU seconds (user + system of
    the waited-for process tree, from ``getrusage``) go to :data:`LAST_CPU`."""
    global LAST_CPU
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})
    peak = 0
    while proc.poll() is None:
        peak = max(peak, tree_rss_bytes(proc.pid))
        time.sleep(0.1)
    out, err = proc.communicate()
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    LAST_CPU = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    if proc.returncode != 0:
        print(err[-2000:], file=sys.stderr)
    return wall, peak / 2**30, out, proc.returncode


CABSPOTTING = Path(os.environ.get("ODCORE_BENCH_CABSPOTTING", "/work/shared/data/cabspotting_sf"))
PEER_RUNS = ("peer", "memory", "memory-processes", "memory-loaded", "duckdb", "memory_cli")


SYNTH_RUNS = ("peer", "memory", "duckdb")


def _peer_argv(who: str, out: Path, folder: Path = CABSPOTTING) -> list[str]:
    if who == "memory_cli":
        return ["nice", sys.executable, "-m", "odcore", "trips", "--input", str(folder), "--engine", "memory",
                "--json"]
    return ["nice", sys.executable, "-m", "benchmarks.peer_od", who, "--input", str(folder), "--out",
            str(out / f"{who}.parquet")] + (["--no-dedupe"] if who == "peer" and folder == CABSPOTTING else [])


def run_peer(rounds: int = 3, runs: tuple[str, ...] = PEER_RUNS, folder: Path = CABSPOTTING,
             label: str = "Cabspotting 10 M fixes") -> list[dict]:
    """The peer's SQL vs the engines on Cabspotting (10 M fixes), or on a synthetic city's Parquet folder
    (``folder``; :data:`benchmarks.peer_od.SYNTH_BOX`): median wall, peak RSS and CPU of ``rounds`` alternating
    runs, tables compared row for row."""
    import tempfile

    import pandas as pd

    if not folder.is_dir():
        print(f"peer: {folder} not found, skipped")
        return []
    runs = ("peer", *(w for w in runs if w != "peer"))
    res: dict[str, list[tuple[float, float, float]]] = {w: [] for w in runs}
    loads = [os.getloadavg()[0]]
    same: dict[str, bool] = {}
    with tempfile.TemporaryDirectory(prefix="odcore-peer-") as tmp:
        out = Path(tmp)
        for i in range(rounds):
            order = runs if i % 2 == 0 else runs[::-1]
            for who in order:
                wall, peak, _, rc = run_measured(_peer_argv(who, out, folder))
                if rc != 0:
                    raise RuntimeError(f"peer benchmark: {who} failed (exit {rc})")
                res[who].append((wall, peak, LAST_CPU))
                loads.append(os.getloadavg()[0])
                print(f"  round {i + 1} {who}: wall {wall:.1f} s, peak {peak:.2f} GiB, CPU {LAST_CPU:.1f} s, "
                      f"1-min load {loads[-1]:.1f}", flush=True)
            ref = pd.read_parquet(out / "peer.parquet")[PEER_COLUMNS]
            for who in (w for w in ("memory", "memory-processes", "memory-loaded", "duckdb") if w in runs):
                got = pd.read_parquet(out / f"{who}.parquet")[PEER_COLUMNS]
                same[who] = same.get(who, True) and ref.equals(got)
    rows: list[dict] = []
    med = {w: [float(np.median([r[k] for r in res[w]])) for k in range(3)] for w in runs}
    note = (f"{rounds} alternating rounds, nice, {os.cpu_count()} cores, 1-min load {min(loads):.1f}-{max(loads):.1f}"
            "; rows identical to the peer: " + ", ".join(f"{w} {v}" for w, v in same.items()))
    print(f"{label} ({note})", flush=True)
    print(f"{'':>16} {'wall s':>8} {'x peer':>7} {'peak GiB':>9} {'x peer':>7} {'CPU s':>7}")
    for w in runs:
        wall, peak, cpu = med[w]
        print(f"{w:>16} {wall:8.2f} {wall / med['peer'][0]:7.2f} {peak:9.2f} {peak / med['peer'][1]:7.2f} {cpu:7.2f}"
              f"   walls {[round(r[0], 2) for r in res[w]]}")
        case = f"{label}, {w}"
        rows.append({"case": case, "metric": "wall", "value": wall, "unit": "s", "baseline": med["peer"][0],
                     "ratio": wall / med["peer"][0], "note": note})
        rows.append({"case": case, "metric": "peak memory", "value": peak, "unit": "GiB", "baseline": med["peer"][1],
                     "ratio": peak / med["peer"][1], "note": "process tree RSS, sampled every 0.1 s"})
        rows.append({"case": case, "metric": "cpu", "value": cpu, "unit": "s", "baseline": med["peer"][2],
                     "ratio": cpu / med["peer"][2], "note": "user + system seconds (getrusage)"})
    return rows


def dataset(users: int, weeks: int) -> tuple[Path, float | None]:
    """The city folder (generated when missing) and the generation wall time (None when it existed)."""
    d = DATA / f"city_{users}u_{weeks}w"
    if (d / ".complete").is_file():
        return d, None
    wall, _, _, rc = run_measured([sys.executable, "-m", "odcore", "synth", "--users", str(users), "--weeks",
                                   str(weeks), "--seed", "1", "--out", str(d), "--chunk-users", "250000", "--json"])
    if rc != 0:
        raise RuntimeError(f"synth failed for {users} users x {weeks} weeks")
    (d / ".complete").write_text("ok")
    return d, wall


def run_synthetic(users: list[int], rounds: int = 2, runs: tuple[str, ...] = SYNTH_RUNS) -> list[dict]:
    """The peer's SQL on the synthetic city of each size in ``users`` (x 1 week; generated when missing, as
    :func:`dataset`) against the engines on the same box and degree grid, alternating (:func:`run_peer`)."""
    rows: list[dict] = []
    for n in users:
        d, gen = dataset(n, 1)
        if gen is not None:
            print(f"generated {d} in {gen:.0f} s")
        rows += run_peer(rounds, runs, folder=d, label=f"synthetic {n:,} users x 1 week")
    return rows


def run(quick: bool = False) -> list[dict]:
    rows: list[dict] = []
    per_uw: dict[str, float] = {}          # GiB per user-week of each engine's latest (largest) finished run
    sizes = QUICK_SIZES if quick else SIZES
    if os.environ.get("ODCORE_BENCH_SIZES"):      # e.g. "100000x1,1000000x1" (users x weeks)
        sizes = [tuple(int(x) for x in item.split("x")) for item in os.environ["ODCORE_BENCH_SIZES"].split(",")]
    engines = tuple(os.environ.get("ODCORE_BENCH_ENGINES", ",".join(ENGINES)).split(","))
    print(f"{'users':>10} {'weeks':>5} | " + " | ".join(f"{e:^29}" for e in engines))
    for users, weeks in sizes:
        d, gen = dataset(users, weeks)
        if gen is not None:
            rows.append({"case": f"synth {users} users x {weeks} w", "metric": "generation wall", "value": gen,
                         "unit": "s", "note": "python -m odcore synth --out DIR (chunks of 250k users)"})
        uw = users * weeks
        res: dict[str, dict] = {}
        cells = []
        for e in engines:
            est = per_uw.get(e, 0.0) * uw
            if e == "memory" and est > LIMIT_GIB:   # DuckDB and Spark are held by their own memory settings
                res[e] = {"skip": f"skipped: ~{est:.1f} GiB predicted > {LIMIT_GIB:g} GiB limit"}
            elif e == "spark" and users > SPARK_MAX_USERS:
                res[e] = {"skip": f"skipped: local Spark on {os.cpu_count()} cores above {SPARK_MAX_USERS:,} users "
                                  "exceeds the run's time budget"}
            else:
                argv = [sys.executable, "-m", "odcore", "trips", "--input", str(d), "--engine", e, "--json"]
                if e == "duckdb":
                    argv += ["--memory-limit", DUCKDB_MEMORY_LIMIT]
                wall, peak, out, rc = run_measured(argv)
                if rc != 0:
                    res[e] = {"skip": f"failed (exit {rc})"}
                else:
                    summ = json.loads(out)
                    res[e] = {"wall": wall, "peak": peak, "cpu": LAST_CPU, "summary": {k: summ[k] for k in KEYS}}
                    per_uw[e] = peak / uw   # the largest run so far: fixed costs weigh least
            r = res[e]
            if "skip" in r:
                cells.append(f"{r['skip'][:29]:<29}")
                rows.append({"case": f"{users} users x {weeks} w, {e}", "metric": "skipped", "value": None,
                             "unit": "", "note": r["skip"]})
            else:
                cells.append(f"{r['wall']:6.1f} s {r['cpu']:6.1f} cpu {r['peak']:5.2f} GiB")
                rows.append({"case": f"{users} users x {weeks} w, {e}", "metric": "wall", "value": r["wall"],
                             "unit": "s", "baseline": res.get("memory", {}).get("wall"),
                             "ratio": (r["wall"] / res["memory"]["wall"]) if "wall" in res.get("memory", {}) else None,
                             "note": f"peak {r['peak']:.2f} GiB, {r['peak'] * 2**20 / uw:.2f} KiB per user-week, "
                                     f"CPU {r['cpu']:.1f} s, load {os.getloadavg()[0]:.1f}"})
                rows.append({"case": f"{users} users x {weeks} w, {e}", "metric": "cpu", "value": r["cpu"],
                             "unit": "s", "note": "user + system seconds of the process tree (getrusage)"})
                rows.append({"case": f"{users} users x {weeks} w, {e}", "metric": "peak memory", "value": r["peak"],
                             "unit": "GiB", "note": "process tree RSS, sampled every 0.1 s"})
        ref = res.get("duckdb", {}).get("summary")
        same = all(res[e]["summary"] == ref for e in engines if "summary" in res[e]) if ref else None
        print(f"{users:>10,} {weeks:>5} | " + " | ".join(cells) + f" | tables agree: {same}")
        for e in engines:
            if "skip" in res[e]:
                print(f"{'':>18}{e}: {res[e]['skip']}")
    rows += run_peer(rounds=1 if quick else 3)
    return rows


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(prog="python -m benchmarks.bench_scale")
    ap.add_argument("--peer-only", action="store_true", help="only the Cabspotting comparison with the peer's SQL")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", default=",".join(PEER_RUNS),
                    help="with --peer-only: which runs, comma-separated (the peer always runs; default: all)")
    ap.add_argument("--synthetic-users", default=None, metavar="N,N,...",
                    help="only the peer vs the engines on synthetic cities of these sizes (x 1 week), e.g. "
                         "500000,2000000; --runs from peer,memory,duckdb (default: all three)")
    a = ap.parse_args()
    if a.synthetic_users:
        chosen = tuple(a.runs.split(",")) if a.runs != ",".join(PEER_RUNS) else SYNTH_RUNS
        run_synthetic([int(x) for x in a.synthetic_users.split(",")], a.rounds, chosen)
    elif a.peer_only:
        run_peer(a.rounds, tuple(a.runs.split(",")))
    else:
        run()
