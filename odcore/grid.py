"""Square grid cells of a chosen area, laid in a metric projection.

Bassolas et al. (2022, reply, §"Mechanism") aggregate trips between grid cells of ~1.3 km²; :class:`SquareGrid`
reproduces that: squares of side ``sqrt(cell_km2)`` km in the UTM zone of the data (chosen from the median
longitude/latitude). Data spanning more than one UTM zone's comfortable width (> 12° of longitude, e.g. a
country-wide check-in set) is laid instead in a Lambert azimuthal equal-area projection centred on the data, which
keeps every cell's area exact.

Cell ids are ``row * n_cols + col`` (int64) inside the fitted extent; points outside it get ``-1``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd

from odcore.constants import CELL, LAT, LON
from odcore.errors import ParameterError, check_positive

__all__ = ["SquareGrid", "utm_epsg"]

_MAX_UTM_LON_SPAN = 12.0


def utm_epsg(lat: float, lon: float) -> int:
    """EPSG code of the WGS84 UTM zone containing (lat, lon).

    >>> utm_epsg(37.77, -122.42)  # San Francisco, zone 10N
    32610
    >>> utm_epsg(-33.9, 151.2)  # Sydney, zone 56S
    32756
    """
    zone = math.floor((lon + 180.0) / 6.0) % 60 + 1
    return (32600 if lat >= 0 else 32700) + zone


@lru_cache(maxsize=32)
def _transformer(crs: str, inverse: bool):
    import pyproj

    if inverse:
        return pyproj.Transformer.from_crs(crs, "EPSG:4326", always_xy=True)
    return pyproj.Transformer.from_crs("EPSG:4326", crs, always_xy=True)


@dataclass(frozen=True)
class SquareGrid:
    """A square grid in a metric CRS.

    Parameters
    ----------
    crs:
        The projected CRS (``"EPSG:326zz"`` for UTM, or a ``+proj=laea`` string).
    x0, y0:
        Metric coordinates of the lower-left corner of cell 0.
    side_m:
        Cell side in metres (``sqrt(cell_km2) * 1000``).
    n_cols, n_rows:
        Extent in cells.
    """

    crs: str
    x0: float
    y0: float
    side_m: float
    n_cols: int
    n_rows: int

    def __post_init__(self) -> None:
        check_positive("side_m", self.side_m)
        if self.n_cols < 1 or self.n_rows < 1:
            raise ParameterError(f"grid needs n_cols, n_rows >= 1, got {self.n_cols} x {self.n_rows}.")
        if self.n_cols * self.n_rows > 2**52:
            raise ParameterError(f"grid of {self.n_cols} x {self.n_rows} cells is too large; use larger cells.")

    # -- construction ------------------------------------------------------------------------------------------
    @classmethod
    def fit(cls, lat, lon, cell_km2: float = 1.3, *, margin_cells: int = 1) -> SquareGrid:
        """Grid covering the points (plus ``margin_cells``), cells of ``cell_km2`` km².

        The CRS is the UTM zone of the median point (Bassolas et al.: ~1.3 km² cells), or a Lambert azimuthal
        equal-area projection centred on the median when the points span more than 12° of longitude.
        """
        cell_km2 = check_positive("cell_km2", cell_km2)
        lat = np.asarray(lat, dtype=np.float64)
        lon = np.asarray(lon, dtype=np.float64)
        if lat.size == 0:
            raise ParameterError("cannot fit a grid to zero points.")
        if np.isnan(lat).any() or np.isnan(lon).any():
            raise ParameterError("cannot fit a grid to points with NaN coordinates.")
        # Median of a subsample is enough to pick the zone.
        step = max(1, lat.size // 200_000)
        mlat, mlon = float(np.median(lat[::step])), float(np.median(lon[::step]))
        lon_span = float(np.percentile(lon[::step], 99.9) - np.percentile(lon[::step], 0.1))
        if lon_span <= _MAX_UTM_LON_SPAN and abs(mlat) < 84:
            crs = f"EPSG:{utm_epsg(mlat, mlon)}"
        else:
            crs = f"+proj=laea +lat_0={mlat:.4f} +lon_0={mlon:.4f} +datum=WGS84 +units=m +no_defs"
        x, y = _transformer(crs, False).transform(lon, lat)
        fin = np.isfinite(x) & np.isfinite(y)
        if not fin.any():
            raise ParameterError("no point can be projected to a metric grid.")
        side = math.sqrt(cell_km2) * 1000.0
        xmin, xmax = float(x[fin].min()), float(x[fin].max())
        ymin, ymax = float(y[fin].min()), float(y[fin].max())
        # Snap the origin to a multiple of the side so the same data always gives the same cells.
        x0 = (math.floor(xmin / side) - margin_cells) * side
        y0 = (math.floor(ymin / side) - margin_cells) * side
        n_cols = math.floor((xmax - x0) / side) + 1 + margin_cells
        n_rows = math.floor((ymax - y0) / side) + 1 + margin_cells
        return cls(crs=crs, x0=x0, y0=y0, side_m=side, n_cols=n_cols, n_rows=n_rows)

    # -- properties ----------------------------------------------------------------------------------------------
    @property
    def cell_km2(self) -> float:
        """Cell area in km² (exact in the metric CRS)."""
        return (self.side_m / 1000.0) ** 2

    @property
    def n_cells(self) -> int:
        return self.n_cols * self.n_rows

    # -- mapping -------------------------------------------------------------------------------------------------
    def project(self, lat, lon) -> tuple[np.ndarray, np.ndarray]:
        """WGS84 degrees -> metric x, y in :attr:`crs`."""
        lat = np.asarray(lat, dtype=np.float64)
        lon = np.asarray(lon, dtype=np.float64)
        tr = _transformer(self.crs, False)
        n = lat.size
        if n < 2_000_000:
            x, y = tr.transform(lon, lat)
            return np.asarray(x), np.asarray(y)
        # Big inputs: project in chunks so temporaries stay small.
        x = np.empty(n)
        y = np.empty(n)
        for a in range(0, n, 1_000_000):
            b = min(n, a + 1_000_000)
            x[a:b], y[a:b] = tr.transform(lon[a:b], lat[a:b])
        return x, y

    def assign(self, lat, lon) -> np.ndarray:
        """Cell id (int64) of each point; ``-1`` outside the grid or not projectable."""
        x, y = self.project(lat, lon)
        col = np.floor((x - self.x0) / self.side_m)
        row = np.floor((y - self.y0) / self.side_m)
        ok = np.isfinite(col) & np.isfinite(row) & (col >= 0) & (col < self.n_cols) & (row >= 0) \
            & (row < self.n_rows)
        out = np.full(x.shape, -1, dtype=np.int64)
        out[ok] = row[ok].astype(np.int64) * self.n_cols + col[ok].astype(np.int64)
        return out

    def _check_cells(self, cells) -> np.ndarray:
        if cells is None:
            if self.n_cells > 5_000_000:
                raise ParameterError(f"the grid has {self.n_cells} cells; pass the cells you need (cells=...).")
            return np.arange(self.n_cells, dtype=np.int64)
        c = np.asarray(cells, dtype=np.int64).ravel()
        if c.size and (c.min() < 0 or c.max() >= self.n_cells):
            raise ParameterError(f"cell ids must be in [0, {self.n_cells}), got {c.min()}..{c.max()}.")
        return c

    def cell_xy(self, cells) -> tuple[np.ndarray, np.ndarray]:
        """Metric coordinates of the centres of ``cells``."""
        c = self._check_cells(cells)
        row, col = np.divmod(c, self.n_cols)
        return self.x0 + (col + 0.5) * self.side_m, self.y0 + (row + 0.5) * self.side_m

    def centroids(self, cells=None) -> pd.DataFrame:
        """``DataFrame[cell, lat, lon]`` of the cell centres (all cells when ``cells`` is None)."""
        c = self._check_cells(cells)
        x, y = self.cell_xy(c)
        lon, lat = _transformer(self.crs, True).transform(x, y)
        return pd.DataFrame({CELL: c, LAT: np.asarray(lat), LON: np.asarray(lon)})

    def polygons(self, cells=None):
        """``GeoDataFrame[cell, geometry]`` (EPSG:4326) of the cell squares, for maps."""
        import geopandas as gpd
        import shapely

        c = self._check_cells(cells)
        x, y = self.cell_xy(c)
        h = self.side_m / 2
        xs = np.stack([x - h, x + h, x + h, x - h, x - h], axis=1)
        ys = np.stack([y - h, y - h, y + h, y + h, y - h], axis=1)
        lon, lat = _transformer(self.crs, True).transform(xs.ravel(), ys.ravel())
        coords = np.stack([np.asarray(lon), np.asarray(lat)], axis=1).reshape(len(c), 5, 2)
        geoms = shapely.polygons(coords)
        return gpd.GeoDataFrame({CELL: c}, geometry=geoms, crs="EPSG:4326")

    def to_dict(self) -> dict:
        """JSON-able description."""
        return {"crs": self.crs, "x0": self.x0, "y0": self.y0, "side_m": self.side_m, "n_cols": self.n_cols,
                "n_rows": self.n_rows, "cell_km2": self.cell_km2}
