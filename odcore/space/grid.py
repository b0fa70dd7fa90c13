"""Square grid cells of a chosen area, laid in a metric projection.

Bassolas et al. (2022, reply, §"Mechanism") aggregate trips between grid cells of ~1.3 km²; :class:`SquareGrid`
reproduces that: squares of side ``sqrt(cell_km2)`` km in the UTM zone of the data (chosen from the median
longitude/latitude). Data spanning more than one UTM zone's comfortable width (> 12° of longitude, e.g. a
country-wide check-in set) is laid instead in a Lambert azimuthal equal-area projection centred on the data, which
keeps every cell's area exact.

Cell ids are ``row * n_cols + col`` (int64) inside the fitted extent; points outside it get ``-1``.
"""

from __future__ import annotations

import importlib
import math
import warnings
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd
import pyproj
from pyproj import CRS
from pyproj.exceptions import CRSError

from odcore.constants import CELL, LAT, LON
from odcore.errors import ParameterError, check_positive

__all__ = ["SquareGrid", "crs_label", "utm_epsg"]

GEOMETRY_MODULE = "odcore.space.polygons"
"""The module that turns squares into shapely polygons in a GeoDataFrame (geopandas, shapely), imported when a map
asks for a grid's polygons: counting trips on squares never loads it (tests/odcore/data/test_hostile.py)."""

_SURROGATE_TOL_M = 1e-3

_MAX_UTM_LON_SPAN = 12.0


def crs_label(crs: str) -> str:
    """A CRS by name: its EPSG code and description, or the projection's name for a custom PROJ string.

    >>> crs_label("EPSG:32610")
    'EPSG:32610 (WGS 84 / UTM zone 10N)'
    >>> crs_label("+proj=laea +lat_0=39 +lon_0=-98 +datum=WGS84 +units=m")
    'Lambert Azimuthal Equal Area centred on 39°, -98° (custom PROJ definition)'
    """
    try:
        c = CRS.from_user_input(crs)
    except CRSError:
        return str(crs)
    code = c.to_epsg()
    if code is not None:
        return f"EPSG:{code} ({c.name})"

    with warnings.catch_warnings():   # "you will likely lose information": only its parameters are read here
        warnings.simplefilter("ignore", UserWarning)
        p = c.to_dict()
    method = c.coordinate_operation.method_name if c.coordinate_operation is not None else c.name
    where = f" centred on {p['lat_0']:g}°, {p['lon_0']:g}°" if "lat_0" in p and "lon_0" in p else ""
    return f"{method}{where} (custom PROJ definition)"


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
def transformer(crs: str, inverse: bool):
    if inverse:
        return pyproj.Transformer.from_crs(crs, "EPSG:4326", always_xy=True)
    return pyproj.Transformer.from_crs("EPSG:4326", crs, always_xy=True)


def _term_order(deg: int) -> list[tuple[int, int]]:
    """The exponents ``(i, j)`` of the surrogate's terms u^i·v^j, in the order of its coefficients."""
    return [(i, j) for i in range(deg + 1) for j in range(deg + 1 - i)]


def _poly_terms(u: np.ndarray, v: np.ndarray, deg: int) -> list[np.ndarray]:
    return [u**i * v**j for i, j in _term_order(deg)]


def _surrogate(crs: str, lat: np.ndarray, lon: np.ndarray):
    """A validated polynomial surrogate of the projection over the points' bounding box, or None."""
    la0, la1 = float(np.nanmin(lat)), float(np.nanmax(lat))
    lo0, lo1 = float(np.nanmin(lon)), float(np.nanmax(lon))
    if not (np.isfinite(la0) and np.isfinite(lo0)) or la1 - la0 > 3 or lo1 - lo0 > 3:
        return None
    return _fit_surrogate(crs, round(la0, 6) - 1e-6, round(la1, 6) + 1e-6, round(lo0, 6) - 1e-6,
                          round(lo1, 6) + 1e-6)


@lru_cache(maxsize=16)
def _fit_surrogate(crs: str, la0: float, la1: float, lo0: float, lo1: float):
    tr = transformer(crs, False)
    cla, clo = (la0 + la1) / 2, (lo0 + lo1) / 2
    sla, slo = max((la1 - la0) / 2, 1e-6), max((lo1 - lo0) / 2, 1e-6)
    g = np.linspace(-1, 1, 25)
    U, V = np.meshgrid(g, g)
    U, V = U.ravel(), V.ravel()
    gc = np.linspace(-1, 1, 71)
    Uc, Vc = np.meshgrid(gc, gc)
    Uc, Vc = Uc.ravel(), Vc.ravel()
    X, Y = tr.transform(clo + slo * U, cla + sla * V)
    Xc, Yc = tr.transform(clo + slo * Uc, cla + sla * Vc)
    for deg in (3, 4, 5, 6):
        A = np.stack(_poly_terms(U, V, deg), axis=1)
        cx = np.linalg.lstsq(A, np.asarray(X), rcond=None)[0]
        cy = np.linalg.lstsq(A, np.asarray(Y), rcond=None)[0]
        Ac = np.stack(_poly_terms(Uc, Vc, deg), axis=1)
        err = max(np.abs(Ac @ cx - Xc).max(), np.abs(Ac @ cy - Yc).max())
        if err < _SURROGATE_TOL_M:
            return _Surrogate(cla, clo, sla, slo, deg, cx, cy)
    return None


class _Surrogate:
    def __init__(self, cla, clo, sla, slo, deg, cx, cy):
        self.cla, self.clo, self.sla, self.slo, self.deg = cla, clo, sla, slo, deg
        self.cx, self.cy = cx, cy
        self._index = {t: k for k, t in enumerate(_term_order(deg))}

    CHUNK = 1 << 15   # points per block: the ~40 passes of Horner's scheme stay in the CPU cache

    def __call__(self, lat: np.ndarray, lon: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        lat, lon = np.asarray(lat, dtype=np.float64), np.asarray(lon, dtype=np.float64)
        x, y = np.empty_like(lat), np.empty_like(lat)
        for a in range(0, lat.size, self.CHUNK):   # the same operations on each point as in one pass, block by block
            x[a:a + self.CHUNK], y[a:a + self.CHUNK] = self._eval(lat[a:a + self.CHUNK], lon[a:a + self.CHUNK])
        return x, y

    def _eval(self, lat: np.ndarray, lon: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        u = (lon - self.clo) / self.slo
        v = (lat - self.cla) / self.sla
        # Horner in v inside Horner in u: p(u, v) = sum_i u^i * q_i(v)
        x = np.zeros_like(u)
        y = np.zeros_like(u)
        qx = np.empty_like(u)
        qy = np.empty_like(u)
        for i in range(self.deg, -1, -1):
            qx.fill(0.0)
            qy.fill(0.0)
            for j in range(self.deg - i, -1, -1):
                k = self._index[(i, j)]
                qx *= v
                qx += self.cx[k]
                qy *= v
                qy += self.cy[k]
            x *= u
            x += qx
            y *= u
            y += qy
        return x, y


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
    kind = "square"   # zone-system interface (odcore.space.zones): not a dataclass field
    outside_reason = "outside_grid"

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
        if lat.size > 200_000 and crs.startswith("EPSG:"):
            # The projection maps the lat/lon bounding box's boundary around the images of all points: project
            # the densified boundary instead of every point (one margin cell absorbs the densification error).
            la0, la1, lo0, lo1 = lat.min(), lat.max(), lon.min(), lon.max()
            e = np.linspace(0, 1, 513)
            blat = np.concatenate([la0 + (la1 - la0) * e, np.full(513, la1), la1 - (la1 - la0) * e, np.full(513, la0)])
            blon = np.concatenate([np.full(513, lo0), lo0 + (lo1 - lo0) * e, np.full(513, lo1), lo1 - (lo1 - lo0) * e])
            x, y = transformer(crs, False).transform(blon, blat)
            x, y = np.asarray(x), np.asarray(y)
            margin_cells = max(margin_cells, 1)
        else:
            x, y = transformer(crs, False).transform(lon, lat)
            x, y = np.asarray(x), np.asarray(y)
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
        """WGS84 degrees -> metric x, y in :attr:`crs`.

        Large inputs (> 200,000 points) go through a polynomial surrogate of the projection fitted on the points'
        bounding box and validated against pyproj on a denser check lattice: it is used only when its largest
        error there is below 1 mm (far below GPS precision; a point moves to a neighbouring cell only if it lies
        within 1 mm of a cell edge), otherwise pyproj projects every point. This is 5-10x faster than pyproj.
        """
        lat = np.asarray(lat, dtype=np.float64)
        lon = np.asarray(lon, dtype=np.float64)
        tr = transformer(self.crs, False)
        if lat.size > 200_000:
            sur = _surrogate(self.crs, lat, lon)
            if sur is not None:
                return sur(lat, lon)
        x, y = tr.transform(lon, lat)
        return np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)

    def assign(self, lat, lon) -> np.ndarray:
        """Cell id (int64) of each point; ``-1`` outside the grid or not projectable."""
        return self.cells_of_xy(*self.project(lat, lon))

    CHUNK = 1 << 15
    """Points worked on at a time by :meth:`cells_of_xy`: its temporaries stay in the processor's cache."""

    def cells_of_xy(self, x, y) -> np.ndarray:
        """Cell id (int64) of each point given in metric coordinates of :attr:`crs` (:meth:`project`), ``-1``
        outside; ``x`` and ``y`` are not modified (several grids of one projection can floor the same arrays).

        A cell is ``floor((y - y0) / side) * n_cols + floor((x - x0) / side)``, worked out :attr:`CHUNK` points at
        a time (twice as fast as whole-array passes on the bundled city's 1.7 million rows: 13 MB temporaries leave
        the cache at every pass). Inside the grid the sum is taken in float64, exact below 2⁵³."""
        x, y = np.broadcast_arrays(np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64))
        shape = x.shape
        x, y = x.ravel(), y.ravel()
        n = x.size
        out = np.empty(n, dtype=np.int64)
        exact = self.n_cells < 2 ** 52
        fx, fy = np.empty(min(self.CHUNK, n)), np.empty(min(self.CHUNK, n))
        for a in range(0, n, self.CHUNK):
            b = min(a + self.CHUNK, n)
            u, v, o = fx[:b - a], fy[:b - a], out[a:b]
            np.subtract(x[a:b], self.x0, out=u)
            u /= self.side_m
            np.floor(u, out=u)
            np.subtract(y[a:b], self.y0, out=v)
            v /= self.side_m
            np.floor(v, out=v)
            if exact and u.min() >= 0 and u.max() < self.n_cols and v.min() >= 0 and v.max() < self.n_rows:
                v *= self.n_cols   # every point inside (NaN fails the test above)
                v += u
                o[...] = v
                continue
            with np.errstate(invalid="ignore"):
                ok = (u >= 0) & (u < self.n_cols) & (v >= 0) & (v < self.n_rows)   # NaN compares False
            u[~ok] = 0
            v[~ok] = 0
            o[...] = v
            o *= self.n_cols
            o += u.astype(np.int64)
            o[~ok] = -1
        return out.reshape(shape)

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
        lon, lat = transformer(self.crs, True).transform(x, y)
        return pd.DataFrame({CELL: c, LAT: np.asarray(lat), LON: np.asarray(lon)})

    def polygons(self, cells=None):
        """``GeoDataFrame[cell, geometry]`` (EPSG:4326) of the cell squares, for maps (built by
        :data:`GEOMETRY_MODULE`'s ``polygon_frame``)."""
        c = self._check_cells(cells)
        x, y = self.cell_xy(c)
        h = self.side_m / 2
        xs = np.stack([x - h, x + h, x + h, x - h, x - h], axis=1)
        ys = np.stack([y - h, y - h, y + h, y + h, y - h], axis=1)
        lon, lat = transformer(self.crs, True).transform(xs.ravel(), ys.ravel())
        rings = np.stack([np.asarray(lon), np.asarray(lat)], axis=1).reshape(len(c), 5, 2)
        return importlib.import_module(GEOMETRY_MODULE).polygon_frame({CELL: c}, rings)

    @property
    def spec(self) -> str:
        """The ``--zones`` text of this grid's cell size (``square:1.3``)."""
        return f"square:{self.cell_km2:.6g}"

    def names(self, cells=None) -> np.ndarray:
        """Labels ``"r<row>c<col>"`` of ``cells`` (row 0 is the southernmost)."""
        row, col = np.divmod(self._check_cells(cells), self.n_cols)
        return np.array([f"r{r}c{c}" for r, c in zip(row.tolist(), col.tolist(), strict=True)], dtype=object)

    def to_dict(self) -> dict:
        """JSON-able description (:meth:`from_dict` rebuilds the same grid)."""
        return {"kind": "square", "spec": self.spec, "crs": self.crs, "x0": self.x0, "y0": self.y0,
                "side_m": self.side_m, "n_cols": self.n_cols, "n_rows": self.n_rows, "cell_km2": self.cell_km2}

    @classmethod
    def from_dict(cls, d: dict) -> SquareGrid:
        return cls(crs=d["crs"], x0=float(d["x0"]), y0=float(d["y0"]), side_m=float(d["side_m"]),
                   n_cols=int(d["n_cols"]), n_rows=int(d["n_rows"]))
