"""The OD release map as the browser receives it: a small deck JSON, colours computed in the browser from one number
per row (the same colours as before), tooltips that carry each cell's and each arc's numbers.

The whole deck is sent again and parsed again by the browser on every rerun that changes the map, so its
size is the map's cost per slider step (744 KiB per ε step before: every frame column, full-precision floats and RGBA
lists per row).
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pandas as pd
import pytest

from odapp.maps import deck as map_deck
from odapp.maps import flows as map_flows
from odapp.maps import od_map
from odapp.maps import zones as map_zones
from odapp.shared.words import num
from odcore.report import figures
from odcore.report import flows as fl
from tests.app.map_element import deck_text, decks, map_elements

pytestmark = pytest.mark.timeout(300)

# The bundled city's release map (1,259 cell outlines, top 300 arcs) was 687 kB of deck JSON before the deck was trimmed, 381 kB
# after it.
DECK_BYTES_MAX = 420_000


def _expr(expr: str, **row) -> list[float]:
    """Evaluate a deck.gl accessor expression of arithmetic over a row's fields (also valid Python)."""
    assert re.fullmatch(r"[\w\s\[\],.+\-*/]+", expr), expr      # nothing but arithmetic, names and a list
    return eval(expr, {"__builtins__": {}}, row)


def _decks(at) -> list[dict]:
    return decks(at)


def _layer(deck: dict, layer_id: str) -> dict:
    return next(layer for layer in deck["layers"] if layer["id"] == layer_id)


@pytest.mark.parametrize("p", [0.0, 0.013, 0.5, 0.999, 1.0])
def test_cell_colour_expression_is_the_old_colour(p):
    old = [*figures.mix(figures.CELL_LOW_RGB, figures.CELL_HIGH_RGB, np.array([p]))[0], 170]
    assert _expr(map_flows.CELL_COLOR, value=p) == pytest.approx(old, abs=1e-9)


@pytest.mark.parametrize("f", [0.0, 0.25, 1.0])
def test_arc_colour_and_width_expressions(f):
    assert _expr(map_deck._alpha_expr(map_deck.ORIGIN_RGB), f=f) == pytest.approx([*map_deck.ORIGIN_RGB, 120 + 120 * f])
    assert _expr(map_deck._alpha_expr(map_deck.DESTINATION_RGB), f=f) == pytest.approx([*map_deck.DESTINATION_RGB, 120 + 120 * f])
    layer = map_deck.arc_layer(map_flows.flows_frame(_pairs(), _centroids(), value="noisy_count", color_range=(10, 50)))
    assert _expr(layer.get_width.removeprefix("@@="), f=f) == pytest.approx(1.5 + 10.5 * f)


def _pairs():
    import pandas as pd

    return pd.DataFrame({"origin": [1, 2], "destination": [2, 1], "true_count": [40, 12],
                         "noisy_count": [50.26, float("nan")], "release_prob": [0.99, 0.2], "released": [True, False]})


def _centroids():
    import pandas as pd

    return pd.DataFrame({"cell": [1, 2], "lat": [45.123456789, -0.5], "lon": [7.987654321, -0.25]})


def test_arc_rows_send_only_what_is_drawn_and_read():
    flows = map_flows.flows_frame(_pairs(), _centroids(), value="noisy_count", color_range=(10.0, 50.26))
    rows = map_deck.arc_layer(flows).data
    assert list(rows[0]) == ["ox", "oy", "dx", "dy", "f", "tip"]
    assert rows[0]["ox"] == 7.98765                                      # 5 decimals, about 1 m
    assert rows[0]["oy"] == 45.12346
    assert rows[0]["f"] == 1.0
    tip = rows[0]["tip"]
    for part in ("zone 1 → zone 2", "45.1235° N", "true count: 40 people", "noisy count: 50.3 (published)",
                 "release probability: 0.990"):
        assert part in tip
    assert "noisy count: – (suppressed)" in rows[1]["tip"]
    assert "release probability: 0.200" in rows[1]["tip"]


def test_bundled_release_map_is_small_and_its_tooltips_carry_the_numbers(at):
    at.switch_page("pages/2_OD_release.py").run()
    assert not at.exception, [e.message for e in at.exception]
    (deck,) = _decks(at)
    size = len(deck_text(map_elements(at)[0]).encode())
    assert size < DECK_BYTES_MAX, f"the map's deck JSON is {size:,} bytes"
    cells, arcs = _layer(deck, "cells"), _layer(deck, "flows")
    # the published view: the zones of published pairs only, all alike (no shade from a true count)
    assert cells["getFillColor"] == [*figures.ZONE_RGB, 200]
    published = at.dataframe[0].value
    used = set(published["origin"].tolist()) | set(published["destination"].tolist())
    assert len(cells["data"]) == len(used)
    assert {tuple(r) for r in cells["data"]} == {("polygon", "tip")}
    for r in cells["data"]:
        zone, centre, words = r["tip"].split("\n")
        assert int(zone.split()[-1]) in used
        assert centre.startswith("centre ")
        assert words == figures.ZONE_WORDS
        assert all(len(str(x).split(".")[-1]) <= map_deck.DIGITS for pt in r["polygon"] for x in pt)
    # the arrows: a filled outline, a colour and a tooltip per flow; as many as the legend says were drawn
    assert {tuple(r) for r in arcs["data"]} == {("color", "polygon", "tip")}   # sent sorted by name
    said = [int((a or b).replace(",", "")) for m in at.markdown
            for a, b in re.findall(r"· (?:top ([\d,]+) of [\d,]+|all ([\d,]+)) flows? between places", m.value)]
    assert said == [len(arcs["data"])]
    assert 0 < len(arcs["data"]) <= fl.AUTO_FLOWS[1] + 1                 # Top N auto: both ways of the last pair
    table = at.dataframe[0].value                                       # the published table under the map
    shown = [float(m.group(1).replace(",", "")) for r in arcs["data"]
             for m in [re.search(r"noisy count: ([\d,.]+) \(published\)", r["tip"])]]
    assert sum(shown) <= table["noisy_count"].sum() + 1                 # sums of published counts, never more
    for r in arcs["data"]:
        for part in ("→", "° N", "true count: ", "release probability"):
            assert part in r["tip"]


def test_bundled_release_map_by_zones_draws_the_largest_published_flows(at):
    """Merging turned off and Top N 300: every zone on its own, 300 arrows, the darkest one the largest published
    noisy count between two zones, its tooltip saying that count."""
    at.switch_page("pages/2_OD_release.py").run()
    at.toggle(key="rel_level").set_value(False).run()
    at.number_input(key="rel_topn").set_value(300).run()
    assert not at.exception, [e.message for e in at.exception]
    try:
        arcs = _layer(_decks(at)[0], "flows")
        assert len(arcs["data"]) == 300
        assert any("· top 300 of " in m.value for m in at.markdown)
        table = at.dataframe[1].value                                   # the analysis view of the published pairs
        assert set(at.dataframe[0].value.columns) == {"week", "origin", "destination", "noisy_count"}
        assert at.dataframe[0].value["noisy_count"].tolist() == table["noisy_count"].tolist()
        pub = table.loc[table["origin"] != table["destination"]]
        best = pub.loc[pub["noisy_count"].idxmax()]
        darkest = [r for r in arcs["data"] if r["color"][:3] == list(od_map.FLOW_CLASS_RGB[-1])]
        assert any(f"noisy count: {num(round(float(best['noisy_count']), 1))} (published)" in r["tip"]
                   and f"true count: {num(int(best['true_count']))} people" in r["tip"] for r in darkest)
        assert any("Level: zones as published" in m.value for m in at.markdown)
    finally:
        at.toggle(key="rel_level").set_value(True).run()
        at.number_input(key="rel_topn").set_value(None).run()


def _screen_px(lon, lat, vs: dict, width: int, height: int) -> tuple[np.ndarray, np.ndarray]:
    """Where points are drawn in a flat deck.gl map of ``width`` × ``height`` px with the view ``vs`` (web mercator:
    the world is 512·2^zoom px wide)."""
    scale = 512 * 2 ** vs["zoom"]

    def y(p):
        return np.log(np.tan(np.pi / 4 + np.radians(np.asarray(p, float)) / 2))

    return (width / 2 + (np.asarray(lon, float) - vs["longitude"]) / 360 * scale,
            height / 2 - (y(lat) - y(vs["latitude"])) / (2 * np.pi) * scale)


def _fitted(fit: list, width: int, height: int) -> dict:
    """The view that fits the box ``fit`` (lon0, lat0, lon1, lat1, pad px) in ``width`` × ``height`` px: the largest
    zoom at which the box's Web Mercator extent, padded, fits both ways, centred on the box's Mercator centre."""
    lon0, lat0, lon1, lat1, pad = fit

    def merc(lat):
        return np.log(np.tan(np.pi / 4 + np.radians(lat) / 2))

    zoom = min(math.log2((width - 2 * pad) * 360 / (512 * (lon1 - lon0))),
               math.log2((height - 2 * pad) * 2 * np.pi / (512 * (merc(lat1) - merc(lat0)))))
    lat_c = math.degrees(2 * math.atan(math.exp((merc(lat0) + merc(lat1)) / 2)) - np.pi / 2)
    return {"longitude": (lon0 + lon1) / 2, "latitude": lat_c, "zoom": zoom}


def test_first_view_is_flat_and_holds_every_drawn_flow_place_and_the_zones(at):
    """In the narrowest map the page draws (a 1024 px window with the sidebar open: od_map.MAP_WIDTH_PX × 460), the
    first view shows every arrow, every place and the centre of every zone with a published flow, untilted."""
    at.switch_page("pages/2_OD_release.py").run()
    for merged in (True, False):
        at.toggle(key="rel_level").set_value(merged).run()
        deck = _decks(at)[0]
        vs = deck["initialViewState"]
        assert vs["pitch"] == 0
        assert vs.get("bearing", 0) == 0
        for layer_id in ("flows", "locations"):
            pts = np.array([pt for r in _layer(deck, layer_id)["data"] for pt in r["polygon"]])
            assert len(pts)
            # the map element's first view at its real size (its box fitted in the browser): the sidebar's
            # narrowest map, a 1440 px window's and a tall one's
            for w, h in ((od_map.MAP_WIDTH_PX, 460), (948, 460), (948, 700)):
                x, y = _screen_px(pts[:, 0], pts[:, 1], _fitted(deck["fit"], w, h), w, h)
                assert 0 <= x.min() <= x.max() <= w
                assert 0 <= y.min() <= y.max() <= h
            x, y = _screen_px(pts[:, 0], pts[:, 1], vs, od_map.MAP_WIDTH_PX, 460)
            assert x.min() >= 0
            assert x.max() <= od_map.MAP_WIDTH_PX
            assert y.min() >= 0
            assert y.max() <= 460
        table = at.dataframe[0].value                                   # the published pairs
        used = set(table["origin"].tolist()) | set(table["destination"].tolist())
        centres = np.array([np.mean(r["polygon"], axis=0) for r in _layer(deck, "cells")["data"]
                            if int(r["tip"].split("\n")[0].split()[-1]) in used])
        assert len(centres) == len(used)
        x, y = _screen_px(centres[:, 0], centres[:, 1], vs, od_map.MAP_WIDTH_PX, 460)
        assert 0 <= x.min() <= x.max() <= od_map.MAP_WIDTH_PX
        assert 0 <= y.min() <= y.max() <= 460
    at.toggle(key="rel_level").set_value(True).run()


ZONE_NAME = r"(zone \d+|\d+ zones around zone \d+)"   # a zone of the bundled square grid, or a place of merged zones


def test_maps_tooltips_and_legends_name_things_the_same_way(at):
    """The release map's tooltips use the words of its legend: a zone is "zone N" (never "cell N" beside a legend
    of zones), its shade the chance that at least one flow leaving it is published, a place's totals leaving,
    arriving and within, a suppressed flow never published; the Data page's map the same for its zones."""
    at.switch_page("pages/2_OD_release.py").run()
    at.toggle(key="rel_faint").set_value(True).run()
    try:
        assert not at.exception, [e.message for e in at.exception]
        deck = _decks(at)[0]
        legend = next(m.value for m in at.markdown if "flows between places" in m.value)
        for words in (figures.ZONE_WORDS, "place: " + map_flows.PLACE_TOTALS, map_flows.SUPPRESSED_WORDS,
                      od_map.ANALYSIS_WORDS):     # suppressed flows shown: a view of true counts, said so
            assert words in legend, words
        tips = {name: [r["tip"] for r in _layer(deck, name)["data"]] for name in ("cells", "flows", "locations",
                                                                                  "suppressed")}
        assert all(tips.values()), {k: len(v) for k, v in tips.items()}
        for t in tips["cells"]:
            assert re.fullmatch(rf"zone \d+\ncentre .*\n{figures.ZONE_WORDS}", t), t
        for t in tips["flows"]:
            assert re.match(rf"{ZONE_NAME} → {ZONE_NAME}\n", t), t
        for t in tips["locations"]:
            assert re.fullmatch(rf"place: {ZONE_NAME}\nnoisy count: [\d,]+ leaving, [\d,]+ arriving, [\d,]+ within", t), t
        for t in tips["suppressed"]:
            assert re.match(rf"{ZONE_NAME} → {ZONE_NAME}\n{map_flows.SUPPRESSED_WORDS}\n", t), t
        words = [legend, *(t for v in tips.values() for t in v)]
        assert not [w for w in words if re.search(r"\bcells?\b", w)]
    finally:
        at.toggle(key="rel_faint").set_value(False).run()
    at.switch_page("pages/1_Data.py").run()
    legend = next(m.value for m in at.markdown if "Trace points per" in m.value)
    assert f"Trace points per {map_flows.ZONE}" in legend
    for r in _layer(_decks(at)[0], "cells")["data"]:
        assert re.fullmatch(r"zone \d+\n[\d,]+ trace points", r["tip"]), r["tip"]


def test_zone_label():
    assert map_flows.zone_label(12) == "zone 12"
    assert map_flows.zone_label(2, "District 03") == "District 03 (zone 2)"
    assert map_flows.zone_label(2, float("nan")) == "zone 2"


def test_data_page_map_sends_outline_colour_and_tooltip_only(at):
    at.switch_page("pages/1_Data.py").run()
    assert not at.exception, [e.message for e in at.exception]
    cells = _layer(_decks(at)[0], "cells")
    assert {tuple(r) for r in cells["data"]} == {("color", "polygon", "tip")}
    assert any("trace points" in r["tip"] for r in cells["data"])
    assert _layer(_decks(at)[0], "cells_edges")["data"]


def _sq(x, y):
    return [[x, y], [x + 1, y], [x + 1, y + 1], [x, y + 1]]


def _on_a_segment(points: np.ndarray, seg: np.ndarray, tol: float) -> np.ndarray:
    """For each point, whether it lies within ``tol`` of one of the segments (n, 4)."""
    a, b = seg[None, :, :2], seg[None, :, 2:]
    p = points[:, None, :]
    ab = b - a
    t = np.clip(((p - a) * ab).sum(-1) / (ab * ab).sum(-1), 0, 1)
    d = np.hypot(*np.moveaxis(p - (a + t[..., None] * ab), -1, 0))
    return (d <= tol).any(axis=1)


def test_outline_edges_join_straight_runs_and_keep_every_edge():
    e = map_zones.outline_edges([_sq(0, 0), _sq(1, 0), _sq(0, 1), _sq(1, 1), _sq(5, 5)])
    assert len(e) == 6 + 4            # a 2 × 2 block: three lines each way; a lone square: its four sides
    assert sorted(map(tuple, e[:6].tolist())) == [(0, 0, 0, 2), (0, 0, 2, 0), (0, 1, 2, 1), (0, 2, 2, 2),
                                                  (1, 0, 1, 2), (2, 0, 2, 2)]
    bent = map_zones.outline_edges([[[0, 0], [1, 0], [2, 0.001], [1, 1]]])      # 0.001 off the line: not joined
    assert len(bent) == 4


def reference_outline_edges(polygons, tol=1e-5):
    """outline_edges as it was first written (greedy loops over dicts and lists): the specification the array version
    in odapp.maps.zones must equal, byte for byte."""
    polys = [np.asarray(q, dtype=float).reshape(-1, 2) for q in polygons]
    if not polys:
        return np.zeros((0, 4))
    a = np.concatenate(polys)
    b = np.concatenate([np.roll(q, -1, axis=0) for q in polys])
    swap = (a[:, 0] > b[:, 0]) | ((a[:, 0] == b[:, 0]) & (a[:, 1] > b[:, 1]))
    e = np.unique(np.round(np.where(swap[:, None], np.hstack([b, a]), np.hstack([a, b])), map_deck.DIGITS), axis=0)
    e = e[(e[:, 0] != e[:, 2]) | (e[:, 1] != e[:, 3])]

    def runs(p):
        out, a = [], 0
        while a < len(p) - 1:
            b = a + 1
            while b + 1 < len(p):
                d = p[b + 1] - p[a]
                q = p[a + 1:b + 1] - p[a]
                with np.errstate(divide="ignore", invalid="ignore"):
                    if (np.abs(d[0] * q[:, 1] - d[1] * q[:, 0]) / np.hypot(*d)).max() > tol:
                        break
                b += 1
            out.append([*p[a], *p[b]])
            a = b
        return out

    at = {}
    for i, (x0, y0, x1, y1) in enumerate(e.tolist()):
        at.setdefault((x0, y0), []).append(i)
        at.setdefault((x1, y1), []).append(i)
    d = e[:, 2:] - e[:, :2]
    u = d / np.hypot(d[:, 0], d[:, 1])[:, None]
    partner = {}
    for v, ids in at.items():
        for k, i in enumerate(ids):
            for j in ids[k + 1:]:
                if abs(u[i, 0] * u[j, 1] - u[i, 1] * u[j, 0]) < 1e-2 and (i, v) not in partner \
                        and (j, v) not in partner:
                    partner[(i, v)] = j
                    partner[(j, v)] = i
    ends = [((x0, y0), (x1, y1)) for x0, y0, x1, y1 in e.tolist()]
    done = np.zeros(len(e), dtype=bool)
    out = []
    for i in range(len(e)):
        if done[i]:
            continue
        chain, pts = [i], list(ends[i])
        for side in (0, 1):
            cur, v = i, ends[i][1 - side]
            while (cur, v) in partner and not done[partner[(cur, v)]] and partner[(cur, v)] not in chain:
                cur = partner[(cur, v)]
                chain.append(cur)
                v = ends[cur][0] if ends[cur][1] == v else ends[cur][1]
                pts.insert(len(pts) if side == 0 else 0, v)
        done[chain] = True
        out.extend(runs(np.asarray(pts)))
    return np.asarray(out, dtype=float).reshape(-1, 4)


def _random_rings(rng, kind: int) -> list:
    if kind == 0:      # a square grid with holes, some corners moved by ~1e-6 (some round to -0.0)
        n = int(rng.integers(1, 10))
        return [[[u + (rng.normal() * 1e-6 if rng.random() < 0.2 else 0.0), v] for u, v in
                 [[x, y], [x + 1, y], [x + 1, y + 1], [x, y + 1]]]
                for x in range(n) for y in range(n) if rng.random() < 0.7]
    if kind == 1:      # T-junctions: a big square under two small ones
        return [q for x in range(int(rng.integers(1, 5))) for q in
                ([[2 * x, 0], [2 * x + 2, 0], [2 * x + 2, 2], [2 * x, 2]],
                 [[2 * x, 2], [2 * x + 1, 2], [2 * x + 1, 3], [2 * x, 3]],
                 [[2 * x + 1, 2], [2 * x + 2, 2], [2 * x + 2, 3], [2 * x + 1, 3]])]
    if kind == 2:      # rings through random lattice points: shared, overlapping and collinear edges
        pts = rng.integers(0, 5, size=(int(rng.integers(6, 30)), 2)).astype(float)
        return [pts[rng.choice(len(pts), size=int(rng.integers(3, 6)), replace=False)].tolist()
                for _ in range(int(rng.integers(1, 12)))]
    if kind == 3:      # a long, slowly bending strip: long chains cut into several runs
        m = int(rng.integers(2, 400))
        ang = np.cumsum(rng.normal(0, 0.004, m))
        xs, ys = np.r_[0, np.cumsum(np.cos(ang))] * 1e-3, np.r_[0, np.cumsum(np.sin(ang))] * 1e-3
        return [[[xs[t], ys[t]], [xs[t + 1], ys[t + 1]], [xs[t + 1], ys[t + 1] + 1e-3], [xs[t], ys[t] + 1e-3]]
                for t in range(m)]
    return [[[round(cx + np.cos(2 * np.pi * j / k), 3), round(cy + np.sin(2 * np.pi * j / k), 3)] for j in range(k)]
            for cx, cy, k in zip(rng.integers(0, 8, 30), rng.integers(0, 8, 30), rng.integers(3, 9, 30), strict=True)]


def test_outline_edges_equal_the_greedy_reference_byte_for_byte():
    """The array version draws exactly the segments the first version drew (same order, same floats, -0.0 kept),
    on grids with holes and jitter, T-junctions, overlapping edges, long bending chains and rings of 3-8 sides."""
    rng = np.random.default_rng(13)
    for trial in range(150):
        rings = _random_rings(rng, trial % 5)
        for tol in (1e-5, 1e-3, 0.2):
            got, want = map_zones.outline_edges(rings, tol), reference_outline_edges(rings, tol)
            assert got.shape == want.shape, (trial, tol)
            assert got.tobytes() == want.tobytes(), (trial, tol)
    assert map_zones.outline_edges([]).shape == (0, 4)


def test_bundled_release_map_tells_its_squares_apart_by_gaps(at):
    """The release map draws each square at GAP_SCALE of its size about its centre (no layer of outline segments):
    the drawn squares never touch, and scaled back they tile the grid, each meeting its neighbours."""
    import shapely

    at.switch_page("pages/2_OD_release.py").run()
    at.selectbox(key="rel_view").set_value("Raw counts").run()     # every zone with an observed pair
    deck = _decks(at)[0]
    at.selectbox(key="rel_view").set_value("Published").run()
    assert not any(od_map.ANALYSIS_WORDS in m.value for m in at.markdown)    # the published view is no analysis
    assert "cells_edges" not in {layer["id"] for layer in deck["layers"]}
    cells = _layer(deck, "cells")
    assert cells["stroked"] is False
    drawn = shapely.polygons([r["polygon"] for r in cells["data"]])
    full = shapely.polygons([np.mean(r["polygon"], axis=0) + (np.asarray(r["polygon"]) - np.mean(r["polygon"], axis=0))
                             / map_zones.GAP_SCALE for r in cells["data"]])
    side = float(np.median(np.sqrt(shapely.area(full))))
    gap = (1 - map_zones.GAP_SCALE) * side                                  # ~0.0013° on the bundled city
    a, b = shapely.STRtree(drawn).query(drawn, predicate="dwithin", distance=0.5 * gap)
    assert (a == b).all()                                             # nothing drawn within half a gap of another
    a, b = shapely.STRtree(full).query(full, predicate="dwithin", distance=0.05 * gap)
    meets = np.bincount(a[a != b], minlength=len(full))
    assert (meets > 0).mean() > 0.95                                  # they meet their neighbours: one grid
    # tiled: scaled back from corners sent to 1e-4° (0.8 % of a side), they overlap by slivers only
    assert shapely.area(shapely.union_all(full)) == pytest.approx(shapely.area(full).sum(), rel=1e-2)


def test_bundled_release_map_uses_one_kind_of_layer_and_the_legend_gives_the_scale(at):
    """Each kind of layer is a shader program a browser without a GPU compiles before the first frame: the zones
    (told apart by gaps), places, arrows and the scale bar are all filled polygons. The offline base layer adds
    nothing on the bundled city: inland Atlanta has no water, and a synthetic city's fixes draw no image (only an
    upload's do: ``map_context``)."""
    at.switch_page("pages/2_OD_release.py").run()
    deck = _decks(at)[0]
    assert {layer["@@type"] for layer in deck["layers"]} == {"PolygonLayer", "TextLayer"}   # + the places' names
    assert not {"water", "fixes"} & {layer["id"] for layer in deck["layers"]}
    assert not any("base:" in m.value for m in at.markdown)
    bar = _layer(deck, "scale_bar")["data"]
    assert len(bar) == 3
    said = [float(g) for m in at.markdown for g in re.findall(r"scale bar:? ([\d.]+) km", m.value)]
    assert len(said) == 1                                              # the bar's length, in the legend
    (x0, y0), (x1, _) = (np.mean(bar[k]["polygon"], axis=0) for k in (0, 2))   # the bar's two ticks, its ends
    assert abs(x1 - x0) * figures.km_per_deg_lon(y0) == pytest.approx(said[0], rel=0.02)
    thick = np.ptp(np.asarray(bar[1]["polygon"])[:, 1]) * figures.KM_PER_DEG_LAT      # the bar's thickness
    v = deck["initialViewState"]
    km_px = 40_075 * math.cos(math.radians(v["latitude"])) / (512 * 2 ** v["zoom"])
    assert thick / km_px == pytest.approx(map_deck.SCALE_BAR_PX, rel=0.05)             # 3 px at the first view
    # about a fifth of what the first view shows (Web Mercator: 40,075 km · cos(lat) / (512 · 2^zoom) per pixel
    # in deck.gl's 512-pixel tiles), not a few pixels of it
    v = deck["initialViewState"]
    view_km = 40_075 * math.cos(math.radians(v["latitude"])) / (512 * 2 ** v["zoom"]) * od_map.MAP_WIDTH_PX
    assert said[0] == figures.nice_km(view_km), (said[0], view_km)


def test_layer_rows_are_the_frames_records_with_floats_rounded():
    df = pd.DataFrame({"polygon": [[[0.1234567, 1.0]], [[2.0, 3.0]]], "v": [0.1234567, np.nan], "n": [1, 2],
                       "b": [True, False], "tip": ["a", "b"], "other": [9, 9]})
    rows = map_deck.layer_rows(df, {"p": "polygon", "v": "v", "n": "n", "b": "b", "tip": "tip"})
    ref = df.assign(v=df["v"].round(map_deck.DIGITS)).rename(columns={"polygon": "p"})[["p", "v", "n", "b", "tip"]]
    assert json.dumps(rows) == json.dumps(ref.to_dict(orient="records"))
    assert [type(x) for x in rows[0].values()] == [list, float, int, bool, str]


def test_a_frozen_deck_makes_its_json_once_and_lets_go_of_its_rows():
    """A cached map's deck keeps only its JSON: its rows' lists and dicts would otherwise be scanned by every garbage
    collection Streamlit runs after a script (a fifth of the server's CPU with a class of ten on OD release)."""
    polygons = [[[x, 0.0], [x + 1.0, 0.0], [x + 1.0, 1.0], [x, 1.0]] for x in range(60)]
    cells = pd.DataFrame({"polygon": polygons, "value": np.linspace(0, 1, 60)})
    cells["tip"] = [f"cell {k}" for k in range(60)]
    vs = map_deck.view_state(np.array([0.0, 1.0]), np.array([0.0, 60.0]))

    def made(frozen: bool):
        return map_deck.deck(map_zones.grid_layers(cells, map_flows.CELL_COLOR, columns=("value",)), vs, frozen=frozen)

    frozen, compact = made(True), made(False)
    # made with the deck (inside the cached function): a session never sees a shared deck without its JSON
    assert frozen.layers == []
    text = frozen.to_json()
    assert frozen.layers == []                          # let go once the JSON is made
    assert frozen.to_json() == text                     # the same JSON afterwards
    assert text == compact.to_json()                    # and the JSON of the same deck not frozen
    assert len(compact.layers) == 2                     # a deck that is not frozen keeps its layers
    spec = json.loads(text)
    assert [r["tip"] for r in spec["layers"][0]["data"]] == list(cells["tip"])


def test_a_deck_writes_an_encoded_layer_as_the_layer_itself():
    """The release map's cells are encoded once and shared by every seed's deck: the deck's JSON must be the JSON of
    the same deck holding the layers themselves, wherever the encoded layers sit among the others."""
    polygons = [[[x, 0.0], [x + 1.0, 0.0], [x + 1.0, 1.0], [x, 1.0]] for x in range(40)]
    cells = pd.DataFrame({"polygon": polygons, "value": np.linspace(0, 1, 40)})
    cells["tip"] = [f"cell {k}: \"quoted\", é" for k in range(40)]
    flows = pd.DataFrame({"o_lon": [0.5, 3.5], "o_lat": [0.5, 0.5], "d_lon": [20.5, 30.5], "d_lat": [0.5, 0.5],
                          "f": [1.0, 0.25], "tip": ["a → b", "c → d"]})
    vs = map_deck.view_state(np.array([0.0, 1.0]), np.array([0.0, 40.0]))
    plain = map_zones.cell_layers(cells)
    encoded = map_zones.cell_layers(cells, encoded=True)
    assert [x.id for x in encoded] == ["cells", "cells_edges"]
    arcs = map_deck.arc_layer(flows)
    for frozen in (False, True):
        for order in ((0, 1, 2), (2, 0, 1), (0, 2, 1)):
            ref = [[*plain, arcs][i] for i in order]
            mixed = [[*encoded, arcs][i] for i in order]
            text = map_deck.deck(mixed, vs, frozen=frozen).to_json()
            assert text == map_deck.deck(ref, vs, frozen=frozen).to_json()
            assert [x["id"] for x in json.loads(text)["layers"]] == [x.id for x in ref]
    one = map_deck.deck(encoded, vs)
    one.to_json()
    assert one.layers == encoded                          # a deck that is not frozen keeps its layers


def test_pydecks_jupyter_check_is_made_once():
    """pydeck's Deck() asks five times whether its Jupyter widget can be made; without ipywidgets each answer was a
    failed import (2.8 ms of a Deck()'s 3 ms). odapp.maps.deck asks it once."""
    import pydeck as pdk
    from pydeck.bindings import deck as pdk_deck

    pdk.Deck(layers=[])
    hits = pdk_deck.has_jupyter_extra.cache_info().hits
    pdk.Deck(layers=[])
    assert pdk_deck.has_jupyter_extra.cache_info().hits >= hits + 5
    assert pdk_deck.has_jupyter_extra.cache_info().misses == 1


def _hexagons(n: int = 40) -> list[list[list[float]]]:
    """Real H3 cells' rings (res 8 around the bundled city, and the res-0 pentagon 8009fffffffffff), [lon, lat]."""
    import h3

    cells = [*sorted(h3.grid_disk(h3.latlng_to_cell(33.75, -84.39, 8), 3))[:n], "8009fffffffffff"]
    return [[[lng, lat] for lat, lng in h3.cell_to_boundary(c)] for c in cells]


def test_shrunk_cells_sit_inside_their_zone_at_the_gap_scale():
    import shapely

    rings = [*_hexagons(), _sq(3, 4)]                            # six, five and four corners in one call
    got = map_zones.shrunk(rings)
    assert [len(r) for r in got] == [len(r) for r in rings]
    for ring, small in zip(rings, got, strict=True):
        a = np.asarray(ring)
        c = a.mean(axis=0)                                       # the reference: one ring at a time
        assert np.asarray(small) == pytest.approx(c + (a - c) * map_zones.GAP_SCALE, abs=0.51 * 10.0 ** -map_deck.DIGITS)
        assert all(len(repr(x).split(".")[-1]) <= map_deck.DIGITS for pt in small for x in pt)
        big, inner = shapely.Polygon(ring), shapely.Polygon(small)
        assert big.contains(inner)                               # a gap all round: the background shows
        assert inner.area / big.area == pytest.approx(map_zones.GAP_SCALE ** 2, rel=2e-3 if big.area > 1e-3 else 0.05)
    assert map_zones.shrunk([]) == []


def test_grid_layers_tell_zones_apart_by_lines_or_by_gaps():
    rings = _hexagons()
    cells = pd.DataFrame({"polygon": rings, "value": np.linspace(0, 1, len(rings)), "tip": ["t"] * len(rings)})
    lines = map_zones.grid_layers(cells, map_flows.CELL_COLOR, columns=("value",))
    gaps = map_zones.grid_layers(cells, map_flows.CELL_COLOR, columns=("value",), outline="gaps")
    assert [x.id for x in lines] == ["cells", "cells_edges"]
    assert [x.id for x in gaps] == ["cells"]                     # no segments to draw on every frame
    assert [r["polygon"] for r in lines[0].data] == rings
    assert [r["polygon"] for r in gaps[0].data] == map_zones.shrunk(rings, digits=od_map.SHAPE_DIGITS)
    assert [r["value"] for r in gaps[0].data] == [r["value"] for r in lines[0].data]
    assert cells["polygon"].tolist() == rings                    # the frame itself is left as it was (exports)
    plain = map_zones.grid_layers(cells, map_flows.CELL_COLOR, columns=("value",), line=False, outline="gaps")
    assert [x.id for x in plain] == ["cells"]
    assert plain[0].data[0]["polygon"] == rings[0]               # no line: full size
    with pytest.raises(ValueError, match="outline="):
        map_zones.grid_layers(cells, outline="dots")


def test_outline_style_by_zone_kind():
    from odapp.data.zones_ui import BUNDLED_ZONES
    from odcore.space.polygons import read_zone_file
    from odcore.space.zones import make_zones

    lat, lon = np.array([33.70, 33.80]), np.array([-84.45, -84.35])
    assert map_zones.outline_style(make_zones("square:1.3", lat, lon)) == "lines"
    assert map_zones.outline_style(make_zones("h3:8", lat, lon)) == "gaps"
    assert map_zones.outline_style(read_zone_file(BUNDLED_ZONES)) == "insets"    # moved inward, not scaled
    assert map_zones.outline_style(object()) == "lines"               # a plain grid without a kind: squares


def _metres(ring, lat0: float) -> np.ndarray:
    """A [lon, lat] ring in metres on the local equirectangular projection :func:`odapp.maps.zones.inset` works in."""
    from odcore.report import figures

    return np.asarray(ring, dtype=float) * (1000 * figures.km_per_deg_lon(lat0), 1000 * figures.KM_PER_DEG_LAT)


def test_inset_moves_every_side_inward_by_one_distance():
    """A zone file's zones drawn inset: each inside its zone, neighbours 2d apart wherever they met (a concave L
    included, which scaling about the centre would push into its neighbour), the same number of corners for a
    straight-sided zone, d from the median zone's area; a zone thinner than 2d is drawn as it is and keeps its
    outline segments; the bundled districts all inset, with no segments left."""
    import shapely

    from odapp.data.zones_ui import BUNDLED_ZONES, zone_polygons
    from odcore.space.polygons import read_zone_file

    lat0 = 33.75
    ell = [[0, 0], [0.02, 0], [0.02, 0.01], [0.01, 0.01], [0.01, 0.02], [0, 0.02]]       # concave
    rest = [[0.02, 0], [0.04, 0], [0.04, 0.02], [0.01, 0.02], [0.01, 0.01], [0.02, 0.01]]   # fills the L's notch
    sliver = [[0.04, 0], [0.04001, 0], [0.04001, 0.02], [0.04, 0.02]]                        # ~1 m wide
    rings = [[[x - 84.4, y + lat0] for x, y in r] for r in (ell, rest, sliver)]
    got = map_zones.inset(rings)
    zones = [shapely.Polygon(_metres(r, lat0)) for r in rings]
    drawn = [shapely.Polygon(_metres(r, lat0)) for r in got.rings]
    d = map_zones.INSET_FRACTION * np.sqrt(np.median([z.area for z in zones]))
    for z, q in zip(zones[:2], drawn[:2], strict=True):
        assert z.contains(q)
        assert q.area == pytest.approx(z.buffer(-d, join_style="mitre").area, rel=1e-3)
    assert len(got.rings[0]) == len(ell)                         # six corners: each side moved, none cut
    assert drawn[0].distance(drawn[1]) == pytest.approx(2 * d, abs=2.5)   # rows rounded to 1e-5° (~1 m)
    assert got.rings[2] == np.round(rings[2], map_deck.DIGITS).tolist()   # too thin: drawn as it is ...
    np.testing.assert_array_equal(got.edges, map_zones.outline_edges([rings[2]]))   # ... with its outline
    districts = zone_polygons(read_zone_file(BUNDLED_ZONES), np.arange(40))["polygon"].tolist()
    inner = map_zones.inset(districts)
    assert inner.edges.shape == (0, 4)
    assert all(shapely.Polygon(r).contains(shapely.Polygon(q)) for r, q in zip(districts, inner.rings, strict=True))
    assert map_zones.inset([]).rings == []


def test_inset_simplifies_a_wiggly_boundary_within_half_the_gap():
    """Two zones sharing a boundary that wiggles every ~10 m: drawn with far fewer vertices, still inside their zones,
    at most d/2 from the exact inset ring and at least d apart (2d less the two simplifications)."""
    import shapely

    lat0 = 33.75
    kx, ky = 1 / (1000 * figures.km_per_deg_lon(lat0)), 1 / (1000 * figures.KM_PER_DEG_LAT)
    x = np.linspace(0, 1000, 101)
    wiggle = 500 + 6 * np.sin(x / 7)                             # the shared boundary, metres
    south = [[0, 0], [1000, 0], *zip(x[::-1], wiggle[::-1], strict=True)]
    north = [*zip(x, wiggle, strict=True), [1000, 1000], [0, 1000]]
    rings = [[[-84.4 + a * kx, lat0 + b * ky] for a, b in r] for r in (south, north)]
    exact, simple = map_zones.inset(rings, simplify=0), map_zones.inset(rings)
    d = map_zones.INSET_FRACTION * np.sqrt(np.median([shapely.Polygon(_metres(r, lat0)).area for r in rings]))
    assert sum(map(len, simple.rings)) < 0.5 * sum(map(len, exact.rings))
    zones = [shapely.Polygon(_metres(r, lat0)) for r in rings]
    drawn = [shapely.Polygon(_metres(r, lat0)) for r in simple.rings]
    for z, q, e in zip(zones, drawn, exact.rings, strict=True):
        assert z.contains(q)
        assert q.hausdorff_distance(shapely.Polygon(_metres(e, lat0))) <= 0.5 * d + 2.5   # + the rows' rounding
    assert drawn[0].distance(drawn[1]) >= d - 2.5


def test_inset_keeps_the_largest_part_of_a_zone_that_splits():
    import shapely

    # a dumbbell: two 1 km squares joined by a 5 m neck, among 1 km squares (d ≈ 27 m cuts the neck)
    lat0 = 33.75
    kx, ky = 1 / (1000 * figures.km_per_deg_lon(lat0)), 1 / (1000 * figures.KM_PER_DEG_LAT)
    metres = [[0, 0], [1000, 0], [1000, 497], [1500, 497], [1500, 0], [2600, 0], [2600, 1000], [1500, 1000],
              [1500, 502], [1000, 502], [1000, 1000], [0, 1000]]
    dumbbell = [[-84.4 + x * kx, lat0 + y * ky] for x, y in metres]
    squares = [[[-84.4 + (x + dx) * kx, lat0 + (3000 + dy) * ky] for dx, dy in ((0, 0), (1000, 0), (1000, 1000),
                                                                               (0, 1000))]
               for x in (0, 1000, 2000)]
    got = map_zones.inset([dumbbell, *squares])
    part = shapely.Polygon(_metres(got.rings[0], lat0))
    assert part.area == pytest.approx((1100 - 2 * 27) * (1000 - 2 * 27), rel=0.02)   # the right, larger square
    assert part.centroid.x / 1000 == pytest.approx(_metres([[-84.4 + 2050 * kx, lat0]], lat0)[0, 0] / 1000, abs=0.01)
    assert got.edges.shape == (0, 4)


def test_grid_layers_draw_insets_and_only_the_thin_zones_lines():
    rings = [[[0, 0], [0.01, 0], [0.01, 0.01], [0, 0.01]], [[0.01, 0], [0.02, 0], [0.02, 0.01], [0.01, 0.01]],
             [[0.02, 0], [0.02001, 0], [0.02001, 0.01], [0.02, 0.01]]]
    cells = pd.DataFrame({"polygon": rings, "value": [0.1, 0.5, 0.9], "tip": ["a", "b", "c"]})
    ins = map_zones.inset(rings)
    layers = map_zones.grid_layers(cells, map_flows.CELL_COLOR, columns=("value",), outline="insets")
    assert [x.id for x in layers] == ["cells", "cells_edges"]     # the sliver's four sides, nothing else
    assert [r["polygon"] for r in layers[0].data] == ins.rings
    assert [[*r["s"], *r["t"]] for r in layers[1].data] == ins.edges.tolist()
    made = map_zones.grid_layers(cells.iloc[:2], map_flows.CELL_COLOR, columns=("value",), outline="insets",
                            edges=map_zones.inset(rings[:2]))
    assert [x.id for x in made] == ["cells"]                      # every zone inset: no segments at all
    with pytest.raises(ValueError, match="Inset of 2 zones for 3 rows"):
        map_zones.grid_layers(cells, outline="insets", edges=map_zones.inset(rings[:2]))
    assert cells["polygon"].tolist() == rings                    # the frame itself is left as it was (exports)


def test_per_person_risk_shades_the_zones_and_the_tooltips_say_it(at):
    """The toggle shades the zones by the attack success on the people who start a trip there (the Attack page's
    week_risk, per origin zone), says so in the legend, and off again gives the publication shading back."""
    at.switch_page("pages/2_OD_release.py").run()
    at.toggle(key="rel_risk").set_value(True).run()
    assert not at.exception, [e.message for e in at.exception]
    cells = _layer(_decks(at)[0], "cells")
    assert cells["getFillColor"] == "@@=" + map_flows.RISK_COLOR
    shown = [r for r in cells["data"] if "attacker's success on them" in r["tip"]]
    assert len(shown) > 0.5 * len(cells["data"])
    for r in shown:                               # the shading is the median's distance from a coin flip
        med = float(re.search(r"median (\d+)%", r["tip"]).group(1)) / 100
        assert abs(r["value"] - (med - 0.5) / 0.5) <= 0.011
    assert any("per-person risk" in m.value for m in at.markdown)
    assert any(od_map.ANALYSIS_WORDS in m.value for m in at.markdown)      # from true people: for the lab only
    at.toggle(key="rel_risk").set_value(False).run()
    assert _layer(_decks(at)[0], "cells")["getFillColor"] == [*figures.ZONE_RGB, 200]


def test_side_by_side_compares_the_same_places_in_the_same_view(at):
    """Side by side: one level, the same places and the same first view on both maps; the left draws only the
    suppressed flows (grey), the right only the published ones (in colour); one legend, which names both."""
    at.switch_page("pages/2_OD_release.py").run()
    at.selectbox(key="rel_view").set_value("Side by side").run()
    try:
        assert not at.exception, [e.message for e in at.exception]
        left, right = _decks(at)
        assert left["initialViewState"] == right["initialViewState"]
        assert left["fit"] == right["fit"]   # the box the element fits at its real size
        assert _layer(left, "locations")["data"] == _layer(right, "locations")["data"]
        ids = [{layer["id"] for layer in d["layers"]} for d in (left, right)]
        assert "suppressed" in ids[0]
        assert "flows" not in ids[0]
        assert "flows" in ids[1]
        assert "suppressed" not in ids[1]
        assert len(_layer(left, "suppressed")["data"]) > 0
        legends = [m.value for m in at.markdown if "flows between places" in m.value]
        assert len(legends) == 1
        assert map_flows.SUPPRESSED_WORDS in legends[0]
        heads = [m.value for m in at.markdown if m.value.startswith("**")]
        assert any("Suppressed" in h and "grey" in h for h in heads)
        assert od_map.ANALYSIS_WORDS in legends[0]
        assert any("Published" in h for h in heads)
    finally:
        at.selectbox(key="rel_view").set_value("Published").run()



class _Zones:
    """A zone file's grid, as the Data page's map reads it (its kind and the zones' centres)."""

    kind = "polygons"

    def __init__(self, cells: pd.DataFrame):
        self.cells = cells

    def centroids(self, ids):
        c = self.cells.set_index("cell").loc[ids]
        return pd.DataFrame({"cell": ids, "lat": [np.mean(np.asarray(q)[:, 1]) for q in c["polygon"]],
                             "lon": [np.mean(np.asarray(q)[:, 0]) for q in c["polygon"]]})


def _square(lon, lat, d=0.01):
    return [[lon, lat], [lon + d, lat], [lon + d, lat + d], [lon, lat + d]]


def test_data_page_map_draws_the_flow_maps_water_where_there_is_some():
    """The Data page's trace map has the flow map's offline base layer: water from the bundled coastline under the
    zones by the bay (and its legend line), none inland."""
    def deck_at(lon, lat):
        cells = pd.DataFrame({"cell": [0, 1], "name": ["a", "b"], "points": [10, 0],
                              "polygon": [_square(lon, lat), _square(lon + 0.03, lat + 0.01)]})
        return map_zones.trace_density_deck(cells, _Zones(cells))[0]

    sf = json.loads(deck_at(-122.42, 37.78).to_json())
    assert sf["layers"][0]["id"] == "water"
    assert "water" in deck_at(-122.42, 37.78).context_words
    atl = deck_at(-84.40, 33.75)
    assert "water" not in {layer["id"] for layer in json.loads(atl.to_json())["layers"]}
    assert atl.context_words == ""


def test_the_places_labelled_on_the_map_are_listed_under_it(at):
    """The numbers on the bundled city's map (squares: no names) are listed in a table that opens under its legend,
    largest place first: each number's zones (the place's members, as the hover says them) and its count."""
    at.switch_page("pages/2_OD_release.py").run()
    assert not at.exception, [e.message for e in at.exception]
    (deck,) = _decks(at)
    drawn = sorted((r["text"] for r in _layer(deck, "place_labels")["data"]), key=int)
    (legend,) = [m.value for m in at.markdown if "places labelled on the map</summary>" in m.value]
    rows = re.findall(r"<tr><td[^>]*>([^<]*)</td><td[^>]*>([^<]*)</td><td[^>]*>([^<]*)</td></tr>", legend)
    assert [r[0] for r in rows] == [str(k + 1) for k in range(len(rows))] == drawn   # numbered, as on the map
    counts = [int(r[2].replace(",", "")) for r in rows]
    assert counts == sorted(counts, reverse=True)                                       # largest place first
    assert all(z.startswith(f"{map_flows.ZONE} ") for r in rows for z in r[1].split(", "))
    assert f"The {len(rows)} places labelled on the map" in legend


def test_places_table_names_the_zones_of_each_labelled_place():
    members = [[5, 7], [3], [9]]
    names = {5: "North", 7: "Mill", 3: None, 9: "Harbour"}
    t = od_map.places_table(members, np.array([10.4, 30.2, 20.0]), names, "noisy count")
    assert t[od_map.PLACE_COLUMN].tolist() == ["", "Harbour", "North + 1"]   # a zone file's names, largest first
    assert t["zones"].tolist() == ["zone 3", "Harbour (zone 9)", "North (zone 5), Mill (zone 7)"]
    assert t["noisy count"].tolist() == [30, 20, 10]
    t = od_map.places_table(members, np.array([10.4, 30.2, 20.0]), {}, "noisy count")
    assert t[od_map.PLACE_COLUMN].tolist() == ["1", "2", "3"]                 # no names: numbered
    html_text = od_map.places_html(od_map.places_table([[1]], np.array([5.0]), {1: "<b>x</b>"}, "count"))
    assert "<b>x</b>" not in html_text                                          # a zone's name is shown as text
