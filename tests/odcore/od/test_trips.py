"""Hourly winner-takes-all locations, trips and weekly unique OD counts against a slow loop reference."""

from __future__ import annotations

import functools
import io
import itertools
import zipfile
from collections import Counter, defaultdict

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odcore.errors import ParameterError, TraceFormatError
from odcore.od.matrix import week_matrix
from odcore.od.trips import HourIndex, ODConfig, build_od, hourly_locations, local_offsets
from odcore.space.grid import SquareGrid

# A line of points 2 km apart in San Francisco (distinct 1.3 km² cells), plus a point 100 m from P[0].
P_LAT = 37.70 + np.arange(40) * 0.018
P_LON = np.full(40, -122.45)


def _traces(rows):
    """rows: (user, utc time string or Timestamp, point index)."""
    users, times, idx = zip(*rows, strict=True)
    return pd.DataFrame({
        "user": list(users),
        "time": pd.DatetimeIndex([pd.Timestamp(t) for t in times]).tz_convert("UTC")
        if pd.Timestamp(times[0]).tzinfo else pd.DatetimeIndex(times).tz_localize("UTC"),
        "lat": P_LAT[list(idx)],
        "lon": P_LON[list(idx)],
    }).astype({"time": "datetime64[ns, UTC]"})


GRID = SquareGrid.fit(P_LAT, P_LON, 1.3)


# --- slow, obviously-correct reference ---------------------------------------------------------------------------

def reference(df: pd.DataFrame, grid: SquareGrid, tz: str):
    """Loop implementation of Houssiau et al. (2022) Methods, for whole-hour UTC offsets."""
    cells = grid.assign(df["lat"].to_numpy(), df["lon"].to_numpy())
    per_hour: dict = defaultdict(Counter)
    for u, h, c in zip(df["user"], df["time"].dt.floor("h"), cells, strict=True):
        per_hour[(u, h)][int(c)] += 1
    winners: dict = defaultdict(dict)
    for (u, h), cnt in per_hour.items():
        best = max(cnt.values())
        winners[u][h] = min(c for c, n in cnt.items() if n == best)

    @functools.cache   # the same hours recur across people
    def week_of(h):
        loc = h.tz_convert(tz)
        return (loc.normalize() - pd.Timedelta(days=loc.weekday())).date().isoformat()

    trips: Counter = Counter()
    uniq: dict = defaultdict(set)
    active = set()
    counts: dict = defaultdict(set)
    for u, hours in winners.items():
        hs = sorted(hours)
        for h in hs:
            active.add((week_of(h), u))
        for a, b in itertools.pairwise(hs):
            if b - a == pd.Timedelta(hours=1) and hours[a] != hours[b]:
                w = week_of(a)
                trips[(w, u)] += 1
                uniq[(w, u)].add((hours[a], hours[b]))
                counts[(w, hours[a], hours[b])].add(u)
    user_week = {k: (trips.get(k, 0), len(uniq.get(k, ()))) for k in active}
    pairs = {(w, u, o, d) for (w, u), s in uniq.items() for (o, d) in s}
    cnts = {k: len(v) for k, v in counts.items()}
    return user_week, pairs, cnts


def _as_sets(od):
    ws = od.week_starts
    uw = {(ws[w], u): (t, q) for w, u, t, q in od.user_week[["week", "user", "trips", "unique_trips"]]
          .itertuples(index=False)}
    pairs = {(ws[w], u, o, d) for w, u, o, d in od.pairs.itertuples(index=False)}
    cnts = {(ws[w], o, d): c for w, o, d, c in od.counts.itertuples(index=False)}
    return uw, pairs, cnts


@st.composite
def random_traces(draw):
    n_users = draw(st.integers(2, 4))
    base = pd.Timestamp(draw(st.sampled_from(["2024-11-01", "2024-03-07", "2024-01-05"])), tz="UTC")
    rows = []
    for u in range(n_users):
        n = draw(st.integers(1, 40))
        minutes = draw(st.lists(st.integers(0, 6 * 24 * 60), min_size=n, max_size=n))
        pts = draw(st.lists(st.integers(0, 5), min_size=n, max_size=n))
        rows += [(f"u{u}", base + pd.Timedelta(minutes=m), p) for m, p in zip(minutes, pts, strict=True)]
    return _traces(rows)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(df=random_traces(), tz=st.sampled_from(["UTC", "America/Los_Angeles", "Europe/Paris"]))
def test_vectorised_matches_loop_reference(df, tz):
    od = build_od(df, ODConfig(tz=tz), grid=GRID)
    got = _as_sets(od)
    ref = reference(df, GRID, tz)
    assert got[0] == ref[0]
    assert got[1] == ref[1]
    assert got[2] == ref[2]
    # unique trips never exceed trips; counts add up to the pairs table
    assert (od.user_week["unique_trips"] <= od.user_week["trips"]).all()
    assert od.counts["count"].sum() == len(od.pairs)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(df=random_traces(), tz=st.sampled_from(["UTC", "America/Los_Angeles"]), seed=st.integers(0, 2**16),
       cell_km2=st.sampled_from([0.5, 1.3, 6.0]))
def test_one_hour_index_for_several_grids_matches_loop_reference(df, tz, seed, cell_km2):
    """Rows in any order, several rows per hour (votes and ties), a grid that leaves some rows outside: the
    tables built from a shared HourIndex are the loop reference's on the rows inside, and the same as without it."""
    df = df.sample(frac=1.0, random_state=seed).reset_index(drop=True)
    hours = HourIndex.of(df, tz)
    small = SquareGrid.fit(P_LAT[:3], P_LON[:3], cell_km2, margin_cells=0)   # points 3.. fall outside
    for grid in (GRID, small):
        inside = grid.assign(df["lat"].to_numpy(), df["lon"].to_numpy()) >= 0
        if not inside.any():
            with pytest.raises(TraceFormatError, match="no trace row falls inside the grid"):
                build_od(df, ODConfig(tz=tz), grid=grid, hours=hours)
            continue
        od = build_od(df, ODConfig(tz=tz), grid=grid, hours=hours)
        assert _as_sets(od) == reference(df[inside], grid, tz)
        assert od.stats["rows_dropped"] == ({"outside_grid": int((~inside).sum())} if not inside.all() else {})
        plain = build_od(df, ODConfig(tz=tz), grid=grid)
        for a, b in ((od.user_week, plain.user_week), (od.pairs, plain.pairs), (od.counts, plain.counts)):
            pd.testing.assert_frame_equal(a, b)
        hl = hourly_locations(df[inside], grid, tz)     # the streaming engine's winner-takes-all
        assert int(od.stats["user_hours"]) == len(hl)


# --- the paper's example and the rules one by one ----------------------------------------------------------------

def test_39_trips_32_unique():
    """Houssiau et al. (2022) / Bassolas et al.: one author's 39 trips in a week were 32 unique trips."""
    t0 = pd.Timestamp("2024-01-08 06:10", tz="UTC")
    rows = [("me", t0 + pd.Timedelta(hours=h), h) for h in range(33)]            # 32 distinct moves
    rows += [("me", t0 + pd.Timedelta(hours=34 + h), h) for h in range(8)]        # a gap, then 7 repeats
    rows += [("other", t0, 0), ("other", t0 + pd.Timedelta(hours=1), 1)]
    od = build_od(_traces(rows), ODConfig(), grid=GRID)
    me = od.user_week[od.user_week["user"] == "me"].iloc[0]
    assert (me["trips"], me["unique_trips"]) == (39, 32)
    assert len(od.user_pairs("me")) == 32
    assert len(od.user_pairs("me", week=0)) == 32  # the week filter (read-only masks under copy-on-write)
    # pair 0 -> 1 made by both users: 2 distinct users; every other pair by "me" only
    c = od.week_counts(0)
    c01 = GRID.assign(P_LAT[[0, 1]], P_LON[[0, 1]])
    assert c.loc[(c["origin"] == c01[0]) & (c["destination"] == c01[1]), "count"].item() == 2
    assert c["count"].max() == 2


def test_winner_takes_all_and_ties():
    t = pd.Timestamp("2024-01-08 10:00", tz="UTC")
    m = pd.Timedelta(minutes=1)
    rows = [("a", t + 1 * m, 1), ("a", t + 2 * m, 2), ("a", t + 3 * m, 2), ("a", t + 4 * m, 1), ("a", t + 5 * m, 2),
            # next hour: tie between points 3 and 4 -> the lower cell id wins
            ("a", t + 61 * m, 4), ("a", t + 62 * m, 3),
            ("b", t, 0)]
    df = _traces(rows)
    hl = hourly_locations(df, GRID)
    a = hl[hl["user"] == "a"]
    cells = GRID.assign(P_LAT, P_LON)
    assert a["cell"].tolist() == [cells[2], min(cells[3], cells[4])]
    assert a["hour"].tolist() == [t, t + pd.Timedelta(hours=1)]


def test_no_trip_without_consecutive_hours_or_distinct_cells():
    t = pd.Timestamp("2024-01-08 10:30", tz="UTC")
    h = pd.Timedelta(hours=1)
    rows = [("a", t, 0), ("a", t + h, 0),        # same cell: no trip
            ("a", t + 3 * h, 1),                 # gap of two hours: no trip
            ("a", t + 4 * h, 2),                 # trip 1 -> 2
            ("b", t, 5)]
    od = build_od(_traces(rows), ODConfig(), grid=GRID)
    a = od.user_week[od.user_week["user"] == "a"].iloc[0]
    assert (a["trips"], a["unique_trips"]) == (1, 1)
    b = od.user_week[od.user_week["user"] == "b"].iloc[0]
    assert (b["trips"], b["unique_trips"]) == (0, 0)     # active user with no trip is kept


def test_weeks_start_monday_midnight_local_and_trip_goes_to_origin_week():
    # Sunday 2024-01-14 23:30 in Los Angeles = Monday 07:30 UTC; next hour is Monday 00:30 local.
    t = pd.Timestamp("2024-01-14 23:30", tz="America/Los_Angeles")
    rows = [("a", t, 0), ("a", t + pd.Timedelta(hours=1), 1), ("b", t, 0)]
    od = build_od(_traces(rows), ODConfig(tz="America/Los_Angeles"), grid=GRID)
    assert od.week_starts == ["2024-01-08", "2024-01-15"]
    assert od.pairs["week"].tolist() == [0]
    assert sorted(od.user_week[od.user_week["user"] == "a"]["week"]) == [0, 1]
    # In UTC both hours are on Monday 2024-01-15: one week only
    od_utc = build_od(_traces(rows), ODConfig(tz="UTC"), grid=GRID)
    assert od_utc.week_starts == ["2024-01-15"]


def test_dst_fall_back_hours_are_consecutive():
    # 2024-11-03 01:30 PDT (08:30 UTC) and 01:30 PST (09:30 UTC): one real hour apart -> a trip.
    rows = [("a", pd.Timestamp("2024-11-03 08:30", tz="UTC"), 0), ("a", pd.Timestamp("2024-11-03 09:30", tz="UTC"), 1),
            ("b", pd.Timestamp("2024-11-03 08:30", tz="UTC"), 0)]
    od = build_od(_traces(rows), ODConfig(tz="America/Los_Angeles"), grid=GRID)
    assert od.user_week["trips"].sum() == 1


def test_local_offsets_against_pandas():
    t = np.arange(1_698_000_000, 1_700_000_000, 7_777, dtype=np.int64)
    for tz in ("America/Los_Angeles", "Asia/Kolkata", "Australia/Lord_Howe", "UTC"):
        idx = pd.DatetimeIndex(t * 10**9).tz_localize("UTC").tz_convert(tz)
        expect = np.array([int(x.utcoffset().total_seconds()) for x in idx])
        np.testing.assert_array_equal(local_offsets(t, tz), expect)


def test_oddata_helpers_and_summary():
    t0 = pd.Timestamp("2024-01-08 06:10", tz="UTC")
    rows = [(u, t0 + pd.Timedelta(hours=h), (h + k) % 3) for k, u in enumerate(["a", "b", "c"]) for h in range(5)]
    od = build_od(_traces(rows), ODConfig(), grid=GRID)
    m = week_matrix(od, 0)
    assert m.shape == (GRID.n_cells, GRID.n_cells)
    assert m.sum() == od.week_counts(0)["count"].sum() == len(od.week_pairs(0))
    s = od.summary(threshold=2)
    assert s["users"] == 3
    assert s["trips"] == 12
    assert s["od_pairs_over_threshold"] == int((od.counts["count"] >= 2).sum())
    assert set(s["unique_trips_per_user_week"]) >= {"p10", "p50", "p90", "max"}
    cen = od.centroids()
    np.testing.assert_array_equal(GRID.assign(cen["lat"], cen["lon"]), cen["cell"])
    with pytest.raises(ParameterError, match="week"):
        od.week_counts(5)


def test_bad_inputs():
    with pytest.raises(ParameterError, match="cell_km2"):
        ODConfig(cell_km2=0)
    with pytest.raises(ParameterError, match="tz"):
        ODConfig(tz="Nowhere/Land")
    with pytest.raises(TraceFormatError, match="lat"):
        build_od(pd.DataFrame({"user": [1], "time": pd.to_datetime([0], utc=True)}), ODConfig(), grid=GRID)


def test_integer_users_keep_their_ids():
    t0 = pd.Timestamp("2024-01-08 06:10", tz="UTC")
    rows = [(u, t0 + pd.Timedelta(hours=h), h + u % 5) for u in (7, 42) for h in range(3)]
    od = build_od(_traces(rows), ODConfig(), grid=GRID)
    assert sorted(od.user_week["user"].tolist()) == [7, 42]
    assert od.pairs["user"].dtype.kind == "i"


# --- real data -----------------------------------------------------------------------------------------------------

@pytest.mark.realdata
def test_real_cabspotting_subset(shared_data):
    from odcore.data.traces import load_traces

    files = sorted((shared_data / "cabspotting_sf").glob("new_*.txt.gz"))[:8]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for f in files:
            z.write(f, arcname=f.name)
    tr = load_traces(io.BytesIO(buf.getvalue()), name="cabs.zip", bbox="auto")
    od = build_od(tr.df, ODConfig(tz="America/Los_Angeles"))
    assert od.week_starts == ["2008-05-19", "2008-05-26", "2008-06-02"]   # README: 3 full weeks from Mon May 19
    assert od.grid.crs == "EPSG:32610"                                   # San Francisco: UTM 10N
    uw = od.user_week
    assert (uw["unique_trips"] <= uw["trips"]).all()
    assert uw["trips"].sum() <= od.stats["user_hours"]
    assert od.counts["count"].max() <= 8


@pytest.mark.realdata
def test_real_gowalla_wide_extent_uses_equal_area(shared_data):
    from odcore.data.traces import load_traces

    tr = load_traces(shared_data / "gowalla_liu2017_1k", time_offset_s=28800)
    od = build_od(tr.df, ODConfig())
    assert "laea" in od.grid.crs            # worldwide data: equal-area projection, cells keep 1.3 km²
    assert od.user_week["user"].nunique() == 1000


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 60), min_size=1, max_size=80),
       st.floats(0, 100, allow_nan=False) | st.sampled_from([0.0, 10.0, 50.0, 90.0, 100.0]))
def test_histogram_percentile_and_median_equal_numpy_on_the_repeated_values(xs, p):
    from odcore.od.oddata import histogram_median, histogram_percentile

    x = np.array(xs, dtype=np.int64)
    v, w = np.unique(x, return_counts=True)
    assert histogram_percentile(v, w, p) == float(np.percentile(x, p))       # bit for bit, not approx
    assert histogram_median(v, w) == float(np.median(x))


def test_histogram_percentile_fails_when_wrong():
    # the check above can fail: one repeat fewer moves the percentile
    from odcore.od.oddata import histogram_percentile

    x = np.array([1, 2, 2, 7, 9, 9, 9], dtype=np.int64)
    v, w = np.unique(x, return_counts=True)
    assert histogram_percentile(v, w, 50) == 7.0
    assert histogram_percentile(v, w - (v == 2), 50) == 8.0 != float(np.percentile(x, 50))


def _aggregates_only(od):
    """``od`` as the Spark engine's user-level path returns it: the histogram and the number of people, no
    user-weeks (odcore.od.kernel.assemble with user_week=None)."""
    from odcore.od.kernel import assemble

    # absolute week number of week 0 (kernel.week_starts_of: Monday of week k is day 7k - 3 since 1970)
    week0 = int(pd.Timestamp(od.week_starts[0]).value // 10**9 // 86400 + 3) // 7
    h = od.user_week_histogram()
    return assemble(grid=od.grid, config=od.config, counts=od.counts.assign(week=od.counts["week"] + week0),
                    user_week=None, pairs=None, stats={**od.stats, "users": od.n_users},
                    user_week_counts=h.assign(week=h["week"] + week0))


def test_aggregates_only_oddata_gives_the_same_figures_and_refuses_per_user_use(tmp_path):
    """An ODData holding only the histogram of user-weeks gives the summary, busiest week and unique-trip figures
    of the full one (and those equal numpy on the per-user-week column); any use of its user_week raises a
    message that says what to do."""
    from dataclasses import replace

    from odcore.errors import AggregatesOnlyError
    from odcore.od.odtable import write_counts_folder

    rng = np.random.default_rng(4)
    t0 = pd.Timestamp("2024-01-08 00:10", tz="UTC")
    rows = [(f"u{u}", t0 + pd.Timedelta(hours=int(h)), int(rng.integers(0, 6)))
            for u in range(80) for h in np.sort(rng.choice(24 * 20, int(rng.integers(3, 60)), replace=False))]
    full = build_od(_traces(rows), ODConfig(), grid=GRID)
    agg = _aggregates_only(full)
    assert full.per_user
    assert not agg.per_user
    assert full.n_weeks == agg.n_weeks >= 3
    assert agg.week_starts == full.week_starts
    assert agg.summary(threshold=2) == full.summary(threshold=2)
    assert agg.busiest_week() == full.busiest_week()
    pd.testing.assert_frame_equal(agg.counts, full.counts)
    uw = full.user_week
    ut = uw["unique_trips"].to_numpy()
    s = full.summary(threshold=2)
    assert s["unique_trips_per_user_week"] == {"p10": float(np.percentile(ut, 10)), "p50": float(np.percentile(ut, 50)),
                                               "p90": float(np.percentile(ut, 90)), "max": int(ut.max()),
                                               "mean": float(ut.mean())}
    assert (s["users"], s["user_weeks"], s["trips"]) == (80, len(uw), int(uw["trips"].sum()))
    people = uw[uw["trips"] > 0].groupby("week").size()
    assert full.busiest_week() == (int(people.idxmax()), int(people.max()))
    for w in range(full.n_weeks):
        f = agg.unique_trips_figures(w)
        x = uw.loc[uw["week"] == w, "unique_trips"].to_numpy()
        assert (f["median"], f["max"], f["user_weeks"]) == (float(np.median(x)), int(x.max()), len(x))
        assert f == full.unique_trips_figures(w)
    # per-person uses refuse, naming what to do
    for use in (lambda: len(agg.user_week), lambda: agg.user_week["week"], lambda: agg.user_week.loc[0],
                lambda: list(agg.user_week), lambda: np.asarray(agg.user_week),
                lambda: write_counts_folder(agg, tmp_path / "c", source="x")):
        with pytest.raises(AggregatesOnlyError, match=r"user_week is not available.*keep_pairs=True"):
            use()
    assert not (tmp_path / "c").exists()
    assert not agg.stats["pairs_available"]
    assert len(agg.pairs) == 0
    again = replace(agg, stats={**agg.stats, "note": 1})            # replace, repr, pickle still work
    assert again.user_week == agg.user_week
    assert "WithheldTable('user_week')" in repr(again)
    import pickle

    assert pickle.loads(pickle.dumps(agg)).summary(threshold=2) == s
