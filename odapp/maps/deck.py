"""The decks every map of the app is drawn in: colour ramps, the view, compact JSON layers, arcs and lines, the scale
bar and the legends (presentation only; the numbers come from odcore). The maps' modules beside it build the layers.

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

import numpy as np
import pandas as pd
import pydeck as pdk
from pydeck.bindings import deck as _pdk_deck
from pydeck.bindings.json_tools import default_serialize

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


def _compact_json(obj) -> str:
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

SHAPE_DIGITS = 4   # decimals of the arrows' and circles' outlines: 1e-4° ≈ 10 m, a tenth of a pixel at a first view
