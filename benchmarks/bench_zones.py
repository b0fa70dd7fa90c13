"""Points into zones: ``odcore.space.zones`` against geopandas' plain ``sjoin`` on the same data.

Input: 2,000 Voronoi districts of a city (``odcore.space.polygons.voronoi_districts`` on a synthetic city of 1.2 M points
around Atlanta, so districts are small in the dense centre and large outside) and 10 million points (1 million
with ``--quick``) drawn from the same city plus 3 % uniform over a box 20 % wider than the districts (many fall
outside every district). Ours: :meth:`PolygonZones.assign` (index built inside the timing). Baseline: geopandas
``sjoin(points, zones, predicate="intersects")`` then the lowest zone id per point (the same rule), points built
with ``points_from_xy`` inside its timing. Both answers are compared point by point. Also: H3 res 8 (h3's
``latlng_to_cell`` on every point) and the square grid, on the same points.
"""

from __future__ import annotations

import gc
import os
import time

import numpy as np

CENTRE = (33.749, -84.388)


def _city(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A dense centre and suburbs (two normal components) plus 3 % uniform points over a wider box."""
    k = rng.random(n)
    lat = np.where(k < 0.5, rng.normal(CENTRE[0], 0.03, n), rng.normal(CENTRE[0], 0.09, n))
    lon = np.where(k < 0.5, rng.normal(CENTRE[1], 0.036, n), rng.normal(CENTRE[1], 0.11, n))
    u = rng.random(n) < 0.03
    lat[u] = rng.uniform(CENTRE[0] - 0.45, CENTRE[0] + 0.45, int(u.sum()))
    lon[u] = rng.uniform(CENTRE[1] - 0.55, CENTRE[1] + 0.55, int(u.sum()))
    return lat, lon


def _timed(fn, *a):
    """``(result, wall seconds, CPU seconds of this process)``: on a shared machine the CPU time says what the
    run costs, the wall time what it took under the load of the moment."""
    gc.collect()
    t, c = time.perf_counter(), time.process_time()
    out = fn(*a)
    return out, time.perf_counter() - t, time.process_time() - c


def _sjoin_lowest(gdf, lat, lon) -> np.ndarray:
    import geopandas as gpd

    pts = gpd.GeoDataFrame(geometry=gpd.points_from_xy(lon, lat), crs="EPSG:4326")
    j = gpd.sjoin(pts, gdf[["geometry"]], predicate="intersects", how="inner")
    out = np.full(lat.size, -1, dtype=np.int64)
    best = j.groupby(level=0)["index_right"].min()
    out[best.index.to_numpy()] = best.to_numpy()
    return out


def run(quick: bool) -> list[dict]:
    from odcore.space.grid import SquareGrid
    from odcore.space.hexagons import H3Zones
    from odcore.space.polygons import PolygonZones, voronoi_districts

    rng = np.random.default_rng(16)
    n_points = 1_000_000 if quick else 10_000_000
    slat, slon = _city(1_200_000, rng)
    inner = (np.abs(slat - CENTRE[0]) < 0.35) & (np.abs(slon - CENTRE[1]) < 0.42)
    gdf = voronoi_districts(slat[inner], slon[inner], 2000, rng=rng, radius_quantile=0.99)
    lat, lon = _city(n_points, rng)
    case = f"{n_points / 1e6:g}M points, {len(gdf):,} polygons"
    load = os.getloadavg()[0]

    def ours():
        return PolygonZones.from_geodataframe(gdf).assign(lat, lon)

    got, t_ours, c_ours = _timed(ours)
    ref, t_base, c_base = _timed(_sjoin_lowest, gdf, lat, lon)
    diff = int((got != ref).sum())
    if diff:
        raise AssertionError(f"odcore.space.zones and geopandas sjoin disagree on {diff} points")
    outside = float((got < 0).mean())
    del ref
    gc.collect()
    h3z = H3Zones.fit(lat[::100], lon[::100], 8)
    _, t_h3, c_h3 = _timed(h3z.assign, lat, lon)
    grid = SquareGrid.fit(lat, lon, 1.3)
    _, t_sq, c_sq = _timed(grid.assign, lat, lon)
    note_load = f"1-min load average {load:.1f} on {os.cpu_count()} cores at start"
    return [
        {"case": case, "metric": "PolygonZones.assign wall time", "value": t_ours, "unit": "s",
         "baseline": "geopandas sjoin", "ratio": t_base / t_ours,
         "note": f"sjoin {t_base:.1f} s; ratio = speed-up; answers identical; {outside:.1%} outside every zone; "
                 f"{note_load}"},
        {"case": case, "metric": "PolygonZones.assign CPU time", "value": c_ours, "unit": "s",
         "baseline": "geopandas sjoin CPU time", "ratio": c_base / c_ours,
         "note": f"sjoin {c_base:.1f} CPU s; CPU seconds of this process (single-threaded), what the wall time "
                 "would be on an idle core"},
        {"case": case, "metric": "geopandas sjoin wall time", "value": t_base, "unit": "s", "baseline": None,
         "ratio": None, "note": "points_from_xy + sjoin(predicate='intersects') + lowest zone id per point"},
        {"case": case, "metric": "throughput", "value": n_points / t_ours / 1e6, "unit": "M points/s",
         "baseline": None, "ratio": None, "note": "index build included"},
        {"case": f"{n_points / 1e6:g}M points", "metric": "H3Zones.assign (res 8) wall time", "value": t_h3,
         "unit": "s", "baseline": "SquareGrid.assign", "ratio": t_h3 / t_sq,
         "note": f"{h3z.n_cells:,} hexagons; square grid {t_sq:.2f} s; ratio = how much slower than squares; "
                 f"CPU {c_h3:.1f} s vs {c_sq:.2f} s"},
    ]
