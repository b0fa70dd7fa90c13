"""Location time-series L_u and sparse aggregates (Pyrgelis et al. 2018, §III-A, §V-A)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from odcore.errors import ParameterError, TraceFormatError
from odcore.knock.timeseries import (
    SFC_CELL_KM2,
    LocationTimeSeries,
    ROIGrid,
    TimeSeriesConfig,
    build_timeseries,
)

T0 = pd.Timestamp("2024-01-01 00:00", tz="UTC")  # a Monday


def traces(rows):
    """rows: (user, hours after T0, lat, lon)."""
    df = pd.DataFrame(rows, columns=["user", "h", "lat", "lon"])
    df["time"] = T0 + pd.to_timedelta(df["h"], unit="h")
    return df[["user", "time", "lat", "lon"]]


def random_traces(n_users=30, hours=24 * 14, points=600, seed=0):
    rng = np.random.default_rng(seed)
    u = np.repeat(np.arange(n_users), points)
    h = rng.uniform(0, hours, u.size)
    home = rng.uniform(0, 1, (n_users, 2))
    lat = 45 + 0.1 * np.clip(home[u, 0] + rng.normal(0, 0.2, u.size), 0, 0.999)
    lon = 7 + 0.1 * np.clip(home[u, 1] + rng.normal(0, 0.2, u.size), 0, 0.999)
    df = pd.DataFrame({"user": [f"u{i:03d}" for i in u], "time": T0 + pd.to_timedelta(h, unit="h"),
                       "lat": lat, "lon": lon})
    return df


BOX = (45.0, 7.0, 45.1, 7.1)  # S, W, N, E


def test_known_matrix_with_null_roi():
    # 2x2 grid over BOX; ROI id = row*2 + col, row 0 = south
    df = traces([
        ("a", 0.1, 45.01, 7.01),   # slot 0 ROI 0
        ("a", 0.5, 45.01, 7.01),   # duplicate in slot 0
        ("a", 1.2, 45.01, 7.09),   # slot 1 ROI 1
        ("a", 1.7, 45.09, 7.09),   # slot 1 ROI 3
        ("a", 2.5, 46.00, 7.00),   # slot 2 outside the grid -> null
        ("b", 3.5, 45.09, 7.01),   # slot 3 ROI 2
    ])
    ts = build_timeseries(df, TimeSeriesConfig(grid="bbox", bbox=BOX, shape=(2, 2), n_slots=4))
    assert ts.n_rois == 5
    assert ts.null_roi == 4
    assert ts.n_slots == 4
    d = ts.dense()
    a = np.zeros((5, 4))
    a[0, 0] = 1
    a[1, 1] = a[3, 1] = 1
    a[4, 2] = a[4, 3] = 1  # no report in slots 2 and 3
    b = np.zeros((5, 4))
    b[4, :3] = 1
    b[2, 3] = 1
    np.testing.assert_array_equal(d[0], a)
    np.testing.assert_array_equal(d[1], b)
    assert list(ts.users) == ["a", "b"]
    np.testing.assert_array_equal(ts.reports(), [5, 4])
    np.testing.assert_array_equal(ts.reports(include_null=False), [3, 1])
    assert ts.sensitivity() == 5
    assert ts.report["rows_not_used"] == {"outside_grid": 1}
    # every slot of every user has at least one ROI (the null one when nothing else)
    assert (d.sum(axis=1) >= 1).all()


def test_window_keeps_layout():
    ts = build_timeseries(random_traces(n_users=5, hours=48), TimeSeriesConfig(grid="bbox", bbox=BOX, shape=(3, 3)))
    full = ts.dense()
    np.testing.assert_array_equal(ts.dense(10, 30), full[:, :, 10:30])
    assert ts.sensitivity(10, 30) == int(full[:, :, 10:30].sum(axis=(1, 2)).max())


def test_aggregate_equals_loop_reference():
    ts = build_timeseries(random_traces(n_users=50), TimeSeriesConfig(grid="bbox", bbox=BOX))
    rng = np.random.default_rng(1)
    groups = np.array([rng.choice(ts.n_users, 7, replace=False) for _ in range(25)])
    got = ts.aggregate(groups, 24, 24 + 168)
    dense = ts.dense(24, 24 + 168)
    ref = np.zeros_like(got)
    for i, g in enumerate(groups):  # slow reference: Σ_{u in X} L_u (Table I)
        for u in g:
            ref[i] += dense[u]
    np.testing.assert_array_equal(got, ref)
    assert got.shape == (25, 101, 168)
    # the dense operand (sparse x dense for m <= 32, BLAS for larger groups) gives the same counts
    dense_op = ts.aggregation_operand(24, 24 + 168)
    assert isinstance(dense_op, np.ndarray)
    np.testing.assert_array_equal(ts.aggregate(groups, 24, 24 + 168, window=dense_op), ref)
    big = np.array([rng.choice(ts.n_users, 40, replace=False) for _ in range(4)])  # m > 32: BLAS path
    ref_big = np.stack([dense[g].sum(axis=0) for g in big])
    for op in (dense_op, ts.window(24, 24 + 168)):
        np.testing.assert_array_equal(ts.aggregate(big, 24, 24 + 168, window=op), ref_big)
    assert isinstance(ts.aggregation_operand(0, 10, max_dense_bytes=10), type(ts.window(0, 10)))


def test_auto_grid_reports_central_box():
    rng = np.random.default_rng(3)
    n = 20000
    df = pd.DataFrame({"user": rng.integers(0, 20, n).astype(str), "time": T0 + pd.to_timedelta(rng.uniform(0, 300, n), unit="h"),
                       "lat": 45.05 + 0.01 * rng.standard_normal(n), "lon": 7.05 + 0.01 * rng.standard_normal(n)})
    df.loc[0, "lat"] = 80.0  # a far glitch must not stretch the box
    ts = build_timeseries(df, TimeSeriesConfig())
    g = ts.grid
    assert g.rows == g.cols == 10
    assert 45.0 <= g.lat_min < g.lat_max <= 45.1
    assert ts.summary()["grid"]["rows"] == 10
    inside = g.assign(df["lat"].to_numpy(), df["lon"].to_numpy()) >= 0
    assert 0.95 < inside.mean() < 0.99  # about the central 98% in each coordinate


def test_sfc_grid_is_the_papers_shape():
    g = ROIGrid.sfc()
    assert g.n_cells == 100
    assert g.cell_km2() == pytest.approx(SFC_CELL_KM2, rel=5e-3)  # 0.18 sq mi
    assert SFC_CELL_KM2 == pytest.approx(0.4662, abs=1e-4)


def test_location_id_rois():
    df = traces([("a", 0.2, 0, 0), ("a", 1.2, 0, 0), ("b", 0.3, 0, 0)])
    df["loc"] = [7, 9, 9]
    ts = build_timeseries(df, TimeSeriesConfig(grid="loc", n_slots=2))
    assert ts.n_rois == 3
    assert ts.roi_labels == ("7", "9", "null")
    np.testing.assert_array_equal(ts.dense()[1], [[0, 0], [1, 0], [0, 1]])


def test_drops_are_counted_and_empty_users_dropped():
    df = traces([("a", 0.2, 45.01, 7.01), ("b", 0.3, 50.0, 7.0), ("a", 500, 45.01, 7.01)])
    ts = build_timeseries(df, TimeSeriesConfig(grid="bbox", bbox=BOX, n_slots=24))
    assert list(ts.users) == ["a"]
    assert ts.report["users_dropped_no_report_in_rois"] == 1
    assert ts.report["rows_not_used"] == {"outside_time_window": 1, "outside_grid": 1}


def test_save_load_roundtrip(tmp_path):
    ts = build_timeseries(random_traces(n_users=6, hours=30), TimeSeriesConfig(grid="bbox", bbox=BOX))
    ts.save(tmp_path / "s.npz")
    back = LocationTimeSeries.load(tmp_path / "s.npz")
    assert (back.matrix != ts.matrix).nnz == 0
    assert list(back.users) == list(ts.users)
    assert back.grid == ts.grid
    assert back.start == ts.start


def test_errors_name_the_problem():
    df = random_traces(n_users=2, hours=5)
    with pytest.raises(TraceFormatError, match="lat"):
        build_timeseries(df.drop(columns="lat"))
    with pytest.raises(TraceFormatError, match="tz-aware"):
        build_timeseries(df.assign(time=df["time"].dt.tz_localize(None)))
    with pytest.raises(ParameterError, match="bbox"):
        TimeSeriesConfig(grid="bbox")
    with pytest.raises(ParameterError, match="grid"):
        TimeSeriesConfig(grid="hexagons")
    with pytest.raises(ParameterError, match="lat_min"):
        ROIGrid(2, 1, 0, 1)
    with pytest.raises(ParameterError, match="no user"):
        build_timeseries(df, TimeSeriesConfig(grid="bbox", bbox=(0, 0, 1, 1)))
    ts = build_timeseries(df, TimeSeriesConfig(grid="bbox", bbox=BOX))
    with pytest.raises(ParameterError, match="outside"):
        ts.aggregate(np.array([[0, 5]]))
    with pytest.raises(ParameterError, match="t0"):
        ts.window(3, 2)
