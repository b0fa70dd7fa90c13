"""The zones on a map: cell outlines, their edges drawn once (straight runs merged), gaps or insets between
zones, and the zone layers of the Data page's trace density and of the release map."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pydeck as pdk
import shapely

from odapp.maps.context import MapContext, map_context, zones_box
from odapp.maps.deck import (
    DIGITS,
    SHAPE_DIGITS,
    EncodedLayer,
    deck,
    layer_rows,
    points_box,
    ramp_rgba,
    scale_bar,
    scale_bar_layers,
    view_state,
)
from odapp.maps.flows import CELL_COLOR, ZONE, zone_label
from odcore.report import figures


def cell_polygons(grid, cells: np.ndarray) -> pd.DataFrame:
    """``DataFrame[cell, polygon]``: each cell's outline (``grid.polygons()``) as a list of [lon, lat] (for a
    PolygonLayer and :func:`odcore.report.figures.flow_map_figure`); squares, hexagons or any zone polygon."""
    gdf = grid.polygons(np.asarray(cells, dtype=np.int64))
    geoms = shapely.get_exterior_ring(gdf.geometry.to_numpy())
    xy, idx = shapely.get_coordinates(geoms, return_index=True)
    xy = np.round(xy, DIGITS)
    if len(idx) == 5 * len(gdf):      # all squares: one reshape
        coords = xy.reshape(len(gdf), 5, 2)[:, :4].tolist()
    else:
        starts = np.searchsorted(idx, np.arange(len(gdf) + 1))
        coords = [xy[a:b - 1].tolist() for a, b in itertools.pairwise(starts)]
    return pd.DataFrame({"cell": gdf["cell"].to_numpy(), "polygon": coords})


def trace_density_deck(cells_df: pd.DataFrame, grid) -> tuple[pdk.Deck, float]:
    """The Data page's map of trace points per zone (``cells_df``: ``cell, name, polygon, points``): log colour
    scale, scale bar; the empty zones given as outlines only (no polygon, no tooltip), or pale grey where zones are
    told apart by gaps (H3 hexagons and zone files, :func:`outline_style`; hovering one says it holds 0 trace
    points). Which zones it is given is :func:`odapp.data.cache.trace_density_map`'s choice. Returns the (frozen) deck and
    the largest log10 count."""
    points = cells_df["points"].to_numpy()
    logp = np.log10(points + 1)
    vmax = float(logp.max()) if len(logp) else 1.0
    empty = points == 0
    outline = outline_style(grid)
    blank = [255, 255, 255, 0] if outline == "lines" else EMPTY_ZONE_RGBA
    square = getattr(grid, "kind", "square") == "square"
    # zone_label(c) and num(p) of every cell (num of a whole number: f"{p:,}"), made without two calls per cell: a
    # new grid's map is made at each press
    cell = cells_df["cell"].to_numpy()
    counts = [f"{p:,}" for p in points.astype(np.int64).tolist()]
    if square:
        tips = [f"{ZONE} {c}\n{p} trace points" for c, p in zip(cell.tolist(), counts, strict=True)]
    else:
        tips = [f"{zone_label(c, n)}\n{p} trace points" for n, c, p in
                zip(cells_df["name"], cell.tolist(), counts, strict=True)]
    rgba = ramp_rgba(logp, 0, vmax, alpha=190)
    rgba[empty] = blank
    # object columns: the rows are read back as Python lists (layer_rows), which a string column makes slowly
    cells_df = cells_df.assign(color=pd.Series(rgba.tolist(), index=cells_df.index, dtype=object),
                               tip=pd.Series(tips, index=cells_df.index, dtype=object))
    cent = grid.centroids(cell[~empty])
    edges = None
    if outline == "lines":
        # an empty square is drawn by its outline alone: its polygon would be transparent, there only for a "0 trace
        # points" tooltip, and made 35-50 % of the map sent again on every grid press (the bundled city's 1.3 km²
        # map: 358 KiB with them, 229 without). The outlines are still every cell's.
        edges = outline_edges(cells_df["polygon"].tolist())
        cells_df = cells_df[~empty]
    # the flow map's offline base layer: water under the zones (the Data page has the fixes themselves, per zone)
    ctx = map_context(zones_box(cells_df["polygon"].tolist())) if len(cells_df) else MapContext()
    d = deck([*ctx.under, *grid_layers(cells_df, outline=outline, edges=edges),
              *scale_bar_layers(cent["lat"], cent["lon"])],
             view_state(cent["lat"], cent["lon"], height_px=480), frozen=True,
             fit=points_box(cent["lat"], cent["lon"], also_lat=scale_bar(cent["lat"], cent["lon"])[0][1][1]))
    d.context_words = ctx.words    # the legend's line about it (empty: no water in the box)
    return d, vmax


def outline_edges(polygons, tol: float = 10.0 ** -DIGITS) -> np.ndarray:
    """The outlines of the polygons' rings (lists of [lon, lat]) as few straight segments ``(n, 4)``: lon0, lat0,
    lon1, lat1. An edge two neighbouring cells share is kept once, and edges that continue each other in a straight
    line (a grid line through several cells) become one segment when no vertex on the way is more than ``tol``
    degrees (10⁻⁵ ≈ 1 m, the precision the map is sent with) from it: the same outlines, far fewer segments.

    Made on every new grid or zone map (the Data page's map, the release map's cells), so it works on arrays: the
    greedy loops it replaces (kept in ``tests/app/test_app_maps.py`` as the reference it must equal, byte for byte) took
    60–140 ms of a grid press on the bundled city."""
    polys = polygons if isinstance(polygons, list) else list(polygons)
    if not polys:
        return np.zeros((0, 4))
    sizes = np.fromiter((len(q) for q in polys), dtype=np.int64, count=len(polys))
    a = np.asarray(list(itertools.chain.from_iterable(polys)), dtype=float).reshape(-1, 2)
    if len(a) != sizes.sum():          # rings given some other way (flat lists): one at a time
        rings = [np.asarray(q, dtype=float).reshape(-1, 2) for q in polys]
        sizes = np.array([len(q) for q in rings], dtype=np.int64)
        a = np.concatenate(rings)
    starts = np.cumsum(sizes) - sizes
    nxt = np.arange(1, len(a) + 1)
    nxt[starts + sizes - 1] = starts   # each vertex to the next one, closing the ring
    b = a[nxt]
    swap = (a[:, 0] > b[:, 0]) | ((a[:, 0] == b[:, 0]) & (a[:, 1] > b[:, 1]))
    e = unique_rows(np.round(np.where(swap[:, None], np.hstack([b, a]), np.hstack([a, b])), DIGITS))
    e = e[(e[:, 0] != e[:, 2]) | (e[:, 1] != e[:, 3])]
    return _merge_straight(e, tol)


def unique_rows(x: np.ndarray) -> np.ndarray:
    """``np.unique(x, axis=0)`` of a 2-d float array: its distinct rows in lexicographic order. Sorted by
    ``np.lexsort`` (~5× faster than ``np.unique``'s sort of the rows as records) when rows that compare equal are
    equal to the byte, that is when ``x`` holds neither NaN nor -0.0; else by ``np.unique`` itself, which keeps one of
    ``0.0`` and ``-0.0`` by the order its sort leaves them in."""
    x = np.asarray(x, dtype=float)
    if len(x) < 2 or np.isnan(x).any() or (np.signbit(x) & (x == 0)).any():
        return np.unique(x, axis=0)
    s = x[np.lexsort(x.T[::-1])]
    return s[np.r_[True, (s[1:] != s[:-1]).any(axis=1)]]


def _straight_runs(p: np.ndarray, first: np.ndarray, last: np.ndarray, tol: float,
                   window: int = 16) -> tuple[np.ndarray, np.ndarray]:
    """Segments through the points of each chain ``p[first[k]:last[k] + 1]`` (in order): from each segment's start
    ``a``, the first end ``c`` whose segment passes farther than ``tol`` from a point between stops it at ``c - 1``.
    Returns the segments' start and end indices into ``p``, chain after chain. Every chain takes its next step at
    once (``window`` ends at a time), so the numpy calls are per step, not per chain and end."""
    a = np.asarray(first, dtype=np.int64).copy()
    c0 = a + 2                                                # each chain's first end to try
    end = np.asarray(last, dtype=np.int64)
    starts, stops, owner = [], [], []
    j = np.arange(window)
    live = np.flatnonzero(a < end)
    while live.size:
        A, C0, E = a[live], c0[live], end[live]
        C = C0[:, None] + j                                   # (chains, window) ends to try
        top = np.minimum(C0 + window - 1, E)                  # the last end tried
        span = int((top - A - 1).max(initial=0))              # the points that may lie between: a + 1 ... top - 1
        M = A[:, None] + 1 + np.arange(span)
        pa = p[A][:, None, :]
        d = p[np.minimum(C, E[:, None])] - pa                  # (chains, window, 2); ends past the chain masked below
        q = p[np.minimum(M, E[:, None])] - pa                  # (chains, span, 2)
        with np.errstate(divide="ignore", invalid="ignore"):   # a repeated point (0/0): never stops a run
            dist = (np.abs(d[:, :, None, 0] * q[:, None, :, 1] - d[:, :, None, 1] * q[:, None, :, 0])
                    / np.hypot(d[:, :, 0], d[:, :, 1])[:, :, None])
        bad = ((dist > tol) & (M[:, None, :] < C[:, :, None])).any(axis=2) & (C <= E[:, None])
        stop = bad.any(axis=1)
        b = np.where(stop, C0 + bad.argmax(axis=1) - 1, E)
        found = stop | (top >= E)                             # a run ends here (at a bad end or the chain's end)
        if (~found).any():                                    # no bad end in this window: try the next one
            c0[live[~found]] += window
        k = live[found]
        starts.append(A[found])
        stops.append(b[found])
        owner.append(k)
        a[k] = b[found]
        c0[k] = b[found] + 2
        live = live[a[live] < end[live]]
    if not owner:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    order = np.argsort(np.concatenate(owner), kind="stable")   # by chain; a chain's runs in the order they were made
    return np.concatenate(starts)[order], np.concatenate(stops)[order]


def _merge_straight(e: np.ndarray, tol: float) -> np.ndarray:
    """Join the segments ``e`` (n, 4) that meet end to end in a straight line (see :func:`outline_edges`). At each
    vertex its segments are paired greedily, in order, with one that goes straight on (all vertices with the same
    number of segments at once). The pairs make chains (paths or rings of segments); each chain is walked from its
    lowest segment, forward from that segment's end, then back from its start, and the chains come in the order of
    their lowest segments. The walks are found for all chains at once by pointer jumping."""
    n = len(e)
    if not n:
        return np.zeros((0, 4))
    pts = np.concatenate([e[:, :2], e[:, 2:]])                 # start points, then end points
    o = np.lexsort((pts[:, 1], pts[:, 0]))                    # vertex ids: equal points, equal ids
    ps = pts[o]
    vid = np.empty(len(pts), dtype=np.int64)
    vid[o] = np.cumsum(np.r_[False, (ps[1:] != ps[:-1]).any(axis=1)])
    ends = np.stack([vid[:n], vid[n:]], axis=1)                # (segment, side) -> vertex
    d = e[:, 2:] - e[:, :2]
    u = d / np.hypot(d[:, 0], d[:, 1])[:, None]
    # incidences (vertex, segment, side), by vertex then segment: a vertex's segments in the order they were met
    seg = np.concatenate([np.arange(n), np.arange(n)])
    side = np.concatenate([np.zeros(n, np.int64), np.ones(n, np.int64)])
    order = np.lexsort((seg, vid))
    v_s, seg_s, side_s = vid[order], seg[order], side[order]
    first = np.flatnonzero(np.r_[True, v_s[1:] != v_s[:-1]])
    deg = np.diff(np.r_[first, len(v_s)])
    partner = np.full((n, 2), -1, dtype=np.int64)             # (segment, side) -> the segment going straight on
    for k in np.unique(deg):
        if k < 2:
            continue
        at_k = first[deg == k][:, None] + np.arange(k)[None, :]   # (vertices of degree k, k)
        S, T = seg_s[at_k], side_s[at_k]
        taken = np.zeros(S.shape, dtype=bool)
        for x, y in itertools.combinations(range(k), 2):      # the pairs in the order they were tried
            i, j = S[:, x], S[:, y]
            ok = (np.abs(u[i, 0] * u[j, 1] - u[i, 1] * u[j, 0]) < 1e-2) & ~taken[:, x] & ~taken[:, y]
            partner[i[ok], T[ok, x]] = j[ok]
            partner[j[ok], T[ok, y]] = i[ok]
            taken[ok, x] = True
            taken[ok, y] = True
    # Walk states 2·s + t: "along segment s, out through its side t" (at the point e[s, 2t:2t + 2]). The next state
    # is the partner there, left by its other side; pairs are mutual, so each state has at most one next and one
    # previous state, and the states form paths and rings.
    state = np.arange(2 * n)
    s_of, t_of = state >> 1, state & 1
    nxt_seg = partner.ravel()
    has = nxt_seg >= 0
    nxt = np.full(2 * n, -1, dtype=np.int64)
    ns = nxt_seg[has]
    nxt[has] = 2 * ns + (ends[ns, 1] != ends[s_of[has], t_of[has]])   # out by side 1 unless in by it
    # each chain's lowest segment: the least segment reachable forward from either state of a segment
    low, hop = s_of.copy(), nxt.copy()
    for _ in range((2 * n).bit_length()):                     # 2^k steps after k rounds (rings go round forever)
        ok = hop >= 0
        if not ok.any():
            break
        low[ok] = np.minimum(low[ok], low[hop[ok]])
        hop[ok] = hop[hop[ok]]
    root = np.minimum(low[0::2], low[1::2])                   # (segment) -> its chain's lowest segment
    # a walk stops before it comes back to its chain's lowest segment (a ring), so cut every step into one
    into_root = has.copy()
    into_root[has] = ns == root[s_of[has]]
    nxt[into_root] = -1
    # steps from each state to the end of its path, and that end
    rank = (nxt >= 0).astype(np.int64)
    tail = np.where(nxt >= 0, nxt, state)
    hop = nxt.copy()
    while (hop >= 0).any():
        ok = hop >= 0
        h = hop[ok]
        rank[ok] += rank[h]
        tail[ok] = tail[h]
        hop[ok] = hop[h]
    # a chain's points: back from the root's start (reversed), the root's start and end, forward from its end
    r = root[s_of]
    fwd, bwd = 2 * r + 1, 2 * r                               # the root's two states, for every state
    pos = np.full(2 * n, np.iinfo(np.int64).min)
    on_f = (tail == tail[fwd]) & (s_of != r)
    seen = np.zeros(n, dtype=bool)
    seen[s_of[on_f]] = True                                   # a ring is all forward: nothing is left to walk back
    on_b = (tail == tail[bwd]) & (s_of != r) & ~seen[s_of]
    pos[on_f] = 1 + rank[fwd[on_f]] - rank[on_f]
    pos[on_b] = -(rank[bwd[on_b]] - rank[on_b])
    is_root = s_of == r
    pos[is_root] = t_of[is_root]
    use = pos > np.iinfo(np.int64).min
    st = state[use][np.lexsort((pos[use], r[use]))]            # by chain (lowest segment), then along it
    p = e.reshape(2 * n, 2)[st]                               # state 2·s + t's point: e[s, 2t:2t + 2]
    cr = r[st]
    new = np.r_[True, cr[1:] != cr[:-1]]
    first_pt = np.flatnonzero(new)
    last_pt = np.r_[first_pt[1:], len(st)] - 1
    a, b = _straight_runs(p, first_pt, last_pt, tol)
    return np.hstack([p[a], p[b]])


GAP_SCALE = 0.9                             # a hexagon drawn with gaps: 90 % of its size, about its centre
EMPTY_ZONE_RGBA = [226, 226, 226, 150]        # an empty zone where zones are told apart by gaps (no outlines)


def outline_style(grid) -> str:
    """How a map shows where its zones meet: ``"lines"`` (a layer of outline segments) for squares, ``"gaps"`` for H3
    hexagons (each drawn a little smaller about its centre, :func:`shrunk`) and ``"insets"`` for zone files (each
    drawn moved inward by the same distance all round, :func:`inset`), so the background shows between them.

    Squares' outlines join into a few hundred straight segments; hexagons' cannot (11,217 segments for the bundled
    city's 3,657 hexagons at resolution 8), nor can a zone file's (a file of detailed census tracts has tens of
    thousands), and in a browser without a GPU every redraw of a map pays ~22 ms per 1,000 segments
    (docs/benchmarks.md, "Maps of H3 hexagons and zone files"). A zone file's zones are inset rather than scaled:
    scaling a concave zone about its centre can push it into its neighbour, an inward offset cannot."""
    kind = getattr(grid, "kind", "square")
    return {"h3": "gaps", "polygons": "insets"}.get(kind, "lines")


def release_outline_style(grid) -> str:
    """How the OD release map shows where its zones meet: as :func:`outline_style`, but squares too are told apart by
    gaps (each drawn at :data:`GAP_SCALE` of its size), not by a layer of outline segments. With the scale bar drawn
    as filled polygons too (:func:`scale_bar_polygon_layer`), every layer of the bundled city's release map is a
    PolygonLayer: one shader program for a browser without a GPU to compile before the map's first frame instead
    of two, and no 387 segments to parse, lay out and draw again on every ε press (docs/flow_map.md, speed)."""
    style = outline_style(grid)
    return "gaps" if style == "lines" else style


def shrunk(polygons, scale: float = GAP_SCALE, digits: int = DIGITS) -> list[list[list[float]]]:
    """Each ring (a list of [lon, lat], not closed) scaled by ``scale`` about the mean of its vertices (a convex
    cell's centre), rounded to ``digits`` decimals (:data:`DIGITS`, as the rest of a layer's rows)."""
    polys = polygons if isinstance(polygons, list) else list(polygons)
    if not polys:
        return []
    sizes = np.fromiter((len(q) for q in polys), dtype=np.int64, count=len(polys))
    a = np.asarray(list(itertools.chain.from_iterable(polys)), dtype=float).reshape(-1, 2)
    owner = np.repeat(np.arange(len(polys)), sizes)
    centre = np.column_stack([np.bincount(owner, a[:, k], minlength=len(polys)) / sizes for k in (0, 1)])[owner]
    flat = np.round(centre + (a - centre) * scale, digits).tolist()
    ends = np.cumsum(sizes).tolist()
    return [flat[b - n:b] for b, n in zip(ends, sizes.tolist(), strict=True)]


INSET_FRACTION = 0.027   # a zone file's zones inset by 2.7 % of √(median zone area): the gap of H3 hexagons that size


@dataclass(frozen=True, eq=False)
class Inset:
    """Zones drawn inset (:func:`inset`): the ring to draw for each zone, in the rows' order, and the outline
    segments (:func:`outline_edges`) of the zones too thin to inset, which keep their line."""

    rings: list
    edges: np.ndarray


def inset(polygons, fraction: float = INSET_FRACTION, simplify: float = 0.5) -> Inset:
    """Each ring (a list of [lon, lat], not closed) moved inward by one distance ``d`` all round: shapely's negative
    buffer (mitred corners, so a straight side stays one side) in metres on a local equirectangular projection
    (:func:`odcore.report.figures.km_per_deg_lon` at the rings' mean latitude), ``d = fraction·√(median ring area)``. Two
    neighbours are then ``2d`` apart wherever they met, however concave. A ring that splits keeps its largest part;
    a ring thinner than ``2d`` everywhere has nothing left and is drawn as it is, with its outline in
    :attr:`Inset.edges`. Each drawn ring is then simplified within ``simplify·d`` (Douglas–Peucker, topology kept):
    at most ``d/2`` from the inset ring, so still inside its zone and at least ``d`` from its neighbours, with fewer
    vertices for the browser to draw where a zone's boundary wiggles (a street, a river). Rounded to :data:`DIGITS`
    decimals like the rest of a layer's rows."""

    polys = polygons if isinstance(polygons, list) else list(polygons)
    if not polys:
        return Inset([], np.zeros((0, 4)))
    sizes = np.fromiter((len(q) for q in polys), dtype=np.int64, count=len(polys))
    a = np.asarray(list(itertools.chain.from_iterable(polys)), dtype=float).reshape(-1, 2)
    lon0, lat0 = float(a[:, 0].mean()), float(a[:, 1].mean())
    kx, ky = 1000 * figures.km_per_deg_lon(lat0), 1000 * figures.KM_PER_DEG_LAT
    closed = np.ones(len(a) + len(polys), dtype=bool)            # each ring closed: its first vertex again at its end
    closed[np.cumsum(sizes + 1) - 1] = False
    xy = np.empty((len(closed), 2))
    xy[closed] = (a - (lon0, lat0)) * (kx, ky)
    xy[~closed] = xy[np.concatenate([[0], np.cumsum(sizes + 1)[:-1]])]
    zones = shapely.polygons(shapely.linearrings(xy, indices=np.repeat(np.arange(len(polys)), sizes + 1)))
    d = fraction * math.sqrt(float(np.median(shapely.area(zones))))
    inner = shapely.buffer(zones, -d, join_style="mitre")
    if simplify > 0:
        inner = shapely.simplify(inner, simplify * d, preserve_topology=True)
    parts, of = shapely.get_parts(inner, return_index=True)
    area = shapely.area(parts)
    parts, of, area = parts[area > 0], of[area > 0], area[area > 0]   # an empty result is no part
    keep = np.zeros(len(polys), dtype=np.int64) - 1             # each zone's largest part
    if len(parts):
        order = np.lexsort((area, of))                           # by zone, largest last
        last = np.flatnonzero(np.r_[of[order][1:] != of[order][:-1], True])
        keep[of[order][last]] = order[last]
    rings = [None] * len(polys)
    ok = np.flatnonzero(keep >= 0)
    if len(ok):
        pts, ring_of = shapely.get_coordinates(shapely.get_exterior_ring(parts[keep[ok]]), return_index=True)
        lonlat = np.round(pts / (kx, ky) + (lon0, lat0), DIGITS).tolist()
        starts = np.searchsorted(ring_of, np.arange(len(ok) + 1))
        for z, (b, e) in zip(ok.tolist(), itertools.pairwise(starts.tolist()), strict=True):
            rings[z] = lonlat[b:e - 1]                           # not closed, as the rows' rings
    thin = [i for i, r in enumerate(rings) if r is None]
    for i in thin:
        rings[i] = np.round(np.asarray(polys[i], dtype=float), DIGITS).tolist()
    return Inset(rings, outline_edges([polys[i] for i in thin]))


def grid_layers(cells_df: pd.DataFrame, color: list | str = "color", *, line: bool = True, pickable: bool = True,
                layer_id: str = "cells", columns: tuple[str, ...] = ("color",),
                edges: np.ndarray | Inset | None = None, outline: str = "lines") -> list[pdk.Layer]:
    """Cell polygons: ``color`` is a column, a constant or a deck.gl expression over ``columns`` (sent with the
    ``polygon`` and, when pickable, the ``tip``); with ``line``, where the cells meet is shown as ``outline`` says
    (:func:`outline_style`): ``"lines"``, a second layer of distinct edges (``<layer_id>_edges``: ``edges`` if
    given, else :func:`outline_edges` of the polygons); ``"gaps"``, each cell drawn at :data:`GAP_SCALE` of its
    size and no second layer; ``"insets"``, each zone drawn moved inward (``edges``: its :class:`Inset` if made
    beforehand, else :func:`inset` of the polygons), with edges only for the zones too thin for it.

    The outlines are a LineLayer, not the PolygonLayer's own stroke: in a browser without a GPU (software WebGL)
    the stroke's paths cost about three times the rest of the map on every frame (the bundled city's release map
    while panning: 0.6 s against 0.25 s per frame on a loaded 2-core machine; docs/benchmarks.md)."""
    if outline not in ("lines", "gaps", "insets"):
        raise ValueError(f"outline={outline!r}; expected 'lines', 'gaps' or 'insets'")
    cols = ["polygon", *columns, *(["tip"] if pickable else [])]
    style = outline if line else "none"
    rows, e = cells_df, None
    if style == "gaps":
        # to 1e-4° (~10 m, a tenth of a pixel at a first view, as the arrows): a zone drawn with gaps meets no
        # outline it must match, and the thousand zones' corners are most of what an ε press sends again
        rows = cells_df[cols].assign(polygon=shrunk(cells_df["polygon"].tolist(), digits=SHAPE_DIGITS))
    elif style == "insets":
        ins = edges if isinstance(edges, Inset) else inset(cells_df["polygon"].tolist())
        if len(ins.rings) != len(cells_df):
            raise ValueError(f"an Inset of {len(ins.rings)} zones for {len(cells_df)} rows")
        rows, e = cells_df[cols].assign(polygon=ins.rings), ins.edges
    elif style == "lines":
        e = outline_edges(cells_df["polygon"].tolist()) if edges is None else edges
    layers = [pdk.Layer("PolygonLayer", data=layer_rows(rows, {c: c for c in cols}), id=layer_id,
                        get_polygon="polygon", get_fill_color=color, stroked=False, filled=True, pickable=pickable,
                        auto_highlight=pickable)]
    if e is not None and (style == "lines" or len(e)):
        layers.append(pdk.Layer("LineLayer", data=[{"s": r[:2], "t": r[2:]} for r in e.tolist()],
                                id=f"{layer_id}_edges", get_source_position="s", get_target_position="t",
                                get_color=[90, 90, 90, 120], get_width=0.5, width_min_pixels=0.5, pickable=False))
    return layers


def cell_layers(cells_df: pd.DataFrame, edges: np.ndarray | Inset | None = None, *, encoded: bool = False,
                outline: str = "lines", color: str = CELL_COLOR) -> list:
    """The release map's cells (shaded by ``value`` as ``color`` says: :data:`CELL_COLOR`, or :data:`RISK_COLOR`
    for :func:`risk_cells_frame`, with their tooltips) and where they meet (``outline``, see :func:`grid_layers`);
    with ``encoded``, as :class:`EncodedLayer`s (for a cache that shares them between decks)."""
    layers = grid_layers(cells_df, color, layer_id="cells", columns=("value",), edges=edges, outline=outline)
    return [EncodedLayer(x) for x in layers] if encoded else layers
