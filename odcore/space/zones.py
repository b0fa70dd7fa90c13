"""Zone systems: the places origins and destinations refer to.

Three kinds share one interface (:class:`ZoneSystem`):

- ``square:KM2`` :class:`odcore.space.grid.SquareGrid`, squares of a chosen area (Bassolas et al. 2022 used ~1.3 km²);
  cell ids ``row * n_cols + col``.
- ``h3:RES`` :class:`odcore.space.hexagons.H3Zones`, Uber's H3 hexagons at resolution RES (0-15; res 8 ≈ 0.74 km²,
  res 7 ≈ 5.2 km²) fitted to the data's bounding box. Zone ids are compact (0..n-1, in the order of the H3 index); names are the H3 cell
  strings, and its ``assign`` gives exactly ``h3.latlng_to_cell`` (h3 v4 API).
- ``FILE`` :class:`odcore.space.polygons.PolygonZones` (:func:`odcore.space.polygons.read_zone_file`), the user's
  own polygons (districts, census tracts, transport zones) from a GeoJSON, GeoPackage or zipped Shapefile in any
  CRS; they are reprojected to WGS84 longitude/latitude (EPSG:4326) and a point is tested against the polygon with its vertices there (edges straight in lon/lat). Zone ids are the
  rows of the file (0..n-1); names come from a name column when there is one.

Each kind lives in its own module, imported (through :data:`ZONE_KINDS`) when that kind is chosen. The interface
(duck-typed):

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

import importlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import pandas as pd

from odcore.constants import CELL
from odcore.errors import ODCoreError, ParameterError

__all__ = ["MAX_ZONES", "OUTSIDE", "OUTSIDE_REASON", "ZONE_KINDS", "ZoneFileError", "ZoneSpec", "ZoneSystem",
           "add_zone_names", "check_ids", "coords", "make_zones", "parse_zone_spec", "write_zone_geometry",
           "zone_class", "zone_names", "zones_from_dict", "zones_summary"]

OUTSIDE = -1
"""Zone id of a point outside every zone (or with a NaN coordinate)."""

OUTSIDE_REASON = "outside every zone"
"""Reason under which points outside every polygon zone are reported as dropped."""

MAX_ZONES = 200_000
"""Most polygons a zone file may hold (the app's and CLI's limit; OD matrices grow as the square of it)."""


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


ZONE_KINDS: dict[str, tuple[str, str]] = {
    "square": ("odcore.space.grid", "SquareGrid"),
    "h3": ("odcore.space.hexagons", "H3Zones"),
    "polygons": ("odcore.space.polygons", "PolygonZones"),
}
"""Zone kind -> (module, class). A kind's module is imported when that kind is chosen, so counting on squares
never loads h3, geopandas, shapely or scipy (tests/odcore/data/test_hostile.py measures it)."""

def zone_class(kind: str) -> Any:
    """The class of zone ``kind`` (``square``, ``h3`` or ``polygons``), its module imported now."""
    if kind not in ZONE_KINDS:
        raise ParameterError(f"zone description has kind={kind!r}; expected 'square', 'h3' or 'polygons'.")
    module, name = ZONE_KINDS[kind]
    return getattr(importlib.import_module(module), name)


def make_zones(spec: str | ZoneSpec, lat=None, lon=None, *, name_column: str | None = None) -> Any:
    """The zone system of ``spec``; squares and hexagons are fitted to the points (``lat``, ``lon``)."""
    spec = parse_zone_spec(spec)
    if spec.kind == "file":
        module, _ = ZONE_KINDS["polygons"]
        return importlib.import_module(module).read_zone_file(spec.value, name_column=name_column)
    if lat is None or lon is None:
        raise ParameterError(f"zones {spec}: a square grid or H3 cover is fitted to points; none were given.")
    return zone_class(spec.kind).fit(lat, lon, spec.value)


def zones_from_dict(d: dict) -> Any:
    """Rebuild a zone system from its :meth:`to_dict` (same ids)."""
    return zone_class(d.get("kind", "square")).from_dict(d)


def zone_names(zones, cells) -> np.ndarray:
    """Labels of ``cells`` in any zone system (works for objects without a ``names`` method too)."""
    f = getattr(zones, "names", None)
    if callable(f):
        return f(cells)
    return np.asarray([str(int(c)) for c in np.asarray(cells).ravel()], dtype=object)


def coords(lat, lon) -> tuple[np.ndarray, np.ndarray]:
    lat = np.asarray(lat, dtype=np.float64).ravel()
    lon = np.asarray(lon, dtype=np.float64).ravel()
    if lat.shape != lon.shape:
        raise ParameterError(f"lat and lon must have the same length, got {lat.size} and {lon.size}.")
    return lat, lon


def check_ids(cells, n: int) -> np.ndarray:
    if cells is None:
        return np.arange(n, dtype=np.int64)
    c = np.asarray(cells, dtype=np.int64).ravel()
    if c.size and (c.min() < 0 or c.max() >= n):
        raise ParameterError(f"zone ids must be in [0, {n}), got {c.min()}..{c.max()}.")
    return c


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
