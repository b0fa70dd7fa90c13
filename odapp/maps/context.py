"""A map's offline base layer: water from the bundled coastline and an image of where the data's fixes lie, drawn
round the zones' box; nothing is fetched."""

from __future__ import annotations

import base64
import itertools
from dataclasses import dataclass

import numpy as np
import pydeck as pdk

from odapp.maps.deck import DIGITS, EncodedLayer
from odcore.report import basemap, figures
from odcore.space.density import fix_density

WATER_RGBA = [*figures.WATER_RGB, 255]   # water: a pale blue under the zones (as in the exported image)
FIXES_GREY = 40                       # the fixes' image: one dark grey, its opacity by density
FIXES_MAX_ALPHA = 150
FIXES_WIDTH_PX = 1024                 # the fixes' image: pixels across the zones' box and its margin


@dataclass(frozen=True, eq=False)
class MapContext:
    """A map's offline base layer (:func:`map_context`): ``under`` the zones (water), ``over`` their fill and under
    their outlines, places and flows (the fixes' image), and the legend's line about it (``words``, empty when
    nothing is drawn). Its layers are :class:`EncodedLayer`s, shared by every deck of a dataset."""

    under: tuple = ()
    over: tuple = ()
    words: str = ""


def map_context(zbox: tuple[tuple[float, float], tuple[float, float]], lon=None, lat=None, *,
                pad: float = 0.25, fixes=None) -> MapContext:
    """The offline base layer round the zones' box ``zbox`` (:func:`zones_box`): water from the bundled Natural
    Earth coastline (:func:`odcore.report.basemap.water_rings`) over the box and a margin three times its size on
    every side (the widest window, and room to pan), and, when the traces' fixes ``lon, lat`` are given, an image of how many fixes fall on each
    spot (:func:`odcore.space.density.fix_density`; on dense GPS, the streets the traces run on) over the box and
    ``pad`` of it on every side. The image goes to the browser inside the map's JSON (a ``data:`` URL): nothing is
    fetched. ``fixes(box, width_px)``, in place of ``lon, lat``, gives that image's counts itself (a streamed folder:
    :func:`odcore.od.engines.cab_stream.fix_density_cabspotting`)."""
    (lo0, lo1), (la0, la1) = zbox
    dx, dy = max(lo1 - lo0, 1e-3), max(la1 - la0, 1e-3)
    under, over, words = [], [], []
    m = 3 * max(dx, dy)   # a wide window shows far more than the zones' box: water to its edges, white = land
    water = basemap.water_rings(lo0 - m, lo1 + m, la0 - m, la1 + m, tolerance=max(dx, dy) / 2000)
    if water:
        under.append(EncodedLayer(pdk.Layer(
            "PolygonLayer", data=[{"polygon": w} for w in water], id="water", get_polygon="polygon",
            get_fill_color=WATER_RGBA, stroked=False, filled=True, pickable=False)))
        words.append(f"<span style='display:inline-block;vertical-align:middle;margin:0 3px;width:14px;height:10px;"
                     f"background:rgb({WATER_RGBA[0]},{WATER_RGBA[1]},{WATER_RGBA[2]})'></span>water "
                     f"(Natural Earth coastline, ± a few hundred m)")
    if fixes is not None or (lon is not None and len(lon)):
        box = (lo0 - pad * dx, la0 - pad * dy, lo1 + pad * dx, la1 + pad * dy)
        counts = (fixes(box, FIXES_WIDTH_PX) if fixes is not None
                  else fix_density(lon, lat, box, FIXES_WIDTH_PX))
        png = basemap.png_grey_alpha(basemap.density_alpha(counts, FIXES_MAX_ALPHA), FIXES_GREY)
        if counts.any():
            over.append(EncodedLayer(pdk.Layer(
                "BitmapLayer", id="fixes",   # quoted: pydeck sends a quoted string as it is, not as an expression
                image="'data:image/png;base64," + base64.b64encode(png).decode("ascii") + "'",
                bounds=[round(v, DIGITS) for v in box], pickable=False)))
            words.append(f"<span style='display:inline-block;vertical-align:middle;margin:0 3px;width:14px;"
                         f"height:10px;background:repeating-linear-gradient(90deg,rgba({FIXES_GREY},{FIXES_GREY},"
                         f"{FIXES_GREY},0.6) 0 1px,transparent 1px 3px)'></span>grey texture: where the data's "
                         "GPS fixes lie (on taxi traces, the streets)")
    return MapContext(tuple(under), tuple(over), " · ".join(words))


def zones_box(polygons: list) -> tuple[tuple[float, float], tuple[float, float]]:
    """``((lon_min, lon_max), (lat_min, lat_max))`` of the zones' outlines: the whole box for up to 500 zones, else
    the 0.5th to 99.5th percentile of their corners (a stray zone far out does not shrink the map)."""
    if not polygons:
        return (0.0, 0.0), (0.0, 0.0)
    a = np.asarray(list(itertools.chain.from_iterable(polygons)), dtype=float).reshape(-1, 2)
    q = (0, 100) if len(polygons) <= 500 else (0.5, 99.5)
    lo, la = np.nanpercentile(a[:, 0], q), np.nanpercentile(a[:, 1], q)
    return (float(lo[0]), float(lo[1])), (float(la[0]), float(la[1]))
