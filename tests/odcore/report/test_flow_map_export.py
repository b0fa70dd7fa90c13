"""The exported flow map (odcore.report.figures.flow_map_figure, published_map_frames; odcore.cli.release.published_map):
the screen's places and flows at every size, no place circle over an arrow, the legend off the data area, and the
published map a function of the published table alone."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pandas as pd
import pytest
import shapely

from odcore.cli.common import od_from_args
from odcore.cli.release import published_map
from odcore.paths import SAMPLE_DATA_DIR
from odcore.privacy.release import ReleaseConfig, release_with_report
from odcore.report import figures

CITY = str(SAMPLE_DATA_DIR / "synthetic_city.parquet")
SIZES = [figures.FigureSize.preset(p) for p in figures.SIZE_PRESETS] + [figures.MAP_SIZE,
                                                                       figures.map_size(3.5, 2.6)]


@pytest.fixture(scope="module", params=["city", "districts"])
def week(request):
    """``(od, table, cfg)``: the bundled city's first week at the page's defaults (ε 0.66, threshold 100, seed 0),
    on its 1.3 km² squares and on the bundled districts (a zone file with names)."""
    zones = None if request.param == "city" else str(SAMPLE_DATA_DIR / "districts.geojson")
    _, od = od_from_args(argparse.Namespace(input=CITY, zones=zones, cell_km2=1.3, tz="auto"))
    pairs = od.pairs.loc[od.pairs["week"] == od.pairs["week"].min()]
    cfg = ReleaseConfig(epsilon=0.66, threshold=100)
    return od, release_with_report(pairs, cfg, rng=0).table, cfg


def _rings(trace) -> list[np.ndarray]:
    """The None-separated rings of a filled trace."""
    out, cur = [], []
    for x, y in zip(trace.x, trace.y, strict=True):
        if x is None:
            if cur:
                out.append(np.array(cur))
            cur = []
        else:
            cur.append((x, y))
    if cur:
        out.append(np.array(cur))
    return out


def _px(fig, ring: np.ndarray) -> np.ndarray:
    """Data coordinates to the figure's px (x right, y down), from the axes' ranges and the margins."""
    m, lay = fig.layout.margin, fig.layout
    pw, ph = lay.width - m.l - m.r, lay.height - m.t - m.b
    (x0, x1), (y0, y1) = lay.xaxis.range, lay.yaxis.range
    return np.column_stack([m.l + (ring[:, 0] - x0) / (x1 - x0) * pw, m.t + (y1 - ring[:, 1]) / (y1 - y0) * ph])


def check_map(fig) -> None:
    """No place circle overlaps an arrow (shapely, in px), the axes keep the map's aspect, every legend row and
    swatch lies outside the data area (paper coordinates outside the unit square), type at least 7 pt."""
    m, lay = fig.layout.margin, fig.layout
    pw, ph = lay.width - m.l - m.r, lay.height - m.t - m.b
    (x0, x1), (y0, y1) = lay.xaxis.range, lay.yaxis.range
    assert (x1 - x0) / pw == pytest.approx((y1 - y0) / ph, rel=1e-6)       # one km is as wide as it is high
    circles = [shapely.Polygon(_px(fig, r)) for t in fig.data if t.name == "places" for r in _rings(t)]
    arrows = [shapely.Polygon(_px(fig, r)).buffer(0) for t in fig.data
              if t.name and (t.name.startswith("flows class") or t.name == "suppressed flows") for r in _rings(t)]
    for i, c in enumerate(circles):
        for j, a in enumerate(arrows):
            assert not c.intersects(a), f"place circle {i} overlaps arrow {j} ({c.intersection(a).area:.2f} px²)"
    legend = [a for a in lay.annotations if a.name == "legend"] + [s for s in lay.shapes if s.name == "legend"]
    assert legend
    for el in legend:
        xs = [el.x] if hasattr(el, "text") else [el.x0, el.x1]
        ys = [el.y] if hasattr(el, "text") else [el.y0, el.y1]
        outside = min(xs) >= 1 - 1e-9 or max(ys) <= 1e-9
        assert outside, f"legend element at x {xs}, y {ys} is over the data area"
    for a in lay.annotations:
        if a.name in ("legend", "scale bar", "empty note"):
            assert a.font.size >= 7 * 96 / 72 - 1e-6, (a.text, a.font.size)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s.width_in:g}x{s.height_in:g}-{s.legend}")
def test_published_map_at_every_size_keeps_circles_off_arrows_and_the_legend_off_the_map(week, size):
    od, table, cfg = week
    fig = published_map(table, od, cfg, title="Published OD flows, week 0", top_n=None, size=size)
    assert any(t.name and t.name.startswith("flows class") for t in fig.data)
    check_map(fig)
    assert fig.layout.width == size.width_px


def test_example_map_with_suppressed_flows_and_shading_keeps_circles_off_arrows():
    from tests.odcore.report.test_figures import example_map_frames

    cells, flows = example_map_frames()
    fig = figures.flow_map_figure(cells, flows, title="t", count_label="noisy count")
    assert any(t.name == "suppressed flows" for t in fig.data)
    for size in SIZES:
        check_map(figures.flow_map_at(fig, size))


def test_check_map_finds_a_circle_on_an_arrow():
    """The check above can fail: a circle moved onto an arrow's middle is found."""
    from tests.odcore.report.test_figures import example_map_frames

    cells, flows = example_map_frames()
    fig = figures.flow_map_figure(cells, flows, title="t")
    arrow = next(t for t in fig.data if t.name and t.name.startswith("flows class"))
    mid = _rings(arrow)[0].mean(axis=0)
    places = next(t for t in fig.data if t.name == "places")
    ring = _rings(places)[0]
    moved = list(zip(*(ring - ring.mean(axis=0) + mid).tolist(), strict=True))
    places.x = [*moved[0], None, *places.x]
    places.y = [*moved[1], None, *places.y]
    with pytest.raises(AssertionError, match="overlaps arrow"):
        check_map(fig)


def test_published_map_draws_the_pages_places_and_flows(week):
    """Export = screen: the places and flows of the published map are those the OD release page draws at the same
    settings (odapp.maps.od_map.release_maps, Published, Top N auto, merged at the page's map size)."""
    from odapp.maps.od_map import release_maps

    od, table, cfg = week
    cent = od.centroids()
    shapes = od.grid.polygons(cent["cell"].to_numpy())
    cells = pd.DataFrame({"cell": cent["cell"].to_numpy(), "value": 0.5, "tip": "",
                          "polygon": [np.asarray(g.exterior.coords)[:-1].tolist() for g in shapes.geometry]})
    screen = release_maps(table, cent, cells, view="Published", top_n=0, min_count=0, threshold=cfg.threshold)[0]
    fig = published_map(table, od, cfg, title="t", top_n=None)
    drawn = pd.DataFrame(fig.layout.meta[figures.FLOW_MAP_META]["args"]["flows"])
    cols = ["o_lon", "o_lat", "d_lon", "d_lat", "count"]
    a = screen.flows.loc[screen.flows["released"], cols].round(6).sort_values(cols).reset_index(drop=True)
    b = drawn[cols].round(6).sort_values(cols).reset_index(drop=True)
    assert len(a) >= 4
    pd.testing.assert_frame_equal(a, b)
    places = pd.DataFrame(fig.layout.meta[figures.FLOW_MAP_META]["args"]["locations"])
    pd.testing.assert_frame_equal(
        screen.locations[["lon", "lat", "total"]].round(6).sort_values(["lon", "lat"]).reset_index(drop=True),
        places[["lon", "lat", "total"]].round(6).sort_values(["lon", "lat"]).reset_index(drop=True))


class _Neighbour:
    """The same zone system, with the used zones of another data set (its centroids)."""

    def __init__(self, od, cells):
        self.grid, self.week_starts, self._cells = od.grid, od.week_starts, cells

    def centroids(self):
        return self.grid.centroids(self._cells)


def _neighbour(od, table, rng):
    """A data set that publishes the same table: every unpublished row's true count and release probability
    changed, some unpublished pairs dropped, two pairs added that stay unpublished (one to a zone nobody else uses),
    every published row's true count changed too; the zones used follow."""
    rel = table["released"].to_numpy(bool)
    t2 = table.copy()
    t2["true_count"] = t2["true_count"] + rng.integers(-3, 4, len(t2)).clip(-t2["true_count"] + 1)
    t2.loc[~rel, "release_prob"] = rng.uniform(0, 0.2, (~rel).sum())
    keep = rel | (rng.uniform(size=len(t2)) < 0.7)
    t2 = t2.loc[keep]
    cells = od.centroids()["cell"].to_numpy()
    free = sorted(set(range(int(od.grid.n_cells))) - set(cells.tolist()))
    far = free[-1] if free else cells[-1]
    extra = t2.loc[~t2["released"]].head(2).copy()
    extra["origin"] = [cells[0], far][: len(extra)]
    extra["true_count"] = 99
    t2 = pd.concat([t2, extra], ignore_index=True).sample(frac=1, random_state=1)   # rows in another order too
    used = np.unique(np.r_[t2["origin"].to_numpy(), t2["destination"].to_numpy()])
    return t2, _Neighbour(od, used)


def test_two_data_sets_with_the_same_published_table_give_the_same_map(week):
    """Post-processing: the published map (release --map, figures) reads nothing but the published table, so a
    neighbouring data set that publishes the same table gives the same figure, byte for byte, at every size."""
    od, table, cfg = week
    t2, od2 = _neighbour(od, table, np.random.default_rng(5))
    pub = ["origin", "destination", "noisy_count"]

    def published(t):
        return t.loc[t["released"], pub].sort_values(pub[:2]).reset_index(drop=True)

    pd.testing.assert_frame_equal(published(table), published(t2))
    assert not table["true_count"].reset_index(drop=True).equals(t2["true_count"].reset_index(drop=True))
    for size in (figures.MAP_SIZE, figures.FigureSize.preset("single-column")):
        a = published_map(table, od, cfg, title="t", top_n=None, size=size)
        b = published_map(t2, od2, cfg, title="t", top_n=None, size=size)
        assert a.to_json() == b.to_json()


def test_the_published_map_changes_when_the_published_table_does(week):
    """The test above can fail: one published count changed changes the figure."""
    od, table, cfg = week
    t2 = table.copy()
    i = np.flatnonzero(t2["released"].to_numpy())[0]
    t2.iloc[i, t2.columns.get_loc("noisy_count")] += 500
    a = published_map(table, od, cfg, title="t", top_n=None)
    b = published_map(t2, od, cfg, title="t", top_n=None)
    assert a.to_json() != b.to_json()


@pytest.mark.slow
@pytest.mark.browser
def test_neighbouring_published_maps_are_byte_identical_images(week):
    if figures.find_browser() is None:
        pytest.skip("no Chromium")
    od, table, cfg = week
    t2, od2 = _neighbour(od, table, np.random.default_rng(6))
    size = figures.FigureSize.preset("single-column")
    with figures.image_server():
        for fmt in ("png", "svg"):
            a = figures.figure_bytes(published_map(table, od, cfg, title="t", top_n=None), fmt, size)
            b = figures.figure_bytes(published_map(t2, od2, cfg, title="t", top_n=None), fmt, size)
            assert a == b, fmt


def test_nothing_published_says_so_and_lists_no_class(week):
    od, table, _ = week
    cfg = ReleaseConfig(epsilon=0.66, threshold=10**6)
    t = table.assign(released=False)
    fig = published_map(t, od, cfg, title="t", top_n=None, size=figures.FigureSize.preset("single-column"))
    notes = [a.text for a in fig.layout.annotations]
    assert any("Nothing published" in (x or "") for x in notes)
    legend = " ".join(a.text for a in fig.layout.annotations if a.name == "legend")
    assert "–" not in legend
    assert "Flows" not in legend
    assert not any(t.name and t.name.startswith("flows class") for t in fig.data)
    json.dumps(fig.layout.meta)   # what it carries is plain JSON
