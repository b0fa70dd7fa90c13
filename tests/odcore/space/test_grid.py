"""Square grid: cell area, ids, centroids and polygons; UTM zone from the data, equal-area for wide data."""

from __future__ import annotations

import numpy as np
import pytest

from odcore.errors import ParameterError
from odcore.space.grid import SquareGrid, utm_epsg


def _city(n=2000, lat=37.77, lon=-122.42, seed=0):
    rng = np.random.default_rng(seed)
    return lat + rng.normal(0, 0.05, n), lon + rng.normal(0, 0.05, n)


def test_utm_zone_from_data():
    lat, lon = _city()
    g = SquareGrid.fit(lat, lon, 1.3)
    assert g.crs == "EPSG:32610"
    assert g.cell_km2 == pytest.approx(1.3)
    assert g.side_m == pytest.approx(1140.175, abs=1e-3)   # sqrt(1.3 km²)
    assert utm_epsg(-33.9, 151.2) == 32756


def test_every_point_gets_a_cell_and_same_cell_means_close():
    lat, lon = _city()
    g = SquareGrid.fit(lat, lon, 1.3)
    c = g.assign(lat, lon)
    assert (c >= 0).all()
    assert c.max() < g.n_cells
    # Points in the same cell are at most a diagonal apart (in metres, in the grid's CRS)
    x, y = g.project(lat, lon)
    for cell in np.unique(c)[:50]:
        m = c == cell
        assert np.ptp(x[m]) <= g.side_m + 1e-6
        assert np.ptp(y[m]) <= g.side_m + 1e-6


def test_outside_points_get_minus_one():
    lat, lon = _city()
    g = SquareGrid.fit(lat, lon, 1.3)
    assert g.assign([45.0], [-100.0])[0] == -1


def test_centroids_roundtrip_and_polygon_area():
    lat, lon = _city()
    g = SquareGrid.fit(lat, lon, 2.0)
    cells = np.unique(g.assign(lat, lon))
    cen = g.centroids(cells)
    np.testing.assert_array_equal(g.assign(cen["lat"], cen["lon"]), cells)
    poly = g.polygons(cells[:20])
    assert poly.crs.to_epsg() == 4326
    # Independent check of the area with geopandas in an equal-area CRS (UTM scale error < 0.1 % here)
    areas = poly.to_crs("+proj=cea +lon_0=-122.42 +datum=WGS84").area / 1e6
    np.testing.assert_allclose(areas, 2.0, rtol=2e-3)
    import geopandas as gpd

    pts = gpd.points_from_xy(cen["lon"].to_numpy()[:20], cen["lat"].to_numpy()[:20], crs="EPSG:4326")
    assert poly.contains(gpd.GeoSeries(pts, index=poly.index)).all()


def test_wide_extent_uses_equal_area_cells():
    rng = np.random.default_rng(1)
    lat, lon = rng.uniform(25, 49, 3000), rng.uniform(-124, -70, 3000)    # contiguous USA
    g = SquareGrid.fit(lat, lon, 1.3)
    assert "laea" in g.crs
    c = g.assign(lat, lon)
    assert (c >= 0).all()
    poly = g.polygons(np.unique(c)[:10])
    areas = poly.to_crs("+proj=cea +lon_0=-97 +datum=WGS84").area / 1e6
    np.testing.assert_allclose(areas, 1.3, rtol=1e-3)


def test_fit_is_deterministic_and_validates():
    lat, lon = _city()
    assert SquareGrid.fit(lat, lon) == SquareGrid.fit(lat, lon)
    with pytest.raises(ParameterError, match="cell_km2"):
        SquareGrid.fit(lat, lon, -1)
    with pytest.raises(ParameterError, match="zero points"):
        SquareGrid.fit([], [])
    g = SquareGrid.fit(lat, lon)
    with pytest.raises(ParameterError, match="cell ids"):
        g.centroids([g.n_cells])


def test_large_inputs_surrogate_matches_pyproj():
    """> 200,000 points use the polynomial surrogate; it must agree with pyproj to < 1 mm and on every cell."""
    from odcore.space.grid import transformer

    lat, lon = _city(300_000, seed=3)
    g = SquareGrid.fit(lat, lon, 1.3)
    x, y = g.project(lat, lon)
    xr, yr = transformer(g.crs, False).transform(lon, lat)
    assert np.abs(x - xr).max() < 1e-3
    assert np.abs(y - yr).max() < 1e-3
    ref = (np.floor((yr - g.y0) / g.side_m) * g.n_cols + np.floor((xr - g.x0) / g.side_m)).astype(np.int64)
    np.testing.assert_array_equal(g.assign(lat, lon), ref)
    # the boundary-based fit covers every point
    assert (g.assign(lat, lon) >= 0).all()


def test_surrogate_blocks_give_the_same_bits_as_one_pass():
    """The surrogate is evaluated in cache-sized blocks (2x faster on the bundled city): each point goes through the
    same operations, so blocks of any size give bit-identical coordinates (300,000 points: 10 blocks and a rest)."""
    from odcore.space.grid import _surrogate

    lat, lon = _city(300_000, seed=5)
    g = SquareGrid.fit(lat, lon, 1.3)
    sur = _surrogate(g.crs, lat, lon)
    assert sur is not None
    x1, y1 = sur._eval(lat, lon)                 # one pass over all points
    xb, yb = sur(lat, lon)                       # blocks of CHUNK points
    assert lat.size > 9 * sur.CHUNK
    np.testing.assert_array_equal(xb, x1)
    np.testing.assert_array_equal(yb, y1)


def _reference_cells_of_xy(g: SquareGrid, x, y) -> np.ndarray:
    """SquareGrid.cells_of_xy as first written (whole-array passes): the ids the chunked version must equal."""
    x = (np.asarray(x, dtype=np.float64) - g.x0) / g.side_m
    y = (np.asarray(y, dtype=np.float64) - g.y0) / g.side_m
    x, y = np.floor(x), np.floor(y)
    with np.errstate(invalid="ignore"):
        ok = (x >= 0) & (x < g.n_cols) & (y >= 0) & (y < g.n_rows)
    x[~ok] = 0
    y[~ok] = 0
    out = y.astype(np.int64) * g.n_cols + x.astype(np.int64)
    out[~ok] = -1
    return out


@pytest.mark.parametrize("chunk", [7, 1 << 15])
def test_cells_of_xy_equal_the_whole_array_reference(monkeypatch, chunk):
    """Chunk by chunk, inside and outside the grid, on cell edges, with NaN and in 2-d: the same ids."""
    monkeypatch.setattr(SquareGrid, "CHUNK", chunk)
    lat, lon = _city(n=100_003, seed=4)
    g = SquareGrid.fit(lat, lon, 1.3)
    x, y = g.project(lat, lon)
    x0, y0 = x.copy(), y.copy()
    rng = np.random.default_rng(5)
    np.testing.assert_array_equal(g.cells_of_xy(x, y), _reference_cells_of_xy(g, x, y))
    np.testing.assert_array_equal(x, x0)                     # the inputs are not modified
    np.testing.assert_array_equal(y, y0)
    far = x + rng.choice([0.0, 0.0, 0.0, 1e6, -1e6], size=x.size)
    edge = g.x0 + g.side_m * rng.integers(-2, g.n_cols + 3, size=x.size).astype(float)
    nan = np.where(rng.random(x.size) < 0.01, np.nan, y)
    for xx, yy in ((far, y), (edge, y), (x, nan), (far[:10], nan[:10]), (x[:0], y[:0])):
        got, want = g.cells_of_xy(xx, yy), _reference_cells_of_xy(g, xx, yy)
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, want)
    far_cells = g.cells_of_xy(far, y)
    assert (far_cells == -1).any()
    assert (far_cells >= 0).any()
    square = g.cells_of_xy(x[:100].reshape(10, 10), y[:100].reshape(10, 10))
    np.testing.assert_array_equal(square, _reference_cells_of_xy(g, x[:100], y[:100]).reshape(10, 10))
