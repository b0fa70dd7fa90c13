"""Zones in the app: the sidebar's zone choice (squares, H3 hexagons, a zone file), zone uploads, map outlines.

The zone system in use is named by an :mod:`odcore.space.zones` spec string (``"h3:8"``, a file path) inside the frozen
:class:`odcore.od.oddata.ODConfig`, so every cache keyed on the OD config follows a change of zones. An uploaded zone
file is checked with :func:`odcore.space.polygons.read_zone_file` and saved as GeoJSON under a content-addressed name in the
session's private folder (:func:`odapp.data.loading.session_folder`, removed with the session); the bundled
``sample_data/districts.geojson`` is the zone file offered before any upload.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import json
from collections.abc import MutableMapping
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd
import shapely
import streamlit as st

from odapp.data.loading import session_folder
from odapp.shared.state import (
    CELL_KM2_RANGE,
    K_CELL_KM2,
    K_H3_RES,
    K_ZONE_ERROR,
    K_ZONE_FILE,
    K_ZONE_KIND,
    K_ZONE_LABEL,
)
from odapp.shared.words import plain
from odcore.errors import ODCoreError
from odcore.paths import REPO_ROOT, SAMPLE_DATA_DIR
from odcore.space.polygons import read_zone_file

BUNDLED_ZONES = SAMPLE_DATA_DIR / "districts.geojson"
BUNDLED_LABEL = "Bundled districts (40 Voronoi districts of the synthetic city)"
ZONE_KINDS = {"square": "Square grid", "h3": "H3 hexagons", "file": "Zone file (your polygons)"}
H3_RES_RANGE = (5, 10)
H3_AREAS = {5: 253, 6: 36, 7: 5.2, 8: 0.74, 9: 0.11, 10: 0.015}   # h3.average_hexagon_area(res, "km^2")
MAX_APP_ZONES = 20_000
"""Most zones an uploaded file may hold in the app (the CLI allows :data:`odcore.space.zones.MAX_ZONES`)."""


@lru_cache(maxsize=4)
def file_bounds(path: str) -> tuple[float, float, float, float] | None:
    """(south, west, north, east) of a GeoJSON file's coordinates (WGS84), or None when it cannot be read."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    xs: list[float] = []
    ys: list[float] = []

    def walk(c) -> None:
        if isinstance(c, (list, tuple)) and c and isinstance(c[0], (int, float)):
            xs.append(float(c[0]))
            ys.append(float(c[1]))
        elif isinstance(c, (list, tuple)):
            for x in c:
                walk(x)

    for f in doc.get("features", []):
        walk((f.get("geometry") or {}).get("coordinates", []))
    return (min(ys), min(xs), max(ys), max(xs)) if xs else None


def data_box(summary: dict) -> tuple[float, float, float, float] | None:
    """(south, west, north, east) of the loaded points from their summary, or None when unknown."""
    la, lo = summary.get("lat_range"), summary.get("lon_range")
    return (la[0], lo[0], la[1], lo[1]) if la and lo else None


def bundled_fits(box: tuple[float, float, float, float] | None) -> bool:
    """True when the bundled districts overlap the data's box (or the box is unknown)."""
    zb = file_bounds(str(BUNDLED_ZONES))
    if box is None or zb is None:
        return box is None
    return not (zb[0] > box[2] or zb[2] < box[0] or zb[1] > box[3] or zb[3] < box[1])


def zone_file(state: MutableMapping, box=None) -> tuple[str | None, str]:
    """``(path, label)`` of the zone file in use: the last good upload, else the bundled districts when they
    overlap the data's ``box``; ``(None, why)`` when no zone file fits the data."""
    path = state.get(K_ZONE_FILE)
    if path and str(path) != str(BUNDLED_ZONES):
        return str(path), str(state.get(K_ZONE_LABEL) or Path(path).name)
    if bundled_fits(box):
        return str(BUNDLED_ZONES), BUNDLED_LABEL
    return None, "no zone file yet (the bundled districts are the synthetic city's and do not cover this data)"


def zone_spec(state: MutableMapping, box=None) -> tuple[str | None, str]:
    """``(spec, label)`` of the sidebar's zone choice; spec None = squares of the cell area (the default, and the
    fallback while no zone file covers the data)."""
    kind = state.get(K_ZONE_KIND, "square")
    if kind == "h3":
        res = int(state.get(K_H3_RES, 8))
        return f"h3:{res}", f"H3 hexagons, resolution {res} (~{H3_AREAS.get(res, 0):g} km²)"
    if kind == "file":
        path, label = zone_file(state, box)
        if path is not None:
            return path, label
    return None, square_label(float(state.get(K_CELL_KM2, 1.3)))


def square_label(cell_km2: float) -> str:
    """How a grid of squares is named on pages and in exports."""
    return f"square cells of {cell_km2:g} km²"


def apply_zone_upload(state: MutableMapping, data: bytes, name: str) -> bool:
    """Check an uploaded zone file and make it the zone file in use (``state`` is ``st.session_state`` or a dict).

    On failure the previous zone file stays in use and ``state[K_ZONE_ERROR]`` says what is wrong (one line).
    """
    try:
        zones = read_zone_file(io.BytesIO(data), name=name, max_zones=MAX_APP_ZONES)
    except ODCoreError as exc:
        state[K_ZONE_ERROR] = (f"Could not use {name!r} as zones: {exc} Upload a GeoJSON, GeoPackage or zipped "
                               "Shapefile of polygons; the previous zones stay in use.")
        return False
    digest = hashlib.sha256(data).hexdigest()[:16]
    stem = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in Path(name).stem)[:40] or "zones"
    path = session_folder(state) / f"zones-{stem}-{digest}.geojson"   # private to the session, removed with it
    for old in path.parent.glob("zones-*.geojson"):    # the session's earlier zone upload
        if old != path:
            old.unlink(missing_ok=True)
    if not path.exists():
        gdf = zones.polygons()[["name", "geometry"]]
        path.write_text(gdf.to_json(drop_id=True), encoding="utf-8")
    state[K_ZONE_FILE] = str(path)
    state[K_ZONE_LABEL] = f"{name} ({zones.n_cells:,} zones)"
    state[K_ZONE_KIND] = "file"
    state.pop(K_ZONE_ERROR, None)
    return True


def use_bundled_zones(state: MutableMapping) -> None:
    """Button callback: the bundled districts become the zone file in use."""
    state[K_ZONE_FILE] = str(BUNDLED_ZONES)
    state[K_ZONE_LABEL] = BUNDLED_LABEL
    state[K_ZONE_KIND] = "file"
    state.pop(K_ZONE_ERROR, None)


def export_spec(spec: str | None) -> str | None:
    """The ``--zones`` value for a command line run from the repository (bundled files as relative paths)."""
    if spec is None:
        return None
    try:
        return str(Path(spec).resolve().relative_to(REPO_ROOT))
    except ValueError:
        return spec


def zone_polygons(zones, cells) -> pd.DataFrame:
    """``DataFrame[cell, name, polygon]``: every zone's outline as a list of [lon, lat] (a PolygonLayer row per
    part, so a multi-part zone gives several rows with the same cell and name)."""
    cells = np.asarray(cells, dtype=np.int64)
    gdf = zones.polygons(cells)
    names = np.asarray(gdf["name"] if "name" in gdf.columns else zones.names(cells), dtype=object)
    parts, part_of = shapely.get_parts(gdf.geometry.to_numpy(), return_index=True)
    rings = shapely.get_exterior_ring(parts)
    xy, ring_of = shapely.get_coordinates(rings, return_index=True)
    xy = np.round(xy, 6)
    starts = np.searchsorted(ring_of, np.arange(len(parts) + 1))
    coords = [xy[a:b - 1].tolist() for a, b in itertools.pairwise(starts)]
    return pd.DataFrame({"cell": gdf["cell"].to_numpy()[part_of], "name": names[part_of], "polygon": coords})


def zone_controls(ss, bound, box=None) -> None:
    """Sidebar: zone kind, then the cell area, the H3 resolution or the zone file (``bound`` draws a widget whose
    value persists across pages, :func:`odapp.shared.persist.bound`)."""
    bound(K_ZONE_KIND, st.radio, label="Zones", options=list(ZONE_KINDS), format_func=ZONE_KINDS.get,
          horizontal=False,
          help="What origins and destinations are: square cells of a chosen area (Google used ~1.3 km²), Uber's "
               "H3 hexagons at a resolution, or your own polygons (districts, census tracts, transport zones).")
    kind = ss[K_ZONE_KIND]
    if kind == "square":
        bound(K_CELL_KM2, st.number_input, label="Grid cell area (km²)", min_value=CELL_KM2_RANGE[0],
              max_value=CELL_KM2_RANGE[1], step=CELL_KM2_RANGE[2], format="%.1f",
              help="Area of each square grid cell; origins and destinations are cells. Google used ~1.3 km².")
    elif kind == "h3":
        bound(K_H3_RES, st.number_input, label="H3 resolution", min_value=H3_RES_RANGE[0],
              max_value=H3_RES_RANGE[1], step=1,
              help="Higher is finer: res 7 ≈ 5.2 km², res 8 ≈ 0.74 km², res 9 ≈ 0.11 km² per hexagon.")
    else:
        up = st.file_uploader("Zone file", type=["geojson", "json", "gpkg", "zip"], key="w.zone_upload",
                              help="Polygons in any CRS: GeoJSON, GeoPackage or a zipped Shapefile. A column "
                                   "called name (or NAME, district, NAMELSAD, GEOID, ...) labels the zones. Points "
                                   "outside every polygon are dropped and counted.")
        if up is not None and st.session_state.get("odlab.zone_upload_seen") != (up.name, up.size):
            st.session_state["odlab.zone_upload_seen"] = (up.name, up.size)
            apply_zone_upload(ss, up.getvalue(), up.name)
        if bundled_fits(box):
            st.button("Use the bundled districts", key="w.zone_bundled", on_click=use_bundled_zones, args=(ss,),
                      help="40 Voronoi districts of the bundled synthetic city (sample_data/districts.geojson).")
        if ss.get(K_ZONE_ERROR):
            st.error(plain(ss[K_ZONE_ERROR]), icon="⚠️")
        path, label = zone_file(ss, box)
        st.caption(f"Zones: {plain(label)}" + ("" if path else "; square cells are used until you upload polygons "
                                                               "that cover it."))
