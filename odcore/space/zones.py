"""Zone systems: the places origins and destinations refer to.

Three kinds share one interface (:class:`ZoneSystem`):

- ``square:KM2`` :class:`odcore.space.grid.SquareGrid`, squares of a chosen area (Bassolas et al. 2022 used ~1.3 km²);
  cell ids ``row * n_cols + col``.
- ``h3:RES`` :class:`H3Zones`, Uber's H3 hexagons at resolution RES (0-15; res 8 ≈ 0.74 km², res 7 ≈ 5.2 km²) fitted
  to the data's bounding box. Zone ids are compact (0..n-1, in the order of the H3 index); names are the H3 cell
  strings, and :meth:`H3Zones.assign` gives exactly ``h3.latlng_to_cell`` (h3 v4 API).
- ``FILE`` :class:`PolygonZones`, the user's own polygons (districts, census tracts, transport zones) from a
  GeoJSON, GeoPackage or zipped Shapefile in any CRS; they are reprojected to WGS84 longitude/latitude (EPSG:4326)
  and a point is tested against the polygon with its vertices there (edges straight in lon/lat). Zone ids are the
  rows of the file (0..n-1); names come from a name column when there is one.

The interface (duck-typed; :class:`odcore.space.grid.SquareGrid` has it too):

``kind``               ``"square" | "h3" | "polygons"``
``n_cells``            number of zones; ids are ``0 .. n_cells - 1``
``assign(lat, lon)``   numpy float arrays in, ``int64`` zone ids out, :data:`OUTSIDE` (-1) outside every zone;
                       pure numpy in / numpy out, no pandas, safe to call on batches from any engine
``outside_reason``     the reason under which callers report the points that got -1
``centroids(cells)``   ``DataFrame[cell, lat, lon]`` (a point inside each polygon zone: shapely's point on surface)
``polygons(cells)``    ``GeoDataFrame[cell, geometry]`` in EPSG:4326, plus ``name``
``names(cells)``       ``numpy`` array of str labels of the zones
``to_dict()``          JSON-able description; :func:`zones_from_dict` rebuilds the same zones (same ids)
``spec``               the text :func:`parse_zone_spec` reads back (``square:1.3``, ``h3:8``, a file path)

Every zone system pickles (spatial indexes are rebuilt lazily after unpickling), so it can be shipped to Spark
executors inside a UDF.

Rule on edges: a point covered by several polygons (on a shared edge or vertex, or inside overlapping polygons)
goes to the **lowest zone id** among the polygons that cover it (cover = interior or boundary: geopandas
``sjoin(predicate="intersects")`` on points, then the minimum ``index_right``).

Speed: polygon assignment uses a spatial index, not a loop over zones or points. A lookup raster over the zones'
bounding box marks the boxes no edge comes near; each connected region of them lies in one zone (or none), found
by testing one point per region, and their points are assigned by array indexing. Only the points in boxes an edge
may touch are tested exactly with a shapely ``STRtree.query(points, predicate="intersects")``.
"""

from __future__ import annotations

import io
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import pandas as pd

from odcore.constants import CELL, DEFAULT_DISTRICTS, DEFAULT_DISTRICTS_SEED, LAT, LON
from odcore.errors import ODCoreError, ParameterError
from odcore.space.grid import SquareGrid

__all__ = ["MAX_ZONES", "OUTSIDE", "OUTSIDE_REASON", "H3Zones", "PolygonZones", "ZoneFileError", "ZoneSpec",
           "ZoneSystem", "add_zone_names", "make_zones", "parse_zone_spec", "read_zone_file", "voronoi_districts",
           "write_districts", "write_zone_geometry", "zone_names", "zones_from_dict", "zones_summary"]

OUTSIDE = -1
"""Zone id of a point outside every zone (or with a NaN coordinate)."""

OUTSIDE_REASON = "outside every zone"
"""Reason under which points outside every polygon zone are reported as dropped."""

MAX_ZONES = 200_000
"""Most polygons a zone file may hold (the app's and CLI's limit; OD matrices grow as the square of it)."""

MAX_H3_CELLS = 5_000_000


class ZoneFileError(ODCoreError, ValueError):
    """A zone file cannot be used: unreadable, no polygons, wrong geometry type, too many zones."""


@runtime_checkable
class ZoneSystem(Protocol):
    """What the pipeline needs from a zone system (see the module docstring)."""

    kind: str

    @property
    def n_cells(self) -> int: ...

    def assign(self, lat, lon) -> np.ndarray: ...

    def centroids(self, cells=None) -> pd.DataFrame: ...

    def polygons(self, cells=None): ...

    def to_dict(self) -> dict: ...


# ---------------------------------------------------------------------------------------------------------------
# Specs: "square:1.3" | "h3:8" | FILE
# ---------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ZoneSpec:
    """A parsed ``--zones`` value: ``kind`` in ``square | h3 | file`` and its ``value`` (km², resolution, path)."""

    kind: str
    value: Any

    def __str__(self) -> str:
        return str(self.value) if self.kind == "file" else f"{self.kind}:{self.value:g}"


_SPEC_RE = re.compile(r"^\s*(square|h3)\s*:\s*(\S+)\s*$", re.IGNORECASE)


def parse_zone_spec(text: str | ZoneSpec) -> ZoneSpec:
    """Read ``square:KM2``, ``h3:RES`` or a zone file path.

    >>> parse_zone_spec("square:1.3")
    ZoneSpec(kind='square', value=1.3)
    >>> parse_zone_spec("H3:8")
    ZoneSpec(kind='h3', value=8)
    >>> parse_zone_spec("h3:16")
    Traceback (most recent call last):
    ...
    odcore.errors.ParameterError: zones 'h3:16': the H3 resolution must be an integer 0-15 (res 8 ≈ 0.74 km²).
    """
    if isinstance(text, ZoneSpec):
        return text
    s = str(text).strip()
    if not s:
        raise ParameterError("zones must be 'square:KM2', 'h3:RES' or a zone file path, got an empty value.")
    m = _SPEC_RE.match(s)
    if m is None:
        if re.match(r"^[A-Za-z0-9]+:[^\\/]", s) and not Path(s).exists() and not re.match(r"^[A-Za-z]:", s):
            raise ParameterError(f"zones {s!r}: expected 'square:KM2', 'h3:RES' or a zone file path "
                                 "(.geojson, .gpkg, .zip of a Shapefile).")
        return ZoneSpec("file", s)
    kind, val = m.group(1).lower(), m.group(2)
    if kind == "square":
        try:
            v = float(val)
        except ValueError:
            v = float("nan")
        if not (0 < v <= 10_000):
            raise ParameterError(f"zones {s!r}: the square cell area must be a number of km² in (0, 10000].")
        return ZoneSpec("square", v)
    if not re.fullmatch(r"\d{1,2}", val) or int(val) > 15:
        raise ParameterError(f"zones {s!r}: the H3 resolution must be an integer 0-15 (res 8 ≈ 0.74 km²).")
    return ZoneSpec("h3", int(val))


def make_zones(spec: str | ZoneSpec, lat=None, lon=None, *, name_column: str | None = None) -> Any:
    """The zone system of ``spec``; squares and hexagons are fitted to the points (``lat``, ``lon``)."""
    spec = parse_zone_spec(spec)
    if spec.kind == "file":
        return read_zone_file(spec.value, name_column=name_column)
    if lat is None or lon is None:
        raise ParameterError(f"zones {spec}: a square grid or H3 cover is fitted to points; none were given.")
    if spec.kind == "square":
        return SquareGrid.fit(lat, lon, spec.value)
    return H3Zones.fit(lat, lon, spec.value)


def zones_from_dict(d: dict) -> Any:
    """Rebuild a zone system from its :meth:`to_dict` (same ids)."""
    kind = d.get("kind", "square")
    if kind == "square":
        return SquareGrid.from_dict(d)
    if kind == "h3":
        return H3Zones.from_dict(d)
    if kind == "polygons":
        return PolygonZones.from_dict(d)
    raise ParameterError(f"zone description has kind={kind!r}; expected 'square', 'h3' or 'polygons'.")


def zone_names(zones, cells) -> np.ndarray:
    """Labels of ``cells`` in any zone system (works for objects without a ``names`` method too)."""
    f = getattr(zones, "names", None)
    if callable(f):
        return f(cells)
    return np.asarray([str(int(c)) for c in np.asarray(cells).ravel()], dtype=object)


def _coords(lat, lon) -> tuple[np.ndarray, np.ndarray]:
    lat = np.asarray(lat, dtype=np.float64).ravel()
    lon = np.asarray(lon, dtype=np.float64).ravel()
    if lat.shape != lon.shape:
        raise ParameterError(f"lat and lon must have the same length, got {lat.size} and {lon.size}.")
    return lat, lon


def _check_ids(cells, n: int) -> np.ndarray:
    if cells is None:
        return np.arange(n, dtype=np.int64)
    c = np.asarray(cells, dtype=np.int64).ravel()
    if c.size and (c.min() < 0 or c.max() >= n):
        raise ParameterError(f"zone ids must be in [0, {n}), got {c.min()}..{c.max()}.")
    return c


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
        import h3

        lat, lon = _coords(lat, lon)
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
        import h3

        return float(h3.average_hexagon_area(self.resolution, unit="km^2"))

    @property
    def crs(self) -> str:
        return "EPSG:4326"

    def h3_index(self, lat, lon) -> np.ndarray:
        """``h3.latlng_to_cell`` of every point as int64 (0 for NaN coordinates)."""
        lat, lon = _coords(lat, lon)
        return _h3_ints(lat, lon, self.resolution)

    def assign(self, lat, lon) -> np.ndarray:
        """Zone id (int64) of each point; -1 when its hexagon is not among :attr:`cells` or a coordinate is NaN."""
        h = self.h3_index(lat, lon)
        pos = np.searchsorted(self.cells, h)
        pos[pos >= self.cells.size] = 0
        return np.where(self.cells[pos] == h, pos, OUTSIDE).astype(np.int64)

    def names(self, cells=None) -> np.ndarray:
        c = _check_ids(cells, self.n_cells)
        return np.asarray([format(int(v), "x") for v in self.cells[c]], dtype=object)

    def centroids(self, cells=None) -> pd.DataFrame:
        import h3

        c = _check_ids(cells, self.n_cells)
        ll = np.array([h3.cell_to_latlng(format(int(v), "x")) for v in self.cells[c]], dtype=np.float64)
        ll = ll.reshape(-1, 2)
        return pd.DataFrame({CELL: c, LAT: ll[:, 0], LON: ll[:, 1]})

    def polygons(self, cells=None):
        import geopandas as gpd
        import h3
        import shapely

        c = _check_ids(cells, self.n_cells)
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
    from h3.api.numpy_int import latlng_to_cell

    out = np.zeros(lat.size, dtype=np.uint64)
    ok = np.isfinite(lat) & np.isfinite(lon) & (np.abs(lat) <= 90)
    idx = np.flatnonzero(ok)
    out[idx] = np.fromiter((latlng_to_cell(a, b, res) for a, b in zip(lat[idx].tolist(), lon[idx].tolist(),
                                                                       strict=True)),
                           dtype=np.uint64, count=idx.size)
    return out.astype(np.int64)


# ---------------------------------------------------------------------------------------------------------------
# Polygons from a file
# ---------------------------------------------------------------------------------------------------------------

_NAME_COLUMNS = ("name", "NAME", "Name", "zone_name", "ZONE_NAME", "district", "DISTRICT", "NAMELSAD",
                 "tract_name", "label", "LABEL", "id", "ID", "GEOID", "zone", "ZONE", "zone_id", "ZONE_ID")


@dataclass(frozen=True, eq=False)
class PolygonZones:
    """The user's polygons (EPSG:4326); zone id ``i`` is ``geometries[i]``.

    Parameters
    ----------
    geometries:
        shapely Polygons / MultiPolygons in longitude/latitude.
    zone_names:
        One label per zone (a name column of the file, else ``"zone <id>"``).
    source:
        File name (for messages and :attr:`spec`).
    """

    geometries: np.ndarray = field(repr=False)
    zone_names: np.ndarray = field(repr=False)
    source: str = ""
    kind = "polygons"
    outside_reason = OUTSIDE_REASON

    def __post_init__(self) -> None:
        import shapely

        g = np.asarray(self.geometries, dtype=object).ravel()
        n = np.asarray(self.zone_names, dtype=object).ravel()
        if g.size == 0:
            raise ZoneFileError(f"{self.source or 'zones'}: no polygons.")
        if n.size != g.size:
            raise ParameterError(f"zone_names has {n.size} labels for {g.size} polygons.")
        types = shapely.get_type_id(g)
        if not np.isin(types, (3, 6)).all():
            raise ZoneFileError(f"{self.source or 'zones'}: zone {int(np.flatnonzero(~np.isin(types, (3, 6)))[0])} "
                                "is not a Polygon or MultiPolygon.")
        object.__setattr__(self, "geometries", g)
        object.__setattr__(self, "zone_names", n.astype(str).astype(object))
        object.__setattr__(self, "_index", None)

    # pickling: drop the lazily built index (shapely trees do not pickle)
    def __getstate__(self) -> dict:
        return {"geometries": self.geometries, "zone_names": self.zone_names, "source": self.source}

    def __setstate__(self, state: dict) -> None:
        for k, v in state.items():
            object.__setattr__(self, k, v)
        object.__setattr__(self, "_index", None)

    @classmethod
    def from_geodataframe(cls, gdf, *, name_column: str | None = None, source: str = "",
                          max_zones: int = MAX_ZONES) -> PolygonZones:
        """Zones from a GeoDataFrame in any CRS (reprojected to EPSG:4326; no CRS = taken as EPSG:4326)."""
        import shapely

        src = source or "zones"
        if len(gdf) == 0:
            raise ZoneFileError(f"{src}: no features; expected polygons (districts, tracts, zones).")
        if len(gdf) > max_zones:
            raise ZoneFileError(f"{src}: {len(gdf):,} zones; at most {max_zones:,} are allowed (OD matrices grow "
                                "as the square of the number of zones). Merge zones or use a coarser file.")
        geom = gdf.geometry
        if geom.isna().any() or geom.is_empty.any():
            bad = int(np.flatnonzero((geom.isna() | geom.is_empty).to_numpy())[0])
            raise ZoneFileError(f"{src}: feature {bad} has no geometry; every zone needs a polygon.")
        kinds = set(geom.geom_type)
        if not kinds <= {"Polygon", "MultiPolygon"}:
            bad = int(np.flatnonzero(~geom.geom_type.isin(["Polygon", "MultiPolygon"]).to_numpy())[0])
            raise ZoneFileError(f"{src}: feature {bad} is a {geom.geom_type.iloc[bad]}; zones must be Polygons or "
                                f"MultiPolygons (found {sorted(kinds)}).")
        if gdf.crs is not None and not gdf.crs.equals("EPSG:4326"):
            try:
                gdf = gdf.to_crs("EPSG:4326")
            except Exception as exc:
                raise ZoneFileError(f"{src}: cannot reproject from {gdf.crs} to WGS84 ({exc}).") from None
        g = gdf.geometry.to_numpy()
        b = shapely.total_bounds(g)
        if not np.all(np.isfinite(b)) or b[1] < -90 or b[3] > 90 or b[0] < -180 or b[2] > 180:
            raise ZoneFileError(f"{src}: coordinates {np.round(b, 3).tolist()} are not longitude/latitude; "
                                "a projected file must declare its CRS.")
        g = shapely.make_valid(g)
        g = np.array([_polygonal(x) for x in g], dtype=object)
        if name_column is not None:
            if name_column not in gdf.columns:
                raise ZoneFileError(f"{src}: no column {name_column!r}; columns are "
                                    f"{[c for c in gdf.columns if c != gdf.geometry.name]}.")
            col = name_column
        else:
            col = next((c for c in _NAME_COLUMNS if c in gdf.columns), None)
        if col is not None:
            names = gdf[col].astype(str).fillna("").to_numpy(dtype=object)
            blank = names == ""
            names[blank] = [f"zone {i}" for i in np.flatnonzero(blank)]
        else:
            names = np.array([f"zone {i}" for i in range(len(gdf))], dtype=object)
        return cls(g, names, source)

    @property
    def n_cells(self) -> int:
        return int(self.geometries.size)

    @property
    def spec(self) -> str:
        return self.source

    @property
    def crs(self) -> str:
        return "EPSG:4326"

    def names(self, cells=None) -> np.ndarray:
        return self.zone_names[_check_ids(cells, self.n_cells)]

    # -- assignment ----------------------------------------------------------------------------------------------
    def _lookup(self):
        idx = self._index
        if idx is None:
            idx = _PolygonIndex(self.geometries)
            object.__setattr__(self, "_index", idx)
        return idx

    def assign(self, lat, lon) -> np.ndarray:
        """Zone id (int64) of each point: the lowest id among the polygons that cover it, -1 if none does."""
        lat, lon = _coords(lat, lon)
        return self._lookup().assign(lon, lat)

    def centroids(self, cells=None) -> pd.DataFrame:
        """``DataFrame[cell, lat, lon]``: a point inside each zone (shapely ``point_on_surface``)."""
        import shapely

        c = _check_ids(cells, self.n_cells)
        p = shapely.point_on_surface(self.geometries[c])
        return pd.DataFrame({CELL: c, LAT: shapely.get_y(p), LON: shapely.get_x(p)})

    def polygons(self, cells=None):
        import geopandas as gpd

        c = _check_ids(cells, self.n_cells)
        return gpd.GeoDataFrame({CELL: c, "name": self.zone_names[c]}, geometry=list(self.geometries[c]),
                                crs="EPSG:4326")

    def area_km2(self) -> np.ndarray:
        """Area of every zone in km² (equal-area projection)."""
        gs = self.polygons().geometry.to_crs("+proj=cea +datum=WGS84 +units=m +no_defs")
        return gs.area.to_numpy() / 1e6

    @property
    def cell_km2(self) -> float:
        """Median zone area (km²), for tables that compare zone sizes."""
        return float(np.median(self.area_km2()))

    def to_dict(self) -> dict:
        import shapely

        return {"kind": "polygons", "spec": self.source, "n_cells": self.n_cells,
                "names": [str(n) for n in self.zone_names],
                "wkb_hex": [str(w) for w in shapely.to_wkb(self.geometries, hex=True)]}

    @classmethod
    def from_dict(cls, d: dict) -> PolygonZones:
        import shapely

        return cls(np.asarray(shapely.from_wkb(d["wkb_hex"]), dtype=object), np.asarray(d["names"], dtype=object),
                   d.get("spec", ""))


def _polygonal(g):
    """Keep the polygon part of a ``make_valid`` result (which can return a GeometryCollection)."""
    import shapely

    if shapely.get_type_id(g) in (3, 6):
        return g
    parts = [p for p in shapely.get_parts(g) if shapely.get_type_id(p) in (3, 6)]
    return shapely.union_all(parts) if parts else g


class _PolygonIndex:
    """Lookup raster + STRtree over polygons (see the module docstring).

    A raster of ``nx x ny`` boxes spans the zones' bounding box (in lon/lat, where the zones' edges are straight).
    Boxes an edge may touch are marked "mixed": every edge (outer and inner rings) is sampled at steps of at most
    half a box, and the boxes of each sample moved by a quarter box (plus a rounding margin) towards the four
    corners are marked: a superset of the boxes the edge passes through, whatever the rounding. The other boxes form 4-connected regions no edge
    crosses, so every point of a region is covered by the same set of zones: one test of one box centre per
    region (``scipy.ndimage.label``) gives the whole region's zone (lowest covering id) or -1. A point in such a
    box is assigned by array indexing; points in mixed boxes are tested exactly with
    ``STRtree.query(points, predicate="intersects")``.
    """

    def __init__(self, geoms: np.ndarray) -> None:
        import shapely
        from scipy import ndimage

        self.geoms = geoms
        shapely.prepare(geoms)
        self.tree = shapely.STRtree(geoms)
        x0, y0, x1, y1 = (float(v) for v in shapely.total_bounds(geoms))
        w, h = max(x1 - x0, 1e-9), max(y1 - y0, 1e-9)
        n_boxes = int(min(1 << 24, max(1 << 20, 8192 * geoms.size)))
        nx = max(1, round(math.sqrt(n_boxes * w / h)))
        ny = max(1, round(n_boxes / nx))
        self.x0, self.y0, self.x1, self.y1, self.nx, self.ny = x0, y0, x1, y1, nx, ny
        self.dx, self.dy = w / nx, h / ny
        # -- boxes an edge may touch ---------------------------------------------------------------------------
        rings = shapely.get_rings(shapely.get_parts(geoms))
        xy, ring = shapely.get_coordinates(rings, return_index=True)
        same = ring[1:] == ring[:-1]
        a, b = xy[:-1][same], xy[1:][same]
        # samples every half box or less: each point of an edge is within a quarter box (per axis) of a sample,
        # so the boxes of the samples moved by +-(quarter box + rounding margin) on each axis hold the whole edge
        steps = np.ceil(2 * np.maximum(np.abs(b[:, 0] - a[:, 0]) / self.dx, np.abs(b[:, 1] - a[:, 1]) / self.dy))
        steps = steps.astype(np.int64) + 1
        seg = np.repeat(np.arange(a.shape[0]), steps + 1)
        t = (np.arange(seg.size) - np.repeat(np.cumsum(steps + 1) - (steps + 1), steps + 1)) / steps[seg]
        fx = (a[seg, 0] + t * (b[seg, 0] - a[seg, 0]) - x0) / self.dx
        fy = (a[seg, 1] + t * (b[seg, 1] - a[seg, 1]) - y0) / self.dy
        del seg, t
        mixed = np.zeros((ny, nx), dtype=bool)
        m = 0.25 + 1e-6
        for ox, oy in ((0.0, 0.0), (-m, -m), (-m, m), (m, -m), (m, m)):
            cx = np.clip(np.floor(fx + ox).astype(np.int64), 0, nx - 1)
            cy = np.clip(np.floor(fy + oy).astype(np.int64), 0, ny - 1)
            mixed[cy, cx] = True
        del fx, fy, cx, cy
        # -- regions without edges: one zone (or none) each ----------------------------------------------------
        labels, n_regions = ndimage.label(~mixed)
        status = np.full(n_regions + 1, -2, dtype=np.int32)
        if n_regions:
            rx = np.empty(n_regions)
            ry = np.empty(n_regions)
            for k, sl in enumerate(ndimage.find_objects(labels), start=1):
                r0 = sl[0].start
                c = sl[1].start + int(np.flatnonzero(labels[r0, sl[1]] == k)[0])
                rx[k - 1], ry[k - 1] = x0 + (c + 0.5) * self.dx, y0 + (r0 + 0.5) * self.dy
            status[1:] = self._lowest(rx, ry)
        self.table = status[labels].ravel()   # int32: zone id, -1 outside every zone, -2 test exactly
        self.mixed_share = float(mixed.mean())

    def assign(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:

        out = np.full(x.size, OUTSIDE, dtype=np.int64)
        with np.errstate(invalid="ignore"):   # NaN compares False: outside
            inside = (x >= self.x0) & (x <= self.x1) & (y >= self.y0) & (y <= self.y1)
        i = np.flatnonzero(inside)
        if i.size == 0:
            return out
        bx = np.clip(np.floor((x[i] - self.x0) / self.dx).astype(np.int64), 0, self.nx - 1)
        by = np.clip(np.floor((y[i] - self.y0) / self.dy).astype(np.int64), 0, self.ny - 1)
        t = self.table[by * self.nx + bx]
        out[i] = np.where(t >= -1, t, OUTSIDE)
        mixed = i[t == -2]
        for s in range(0, mixed.size, 1_000_000):   # bounded memory for shapely point objects
            m = mixed[s:s + 1_000_000]
            out[m] = self._lowest(x[m], y[m])
        return out

    def _lowest(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Exact: the lowest id of the zones covering each point (``STRtree`` query), -1 where none does."""
        import shapely

        p, z = self.tree.query(shapely.points(x, y), predicate="intersects")
        low = np.full(x.size, np.iinfo(np.int64).max)
        np.minimum.at(low, p, z)
        low[low == np.iinfo(np.int64).max] = OUTSIDE
        return low


# ---------------------------------------------------------------------------------------------------------------
# Reading zone files
# ---------------------------------------------------------------------------------------------------------------

_EXTS = (".geojson", ".json", ".gpkg", ".zip", ".shp")


def read_zone_file(source, *, name: str | None = None, name_column: str | None = None,
                   max_zones: int = MAX_ZONES) -> PolygonZones:
    """Polygons from a GeoJSON, GeoPackage or zipped Shapefile (path or binary file-like; ``name`` gives an
    upload's file name). Any CRS, reprojected to WGS84; a name column is used when there is one.

    Raises
    ------
    ZoneFileError
        With a one-line message naming the file: missing, unreadable, no features, a feature that is not a
        polygon, more than ``max_zones`` zones, coordinates that are not degrees and no CRS.
    """
    import geopandas as gpd

    if isinstance(source, (str, Path)):
        path = Path(source)
        label = name or str(path)
        if not path.exists():
            raise ZoneFileError(f"zone file not found: {path}.")
        if path.is_dir():
            raise ZoneFileError(f"{path} is a folder; expected a .geojson, .gpkg or zipped Shapefile (.zip).")
        src: Any = str(path)
    else:
        label = name or getattr(source, "name", None) or "uploaded zone file"
        data = source.read() if hasattr(source, "read") else bytes(source)
        if not data:
            raise ZoneFileError(f"{label}: the file is empty.")
        src = io.BytesIO(data)
    suffix = Path(str(label)).suffix.lower()
    if suffix and suffix not in _EXTS:
        raise ZoneFileError(f"{label}: unknown zone file type {suffix!r}; expected .geojson, .gpkg or a zipped "
                            "Shapefile (.zip).")
    try:
        gdf = gpd.read_file(src)
    except Exception as exc:
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ZoneFileError(f"{label}: not a readable GeoJSON, GeoPackage or zipped Shapefile ({msg}).") from None
    if "geometry" not in getattr(gdf, "columns", []) and not hasattr(gdf, "geometry"):
        raise ZoneFileError(f"{label}: the file has no geometry column; expected polygons.")
    return PolygonZones.from_geodataframe(gdf, name_column=name_column, source=str(label), max_zones=max_zones)


# ---------------------------------------------------------------------------------------------------------------
# Bundled districts: Voronoi cells of the synthetic city
# ---------------------------------------------------------------------------------------------------------------

def voronoi_districts(lat, lon, n: int = 40, *, rng=None, radius_quantile: float = 0.995):
    """Voronoi districts of a city: ``GeoDataFrame[district_id, name, geometry]`` in EPSG:4326.

    Seeds are ``n`` distinct trace points drawn at random (so districts are small where people are dense, as real
    districts are), the cells are cut in the city's UTM zone and clipped to the circle around the median point
    holding ``radius_quantile`` of the points: the few points beyond it fall outside every district (the app and
    CLI report them as dropped).
    """
    import geopandas as gpd
    import shapely

    from odcore.space.grid import transformer, utm_epsg

    rng = np.random.default_rng(rng)
    lat, lon = _coords(lat, lon)
    if n < 2:
        raise ParameterError(f"n must be >= 2 districts, got n={n}.")
    crs = f"EPSG:{utm_epsg(float(np.median(lat)), float(np.median(lon)))}"
    x, y = transformer(crs, False).transform(lon, lat)
    x, y = np.asarray(x), np.asarray(y)
    cx, cy = float(np.median(x)), float(np.median(y))
    r = float(np.quantile(np.hypot(x - cx, y - cy), radius_quantile))
    xy = np.unique(np.round(np.stack([x, y], axis=1), 0), axis=0)
    xy = xy[np.hypot(xy[:, 0] - cx, xy[:, 1] - cy) < r]     # seeds inside the disc: no empty district
    if n > len(xy):
        raise ParameterError(f"n={n} districts need as many distinct points inside the city; there are {len(xy)}.")
    seeds = xy[rng.choice(len(xy), size=n, replace=False)]
    disc = shapely.Point(cx, cy).buffer(r, quad_segs=16)
    cells = shapely.voronoi_polygons(shapely.MultiPoint(seeds), extend_to=disc)
    parts = shapely.get_parts(cells)
    # order districts by the seed they contain, then north-to-south, west-to-east for readable names
    own = np.array([int(np.flatnonzero(shapely.contains_xy(p, seeds[:, 0], seeds[:, 1]))[0]) for p in parts])
    geoms = shapely.intersection(parts, disc)
    order = np.lexsort((seeds[own, 0], -np.round(seeds[own, 1], -3)))
    geoms = geoms[order]
    gdf = gpd.GeoDataFrame({"district_id": np.arange(1, n + 1),
                            "name": [f"District {i:02d}" for i in range(1, n + 1)]},
                           geometry=list(geoms), crs=crs).to_crs("EPSG:4326")
    gdf["geometry"] = shapely.set_precision(gdf.geometry.to_numpy(), 1e-5)
    return gdf




def write_districts(path, lat, lon, n: int = DEFAULT_DISTRICTS, *, rng=DEFAULT_DISTRICTS_SEED):
    """Write :func:`voronoi_districts` as GeoJSON (coordinates to 1e-5°, ~1 m) and return the GeoDataFrame."""
    gdf = voronoi_districts(lat, lon, n, rng=rng)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(gdf.to_json(drop_id=True, to_wgs84=True), encoding="utf-8")
    return gdf


def add_zone_names(table: pd.DataFrame, zones, columns=("origin", "destination")) -> pd.DataFrame:
    """A copy of ``table`` with ``<column>_name`` beside each zone-id column (labels from ``zones``)."""
    out = table.copy()
    for col in columns:
        if col not in out.columns:
            continue
        ids = out[col].to_numpy(np.int64)
        uniq, inv = np.unique(ids, return_inverse=True)
        names = zone_names(zones, uniq) if uniq.size else np.empty(0, dtype=object)
        out.insert(out.columns.get_loc(col) + 1, f"{col}_name", names[inv] if ids.size else [])
    return out


def write_zone_geometry(zones, path, cells=None, *, members: dict | None = None) -> Path:
    """Write the zones (``cell, name, geometry``; only ``cells`` when given) as GeoJSON in EPSG:4326; ``members``
    are added to the FeatureCollection as foreign members (RFC 7946 §6.1), e.g. the hash of the table it goes with."""
    path = Path(path)
    gdf = zones.polygons(None if cells is None else np.asarray(cells, dtype=np.int64))
    if "name" not in gdf.columns:
        gdf.insert(1, "name", zone_names(zones, gdf[CELL].to_numpy()))
    gdf["zones"] = getattr(zones, "spec", "")
    text = gdf.to_json(drop_id=True)
    if members:
        doc = json.loads(text)
        doc.update(members)
        text = json.dumps(doc)
    path.write_text(text, encoding="utf-8")
    return path


def zones_summary(zones) -> dict:
    """JSON-able kind, spec, number of zones and typical area of a zone system."""
    return {"kind": getattr(zones, "kind", "square"), "spec": getattr(zones, "spec", ""),
            "n_zones": int(zones.n_cells), "zone_km2": round(float(zones.cell_km2), 6)}
