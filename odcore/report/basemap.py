"""An offline base layer for the flow maps: water from a bundled coastline, and the streets the traces themselves run on.

Nothing here is fetched: the coastline is Natural Earth's 1:10m land (public domain), bundled as the quantized
TopoJSON of the ``world-atlas`` package, as compact arrays (``sample_data/natural_earth_land_10m.npz``, see
``sample_data/README.md``); the streets are a density image of the data's own GPS fixes (dense GPS such as
Cabspotting's taxis draws the road network; check-ins and the synthetic city's stays draw where people stop).

Natural Earth's land at 1:10m is accurate to a few hundred metres (its TopoJSON is quantized to 0.0036° × 0.0017°,
about 320 × 190 m at San Francisco): the shape of a bay and a coast at city scale, not a shoreline to navigate by.
"""

from __future__ import annotations

import functools
import gzip
import json
import math
import struct
import zlib

import numpy as np
import shapely

from odcore.paths import SAMPLE_DATA_DIR

LAND_FILE = SAMPLE_DATA_DIR / "natural_earth_land_10m.npz"
LAND_SOURCE = "Natural Earth 1:10m land (public domain), via the world-atlas TopoJSON"


def land_from_topojson(path, out) -> None:
    """Write the land of a world-atlas TopoJSON file (``land-10m.json``, gzipped or not) as the compact arrays
    :func:`land_rings` reads: every ring's quantized points (closed; as int32 steps from the point before), where each ring starts, which polygon it
    belongs to, and the quantization (scale, translate). How ``sample_data/natural_earth_land_10m.npz`` was made."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        topo = json.load(f)
    arcs = [np.cumsum(np.asarray(a, dtype=np.int64), axis=0) for a in topo["arcs"]]   # delta-encoded
    polys = []
    for g in topo["objects"]["land"]["geometries"]:
        polys.extend([g["arcs"]] if g["type"] == "Polygon" else g["arcs"] if g["type"] == "MultiPolygon" else [])
    pts, starts, owner = [], [0], []
    for k, rings in enumerate(polys):
        for idx in rings:
            parts = [(arcs[i] if i >= 0 else arcs[~i][::-1])[0 if j == 0 else 1:] for j, i in enumerate(idx)]
            ring = np.concatenate(parts)                # consecutive arcs share their end point
            pts.append(ring)
            starts.append(starts[-1] + len(ring))
            owner.append(k)
    xy = np.concatenate(pts)
    np.savez_compressed(out, dxy=np.diff(xy, axis=0, prepend=0).astype(np.int32), start=np.asarray(starts, np.int64),
                        polygon=np.asarray(owner, np.int32), scale=np.asarray(topo["transform"]["scale"]),
                        translate=np.asarray(topo["transform"]["translate"]))


@functools.cache
def land_rings() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The bundled land: all rings' points ``(n, 2)`` in degrees, where each ring starts (``r + 1`` offsets), each
    ring's polygon and its box ``(r, 4)``. Read once (a few milliseconds)."""
    with np.load(LAND_FILE) as z:
        xy = np.cumsum(z["dxy"], axis=0, dtype=np.int64) * z["scale"] + z["translate"]
        start, poly = z["start"], z["polygon"]
    n = np.diff(start)
    owner = np.repeat(np.arange(len(n)), n)
    boxes = np.column_stack([np.full(len(n), np.inf), np.full(len(n), np.inf),
                             np.full(len(n), -np.inf), np.full(len(n), -np.inf)])
    np.minimum.at(boxes[:, 0], owner, xy[:, 0])
    np.minimum.at(boxes[:, 1], owner, xy[:, 1])
    np.maximum.at(boxes[:, 2], owner, xy[:, 0])
    np.maximum.at(boxes[:, 3], owner, xy[:, 1])
    return xy, start, poly, boxes


def land(lon_min: float, lon_max: float, lat_min: float, lat_max: float):
    """The bundled land inside the box, as one shapely geometry (empty where the box is all sea)."""
    xy, start, poly, boxes = land_rings()
    hit = (boxes[:, 0] <= lon_max) & (boxes[:, 2] >= lon_min) & (boxes[:, 1] <= lat_max) & (boxes[:, 3] >= lat_min)
    shells = np.flatnonzero(hit & np.r_[True, poly[1:] != poly[:-1]])    # a polygon's first ring is its shell
    out = []
    for r in shells.tolist():
        holes = [xy[start[h]:start[h + 1]] for h in range(r + 1, len(poly)) if poly[h] == poly[r] and hit[h]] \
            if r + 1 < len(poly) and poly[r + 1] == poly[r] else []
        g = shapely.Polygon(xy[start[r]:start[r + 1]], holes)
        out.append(shapely.clip_by_rect(g, lon_min, lat_min, lon_max, lat_max))
    return shapely.union_all(out) if out else shapely.Polygon()


def water_rings(lon_min: float, lon_max: float, lat_min: float, lat_max: float, *,
                tolerance: float = 0.0) -> list[list[list[list[float]]]]:
    """Water (the box less the bundled land) as polygons for a map layer: each a list of rings of [lon, lat] (the
    outer ring first, then its holes: islands), simplified within ``tolerance`` degrees. Empty when the box is all
    land (the bundled synthetic city, inland Atlanta) or when the box is not finite."""
    if not all(map(math.isfinite, (lon_min, lon_max, lat_min, lat_max))) or lon_max <= lon_min or lat_max <= lat_min:
        return []
    box = shapely.box(lon_min, lat_min, lon_max, lat_max)
    sea = shapely.difference(box, land(lon_min, lon_max, lat_min, lat_max))
    if tolerance > 0:
        sea = shapely.simplify(sea, tolerance, preserve_topology=True)
    out = []
    for p in shapely.get_parts(sea):
        if p.geom_type != "Polygon" or p.area <= 0:
            continue
        rings = [p.exterior, *p.interiors]
        out.append([np.round(np.asarray(r.coords)[:-1], 5).tolist() for r in rings])
    return out


def density_alpha(counts: np.ndarray, max_alpha: int = 150, levels: int = 16) -> np.ndarray:
    """Each pixel's opacity (uint8): ``log(1 + count)`` scaled so the 99.5th percentile of non-empty pixels reaches
    ``max_alpha``, in ``levels`` steps (a small PNG); empty pixels stay clear. Counts are whole numbers, so each
    pixel's opacity is looked up in a table of the counts up to that percentile."""
    c = np.asarray(counts)
    nz = c[c > 0]
    if not nz.size:
        return np.zeros(c.shape, dtype=np.uint8)
    top = max(1, math.ceil(float(np.quantile(nz, 0.995))))
    f = np.log1p(np.arange(top + 1, dtype=float)) / math.log1p(top)
    table = np.round(np.ceil(f * levels) / levels * max_alpha).astype(np.uint8)   # a non-empty pixel is never clear
    return table[np.minimum(c, top).astype(np.int64)]


def png_grey_alpha(alpha: np.ndarray, grey: int = 40) -> bytes:
    """A PNG of one grey with the given opacity per pixel (at most 256 distinct opacities): an indexed-colour image,
    one byte a pixel, its palette all ``grey`` and each entry's opacity in a ``tRNS`` chunk. zlib and struct only."""
    a = np.asarray(alpha, dtype=np.uint8)
    h, w = a.shape
    values, index = np.unique(a, return_inverse=True)
    raw = np.concatenate([np.zeros((h, 1), dtype=np.uint8), index.reshape(h, w).astype(np.uint8)], axis=1)  # filter 0

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    head = struct.pack(">IIBBBBB", w, h, 8, 3, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", head) + chunk(b"PLTE", bytes([grey, grey, grey]) * len(values))
            + chunk(b"tRNS", values.tobytes()) + chunk(b"IDAT", zlib.compress(raw.tobytes(), 6)) + chunk(b"IEND", b""))
