"""dp-mobility-report beside the lab's designer release: the same trips, the same user-level ε, the same measures.

One command::

    python -m benchmarks.bench_dpmr [--quick] [--seeds 5] [--json FILE]

(also ``python -m benchmarks -k dpmr``). It

1. installs ``dp-mobility-report`` (:data:`DPMR_VERSION`) into its own virtual environment outside the repository
   (``$ODLAB_DPMR_VENV``, default the system's temporary folder), with the pins it needs on Python 3.11
   (:data:`PINS`: it imports ``pandarallel``, which fails on pandas 3);
2. builds the week's trips of two datasets with odcore — a synthetic city (``python -m odcore synth``) and a Cabspotting
   week (2008-05-19 to 05-26, ``/work/shared/data/cabspotting_sf``, when present) — on the lab's 1.3 km² squares;
3. hands dp-mobility-report the same trips, one per (person, pair) of the week — the contributions the lab counts, so
   both tools estimate the same true flows — with the lab's squares as its tessellation (``benchmarks/dpmr_side.py``,
   run by the other environment's Python: OD flows only, the whole ε on them, ``max_trips_per_user`` 5 as in its
   published evaluation);
4. releases the same week with the settings the lab's designer chooses for ε per person (one week, δ 10⁻⁶), and
5. scores both releases against the true flows with :func:`odcore.report.utility_measures.compare_flows` (SMAPE,
   Jensen–Shannon, top-N coverage on the shares over the union of pairs) and again with dp-mobility-report's own
   functions, which must agree.

Rows: one per (data, ε, tool) and measure, the mean over ``--seeds`` seeds. docs/dpmr_benchmark.md holds the record.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from odcore.cli import build_parser
from odcore.cli.common import od_from_args
from odcore.constants import UNIQUE_TRIPS, WEEK
from odcore.paths import REPO_ROOT, SHARED_DATA_DIR
from odcore.privacy.design import Goal, design_report
from odcore.privacy.release import Mode, ReleaseConfig, release_with_report
from odcore.report.utility_measures import compare_flows

DPMR_VERSION = "0.2.11"
PINS = (f"dp-mobility-report=={DPMR_VERSION}", "pandas==2.0.3", "numpy<2", "geopandas<0.15", "shapely<2.1",
        "opencv-python<4.9", "matplotlib<3.9", "scipy<1.12", "scikit-learn<1.4", "pandarallel==1.6.5", "pyproj<3.7")
VENV = Path(os.environ.get("ODLAB_DPMR_VENV") or Path(tempfile.gettempdir()) / "odlab-dpmr-venv")
SIDE = Path(__file__).resolve().parent / "dpmr_side.py"
EPSILONS = (1.0, 10.0)            # dp-mobility-report's published OD-flow evaluation points
DPMR_CAP = 5                      # its max_trips_per_user in that evaluation
TOP_N = (10, 50, 100)
DELTA = 1e-6
CAB_WEEK = ("2008-05-19", "2008-05-26")


def dpmr_python() -> Path:
    """The Python of dp-mobility-report's environment, created and installed when missing; RuntimeError with pip's
    last lines when it cannot be installed."""
    py = VENV / "bin" / "python"
    ok = py.exists() and subprocess.run([str(py), "-c", "import dp_mobility_report"], capture_output=True,
                                        check=False).returncode == 0
    if ok:
        return py
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    r = subprocess.run([str(py), "-m", "pip", "install", "-q", *PINS], capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise RuntimeError(f"dp-mobility-report {DPMR_VERSION} did not install into {VENV}: "
                           + " | ".join(r.stderr.strip().splitlines()[-5:]))
    return py


def dpmr_versions(py: Path) -> dict:
    code = ("import json, importlib.metadata as m; print(json.dumps({k: m.version(k) for k in "
            "('dp-mobility-report', 'pandas', 'numpy', 'diffprivlib', 'geopandas')}))")
    return json.loads(subprocess.run([str(py), "-c", code], capture_output=True, text=True, check=True).stdout)


def datasets(quick: bool, work: Path) -> list[tuple[str, list[str]]]:
    """(name, loader flags) of the two datasets; the synthetic city is written by ``python -m odcore synth``."""
    users = 5_000 if quick else 25_000
    city = work / f"city_{users}.parquet"
    if not city.exists():
        subprocess.run([sys.executable, "-m", "odcore", "synth", "--users", str(users), "--out", str(city)],
                       cwd=REPO_ROOT, check=True, capture_output=True)
    out = [(f"synthetic city ({users:,} people)", ["--input", str(city)])]
    cabs = SHARED_DATA_DIR / "cabspotting_sf"
    if cabs.is_dir():
        out.append(("Cabspotting week", ["--input", str(cabs), "--start", CAB_WEEK[0], "--end", CAB_WEEK[1]]))
    return out


def build(flags: list[str]):
    """ODData of the flags, through the command line's own loader (its defaults: auto box, 1.3 km² squares)."""
    args = build_parser().parse_args(["design", *flags])
    return od_from_args(args)[1]


def export_for_dpmr(od, week: int, folder: Path) -> pd.DataFrame:
    """trips.csv (two rows per (person, pair) of the week: start at the origin's centre, end at the destination's),
    tessellation.geojson (the squares holding any hourly location) and truth.csv (distinct people per pair)."""
    wp = od.week_pairs(week)
    cent = od.centroids().set_index("cell")
    n = len(wp)
    t0 = pd.Timestamp(od.week_starts[week]) + pd.Timedelta(hours=8)
    tid = np.arange(n)
    o, d = wp["origin"].to_numpy(np.int64), wp["destination"].to_numpy(np.int64)
    start = pd.DataFrame({"uid": wp["user"].astype(str).to_numpy(), "tid": tid,
                          "datetime": t0 + pd.to_timedelta(tid % 3600, unit="s"),
                          "lat": cent["lat"].reindex(o).to_numpy(), "lng": cent["lon"].reindex(o).to_numpy(),
                          "tile_id": o.astype(str)})
    end = start.assign(datetime=start["datetime"] + pd.Timedelta(minutes=30), lat=cent["lat"].reindex(d).to_numpy(),
                       lng=cent["lon"].reindex(d).to_numpy(), tile_id=d.astype(str))
    pd.concat([start, end]).sort_values(["tid", "datetime"]).to_csv(folder / "trips.csv", index=False)
    tess = od.grid.polygons(od.cells)
    tess = tess.assign(tile_id=tess["cell"].astype(str))[["tile_id", "geometry"]]
    tess.to_file(folder / "tessellation.geojson", driver="GeoJSON")
    truth = wp.groupby(["origin", "destination"], as_index=False).size().rename(columns={"size": "flow"})
    truth.to_csv(folder / "truth.csv", index=False)
    return truth


def lab_release(od, week: int, epsilon: float, seed: int, max_pairs: int | None) -> tuple[dict, pd.DataFrame]:
    """The designer's settings for ε per person and week (δ 10⁻⁶ over the one week released) and the week released
    with them; the published flows (origin, destination, flow)."""
    wp = od.week_pairs(week)
    uw = od.user_week
    trips = uw.loc[uw[WEEK] == week, UNIQUE_TRIPS].to_numpy()
    rep = design_report(Goal(kind="week", epsilon=epsilon, delta=DELTA, weeks=1), wp, trips, week=week,
                        max_pairs=max_pairs, rng=seed)
    cfg = ReleaseConfig(epsilon=rep["epsilon"], threshold=rep["threshold"], mode=Mode.USER_LEVEL,
                        max_pairs=rep["max_pairs"])
    t = release_with_report(wp.assign(week=week), cfg, rng=seed).table
    pub = t.loc[t["released"].to_numpy(bool), ["origin", "destination", "noisy_count"]]
    return rep, pub.rename(columns={"noisy_count": "flow"})


def lab_public_domain(od, week: int, epsilon: float, seed: int, max_pairs: int = DPMR_CAP) -> pd.DataFrame:
    """The lab's release with dp-mobility-report's assumption that every pair of the zones is public: noise
    Laplace(m/ε) on every pair of the squares holding data, observed or not, threshold 1 (no partition selection, so
    no δ: pure ε per person and week, as dp-mobility-report's). The published flows."""
    cells = np.asarray(od.cells, dtype=np.int64)
    o, d = np.meshgrid(cells, cells, indexing="ij")
    keep = o != d   # a trip goes to another square: no pair from a square to itself exists in either table
    domain = pd.DataFrame({"week": week, "origin": o[keep], "destination": d[keep]})
    cfg = ReleaseConfig(epsilon=epsilon, threshold=1, mode=Mode.USER_LEVEL, max_pairs=max_pairs)
    t = release_with_report(od.week_pairs(week).assign(week=week), cfg, rng=seed, domain=domain).table
    pub = t.loc[t["released"].to_numpy(bool), ["origin", "destination", "noisy_count"]]
    return pub.rename(columns={"noisy_count": "flow"})


def scores(truth: pd.DataFrame, flows: pd.DataFrame) -> dict:
    if not len(flows):
        return {"smape": 2.0, "jsd": math.sqrt(math.log(2)), "pairs": 0, **{f"cov{n}": 0.0 for n in TOP_N}}
    m = compare_flows(truth, flows, base_value="flow", other_value="flow", top_n=TOP_N)
    return {"smape": m["smape"], "jsd": m["jsd"], "pairs": m["pairs_other"],
            **{f"cov{n}": m["top_n"][n]["coverage"] for n in TOP_N}}


def run(quick: bool, seeds: int | None = None, log=print) -> list[dict]:
    """The table's rows (the benchmarks' row format); ``seeds`` per setting (default 1 quick, 5 full)."""
    n_seeds = seeds or (1 if quick else 5)
    py = dpmr_python()
    versions = dpmr_versions(py)
    rows: list[dict] = []
    work = Path(tempfile.mkdtemp(prefix="odlab-dpmr-"))
    for name, flags in datasets(quick, work):
        t0 = time.perf_counter()
        od = build(flags)
        week = int(od.pairs[WEEK].min())
        folder = work / name.split()[0]
        folder.mkdir(exist_ok=True)
        truth = export_for_dpmr(od, week, folder)
        log(f"{name}: {len(od.week_pairs(week)):,} (person, pair) trips, {truth.shape[0]:,} pairs, "
            f"{len(od.cells):,} squares ({time.perf_counter() - t0:.0f} s)")
        cmd = [str(py), str(SIDE), "--dir", str(folder), "--epsilons", ",".join(f"{e:g}" for e in EPSILONS),
               "--seeds", ",".join(str(s) for s in range(n_seeds)), "--cap", str(DPMR_CAP)]
        r = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if r.returncode != 0:
            raise RuntimeError(f"dp-mobility-report failed on {name}: {r.stderr.strip().splitlines()[-3:]}")
        side_seconds = json.loads(r.stdout.strip().splitlines()[-1])["seconds"]
        results: dict[tuple, list[dict]] = {}
        settings: dict[tuple, str] = {}
        for eps in EPSILONS:
            for s in range(n_seeds):
                f = folder / f"dpmr_flows_eps{eps:g}_seed{s}.csv"
                flows = pd.read_csv(f)
                key = (eps, f"dp-mobility-report {versions['dp-mobility-report']}")
                settings[key] = (f"ε {eps:g} on OD flows, Laplace({DPMR_CAP}/ε) on all {len(od.cells) ** 2:,} "
                                 f"square pairs, ≤ {DPMR_CAP} trips a person, flows > 0 kept")
                results.setdefault(key, []).append({**scores(truth, flows), "file": f.name})
                for m_fixed, label in ((None, "lab, designer"), (DPMR_CAP, f"lab, designer at m = {DPMR_CAP}")):
                    rep, lab = lab_release(od, week, eps, s, m_fixed)
                    fl = folder / f"lab_flows_eps{eps:g}_m{rep['max_pairs']}_seed{s}.csv"
                    lab.to_csv(fl, index=False)
                    key = (eps, label)
                    settings[key] = (f"m = {rep['max_pairs']}, noise scale {rep['noise_scale']:.3g}, threshold "
                                     f"{rep['threshold']} (ε per person-week {rep['epsilon_user_week']:.3g}, "
                                     f"δ {rep['delta_user_week']:.2g})")
                    results.setdefault(key, []).append({**scores(truth, lab), "file": fl.name})
                lab = lab_public_domain(od, week, eps, s)
                fl = folder / f"lab_flows_eps{eps:g}_public_domain_seed{s}.csv"
                lab.to_csv(fl, index=False)
                key = (eps, f"lab, every square pair public, m = {DPMR_CAP}")
                settings[key] = (f"noise scale {DPMR_CAP / eps:.3g} on all {len(od.cells) * (len(od.cells) - 1):,} "
                                 "pairs of distinct squares, threshold 1 (pure ε per person-week, δ 0)")
                results.setdefault(key, []).append({**scores(truth, lab), "file": fl.name})
        r = subprocess.run([str(py), str(SIDE), "--dir", str(folder), "--score", "--top-n",
                            ",".join(str(n) for n in TOP_N)], capture_output=True, text=True, check=True)
        theirs = json.loads(r.stdout.strip().splitlines()[-1])["scores"]
        for (eps, tool), runs in results.items():
            both = [(x, theirs[x["file"]]) for x in runs if theirs[x["file"]]["smape"] is not None]
            agree = max((max(abs(x["smape"] - t["smape"]), abs(x["jsd"] - t["jsd"])) for x, t in both), default=None)
            cov = max((max(abs(x[f"cov{n}"] - t["coverage"][str(n)]) for n in TOP_N) for x, t in both), default=None)
            note = (f"{settings[(eps, tool)]}; mean of {len(runs)} seeds; "
                    + (f"SMAPE and JSD equal dp-mobility-report's code within {agree:.0e}, top-N coverage within "
                       f"{cov:.2f} (ties at the N-th flow broken otherwise)" if agree is not None else
                       "nothing published (SMAPE 2, JSD √ln 2 by the definition's limit)"))
            case = f"{name}, ε {eps:g}, {tool}"
            for metric in ("pairs", "smape", "jsd", *[f"cov{n}" for n in TOP_N]):
                v = [x[metric] for x in runs]
                rows.append({"case": case, "metric": metric, "value": float(np.mean(v)),
                             "sd": float(np.std(v)), "unit": "pairs" if metric == "pairs" else "",
                             "baseline": None, "ratio": None, "note": note})
        rows.append({"case": f"{name}, dp-mobility-report", "metric": "seconds per report",
                     "value": float(np.mean(list(side_seconds.values()))), "unit": "s", "baseline": None,
                     "ratio": None, "note": json.dumps(versions)})
    return rows


def table(rows: list[dict]) -> str:
    """The rows as the Markdown table of the record."""
    by: dict[str, dict] = {}
    for r in rows:
        if r["metric"] == "seconds per report":
            continue
        by.setdefault(r["case"], {})[r["metric"]] = r
    lines = ["| data, ε, tool | pairs published | SMAPE | JSD | top-10 | top-50 | top-100 | settings |",
             "|---|---:|---:|---:|---:|---:|---:|---|"]
    for case, m in by.items():
        def f(k: str, d: int = 3, m=m) -> str:
            x = m[k]
            return f"{x['value']:.{d}f} ± {x['sd']:.{d}f}" if x["sd"] else f"{x['value']:.{d}f}"
        lines.append(f"| {case} | {m['pairs']['value']:,.0f} | {f('smape')} | {f('jsd')} | {f('cov10', 2)} | "
                     f"{f('cov50', 2)} | {f('cov100', 2)} | {m['smape']['note']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.bench_dpmr", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="a 5,000-person city and one seed")
    p.add_argument("--seeds", type=int, default=None, help="seeds per setting (default 1 quick, 5 full)")
    p.add_argument("--json", default=None, help="also write the rows to this JSON file")
    a = p.parse_args(argv)
    t0 = time.perf_counter()
    rows = run(a.quick, a.seeds, log=lambda s: print(s, file=sys.stderr, flush=True))
    print(table(rows))
    for r in rows:
        if r["metric"] == "seconds per report":
            print(f"\n{r['case']}: {r['value']:.1f} s per report; {r['note']}")
    print(f"\ntotal {time.perf_counter() - t0:.0f} s, {os.cpu_count()} cores")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
