"""Traces -> weekly unique OD counts: ``odcore.od.trips.build_od`` against a straightforward pandas pipeline.

Input: synthetic GPS-like traces (10 million rows; 1 million with ``--quick``): 20,000 users with a handful of
personal places each, records at random times over two weeks (several per hour), 30 m of GPS noise. Both
pipelines use the same grid (``SquareGrid.fit``, 1.3 km²) and time zone (America/Los_Angeles) and must give the
same counts table (checked). Wall time and peak traced memory (``tracemalloc``, which sees numpy and pandas
buffers) are measured in the same run; memory is also reported relative to the input's in-memory size.
Also, when ``../shared/data`` is present and not quick: the real Cabspotting data (534 cabs, 10 M fixes) through
``load_traces`` + ``build_od``.
"""

from __future__ import annotations

import gc
import time
import tracemalloc

import numpy as np
import pandas as pd

TZ = "America/Los_Angeles"


def make_traces(n_rows: int, n_users: int = 20_000, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    per = n_rows // n_users
    n = per * n_users
    n_places = 8
    centre = np.array([37.77, -122.42])
    places = centre + rng.normal(0, 1, (n_users, n_places, 2)) * np.array([0.06, 0.075])
    pref = rng.dirichlet(np.full(n_places, 0.6), n_users)             # a few favourite places per user
    user = np.repeat(np.arange(n_users, dtype=np.int64), per)
    cum = np.cumsum(pref, axis=1)[user]
    k = (rng.random(n)[:, None] > cum).sum(axis=1).clip(0, n_places - 1)
    xy = places[user, k] + rng.normal(0, 0.0003, (n, 2))
    t0 = pd.Timestamp("2024-03-04", tz=TZ).tz_convert("UTC").value // 10**9
    t = t0 + rng.integers(0, 14 * 86400, n)
    order = np.lexsort((t, user))
    return pd.DataFrame({
        "user": user[order],
        "time": pd.DatetimeIndex((t[order] * 10**9).view("datetime64[ns]")).tz_localize("UTC"),
        "lat": xy[order, 0],
        "lon": xy[order, 1],
    })


def pandas_baseline(df: pd.DataFrame, grid) -> pd.DataFrame:
    """The obvious pipeline: pyproj on every point, then pandas groupby sizes, sort, drop_duplicates, shift,
    nunique (same grid as ``build_od``)."""
    import pyproj

    x, y = pyproj.Transformer.from_crs("EPSG:4326", grid.crs, always_xy=True).transform(
        df["lon"].to_numpy(), df["lat"].to_numpy())
    col = np.floor((x - grid.x0) / grid.side_m).astype(np.int64)
    row = np.floor((y - grid.y0) / grid.side_m).astype(np.int64)
    d = df.assign(cell=row * grid.n_cols + col, hour=df["time"].dt.floor("h"))
    n = d.groupby(["user", "hour", "cell"]).size().reset_index(name="n")
    n = n.sort_values(["user", "hour", "n", "cell"], ascending=[True, True, False, True])
    win = n.drop_duplicates(["user", "hour"]).sort_values(["user", "hour"]).reset_index(drop=True)
    nxt = win.shift(-1)
    is_trip = (nxt["user"] == win["user"]) & (nxt["hour"] - win["hour"] == pd.Timedelta(hours=1)) \
        & (nxt["cell"] != win["cell"])
    local = win.loc[is_trip, "hour"].dt.tz_convert(TZ)
    monday = (local.dt.tz_localize(None).dt.normalize() - pd.to_timedelta(local.dt.weekday, unit="D"))
    trips = pd.DataFrame({"monday": monday.to_numpy(), "user": win.loc[is_trip, "user"].to_numpy(),
                          "origin": win.loc[is_trip, "cell"].to_numpy(),
                          "destination": nxt.loc[is_trip, "cell"].astype("int64").to_numpy()})
    uniq = trips.drop_duplicates()
    counts = uniq.groupby(["monday", "origin", "destination"])["user"].nunique().reset_index(name="count")
    return counts


def _timed(fn, *a):
    gc.collect()
    t = time.perf_counter()
    out = fn(*a)
    return out, time.perf_counter() - t


def _peak(fn, *a) -> float:
    gc.collect()
    tracemalloc.start()
    try:
        fn(*a)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak


def run(quick: bool) -> list[dict]:
    from odcore.od.trips import ODConfig, build_od
    from odcore.space.grid import SquareGrid

    n_rows = 1_000_000 if quick else 10_000_000
    df = make_traces(n_rows)
    in_bytes = int(df.memory_usage(deep=True).sum())
    grid = SquareGrid.fit(df["lat"].to_numpy(), df["lon"].to_numpy(), 1.3)
    cfg = ODConfig(cell_km2=1.3, tz=TZ)
    case = f"{len(df) / 1e6:g}M rows, 20k users"

    od, t_ours = _timed(build_od, df, cfg)   # includes fitting the grid
    base, t_base = _timed(pandas_baseline, df, grid)
    # same answer
    od2 = build_od(df, cfg, grid=grid)
    ours = od2.counts.assign(monday=pd.to_datetime(np.array(od2.week_starts)[od2.counts["week"].to_numpy()]))
    a = ours[["monday", "origin", "destination", "count"]].sort_values(["monday", "origin", "destination"])
    b = base.sort_values(["monday", "origin", "destination"])
    same = bool(np.array_equal(a.to_numpy(dtype=np.int64, na_value=0)[:, 1:], b.to_numpy(dtype=np.int64)[:, 1:])
                and len(a) == len(b))
    if not same:
        raise AssertionError("build_od and the pandas baseline disagree on the weekly counts")
    del od2, ours, a, b
    p_ours = _peak(build_od, df, cfg)
    rows = [
        {"case": case, "metric": "build_od wall time", "value": t_ours, "unit": "s", "baseline": "pandas groupby",
         "ratio": t_base / t_ours, "note": f"pandas baseline {t_base:.2f} s; ratio = speed-up; counts identical"},
        {"case": case, "metric": "pandas baseline wall time", "value": t_base, "unit": "s", "baseline": None,
         "ratio": None, "note": "groupby size / sort / drop_duplicates / shift / nunique"},
        {"case": case, "metric": "build_od peak memory", "value": p_ours / 2**20, "unit": "MiB",
         "baseline": "input in-memory size", "ratio": p_ours / in_bytes,
         "note": f"input {in_bytes / 2**20:.0f} MiB (tracemalloc peak)"},
        {"case": case, "metric": "throughput", "value": len(df) / t_ours / 1e6, "unit": "M rows/s",
         "baseline": None, "ratio": None, "note": f"{od.summary()['od_pairs']} OD pair-weeks"},
    ]
    if not quick:
        p_base = _peak(pandas_baseline, df, grid)
        rows.append({"case": case, "metric": "pandas baseline peak memory", "value": p_base / 2**20, "unit": "MiB",
                     "baseline": "input in-memory size", "ratio": p_base / in_bytes, "note": "tracemalloc peak"})
        del df
        gc.collect()
        rows += _cabspotting()
    return rows


def _cabspotting() -> list[dict]:
    from odcore.data.traces import load_traces
    from odcore.od.trips import ODConfig, build_od
    from odcore.paths import SHARED_DATA_DIR

    src = SHARED_DATA_DIR / "cabspotting_sf"
    if not src.is_dir():
        return []
    tr, t_load = _timed(lambda: load_traces(src, format="cabspotting", bbox="auto"))
    od, t_od = _timed(build_od, tr.df, ODConfig(tz=TZ))
    s = od.summary()
    return [
        {"case": "Cabspotting 534 cabs, 10.0M fixes", "metric": "load_traces", "value": t_load, "unit": "s",
         "baseline": None, "ratio": None, "note": f"{tr.report.rows_dropped}"},
        {"case": "Cabspotting 534 cabs, 10.0M fixes", "metric": "build_od", "value": t_od, "unit": "s",
         "baseline": None, "ratio": None,
         "note": f"{s['trips']} trips, {s['od_pairs_over_threshold']} pair-weeks >= 100"},
    ]
