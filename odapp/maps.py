"""pydeck maps of the grid, trace density and OD flows (presentation only; the numbers come from odcore).

Every map layer of the app is built here; cell geometry comes from the grid's ``polygons()``/``centroids()``.

Nothing leaves the machine by default. ``pdk.Deck(map_style=None)`` does *not* mean "no base map" in Streamlit:
``st.pydeck_chart`` then fills in a CARTO style JSON (fetched by the browser from CARTO's servers). pydeck's own
default ``map_style`` is the ``"__MAP_STYLE__"`` placeholder; with ``map_provider=None`` pydeck leaves it as it is
and Streamlit's map component reads it as "no style": no base map is drawn and nothing is fetched
(``tests/browser/test_browser.py`` records every request of every page and fails on one to another host). The grid itself
is the background. A base map (:data:`BASEMAP`) is drawn only when the user turns it on.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pydeck as pdk
from pydeck.bindings import deck as _pdk_deck

from odapp.words import coord, num
from odcore.report import figures

# pydeck's Deck() asks five times whether its Jupyter widget can be made (has_jupyter_extra), and without ipywidgets
# each answer is a failed import that runs the widget module again: 2.8 ms of the 3 ms a Deck() takes, on every map
# drawn (each session's map of each press, with a class on the OD release page). The answer cannot change while
# the server runs, so it is asked once.
_pdk_deck.has_jupyter_extra = functools.cache(_pdk_deck.has_jupyter_extra)

# Sequential colour ramp (light yellow -> dark blue, viridis-like but readable on white), RGB.
RAMP = np.array([[253, 231, 37], [122, 209, 81], [34, 168, 132], [42, 120, 142], [65, 68, 135], [68, 1, 84]],
                dtype=float)
GREY = [150, 150, 150]
DIGITS = 5                                   # decimals of what a layer sends: 1e-5° ≈ 1 m
FLOW_POSITIONS = {"ox": "o_lon", "oy": "o_lat", "dx": "d_lon", "dy": "d_lat"}
WIDTH = (1.5, 10.5)                          # arc width (px) = WIDTH[0] + WIDTH[1]·f, f = count scaled to [0, 1]
ALPHA = (120, 120)                           # arc opacity = ALPHA[0] + ALPHA[1]·f
# Straight pieces per arc (deck.gl's default 50): the arcs' vertices cost most of a frame in a browser without a GPU
# (software WebGL: 125 ms of 235 ms per frame for the release map's 300 arcs, about 55 ms with 16 pieces).
ARC_SEGMENTS = 16


def ramp(values: np.ndarray, vmin: float, vmax: float, alpha: int = 200) -> list[list[int]]:
    """RGBA colours of ``values`` on :data:`RAMP` between ``vmin`` and ``vmax`` (clipped)."""
    return ramp_rgba(values, vmin, vmax, alpha).tolist()


def ramp_rgba(values: np.ndarray, vmin: float, vmax: float, alpha: int = 200) -> np.ndarray:
    """:func:`ramp` as an integer array ``(n, 4)``."""
    v = np.asarray(values, dtype=float)
    t = np.clip((v - vmin) / (vmax - vmin), 0, 1) if vmax > vmin else np.zeros_like(v)
    pos = t * (len(RAMP) - 1)
    i = np.minimum(pos.astype(int), len(RAMP) - 2)
    f = (pos - i)[:, None]
    rgb = RAMP[i] * (1 - f) + RAMP[i + 1] * f
    return np.concatenate([rgb, np.full((len(v), 1), alpha)], axis=1).round().astype(int)


def view_state(lat: np.ndarray, lon: np.ndarray, pitch: float = 0, *, width_px: int = 900,
               height_px: int = 540) -> pdk.ViewState:
    """Centre and web-mercator zoom that fit the points (1st–99th percentile box) in a map of the given size.

    At zoom z deck.gl's world is 512·2^z px wide, so a longitude span Δλ fits a width W when
    z = log2(W·360 / (512·Δλ)); a latitude span is stretched by 1/cos(latitude) first.
    """
    lat = np.asarray(lat, dtype=float)
    lon = np.asarray(lon, dtype=float)
    if lat.size == 0:
        return pdk.ViewState(latitude=0, longitude=0, zoom=1)
    la0, la1 = np.nanpercentile(lat, [0.5, 99.5])
    lo0, lo1 = np.nanpercentile(lon, [0.5, 99.5])
    stretch = 1 / max(math.cos(math.radians((la0 + la1) / 2)), 0.1)
    z_lon = math.log2(width_px * 360 / (512 * max(lo1 - lo0, 1e-4)))
    z_lat = math.log2(height_px * 360 / (512 * max((la1 - la0) * stretch, 1e-4)))
    zoom = float(np.clip(min(z_lon, z_lat) - 0.1 + pitch / 120, 1, 16))   # a tilted map shrinks the far side
    return pdk.ViewState(latitude=float((la0 + la1) / 2), longitude=float((lo0 + lo1) / 2), zoom=zoom, pitch=pitch)


def points_box(lat: np.ndarray, lon: np.ndarray, pad_px: float = 24, *, also_lat: float | None = None
               ) -> list[float] | None:
    """The box :func:`view_state` fits (the points' 0.5th to 99.5th percentiles) as a deck's ``fit``:
    ``[lon_min, lat_min, lon_max, lat_max, pad_px]``, reaching down to ``also_lat`` (a scale bar under the points)
    when given; none for no points."""
    lat, lon = np.asarray(lat, dtype=float), np.asarray(lon, dtype=float)
    if lat.size == 0:
        return None
    la0, la1 = np.nanpercentile(lat, [0.5, 99.5])
    lo0, lo1 = np.nanpercentile(lon, [0.5, 99.5])
    if also_lat is not None:
        la0 = min(la0, also_lat)
    return [float(lo0), float(la0), float(lo1), float(la1), pad_px]


def cell_polygons(grid, cells: np.ndarray) -> pd.DataFrame:
    """``DataFrame[cell, polygon]``: each cell's outline (``grid.polygons()``) as a list of [lon, lat] (for a
    PolygonLayer and :func:`odcore.report.figures.flow_map_figure`); squares, hexagons or any zone polygon."""
    gdf = grid.polygons(np.asarray(cells, dtype=np.int64))
    import shapely

    geoms = shapely.get_exterior_ring(gdf.geometry.to_numpy())
    xy, idx = shapely.get_coordinates(geoms, return_index=True)
    xy = np.round(xy, DIGITS)
    if len(idx) == 5 * len(gdf):      # all squares: one reshape
        coords = xy.reshape(len(gdf), 5, 2)[:, :4].tolist()
    else:
        starts = np.searchsorted(idx, np.arange(len(gdf) + 1))
        coords = [xy[a:b - 1].tolist() for a, b in itertools.pairwise(starts)]
    return pd.DataFrame({"cell": gdf["cell"].to_numpy(), "polygon": coords})


def _compact_json(obj) -> str:
    from pydeck.bindings.json_tools import default_serialize

    return json.dumps(obj, sort_keys=True, default=default_serialize, separators=(",", ":"), ensure_ascii=False)


class EncodedLayer:
    """A layer whose JSON is made once, for a layer that many decks share: the release map's cells are the same for
    every seed (and every session with the same settings), while its arcs are not. A :class:`CompactDeck` writes
    this text where the layer goes, instead of turning the thousand cells' rows into JSON again for each seed's map
    (with a class on the OD release page each person has a seed of their own)."""

    def __init__(self, layer: pdk.Layer):
        self.id = layer.id
        self.json = _compact_json(layer)


class CompactDeck(pdk.Deck):
    """A :class:`pydeck.Deck` whose JSON is compact (no indentation), so the C JSON encoder is used.

    pydeck indents its JSON, which forces Python's pure-Python encoder: ~10× slower on a map of a thousand cell
    polygons, too slow for a slider change to redraw within 300 ms. Its layers may be :class:`EncodedLayer`s: their
    JSON goes in as it is. ``fit``: ``[lon_min, lat_min, lon_max, lat_max, pad_px]``, the box the map element
    (:mod:`odapp.components.map`) fits its first view to at its real size in the browser (sent as the deck's
    ``fit``).
    """

    def __init__(self, *args, fit=None, **kwargs):
        self.fit = [round(float(v), DIGITS) for v in fit] if fit is not None else None
        super().__init__(*args, **kwargs)

    def to_json(self) -> str:
        from pydeck.bindings.json_tools import default_serialize

        spec = default_serialize(self)   # a new dict: the deck itself is not changed (it may be shared)
        encoded = {i: x.json for i, x in enumerate(spec["layers"]) if isinstance(x, EncodedLayer)}
        mark = "@@odlab-encoded-layer-{}"   # a string no layer's JSON holds, replaced by the layer's JSON
        spec["layers"] = [mark.format(i) if i in encoded else x for i, x in enumerate(spec["layers"])]
        text = _compact_json(spec)
        for i, js in encoded.items():
            text = text.replace(json.dumps(mark.format(i)), js, 1)
        return text


class FrozenDeck(CompactDeck):
    """A :class:`CompactDeck` whose JSON is made once (the deck must not change afterwards): for decks cached across
    reruns and sessions, so a rerun does not serialise the same thousand polygons again.

    Once its JSON is made, the deck lets go of its layers: the JSON is all that is used from then on, and the rows'
    Python lists and dicts (~9,000 for the bundled city's release map, times the maps in the cache) would only be
    scanned again by the full garbage collection Streamlit runs after every script run (``runner.postScriptGC``):
    with a class of ten on the OD release page that collection was a fifth of the server's CPU.

    The JSON is made with the deck, inside the cached function that makes it, so no other session ever sees the deck
    before its JSON exists (made on first use, two sessions drawing a new shared deck at once could both make it,
    one of them after the other had let go of the layers)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._json = super().to_json()
        self.layers = []

    def to_json(self) -> str:
        return self._json


def trace_density_deck(cells_df: pd.DataFrame, grid) -> tuple[pdk.Deck, float]:
    """The Data page's map of trace points per zone (``cells_df``: ``cell, name, polygon, points``): log colour
    scale, scale bar; the empty zones given as outlines only (no polygon, no tooltip), or pale grey where zones are
    told apart by gaps (H3 hexagons and zone files, :func:`outline_style`; hovering one says it holds 0 trace
    points). Which zones it is given is :func:`odapp.cache.trace_density_map`'s choice. Returns the (frozen) deck and
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
             view_state(cent["lat"], cent["lon"], height_px=480), frozen=True, fit=points_box(cent["lat"], cent["lon"], also_lat=scale_bar(cent["lat"], cent["lon"])[0][1][1]))
    d.context_words = ctx.words    # the legend's line about it (empty: no water in the box)
    return d, vmax


# The opt-in base map: CARTO's public "Positron" vector style (no key). pydeck names it ("carto", "light").
BASEMAP = {"provider": "carto", "style": "light",
           "caption": "Base map: CARTO Positron vector tiles (© CARTO, © OpenStreetMap contributors). With it on, "
                      "your browser loads the style and tiles from CARTO's servers, which see your IP address; "
                      "offline, the map is drawn without it."}
TOOLTIP_STYLE = {"backgroundColor": "#1b1f24", "color": "white", "fontSize": "13px", "lineHeight": "1.35",
                 # centred under the pointer (CSS `translate` adds to deck.gl's own `transform`): cut at an edge
                 # only within ~103 px of it (a fifth of the map at 1024×768), instead of anywhere in the right
                 # 206 px; long lines wrap
                 "translate": "-50% 18px",
                 "maxWidth": "190px", "whiteSpace": "pre-line", "padding": "6px 8px", "borderRadius": "4px"}
ORIGIN_RGB = list(figures.ORIGIN_RGB)
DESTINATION_RGB = list(figures.DESTINATION_RGB)


def deck(layers: list, vs: pdk.ViewState, tooltip: bool = True, height: int = 560, *,
         basemap: bool = False, frozen: bool = False, fit=None) -> pdk.Deck:
    """A deck with no base map (nothing fetched from outside) unless ``basemap``; tooltips show each object's
    ``tip`` field as plain text. ``fit``: the box ``[lon_min, lat_min, lon_max, lat_max, pad_px]`` the map element
    fits its first view to at the element's real width and height (else the view is ``vs``)."""
    tip = {"text": "{tip}", "style": TOOLTIP_STYLE} if tooltip else False
    kw = ({"map_provider": BASEMAP["provider"], "map_style": BASEMAP["style"]} if basemap
          else {"map_provider": None})   # map_style stays pydeck's placeholder: no style at all
    return (FrozenDeck if frozen else CompactDeck)(layers=layers, initial_view_state=vs, tooltip=tip, height=height,
                                                   fit=fit, **kw)


def layer_rows(df: pd.DataFrame, columns: dict[str, str], digits: int = DIGITS) -> list[dict]:
    """The rows a layer draws, as the records sent to the browser: only ``columns`` (``{name sent: column}``), float
    columns rounded to ``digits`` decimals. Everything else of a frame stays on the server: the whole deck is sent
    again (and parsed again by the browser) on every rerun that changes it."""
    values = []
    for col in columns.values():
        v = df[col]
        values.append((v.round(digits) if v.dtype.kind == "f" else v).tolist())   # Python floats, ints, bools
    names = list(columns)
    return [dict(zip(names, row, strict=True)) for row in zip(*values, strict=True)]   # 5x DataFrame.to_dict's speed


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
    import shapely

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


def _alpha_expr(rgb) -> str:
    """deck.gl expression of an arc end's colour: ``rgb`` with the opacity of the row's weight ``f``."""
    return "[{}, {}, {}, {} + {} * f]".format(*rgb, *ALPHA)


def arc_layer(flows: pd.DataFrame, *, layer_id: str = "flows", pickable: bool = True) -> pdk.Layer:
    """Two-tone arcs: origin end orange, destination end purple (:data:`odcore.report.figures.ORIGIN_RGB`); a constant
    tilt leans every arc to one side of its direction, so A→B and B→A do not overlap."""
    cols = {**FLOW_POSITIONS, "f": "f", **({"tip": "tip"} if pickable else {})}
    return pdk.Layer("ArcLayer", data=layer_rows(flows, cols), id=layer_id, get_source_position="[ox, oy]",
                     get_target_position="[dx, dy]", get_source_color=_alpha_expr(ORIGIN_RGB),
                     get_target_color=_alpha_expr(DESTINATION_RGB), get_width=f"{WIDTH[0]} + {WIDTH[1]} * f",
                     get_tilt=25, width_min_pixels=1.5, width_max_pixels=14, num_segments=ARC_SEGMENTS,
                     pickable=pickable, auto_highlight=pickable, great_circle=False)


def line_layer(flows: pd.DataFrame, color: list, *, layer_id: str, width: float = 1.5) -> pdk.Layer:
    return pdk.Layer("LineLayer", data=layer_rows(flows, {**FLOW_POSITIONS, "tip": "tip"}), id=layer_id,
                     get_source_position="[ox, oy]", get_target_position="[dx, dy]", get_color=color, get_width=width,
                     width_min_pixels=1, pickable=True, auto_highlight=True)


# The words the maps' tooltips and their legends share, so that the legend names what a tooltip shows the same way
# (tests/app/test_app_maps.py reads both): every area is a "zone" (a grid square, a hexagon or a zone of a file), its
# shade the chance that at least one flow leaving it is published.
ZONE = "zone"
ZONE_SHADE = "chance at least one flow leaving is published"
PLACE_TOTALS = "people leaving, arriving, within"
SUPPRESSED_WORDS = "suppressed, never published"


def zone_label(cell, name=None) -> str:
    """``"zone 12"``, or the zone's name with its id (``"District 03 (zone 2)"``) when the zones have names."""
    return f"{ZONE} {cell}" if name is None or name != name else f"{name} ({ZONE} {cell})"


def flow_tip(origin, destination, o_lat, o_lon, d_lat, d_lon, true_count, noisy_count, release_prob,
             released, o_name=None, d_name=None) -> list[str]:
    """Plain-text tooltip lines of each flow (no markup: see :func:`deck`); zone names when given. A zone's label
    and centre are written once per zone, however many flows it has."""
    o_name = [None] * len(origin) if o_name is None else o_name
    d_name = [None] * len(origin) if d_name is None else d_name
    ends: dict = {}

    def end(cell, name, lat, lon):
        k = (cell, lat, lon, name)
        if k not in ends:
            ends[k] = (zone_label(cell, name), coord(lat, lon))
        return ends[k]

    out = []
    for a, b, ola, olo, dla, dlo, tc, nc, p, r, na, nb in zip(origin, destination, o_lat, o_lon, d_lat, d_lon,
                                                               true_count, noisy_count, release_prob, released,
                                                               o_name, d_name, strict=True):
        (la, ca), (lb, cb) = end(a, na, ola, olo), end(b, nb, dla, dlo)
        noisy = "–" if nc != nc else num(round(float(nc), 1))
        out.append(f"{la} → {lb}\nfrom {ca}\nto {cb}\ntrue count: {num(int(tc))} people\nnoisy count: {noisy} "
                   f"({'published' if r else 'suppressed'})\nrelease probability: {p:.3f}")
    return out


def count_range(values: np.ndarray) -> tuple[float, float]:
    """``(low, high)`` of the drawn counts, low < high (so a legend never reads backwards)."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if not len(v):
        return 0.0, 1.0
    lo, hi = float(v.min()), float(v.max())
    return (lo, hi) if hi > lo else (lo, lo + 1.0)


def select_flows(table: pd.DataFrame, *, value: str, keep: np.ndarray, top_n: int, min_count: float,
                 cell: int | None = None) -> pd.DataFrame:
    """The ``top_n`` rows of ``table`` (where ``keep``, ``value >= min_count``, touching ``cell`` if given)."""
    m = keep & (table[value].to_numpy() >= min_count)
    if cell is not None:
        m &= (table["origin"].to_numpy() == cell) | (table["destination"].to_numpy() == cell)
    t = table.loc[m]
    return t.nlargest(int(top_n), value) if len(t) > top_n else t.sort_values(value, ascending=False)


def flows_frame(t: pd.DataFrame, centroids: pd.DataFrame, *, value: str,
                color_range: tuple[float, float]) -> pd.DataFrame:
    """Arc rows of the selected pairs ``t`` (from :func:`select_flows`): positions, the weight ``f`` of ``value`` in
    ``color_range`` (0 to 1: :func:`arc_layer` computes each arc's width and opacity from it in the browser) and a
    plain-text tooltip (cells, their centres, true and noisy count, release probability). A cell missing from
    ``centroids`` gets NaN positions."""
    cells = centroids["cell"].to_numpy()
    lat, lon = centroids["lat"].to_numpy(dtype=float), centroids["lon"].to_numpy(dtype=float)
    names = centroids["name"].to_numpy(dtype=object) if "name" in centroids.columns else None
    order = np.argsort(cells, kind="stable")

    def at(ids: np.ndarray):   # each id's row in centroids (ids are unique there), and whether it is there
        if not len(cells):
            return np.zeros(len(ids), dtype=np.int64), np.zeros(len(ids), dtype=bool)
        row = order[np.searchsorted(cells, ids, sorter=order).clip(max=len(cells) - 1)]
        return row, cells[row] == ids

    origin, destination = t["origin"].to_numpy(), t["destination"].to_numpy()
    (oi, ok_o), (di, ok_d) = at(origin), at(destination)
    o_lat, o_lon = np.where(ok_o, lat[oi], np.nan), np.where(ok_o, lon[oi], np.nan)
    d_lat, d_lon = np.where(ok_d, lat[di], np.nan), np.where(ok_d, lon[di], np.nan)
    true_count, noisy_count = t["true_count"].to_numpy(), t["noisy_count"].to_numpy()
    release_prob, released = t["release_prob"].to_numpy(), t["released"].to_numpy()
    count = t[value].to_numpy(dtype=float)
    lo, hi = color_range
    f = np.clip((count - lo) / (hi - lo), 0, 1) if hi > lo else np.ones(len(count))
    tip = flow_tip(origin.tolist(), destination.tolist(), o_lat.tolist(), o_lon.tolist(), d_lat.tolist(),
                   d_lon.tolist(), true_count.tolist(), noisy_count.tolist(), release_prob.tolist(),
                   released.tolist(), *(None, None) if names is None else
                   (np.where(ok_o, names[oi], None).tolist(), np.where(ok_d, names[di], None).tolist()))
    return pd.DataFrame({
        "origin": origin, "destination": destination, "true_count": true_count, "noisy_count": noisy_count,
        "release_prob": release_prob, "released": released, "o_lat": o_lat, "o_lon": o_lon, "d_lat": d_lat,
        "d_lon": d_lon, "count": count, "f": f, "tip": tip})


# A release map cell's fill: figures.mix(CELL_LOW_RGB, CELL_HIGH_RGB, value), as a deck.gl expression of ``value``.
CELL_COLOR = "[{}, {}, {}, 170]".format(*(f"{a} {'+' if b >= a else '-'} {abs(b - a)} * value" for a, b in
                                            zip(figures.CELL_LOW_RGB, figures.CELL_HIGH_RGB, strict=True)))


def cells_base(shapes: pd.DataFrame, cell_p: pd.DataFrame, centroids: pd.DataFrame) -> pd.DataFrame:
    """The part of :func:`cells_frame` that ε, the threshold and the seed do not change (made once per week):
    each cell's outline (rounded to :data:`DIGITS` decimals), centre, observed pairs and the tooltip's first lines
    (``head``). A zone is named as the flows name it (``centroids``' names, :func:`odapp.cache.used_centroids`: none
    for grid squares), never by the grid's own row/column label."""
    if "name" in shapes.columns:
        shapes = shapes.drop(columns="name")
    df = shapes.merge(cell_p[["cell", "pairs"]], on="cell").merge(centroids, on="cell", how="left")
    names = df["name"].tolist() if "name" in df.columns else [None] * len(df)
    df["polygon"] = [np.round(np.asarray(q, dtype=float), DIGITS).tolist() for q in df["polygon"].tolist()]
    df["head"] = [f"{zone_label(c, nm)}\ncentre {coord(la, lo)}\n{num(int(n))} outgoing pairs observed\n"
                  for c, nm, la, lo, n in zip(df["cell"].tolist(), names, df["lat"].tolist(), df["lon"].tolist(),
                                              df["pairs"].tolist(), strict=True)]
    return df


def cells_frame(base: pd.DataFrame, cell_p: pd.DataFrame) -> pd.DataFrame:
    """Cell polygons (``base``: :func:`cells_base`) shaded by the chance that at least one flow leaving the cell is
    published (``value``; the colour :data:`CELL_COLOR` is computed in the browser), with a tooltip (``tip``)."""
    p = cell_p.set_index("cell")["release_prob_any"].reindex(base["cell"].to_numpy()).to_numpy(dtype=float)
    # the shade's number to the tooltip's three decimals: the same colour to the eye, fewer characters to send
    df = base.drop(columns="head").assign(release_prob_any=p, value=np.round(np.clip(p, 0, 1), 3))
    df["tip"] = [f"{h}{ZONE_SHADE}: {q:.3f}" for h, q in zip(base["head"].tolist(), p.tolist(), strict=True)]
    return df


# Zones shaded by the attack success on the people starting a trip there: pale yellow (a coin flip) to dark purple.
RISK_LOW_RGB = (250, 240, 200)
RISK_HIGH_RGB = (120, 30, 110)
RISK_COLOR = "[{}, {}, {}, 180]".format(*(f"{a} {'+' if b >= a else '-'} {abs(b - a)} * value" for a, b in
                                          zip(RISK_LOW_RGB, RISK_HIGH_RGB, strict=True)))


def risk_cells_frame(cells: pd.DataFrame, zone_risk: pd.DataFrame) -> pd.DataFrame:
    """The release map's cells (:func:`cells_frame`) shaded instead by the attack success on the people who start a
    trip there (``zone_risk``: :func:`odcore.privacy.attack.risk_by_origin`): ``value`` = (median − ½)/½, so a
    coin flip is 0 and certainty 1; the tooltip gains the people, their median and highest success."""
    r = zone_risk.set_index("origin").reindex(cells["cell"].to_numpy())
    med = r["median"].to_numpy(dtype=float)
    df = cells.assign(value=np.nan_to_num(np.clip((med - 0.5) / 0.5, 0, 1)))
    extra = [f"\npeople starting a trip here: {num(int(n))}\nattacker's success on them: median {m:.0%}, highest "
             f"{x:.0%} (50% = a coin flip)" if n == n and n > 0 else "\nnobody starts a trip here this week"
             for n, m, x in zip(r["people"].tolist(), med.tolist(), r["max"].tolist(), strict=True)]
    df["tip"] = [t + e for t, e in zip(cells["tip"].tolist(), extra, strict=True)]
    return df


def scale_bar(lat: np.ndarray, lon: np.ndarray, km: float | None = None) -> tuple[list[list[float]], list[float], float]:
    """A scale bar anchored in the map (it grows and shrinks with the zoom, so it stays true): a path under the
    bottom-left of the data and where its label goes. Returns ``(path, label_position, km)`` (lists of [lon, lat]);
    ``km``: its length (default: about a fifth of the data's width, :func:`odcore.report.figures.nice_km`)."""
    lat = np.asarray(lat, float)
    lon = np.asarray(lon, float)
    la0, la1 = np.nanpercentile(lat, [0.5, 99.5])
    lo0, lo1 = np.nanpercentile(lon, [0.5, 99.5])
    kx = figures.km_per_deg_lon(float(la0))
    km = figures.nice_km(max((lo1 - lo0) * kx, 0.5)) if km is None else float(km)
    y = float(la0 - 0.06 * max(la1 - la0, 0.005))
    dy = 0.012 * max(la1 - la0, 0.005)
    x0, x1 = float(lo0), float(lo0 + km / kx)
    return [[x0, y + dy], [x0, y], [x1, y], [x1, y + dy]], [(x0 + x1) / 2, y + 1.2 * dy], km


def scale_bar_layers(lat: np.ndarray, lon: np.ndarray, *, label: bool = True,
                     bar: tuple | None = None) -> list[pdk.Layer]:
    """The scale bar (three straight segments: a LineLayer, the kind the cell outlines use) and, with ``label``, its
    "5 km" text in the map (``bar``: :func:`scale_bar` of ``lat, lon`` if already made).

    Each kind of layer is one more shader program that a browser without a GPU compiles before the map's first
    frame (software WebGL: about 0.5 s each, measured on the OD release map): the release map states the bar's length
    in its legend instead (:func:`flow_legend_html`), and draws no text layer."""
    path, at, km = scale_bar(lat, lon) if bar is None else bar
    p = np.round(np.asarray(path, dtype=float), DIGITS).tolist()
    layers = [pdk.Layer("LineLayer", data=[{"s": a, "t": b} for a, b in itertools.pairwise(p)], id="scale_bar",
                        get_source_position="s", get_target_position="t", get_color=SCALE_BAR_RGBA, get_width=3,
                        pickable=False)]
    if label:
        layers.append(pdk.Layer("TextLayer", data=[{"position": at, "text": f"{km:g} km", "tip": ""}],
                                id="scale_label", get_position="position", get_text="text", get_size=15,
                                get_color=[27, 31, 36, 255], get_text_anchor="'middle'",
                                get_alignment_baseline="'bottom'", font_family="'DejaVu Sans', Arial, sans-serif",
                                font_weight=600, pickable=False))
    return layers


SCALE_BAR_RGBA = [27, 31, 36, 255]
SCALE_BAR_PX = 3.0   # the bar's thickness at the first view


def scale_bar_polygon_layer(bar: tuple, km_per_px: float, width_px: float = SCALE_BAR_PX) -> pdk.Layer:
    """The scale bar (``bar``: :func:`scale_bar`) as three thin filled rectangles, ``width_px`` thick at a view of
    ``km_per_px``: the same picture as :func:`scale_bar_layers`' line segments, drawn by the PolygonLayer the zones,
    places and arrows use (no second shader program). Like the bar itself, its thickness is in the map's units: it
    grows and shrinks with the zoom."""
    path = np.asarray(bar[0], dtype=float)
    lat = float(path[:, 1].mean())
    hx = width_px / 2 * km_per_px / figures.km_per_deg_lon(lat)      # half the thickness, in degrees
    hy = width_px / 2 * km_per_px / figures.KM_PER_DEG_LAT
    rows = []
    for (x0, y0), (x1, y1) in itertools.pairwise(path.tolist()):
        a0, a1, b0, b1 = min(x0, x1) - hx, max(x0, x1) + hx, min(y0, y1) - hy, max(y0, y1) + hy
        rows.append({"polygon": np.round([[a0, b0], [a1, b0], [a1, b1], [a0, b1]], DIGITS).tolist()})
    return pdk.Layer("PolygonLayer", data=rows, id="scale_bar", get_polygon="polygon", get_fill_color=SCALE_BAR_RGBA,
                     stroked=False, filled=True, pickable=False)


def ramp_stops() -> list[tuple[float, str]]:
    """:data:`RAMP` as ``(position in [0, 1], CSS colour)`` stops, low to high: the legends' gradient and plotly's
    ``colorscale`` for a chart in the maps' colours."""
    return [(k / (len(RAMP) - 1), f"rgb({r:.0f},{g:.0f},{b:.0f})") for k, (r, g, b) in enumerate(RAMP)]


def legend_html(title: str, vmin: float, vmax: float, fmt: str = "{:,.0f}", note: str = "") -> str:
    """A horizontal colour-bar legend (HTML) matching :func:`ramp`; low on the left, high on the right."""
    vmin, vmax = min(vmin, vmax), max(vmin, vmax)
    stops = ", ".join(f"{c} {100 * f:.0f}%" for f, c in ramp_stops())
    return (f"<div style='font-size:0.95rem;margin:0.2rem 0 0.4rem 0'><b>{title}</b>"
            f"<div style='display:flex;align-items:center;gap:0.5rem;flex-wrap:wrap'><span>{fmt.format(vmin)}</span>"
            f"<div style='flex:0 0 200px;height:12px;border-radius:3px;background:linear-gradient(to right,{stops})'>"
            f"</div><span>{fmt.format(vmax)}</span><span style='color:#333'>{note}</span></div></div>")


def flow_legend_html(fm: FlowMap, *, heading: str = "", note: str = "") -> str:
    """The release map's legend in words a teacher can read aloud, in three short lines: what is drawn at which
    level; the arrows' count classes; the places, the zones' shading, the suppressed flows (when drawn) and the
    scale; ``note``: a last line in grey (what to do with the map), in the same element: one element fewer on
    every rerun than a caption of its own."""
    c0 = "rgb({},{},{})".format(*figures.CELL_LOW_RGB)
    c1 = "rgb({},{},{})".format(*figures.CELL_HIGH_RGB)
    r0, r1 = "rgb({},{},{})".format(*RISK_LOW_RGB), "rgb({},{},{})".format(*RISK_HIGH_RGB)
    sw = "display:inline-block;vertical-align:middle;margin:0 3px"
    top = (([f"<b>{heading}</b>"] if heading else []) + [f"<span>{fm.level}</span>"]
           + ([f"<b style='color:#8a1c1c'>{ANALYSIS_WORDS}</b>"] if fm.analysis else []))
    classes = "".join(
        f"<span style='white-space:nowrap'><span style='{sw};width:20px;height:{max(2, round(w))}px;"
        f"background:rgb({r},{g},{b})'></span>{lab}</span> "
        for (r, g, b), w, lab in zip(FLOW_CLASS_RGB, CLASS_WIDTH_PX, fm.class_labels, strict=False))
    mid = ([f"<span>arrows, origin to head, wider and darker = more {fm.count_label}: {classes}</span>"]
           if fm.published_drawn != 0 else ["<span><b>Nothing published at these settings</b>: no flow to draw "
                                            "(a lower threshold or a larger ε publishes more)</span>"])
    low = [f"<span><span style='{sw};width:10px;height:10px;border-radius:50%;background:#fff;"
           "border:1.5px solid rgb({},{},{})'></span>place: {}</span>".format(*LOCATION_RGB, PLACE_TOTALS),
           f"<span><span style='{sw};width:14px;height:10px;border:1px solid #999;background:rgb"
           f"{tuple(figures.ZONE_RGB)}'></span>{figures.ZONE_WORDS}</span>" if fm.zones_published else
           f"<span>{ZONE}s <span style='{sw};width:30px;height:10px;border:1px solid #999;"
           f"background:linear-gradient(to right,{c0},{c1})'></span>{ZONE_SHADE}, 0 to 1</span>" if not fm.risk else
           f"<span>{ZONE}s <span style='{sw};width:30px;height:10px;border:1px solid #999;"
           f"background:linear-gradient(to right,{r0},{r1})'></span>per-person risk: the median chance that an "
           "attacker who knows everyone else's data and a person's trips tells whether a person starting a trip "
           "here is in the data, 50% (a coin flip) to 100%</span>"]
    if fm.n_suppressed:
        low.append(f"<span><span style='{sw};width:20px;height:2px;background:rgb({SUPPRESSED_RGB[0]},"
                   f"{SUPPRESSED_RGB[1]},{SUPPRESSED_RGB[2]})'></span>thin grey: {num(fm.n_suppressed)} flows "
                   f"{SUPPRESSED_WORDS} ({num(round(fm.suppressed_total))} people)</span>")
    if fm.km:
        low.append(f"<span>scale bar {fm.km:g} km</span>")
    if fm.context:
        low.append(f"<span>base: {fm.context}</span>")
    row = "<div style='display:flex;flex-wrap:wrap;gap:0 0.9rem'>{}</div>"
    tail = f"<div style='color:#5c6370;font-size:0.8rem'>{note}</div>" if note else ""
    return ("<div style='font-size:0.85rem;line-height:1.45;color:#1b1f24;margin:0 0 0.1rem 0'>"
            + "".join(row.format("".join(p)) for p in (top, mid, low)) + tail + "</div>")


SUPPRESSED_RGB = list(figures.SUPPRESSED_RGB)
VIEWS = ("Published", "Raw counts", "Side by side")
LEVELS = ("Auto", "Zones")   # Auto merges nearby zones when the largest flows are too short to read
# The flows' count classes, light to dark (ColorBrewer OrRd), and their widths in px at the first view.
FLOW_CLASS_RGB = figures.FLOW_CLASS_RGB
CLASS_WIDTH_PX = figures.FLOW_CLASS_WIDTH_PX
CLASS_ALPHA = figures.FLOW_CLASS_ALPHA   # small flows fade back: the structure first
LOCATION_RGB = figures.LOCATION_RGB
SUPPRESSED_WIDTH_PX = 1.3
MAP_WIDTH_PX = 580   # the narrowest map the page draws (a 1024 px window with the sidebar open): the first view fits it


WATER_RGBA = [*figures.WATER_RGB, 255]   # water: a pale blue under the zones (as in the exported image)
FIXES_GREY = 40                       # the fixes' image: one dark grey, its opacity by density
FIXES_MAX_ALPHA = 150
FIXES_WIDTH_PX = 1024                 # the fixes' image: pixels across the zones' box and its margin


@dataclass(frozen=True, eq=False)
class MapContext:
    """A map's offline base layer (:func:`map_context`): ``under`` the zones (water), ``over`` their fill and under
    their outlines, places and flows (the fixes' image), and the legend's line about it (``words``, empty when
    nothing is drawn). Its layers are :class:`EncodedLayer`s, shared by every deck of a dataset."""

    under: tuple = ()
    over: tuple = ()
    words: str = ""


def map_context(zbox: tuple[tuple[float, float], tuple[float, float]], lon=None, lat=None, *,
                pad: float = 0.25, fixes=None) -> MapContext:
    """The offline base layer round the zones' box ``zbox`` (:func:`zones_box`): water from the bundled Natural
    Earth coastline (:func:`odcore.report.basemap.water_rings`) over the box and a margin three times its size on
    every side (the widest window, and room to pan), and, when the traces' fixes ``lon, lat`` are given, an image of how many fixes fall on each
    spot (:func:`odcore.space.density.fix_density`; on dense GPS, the streets the traces run on) over the box and
    ``pad`` of it on every side. The image goes to the browser inside the map's JSON (a ``data:`` URL): nothing is
    fetched. ``fixes(box, width_px)``, in place of ``lon, lat``, gives that image's counts itself (a streamed folder:
    :func:`odcore.od.engines.cab_stream.fix_density_cabspotting`)."""
    import base64

    from odcore.report import basemap
    from odcore.space.density import fix_density

    (lo0, lo1), (la0, la1) = zbox
    dx, dy = max(lo1 - lo0, 1e-3), max(la1 - la0, 1e-3)
    under, over, words = [], [], []
    m = 3 * max(dx, dy)   # a wide window shows far more than the zones' box: water to its edges, white = land
    water = basemap.water_rings(lo0 - m, lo1 + m, la0 - m, la1 + m, tolerance=max(dx, dy) / 2000)
    if water:
        under.append(EncodedLayer(pdk.Layer(
            "PolygonLayer", data=[{"polygon": w} for w in water], id="water", get_polygon="polygon",
            get_fill_color=WATER_RGBA, stroked=False, filled=True, pickable=False)))
        words.append(f"<span style='display:inline-block;vertical-align:middle;margin:0 3px;width:14px;height:10px;"
                     f"background:rgb({WATER_RGBA[0]},{WATER_RGBA[1]},{WATER_RGBA[2]})'></span>water "
                     f"(Natural Earth coastline, ± a few hundred m)")
    if fixes is not None or (lon is not None and len(lon)):
        box = (lo0 - pad * dx, la0 - pad * dy, lo1 + pad * dx, la1 + pad * dy)
        counts = (fixes(box, FIXES_WIDTH_PX) if fixes is not None
                  else fix_density(lon, lat, box, FIXES_WIDTH_PX))
        png = basemap.png_grey_alpha(basemap.density_alpha(counts, FIXES_MAX_ALPHA), FIXES_GREY)
        if counts.any():
            over.append(EncodedLayer(pdk.Layer(
                "BitmapLayer", id="fixes",   # quoted: pydeck sends a quoted string as it is, not as an expression
                image="'data:image/png;base64," + base64.b64encode(png).decode("ascii") + "'",
                bounds=[round(v, DIGITS) for v in box], pickable=False)))
            words.append(f"<span style='display:inline-block;vertical-align:middle;margin:0 3px;width:14px;"
                         f"height:10px;background:repeating-linear-gradient(90deg,rgba({FIXES_GREY},{FIXES_GREY},"
                         f"{FIXES_GREY},0.6) 0 1px,transparent 1px 3px)'></span>grey texture: where the data's "
                         "GPS fixes lie (on taxi traces, the streets)")
    return MapContext(tuple(under), tuple(over), " · ".join(words))


@dataclass(frozen=True)
class FlowMap:
    """One drawn flow map: its heading, deck, the flows drawn (``flows``: positions, ``count``, ``cls``,
    ``released``, tooltip), the locations (``locations``: ``lon, lat, total, r`` with ``r`` in px), the count classes
    (``class_edges``) and the level shown, in words."""

    heading: str
    deck: pdk.Deck
    flows: pd.DataFrame
    count_label: str
    lo: float
    hi: float
    km: float
    suppressed: bool = False
    locations: pd.DataFrame | None = None
    class_edges: tuple = ()
    level: str = ""
    n_suppressed: int = 0
    suppressed_total: float = 0.0
    level_short: str = ""
    context: str = ""
    risk: bool = False
    zones_published: bool = False     # zones drawn: those of published pairs, all alike (not shaded from true counts)
    analysis: bool = False            # drawn from true counts (raw counts, suppressed flows): for the lab only
    published_drawn: int = -1         # published flows drawn (-1: not a published view)

    @property
    def class_labels(self) -> list[str]:
        e = self.class_edges
        return [f"{num(round(a))}–{num(round(b))}" for a, b in itertools.pairwise(e)]


def cell_layers(cells_df: pd.DataFrame, edges: np.ndarray | Inset | None = None, *, encoded: bool = False,
                outline: str = "lines", color: str = CELL_COLOR) -> list:
    """The release map's cells (shaded by ``value`` as ``color`` says: :data:`CELL_COLOR`, or :data:`RISK_COLOR`
    for :func:`risk_cells_frame`, with their tooltips) and where they meet (``outline``, see :func:`grid_layers`);
    with ``encoded``, as :class:`EncodedLayer`s (for a cache that shares them between decks)."""
    layers = grid_layers(cells_df, color, layer_id="cells", columns=("value",), edges=edges, outline=outline)
    return [EncodedLayer(x) for x in layers] if encoded else layers


def _location_label(members: list, names: dict) -> str:
    head = zone_label(members[0], names.get(members[0]))
    return head if len(members) == 1 else f"{len(members)} {ZONE}s around {head}"


SHAPE_DIGITS = 4   # decimals of the arrows' and circles' outlines: 1e-4° ≈ 10 m, a tenth of a pixel at a first view


def _ring_rows(polys: np.ndarray, proj) -> list:
    lon, lat = proj.lonlat(polys[..., 0], polys[..., 1])
    return np.round(np.stack([lon, lat], axis=-1), SHAPE_DIGITS).tolist()


def zones_box(polygons: list) -> tuple[tuple[float, float], tuple[float, float]]:
    """``((lon_min, lon_max), (lat_min, lat_max))`` of the zones' outlines: the whole box for up to 500 zones, else
    the 0.5th to 99.5th percentile of their corners (a stray zone far out does not shrink the map)."""
    if not polygons:
        return (0.0, 0.0), (0.0, 0.0)
    a = np.asarray(list(itertools.chain.from_iterable(polygons)), dtype=float).reshape(-1, 2)
    q = (0, 100) if len(polygons) <= 500 else (0.5, 99.5)
    lo, la = np.nanpercentile(a[:, 0], q), np.nanpercentile(a[:, 1], q)
    return (float(lo[0]), float(lo[1])), (float(la[0]), float(la[1]))


def release_maps(table: pd.DataFrame, centroids: pd.DataFrame, cells_df: pd.DataFrame, *, view: str, top_n: int,
                 min_count: float, threshold: float, cell: int | None = None, show_suppressed: bool = False,
                 basemap: bool = False, height: int = 460, frozen: bool = False,
                 edges: np.ndarray | Inset | None = None, base_layers: list | None = None,
                 level: str = "Auto", width: int = MAP_WIDTH_PX,
                 context: MapContext | None = None, risk: bool = False) -> list[FlowMap]:
    """The OD release page's map(s): "Published" (noisy counts of the published pairs), "Raw counts" (true counts
    of every observed pair) or "Side by side" (what suppression removes next to what is published).
    ``top_n`` 0: "auto", as many of the largest pairs of places as keep the map legible
    (:func:`odcore.report.flows.auto_top`); the legend says how many of how many are drawn.

    Flat and fitted: the first view holds the zones that carry what is drawn and every drawn place and flow, in a
    map ``width`` × ``height`` px (:func:`odcore.report.flows.fit_view`); zones with nothing drawn may lie outside
    it (a taxi week's stray zones far out would otherwise shrink the city to a few dozen px). What is drawn comes from :func:`odcore.report.flows.flow_picture`:
    with ``level`` "Auto", nearby zones are merged into places when the largest flows would be too short to read;
    "Zones" never merges (nor does a one-cell view). Flows are curved arrows (:func:`odcore.report.flows.arrows`)
    in four count classes (width and colour), over white circles sized by each place's total; suppressed flows
    thin and grey. ``base_layers``: :func:`cell_layers` of ``cells_df`` made beforehand (shared by every seed's
    map); ``context``: the offline base layer (:func:`map_context`), water under the zones and the fixes' image
    over their fill; ``risk``: the zones in ``base_layers`` are shaded by the attack success on their people
    (:func:`risk_cells_frame`), which the legend then says."""
    from odcore.report import flows as fl

    released = table["released"].to_numpy(dtype=bool)
    everything = np.ones(len(table), dtype=bool)
    base = cell_layers(cells_df, edges) if base_layers is None else base_layers
    names = (dict(zip(centroids["cell"].tolist(), centroids["name"].tolist(), strict=True))
             if "name" in centroids.columns else {})
    w_px = width // 2 if view == "Side by side" else width

    pub_zones = None
    if view != "Raw counts" and not risk:   # the published view's zones: those of published pairs, all alike
        used = np.unique(np.r_[table["origin"].to_numpy()[released], table["destination"].to_numpy()[released]])
        pub_zones = published_zone_layers(cells_df, edges, used)

    def one(heading, value, keep, label, with_suppressed=False, *, on_places=False, draw_flows=True,
            draw_suppressed=True, analysis=False):
        pic = fl.flow_picture(table, centroids, value=value, keep=keep, top_n=top_n or None, min_count=min_count,
                              cell=cell, view_px=(w_px, height) if level == "Auto" else None,
                              with_suppressed=with_suppressed, suppressed_on_places=on_places)
        places, sel, sup, proj = pic.places, pic.flows, pic.suppressed, pic.proj
        if len(places):   # the first view: the zones that carry what is drawn (the others lie round it)
            lo0, lo1, la0, la1 = pic.box
        else:
            (lo0, lo1), (la0, la1) = zones_box(cells_df["polygon"].tolist())
        lx, ly = places["x"].to_numpy(), places["y"].to_numpy()
        llon, llat = places["lon"].to_numpy(), places["lat"].to_numpy()
        lab_of = [_location_label(mm, names) if mm else "" for mm in places["members"]]
        first = [mm[0] if mm else None for mm in places["members"]]
        edges_ = pic.class_edges
        cls = fl.classes(sel["count"].to_numpy(), edges_)
        # the first view: the zones and every drawn place and arrow, and the scale bar under them
        used = np.unique(np.r_[sel["o"].to_numpy(), sel["d"].to_numpy(),
                               *([sup["o"].to_numpy(), sup["d"].to_numpy()] if sup is not None else [])]).astype(int)
        bx0, bx1 = min([lo0, *llon[used].tolist()]), max([lo1, *llon[used].tolist()])
        by0, by1 = min([la0, *llat[used].tolist()]), max([la1, *llat[used].tolist()])
        bar_box = np.array([by0, by1]), np.array([bx0, bx1])
        bar = scale_bar(*bar_box)
        by0 = min(by0, bar[0][1][1])
        v1 = fl.fit_view(bx0, bx1, by0, by1, width_px=w_px, height_px=height, pad_px=34)
        fit = [bx0, by0, bx1, by1, 34]
        kpp = v1.km_per_px
        total = places["total"].to_numpy()
        tmax = float(total.max()) if len(total) and total.max() > 0 else 1.0
        r_px = 3.0 + (fl.place_radius_px(lx, ly, kpp) - 3.0) * np.sqrt(total / tmax)   # area ∝ total
        so, sd = sel["o"].to_numpy(), sel["d"].to_numpy()
        wpx = np.asarray(CLASS_WIDTH_PX)[cls]
        # no circle over an arrow: a circle in an arrow's way is drawn smaller (or not at all)
        r_px, polys = fl.clear_radii(lx, ly, r_px, lambda r: fl.arrows(
            lx[so], ly[so], lx[sd], ly[sd], wpx * kpp, gap0=(r[so] + 1.0) * kpp, gap1=(r[sd] + 1.0) * kpp,
            head_len=np.maximum(3.0 * wpx, 9.0) * kpp), kpp, least_px=2.5)
        if len(sel):   # the curves bulge: fit once more to what is drawn
            g_lon, g_lat = proj.lonlat(polys[..., 0], polys[..., 1])
            fit = [min(bx0, float(g_lon.min())), min(by0, float(g_lat.min())), max(bx1, float(g_lon.max())),
                   max(by1, float(g_lat.max())), 14]
            v1 = fl.fit_view(fit[0], fit[2], fit[1], fit[3], width_px=w_px, height_px=height, pad_px=14)
        flows = pd.DataFrame({
            "origin": [first[i] for i in so], "destination": [first[i] for i in sd],
            "o_lon": llon[so], "o_lat": llat[so], "d_lon": llon[sd], "d_lat": llat[sd],
            "count": sel["count"].to_numpy(float), "cls": cls, "true_count": sel["true_count"].to_numpy(float),
            "noisy_count": sel["noisy_count"].to_numpy(float), "release_prob": sel["p_max"].to_numpy(float),
            "released": sel["released"].to_numpy(bool), "pairs": sel["pairs"].to_numpy(int)})
        flows["polygon"] = _ring_rows(polys, proj)
        flows["color"] = [[*FLOW_CLASS_RGB[i], CLASS_ALPHA[i]] for i in cls.tolist()]
        flows["tip"] = [
            f"{lab_of[a]} → {lab_of[b]}\nfrom {coord(float(llat[a]), float(llon[a]))}\nto "
            f"{coord(float(llat[b]), float(llon[b]))}\n"
            + (f"{n} pairs of zones, summed\n" if n > 1 else "")
            + f"true count: {num(int(tc))} people\n"
            + (f"noisy count: {num(round(float(nc), 1))} (published)\n" if r else "noisy count: – (suppressed)\n")
            + (f"release probability: {p0:.3f}" if n == 1 else f"release probability: {p0:.3f} to {p1:.3f}")
            for a, b, n, tc, nc, r, p0, p1 in zip(so.tolist(), sd.tolist(), sel["pairs"].tolist(),
                                                  sel["true_count"].tolist(), sel["noisy_count"].tolist(),
                                                  sel["released"].tolist(), sel["p_min"].tolist(),
                                                  sel["p_max"].tolist(), strict=True)]
        zl = base if pub_zones is None else pub_zones
        layers = [*zl]
        if context is not None:
            layers = [*context.under, *zl[:1], *context.over, *zl[1:]]
        # places: white circles with a dark ring, sized by their totals (under the arrows)
        listed = np.flatnonzero(total > 0)                  # every place; drawn where its circle has room
        show = np.flatnonzero((total > 0) & (r_px > 0))
        ring = fl.circles(lx[show], ly[show], r_px[show] * kpp)
        inner = fl.circles(lx[show], ly[show], np.maximum(r_px[show] - 1.6, 0.8) * kpp)
        ltip = [f"place: {lab_of[i]}\n{label}: {num(round(a))} leaving, {num(round(b))} arriving, {num(round(w))} "
                f"within"
                for i, a, b, w in zip(show.tolist(), places["out"].to_numpy()[show].tolist(),
                                      places["in"].to_numpy()[show].tolist(),
                                      places["within"].to_numpy()[show].tolist(), strict=True)]
        lrows = pd.DataFrame({"polygon": _ring_rows(ring, proj) + _ring_rows(inner, proj), "tip": ltip + ltip,
                              "color": [[*LOCATION_RGB, 230]] * len(show) + [[255, 255, 255, 215]] * len(show)})
        layers.append(pdk.Layer("PolygonLayer", data=layer_rows(lrows, {"polygon": "polygon", "color": "color",
                                                                         "tip": "tip"}),
                                id="locations", get_polygon="polygon", get_fill_color="color",
                                stroked=False, filled=True, pickable=True, auto_highlight=True))
        if len(show):   # the largest places' names, under the arrows (an arrow is never hidden by a name)
            layers.append(place_label_layer(places["members"].iloc[show].tolist(), total[show], names,
                                            *proj.lonlat(lx[show] + (r_px[show] + 3.0) * kpp, ly[show])))
        n_sup, sup_total, sup_frame = 0, 0.0, None
        if sup is not None and len(sup):
            po, pd_ = sup["o"].to_numpy(), sup["d"].to_numpy()
            sp = fl.arrows(lx[po], ly[po], lx[pd_], ly[pd_], SUPPRESSED_WIDTH_PX * kpp, gap0=r_px[po] * kpp,
                           gap1=r_px[pd_] * kpp, head_len=7.0 * kpp, bend=0.3)
            sup_frame = pd.DataFrame({
                "origin": [first[i] for i in po], "destination": [first[i] for i in pd_],
                "o_lon": llon[po], "o_lat": llat[po], "d_lon": llon[pd_], "d_lat": llat[pd_],
                "count": sup["count"].to_numpy(float), "cls": -1, "true_count": sup["count"].to_numpy(float),
                "noisy_count": np.nan, "release_prob": sup["p"].to_numpy(float), "released": False,
                "pairs": sup["pairs"].to_numpy(int)})
            sup_frame["polygon"] = _ring_rows(sp, proj)
            sup_frame["tip"] = [f"{lab_of[a]} → {lab_of[b]}\n{SUPPRESSED_WORDS}\ntrue count: {num(int(t))} "
                                f"people\nrelease probability: at most {p:.3f}"
                                for a, b, t, p in zip(po.tolist(), pd_.tolist(), sup["count"].tolist(),
                                                      sup["p"].tolist(), strict=True)]
            if draw_suppressed:
                layers.append(pdk.Layer("PolygonLayer", data=layer_rows(sup_frame, {"polygon": "polygon",
                                                                                     "tip": "tip"}),
                                        id="suppressed", get_polygon="polygon",
                                        get_fill_color=[*SUPPRESSED_RGB, 170], stroked=False, filled=True,
                                        pickable=True, auto_highlight=True))
            n_sup, sup_total = len(sup_frame), float(sup_frame["count"].sum())
            if not draw_suppressed:
                sup_frame = None
        if draw_flows:
            layers.append(pdk.Layer("PolygonLayer", data=layer_rows(flows, {"polygon": "polygon", "color": "color",
                                                                             "tip": "tip"}),
                                    id="flows", get_polygon="polygon", get_fill_color="color", stroked=False,
                                    filled=True, pickable=True, auto_highlight=True))
        else:
            flows = flows.iloc[:0]
        # a fifth of what the view shows, not of the data: flows between a few places in a wide view (a city
        # beside a bay) had a bar of a few pixels
        if (km_view := figures.nice_km(v1.km_per_px * w_px)) > bar[2]:
            bar = scale_bar(*bar_box, km=km_view)
        layers.append(scale_bar_polygon_layer(bar, v1.km_per_px))
        if not len(flows) and sup_frame is None:   # an empty map says so where the flows would be
            note = "Nothing published at these settings" if value == "noisy_count" else "No flow to draw"
            layers.append(pdk.Layer("TextLayer", data=[{"position": [(fit[0] + fit[2]) / 2, (fit[1] + fit[3]) / 2],
                                                        "text": note}], id="empty_note", get_position="position",
                                    get_text="text", get_size=16, get_color=[92, 99, 112, 255],
                                    get_text_anchor="'middle'", get_alignment_baseline="'center'",
                                    font_family="'DejaVu Sans', Arial, sans-serif", font_weight=600, pickable=False))
        words = pic.level_words() + f" · {pic.shown_words()}" + (" (Top N: auto)" if pic.auto_top else "")
        vs = pdk.ViewState(latitude=v1.lat, longitude=v1.lon, zoom=v1.zoom, pitch=0, bearing=0)
        all_flows = flows if sup_frame is None else pd.concat([flows, sup_frame], ignore_index=True)
        lo, hi = float(edges_[0]), float(edges_[-1])
        n_pub = int(flows["released"].sum()) if value == "noisy_count" else -1
        return FlowMap(heading, deck(layers, vs, height=height, basemap=basemap, frozen=frozen, fit=fit), all_flows,
                       label,
                       lo, hi, bar[2], sup_frame is not None,
                       pd.DataFrame({"lon": llon[listed], "lat": llat[listed], "total": total[listed],
                                     "r": r_px[listed]}),
                       tuple(edges_.tolist()), words, n_sup, sup_total, pic.level_words(short=True),
                       context.words if context is not None else "", risk, pub_zones is not None,
                       analysis or risk or sup_frame is not None, n_pub)

    if view == "Raw counts":
        return [one(f"{ANALYSIS_WORDS}: raw counts, never published", "true_count", everything, "true count",
                    analysis=True)]
    published_label = f"Published: noisy count ≥ {threshold:g}"
    if view == "Side by side":
        # the same places, level and view on both: the published flows' (suppressed flows between them on the left);
        # with nothing published, the suppressed flows' own places on both (the right map then shows no flow)
        on = bool(released.any())
        left = one("Suppressed: never published (grey)", "noisy_count", released,
                   "noisy count", with_suppressed=True, on_places=on, draw_flows=False, analysis=True)
        right = one(published_label, "noisy_count", released, "noisy count", with_suppressed=True, on_places=on,
                    draw_suppressed=False, analysis=True)   # one legend, under both: the pair is an analysis view
        return [left, right]
    return [one(published_label, "noisy_count", released, "noisy count", with_suppressed=show_suppressed)]


ANALYSIS_WORDS = "Analysis (true counts, do not share)"
PLACE_LABEL_PX = 12
H3_INDEX = re.compile(r"[0-9a-f]{15}")   # an H3 cell's index (the "name" H3 zones carry in tooltips)


def place_label_layer(members: list, totals: np.ndarray, names: dict, lon: np.ndarray, lat: np.ndarray) -> pdk.Layer:
    """The largest places' names on the map (:data:`odcore.report.figures.PLACE_LABELS` of them, as the exported
    map): a zone file's names (:func:`odcore.report.figures.place_label`), else numbers, largest place first.
    Each is drawn right of its circle (``lon, lat``: the label's left end) where it meets no other label. H3
    hexagons are numbered too: their index is no name to read aloud."""
    totals = np.asarray(totals, dtype=float)
    order = np.argsort(-totals, kind="stable")[:figures.PLACE_LABELS]
    labels = [figures.place_label(members[i], names)[:24] for i in order.tolist()]
    if not any(labels) or all(H3_INDEX.fullmatch(t.split(" + ")[0]) for t in labels if t):   # an H3 index is no name
        labels = [str(k + 1) for k in range(len(order))]
    rows = [{"position": [round(float(lon[i]), SHAPE_DIGITS), round(float(lat[i]), SHAPE_DIGITS)], "text": t}
            for i, t in zip(order.tolist(), labels, strict=True) if t]
    return pdk.Layer("TextLayer", data=rows, id="place_labels", get_position="position", get_text="text",
                     get_size=PLACE_LABEL_PX, get_color=SCALE_BAR_RGBA, get_text_anchor="'start'", get_alignment_baseline="'center'",
                     font_family="'DejaVu Sans', Arial, sans-serif", font_weight=600, outline_width=3,
                     outline_color=[255, 255, 255, 230], pickable=False)


def published_zone_layers(cells_df: pd.DataFrame, edges, used) -> list:
    """The published view's zones: those of ``used`` (the zones of published pairs), all alike, told apart as the
    release map's zones are (gaps, or a zone file's insets: ``edges``). Nothing in them comes from a true count:
    the zones where only suppressed flows start are not drawn."""
    idx = np.flatnonzero(cells_df["cell"].isin(used).to_numpy())
    sub = cells_df.iloc[idx]
    names = sub["name"].tolist() if "name" in sub.columns else [None] * len(sub)
    centres = ([f"centre {coord(la, lo)}\n" for la, lo in zip(sub["lat"].tolist(), sub["lon"].tolist(), strict=True)]
               if {"lat", "lon"} <= set(sub.columns) else [""] * len(sub))
    rows = pd.DataFrame({"polygon": sub["polygon"].tolist(),
                         "tip": [f"{zone_label(c, n)}\n{at}{figures.ZONE_WORDS}" for c, n, at in
                                 zip(sub["cell"].tolist(), names, centres, strict=True)]})
    if isinstance(edges, Inset):
        return grid_layers(rows, [*figures.ZONE_RGB, 200], columns=(), outline="insets",
                           edges=Inset([edges.rings[i] for i in idx.tolist()], np.zeros((0, 4))))
    return grid_layers(rows, [*figures.ZONE_RGB, 200], columns=(), outline="gaps")


def map_figure(fm: FlowMap, cells_df: pd.DataFrame, *, title: str, subtitle: str = "", projector: bool = False,
               empty_note: str | None = None, water: bool = True):
    """The same map as a plotly figure (zones, arrows in the same count classes, places, suppressed flows, legend in a
    column of its own, scale bar, title) for PNG/SVG/PDF: :func:`odcore.report.figures.flow_map_figure`."""
    return figures.flow_map_figure(cells_df[["cell", "polygon", "value"]], fm.flows, title=title,
                                   count_label=fm.count_label, subtitle=subtitle, projector=projector,
                                   empty_note=empty_note, locations=fm.locations,
                                   class_edges=fm.class_edges or None, level=fm.level_short, water=water)
