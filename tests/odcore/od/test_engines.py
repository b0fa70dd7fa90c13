"""The three engines (memory, DuckDB, Spark) give identical weekly OD tables and per-user figures.

Spark runs in one local[2] session for the whole test session, on tiny inputs; the bundled city through Spark is
marked slow (minutes on two cores).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from odcore.data.traces import load_traces
from odcore.errors import AggregatesOnlyError, ParameterError, TraceFormatError
from odcore.od.engines import ENGINES, build_od, file_source
from odcore.od.kernel import Bounds, fit_grid_bounds, hour_slots, week_of_slots
from odcore.od.trips import ODConfig
from odcore.od.trips import build_od as build_memory
from odcore.paths import SAMPLE_DATA_DIR
from odcore.space.grid import SquareGrid

# A line of points 2 km apart in San Francisco (distinct 1.3 km² cells).
P_LAT = 37.70 + np.arange(12) * 0.018
P_LON = np.full(12, -122.45)
GRID = SquareGrid.fit(P_LAT, P_LON, 1.3)


def _traces(rows) -> pd.DataFrame:
    """rows: (user, time, point index); times tz-aware or naive UTC."""
    users, times, idx = zip(*rows, strict=True)
    ts = pd.DatetimeIndex([pd.Timestamp(t) if pd.Timestamp(t).tzinfo else pd.Timestamp(t, tz="UTC") for t in times])
    return pd.DataFrame({"user": list(users), "time": ts.tz_convert("UTC"), "lat": P_LAT[list(idx)],
                         "lon": P_LON[list(idx)]})


def _edge_cases() -> dict[str, tuple[pd.DataFrame, str]]:
    h = pd.Timedelta(hours=1)
    t = pd.Timestamp("2024-01-08 10:10", tz="UTC")
    ties = [("a", t, 3), ("a", t + pd.Timedelta(minutes=5), 1),                 # tie -> lower cell (1)
            ("a", t + h, 5), ("a", t + h, 5), ("a", t + h + pd.Timedelta(minutes=1), 2),  # winner 5 (2 vs 1)
            ("a", t + 2 * h, 5), ("a", t + 3 * h, 7),                              # same cell: no trip; then 5->7
            ("b", t, 1), ("b", t + 2 * h, 4),                                      # gap of an hour: no trip
            ("c", t, 2), ("c", t + h, 3), ("c", t + 2 * h, 2), ("c", t + 3 * h, 3)]  # repeated pair: unique 2
    sun = pd.Timestamp("2024-01-14 23:30", tz="America/Los_Angeles")            # Sunday night -> Monday
    weeks = [("a", sun, 0), ("a", sun + h, 1), ("a", sun + 2 * h, 2), ("b", sun + h, 0), ("b", sun + 2 * h, 3),
             ("b", sun + pd.Timedelta(days=7), 4), ("b", sun + pd.Timedelta(days=7) + h, 5)]
    fall = pd.Timestamp("2024-11-03 07:30", tz="UTC")                            # LA fall back at 09:00 UTC
    spring = pd.Timestamp("2024-03-10 09:30", tz="UTC")                          # LA spring forward at 10:00 UTC
    dst = [("a", fall + i * h, i % 3) for i in range(5)] + [("b", spring + i * h, (i * 2) % 5) for i in range(5)] \
        + [("c", fall + h, 6), ("c", fall + 2 * h, 7)]
    lh = pd.Timestamp("2024-04-06 14:10", tz="UTC")                              # Lord Howe: 30-minute DST change
    half = [("a", lh + i * pd.Timedelta(minutes=40), i % 4) for i in range(8)] + [("b", lh, 1), ("b", lh + h, 2)]
    one = [("solo", t + i * h, i % 3) for i in range(6)]
    return {"ties": (_traces(ties), "UTC"), "weeks": (_traces(weeks), "America/Los_Angeles"),
            "dst": (_traces(dst), "America/Los_Angeles"), "half_hour_dst": (_traces(half), "Australia/Lord_Howe"),
            "one_user": (_traces(one), "UTC")}


EDGE = _edge_cases()


@pytest.fixture(scope="session")
def spark():
    pytest.importorskip("pyspark")
    import shutil

    if shutil.which("java") is None:
        pytest.skip("Spark needs Java 17+ (.ci/run installs openjdk-17-jre-headless)")
    from odcore.od.engines.spark_engine import SMALL_JOB_JAVA_OPTIONS, spark_session

    s = spark_session("local[2]", "1g", shuffle_partitions=2, java_options=SMALL_JOB_JAVA_OPTIONS)
    yield s
    s.stop()


def assert_same(a, b, pairs: bool = True) -> None:
    """Identical OD tables, per-user-week trips / unique trips, (pairs), weeks and used cells."""
    assert a.week_starts == b.week_starts
    pd.testing.assert_frame_equal(a.counts, b.counts)
    pd.testing.assert_frame_equal(a.user_week, b.user_week)
    if pairs:
        pd.testing.assert_frame_equal(a.pairs, b.pairs)
    np.testing.assert_array_equal(a.cells, b.cells)
    assert a.stats["user_hours"] == b.stats["user_hours"]


@pytest.mark.parametrize("case", sorted(EDGE))
def test_duckdb_matches_memory_on_edge_cases(case):
    df, tz = EDGE[case]
    m = build_memory(df, ODConfig(tz=tz), grid=GRID)
    d = build_od(df, ODConfig(tz=tz), grid=GRID, engine="duckdb")
    assert_same(m, d)
    assert len(m.counts) > 0


def test_edge_cases_have_the_expected_answers():
    """The fixtures test what they say (memory engine, checked by hand)."""
    m = build_memory(EDGE["ties"][0], ODConfig(), grid=GRID)
    uw = m.user_week.set_index("user")
    assert uw.loc["a", "trips"] == 2
    assert uw.loc["b", "trips"] == 0
    assert uw.loc["c", "unique_trips"] == 2
    cell = GRID.assign(P_LAT, P_LON)
    a = m.pairs[m.pairs["user"] == "a"]
    assert set(zip(a["origin"], a["destination"], strict=True)) == {(cell[1], cell[5]), (cell[5], cell[7])}
    w = build_memory(EDGE["weeks"][0], ODConfig(tz="America/Los_Angeles"), grid=GRID)
    assert w.week_starts == ["2024-01-08", "2024-01-15", "2024-01-22"]
    assert (w.pairs["week"] == 0).sum() == 1      # the Sunday 23:30 -> Monday 00:30 trip counts in week 0


def test_spark_matches_memory_on_edge_cases(spark):
    """One Spark job per time zone (cases of a zone side by side, users prefixed), plus the one-user case."""
    groups: dict[str, list[pd.DataFrame]] = {}
    for case, (df, tz) in sorted(EDGE.items()):
        key = "one_user" if case == "one_user" else tz
        groups.setdefault(key, []).append(df.assign(user=case + ":" + df["user"]))
    assert len(groups) == 4
    for key, parts in groups.items():
        tz = "UTC" if key == "one_user" else key
        df = pd.concat(parts, ignore_index=True)
        m = build_memory(df, ODConfig(tz=tz), grid=GRID)
        s = build_od(df, ODConfig(tz=tz), grid=GRID, engine="spark", spark=spark)
        assert_same(m, s)


def _random_city(n_users: int, seed: int) -> pd.DataFrame:
    """Random walks with many ties and repeats on a small grid, over two weeks, string user ids."""
    rng = np.random.default_rng(seed)
    rows = rng.integers(20, 60, n_users)
    user = np.repeat([f"u{i:03d}" for i in range(n_users)], rows)
    t0 = pd.Timestamp("2024-03-04", tz="UTC").value // 10**9
    t = t0 + rng.integers(0, 14 * 24 * 3600, rows.sum())
    p = rng.integers(0, 12, rows.sum())
    return pd.DataFrame({"user": user, "time": pd.to_datetime(t, unit="s", utc=True), "lat": P_LAT[p],
                         "lon": P_LON[p] + rng.normal(0, 0.002, p.size)})


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_duckdb_matches_memory_on_random_cities(seed):
    df = _random_city(150, seed)
    for tz in ("UTC", "Europe/Paris"):
        m = build_od(df, ODConfig(tz=tz), engine="memory")
        d = build_od(df, ODConfig(tz=tz), engine="duckdb", shard_rows=2_000)  # several user shards
        assert d.stats["shards"] > 1
        assert_same(m, d)


def test_all_engines_on_a_random_city_with_the_default_grid(spark):
    df = _random_city(60, 7)
    m, d, s = (build_od(df, ODConfig(tz="Europe/Paris"), engine=e, spark=spark) if e == "spark"
               else build_od(df, ODConfig(tz="Europe/Paris"), engine=e) for e in ENGINES)
    assert_same(m, d)
    assert_same(m, s)


def test_bundled_city_duckdb_identical():
    df = pd.read_parquet(SAMPLE_DATA_DIR / "synthetic_city.parquet")
    m = build_od(df, ODConfig(), engine="memory")
    d = build_od(df, ODConfig(), engine="duckdb")
    assert_same(m, d)
    assert m.counts["count"].max() >= 100


def test_bundled_city_other_grids_from_one_hour_index_match_duckdb(monkeypatch):
    """The dashboard's grid cell area control: one HourIndex of the traces serves every grid (and H3), and each
    grid's tables are those of the DuckDB engine, which groups the rows itself. Every sixth person of the city, with
    all their fixes, goes through the same code as the whole city."""
    from odcore.od.trips import HourIndex

    df = pd.read_parquet(SAMPLE_DATA_DIR / "synthetic_city.parquet")
    df = df[df["user"].isin(df["user"].unique()[::6])].reset_index(drop=True)
    hours = HourIndex.of(df, "UTC")
    for cfg in (ODConfig(cell_km2=0.8), ODConfig(cell_km2=2.4), ODConfig(zones="h3:7")):
        m = build_memory(df, cfg, hours=hours)
        assert_same(m, build_od(df, cfg, engine="duckdb"))
        np.testing.assert_array_equal(hours.cells(m.grid), m.grid.assign(hours.lat, hours.lon))
    with pytest.raises(ParameterError, match=r"tz='UTC'.*tz='Europe/Paris'"):
        build_memory(df, ODConfig(tz="Europe/Paris"), hours=hours)
    from odcore.od.kernel import grid_of_frame as _grid_of_frame

    grid = _grid_of_frame(df, ODConfig(cell_km2=1.1))
    big = HourIndex.of(df, "UTC")
    monkeypatch.setattr(HourIndex, "MEMO_MAX_ROWS", len(df) - 1)   # a large upload: nothing kept, the same cells
    np.testing.assert_array_equal(big.cells(grid), grid.assign(big.lat, big.lon))
    assert not big._memo


@pytest.mark.slow
def test_bundled_city_spark_identical(spark):
    df = pd.read_parquet(SAMPLE_DATA_DIR / "synthetic_city.parquet")
    assert_same(build_od(df, ODConfig(), engine="memory"), build_od(df, ODConfig(), engine="spark", spark=spark))


def _messy_file(tmp_path) -> tuple[str, pd.DataFrame]:
    """A Parquet file with duplicates, missing values, a far GPS glitch and rows outside a date range."""
    df = _random_city(40, 3)
    df = pd.concat([df, df.iloc[:25]], ignore_index=True)                    # 25 exact duplicates
    df.loc[3, "lat"] = np.nan
    df.loc[5, "time"] = pd.NaT
    df.loc[7, "lat"], df.loc[7, "lon"] = 40.0, -100.0                        # far away
    path = tmp_path / "messy.parquet"
    df.to_parquet(path, index=False)
    return str(path), df


def test_file_source_streams_like_the_loader(tmp_path, spark):
    """A Parquet file read by each engine itself: same filters, drops, grid and tables as load_traces + memory."""
    path, _ = _messy_file(tmp_path)
    opts = {"tz": "Europe/Paris", "bbox": "36.0,-123.0,39.0,-122.0", "start": "2024-03-05", "end": "2024-03-15"}
    tr = load_traces(path, **opts)
    src = file_source(path, **opts)
    cfg = ODConfig(tz="Europe/Paris")
    m = build_od(src, cfg, engine="memory")
    d = build_od(src, cfg, engine="duckdb")
    s = build_od(src, cfg, engine="spark", spark=spark)
    assert_same(m, build_od(tr, cfg, engine="memory"))
    assert_same(m, d)
    assert_same(m, s)
    want = dict(tr.report.rows_dropped)
    assert want["duplicate_row"] > 0
    assert want["missing_value"] == 2
    assert want["outside_bbox"] == 1
    for od in (d, s):
        got = {k: v for k, v in od.stats["rows_dropped"].items() if k != "outside_grid"}
        assert got == want, od.stats["engine"]


def _hours_city(kind: str, n_users: int = 120, seed: int = 5) -> pd.DataFrame:
    """Traces whose user-hours have one row each ("sparse"), a few with several rows, ties and exact duplicates
    ("mixed"), or mostly several ("dense"); over a week boundary, string user ids."""
    rng = np.random.default_rng(seed)
    rows = []
    t0 = pd.Timestamp("2024-03-10 12:00", tz="UTC")          # Sunday: the trips cross into the next week
    for u in range(n_users):
        hours = np.sort(rng.choice(48, 30, replace=False))
        for h in hours:
            base = t0 + pd.Timedelta(hours=int(h), minutes=int(rng.integers(0, 50)))
            rows.append((f"u{u}", base, int(rng.integers(0, 12))))
            extra = {"sparse": 0, "mixed": int(rng.random() < 0.1) * 3, "dense": 3}[kind]
            for i in range(extra):   # more rows in the same hour: ties, repeats of the first cell, duplicates
                rows.append((f"u{u}", base + pd.Timedelta(minutes=i + 1), int(rng.integers(0, 12)) if i else rows[-1][2]))
            if extra and rng.random() < 0.5:
                rows.append(rows[-1])                          # an exact duplicate row
    return _traces(rows)


@pytest.mark.parametrize("kind", ["sparse", "mixed", "dense", "dense distinct", "dense distinct shuffled"])
def test_duckdb_stage_b_paths_match_memory_on_files(tmp_path, kind):
    """DuckDB's per-shard paths (one window over the rows when every user-hour has one row; otherwise the hour
    aggregate, with duplicate removal and per-cell counts for the hours with several rows or for all rows; rows
    counted by user, hour and cell when their order proves that none is a duplicate) give the memory engine's
    tables and duplicate count, over several user shards."""
    df = _hours_city(kind.split()[0])
    if "distinct" in kind:
        df = df.drop_duplicates(ignore_index=True)
    if "shuffled" in kind:   # the same rows in another order: the order proves nothing
        df = df.sample(frac=1.0, random_state=3, ignore_index=True)
    path = tmp_path / f"{kind}.parquet"
    df.to_parquet(path, index=False)
    cfg = ODConfig(tz="Europe/Paris")
    src = file_source(str(path), tz="Europe/Paris")
    m = build_od(src, cfg, grid=GRID, engine="memory")
    d = build_od(src, cfg, grid=GRID, engine="duckdb", shard_rows=1_500)
    assert d.stats["shards"] > 1
    assert_same(m, d)
    dup = m.stats["rows_dropped"].get("duplicate_row", 0)
    assert d.stats["rows_dropped"].get("duplicate_row", 0) == dup
    assert (dup > 0) == (kind in ("mixed", "dense"))
    assert d.stats["rows_used"] == m.stats["rows_used"]
    taken = {k for k, v in d.stats["shard_paths"].items() if v}
    assert taken == {"sparse": {"one row per user-hour"}, "mixed": {"several-row hours apart"},
                     "dense": {"all rows deduplicated"},
                     "dense distinct": {"rows counted by user, hour and cell"},
                     "dense distinct shuffled": {"all rows deduplicated"}}[kind]


def test_duckdb_big_batches_keep_each_user_in_one_shard(tmp_path):
    """Batches big enough for DuckDB to scan them on both threads (and so return rows in another order), on two
    Python threads, split over several user shards: every user's rows still land in one shard (a user split across
    shards would be counted twice)."""
    rng = np.random.default_rng(11)
    n_users, per_user = 6_000, 100
    user = np.repeat(np.arange(n_users), per_user)
    t0 = pd.Timestamp("2024-03-04", tz="UTC").value // 10**9
    t = t0 + np.sort(rng.integers(0, 7 * 24, (n_users, per_user)), axis=1).ravel() * 3600 + rng.integers(0, 3000,
                                                                                                          user.size)
    p = rng.integers(0, 12, user.size)
    df = pd.DataFrame({"user": user, "time": pd.to_datetime(t, unit="s", utc=True), "lat": P_LAT[p],
                       "lon": P_LON[p]})
    path = tmp_path / "big.parquet"
    df.to_parquet(path, index=False)
    src = file_source(str(path))
    m = build_od(src, ODConfig(), grid=GRID, engine="memory", keep_pairs=False)
    d = build_od(src, ODConfig(), grid=GRID, engine="duckdb", keep_pairs=False, shard_rows=150_000,
                 batch_rows=300_000)
    assert d.stats["shards"] == 4
    assert len(d.user_week) == len(m.user_week) == n_users
    assert_same(m, d, pairs=False)


@pytest.mark.parametrize(("shard_rows", "workers"), [(300, 1), (300, 2), (300, 3), (10**9, None)])
def test_memory_engine_streams_files_in_user_shards(tmp_path, shard_rows, workers):
    """The memory engine on files (sharded by a hash of the user, shards run on 1-3 threads) equals the loader +
    build_od; text user ids."""
    path, _ = _messy_file(tmp_path)
    opts = {"tz": "Europe/Paris", "bbox": "36.0,-123.0,39.0,-122.0"}
    cfg = ODConfig(tz="Europe/Paris")
    m = build_od(file_source(path, **opts), cfg, engine="memory", shard_rows=shard_rows, workers=workers)
    assert (m.stats["shards"] > 2) == (shard_rows == 300)
    ref = build_od(load_traces(path, **opts), cfg, engine="memory")
    assert_same(m, ref)
    assert m.stats["rows_dropped"]["duplicate_row"] == ref.stats.get("rows_dropped", {}).get(
        "duplicate_row", load_traces(path, **opts).report.rows_dropped["duplicate_row"])


@pytest.mark.parametrize(("shard_rows", "batch_rows"), [(300, 50), (10**9, 10**6)])
def test_memory_engine_on_a_file_grouped_by_user_reads_it_in_runs(tmp_path, shard_rows, batch_rows):
    """A file whose users each come in one run of rows (duplicates inside a run, missing values, a glitch, rows
    outside the box) is cut into chunks of whole users: the loader's tables and drops; a user whose rows come back
    in a later batch sends the file to the user shards, with the same tables."""
    df = _random_city(40, 5)
    dup = df.iloc[[10, 11, 12]]
    df = pd.concat([df.iloc[:13], dup, df.iloc[13:]], ignore_index=True)     # 3 exact duplicates in u000's run
    df.loc[3, "lat"] = np.nan
    df.loc[60, "user"] = None
    df.loc[70, "lat"], df.loc[70, "lon"] = 40.0, -100.0
    path = tmp_path / "grouped.parquet"
    df.to_parquet(path, index=False, row_group_size=70)
    opts = {"tz": "Europe/Paris", "bbox": "36.0,-123.0,39.0,-122.0"}
    cfg = ODConfig(tz="Europe/Paris")
    m = build_od(file_source(str(path), **opts), cfg, engine="memory", shard_rows=shard_rows, batch_rows=batch_rows)
    assert m.stats["pool"] == "user runs"
    assert (m.stats["shards"] > 2) == (shard_rows == 300)
    tr = load_traces(str(path), **opts)
    assert_same(m, build_od(tr, cfg, engine="memory"))
    assert m.stats["rows_dropped"] == {**tr.report.rows_dropped}
    assert m.stats["rows_dropped"]["duplicate_row"] == 3

    split = pd.concat([df, df[df["user"] == "u001"].assign(time=lambda x: x["time"] + pd.Timedelta(days=1))],
                      ignore_index=True)                                      # u001 again, after every other
    path2 = tmp_path / "split.parquet"
    split.to_parquet(path2, index=False, row_group_size=70)
    m2 = build_od(file_source(str(path2), **opts), cfg, engine="memory", shard_rows=shard_rows,
                  batch_rows=batch_rows)
    assert m2.stats["pool"] != "user runs"
    assert_same(m2, build_od(load_traces(str(path2), **opts), cfg, engine="memory"))


@pytest.mark.parametrize("order", ["by user and time", "shuffled"])
def test_parquet_with_a_generic_column_mapping_same_in_every_engine(tmp_path, order):
    """A Parquet file whose columns the loader does not recognise by name (``vehicle, ts, lat_deg, lon_deg``), read
    with a column mapping: the memory and DuckDB engines give the loader's tables and drops, whether the file comes
    sorted by user and time (each user one run, no repeated time: chunks of whole users, rows counted by user, hour
    and cell) or in any order (the user shards, duplicate removal over the rows)."""
    df = _hours_city("dense").drop_duplicates(ignore_index=True)
    if order == "shuffled":
        df = df.sample(frac=1.0, random_state=4, ignore_index=True)
    df.loc[5, "lat"] = np.nan
    mapping = {"user": "vehicle", "time": "ts", "lat": "lat_deg", "lon": "lon_deg"}
    path = tmp_path / "generic.parquet"
    df.rename(columns={"user": "vehicle", "time": "ts", "lat": "lat_deg", "lon": "lon_deg"}).to_parquet(
        path, index=False, row_group_size=500)
    opts = {"tz": "Europe/Paris", "bbox": "36.0,-123.0,39.0,-122.0", "mapping": mapping}
    cfg = ODConfig(tz="Europe/Paris")
    tr = load_traces(str(path), **opts)
    ref = build_od(tr, cfg, grid=GRID, engine="memory")
    src = file_source(str(path), **opts)
    m = build_od(src, cfg, grid=GRID, engine="memory", shard_rows=700, batch_rows=300)
    d = build_od(src, cfg, grid=GRID, engine="duckdb", shard_rows=1_500, batch_rows=1_000)
    assert m.stats["pool"] == ("user runs" if order != "shuffled" else "processes")
    taken = {k for k, v in d.stats["shard_paths"].items() if v}
    assert taken == ({"rows counted by user, hour and cell"} if order != "shuffled" else {"all rows deduplicated"})
    for od in (m, d):
        assert_same(od, ref)
        assert od.stats["rows_dropped"] == {k: v for k, v in tr.report.rows_dropped.items()
                                            if k != "duplicate_row"}


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_memory_engine_worker_processes_split_the_files(tmp_path, fmt):
    """Worker processes each read a part of the files (Parquet row groups, or whole CSV files) and compute whole
    user shards: the loader's tables, drops and robust box, and those of one process reading alone."""
    _, df = _messy_file(tmp_path)
    folder = tmp_path / "parts"
    folder.mkdir()
    for i, rows in enumerate(np.array_split(np.arange(len(df)), 3)):   # a user's rows in several files
        part = df.iloc[rows]
        if fmt == "parquet":
            part.to_parquet(folder / f"p{i}.parquet", index=False, row_group_size=97)
        else:
            part.to_csv(folder / f"p{i}.csv", index=False)
    opts = {"tz": "Europe/Paris", "bbox": "auto"}
    cfg = ODConfig(tz="Europe/Paris")
    m = build_od(file_source(folder, **opts), cfg, engine="memory", shard_rows=300, workers=2, pool="processes")
    one = build_od(file_source(folder, **opts), cfg, engine="memory", shard_rows=300, workers=1)
    assert (m.stats["pool"], m.stats["workers"], one.stats["pool"]) == ("processes", 2, "threads")
    assert m.stats["shards"] > 2
    ref = build_od(load_traces(folder, **opts), cfg, engine="memory")
    assert_same(m, ref)
    assert_same(m, one)
    assert m.stats["bbox_used"] == one.stats["bbox_used"]
    assert m.stats["rows_dropped"] == one.stats["rows_dropped"]
    loaded = load_traces(folder, **opts).report.rows_dropped
    assert m.stats["rows_dropped"]["duplicate_row"] == loaded["duplicate_row"] > 0


@pytest.mark.parametrize("zones", [6, 3_000_000_000])   # one packed key; zone ids too large for one key
def test_running_counts_sum_equals_one_groupby(zones):
    """The memory engine's running sum of the shards' counts, compacted many times, equals one sum at the end."""
    from odcore.od.engines.memory_stream import CountsSum

    rng = np.random.default_rng(5)
    acc = CountsSum(min_rows=50)
    parts = []
    for _ in range(40):
        n = int(rng.integers(1, 120))
        ids = rng.choice(np.array([0, 1, 2, 3, 4, zones - 1], np.int64), size=(2, n))
        p = pd.DataFrame({"week": rng.integers(2800, 2802, n), "origin": ids[0],
                          "destination": ids[1], "count": rng.integers(1, 9, n)})
        p = p.drop_duplicates(["week", "origin", "destination"])      # a shard's counts have unique keys
        parts.append(p)
        acc.add(*(p[c].to_numpy() for c in ("week", "origin", "destination", "count")))
    want = pd.concat(parts).groupby(["week", "origin", "destination"], as_index=False)["count"].sum()
    pd.testing.assert_frame_equal(acc.result().reset_index(drop=True), want)


def test_user_hash_is_deterministic_and_spreads():
    import pyarrow as pa

    from odcore.od.engines.memory_stream import user_hash

    text = pa.array([f"user-{i}" for i in range(20_000)] + ["", "é", "user-1"])
    h = user_hash(text)
    assert h[1] == h[-1]
    assert h[-3] != h[-2]
    assert len(np.unique(h)) == 20_002                                      # no collision among distinct ids
    shards = np.bincount((h[:20_000] % np.uint64(8)).astype(np.int64), minlength=8)
    assert shards.min() > 2_000                                             # about 2,500 per shard
    ints = user_hash(pa.array(np.arange(20_000, dtype=np.int64)))
    assert len(np.unique(ints)) == 20_000
    np.testing.assert_array_equal(user_hash(text.slice(5, 10)), h[5:15])    # offsets of sliced arrays


def test_file_source_auto_bbox_and_errors(tmp_path):
    path, df = _messy_file(tmp_path)
    d = build_od(file_source(path, bbox="auto"), ODConfig(), engine="duckdb")
    m = build_od(file_source(path, bbox="auto"), ODConfig(), engine="memory")
    assert_same(m, d)                       # the sample is the whole (small) file: the loader's robust box
    assert d.stats["rows_dropped"]["outside_bbox"] >= 1                    # at least the far glitch
    bad = df.assign(lat=df["lon"], lon=df["lat"])
    bad.to_parquet(tmp_path / "swapped.parquet", index=False)
    with pytest.raises(TraceFormatError, match="outside"):
        build_od(file_source(tmp_path / "swapped.parquet"), ODConfig(), engine="duckdb")
    with pytest.raises(ParameterError, match="engine must be one of"):
        build_od(df, ODConfig(), engine="hadoop")


def _glitchy_city(path, n_users: int = 500, per_user: int = 120, seed: int = 3) -> int:
    """A city with 3 % far GPS glitches and 60,000 rows (more than one batch of each engine at the batch sizes of
    :data:`GLITCHY_BATCH_ROWS`), many on repeated places, so a sample of the rows would give another box. Returns the
    row count."""
    rng = np.random.default_rng(seed)
    n = n_users * per_user
    t0 = pd.Timestamp("2024-03-04", tz="UTC").value // 10**9
    lat = 37.75 + rng.normal(0, 0.03, n)
    lon = -122.42 + rng.normal(0, 0.03, n)
    far = rng.random(n) < 0.03
    lat[far] += rng.uniform(-1.5, 1.5, far.sum())
    lon[far] += rng.uniform(-1.5, 1.5, far.sum())
    pd.DataFrame({"user": np.repeat(np.arange(n_users), per_user),
                  "time": pd.to_datetime(t0 + rng.integers(0, 7 * 24 * 3600, n), unit="s", utc=True),
                  "lat": lat.round(3), "lon": lon.round(3)}).to_parquet(path, index=False)
    return n


# Batch and shard sizes that split the glitchy city into several pieces in every engine (the defaults are 10^5–10^6
# rows, the same code with bigger pieces).
GLITCHY_BATCH_ROWS = 16_000


def test_auto_bbox_on_a_big_input_gives_every_engine_the_loaders_box(tmp_path, spark):
    """``bbox="auto"`` is one rule (odcore.data.traces.RobustBoxCounts over every usable row): the loader, the
    memory engine in user shards, DuckDB and Spark clip the same rows and lay the same grid."""
    from odcore.data.traces import BBox, load_traces

    path = tmp_path / "glitchy.parquet"
    n = _glitchy_city(path)
    assert n > 3 * GLITCHY_BATCH_ROWS
    src = file_source(path, bbox="auto")
    m = build_od(src, ODConfig(), engine="memory", shard_rows=2 * GLITCHY_BATCH_ROWS, batch_rows=GLITCHY_BATCH_ROWS)
    d = build_od(src, ODConfig(), engine="duckdb", batch_rows=GLITCHY_BATCH_ROWS)
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"   # the rows of one mapInPandas batch
    was = spark.conf.get(key)
    spark.conf.set(key, str(GLITCHY_BATCH_ROWS))
    try:
        s = build_od(src, ODConfig(), engine="spark", spark=spark)
    finally:
        spark.conf.set(key, was)
    df = pd.read_parquet(path)
    full = BBox.robust(df["lat"].to_numpy(), df["lon"].to_numpy()).as_tuple()
    loaded = load_traces(path, bbox="auto")
    assert loaded.report.bbox_used == full
    lo = build_od(loaded.df, ODConfig(), engine="memory")
    for od in (m, d, s):
        assert od.stats["bbox_used"] == full, od.stats["engine"]
        assert od.stats["rows_dropped"]["outside_bbox"] == loaded.report.rows_dropped["outside_bbox"]
        assert od.grid.to_dict() == lo.grid.to_dict()
        assert_same(lo, od, pairs=False)


def test_robust_box_counts_match_percentiles_and_merge_in_any_order():
    """The counted box is the 0.5–99.5 % band box (to 1e-4°), padded by 25 %; batches merge to the same counts."""
    from odcore.data.traces import ROBUST_BIN_DEG, RobustBoxCounts

    rng = np.random.default_rng(4)
    lat = 40.7 + rng.normal(0, 0.05, 50_000)
    lon = -74.0 + rng.normal(0, 0.05, 50_000)
    lat[:100] = 10.0                                                            # 0.2 % far glitches
    whole = RobustBoxCounts()
    whole.add(lat, lon)
    parts = RobustBoxCounts()
    for i in rng.permutation(10):
        parts.add(lat[i::10], lon[i::10])
    assert parts.box() == whole.box()
    b = whole.box(pad=0.0)
    lo, hi = np.percentile(lat, [0.5, 99.5])
    assert lo - 2 * ROBUST_BIN_DEG <= b.south <= lo + ROBUST_BIN_DEG
    assert hi - ROBUST_BIN_DEG <= b.north <= hi + 2 * ROBUST_BIN_DEG
    assert b.south > 30                                                         # the glitches are cut
    padded = whole.box()
    assert padded.south == pytest.approx(b.south - 0.25 * (b.north - b.south), abs=1e-6)


def test_cli_trips_same_table_from_every_engine_with_default_flags(tmp_path, capsys):
    """``trips`` with default flags (``--bbox auto``) on the bundled city: the memory engine (loader) and DuckDB
    (streamed file) give the same summary, box and counts."""
    from odcore.cli import main

    outs = {}
    for e in ("memory", "duckdb"):
        out = tmp_path / f"{e}.csv"
        assert main(["trips", "--json", "--engine", e, "--counts-out", str(out)]) == 0
        js = json.loads(capsys.readouterr().out)
        outs[e] = (js, pd.read_csv(out))
    (jm, cm), (jd, cd) = outs["memory"], outs["duckdb"]
    for k in ("trips", "unique_trips", "od_pairs", "rows_kept", "bbox_used", "users", "weeks"):
        assert jm[k] == jd[k], k
    pd.testing.assert_frame_equal(cm, cd)


def test_grid_from_bounds_covers_every_point_and_matches_fit_cells():
    rng = np.random.default_rng(0)
    lat = 37.6 + rng.random(5000) * 0.3
    lon = -122.5 + rng.random(5000) * 0.3
    b = Bounds()
    for i in range(0, 5000, 1000):                                         # a streaming pass in chunks
        b.update(lat[i:i + 1000], lon[i:i + 1000])
    g = fit_grid_bounds(b, 1.3)
    ref = SquareGrid.fit(lat, lon, 1.3)
    assert g.crs == ref.crs
    assert (g.assign(lat, lon) >= 0).all()
    # same squares: the cell corners agree modulo the side (origins snapped to multiples of the side)
    assert (g.x0 - ref.x0) % g.side_m == pytest.approx(0, abs=1e-6) or \
        (g.x0 - ref.x0) % g.side_m == pytest.approx(g.side_m, abs=1e-6)


def test_hour_slots_and_weeks():
    t = np.array([pd.Timestamp("2024-11-03 08:30", tz="UTC").value // 10**9,
                  pd.Timestamp("2024-11-03 09:30", tz="UTC").value // 10**9])
    s = hour_slots(t, "America/Los_Angeles")
    assert s[1] - s[0] == 1                                                # the fall-back hour is a real hour
    kol = hour_slots(np.array([pd.Timestamp("2024-01-08 00:29", tz="UTC").value // 10**9]), "Asia/Kolkata")
    # 05:59 local: slot starts at 05:00 local = 23:30 UTC the day before
    assert kol[0] * 3600 - 1800 == pd.Timestamp("2024-01-07 23:30", tz="UTC").value // 10**9
    w = week_of_slots(np.array([pd.Timestamp("2024-01-14 23:00", tz="UTC").value // 10**9 // 3600,
                                pd.Timestamp("2024-01-15 00:00", tz="UTC").value // 10**9 // 3600]), "UTC")
    assert w[1] - w[0] == 1


def test_cli_trips_engines_agree_on_a_streamed_file(tmp_path, capsys):
    """``trips --engine duckdb`` streams the Parquet file itself and reports what the memory engine reports."""
    import json

    from odcore.cli import main

    path, _ = _messy_file(tmp_path)
    outs = {}
    for engine in ("memory", "duckdb"):
        assert main(["trips", "--input", path, "--engine", engine, "--bbox", "36,-123,39,-122", "--tz", "UTC",
                     "--threshold", "2", "--json"]) == 0
        outs[engine] = json.loads(capsys.readouterr().out)
    keys = ("users", "weeks", "week_starts", "rows_read", "rows_kept", "rows_dropped", "cells", "grid_cells",
            "user_hours", "trips", "unique_trips", "od_pairs", "od_pairs_over_threshold", "max_count")
    assert {k: outs["memory"][k] for k in keys} == {k: outs["duckdb"][k] for k in keys}
    assert outs["duckdb"]["engine"] == "duckdb"


# ------------------------------------------------------------------ per-person bounding in every engine


def _bounded_release(od, m: int, seed: int):
    from odcore.privacy.release import Mode, ReleaseConfig, release_bounded_counts_with_report

    cfg = ReleaseConfig(epsilon=1.0, threshold=2, mode=Mode.USER_LEVEL, max_pairs=m)
    return release_bounded_counts_with_report(od.stats["bounded_counts"], cfg, seed, od.stats["bounding"])


@pytest.mark.parametrize("user_ids", ["text", "int"])
def test_user_level_release_identical_in_every_engine(spark, user_ids):
    """--mode user_level --max-pairs m: each engine bounds in its own language (numpy, DuckDB SQL, Spark SQL) with
    the keyed hash, only per-pair counts come back, and the released tables equal release_with_report of the
    memory engine's pairs for the seed, row for row."""
    from odcore.od.bounding import bounding_key
    from odcore.privacy.release import Mode, ReleaseConfig, release_with_report

    df = _random_city(120, 3)
    if user_ids == "int":
        df["user"] = df["user"].str[1:].astype(np.int64) * 7919
    cfg = ODConfig(tz="Europe/Paris")
    m, seed = 3, 2024
    key = bounding_key(np.random.default_rng(seed))
    mem = build_od(df, cfg, engine="memory", bound=(m, key))
    ref = release_with_report(mem.pairs, ReleaseConfig(epsilon=1.0, threshold=2, mode=Mode.USER_LEVEL,
                                                       max_pairs=m), rng=seed)
    assert ref.report["user_weeks_bounded"] > 10                  # the bound bites
    assert (ref.table["true_count"] < ref.table["raw_count"]).any()
    for engine, opts in (("memory", {}), ("duckdb", {"shard_rows": 2_000}), ("spark", {"spark": spark})):
        od = build_od(df, cfg, engine=engine, keep_pairs=False, bound=(m, key), **opts)
        assert not od.stats.get("pairs_available", True) or engine == "memory"
        # Spark brings aggregates only: the user-weeks' histogram and the number of people, the same figures
        assert od.per_user == (engine != "spark")
        pd.testing.assert_frame_equal(od.user_week_histogram(), mem.user_week_histogram(), obj=engine)
        assert od.summary() == mem.summary()
        if engine == "spark":
            with pytest.raises(AggregatesOnlyError, match="keep_pairs=True"):
                od.user_week.groupby("week")
        got = _bounded_release(od, m, seed)
        pd.testing.assert_frame_equal(got.table, ref.table, obj=engine)
        for k in ("user_weeks", "user_weeks_bounded", "contributions_in", "contributions_dropped_by_bounding",
                  "pairs_released", "pairs_emptied_by_bounding"):
            assert got.report[k] == ref.report[k], (engine, k)
    # another seed is another key: other pairs kept
    other = build_od(df, cfg, engine="duckdb", keep_pairs=False, bound=(m, bounding_key(np.random.default_rng(5))))
    assert not other.stats["bounded_counts"]["true_count"].equals(mem.stats["bounded_counts"]["true_count"])


@pytest.fixture
def driver_tables(spark, monkeypatch):
    """What Spark hands to the driver while the test runs: ``(method, columns, rows)`` of every ``toPandas``,
    ``collect``, ``tail``, ``toArrow``, ``toLocalIterator`` of a DataFrame (``take``/``head``/``first`` go through
    ``collect``) and of every ``RDD.collect`` (columns unknown: None)."""
    from pyspark import RDD

    seen: list[tuple[str, tuple[str, ...] | None, int]] = []
    cls = type(spark.range(1))

    def record(name, size):
        orig = getattr(cls, name)

        def wrapped(self, *a, **k):
            out = orig(self, *a, **k)
            if name == "toLocalIterator":
                out = list(out)
                seen.append((name, tuple(self.columns), len(out)))
                return iter(out)
            seen.append((name, tuple(self.columns), size(out)))
            return out

        monkeypatch.setattr(cls, name, wrapped)

    for name in ("toPandas", "collect", "tail", "toLocalIterator"):
        record(name, len)
    record("toArrow", lambda t: t.num_rows)
    rdd_collect = RDD.collect

    def rdd_wrapped(self):
        out = rdd_collect(self)
        seen.append(("RDD.collect", None, len(out)))
        return out

    monkeypatch.setattr(RDD, "collect", rdd_wrapped)
    return seen


def test_cli_user_level_release_same_in_every_engine_and_spark_brings_back_aggregates_only(
        tmp_path, capsys, driver_tables):
    """``release --mode user_level --max-pairs 10``: memory, DuckDB and Spark write the same published table and the
    same analysis figures for a seed, and Spark hands the driver only tables whose size does not grow with the
    number of people: no ``user`` column, never more rows than the OD table has (week, origin, destination) pairs
    or the grid has cells (the per-user-week figures come back as a histogram by (week, trips, unique_trips))."""
    from odcore.cli import main

    df = _random_city(300, 11)
    path = tmp_path / "city.parquet"
    df.to_parquet(path)
    argv = ["release", "--input", str(path), "--tz", "Europe/Paris", "--mode", "user_level", "--max-pairs", "10",
            "--epsilon", "1", "--threshold", "3", "--seed", "7", "--json"]
    outs = {}
    for engine in ENGINES:
        if engine == "spark":
            driver_tables.clear()
        out, an = tmp_path / f"pub-{engine}", tmp_path / f"an-{engine}"
        assert main([*argv, "--engine", engine, "--out", str(out), "--analysis-out", str(an)]) == 0
        capsys.readouterr()
        outs[engine] = ((out / "published.csv").read_bytes(), pd.read_csv(an / "DO_NOT_SHARE_analysis.csv",
                                                                           comment="#"),
                        json.loads((an / "DO_NOT_SHARE_summary.json").read_text()))
    pub_m, full_m, sum_m = outs["memory"]
    assert len(full_m) > 100
    assert sum_m["release"]["user_weeks_bounded"] > 0
    for engine in ("duckdb", "spark"):
        pub, full, summ = outs[engine]
        assert pub == pub_m, engine
        pd.testing.assert_frame_equal(full, full_m, obj=engine)
        for k in ("od", "unique_trips_per_user_week", "budget_typical_user", "budget_max_user", "utility", "weeks"):
            assert summ[k] == sum_m[k], (engine, k)
        assert summ["release"]["bounded_in"] == engine
    # what reached the driver from Spark
    od = build_od(df, ODConfig(tz="Europe/Paris"), engine="memory")
    n_pairs, n_user_weeks = len(od.counts), len(od.user_week)
    assert n_user_weeks > 400
    assert n_pairs > 100
    assert driver_tables, "the recorder saw nothing"
    for name, cols, rows in driver_tables:
        assert cols is None or "user" not in cols, (name, cols, rows)
        assert rows <= max(n_pairs, od.grid.n_cells), (name, cols, rows)


# ---------------------------------------------------------------------------------------------------------------
# release --engine duckdb|spark on files: the engine reads them; this process never loads the table of fixes
# ---------------------------------------------------------------------------------------------------------------

def _messy_city(tmp_path):
    """A random city as Parquet with what the loader drops and the zones drop: exact duplicate rows, a missing
    coordinate, a GPS glitch far away (outside the robust box), fixes outside the dates; and a zone file that
    covers half of the points (the rest are outside every zone, some of them duplicated)."""
    df = _random_city(160, 5)
    far = df.iloc[:3].assign(lat=48.85, lon=2.35)
    miss = df.iloc[3:4].assign(lat=np.nan)
    df = pd.concat([df, df.iloc[10:60], far, miss], ignore_index=True)
    path = tmp_path / "city.parquet"
    df.to_parquet(path)
    zones = {"type": "FeatureCollection", "features": [
        {"type": "Feature", "properties": {"name": f"z{i}"},
         "geometry": {"type": "Polygon", "coordinates": [[[-122.46, la], [-122.44, la], [-122.44, la + 0.018],
                                                          [-122.46, la + 0.018], [-122.46, la]]]}}
        for i, la in enumerate(P_LAT[:7] - 0.009)]}
    zpath = tmp_path / "zones.geojson"
    zpath.write_text(json.dumps(zones))
    return path, zpath


def _comparable(out: dict) -> dict:
    """The release's JSON without what names the engine, the output folders or the time of writing."""
    out = json.loads(json.dumps(out))
    out["config"].pop("engine")
    out.pop("files")
    out.pop("published")
    out["published_release"]["record"]["settings"].pop("engine")
    out["published_release"]["record"].pop("written")
    out["private_record"]["settings"].pop("engine")
    out["private_record"].pop("written")
    out["private_record"].pop("published_sha256")   # release.json's bytes hold the time written
    return out


def _release_outputs(main, capsys, tmp_path, argv, engines):
    outs = {}
    for engine in engines:
        out, an = tmp_path / f"pub-{engine}", tmp_path / f"an-{engine}"
        assert main([*argv, "--engine", engine, "--out", str(out), "--analysis-out", str(an), "--json"]) == 0
        printed = json.loads(capsys.readouterr().out)
        outs[engine] = ((out / "published.csv").read_bytes(), _comparable(printed),
                        (an / "DO_NOT_SHARE_analysis.csv").read_bytes())
    return outs


def test_cli_release_from_files_same_in_every_engine_without_the_loader(tmp_path, capsys, monkeypatch,
                                                                        driver_tables):
    """``release --engine duckdb|spark --input FILE.parquet``: the engine reads the file and computes the traces
    summary, the people and the fingerprint itself (the loader raises if called), and the command prints the same
    JSON and writes the same published.csv as the memory engine from the loaded table (per-metric release; the
    file holds duplicates, a missing value, a far glitch, fixes outside the dates and outside every zone). Spark
    hands the driver no table with a ``user`` column."""
    from odcore.cli import main
    from odcore.data.fingerprint import trace_fingerprint

    path, zones = _messy_city(tmp_path)
    argv = ["release", "--input", str(path), "--zones", str(zones), "--start", "2024-03-05", "--end", "2024-03-16",
            "--epsilon", "1", "--threshold", "3", "--seed", "7"]
    ref = _release_outputs(main, capsys, tmp_path, argv, ["memory"])["memory"]
    loaded = load_traces(path, tz="auto", bbox="auto", region="auto", start="2024-03-05", end="2024-03-16")
    tsum = ref[1]["traces"]
    assert {"duplicate_row", "outside_bbox", "outside_date_range", "missing_value"} <= set(tsum["rows_dropped"])
    assert ref[1]["private_record"]["fingerprint"] == f"sha256:{trace_fingerprint(loaded.df)}"
    assert "fingerprint" not in ref[1]["published_release"]["record"]

    _engines_print_memorys_release_without_the_loader(main, capsys, tmp_path, monkeypatch, driver_tables, argv, ref,
                                                      max_rows=max(ref[1]["od"]["od_pairs"], 1_000))


def _engines_print_memorys_release_without_the_loader(main, capsys, tmp_path, monkeypatch, driver_tables, argv, ref,
                                                      max_rows: int) -> None:
    """With the loader made to raise, ``release --engine duckdb`` and ``spark`` give the memory engine's ``ref``
    (published.csv, JSON, analysis table), and Spark hands the driver no ``user`` column and no table longer than
    ``max_rows``."""
    import odcore.data.traces as tr

    def refuse(*a, **k):
        raise AssertionError("the loader read the input")

    monkeypatch.setattr(tr, "load_traces", refuse)
    driver_tables.clear()
    outs = _release_outputs(main, capsys, tmp_path, argv, ["duckdb", "spark"])
    for engine, (pub, js, analysis) in outs.items():
        assert pub == ref[0], engine
        assert analysis == ref[2], engine
        assert js == ref[1], engine
    assert driver_tables, "the recorder saw nothing"
    for name, cols, rows in driver_tables:
        assert cols is None or "user" not in cols, (name, cols, rows)
        assert rows <= max_rows, (name, cols, rows)


@pytest.mark.slow
def test_cli_release_of_the_bundled_city_same_in_every_engine_without_the_loader(tmp_path, capsys, monkeypatch,
                                                                                 driver_tables):
    """The bundled city with the default flags (robust box, region and zone found from the file): ``release
    --engine duckdb`` and ``--engine spark`` print the memory engine's JSON and write its published.csv and
    analysis table byte for byte, the loader never called; Spark hands the driver no ``user`` column and no table
    longer than the OD table (minutes on two cores)."""
    from odcore.cli import main

    argv = ["release", "--input", str(SAMPLE_DATA_DIR / "synthetic_city.parquet"), "--seed", "3"]
    ref = _release_outputs(main, capsys, tmp_path, argv, ["memory"])["memory"]
    assert ref[1]["traces"]["users"] == 25_000

    _engines_print_memorys_release_without_the_loader(main, capsys, tmp_path, monkeypatch, driver_tables, argv, ref,
                                                      max_rows=ref[1]["od"]["od_pairs"])


@pytest.mark.parametrize("unit", ["s", "ms", "us", "ns"])
def test_filter_batch_reads_zone_aware_arrow_times_as_the_loader_reads_them(unit):
    """A zone-aware timestamp column read as Arrow (the memory engine's stream) gives the codes, seconds (floored,
    before 1970 too) and messages that parse_times gives the same column as pandas (the loader's reading)."""
    import pyarrow as pa

    from odcore.od import kernel as K

    rng = np.random.default_rng(3)
    f = K.Filters(source="x.parquet", tz="Europe/Paris", bbox=(-1.0, -1.0, 1.0, 1.0))
    ms = rng.integers(-10**11, 2 * 10**12, 2000)
    for tz in ("UTC", "America/Los_Angeles"):
        s = pd.Series(pd.to_datetime(ms, unit="ms", utc=True)).dt.tz_convert(tz).astype(f"datetime64[{unit}, {tz}]")
        s[7] = pd.NaT
        lat = rng.uniform(-2, 2, len(s))
        user = pa.array([f"u{i % 9}" for i in range(len(s))])
        got = K.filter_batch(user, pa.array(s), lat, lat, f, K.PrepStats())
        want = K.filter_batch(user, s, lat, lat, f, K.PrepStats())
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
        assert got[0][7] == 1                                                    # the missing time
    for bad in (["1850-01-01"] + ["2020-01-01"] * 5, ["1950-01-01"] * 5):      # out of range; implausible median
        s = pd.Series(pd.to_datetime(bad, utc=True)).astype(f"datetime64[{unit}, UTC]")
        z = np.zeros(len(s))
        with pytest.raises(TraceFormatError) as want:
            K.filter_batch(pa.array(["u"] * len(s)), s, z, z, f, K.PrepStats())
        with pytest.raises(TraceFormatError) as got:
            K.filter_batch(pa.array(["u"] * len(s)), pa.array(s), z, z, f, K.PrepStats())
        assert str(got.value) == str(want.value)
