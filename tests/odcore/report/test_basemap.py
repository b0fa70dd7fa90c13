"""The flow maps' offline base layer: water from the bundled Natural Earth land, the image of the traces' fixes, and
the per-zone attack success the map can shade by."""

from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pytest
import shapely

from odcore.errors import ParameterError
from odcore.privacy.attack import risk_by_origin
from odcore.report import basemap as bm
from odcore.space import density

SF = (-122.56, -122.18, 37.60, 37.86)        # lon_min, lon_max, lat_min, lat_max: San Francisco and the bay
ATLANTA = (-84.65, -84.13, 33.53, 33.96)     # the bundled synthetic city's box, inland


def _inside(rings_list, lon, lat) -> bool:
    return any(shapely.Polygon(r[0], r[1:]).contains(shapely.Point(lon, lat)) for r in rings_list)


def test_bundled_land_reads_and_its_rings_are_closed():
    xy, start, poly, boxes = bm.land_rings()
    assert len(start) == len(poly) + 1 == len(boxes) + 1
    assert np.allclose(xy[start[:-1]], xy[start[1:] - 1])                       # every ring closed
    assert (-180 <= boxes[:, 0]).all()
    assert (boxes[:, 2] <= 180).all()


@pytest.mark.parametrize(("lon", "lat", "wet"), [
    (-122.35, 37.80, True),     # the bay between San Francisco and Oakland
    (-122.54, 37.72, True),     # the Pacific off Ocean Beach
    (-122.42, 37.77, False),    # the Mission, San Francisco
    (-122.27, 37.80, False),    # downtown Oakland
])
def test_water_of_the_bay_and_the_ocean_and_not_the_city(lon, lat, wet):
    water = bm.water_rings(*SF, tolerance=0.0003)
    assert water
    assert _inside(water, lon, lat) is wet


def test_an_inland_box_has_no_water_and_a_bad_box_none():
    assert bm.water_rings(*ATLANTA) == []
    assert bm.water_rings(1.0, 0.0, 2.0, 3.0) == []
    assert bm.water_rings(float("nan"), 1.0, 0.0, 1.0) == []


def test_water_in_the_open_sea_is_the_whole_box():
    (poly,) = bm.water_rings(-30.0, -29.0, 30.0, 31.0)     # mid-Atlantic
    assert shapely.Polygon(poly[0]).area == pytest.approx(1.0)


def test_fix_density_puts_each_fix_in_its_pixel_north_up():
    box = (10.0, 50.0, 11.0, 51.0)
    lon = np.array([10.001, 10.001, 10.999, 10.5, 12.0])  # the last one is outside the box
    lat = np.array([50.999, 50.999, 50.001, 50.5, 50.5])
    c = density.fix_density(lon, lat, box, 100)
    assert c.sum() == 4
    assert c[0, 0] == 2                                    # north-west corner: row 0 is the top
    assert c[-1, -1] == 1                                  # south-east corner
    # rows uniform in web-mercator y: the image is taller than wide at 50° N, by about 1/cos(50.5°)
    assert c.shape[0] / c.shape[1] == pytest.approx(1 / np.cos(np.radians(50.5)), rel=0.02)
    with pytest.raises(ParameterError, match="box"):
        density.fix_density(lon, lat, (11.0, 50.0, 10.0, 51.0), 100)


def test_density_alpha_leaves_empty_pixels_clear_and_tops_out():
    c = np.zeros((4, 4))
    c[0, 0], c[1, 1], c[2, 2] = 1, 10, 10_000
    a = bm.density_alpha(c, max_alpha=150, levels=16)
    assert a[3, 3] == 0
    assert a[0, 1] == 0
    assert 0 < a[0, 0] < a[1, 1] <= a[2, 2] == 150
    assert (bm.density_alpha(np.zeros((3, 3))) == 0).all()


def test_png_is_read_back_by_pillow_as_the_same_grey_and_alpha():
    from PIL import Image

    alpha = (np.arange(35 * 20) % 256).astype(np.uint8).reshape(35, 20)
    im = Image.open(io.BytesIO(bm.png_grey_alpha(alpha, grey=40)))
    assert im.mode == "P"                                 # indexed: one byte a pixel
    assert im.size == (20, 35)
    px = np.asarray(im.convert("LA"))
    assert (px[..., 0] == 40).all()
    assert (px[..., 1] == alpha).all()


def test_risk_by_origin_counts_each_person_once_per_zone():
    pairs = pd.DataFrame({"week": [0, 0, 0, 0, 0, 1], "user": [1, 1, 2, 3, 3, 4],
                          "origin": [7, 7, 7, 8, 7, 8], "destination": [8, 9, 9, 7, 9, 7]})
    risk = pd.DataFrame({"user": [1, 2, 3, 4], "success": [0.6, 0.8, 0.9, 0.99]})
    out = risk_by_origin(pairs, risk, 0).set_index("origin")
    assert out.loc[7, "people"] == 3                      # users 1 (twice from 7), 2 and 3
    assert out.loc[7, "median"] == pytest.approx(0.8)
    assert out.loc[7, "max"] == pytest.approx(0.9)
    assert out.loc[8, "people"] == 1
    assert out.loc[8, "median"] == pytest.approx(0.9)
    with pytest.raises(ParameterError, match="success"):
        risk_by_origin(pairs, risk.drop(columns="success"), 0)


def test_map_context_sends_water_and_the_fixes_image_inline():
    from odapp.maps import context as map_base

    rng = np.random.default_rng(3)
    lon, lat = rng.uniform(-122.45, -122.38, 5000), rng.uniform(37.74, 37.80, 5000)
    mc = map_base.map_context(((-122.5, -122.3), (37.7, 37.85)), lon, lat)
    assert [x.id for x in mc.under] == ["water"]
    assert [x.id for x in mc.over] == ["fixes"]
    fixes = json.loads(mc.over[0].json)
    assert fixes["@@type"] == "BitmapLayer"
    assert fixes["image"].startswith("data:image/png;base64,")            # inside the JSON: nothing to fetch
    left, bottom, right, top = fixes["bounds"]
    assert left < -122.5
    assert right > -122.3
    assert bottom < 37.7
    assert top > 37.85
    assert "water" in mc.words
    assert "GPS fixes" in mc.words
    inland = map_base.map_context(((-84.5, -84.3), (33.7, 33.8)))              # no water, no traces: nothing drawn
    assert inland.under == ()
    assert inland.over == ()
    assert inland.words == ""


def test_the_exported_map_draws_water_where_there_is_some_and_lists_it():
    from odcore.report import figures

    def square(lon, lat, d=0.01):
        return [[lon, lat], [lon + d, lat], [lon + d, lat + d], [lon, lat + d]]

    def fig_at(lon, lat, **kw):
        cells = pd.DataFrame({"cell": [1, 2], "polygon": [square(lon, lat), square(lon + 0.05, lat + 0.02)],
                              "value": [0.2, 0.9]})
        flows = pd.DataFrame({"o_lon": [lon + 0.005], "o_lat": [lat + 0.005], "d_lon": [lon + 0.055],
                              "d_lat": [lat + 0.025], "count": [120.0]})
        return figures.flow_map_figure(cells, flows, title="t", **kw)

    def water_traces(fig):
        return [t for t in fig.data if t.fill == "toself" and t.fillcolor == "rgb({},{},{})".format(*figures.WATER_RGB)]

    def listed(fig):
        return any("water" in (a.text or "") for a in fig.layout.annotations)

    sf = fig_at(-122.42, 37.78)               # San Francisco by the bay: water drawn, and in the legend
    assert water_traces(sf)
    assert listed(sf)
    atl = fig_at(-84.40, 33.75)               # inland: none
    assert not water_traces(atl)
    assert not listed(atl)
    off = fig_at(-122.42, 37.78, water=False)
    assert not water_traces(off)
    assert not listed(off)
