"""H3 hexagons as zones (:class:`H3Zones`, the ``h3:RES`` kind of :mod:`odcore.space.zones`): Uber's H3 cells
(h3 v4 API) at one resolution, fitted to the data's bounding box; zone ids are compact (0..n-1, in the order of the
H3 index), names are the H3 cell strings.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import geopandas as gpd
import h3
import numpy as np
import pandas as pd
import shapely
from h3.api.numpy_int import latlng_to_cell

from odcore.constants import CELL, LAT, LON
from odcore.errors import ParameterError
from odcore.space.zones import OUTSIDE, check_ids, coords, parse_zone_spec

MAX_H3_CELLS = 5_000_000
"""Most hexagons an H3 cover of the data's bounding box may hold."""


# ---------------------------------------------------------------------------------------------------------------
# H3 hexagons
# ---------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class H3Zones:
    """H3 hexagons (h3 v4) at ``resolution``; zone id ``i`` is the H3 cell ``cells[i]`` (sorted H3 integers).

    Build with :meth:`fit`: every hexagon whose centre lies in the points' bounding box grown by three average edge
    lengths (a hexagon's centre is within one edge length of each of its points, so every point of the box falls in
    one of them). The cells depend only on the box, so engines that fit the same box get the same ids.
    """

    resolution: int
    cells: np.ndarray = field(repr=False)
    kind = "h3"
    outside_reason = "outside_grid"

    def __post_init__(self) -> None:
        if not (0 <= int(self.resolution) <= 15):
            raise ParameterError(f"H3 resolution must be 0-15, got resolution={self.resolution}.")
        c = np.unique(np.asarray(self.cells, dtype=np.uint64)).astype(np.int64)
        if c.size == 0:
            raise ParameterError("an H3 zone system needs at least one cell.")
        object.__setattr__(self, "cells", c)

    @classmethod
    def fit(cls, lat, lon, resolution: int = 8) -> H3Zones:
        lat, lon = coords(lat, lon)
        res = int(parse_zone_spec(f"h3:{resolution}").value)
        ok = np.isfinite(lat) & np.isfinite(lon)
        if not ok.any():
            raise ParameterError("cannot fit H3 cells to zero points with finite coordinates.")
        la0, la1 = float(lat[ok].min()), float(lat[ok].max())
        lo0, lo1 = float(lon[ok].min()), float(lon[ok].max())
        edge_km = h3.average_hexagon_edge_length(res, unit="km")
        dlat = 3 * edge_km / 111.32
        dlon = dlat / max(math.cos(math.radians(min(89.0, max(abs(la0), abs(la1)) + dlat))), 1e-3)
        la0, la1 = max(-89.999, la0 - dlat), min(89.999, la1 + dlat)
        lo0, lo1 = max(-179.999, lo0 - dlon), min(179.999, lo1 + dlon)
        area_km2 = (la1 - la0) * 111.32 * (lo1 - lo0) * 111.32 * math.cos(math.radians((la0 + la1) / 2))
        est = area_km2 / h3.average_hexagon_area(res, unit="km^2")
        if est > MAX_H3_CELLS:
            raise ParameterError(f"zones h3:{res}: the data's bounding box needs ~{est:,.0f} hexagons (limit "
                                 f"{MAX_H3_CELLS:,}); use a lower resolution.")
        poly = h3.LatLngPoly([(la0, lo0), (la0, lo1), (la1, lo1), (la1, lo0)])
        cells = np.array([h3.str_to_int(c) for c in h3.h3shape_to_cells(poly, res)], dtype=np.uint64)
        # The cells depend on the bounding box only (not on which points lie inside it), so every engine that fits
        # the same box gets the same zone ids.
        return cls(res, cells)

    @property
    def n_cells(self) -> int:
        return int(self.cells.size)

    @property
    def spec(self) -> str:
        return f"h3:{self.resolution}"

    @property
    def cell_km2(self) -> float:
        """Average hexagon area at this resolution (km²)."""
        return float(h3.average_hexagon_area(self.resolution, unit="km^2"))

    @property
    def crs(self) -> str:
        return "EPSG:4326"

    def h3_index(self, lat, lon) -> np.ndarray:
        """``h3.latlng_to_cell`` of every point as int64 (0 for NaN coordinates)."""
        lat, lon = coords(lat, lon)
        return _h3_ints(lat, lon, self.resolution)

    def assign(self, lat, lon) -> np.ndarray:
        """Zone id (int64) of each point; -1 when its hexagon is not among :attr:`cells` or a coordinate is NaN."""
        h = self.h3_index(lat, lon)
        pos = np.searchsorted(self.cells, h)
        pos[pos >= self.cells.size] = 0
        return np.where(self.cells[pos] == h, pos, OUTSIDE).astype(np.int64)

    def names(self, cells=None) -> np.ndarray:
        c = check_ids(cells, self.n_cells)
        return np.asarray([format(int(v), "x") for v in self.cells[c]], dtype=object)

    def centroids(self, cells=None) -> pd.DataFrame:
        c = check_ids(cells, self.n_cells)
        ll = np.array([h3.cell_to_latlng(format(int(v), "x")) for v in self.cells[c]], dtype=np.float64)
        ll = ll.reshape(-1, 2)
        return pd.DataFrame({CELL: c, LAT: ll[:, 0], LON: ll[:, 1]})

    def polygons(self, cells=None):
        c = check_ids(cells, self.n_cells)
        geoms = [shapely.Polygon([(lo, la) for la, lo in h3.cell_to_boundary(format(int(v), "x"))])
                 for v in self.cells[c]]
        return gpd.GeoDataFrame({CELL: c, "name": self.names(c)}, geometry=geoms, crs="EPSG:4326")

    def to_dict(self) -> dict:
        return {"kind": "h3", "spec": self.spec, "resolution": int(self.resolution), "n_cells": self.n_cells,
                "cell_km2": self.cell_km2, "cells": [format(int(v), "x") for v in self.cells]}

    @classmethod
    def from_dict(cls, d: dict) -> H3Zones:
        return cls(int(d["resolution"]), np.array([int(s, 16) for s in d["cells"]], dtype=np.uint64))


def _h3_ints(lat: np.ndarray, lon: np.ndarray, res: int) -> np.ndarray:
    """h3 v4 ``latlng_to_cell`` (integer API) over arrays; 0 where a coordinate is not finite."""
    out = np.zeros(lat.size, dtype=np.uint64)
    ok = np.isfinite(lat) & np.isfinite(lon) & (np.abs(lat) <= 90)
    idx = np.flatnonzero(ok)
    out[idx] = np.fromiter((latlng_to_cell(a, b, res) for a, b in zip(lat[idx].tolist(), lon[idx].tolist(),
                                                                       strict=True)),
                           dtype=np.uint64, count=idx.size)
    return out.astype(np.int64)


