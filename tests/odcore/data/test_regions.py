"""Dense regions, the local time zone from coordinates, and one OD table from every engine on real-shaped data."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from odcore.data.regions import find_regions, pick_region, spans_metro, zone_at
from odcore.data.traces import load_traces
from odcore.errors import ParameterError
from odcore.od.engines import build_od
from odcore.od.trips import ODConfig


def _two_cities(n_big: int = 60, n_small: int = 25, seed: int = 0) -> pd.DataFrame:
    """Check-ins in Austin (n_big users) and New York (n_small users), one a day for two weeks, Unix times."""
    rng = np.random.default_rng(seed)
    rows = []
    t0 = pd.Timestamp("2010-10-04", tz="UTC").value // 10**9
    for u in range(n_big + n_small):
        c = (30.27, -97.74) if u < n_big else (40.71, -74.0)
        for k in range(14 * 6):
            rows.append((u, t0 + k * 4 * 3600 + int(rng.integers(0, 3600)), c[0] + rng.normal(0, 0.03),
                         c[1] + rng.normal(0, 0.03)))
    return pd.DataFrame(rows, columns=["user", "time", "lat", "lon"])


def test_regions_rank_the_densest_first_and_pick_by_rank():
    df = _two_cities()
    regs = find_regions(df["user"].to_numpy(), df["lat"].to_numpy(), df["lon"].to_numpy())
    assert [r.users for r in regs[:2]] == [60, 25]
    assert regs[0].tz == "America/Chicago"
    assert regs[1].tz == "America/New_York"
    s, w, n, e = regs[0].bbox
    assert s < 30.27 < n
    assert w < -97.74 < e
    assert not spans_metro(type("B", (), {"as_tuple": lambda _: regs[0].bbox})())
    assert pick_region(regs, "auto") is regs[0]
    assert pick_region(regs, 2) is regs[1]
    with pytest.raises(ParameterError, match=r"rank 1\.\.2"):
        pick_region(regs, 3)
    assert zone_at(0.0, -30.0) == "UTC"                          # at sea: no local zone


def test_loader_focuses_on_the_densest_region_unless_told(tmp_path):
    path = tmp_path / "two.csv"
    _two_cities().to_csv(path, index=False)
    auto = load_traces(path, tz="auto", bbox="auto", region="auto")
    assert auto.report.region == 1
    assert len(auto.report.regions) == 2
    assert auto.n_users == 60
    assert auto.report.tz == "America/Chicago"
    assert auto.report.tz_source == "coordinates"
    second = load_traces(path, tz="auto", bbox="auto", region=2)
    assert second.n_users == 25
    assert second.report.tz == "America/New_York"
    everything = load_traces(path, tz="auto", bbox="auto", region="all")
    assert everything.n_users == 85
    assert everything.report.regions == ()


def _eastern_city(path, seed: int = 7) -> pd.DataFrame:
    """A New York dataset written as naive local text times (no zone stated): 40 users, each hour at one of four
    places 5 km apart, over 2 weeks that start and end near local midnights (so a UTC reading cuts other weeks)."""
    rng = np.random.default_rng(seed)
    places = np.array([(40.70, -74.00), (40.745, -74.00), (40.70, -73.94), (40.745, -73.94)])
    local = pd.date_range("2024-03-03 20:00", "2024-03-18 03:00", freq="h")   # spans the 10 March DST jump
    rows = []
    for u in range(40):
        keep = rng.random(len(local)) < 0.6
        where = rng.integers(0, 4, len(local))
        for ts, k in zip(local[keep], where[keep], strict=True):
            rows.append((f"u{u}", (ts + pd.Timedelta(minutes=int(rng.integers(0, 60)))).isoformat(sep=" "),
                         places[k, 0], places[k, 1]))
    df = pd.DataFrame(rows, columns=["user", "time", "lat", "lon"])
    df.to_csv(path, index=False)
    return df


def _hand_count(df: pd.DataFrame, tz: str) -> pd.Series:
    """Trips per Monday-week by hand: the real hour of each row (one row per user-hour here; New York's offsets are
    whole hours), a trip when the user's next row is in the next hour at another place; its week is the Monday of
    the local date of the origin hour."""
    t = pd.to_datetime(df["time"]).dt.tz_localize(tz, nonexistent="shift_forward", ambiguous=True)
    sec = (t.dt.tz_convert("UTC") - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(seconds=1)
    d = pd.DataFrame({"user": df["user"], "hour": sec // 3600, "place": df["lat"] * 1000 + df["lon"]})
    d = d.sort_values(["user", "hour"])
    nxt = d.groupby("user").shift(-1)
    trip = (nxt["hour"] == d["hour"] + 1) & (nxt["place"] != d["place"])
    local_date = pd.to_datetime(d["hour"] * 3600, unit="s", utc=True).dt.tz_convert(tz).dt.tz_localize(None).dt.normalize()
    monday = local_date - pd.to_timedelta(local_date.dt.day_of_week, unit="D")
    return trip.groupby(monday).sum().astype(int)


def test_eastern_data_without_a_zone_flag_gets_new_york_and_the_local_hand_count(tmp_path):
    path = tmp_path / "nyc.csv"
    df = _eastern_city(path)
    tr = load_traces(path, tz="auto", bbox="auto", region="auto")
    assert tr.report.tz == "America/New_York"
    assert tr.report.tz_source == "coordinates"
    od = build_od(tr.df, ODConfig(tz=tr.report.tz, cell_km2=1.0))
    got = od.user_week.groupby("week")["trips"].sum()
    want = _hand_count(df, "America/New_York")
    want = want[want > 0]
    assert od.week_starts == [str(d.date()) for d in want.index]
    assert got.tolist() == want.tolist()
    # the same file read as UTC counts other weeks: the zone matters (this test can fail)
    utc = load_traces(path, tz="UTC", bbox="auto")
    od_utc = build_od(utc.df, ODConfig(tz="UTC", cell_km2=1.0))
    assert od_utc.user_week.groupby("week")["trips"].sum().tolist() != got.tolist()


def test_a_file_that_states_its_zone_keeps_it(tmp_path):
    path = tmp_path / "tokyo_stated.parquet"
    df = _two_cities(10, 0)
    df["time"] = pd.to_datetime(df["time"], unit="s", utc=True).dt.tz_convert("Asia/Tokyo")
    df.to_parquet(path, index=False)
    tr = load_traces(path, tz="auto", bbox="auto")
    assert tr.report.tz == "Asia/Tokyo"
    assert tr.report.tz_source == "file"


@pytest.mark.realdata
def test_checkin_set_same_table_from_every_engine(shared_data):
    """The Foursquare set loaded with defaults (densest region, inferred zone): memory and DuckDB agree on every
    row of the counts and per-user tables (Spark: in test_cabspotting_week_every_engine, marked slow)."""
    tr = load_traces(shared_data / "foursquare_us_liu2017_5k", tz="auto", time_offset_s=28800, bbox="auto",
                     region="auto")
    assert tr.report.tz == "America/New_York"
    assert tr.report.region == 1
    cfg = ODConfig(tz=tr.report.tz)
    m = build_od(tr.df, cfg, engine="memory")
    d = build_od(tr.df, cfg, engine="duckdb")
    pd.testing.assert_frame_equal(m.counts.reset_index(drop=True), d.counts.reset_index(drop=True))
    pd.testing.assert_frame_equal(m.user_week.reset_index(drop=True), d.user_week.reset_index(drop=True))


@pytest.mark.realdata
@pytest.mark.slow
def test_cabspotting_week_and_checkins_every_engine(shared_data, tmp_path):
    """A Cabspotting week (60 cabs) and the Gowalla set through the CLI's default flags in all three engines."""
    import json
    import shutil
    import subprocess
    import sys

    cabs = tmp_path / "cabs"
    cabs.mkdir()
    for f in sorted((shared_data / "cabspotting_sf").glob("new_*.txt.gz"))[:60]:
        shutil.copy(f, cabs / f.name)
    for inp, extra in ((cabs, ["--start", "2008-05-19", "--end", "2008-05-26"]),
                       (shared_data / "gowalla_liu2017_1k", ["--time-offset", "28800"])):
        outs = {}
        for e in ("memory", "duckdb", "spark"):
            out = tmp_path / f"{e}.csv"
            r = subprocess.run([sys.executable, "-m", "odcore", "trips", "--json", "--input", str(inp), "--engine", e,
                                "--counts-out", str(out), *extra], capture_output=True, text=True, check=True)
            outs[e] = (json.loads(r.stdout), pd.read_csv(out))
        for e in ("duckdb", "spark"):
            for k in ("trips", "unique_trips", "od_pairs", "bbox_used", "tz", "users"):
                assert outs[e][0][k] == outs["memory"][0][k], (inp, e, k)
            pd.testing.assert_frame_equal(outs[e][1], outs["memory"][1])


def test_streamed_file_gets_the_loaders_region_and_zone(tmp_path, capsys):
    """A country-wide Parquet file read by DuckDB itself (streamed) gets the region and zone the loader gives the
    memory engine: ``trips`` with default flags prints the same table from both."""
    import json

    from odcore.cli import main

    path = tmp_path / "two.parquet"
    _two_cities().to_parquet(path, index=False)
    outs = {}
    for e in ("memory", "duckdb"):
        out = tmp_path / f"{e}.csv"
        assert main(["trips", "--json", "--input", str(path), "--engine", e, "--counts-out", str(out)]) == 0
        outs[e] = (json.loads(capsys.readouterr().out), pd.read_csv(out))
    (jm, cm), (jd, cd) = outs["memory"], outs["duckdb"]
    assert jm["tz"] == jd["tz"] == "America/Chicago"
    assert jm["users"] == jd["users"] == 60
    assert jm["bbox_used"] == jd["bbox_used"]
    pd.testing.assert_frame_equal(cm, cd)


def test_release_of_a_streamed_file_reports_the_loaders_region(tmp_path, capsys, monkeypatch):
    """``release --engine duckdb`` on a country-wide Parquet file: DuckDB reads it (the loader raises if called),
    and the printed JSON (regions found, region kept, zone and its source, rows outside the box) and published.csv
    are the memory engine's from the loaded table."""
    import json

    import odcore.data.traces as tr
    from odcore.cli import main

    path = tmp_path / "two.parquet"
    _two_cities().to_parquet(path, index=False)
    outs = {}
    for e in ("memory", "duckdb"):
        if e == "duckdb":
            monkeypatch.setattr(tr, "load_traces", lambda *a, **k: (_ for _ in ()).throw(AssertionError("loaded")))
        out = tmp_path / e
        assert main(["release", "--json", "--input", str(path), "--engine", e, "--threshold", "2", "--seed", "1",
                     "--out", str(out)]) == 0
        js = json.loads(capsys.readouterr().out)
        for k in ("files", "published"):
            js.pop(k)
        js["config"].pop("engine")
        js["published_release"]["record"]["settings"].pop("engine")
        js["published_release"]["record"].pop("written")
        outs[e] = (js, (out / "published.csv").read_bytes())
    (jm, pm), (jd, pd_) = outs["memory"], outs["duckdb"]
    assert jm["traces"]["region"] == 1
    assert len(jm["traces"]["regions"]) >= 2
    assert jm["traces"]["tz_source"] == "coordinates"
    assert jd == jm
    assert pd_ == pm
