"""odcore.report.flows: what a flow map draws (places, merged flows, count classes) and its geometry (curved
arrows, circles, a flat view that holds a box)."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest

from odcore.report import flows as fl


def _mercator_px(lon, lat, view: fl.View) -> tuple[np.ndarray, np.ndarray]:
    """Screen px of points relative to the view's centre (deck.gl's web mercator at the view's zoom)."""
    scale = fl.TILE_PX * 2 ** view.zoom

    def y(p):
        return np.log(np.tan(np.pi / 4 + np.radians(np.asarray(p, float)) / 2))

    return ((np.asarray(lon, float) - view.lon) / 360 * scale, -(y(lat) - y(view.lat)) / (2 * np.pi) * scale)


@pytest.mark.parametrize(("box", "size"), [((-84.6, -84.1, 33.5, 33.95), (580, 460)),
                                            ((-122.52, -122.36, 37.70, 37.82), (580, 460)),
                                            ((13.0, 13.8, 52.3, 52.7), (290, 460)),
                                            ((2.30, 2.31, 48.85, 48.851), (900, 300))])
def test_fit_view_holds_the_box_with_its_padding_and_no_more(box, size):
    lon0, lon1, lat0, lat1 = box
    w, h = size
    v = fl.fit_view(lon0, lon1, lat0, lat1, width_px=w, height_px=h, pad_px=20)
    x, y = _mercator_px([lon0, lon1, lon0, lon1], [lat0, lat0, lat1, lat1], v)
    assert np.all(np.abs(x) <= w / 2 - 20 + 1e-6)
    assert np.all(np.abs(y) <= h / 2 - 20 + 1e-6)
    # and it is the largest such zoom: one side touches its padding
    assert max(np.abs(x).max() / (w / 2 - 20), np.abs(y).max() / (h / 2 - 20)) == pytest.approx(1.0, abs=1e-6)


def test_km_per_px_matches_the_mercator_scale():
    v = fl.View(lat=37.77, lon=-122.42, zoom=12.0)
    one_km_lon = 1 / (fl.KM_PER_DEG_LON_EQUATOR * math.cos(math.radians(37.77)))
    x, _ = _mercator_px([v.lon + one_km_lon], [v.lat], v)
    assert 1 / x[0] == pytest.approx(v.km_per_px, rel=1e-9)


def test_arrows_go_from_start_to_end_with_a_head_and_reciprocal_flows_side_by_side():
    a = fl.arrows([0.0, 10.0], [0.0, 0.0], [10.0, 0.0], [0.0, 0.0], 0.4, n=8)
    assert a.shape == (2, 2 * 8 + 3, 2)
    tip = a[:, 8 + 1]
    assert tip[0] == pytest.approx([10.0, 0.0])             # the head's tip on the end point
    assert tip[1] == pytest.approx([0.0, 0.0])
    # A→B bulges to the right of travel (below the x axis), B→A to its right (above): the two never overlap
    assert a[0, :, 1].max() <= 1e-9 + 0.2                   # at most half a body width above the line at the ends
    assert a[0, :, 1].min() < -0.8
    assert a[1, :, 1].max() > 0.8
    assert a[1, :, 1].min() >= -0.2 - 1e-9
    # the head is twice the body's width
    barb_r, barb_l = a[0, 8], a[0, 8 + 2]
    assert np.hypot(*(barb_r - barb_l)) == pytest.approx(2 * 0.4, rel=0.02)


def test_arrow_gaps_start_and_end_at_the_circles_edges_and_short_flows_stay_thin():
    a = fl.arrows([0.0], [0.0], [10.0], [0.0], 0.2, gap0=1.0, gap1=2.0)
    assert a[0, 9] == pytest.approx([8.0, 0.0])            # tip: 2 km before the end
    start = (a[0, 0] + a[0, -1]) / 2
    assert np.hypot(*start) == pytest.approx(1.0, abs=1e-9)
    short = fl.arrows([0.0], [0.0], [1.0], [0.0], 5.0)      # a body wider than the flow is long: capped
    body = np.hypot(*(short[0, 0] - short[0, -1]))
    assert body <= 0.3 + 1e-9


def test_circles_are_round():
    c = fl.circles([1.0, -2.0], [0.5, 3.0], [2.0, 0.5], n=24)
    assert c.shape == (2, 24, 2)
    assert np.hypot(c[0, :, 0] - 1.0, c[0, :, 1] - 0.5) == pytest.approx(np.full(24, 2.0))
    assert np.hypot(c[1, :, 0] + 2.0, c[1, :, 1] - 3.0) == pytest.approx(np.full(24, 0.5))


def test_clusters_take_what_is_near_the_heaviest_zone_first_and_radius_zero_keeps_zones():
    rng = np.random.default_rng(4)
    centres = np.array([[0.0, 0.0], [20.0, 0.0], [0.0, 20.0]])
    pts = np.concatenate([c + rng.normal(0, 0.5, (30, 2)) for c in centres])
    w = rng.random(90)
    assert np.array_equal(fl.cluster_zones(pts[:, 0], pts[:, 1], w, 0.0), np.arange(90))
    lab = fl.cluster_zones(pts[:, 0], pts[:, 1], w, 5.0)
    assert len(np.unique(lab)) == 3
    for g in range(3):
        assert len(np.unique(lab[30 * g:30 * (g + 1)])) == 1
    assert np.array_equal(lab, fl.cluster_zones(pts[:, 0], pts[:, 1], w, 5.0))   # deterministic
    # no two clusters' weighted centres closer than the radius after the second pass
    lab = fl.cluster_zones(pts[:, 0], pts[:, 1], w, 1.5)
    k = lab.max() + 1
    cx = np.bincount(lab, w * pts[:, 0], k) / np.bincount(lab, w, k)
    cy = np.bincount(lab, w * pts[:, 1], k) / np.bincount(lab, w, k)
    d = np.hypot(cx[:, None] - cx[None, :], cy[:, None] - cy[None, :]) + np.eye(k) * 99
    assert d.min() > 1.5 * 0.5                              # slivers merged (greedy: not a strict guarantee)


def test_location_totals_equal_a_loop():
    rng = np.random.default_rng(5)
    o, d, c = rng.integers(0, 6, 50), rng.integers(0, 6, 50), rng.random(50)
    t = fl.location_totals(o, d, c, 7)
    ref = np.zeros((7, 3))
    for a, b, x in zip(o, d, c, strict=True):
        if a == b:
            ref[a, 2] += x
        else:
            ref[a, 0] += x
            ref[b, 1] += x
    assert t[["out", "in", "within"]].to_numpy() == pytest.approx(ref)
    assert t["total"].to_numpy() == pytest.approx(ref.sum(axis=1))


def test_classes_cover_every_value_and_the_top_edge():
    e = fl.class_bounds(10.0, 50.0)
    assert e.tolist() == [10.0, 20.0, 30.0, 40.0, 50.0]
    assert fl.classes(np.array([10.0, 19.9, 20.0, 49.0, 50.0]), e).tolist() == [0, 0, 1, 3, 3]
    assert len(fl.class_bounds(7.0, 7.0)) == 2


def _hub_table():
    """Two hubs 20 km apart, each of 9 zones 1 km apart; heavy flows between neighbours inside a hub, a few
    between the hubs."""
    xs, ys, cells = [], [], []
    for h, (hx, hy) in enumerate([(0.0, 0.0), (20.0, 0.0)]):
        for i in range(9):
            cells.append(10 * h + i)
            xs.append(hx + i % 3)
            ys.append(hy + i // 3)
    proj = fl.Projection(-84.39, 33.75)
    lon, lat = proj.lonlat(np.array(xs), np.array(ys))
    cent = pd.DataFrame({"cell": cells, "lat": lat, "lon": lon})
    rows = []
    for h in (0, 10):
        for i in range(9):
            for j in range(9):
                if i != j and abs(i % 3 - j % 3) + abs(i // 3 - j // 3) == 1:
                    rows.append((h + i, h + j, 300.0))
    rows += [(0, 10, 150.0), (14, 4, 120.0), (2, 12, 110.0), (5, 5, 90.0)]
    t = pd.DataFrame(rows, columns=["origin", "destination", "true_count"])
    t["noisy_count"] = t["true_count"] + 1.0
    t["release_prob"] = 0.99
    t["released"] = True
    return t, cent


def test_flow_picture_merges_hubs_when_flows_are_too_short_and_keeps_every_count():
    t, cent = _hub_table()
    keep = np.ones(len(t), bool)
    zones = fl.flow_picture(t, cent, value="noisy_count", keep=keep, top_n=300)
    assert zones.radius == 0
    assert len(zones.places) == 18
    # at 0.1 km per px the hubs' neighbour flows are 10 px: too short to read, so each hub becomes one place
    merged = fl.flow_picture(t, cent, value="noisy_count", keep=keep, top_n=300, km_per_px=0.1)
    assert merged.radius > 0
    assert len(merged.places) == 2
    assert sorted(map(len, merged.places["members"])) == [9, 9]
    assert len(merged.flows) == 2                             # hub A → hub B and back
    assert merged.flows["pairs"].sum() == 3
    assert merged.flows["count"].sum() == pytest.approx(151 + 121 + 111)
    total = t["noisy_count"].sum()                            # nothing lost: between + within = every count
    assert merged.places["within"].sum() + merged.flows["count"].sum() == pytest.approx(total)
    assert zones.places["within"].sum() + zones.flows["count"].sum() == pytest.approx(total)
    assert "nearby zones merged (within 1.5 km): 2 places from 18 zones" in merged.level_words()
    # one cell: always zones, only its flows
    one = fl.flow_picture(t, cent, value="noisy_count", keep=keep, top_n=300, km_per_px=0.1, cell=0)
    assert one.radius == 0
    assert set(np.r_[one.flows["o"], one.flows["d"]].tolist()) >= {0}


def test_flow_picture_keeps_zones_when_flows_are_long_enough():
    t, cent = _hub_table()
    keep = t["origin"].to_numpy() // 10 != t["destination"].to_numpy() // 10   # only the flows between the hubs
    pic = fl.flow_picture(t, cent, value="noisy_count", keep=keep, top_n=300, km_per_px=0.05)
    assert pic.radius == 0
    assert len(pic.flows) == 3


def test_flow_picture_suppressed_are_the_unpublished_pairs_summed():
    t, cent = _hub_table()
    t.loc[t["true_count"] < 200, "released"] = False
    pic = fl.flow_picture(t, cent, value="noisy_count", keep=t["released"].to_numpy(), top_n=300,
                          with_suppressed=True)
    assert pic.suppressed is not None
    assert pic.suppressed["count"].sum() == pytest.approx(150 + 120 + 110)   # the within-zone pair is not an arrow
    assert not pic.flows.empty


def test_auto_top_takes_what_carries_most_of_the_volume_within_its_bounds():
    lo, hi = fl.AUTO_FLOWS
    assert fl.auto_top(np.full(300, 5.0)) == hi                     # even flows: as many as stay legible
    assert fl.auto_top(np.r_[1000.0, np.ones(99)]) == lo            # one flow carries it all: still a few dozen
    assert fl.auto_top(np.ones(7)) == 7                             # fewer than the floor: all of them
    c = np.r_[np.full(30, 100.0), np.full(200, 1.0)]                # 80 % of 3,200: the 26 largest
    assert fl.auto_top(c) == 26
    assert fl.auto_top(np.zeros(0)) == 0


def test_both_ways_order_keeps_a_pair_of_places_whole():
    rng = np.random.default_rng(7)
    n = 40
    o, d = rng.integers(0, 12, n), rng.integers(0, 12, n)
    ok = o != d
    key = pd.Series(list(zip(o[ok], d[ok], strict=True))).drop_duplicates().index
    o, d = o[ok][key], d[ok][key]
    c = rng.random(len(o)) * 100
    for k in (1, 5, 12, len(o)):
        pick = fl.both_ways_order(o, d, c, k)
        assert k <= len(pick) <= k + 1
        chosen = set(zip(o[pick].tolist(), d[pick].tolist(), strict=True))
        every = set(zip(o.tolist(), d.tolist(), strict=True))
        for a, b in chosen:                                         # a drawn flow's way back is drawn too
            assert (b, a) not in every or (b, a) in chosen or (len(pick) == k and (a, b) == (o[pick[-1]], d[pick[-1]]))
        # the pairs taken are the heaviest pairs (two ways summed)
        pair = {}
        for a, b, x in zip(o.tolist(), d.tolist(), c.tolist(), strict=True):
            pair[frozenset((a, b))] = pair.get(frozenset((a, b)), 0.0) + x
        taken = {frozenset((a, b)) for a, b in chosen}
        left = set(pair) - taken
        if left and len(taken) > 1:
            full = [p for p in taken if all((a, b) in chosen for a, b in every if frozenset((a, b)) == p)]
            assert min(pair[p] for p in full) >= max(pair[p] for p in left) - 1e-9


def _cabspotting_week(tmp_path_factory):
    from odcore.paths import SHARED_DATA_DIR
    from tests.browser.test_browser_map import DATA, cabspotting_week_zip

    folder = DATA / "cabspotting_sf" if (DATA / "cabspotting_sf").is_dir() else SHARED_DATA_DIR / "cabspotting_sf"
    if not folder.is_dir():
        pytest.skip(f"real data not available: {folder} is absent")
    z = tmp_path_factory.mktemp("cab") / "cabspotting_week.zip"
    z.write_bytes(cabspotting_week_zip(folder))
    return str(z)


@pytest.fixture(scope="module", params=["city", "h3", "districts",
                                        pytest.param("cabspotting", marks=pytest.mark.slow)])
def published_week(request, tmp_path_factory):
    """``(name, table, centroids)``: the first week's release at the page's defaults (ε 0.66, threshold 100, seed 0)
    of the bundled city on its square grid, on H3 hexagons and on the bundled districts, and of an uploaded
    Cabspotting week (real taxi GPS, 1.3 km² squares)."""
    import argparse

    from odcore.cli.common import od_from_args
    from odcore.paths import SAMPLE_DATA_DIR
    from odcore.privacy.release import ReleaseConfig, release_with_report

    city = str(SAMPLE_DATA_DIR / "synthetic_city.parquet")
    inp, zones = {"city": (city, None), "h3": (city, "h3:8"),
                  "districts": (city, str(SAMPLE_DATA_DIR / "districts.geojson")),
                  "cabspotting": (None, None)}[request.param]
    if request.param == "cabspotting":
        inp = _cabspotting_week(tmp_path_factory)
    _, od = od_from_args(argparse.Namespace(input=inp, zones=zones, cell_km2=1.3, tz="auto"))
    pairs = od.pairs.loc[od.pairs["week"] == od.pairs["week"].min()]
    res = release_with_report(pairs, ReleaseConfig(epsilon=0.66, threshold=100), rng=0)
    return request.param, res.table, od.centroids()


def _drawn_px(pic: fl.FlowPicture, km_per_px: float) -> np.ndarray:
    x, y = pic.places["x"].to_numpy(), pic.places["y"].to_numpy()
    o, d = pic.flows["o"].to_numpy(), pic.flows["d"].to_numpy()
    return np.hypot(x[o] - x[d], y[o] - y[d]) / km_per_px


@pytest.mark.parametrize("top_n", [None, 300])
def test_first_view_level_shows_structure_on_real_data(published_week, top_n):
    """At the page's narrowest map (580 × 460 px), the level chosen leaves a legible number of places (12 to 60, or
    down to a third of the zones when few carry a flow) and draws a dozen or more arrows, most of them long enough to read.
    The fixed rule before merged a Cabspotting week's 433 zones into 2 places (2 arrows) and the bundled city into 13
    places with 7 arrows; merging is post-processing, so every count is still there (between + within)."""
    name, t, cent = published_week
    keep = t["released"].to_numpy(bool)
    pic = fl.flow_picture(t, cent, value="noisy_count", keep=keep, top_n=top_n, view_px=(580, 460))
    kpp = fl.fit_view(*pic.box, width_px=580, height_px=460, pad_px=34).km_per_px
    zones_with_flows = len(np.union1d(t.loc[keep, "origin"], t.loc[keep, "destination"]))
    assert fl.fewest_places(zones_with_flows) <= len(pic.places) <= fl.PLACES[1], (name, len(pic.places))
    assert len(pic.flows) >= min(12, pic.n_between), (name, len(pic.flows))
    assert (_drawn_px(pic, kpp) >= fl.READ_PX).mean() >= 0.6, name
    total = t.loc[keep, "noisy_count"].sum()
    between = pic.flows["count"].sum() / pic.volume_share if pic.volume_share else 0.0
    assert pic.places["within"].sum() + between == pytest.approx(total, rel=1e-9)
    if top_n is None:                                                # auto: a few dozen at most, and it says so
        assert len(pic.flows) <= fl.AUTO_FLOWS[1] + 1
        words = pic.shown_words()
        assert words.startswith("all ") or re.match(r"top [\d,]+ of [\d,]+ flows between places, \d+ % of", words)


def test_districts_draw_the_largest_flows_both_ways_and_say_how_many(published_week):
    """The bundled districts' 40 zones carry hundreds of published flows: Top N auto draws a few dozen, the
    largest pairs of places both ways, and the words say how many of how many and their share of the volume."""
    name, t, cent = published_week
    if name != "districts":
        pytest.skip("the districts' case")
    keep = t["released"].to_numpy(bool)
    zones = fl.flow_picture(t, cent, value="noisy_count", keep=keep, top_n=None)     # every district on its own
    assert len(zones.places) == 40
    assert zones.n_between > 200
    assert fl.AUTO_FLOWS[0] <= len(zones.flows) <= fl.AUTO_FLOWS[1] + 1
    first = zones.places["members"].str[0].to_numpy()
    drawn = set(zip(first[zones.flows["o"]].tolist(), first[zones.flows["d"]].tolist(), strict=True))
    published = set(zip(t.loc[keep, "origin"].tolist(), t.loc[keep, "destination"].tolist(), strict=True))
    missing = [(a, b) for a, b in drawn if (b, a) in published and (b, a) not in drawn]
    assert len(missing) <= 1                                         # only the last flow's way back may be cut
    share = zones.flows["count"].sum() / t.loc[keep, "noisy_count"].sum()
    assert zones.volume_share == pytest.approx(share)
    assert zones.shown_words() == (f"top {len(zones.flows)} of {zones.n_between:,} flows between places, "
                                   f"{100 * share:.0f} % of their volume")
    # at the first view the level may merge the small central districts, never to fewer than a dozen places
    pic = fl.flow_picture(t, cent, value="noisy_count", keep=keep, top_n=None, view_px=(580, 460))
    assert fl.PLACES[0] <= len(pic.places) <= 40
    assert len(pic.flows) <= fl.AUTO_FLOWS[1] + 1
