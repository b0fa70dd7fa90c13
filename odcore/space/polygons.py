"""The user's polygons as zones (:class:`PolygonZones`, the ``FILE`` kind of :mod:`odcore.space.zones`): read from
a GeoJSON, GeoPackage or zipped Shapefile in any CRS (:func:`read_zone_file`), and Voronoi districts of a city's
points (:func:`voronoi_districts`, :func:`write_districts`).
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely
from scipy import ndimage

from odcore.constants import CELL, DEFAULT_DISTRICTS, DEFAULT_DISTRICTS_SEED, LAT, LON
from odcore.errors import ParameterError
from odcore.space.grid import transformer, utm_epsg
from odcore.space.zones import MAX_ZONES, OUTSIDE, OUTSIDE_REASON, ZoneFileError, check_ids, coords


def polygon_frame(columns: dict, rings: np.ndarray) -> gpd.GeoDataFrame:
    """``GeoDataFrame`` (EPSG:4326) of ``columns`` with one polygon per ring of ``rings`` (``(n, m, 2)`` lon/lat,
    closed rings): the squares of :meth:`odcore.space.grid.SquareGrid.polygons`."""
    return gpd.GeoDataFrame(columns, geometry=shapely.polygons(rings), crs="EPSG:4326")


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
        return self.zone_names[check_ids(cells, self.n_cells)]

    # -- assignment ----------------------------------------------------------------------------------------------
    def _lookup(self):
        idx = self._index
        if idx is None:
            idx = _PolygonIndex(self.geometries)
            object.__setattr__(self, "_index", idx)
        return idx

    def assign(self, lat, lon) -> np.ndarray:
        """Zone id (int64) of each point: the lowest id among the polygons that cover it, -1 if none does."""
        lat, lon = coords(lat, lon)
        return self._lookup().assign(lon, lat)

    def centroids(self, cells=None) -> pd.DataFrame:
        """``DataFrame[cell, lat, lon]``: a point inside each zone (shapely ``point_on_surface``)."""
        c = check_ids(cells, self.n_cells)
        p = shapely.point_on_surface(self.geometries[c])
        return pd.DataFrame({CELL: c, LAT: shapely.get_y(p), LON: shapely.get_x(p)})

    def polygons(self, cells=None):
        c = check_ids(cells, self.n_cells)
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
        return {"kind": "polygons", "spec": self.source, "n_cells": self.n_cells,
                "names": [str(n) for n in self.zone_names],
                "wkb_hex": [str(w) for w in shapely.to_wkb(self.geometries, hex=True)]}

    @classmethod
    def from_dict(cls, d: dict) -> PolygonZones:
        return cls(np.asarray(shapely.from_wkb(d["wkb_hex"]), dtype=object), np.asarray(d["names"], dtype=object),
                   d.get("spec", ""))


def _polygonal(g):
    """Keep the polygon part of a ``make_valid`` result (which can return a GeometryCollection)."""
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
    rng = np.random.default_rng(rng)
    lat, lon = coords(lat, lon)
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


