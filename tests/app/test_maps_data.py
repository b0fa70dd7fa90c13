"""The Data page's map of trace points on the bundled city: the deck it sends is byte for byte the deck the first
version of :func:`odapp.maps.zones.trace_density_deck` made (kept below as the reference), on square grids of three sizes,
H3 hexagons and the bundled districts; and the outlines of the bundled city's squares are the ones the greedy
reference of ``tests/app/test_app_maps.py`` draws."""

from __future__ import annotations

import numpy as np
import pytest

from odapp.maps import deck as map_deck
from odapp.maps import flows as map_flows
from odapp.maps import zones as map_zones
from odapp.shared.words import num

pytestmark = pytest.mark.timeout(300)


def _reference_trace_density_deck(cells_df, grid):
    """trace_density_deck as it was before its tooltips and colours were made from arrays (and with empty squares
    drawn by their outlines alone)."""
    logp = np.log10(cells_df["points"].to_numpy() + 1)
    vmax = float(logp.max()) if len(logp) else 1.0
    empty = cells_df["points"].to_numpy() == 0
    outline = map_zones.outline_style(grid)
    blank = [255, 255, 255, 0] if outline == "lines" else map_zones.EMPTY_ZONE_RGBA
    cells_df = cells_df.copy()
    cells_df["color"] = [blank if e else c for c, e in zip(map_deck.ramp(logp, 0, vmax, alpha=190), empty, strict=True)]
    square = getattr(grid, "kind", "square") == "square"
    cells_df["tip"] = [f"{map_flows.zone_label(c, None if square else n)}\n{num(int(p))} trace points" for n, c, p in
                       zip(cells_df["name"], cells_df["cell"], cells_df["points"], strict=True)]
    cent = grid.centroids(cells_df.loc[~empty, "cell"].to_numpy())
    edges = None
    if outline == "lines":   # empty squares: every cell's outline, no polygon
        edges = map_zones.outline_edges(cells_df["polygon"].tolist())
        cells_df = cells_df[~empty]
    d = map_deck.deck([*map_zones.grid_layers(cells_df, outline=outline, edges=edges),
                   *map_deck.scale_bar_layers(cent["lat"], cent["lon"])],
                  map_deck.view_state(cent["lat"], cent["lon"], height_px=480), frozen=True)
    return d, vmax


@pytest.fixture(scope="module")
def city():
    from odapp.data import loading
    from odcore.od.trips import HourIndex

    if not loading.SAMPLE_FILE.is_file():
        pytest.skip("bundled sample missing (make sample-data)")
    df = loading.load_sample().df
    return df, HourIndex.of(df, "UTC")


def _map_rows(city, spec: str):
    """The rows the Data page maps (``cell, name, polygon, points``) and the zones, for a zone spec or a cell area."""
    from odapp.data.zones_ui import zone_polygons
    from odcore.od.oddata import ODConfig
    from odcore.od.trips import grid_of_frame

    df, hours = city
    config = ODConfig(cell_km2=float(spec), tz="UTC") if spec[0].isdigit() else ODConfig(tz="UTC", zones=spec)
    grid = grid_of_frame(df, config)
    cells = hours.cells(grid)
    points = np.bincount(cells[cells >= 0], minlength=grid.n_cells)
    shapes = zone_polygons(grid, np.arange(grid.n_cells))
    return shapes.assign(points=points[shapes["cell"].to_numpy()]), grid


@pytest.mark.parametrize("spec", ["1.5", "1.6", "0.5", "h3:8", "sample_data/districts.geojson"])
def test_data_map_deck_is_the_reference_deck_byte_for_byte(city, spec):
    rows, grid = _map_rows(city, spec)
    got, vmax = map_zones.trace_density_deck(rows, grid)
    want, want_vmax = _reference_trace_density_deck(rows, grid)
    assert vmax == want_vmax
    fit = got.fit   # the box the map element fits at its real size: checked apart (the reference has none)
    text = got.to_json()
    assert text.startswith('{"fit":[')
    assert "{" + text[text.index("],") + 2:] == want.to_json()
    # it holds the mapped zones' centres (between their 0.5th and 99.5th percentiles) and the scale bar under them
    cent = grid.centroids(rows.loc[rows["points"].to_numpy() > 0, "cell"].to_numpy())
    lon0, lat0, lon1, lat1, pad = fit
    assert pad > 0
    assert lon0 <= np.percentile(cent["lon"], 1)
    assert np.percentile(cent["lon"], 99) <= lon1
    assert lat0 <= np.percentile(cent["lat"], 1)
    assert np.percentile(cent["lat"], 99) <= lat1
    bar = map_deck.scale_bar(cent["lat"], cent["lon"])[0]
    assert lat0 <= min(p[1] for p in bar) + 1e-5   # the box is written to 5 decimals
    assert ('"id":"cells_edges"' in got.to_json()) == spec[0].isdigit()   # squares' outlines as lines


@pytest.mark.parametrize("spec", ["1.5", "1.3"])
def test_bundled_city_outlines_equal_the_greedy_reference(city, spec):
    from tests.app.test_app_maps import reference_outline_edges

    rows, _ = _map_rows(city, spec)
    polys = rows["polygon"].tolist()
    got, want = map_zones.outline_edges(polys), reference_outline_edges(polys)
    assert len(got) < len(polys)            # the grid lines joined: far fewer segments than cells
    assert got.tobytes() == want.tobytes()


def test_unique_rows_is_numpys_unique_rows():
    """By lexsort when no -0.0 or NaN can make equal rows differ in their bytes, else by np.unique itself."""
    rng = np.random.default_rng(3)
    for trial in range(60):
        x = np.round(rng.integers(0, 4, size=(int(rng.integers(0, 40)), 4)) * 0.5 - 1, 1)
        if trial % 3 == 1:
            x[rng.random(x.shape) < 0.2] = -0.0
        if trial % 3 == 2:
            x[rng.random(x.shape) < 0.05] = np.nan
        got, want = map_zones.unique_rows(x), np.unique(x, axis=0)
        assert got.shape == want.shape
        assert got.tobytes() == want.tobytes(), trial


@pytest.mark.parametrize("cells", [[0, 3, 3, 9], [-1, 3, -1, 9, 0], [], [-1]])
def test_cell_density_counts_the_rows_of_each_cell_and_those_outside(monkeypatch, cells):
    from types import SimpleNamespace

    from odapp.data import cache as data_cache

    cells = np.asarray(cells, dtype=np.int64)
    hours = SimpleNamespace(cells=lambda grid: cells)
    monkeypatch.setattr(data_cache, "hour_index", lambda *a, **k: hours)
    density, outside = data_cache.cell_density.__wrapped__("x", SimpleNamespace(tz="UTC"), None,
                                                      SimpleNamespace(n_cells=10))
    np.testing.assert_array_equal(density["points"].to_numpy(), np.bincount(cells[cells >= 0], minlength=10))
    np.testing.assert_array_equal(density["cell"].to_numpy(), np.arange(10))
    assert outside == int((cells < 0).sum())


def test_empty_squares_are_drawn_by_their_outlines_alone(city):
    """On squares an empty cell sends no polygon (it would be transparent: only a "0 trace points" tooltip); every
    cell's outline is still drawn, the empty ones' included. Where zones are told apart by gaps, an empty zone the
    deck is given is drawn pale grey (the Data page gives it a zone file's, not H3's: test_empty_zones_drawn)."""
    import json

    rows, grid = _map_rows(city, "1.3")
    empty = rows["points"].to_numpy() == 0
    assert empty.sum() > 100
    layers = {x["id"]: x for x in json.loads(map_zones.trace_density_deck(rows, grid)[0].to_json())["layers"]}
    cells = layers["cells"]["data"]
    assert len(cells) == int((~empty).sum())
    assert not [r for r in cells if r["tip"].endswith("\n0 trace points")]
    edges = np.array([[*e["s"], *e["t"]] for e in layers["cells_edges"]["data"]])
    assert edges.tobytes() == map_zones.outline_edges(rows["polygon"].tolist()).tobytes()
    assert len(edges) > len(map_zones.outline_edges(rows.loc[~empty, "polygon"].tolist()))   # more than the filled ones'
    rows, grid = _map_rows(city, "h3:8")
    cells = json.loads(map_zones.trace_density_deck(rows, grid)[0].to_json())["layers"][0]["data"]
    assert len(cells) == len(rows)
    assert any(r["tip"].endswith("\n0 trace points") for r in cells)


def test_empty_zones_drawn():
    """The Data map draws the empty zones of squares (outlines) and of a zone file (pale grey), not the empty H3
    hexagons of the box fitted around the data, and none above MAX_GRID_CELLS_DRAWN zones; the page's legend
    follows the same function."""
    from types import SimpleNamespace

    from odapp.data import cache as data_cache

    assert data_cache.empty_zones_drawn(SimpleNamespace(kind="square", n_cells=1_000))
    assert data_cache.empty_zones_drawn(SimpleNamespace(kind="polygons", n_cells=40))
    assert not data_cache.empty_zones_drawn(SimpleNamespace(kind="h3", n_cells=1_000))
    assert not data_cache.empty_zones_drawn(SimpleNamespace(kind="square", n_cells=data_cache.MAX_GRID_CELLS_DRAWN + 1))
    assert data_cache.empty_zones_drawn(SimpleNamespace(kind="square", n_cells=data_cache.MAX_GRID_CELLS_DRAWN))
