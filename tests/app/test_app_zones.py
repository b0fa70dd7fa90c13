"""Zones in the app: the sidebar's zone kinds on every page (AppTest), zone uploads, exports the CLI reads back."""

from __future__ import annotations

import json
import re

import geopandas as gpd
import pytest
import shapely

from odapp.data.loading import load_sample, sample_ref
from odapp.data.zones_ui import BUNDLED_ZONES, apply_zone_upload, export_spec, zone_polygons, zone_spec
from odapp.shared.cli_config import release_config
from odapp.shared.state import K_ZONE_ERROR, K_ZONE_FILE, K_ZONE_KIND, K_ZONE_LABEL, Settings
from odcore.paths import REPO_ROOT
from odcore.space.polygons import read_zone_file
from odcore.space.zones import OUTSIDE_REASON
from tests.app.map_element import decks as map_decks

pytestmark = pytest.mark.timeout(600)

PAGES = ["pages/1_Data.py", "pages/2_OD_release.py", "pages/3_Attack.py"]


def _no_errors(at) -> None:
    assert not at.exception, [e.message for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def test_bundled_districts_on_every_page(at):
    at.switch_page("pages/1_Data.py").run()
    at.sidebar.radio(key="w.zone_kind").set_value("file").run()
    _no_errors(at)
    assert at.session_state[K_ZONE_KIND] == "file"
    cap = next(c.value for c in at.caption if "zones:" in c.value)
    assert "Bundled districts" in cap
    assert "40 zones (40 used)" in cap
    # the points outside every district are counted with their reason
    reasons = at.dataframe[0].value
    assert f"trips step: {OUTSIDE_REASON}" in set(reasons["reason"])
    for page in PAGES[1:]:
        at.switch_page(page).run()
        _no_errors(at)
        if page == "pages/2_OD_release.py":
            # zone outlines and names in the map's tooltips (cells and flows)
            deck = str(map_decks(at)[0])
            assert "'District 01 (zone 0)\\n" in deck
            assert " → District " in deck
    at.switch_page("pages/1_Data.py").run()
    at.sidebar.radio(key="w.zone_kind").set_value("h3").run()
    _no_errors(at)
    assert any("H3 hexagons, resolution 8" in c.value for c in at.caption)
    at.sidebar.number_input(key="w.h3_res").set_value(7).run()
    _no_errors(at)
    assert any("resolution 7" in c.value for c in at.caption)
    at.sidebar.button(key="preset").click().run()      # the Google/Bassolas preset puts the square grid back
    assert at.session_state[K_ZONE_KIND] == "square"


def test_h3_maps_tell_hexagons_apart_by_gaps_not_outline_segments(at):
    """H3 maps draw each hexagon at map_zones.GAP_SCALE of its size and no outline layer (thousands of segments cost
    every redraw in a browser without a GPU); the Data map draws only the hexagons that hold trace points, each
    with its count, and its legend says the empty ones are not drawn."""
    import h3
    import numpy as np

    from odapp.maps import zones as map_zones

    def decks():
        return map_decks(at)

    def ids(deck):
        return [layer["id"] for layer in deck["layers"]]

    at.switch_page("pages/1_Data.py").run()
    at.sidebar.radio(key="w.zone_kind").set_value("h3").run()
    _no_errors(at)
    (deck,) = decks()
    assert "cells" in ids(deck)
    assert "cells_edges" not in ids(deck)
    rows = deck["layers"][ids(deck).index("cells")]["data"]
    assert len(rows) > 300
    assert not [r for r in rows if r["tip"].endswith("\n0 trace points")]
    assert map_zones.EMPTY_ZONE_RGBA not in [r["color"] for r in rows]
    used = re.search(r"\(([\d,]+) used\)", " ".join(c.value for c in at.caption)).group(1)
    assert len(rows) == int(used.replace(",", ""))   # every hexagon with a trace point, and no other
    assert any("empty zones not drawn" in m.value for m in at.markdown)
    most = max(int(r["tip"].rsplit("\n", 1)[1].split()[0].replace(",", "")) for r in rows)
    legend = next(m.value for m in at.markdown if "Trace points per zone" in m.value)
    assert f"<span>{most:,}</span>" in legend   # the colour bar ends at the busiest zone's count
    at.switch_page("pages/2_OD_release.py").run()
    _no_errors(at)

    def hexagons_with_gaps(least: int) -> None:
        deck = decks()[0]
        assert "cells_edges" not in ids(deck)
        rows = deck["layers"][ids(deck).index("cells")]["data"]
        assert len(rows) > least
        for r in rows[::10]:                   # each drawn hexagon: its H3 cell, scaled about its centre
            cell = r["tip"].split(" ", 1)[0]
            ring = np.array([[lng, lat] for lat, lng in h3.cell_to_boundary(cell)])
            c = ring.mean(axis=0)
            assert np.asarray(r["polygon"]) == pytest.approx(c + (ring - c) * map_zones.GAP_SCALE, abs=6e-5)   # to 1e-4°

    # the published view draws only the zones of published pairs (a few dozen here), the raw counts view every
    # observed zone: over 300 at the resolution the module's sessions left (7 or 8)
    hexagons_with_gaps(0)
    at.selectbox(key="rel_view").set_value("Raw counts").run()
    try:
        _no_errors(at)
        hexagons_with_gaps(300)
    finally:
        at.selectbox(key="rel_view").set_value("Published").run()
    at.sidebar.radio(key="w.zone_kind").set_value("square").run()
    _no_errors(at)
    deck = decks()[0]                          # squares again: told apart by gaps on the release map too
    assert "cells_edges" not in ids(deck)
    assert {len(r["polygon"]) for r in deck["layers"][ids(deck).index("cells")]["data"]} == {4}
    assert at.session_state[K_ZONE_KIND] == "square"


def test_zone_file_maps_draw_each_zone_inset_without_outline_segments(at):
    """The bundled districts (a zone file) on the Data and OD release maps: each zone drawn inside its district,
    moved inward (map_zones.inset), no outline layer (every district is wide enough), empty zones pale grey."""
    import numpy as np

    def decks():
        return map_decks(at)

    def ids(deck):
        return [layer["id"] for layer in deck["layers"]]

    zones = read_zone_file(BUNDLED_ZONES)
    district = {int(c): shapely.Polygon(p) for c, p in
                zone_polygons(zones, np.arange(zones.n_cells))[["cell", "polygon"]].itertuples(index=False)}
    at.switch_page("pages/1_Data.py").run()
    at.sidebar.radio(key="w.zone_kind").set_value("file").run()
    _no_errors(at)
    assert any("empty zones drawn pale grey" in m.value for m in at.markdown)
    for page in ("pages/1_Data.py", "pages/2_OD_release.py"):
        at.switch_page(page).run()
        _no_errors(at)
        deck = decks()[0]
        assert "cells_edges" not in ids(deck), page
        rows = deck["layers"][ids(deck).index("cells")]["data"]
        assert len(rows) >= 20, page
        for r in rows:
            zone = int(re.search(r"\(zone (\d+)\)", r["tip"]).group(1))
            drawn = shapely.Polygon(r["polygon"])
            assert district[zone].contains(drawn), (page, zone)
            assert 0.5 < drawn.area / district[zone].area < 0.99, (page, zone)   # one gap for all: small ones lose more
    at.sidebar.radio(key="w.zone_kind").set_value("square").run()
    _no_errors(at)
    deck = decks()[0]                          # squares again: told apart by gaps on the release map too
    assert "cells_edges" not in ids(deck)
    assert {len(r["polygon"]) for r in deck["layers"][ids(deck).index("cells")]["data"]} == {4}


def test_zone_comparison_chart(at):
    at.switch_page("pages/1_Data.py").run()
    at.multiselect(key="zones_compare_pick").set_value(["h3:7", str(BUNDLED_ZONES)]).run()
    at.button(key="zones_compare_go").click().run()
    _no_errors(at)
    table = at.dataframe[-1].value
    assert list(table["zones"]) == ["H3 res 7 (5.2 km²)", "Bundled districts (40 Voronoi districts of the "
                                                          "synthetic city)"]
    # bigger zones (districts ~10 km² vs hexagons ~5 km²) publish a larger share of the user-trips
    pub = table["user-trips published"].tolist()
    assert pub[1] > pub[0]


def test_zone_upload_good_and_bad(tmp_path):
    state: dict = {}
    assert apply_zone_upload(state, BUNDLED_ZONES.read_bytes(), "my_districts.geojson")
    assert state[K_ZONE_KIND] == "file"
    assert state[K_ZONE_LABEL] == "my_districts.geojson (40 zones)"
    saved = read_zone_file(state[K_ZONE_FILE])
    assert saved.names([0]).tolist() == ["District 01"]
    good = state[K_ZONE_FILE]
    pts = tmp_path / "pts.geojson"
    gpd.GeoDataFrame(geometry=[shapely.Point(0, 0)], crs="EPSG:4326").to_file(pts)
    for data, name, words in ((b"{ nope", "bad.geojson", "not a readable"),
                              (pts.read_bytes(), "pts.geojson", "is a Point"),
                              (b"", "empty.gpkg", "empty"),
                              (b"x", "zones.csv", "unknown zone file type")):
        assert not apply_zone_upload(state, data, name)
        assert words in state[K_ZONE_ERROR]
        assert state[K_ZONE_ERROR].count("\n") == 0
        assert state[K_ZONE_FILE] == good           # the previous zones stay in use
    assert zone_spec(state) == (good, "my_districts.geojson (40 zones)")


def test_too_many_zones_are_refused(monkeypatch, tmp_path):
    import odapp.data.zones_ui as zu

    monkeypatch.setattr(zu, "MAX_APP_ZONES", 10)
    state: dict = {}
    assert not apply_zone_upload(state, BUNDLED_ZONES.read_bytes(), "d.geojson")
    assert "40 zones; at most 10" in state[K_ZONE_ERROR]


def test_exported_config_runs_in_the_cli(capsys, tmp_path):
    from odcore.cli import main

    spec, label = zone_spec({K_ZONE_KIND: "file"})
    s = Settings(dataset=sample_ref(), week=0, cell_km2=1.3, epsilon=0.66, threshold=100, seed=3, zones=spec,
                 zones_label=label)
    cfg = release_config(s, load_sample())
    assert cfg["zones"] == "sample_data/districts.geojson" == export_spec(str(BUNDLED_ZONES))
    assert "cell_km2" not in cfg
    f = tmp_path / "release.json"
    cfg["input"] = str(REPO_ROOT / cfg["input"])
    cfg["zones"] = str(REPO_ROOT / cfg["zones"])
    f.write_text(json.dumps(cfg))
    assert main(["release", "--config", str(f), "--out", str(tmp_path / "out"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["zones"]["kind"] == "polygons"
    assert out["zones"]["n_zones"] == 40


def test_zone_polygons_for_maps_handle_multipolygons():
    from odcore.space.polygons import PolygonZones

    gdf = gpd.GeoDataFrame({"name": ["two parts", "one"]},
                           geometry=[shapely.MultiPolygon([shapely.box(0, 0, 1, 1), shapely.box(2, 0, 3, 1)]),
                                     shapely.box(0, 2, 1, 3)], crs="EPSG:4326")
    df = zone_polygons(PolygonZones.from_geodataframe(gdf), [0, 1])
    assert df["cell"].tolist() == [0, 0, 1]
    assert df["name"].tolist() == ["two parts", "two parts", "one"]
    assert all(len(p) == 4 for p in df["polygon"])


@pytest.mark.parametrize("kind", ["h3", "file"])
def test_every_page_runs_on_hexagons_and_on_the_zone_file(at, kind):
    """Every page, with the sidebar on H3 hexagons or the bundled districts, draws without an error (the Release
    designer's comparison table once failed on a release that publishes nothing, as H3 res 8 does on the city)."""
    from odapp.shared.layout import PAGE_FILES

    at.switch_page("pages/0_Home.py").run()
    at.sidebar.radio(key="w.zone_kind").set_value(kind).run()
    _no_errors(at)
    for f in PAGE_FILES:
        at.switch_page(str(f.relative_to(REPO_ROOT))).run()
        _no_errors(at)
        assert at.session_state[K_ZONE_KIND] == kind
