"""Zone systems (odcore.space.zones): H3 vs h3's own latlng_to_cell, polygons vs geopandas sjoin, files and errors."""

from __future__ import annotations

import io
import json
import pickle
import zipfile

import geopandas as gpd
import h3
import numpy as np
import pandas as pd
import pytest
import shapely

from odcore.paths import SAMPLE_DATA_DIR
from odcore.space.grid import SquareGrid
from odcore.space.hexagons import H3Zones
from odcore.space.polygons import PolygonZones, read_zone_file, voronoi_districts
from odcore.space.zones import (
    OUTSIDE,
    OUTSIDE_REASON,
    ZoneFileError,
    ZoneSpec,
    make_zones,
    parse_zone_spec,
    zones_from_dict,
)

DISTRICTS = SAMPLE_DATA_DIR / "districts.geojson"


def _sjoin_lowest(zones_gdf: gpd.GeoDataFrame, lat: np.ndarray, lon: np.ndarray) -> np.ndarray:
    """Reference: geopandas sjoin (covers = intersects for points), lowest zone id per point, -1 if none."""
    pts = gpd.GeoDataFrame({"i": np.arange(lat.size)}, geometry=gpd.points_from_xy(lon, lat), crs="EPSG:4326")
    j = gpd.sjoin(pts, zones_gdf[["geometry"]].reset_index(drop=True), predicate="intersects", how="inner")
    out = np.full(lat.size, -1, dtype=np.int64)
    best = j.groupby("i")["index_right"].min()
    out[best.index.to_numpy()] = best.to_numpy()
    return out


def _tricky_points(zones: PolygonZones, rng: np.random.Generator, n_random: int = 20_000):
    """Random points over (and beyond) the zones' box, every vertex, points on edges, and far-outside points."""
    g = zones.polygons()
    x0, y0, x1, y1 = g.total_bounds
    dx, dy = (x1 - x0) * 0.1, (y1 - y0) * 0.1
    lon = [rng.uniform(x0 - dx, x1 + dx, n_random)]
    lat = [rng.uniform(y0 - dy, y1 + dy, n_random)]
    coords = shapely.get_coordinates(shapely.boundary(g.geometry.to_numpy()))
    lon.append(coords[:, 0])   # vertices: shared by 2-3 zones
    lat.append(coords[:, 1])
    a, b = coords[:-1], coords[1:]
    t = rng.uniform(0, 1, (len(a), 1))
    on = a + t * (b - a)       # on (or within rounding of) an edge
    lon.append(on[:, 0])
    lat.append(on[:, 1])
    lon.append(np.array([x0 - 1.0, x1 + 2.0, (x0 + x1) / 2]))   # far outside
    lat.append(np.array([y0, y1, y1 + 1.0]))
    return np.concatenate(lat), np.concatenate(lon)


# ---------------------------------------------------------------------------------------------------------------

def test_parse_zone_spec():
    assert parse_zone_spec("square:1.3") == ZoneSpec("square", 1.3)
    assert parse_zone_spec(" h3 : 7 ") == ZoneSpec("h3", 7)
    assert parse_zone_spec(str(DISTRICTS)) == ZoneSpec("file", str(DISTRICTS))
    assert str(parse_zone_spec("h3:8")) == "h3:8"
    for bad in ("h3:x", "h3:16", "h3:-1", "square:0", "square:abc", "hex:8", ""):
        with pytest.raises(ValueError, match="zones"):
            parse_zone_spec(bad)


def test_bundled_districts_file():
    z = read_zone_file(DISTRICTS)
    assert z.kind == "polygons"
    assert z.n_cells == 40
    assert z.names(np.array([0, 39])).tolist() == ["District 01", "District 40"]
    assert all(shapely.is_valid(z.geometries))
    assert DISTRICTS.stat().st_size < 100_000


def test_polygon_assignment_matches_sjoin_on_districts():
    z = read_zone_file(DISTRICTS)
    lat, lon = _tricky_points(z, np.random.default_rng(1))
    got = z.assign(lat, lon)
    ref = _sjoin_lowest(z.polygons(), lat, lon)
    np.testing.assert_array_equal(got, ref)
    # the test data really holds edge points covered by several zones and points outside every zone
    pts = gpd.GeoDataFrame(geometry=gpd.points_from_xy(lon, lat), crs="EPSG:4326")
    multi = gpd.sjoin(pts, z.polygons()[["geometry"]], predicate="intersects").index.value_counts()
    assert (multi >= 2).sum() > 100
    assert (got == OUTSIDE).sum() > 100


def test_polygon_assignment_matches_sjoin_with_overlaps_holes_and_multipolygons():
    # overlapping squares, a square with a hole, and a two-part multipolygon: lowest covering id wins
    sq = [shapely.box(0, 0, 2, 2), shapely.box(1, 1, 3, 3), shapely.box(0.5, 0.5, 1.5, 1.5),
          shapely.Polygon(shapely.box(4, 0, 7, 3).exterior.coords, [shapely.box(5, 1, 6, 2).exterior.coords]),
          shapely.MultiPolygon([shapely.box(5, 1, 6, 2), shapely.box(8, 0, 9, 1)])]
    gdf = gpd.GeoDataFrame({"name": list("abcde")}, geometry=sq, crs="EPSG:4326")
    z = PolygonZones.from_geodataframe(gdf)
    rng = np.random.default_rng(2)
    lat, lon = _tricky_points(z, rng, 30_000)
    grid = np.arange(-1, 10.01, 0.25)                        # lattice: exact corners and edges of every box
    glon, glat = (a.ravel() for a in np.meshgrid(grid, grid))
    lat, lon = np.concatenate([lat, glat]), np.concatenate([lon, glon])
    np.testing.assert_array_equal(z.assign(lat, lon), _sjoin_lowest(gdf, lat, lon))
    # (lat, lon): overlap -> lowest id; edge of 1 only; hole of 3 filled by 4; inside 3; hole ring (3 and 4) -> 3
    assert z.assign([1.0, 1.0, 1.5, 0.5, 1.5], [1.0, 2.5, 5.5, 4.5, 5.0]).tolist() == [0, 1, 4, 3, 3]


def test_polygon_assignment_large_random_zones_vs_sjoin():
    # 500 Voronoi zones, 200k random points: exercises the lookup raster's pure boxes and the exact path
    rng = np.random.default_rng(3)
    seeds = shapely.MultiPoint(rng.uniform(0, 1, (500, 2)))
    cells = shapely.get_parts(shapely.voronoi_polygons(seeds, extend_to=shapely.box(0, 0, 1, 1)))
    cells = shapely.intersection(cells, shapely.box(0, 0, 1, 1))
    gdf = gpd.GeoDataFrame(geometry=list(cells), crs="EPSG:4326")
    z = PolygonZones.from_geodataframe(gdf)
    lat, lon = _tricky_points(z, rng, 200_000)
    np.testing.assert_array_equal(z.assign(lat, lon), _sjoin_lowest(gdf, lat, lon))


def test_polygon_assignment_nan_points_are_outside():
    z = read_zone_file(DISTRICTS)
    c = z.centroids([3])
    out = z.assign([np.nan, c["lat"][0], 33.7], [-84.4, c["lon"][0], np.nan])
    assert out.tolist() == [OUTSIDE, 3, OUTSIDE]
    assert z.outside_reason == OUTSIDE_REASON == "outside every zone"


def test_h3_assignment_matches_h3_latlng_to_cell():
    rng = np.random.default_rng(4)
    lat = rng.uniform(33.5, 34.0, 20_000)
    lon = rng.uniform(-84.7, -84.1, 20_000)
    z = H3Zones.fit(lat, lon, 8)
    ids = z.assign(lat, lon)
    assert (ids >= 0).all()
    ref = [h3.latlng_to_cell(a, b, 8) for a, b in zip(lat, lon, strict=True)]
    assert z.names(ids).tolist() == ref
    # points on hexagon vertices and edges (h3 breaks those ties itself; we must agree exactly)
    some = z.cells[rng.choice(z.n_cells, 200, replace=False)]
    bnd = np.array([v for c in some for v in h3.cell_to_boundary(format(int(c), "x"))])
    mid = (bnd[:-1] + bnd[1:]) / 2
    pts = np.concatenate([bnd, mid])
    ids = z.assign(pts[:, 0], pts[:, 1])
    ref = [h3.latlng_to_cell(a, b, 8) for a, b in pts]
    inside = ids >= 0
    assert inside.mean() > 0.95
    assert z.names(ids[inside]).tolist() == [r for r, k in zip(ref, inside, strict=True) if k]
    assert all(h3.str_to_int(r) not in set(z.cells.tolist()) for r, k in zip(ref, inside, strict=True) if not k)
    # outside the fitted cover, NaN
    assert z.assign([40.0, np.nan], [-84.4, -84.4]).tolist() == [OUTSIDE, OUTSIDE]


def test_h3_fit_covers_the_box_with_a_margin():
    rng = np.random.default_rng(5)
    lat = rng.uniform(51.4, 51.6, 5000)
    lon = rng.uniform(-0.3, 0.1, 5000)
    z = H3Zones.fit(lat, lon, 9)
    ids = z.assign(rng.uniform(51.4, 51.6, 50_000), rng.uniform(-0.3, 0.1, 50_000))
    assert (ids >= 0).all()
    assert 0.1 < z.cell_km2 < 0.11   # h3 res 9 average area ≈ 0.105 km²
    poly = z.polygons([0, 1])
    assert poly.crs == "EPSG:4326"
    assert list(poly["name"]) == z.names([0, 1]).tolist()


@pytest.mark.parametrize("spec", ["square:2", "h3:7", "districts"])
def test_to_dict_and_pickle_round_trip(spec):
    d = pd.read_parquet(SAMPLE_DATA_DIR / "synthetic_city.parquet", columns=["lat", "lon"]).iloc[::50]
    lat, lon = d["lat"].to_numpy(), d["lon"].to_numpy()
    z = make_zones(str(DISTRICTS) if spec == "districts" else spec, lat, lon)
    ids = z.assign(lat, lon)
    import json

    z2 = zones_from_dict(json.loads(json.dumps(z.to_dict())))
    z3 = pickle.loads(pickle.dumps(z))
    np.testing.assert_array_equal(z2.assign(lat, lon), ids)
    np.testing.assert_array_equal(z3.assign(lat, lon), ids)
    assert z2.n_cells == z.n_cells
    assert z2.names([0]).tolist() == z.names([0]).tolist()
    assert parse_zone_spec(z.spec).kind == ("file" if spec == "districts" else spec.split(":")[0])


def test_square_grid_keeps_its_ids():
    lat = np.array([33.7, 33.8, 33.75])
    lon = np.array([-84.4, -84.3, -84.35])
    g = SquareGrid.fit(lat, lon, 1.3)
    z = make_zones("square:1.3", lat, lon)
    assert z == g
    np.testing.assert_array_equal(z.assign(lat, lon), g.assign(lat, lon))
    assert SquareGrid.from_dict(g.to_dict()) == g
    r, c = divmod(int(g.assign(lat[:1], lon[:1])[0]), g.n_cols)
    assert g.names(g.assign(lat[:1], lon[:1])).tolist() == [f"r{r}c{c}"]


# -- files ----------------------------------------------------------------------------------------------------

def test_zone_file_formats_and_crs(tmp_path):
    base = read_zone_file(DISTRICTS).polygons()
    rng = np.random.default_rng(6)
    lat, lon = _tricky_points(read_zone_file(DISTRICTS), rng, 5000)
    ref = read_zone_file(DISTRICTS).assign(lat, lon)
    utm = base.to_crs("EPSG:32616")
    gpkg = tmp_path / "zones.gpkg"
    utm.to_file(gpkg, driver="GPKG")
    shp_dir = tmp_path / "shp"
    shp_dir.mkdir()
    utm.to_file(shp_dir / "zones.shp")
    zpath = tmp_path / "zones.zip"
    with zipfile.ZipFile(zpath, "w") as zf:
        for f in shp_dir.iterdir():
            zf.write(f, f.name)
    for path in (gpkg, zpath):
        z = read_zone_file(path)
        assert z.n_cells == 40
        assert z.names([5]).tolist() == ["District 06"]
        got = z.assign(lat, lon)
        # the reprojection round trip moves vertices by < 1 mm: random points agree exactly (the edge and vertex
        # points at the end of the sample may fall either side)
        np.testing.assert_array_equal(got[:5000], ref[:5000])
        assert (got == ref).mean() > 0.8
    # upload (bytes + name) of the zipped Shapefile
    z = read_zone_file(io.BytesIO(zpath.read_bytes()), name="zones.zip")
    assert z.n_cells == 40


def test_zone_file_errors(tmp_path):
    with pytest.raises(ZoneFileError, match="not found"):
        read_zone_file(tmp_path / "nope.geojson")
    bad = tmp_path / "bad.geojson"
    bad.write_text("{ not json")
    with pytest.raises(ZoneFileError, match=r"bad.geojson: not a readable"):
        read_zone_file(bad)
    pts = tmp_path / "points.geojson"
    gpd.GeoDataFrame(geometry=gpd.points_from_xy([0, 1], [0, 1]), crs="EPSG:4326").to_file(pts)
    with pytest.raises(ZoneFileError, match=r"points.geojson: feature 0 is a Point; zones must be Polygons"):
        read_zone_file(pts)
    empty = tmp_path / "empty.geojson"
    empty.write_text('{"type": "FeatureCollection", "features": []}')
    with pytest.raises(ZoneFileError, match="no features"):
        read_zone_file(empty)
    many = tmp_path / "many.geojson"
    gpd.GeoDataFrame(geometry=[shapely.box(i, 0, i + 1, 1) for i in range(30)], crs="EPSG:4326").to_file(many)
    with pytest.raises(ZoneFileError, match="30 zones; at most 20"):
        read_zone_file(many, max_zones=20)
    with pytest.raises(ZoneFileError, match=r"unknown zone file type '\.csv'"):
        read_zone_file(io.BytesIO(b"a,b\n1,2\n"), name="zones.csv")
    with pytest.raises(ZoneFileError, match="empty"):
        read_zone_file(io.BytesIO(b""), name="z.geojson")
    with pytest.raises(ZoneFileError, match="no column 'nope'"):
        read_zone_file(DISTRICTS, name_column="nope")
    assert read_zone_file(many).names([0]).tolist() == ["zone 0"]


def test_voronoi_districts_are_reproducible_and_tile_the_disc():
    rng = np.random.default_rng(7)
    lat = 33.75 + rng.normal(0, 0.05, 20_000)
    lon = -84.39 + rng.normal(0, 0.06, 20_000)
    a = voronoi_districts(lat, lon, 12, rng=1)
    b = voronoi_districts(lat, lon, 12, rng=1)
    assert a.geometry.equals(b.geometry)
    assert len(a) == 12
    assert a.geometry.is_valid.all()
    assert list(a["name"])[:2] == ["District 01", "District 02"]
    # districts do not overlap (areas add up to their union's)
    eq = a.to_crs("+proj=cea +datum=WGS84 +units=m +no_defs")
    assert abs(eq.area.sum() - eq.union_all().area) / eq.area.sum() < 1e-6
    z = PolygonZones.from_geodataframe(a)
    out = z.assign(lat, lon)
    assert 0 < (out == OUTSIDE).mean() < 0.02   # radius_quantile 0.995 leaves ~0.5% outside


# -- the pipeline and the CLI on zones --------------------------------------------------------------------------

def _city(n_users: int | None = 300, every: int = 1) -> pd.DataFrame:
    """The bundled city's first ``n_users`` people (all if None), every ``every``-th of them, with all their fixes."""
    d = pd.read_parquet(SAMPLE_DATA_DIR / "synthetic_city.parquet")
    keep = d["user"].isin(d["user"].drop_duplicates().iloc[:n_users:every])
    return d.loc[keep].reset_index(drop=True)


@pytest.mark.parametrize("spec", ["h3:7", "districts"])
def test_build_od_on_zones_matches_loop_reference(spec):
    from odcore.od.trips import ODConfig, build_od
    from tests.odcore.od.test_trips import _as_sets, reference

    df = _city()
    cfg = ODConfig(tz="America/New_York", zones=str(DISTRICTS) if spec == "districts" else spec)
    od = build_od(df, cfg)
    z = od.grid
    assert z.kind == ("polygons" if spec == "districts" else "h3")
    ids = z.assign(df["lat"].to_numpy(), df["lon"].to_numpy())
    inside = df.loc[ids >= 0].reset_index(drop=True)
    if spec == "districts":
        assert od.stats["rows_dropped"] == {OUTSIDE_REASON: int((ids < 0).sum())}
        assert (ids < 0).sum() > 0
    assert _as_sets(od) == reference(inside, z, "America/New_York")
    assert od.summary()["cells"] == len(od.cells) <= z.n_cells


def test_cli_trips_with_zones_writes_names_and_geometry(capsys, tmp_path):
    from odcore.cli import main

    counts = tmp_path / "counts.csv"
    assert main(["trips", "--zones", str(DISTRICTS), "--json", "--counts-out", str(counts)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["zones"]["kind"] == "polygons"
    assert out["zones"]["n_zones"] == 40
    assert out["rows_dropped"][OUTSIDE_REASON] > 0
    table = pd.read_csv(counts)
    assert list(table.columns) == ["week", "origin", "origin_name", "destination", "destination_name", "count"]
    assert table["origin_name"].str.startswith("District ").all()
    geo = gpd.read_file(tmp_path / "counts.zones.geojson")
    assert set(geo["cell"]) == set(table["origin"]) | set(table["destination"])
    assert set(geo["name"]) >= set(table["origin_name"])


@pytest.mark.parametrize(("argv", "message"), [
    (["--zones", "missing.geojson"], "zone file not found: missing.geojson"),
    (["--zones", "hex:8"], "expected 'square:KM2', 'h3:RES' or a zone file path"),
    (["--zones", "h3:8", "--cell-km2", "2"], "give --zones or --cell-km2, not both"),
])
def test_cli_zone_errors_exit_2(capsys, argv, message):
    from odcore.cli import main

    assert main(["trips", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err
    assert err.count("\n") == 1


def test_compare_zones_matches_a_direct_run_and_bigger_zones_publish_more():
    from odcore.od.trips import ODConfig, build_od
    from odcore.privacy import attack
    from odcore.privacy.release import ReleaseConfig, release
    from odcore.privacy.utility import release_utility
    from odcore.report.zone_compare import compare_zones

    df = _city(2000)
    specs = ["square:1.3", "square:5", str(DISTRICTS)]
    t = compare_zones(df, specs, epsilon=0.66, threshold=10, rng=3)
    assert list(t["zones"]) == ["square:1.3", "square:5", str(DISTRICTS)]
    # row 1 by hand: same child stream of the seed
    od = build_od(df, ODConfig(zones="square:5"))
    w = int(t["week"][1])
    pairs = od.pairs[od.pairs["week"] == w]
    u = release_utility(release(pairs, ReleaseConfig(0.66, 10), rng=np.random.default_rng(3).spawn(3)[1]))
    assert t["pairs_published"][1] == u["pairs_published"]
    assert t["user_trips_published"][1] == u["trips_published"]
    risk, _ = attack.week_risk(pairs, w, 0.66, 10, counts=od.counts)
    assert t["median_success"][1] == pytest.approx(float(np.median(risk["success"])))
    # bigger zones: fewer pairs, more of the user-trips published, fewer distinct pairs per person
    assert t["od_pairs"].is_monotonic_decreasing
    assert t["user_trips_published_frac"].is_monotonic_increasing
    assert t["median_unique_pairs"].is_monotonic_decreasing
    assert t["rows_outside"].tolist()[:2] == [0, 0]
    assert t["rows_outside"][2] > 0


def test_cli_zones_compare_table(capsys, tmp_path):
    from odcore.cli import main

    city = tmp_path / "city.parquet"   # every fourth person of the bundled city: the same table, a quarter the work
    _city(n_users=None, every=4).to_parquet(city, index=False)
    assert main(["zones-compare", "--input", str(city), "--zones", "square:5", "h3:7", "--threshold", "50",
                 "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["zones"] for r in rows] == ["square:5", "h3:7"]
    assert {"pairs_published", "user_trips_published_frac", "median_success", "share_above_90pct"} <= set(rows[0])
    assert main(["zones-compare", "--zones", "square:5", "nope.gpkg"]) == 2
    assert "zone file not found: nope.gpkg" in capsys.readouterr().err


def test_cli_release_on_h3_writes_zone_names_and_geometry(capsys, tmp_path):
    from odcore.cli import main

    assert main(["release", "--zones", "h3:7", "--threshold", "50", "--seed", "1", "--out", str(tmp_path),
                 "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["zones"]["kind"] == "h3"
    table = pd.read_csv(tmp_path / "published.csv")
    assert len(table) > 0
    assert table["origin_name"].map(h3.is_valid_cell).all()
    geo = gpd.read_file(tmp_path / "zones.geojson")
    assert set(table["origin_name"]) <= set(geo["name"])
    # the centroid written for a zone is its hexagon's centre
    row = table.iloc[0]
    assert (row["origin_lat"], row["origin_lon"]) == pytest.approx(h3.cell_to_latlng(row["origin_name"]))


def test_h3_cells_depend_on_the_box_only():
    # engines that fit the zones from a streaming min/max pass must get the same ids as the in-memory fit
    rng = np.random.default_rng(8)
    lat = rng.uniform(33.6, 33.9, 30_000)
    lon = rng.uniform(-84.5, -84.2, 30_000)
    z_all = H3Zones.fit(lat, lon, 8)
    z_box = H3Zones.fit([lat.min(), lat.max()], [lon.min(), lon.max()], 8)
    np.testing.assert_array_equal(z_all.cells, z_box.cells)
