"""dp-mobility-report's side of ``benchmarks/bench_dpmr.py``: run inside dp-mobility-report's own virtual environment
(pandas 2.0, numpy 1.x), never inside the lab's; imports nothing of odcore.

Reads ``trips.csv`` (uid, tid, datetime, lat, lng, tile_id: two rows per trip, its start and its end) and
``tessellation.geojson`` (tile_id, geometry) from ``--dir`` and, for each ε and seed, runs ``DpMobilityReport`` with
the OD flows analysis only (the whole budget on it), user-level privacy and ``max_trips_per_user`` = ``--cap``; writes
``dpmr_flows_eps{ε}_seed{s}.csv`` (origin, destination, flow). With ``--score``, scores every ``*_flows*.csv`` of the
folder against ``truth.csv`` with dp-mobility-report's own measure functions (its OD-flow code path: union of pairs,
shares, ``symmetric_mape``, ``scipy.spatial.distance.jensenshannon``, ``top_n_coverage``) into ``dpmr_scores.json``.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd
from dp_mobility_report import DpMobilityReport
from dp_mobility_report import constants as const
from dp_mobility_report.benchmark.similarity_measures import symmetric_mape, top_n_coverage
from scipy.spatial import distance


def run(folder: Path, epsilons: list[float], seeds: list[int], cap: int) -> dict:
    trips = pd.read_csv(folder / "trips.csv", parse_dates=["datetime"], dtype={"tile_id": str})
    tess = gpd.read_file(folder / "tessellation.geojson")
    tess["tile_id"] = tess["tile_id"].astype(str)
    timing = {}
    for eps in epsilons:
        for seed in seeds:
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                rep = DpMobilityReport(trips, tess, privacy_budget=eps, user_privacy=True, max_trips_per_user=cap,
                                       analysis_selection=[const.OD_FLOWS], disable_progress_bar=True,
                                       seed_sampling=seed + 1)   # it must be > 0
                np.random.seed(seed)  # noqa: NPY002 - diffprivlib draws its noise from numpy's global generator
                flows = rep.report[const.OD_FLOWS].data
            flows[["origin", "destination", "flow"]].to_csv(folder / f"dpmr_flows_eps{eps:g}_seed{seed}.csv",
                                                             index=False)
            timing[f"{eps:g}/{seed}"] = time.perf_counter() - t0
    return timing


def score(folder: Path, top_n: list[int]) -> dict:
    ids = np.unique(gpd.read_file(folder / "tessellation.geojson")["tile_id"].astype(str))
    pos = {t: i for i, t in enumerate(ids)}

    def grid_index(df: pd.DataFrame) -> pd.DataFrame:
        # the row labels dp-mobility-report's flows carry: the pair's place in np.meshgrid(ids, ids) (get_od_flows),
        # which its top_n_coverage compares between the two reports
        df.index = [pos[d] * len(ids) + pos[o] for o, d in zip(df["origin"], df["destination"], strict=True)]
        return df

    truth = grid_index(pd.read_csv(folder / "truth.csv", dtype={"origin": str, "destination": str}))
    out = {}
    for f in sorted(folder.glob("*_flows_*.csv")):
        alt = grid_index(pd.read_csv(f, dtype={"origin": str, "destination": str}))
        if not len(alt) or alt["flow"].sum() <= 0:   # nothing published: its shares are undefined there
            out[f.name] = {"smape": None, "jsd": None, "coverage": {}, "pairs": 0}
            continue
        # dp-mobility-report's OD-flow path (benchmark/similarity_measures.py, compute_similarity_measures)
        combos = pd.concat([alt[["origin", "destination"]], truth[["origin", "destination"]]]).drop_duplicates()
        combos["flow"] = 0
        a = (pd.concat([alt, combos]).drop_duplicates(["origin", "destination"], keep="first")
             .sort_values(["origin", "destination"]).flow)
        b = (pd.concat([truth, combos]).drop_duplicates(["origin", "destination"], keep="first")
             .sort_values(["origin", "destination"]).flow)
        ra, rb = a / a.sum(), b / b.sum()
        out[f.name] = {
            "smape": float(symmetric_mape(alternative=ra.to_numpy(), base=rb.to_numpy())),
            "jsd": float(distance.jensenshannon(p=ra.to_numpy(), q=rb.to_numpy())),
            "coverage": {n: float(top_n_coverage(list(b.sort_values(ascending=False).iloc[0:n].index),
                                                 list(a.sort_values(ascending=False).iloc[0:n].index)))
                         for n in top_n},
            "pairs": int((a > 0).sum()),
        }
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--dir", required=True)
    p.add_argument("--epsilons", default="")
    p.add_argument("--seeds", default="0")
    p.add_argument("--cap", type=int, default=5)
    p.add_argument("--score", action="store_true")
    p.add_argument("--top-n", default="10,50,100")
    a = p.parse_args()
    folder = Path(a.dir)
    result: dict = {}
    if a.epsilons:
        result["seconds"] = run(folder, [float(x) for x in a.epsilons.split(",")],
                                [int(x) for x in a.seeds.split(",")], a.cap)
    if a.score:
        result["scores"] = score(folder, [int(x) for x in a.top_n.split(",")])
        (folder / "dpmr_scores.json").write_text(json.dumps(result["scores"], indent=1))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
