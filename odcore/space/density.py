"""Where the fixes lie: how many GPS fixes fall in each pixel of a web-map image of a box.

On dense GPS (Cabspotting's taxis) the image draws the streets the traces run on; the flow maps' offline base layer
(:mod:`odcore.report.basemap`) shades it, and the Cabspotting stream counts it file by file
(:func:`odcore.od.engines.cab_stream.fix_density_cabspotting`).
"""

from __future__ import annotations

import math

import numpy as np

from odcore.errors import ParameterError

__all__ = ["fix_density", "mercator_y"]


def mercator_y(lat) -> np.ndarray:
    """Web-mercator y of latitudes (radians of the projection; a map's rows are uniform in it)."""
    phi = np.radians(np.clip(np.asarray(lat, dtype=float), -85.0, 85.0))
    return np.log(np.tan(np.pi / 4 + phi / 2))


def fix_density(lon, lat, box: tuple[float, float, float, float], width_px: int) -> np.ndarray:
    """How many fixes fall in each pixel of an image of ``box`` (``lon_min, lat_min, lon_max, lat_max``)
    ``width_px`` wide, as tall as a flat web map draws the box (web-mercator); row 0 is the top (north). Rows are
    spaced evenly in latitude: over a city's box that is within a pixel of a web map's rows (at 38° over half a
    degree of latitude, the largest gap is 0.1 % of the height), at a third of the cost."""
    lo0, la0, lo1, la1 = box
    if not (lo1 > lo0 and la1 > la0) or width_px < 2:
        raise ParameterError(f"box must have lon_max > lon_min and lat_max > lat_min, got box={box}; "
                             f"width_px must be >= 2, got {width_px}.")
    y0, y1 = mercator_y([la0, la1])
    height = max(2, round(width_px * (y1 - y0) / math.radians(lo1 - lo0)))
    col = (np.asarray(lon, dtype=float) - lo0) * (width_px / (lo1 - lo0))
    row = (la1 - np.asarray(lat, dtype=float)) * (height / (la1 - la0))       # row 0 at the top
    ok = (col >= 0) & (col < width_px) & (row >= 0) & (row < height)
    flat = row[ok].astype(np.int64) * width_px + col[ok].astype(np.int64)
    return np.bincount(flat, minlength=height * width_px).reshape(height, width_px)
