"""Figures for a screen, a projector and a paper: the one plotly template, the OD flow map as a static figure, and
image files at a chosen size and resolution.

No streamlit here: the dashboard (``odapp``) and ``python -m odcore release --map FILE`` draw with the same code.
plotly (and kaleido, which finds a local Chromium, for PNG/SVG/PDF) are imported when a function needs them.

Map geometry: cells come as polygons of ``[lon, lat]`` corners (:meth:`odcore.space.grid.SquareGrid.polygons`), flows as
origin/destination centres (:meth:`odcore.space.grid.SquareGrid.centroids`). They are drawn in kilometres on a local
equirectangular projection around the data's centre (x = Δλ·111.32·cos φ₀, y = Δφ·110.57), which keeps a 1.3 km²
cell square and the scale bar true to within 0.5 % over a city (cos φ changes by < 0.5 % over ±0.2° of latitude).
"""

from __future__ import annotations

import asyncio
import atexit
import base64
import concurrent.futures
import hashlib
import html
import io
import itertools
import logging
import math
import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from html import escape as html_escape
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from fontTools import subset
from fontTools.ttLib import TTFont
from PIL import Image

from odcore.errors import ImageExportError, MissingBrowserError
from odcore.privacy.release import release_probability
from odcore.report import basemap
from odcore.report import flows as fl

if TYPE_CHECKING:  # pragma: no cover
    import plotly.graph_objects as go

FONT = "Inter, 'Source Sans Pro', 'DejaVu Sans', Arial, sans-serif"
INK = "#1b1f24"
PALETTE = ["#1f5fa8", "#d95f02", "#1b9e77", "#7570b3", "#e7298a", "#66a61e", "#a6761d", "#666666"]
# Flow direction (Okabe-Ito/ColorBrewer colours that stay apart for colour-blind readers and on a projector).
ORIGIN_RGB = (230, 97, 1)        # orange: where a flow starts
DESTINATION_RGB = (94, 60, 153)  # purple: where it ends
# Cells shaded by the chance that at least one of their flows is published: pale grey-blue -> slate blue (the low end
# not white, so that a zone with pairs stands out from the page where no outline is drawn: H3 maps, odapp.maps).
CELL_LOW_RGB = (216, 223, 232)
CELL_HIGH_RGB = (84, 124, 170)
KM_PER_DEG_LAT = 110.574
KM_PER_DEG_LON_EQUATOR = 111.320
CSS_PX_PER_INCH = 96   # plotly lays out in CSS pixels; an image at D dpi is rendered at scale D/96


@lru_cache(maxsize=2)
def template(projector: bool = False) -> go.layout.Template:
    """The lab's plotly template (layout only, so validating it is cheap).

    ``projector=True``: larger type, thicker lines and full-contrast ink for a classroom projector. Every chart of
    the app and the CLI goes through this one function (via :func:`style`). Built once per process (building it
    costs ~50 ms, a good part of a slider's redraw); a figure gets its own copy when the template is assigned, so
    the shared one is never changed through a figure.
    """
    base = 19 if projector else 15
    axis_font = {"size": base, "color": INK}
    axis = {"gridcolor": "#c9ced6" if projector else "#e3e6eb", "linecolor": INK, "ticks": "outside",
            "showline": True, "tickfont": axis_font, "title": {"font": {"size": base + 1, "color": INK}},
            "automargin": True, "zerolinecolor": "#9aa3ad", "linewidth": 2 if projector else 1,
            "separatethousands": True}
    t = go.layout.Template()
    t.layout.update(
        paper_bgcolor="white", plot_bgcolor="white", hovermode="closest", hoverlabel={"align": "left"},
        font={"family": FONT, "size": base, "color": INK},
        title={"font": {"size": base + 4, "color": INK}, "x": 0.0, "xanchor": "left", "xref": "paper"},
        colorway=PALETTE,
        legend={"bgcolor": "rgba(255,255,255,0.9)", "bordercolor": "#9aa3ad", "borderwidth": 1,
                "font": {"size": base - 1, "color": INK}},
        margin={"l": 70, "r": 30, "t": 70, "b": 60},
        xaxis=axis, yaxis=axis,
    )
    if projector:
        t.data.scatter = [go.Scatter(line={"width": 4}, marker={"size": 10})]
    return t


def style(fig: go.Figure, title: str | None = None, *, height: int = 440, projector: bool = False) -> go.Figure:
    """Apply :func:`template` (and a title) to ``fig``; returns it."""
    fig.update_layout(template=template(projector), height=height)
    if projector:   # the legend under the plot (legend_at), one entry a line: the figure grows by its height
        entries = sum(1 for t in fig.data if t.name and t.showlegend is not False)
        if entries > 1:
            extra = entries * 27 + 10
            fig.update_layout(legend=legend_at({}, True), height=height + extra, margin={"b": 70 + extra})
    if title:
        size = template(projector).layout.title.font.size
        if projector or text_width(title, size) > SCREEN_TITLE_PX:
            # the title wraps (plotly never wraps it) and pushes the plot down instead of running out of the frame:
            # on a 1024-pixel projector, and on a screen where a chart in half the page has ~480 px for it
            title = "<br>".join(wrap_words(title, PROJECTOR_TITLE_PX if projector else SCREEN_TITLE_PX, size))
            n = title.count("<br>") + 1
            # plotly places a title by its first line: the top pad holds that line, the margin holds them all
            fig.update_layout(title={"text": title, "yref": "container", "y": 1, "yanchor": "top",
                                     "pad": {"t": round(size * 0.9)}, "automargin": False},
                              margin={"t": round(size * (0.9 + 1.35 * n)) + 16})
        else:
            fig.update_layout(title_text=title)
    return fig


def legend_at(inside: dict, projector: bool) -> dict:
    """A chart's legend: at ``inside`` (a place in the plot chosen free of the data) on a screen; in projector mode
    under the plot, one entry a line, where its large type cannot cover a curve.

    >>> legend_at({"x": 0.55, "y": 0.05}, True)["yref"]
    'container'
    """
    if not projector:
        return inside
    return {"orientation": "v", "x": 0, "xanchor": "left", "xref": "paper", "y": 0, "yanchor": "bottom",
            "yref": "container", "bgcolor": "rgba(255,255,255,0)", "borderwidth": 0}


SCREEN_TITLE_PX = 430
"""Width a chart title may take on a screen before it wraps: a chart in one of two columns at 1440 px."""
PROJECTOR_TITLE_PX = 520
"""Width a chart title may take in projector mode: a 1024-pixel-wide projector with the sidebar open leaves the
main area ~680 px, of which the plot's margins take ~100 (measured with DejaVu Sans, wider than the page's font)."""


# ---- numbers on axes -------------------------------------------------------------------------------------------

def nice_step(span: float, target: int = 5) -> float:
    """A 1-2-5 step that cuts ``span`` into about ``target`` intervals.

    >>> nice_step(85_700, 5), nice_step(0.9, 4), nice_step(7, 5)
    (20000.0, 0.5, 2.0)
    """
    if not math.isfinite(span) or span <= 0:
        return 1.0
    raw = span / target
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if raw <= m * mag * 1.0000001:
            return float(m * mag)
    return float(10 * mag)  # pragma: no cover


def nice_ticks(vmax: float, target: int = 5) -> list[float]:
    """Round ticks 0, s, 2s, … covering ``[0, vmax]`` (s from :func:`nice_step`).

    >>> nice_ticks(85_700)
    [0.0, 20000.0, 40000.0, 60000.0, 80000.0, 100000.0]
    """
    step = nice_step(vmax, target)
    n = max(1, math.ceil(vmax / step - 1e-9))
    return [round(i * step, 10) for i in range(n + 1)]


def log_ticks(lo: float, hi: float) -> tuple[list[float], list[str]]:
    """Ticks at the powers of ten between ``lo`` and ``hi``, labelled ``10⁻²⁸`` (one notation on the whole axis).

    >>> log_ticks(3e-3, 0.2)
    ([0.001, 0.01, 0.1, 1.0], ['10⁻³', '10⁻²', '10⁻¹', '10⁰'])
    """
    sup = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")
    a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    step = max(1, math.ceil((b - a) / 8))
    exps = list(range(b, a - 1, -step))[::-1]   # always ends at the top power
    return [10.0 ** e for e in exps], [f"10{str(e).translate(sup)}" for e in exps]


def readable_log_ticks(lo: float, hi: float) -> tuple[list[float], list[str]]:
    """Ticks of a log axis from ``lo`` to ``hi`` in plain numbers: 1-2-5 per decade when the axis spans at most
    about two decades, the powers of ten otherwise (never plotly's minor-tick digits "5 0.1 2 5 1 2").

    >>> readable_log_ticks(0.3, 12)
    ([0.5, 1.0, 2.0, 5.0, 10.0], ['0.5', '1', '2', '5', '10'])
    >>> readable_log_ticks(0.1, 5000)[1]
    ['0.1', '1', '10', '100', '1,000', '10,000']
    """
    if not (lo > 0 and hi > lo):
        return [], []
    a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    if math.log10(hi / lo) <= 2.3:
        vals = [m * 10.0 ** e for e in range(a, b + 1) for m in (1, 2, 5)]
        vals = [v for v in vals if lo <= v * 1.0000001 and v <= hi * 1.0000001]
    else:
        vals, _ = log_ticks(lo, hi)
    return vals, [plain_number(v) for v in vals]


def plain_number(v: float) -> str:
    """``1000.0 -> '1,000'``, ``0.05 -> '0.05'``: a tick label without exponent notation.

    >>> plain_number(1000.0), plain_number(0.05), plain_number(2.0)
    ('1,000', '0.05', '2')
    """
    if v >= 1:
        return f"{v:,.0f}" if float(v).is_integer() else f"{v:,.3g}"
    return f"{v:.6f}".rstrip("0").rstrip(".")



# ---- the flow map ----------------------------------------------------------------------------------------------

def nice_km(span_km: float) -> float:
    """Scale-bar length: the largest 1-2-5 km value that is at most a fifth of ``span_km`` (at least 0.1 km).

    >>> nice_km(30), nice_km(7), nice_km(100)
    (5.0, 1.0, 20.0)
    """
    target = max(span_km / 5, 0.1)
    mag = 10 ** math.floor(math.log10(target))
    best = mag
    for m in (1, 2, 5):
        if m * mag <= target:
            best = m * mag
    return float(round(best, 6))


def km_per_deg_lon(lat: float) -> float:
    return KM_PER_DEG_LON_EQUATOR * math.cos(math.radians(lat))


def mix(lo: tuple[int, int, int], hi: tuple[int, int, int], t: np.ndarray) -> np.ndarray:
    """Colours between ``lo`` and ``hi`` (RGB) at positions ``t`` in [0, 1] (clipped); shape (n, 3)."""
    t = np.clip(np.asarray(t, dtype=float), 0, 1)[:, None]
    return np.asarray(lo, float) * (1 - t) + np.asarray(hi, float) * t


def arc_points(x0: np.ndarray, y0: np.ndarray, x1: np.ndarray, y1: np.ndarray, *, bend: float = 0.18,
               n: int = 17) -> tuple[np.ndarray, np.ndarray]:
    """Quadratic Bézier arcs from (x0, y0) to (x1, y1), bulging to the right of the direction of travel by
    ``bend`` × length, so A→B and B→A are two separate curves. Returns arrays of shape (len(x0), n)."""
    x0, y0, x1, y1 = (np.asarray(v, float)[:, None] for v in (x0, y0, x1, y1))
    mx, my = (x0 + x1) / 2, (y0 + y1) / 2
    dx, dy = x1 - x0, y1 - y0
    cx, cy = mx + bend * dy, my - bend * dx           # (dy, -dx) points to the right of (dx, dy)
    t = np.linspace(0, 1, n)[None, :]
    bx = (1 - t) ** 2 * x0 + 2 * (1 - t) * t * cx + t ** 2 * x1
    by = (1 - t) ** 2 * y0 + 2 * (1 - t) * t * cy + t ** 2 * y1
    return bx, by


def _rgb(c) -> str:
    r, g, b = (round(float(v)) for v in c[:3])
    return f"rgb({r},{g},{b})"


def width_classes(values: np.ndarray, lo: float, hi: float, k: int = 4) -> tuple[np.ndarray, list[tuple]]:
    """Class index (0..k-1) of each value on ``k`` equal-width classes of ``[lo, hi]`` and the class bounds."""
    if not hi > lo:
        return np.zeros(len(values), int), [(lo, hi)]
    edges = np.linspace(lo, hi, k + 1)
    idx = np.clip(np.searchsorted(edges, values, side="right") - 1, 0, k - 1)
    return idx, [(edges[i], edges[i + 1]) for i in range(k)]


# The flow map's encodings, shared with the dashboard's map (odapp.maps): four count classes light to dark (orange
# to dark red, each visible on the palest and the darkest zone) and their widths in px, places as white circles with a
# dark ring, suppressed flows thin and grey.
FLOW_CLASS_RGB = ((250, 160, 60), (240, 110, 40), (215, 48, 31), (140, 0, 20))
FLOW_CLASS_WIDTH_PX = (2.5, 4.0, 5.5, 8.0)
FLOW_CLASS_ALPHA = (205, 220, 235, 245)
LOCATION_RGB = (20, 60, 80)
SUPPRESSED_RGB = (70, 70, 70)
P_CLASSES = 5                  # zones shaded in five classes of the chance that a flow leaving them is published
WATER_RGB = (198, 221, 238)    # water under the flow maps (odcore.report.basemap): a pale blue
LEGEND_PX = 136                # about the legend's column right of the map (its frame is as wide as its widest row)
LEGEND_GAP_PX = 6.0            # between the map's plot area and the legend's frame
MIN_PAPER_PT = 7.0             # no text of an exported figure smaller (a journal's rule)
FLOW_MAP_META = "flow_map_legend"   # key of a flow map's layout.meta: its legend's type size and box, for for_paper
LEGEND_FONT_PX = 10.0          # 7.5 pt: readable at a journal column's 3.5 in
LEGEND_ROW_PX = 11.5
FIGURE_WIDTH_SCALE = 0.7       # a printed map is smaller than the screen's: its arrows a little thinner
ZONE_RGB = (222, 228, 236)     # a zone of the published view: all alike (no shade from true counts)
ZONE_WORDS = "zone with a published flow"
CELL_LABEL = "Zones: chance at least one flow leaving is published (analysis: true counts, do not share)"
PLACE_LABELS = 12              # the largest places named on an exported map (where the zones have names)


def count_label_text(a: float, b: float) -> str:
    return f"{a:,.0f}–{b:,.0f}"


def _wrap(text: str, width: int) -> str:
    """``text`` in lines of at most about ``width`` characters (broken after ", " or " · "), joined by <br>."""
    parts = re.split(r"(?<=, )|(?<= · )|(?<=: )", text)
    lines, cur = [], ""
    for p in parts:
        if cur and len(cur) + len(p) > width:
            lines.append(cur.rstrip(" ·,"))
            cur = ""
        cur += p
    lines.append(cur)
    return "<br>".join(x for x in lines if x)


def flow_map_figure(cells: pd.DataFrame, flows: pd.DataFrame, *, title: str, count_label: str = "count",
                    cell_label: str = CELL_LABEL, subtitle: str = "",
                    projector: bool = False, empty_note: str | None = None, locations: pd.DataFrame | None = None,
                    class_edges=None, level: str = "", water: bool = True, zone_words: str = ZONE_WORDS,
                    size: FigureSize | None = None) -> go.Figure:
    """The flow map as a plotly figure laid out for ``size``, the same picture as the dashboard's map: flows as
    curved arrows in four count classes (width and colour, the dashboard's geometry:
    :func:`odcore.report.flows.arrows`), places as circles sized by their totals, suppressed flows thin and grey,
    zones under them, water, a scale bar; the legend below the map (``size.legend == "below"``) or in a column right
    of it, never over the data area, type at least 7 pt.

    Drawn at the size's own scale: the data area is fitted to the places and arrows, each circle's radius is limited
    so that no circle covers another flow's arrow (nor its own arrow's start or end), and arrows start and end at
    their circles' edges. The figure carries its inputs (``layout.meta``), so :func:`for_paper` and
    :func:`image_bytes` draw it again at another size rather than scale a picture made for this one.

    Parameters
    ----------
    cells
        ``DataFrame[cell, polygon, value]``: ``polygon`` a list of ``[lon, lat]`` corners, ``value`` in [0, 1] shades
        the zone in five classes (legend: ``cell_label``); a ``value`` of NaN everywhere (or no such column) draws
        every zone alike (legend: ``zone_words``): the published view, which must not be shaded from true counts.
    flows
        ``DataFrame[o_lon, o_lat, d_lon, d_lat, count]`` (one row per drawn flow); a ``released`` column, where
        present, marks the suppressed flows (False), drawn thin and grey.
    title, subtitle, level
        Title, and the settings and level shown, in a smaller line under it.
    count_label
        What ``count`` is (legend title of the arrows).
    empty_note
        Text written over the map when no flow is drawn (why, and what to change); the legend then lists no class.
    locations
        ``DataFrame[lon, lat, total]`` (and ``label``, a short name written by the largest places): the places'
        circles (area ∝ total); by default each published flow's ends, sized by the counts drawn.
    class_edges
        The count classes' edges (default: four equal classes of the drawn counts).
    water
        Draw water under the zones (the bundled Natural Earth coastline) and list it in the legend, where any.
    size
        The figure's size, type and legend place (default :data:`MAP_SIZE`, the map's own 8 × 6 in).
    """
    args = {"cells": _jsonable_frame(cells, ("cell", "polygon", "value")),
            "flows": _jsonable_frame(flows, ("o_lon", "o_lat", "d_lon", "d_lat", "count", "released", "o_place",
                                             "d_place")),
            "locations": None if locations is None else _jsonable_frame(locations, ("lon", "lat", "total", "label")),
            "title": title, "count_label": count_label, "cell_label": cell_label, "subtitle": subtitle,
            "projector": projector, "empty_note": empty_note,
            "class_edges": None if class_edges is None else [float(v) for v in class_edges], "level": level,
            "water": water, "zone_words": zone_words}
    size = size or (MAP_SIZE_PROJECTOR if projector else MAP_SIZE)
    cells = pd.DataFrame(args["cells"])
    flows = pd.DataFrame(args["flows"])
    locations = None if args["locations"] is None else pd.DataFrame(args["locations"])
    W, H = size.width_px, size.height_px
    fs = size.font_px
    # legend and notes: never under 7 pt (rounded up: an SVG writes sizes to a few decimals)
    note_fs = math.ceil(max(0.9 * fs, MIN_PAPER_PT * CSS_PX_PER_INCH / 72) * 100) / 100
    title_fs = 1.15 * fs
    s = note_fs / LEGEND_FONT_PX          # the marks' scale: 1 at the map's own size, larger on a slide
    pad = round(0.6 * fs)
    fig = go.Figure()

    # ---- what is drawn: places, published and suppressed flows ----------------------------------------------
    if not len(flows):
        flows = pd.DataFrame({c: np.zeros(0) for c in ("o_lon", "o_lat", "d_lon", "d_lat", "count")})
    rel = flows["released"].to_numpy(bool) if "released" in flows.columns else np.ones(len(flows), bool)
    pub = flows.loc[rel].reset_index(drop=True)
    sup = flows.loc[~rel].reset_index(drop=True)
    if locations is None:
        ends = pd.concat([pub[["o_lon", "o_lat", "count"]].set_axis(["lon", "lat", "total"], axis=1),
                          pub[["d_lon", "d_lat", "count"]].set_axis(["lon", "lat", "total"], axis=1)])
        locations = ends.groupby(["lon", "lat"], as_index=False)["total"].sum()
    locations = locations.loc[locations["total"].to_numpy(float) > 0].reset_index(drop=True)
    polys = [np.asarray(p, float).reshape(-1, 2) for p in cells["polygon"]] if len(cells) else []
    shade = "value" in cells.columns and len(cells) and np.isfinite(cells["value"].to_numpy(float)).any()
    # the projection: about the places, else the zones
    if len(locations):
        ref = locations[["lon", "lat"]].to_numpy(float)
    elif polys:
        ref = np.concatenate(polys)
    else:
        ref = np.zeros((1, 2))
    proj = fl.project(ref[:, 0], ref[:, 1])
    key = {(round(a, 6), round(b, 6)): i for i, (a, b) in enumerate(zip(locations["lon"], locations["lat"],
                                                                          strict=True))}
    lx, ly = proj.xy(locations["lon"], locations["lat"])

    def ends(df):
        """Place index of each flow's origin and destination (-1: a flow end that is no place)."""
        o = np.array([key.get((round(a, 6), round(b, 6)), -1) for a, b in zip(df["o_lon"], df["o_lat"], strict=True)],
                     dtype=np.int64)
        d = np.array([key.get((round(a, 6), round(b, 6)), -1) for a, b in zip(df["d_lon"], df["d_lat"], strict=True)],
                     dtype=np.int64)
        return o, d

    po, pdst = ends(pub)
    so, sdst = ends(sup)
    both = pd.concat([pub, sup], ignore_index=True)
    ox, oy = proj.xy(both["o_lon"], both["o_lat"])
    dx_, dy_ = proj.xy(both["d_lon"], both["d_lat"])
    fx, fy = np.r_[ox, dx_], np.r_[oy, dy_]

    # ---- legend rows ---------------------------------------------------------------------------------------------
    if class_edges is None:
        lo, hi = (float(np.nanmin(pub["count"])), float(np.nanmax(pub["count"]))) if len(pub) else (0.0, 1.0)
        class_edges = fl.class_bounds(lo, hi if hi > lo else lo + 1.0)
    class_edges = np.asarray(class_edges, float)
    rows: list[tuple] = []     # (kind, text, swatch)
    if len(pub):
        rows.append(("title", f"Flows: {count_label}", None))
        for i, (a, b) in enumerate(itertools.pairwise(class_edges.tolist())):
            rows.append(("line", count_label_text(a, b), i))
    if len(sup):
        rows.append(("sup", f"suppressed ({len(sup):,})", None))
    if len(locations):
        rows.append(("circle", "place (size: people)", None))
    p_edges = np.linspace(0, 1, P_CLASSES + 1)
    p_cols = [_rgb(mix(CELL_LOW_RGB, CELL_HIGH_RGB, np.array([(i + 0.5) / P_CLASSES]))[0]) for i in range(P_CLASSES)]
    if polys and shade:
        for part in wrap_words(cell_label, 13 * note_fs, note_fs):
            rows.append(("title", part, None))
        for i in range(P_CLASSES):
            rows.append(("box", f"{p_edges[i]:.1f}–{p_edges[i + 1]:.1f}", p_cols[i]))
    elif polys:
        rows.append(("box", zone_words, _rgb(ZONE_RGB)))
    row_h = 1.25 * note_fs
    inner = 0.45 * note_fs
    x_tx = 3.2 * note_fs          # a row's text after its swatch

    def row_w(kind, text):
        return (0 if kind == "title" else x_tx) + text_width(text, note_fs) * (1.1 if kind == "title" else 1.03)

    # ---- title, legend and data area in px ---------------------------------------------------------------------
    small = " · ".join(x for x in (subtitle, level) if x)
    t_lines = wrap_words(title, W - 2 * pad, title_fs * 1.08)
    s_lines = wrap_words(small, W - 2 * pad, note_fs) if small else []
    # plotly spaces an annotation's lines by 1.3 × its own type size, a smaller span's lines too
    top = pad + (len(t_lines) + len(s_lines)) * title_fs * 1.3 + 0.8 * pad
    gap = 0.6 * note_fs

    def legend_block(water_row: bool):
        rr = rows + ([("water", "water (Natural Earth)", _rgb(WATER_RGB))] if water_row else [])
        if not rr:
            return rr, 0.0, 0.0, [0.0], 1
        widths = [row_w(k, t) + note_fs for k, t, _ in rr]
        if size.legend == "right":
            return rr, max(widths) + 2 * inner, len(rr) * row_h + 2 * inner, 1, len(rr)
        room = W - 2 * pad - 2 * inner
        for n_col in range(len(rr), 0, -1):   # the most columns whose widest rows fit side by side
            per = math.ceil(len(rr) / n_col)
            cols = [max(widths[i:i + per]) for i in range(0, len(rr), per)]
            if sum(cols) <= room or n_col == 1:
                return rr, sum(cols) + 2 * inner, per * row_h + 2 * inner, cols, per
        raise AssertionError  # pragma: no cover

    def plot_box(lw, lh):
        if size.legend == "right":
            r_m = pad + (lw + gap if lw else 0)
            h = max(H, round(top + lh + 2 * pad))
            return pad, top, W - pad - r_m, h - top - pad, h
        b_m = pad + (lh + gap if lh else 0)
        # the figure grows rather than the map vanish: at least 0.45 of the width high, more for tall data (to
        # 0.9 of the width), so that a tall city is not drawn in a strip
        tall = (y1 - y0) / max(x1 - x0, 1e-9)
        h = max(H, round(top + b_m + float(np.clip(tall, 0.45, 0.9)) * (W - 2 * pad)))
        return pad, top, W - 2 * pad, h - top - b_m, h

    if len(locations) or len(fx):
        ex = np.r_[lx, fx]
        ey = np.r_[ly, fy]
        if len(ox):   # the curves bulge: their furthest points too
            ex = np.r_[ex, (ox + dx_) / 2 + fl.BEND * 0.5 * (dy_ - oy)]
            ey = np.r_[ey, (oy + dy_) / 2 - fl.BEND * 0.5 * (dx_ - ox)]
    elif polys:
        allp = np.concatenate(polys)
        ex, ey = proj.xy(allp[:, 0], allp[:, 1])
    else:
        ex, ey = np.zeros(1), np.zeros(1)
    x0, x1, y0, y1 = float(np.nanmin(ex)), float(np.nanmax(ex)), float(np.nanmin(ey)), float(np.nanmax(ey))
    # the water row depends on the map's box, the box on the legend's room: the box with a water row first
    rows_w, lw, lh, n_col, per = legend_block(water)
    left, tp, pw, ph, Hf = plot_box(lw, lh)
    bar_px = 2.6 * note_fs          # room for the scale bar under the data
    margin_px = 14 * s + 4          # a circle's largest radius and a little more round the data
    span = max(x1 - x0, y1 - y0, 0.5)
    kpp = max((x1 - x0) / max(pw - 2 * margin_px, 20), (y1 - y0) / max(ph - 2 * margin_px - bar_px, 20),
              span / max(pw, ph, 20) / 4, 1e-9)
    cx = (x0 + x1) / 2
    xr = (cx - pw / 2 * kpp, cx + pw / 2 * kpp)
    y_top = (y0 + y1) / 2 + (ph - bar_px) / 2 * kpp
    yr = (y_top - ph * kpp, y_top)

    # water where the bundled coastline has any in the data area (and a little round it)
    sea = []
    if water:
        lo_a, la_a = proj.lonlat(xr[0], yr[0])
        lo_b, la_b = proj.lonlat(xr[1], yr[1])
        mlon, mlat = 0.1 * (float(lo_b) - float(lo_a)), 0.1 * (float(la_b) - float(la_a))
        sea = basemap.water_rings(float(lo_a) - mlon, float(lo_b) + mlon, float(la_a) - mlat, float(la_b) + mlat,
                                  tolerance=kpp / proj.kx / 2)
    if not sea and water:    # no water: the legend without its row, and the data area as that gives
        rows_w, lw, lh, n_col, per = legend_block(False)
        left2, tp2, pw2, ph2, Hf2 = plot_box(lw, lh)
        if (pw2, ph2) != (pw, ph):
            k2 = max((x1 - x0) / max(pw2 - 2 * margin_px, 20), (y1 - y0) / max(ph2 - 2 * margin_px - bar_px, 20),
                     span / max(pw2, ph2, 20) / 4, 1e-9)
            left, tp, pw, ph, Hf, kpp = left2, tp2, pw2, ph2, Hf2, k2
            xr = (cx - pw / 2 * kpp, cx + pw / 2 * kpp)
            y_top = (y0 + y1) / 2 + (ph - bar_px) / 2 * kpp
            yr = (y_top - ph * kpp, y_top)

    for k, colour in ((0, _rgb(WATER_RGB)), (1, "white")):
        xs, ys = [], []
        for poly in sea:
            for ring in (poly[:1] if k == 0 else poly[1:]):
                a = np.asarray(ring, float)
                x, y = proj.xy(a[:, 0], a[:, 1])
                xs += [*x.tolist(), float(x[0]), None]
                ys += [*y.tolist(), float(y[0]), None]
        if xs:
            fig.add_scatter(x=xs, y=ys, mode="lines", fill="toself", fillcolor=colour, hoverinfo="skip",
                            line={"width": 0}, showlegend=False, name="water" if k == 0 else "land")

    # zones: five shade classes of value, or all alike
    vals = cells["value"].to_numpy(float) if shade else np.full(len(polys), np.nan)
    groups = ([(np.flatnonzero((vals >= p_edges[i]) & ((vals < p_edges[i + 1]) | (i == P_CLASSES - 1))), p_cols[i])
               for i in range(P_CLASSES)] if shade else [(np.arange(len(polys)), _rgb(ZONE_RGB))])
    for sel, colour in groups:
        xs, ys = [], []
        for j in sel.tolist():
            x, y = proj.xy(polys[j][:, 0], polys[j][:, 1])
            xs += [*x.tolist(), float(x[0]), None]
            ys += [*y.tolist(), float(y[0]), None]
        if xs:
            fig.add_scatter(x=xs, y=ys, mode="lines", fill="toself", fillcolor=colour, hoverinfo="skip", name="zones",
                            line={"color": "rgba(255,255,255,0.9)", "width": 0.6 * s}, showlegend=False)

    # places and arrows at this scale: circles no larger than leaves every other arrow clear
    tot = locations["total"].to_numpy(float)
    r_big = fl.place_radius_px(lx, ly, kpp, largest=14.0 * s, least=4.0 * s)
    r = 2.5 * s + (r_big - 2.5 * s) * np.sqrt(tot / max(float(tot.max()), 1e-9)) if len(tot) else np.zeros(0)
    pcls = fl.classes(pub["count"].to_numpy(float), class_edges) if len(pub) else np.zeros(0, np.int64)
    w_px = np.r_[np.asarray([FIGURE_WIDTH_SCALE * w * s for w in FLOW_CLASS_WIDTH_PX])[pcls],
                 np.full(len(sup), 1.0 * s)]
    head_px = np.maximum(np.r_[3.0 * w_px[:len(pub)], np.full(len(sup), 0.0)], np.r_[np.full(len(pub), 8.0 * s),
                                                                                       np.full(len(sup), 6.0 * s)])
    ao, ad = np.r_[po, so], np.r_[pdst, sdst]
    bends = np.r_[np.full(len(pub), fl.BEND), np.full(len(sup), 0.3)]
    gap_px = 1.5 * s
    def geometry(r_now):
        g0 = np.where(ao >= 0, r_now[np.maximum(ao, 0)] + gap_px, 0.0) * kpp if len(r_now) else np.zeros(len(ao))
        g1 = np.where(ad >= 0, r_now[np.maximum(ad, 0)] + gap_px, 0.0) * kpp if len(r_now) else np.zeros(len(ad))
        out = [fl.arrows(ox[j:j + 1], oy[j:j + 1], dx_[j:j + 1], dy_[j:j + 1], w_px[j:j + 1] * kpp, gap0=g0[j:j + 1],
                         gap1=g1[j:j + 1], head_len=head_px[j:j + 1] * kpp, bend=float(bends[j]), n=10)
               for j in range(len(ao))]
        return np.concatenate(out) if out else np.zeros((0, 2 * 10 + 3, 2))

    r, arrow_polys = fl.clear_radii(lx, ly, r, geometry, kpp, least_px=1.5 * s)

    # places: white circles with a dark ring (under the arrows)
    show = np.flatnonzero(r > 0)
    if len(show):
        ring = fl.circles(lx[show], ly[show], r[show] * kpp, n=24)
        xs, ys = [], []
        for q in ring:
            xs += [*q[:, 0].tolist(), float(q[0, 0]), None]
            ys += [*q[:, 1].tolist(), float(q[0, 1]), None]
        fig.add_scatter(x=xs, y=ys, mode="lines", fill="toself", fillcolor="rgba(255,255,255,0.9)",
                        line={"color": _rgb(LOCATION_RGB), "width": 1.0 * s, "simplify": False}, hoverinfo="skip", showlegend=False,
                        name="places")
    # arrows: suppressed (grey) under the published, each class a trace of filled outlines
    classes_drawn = ([(np.arange(len(pub), len(ao)), _rgba(SUPPRESSED_RGB, 160), "suppressed flows")] +
                     [(np.flatnonzero(pcls == c), _rgba(FLOW_CLASS_RGB[c], FLOW_CLASS_ALPHA[c]), f"flows class {c}")
                      for c in range(len(class_edges) - 1)])
    for sel, colour, name in classes_drawn:
        if not len(sel):
            continue
        xs, ys = [], []
        for q in arrow_polys[sel]:
            xs += [*q[:, 0].tolist(), float(q[0, 0]), None]
            ys += [*q[:, 1].tolist(), float(q[0, 1]), None]
        fig.add_scatter(x=xs, y=ys, mode="lines", fill="toself", fillcolor=colour,
                        line={"width": 0, "simplify": False}, hoverinfo="skip", showlegend=False, name=name)
    # the largest places' names, where the data gives them: right of the circle, each only where it meets no
    # other name, circle or the data area's edge (largest places first)
    if "label" in locations.columns and len(show):
        lab = locations["label"].astype(str).to_numpy()
        placed: list[tuple[float, float, float, float]] = []
        keep, texts = [], []
        for i in show[np.argsort(-tot[show], kind="stable")].tolist():
            if len(keep) >= PLACE_LABELS or not lab[i] or lab[i] == "nan":
                continue
            text = lab[i][:24]
            bx0_ = lx[i] + (r[i] + 1.5 * s) * kpp
            box = (bx0_, ly[i] - 0.6 * note_fs * kpp, bx0_ + text_width(text, note_fs) * kpp,
                   ly[i] + 0.6 * note_fs * kpp)
            clash = any(box[0] < b[2] and b[0] < box[2] and box[1] < b[3] and b[1] < box[3] for b in placed)
            near = (np.clip(lx[show], box[0], box[2]) - lx[show]) ** 2 + (np.clip(ly[show], box[1], box[3])
                                                                           - ly[show]) ** 2
            hits = np.flatnonzero(near < (r[show] * kpp) ** 2)
            if clash or len(hits) or box[2] > xr[1] or box[1] < yr[0] or box[3] > yr[1]:
                continue
            placed.append(box)
            keep.append(i)
            texts.append(text)
        if keep:
            fig.add_scatter(x=lx[keep] + (r[keep] + 1.5 * s) * kpp, y=ly[keep], mode="text", name="place names",
                            text=[html_escape(t) for t in texts], textposition="middle right",
                            textfont={"size": note_fs, "color": INK}, hoverinfo="skip", showlegend=False)

    # scale bar: bottom left, in the room kept under the data (none over an empty map: a distance between nothing)
    if len(locations) or polys:
        bar = nice_km(pw * kpp)
        bx0 = xr[0] + 8 * s * kpp
        by0 = yr[0] + 0.6 * bar_px * kpp - 0.35 * note_fs * kpp
        tick = 0.35 * note_fs * kpp
        fig.add_scatter(x=[bx0, bx0, bx0 + bar, bx0 + bar], y=[by0 + tick, by0, by0, by0 + tick], mode="lines",
                        line={"color": INK, "width": 1.3 * s}, hoverinfo="skip", showlegend=False, name="scale bar")
        fig.add_annotation(x=bx0 + bar + 0.4 * note_fs * kpp, y=by0, text=f"{bar:g} km", showarrow=False,
                           xanchor="left", yanchor="middle", font={"size": note_fs, "color": INK}, name="scale bar")
    if empty_note and not len(pub):
        fig.add_annotation(xref="paper", yref="paper", x=0.5, y=0.55, text=_wrap(html_escape(empty_note), 48),
                           showarrow=False, bgcolor="rgba(255,255,255,0.92)", bordercolor="#9aa3ad", borderwidth=1,
                           font={"size": note_fs * 1.1, "color": INK}, name="empty note")

    # ---- title (the first annotation, where for_paper and the tests find it) and legend, placed in px --------
    def px_to_paper(x, y):
        return (x - left) / pw, 1 - (y - tp) / ph

    tx, ty = px_to_paper(pad, pad)
    head = "<br>".join(f"<b>{html_escape(t)}</b>" for t in t_lines)
    if s_lines:
        head += "<br>" + "<br>".join(f"<span style='font-size:{note_fs:.2f}px'>{html_escape(t)}</span>"
                                     for t in s_lines)
    fig.layout.annotations = [go.layout.Annotation(
        name="figure title", xref="paper", yref="paper", x=tx, y=ty, xanchor="left", yanchor="top",
        showarrow=False, align="left", text=head, font={"size": title_fs, "color": INK}),
        *fig.layout.annotations]
    legend_box = None
    if rows_w:
        if size.legend == "right":
            lx0, ly0 = left + pw + gap, tp
        else:
            lx0, ly0 = left, tp + ph + gap
        legend_box = (lx0, ly0, lx0 + lw, ly0 + lh)
        fx0, fy0 = px_to_paper(lx0, ly0)
        # the frame: an annotation without text or fill (annotations lie over shapes: a filled one would hide the
        # swatches), as wide and high as the rows
        fig.add_annotation(name="legend", xref="paper", yref="paper", x=fx0, y=fy0, xanchor="left", yanchor="top",
                           text=" ", width=lw, height=lh, borderpad=0, showarrow=False, bgcolor="rgba(0,0,0,0)",
                           bordercolor="#9aa3ad", borderwidth=0.8, font={"size": note_fs, "color": INK})
        col_x = np.r_[0.0, np.cumsum(n_col)]
        for k, (kind, text, sw) in enumerate(rows_w):
            c, rr = divmod(k, per)
            x_row = lx0 + inner + col_x[c] + 0.3 * note_fs
            y_row = ly0 + inner + (rr + 0.5) * row_h
            xa, ya = px_to_paper(x_row + (0 if kind == "title" else x_tx), y_row)
            fig.add_annotation(name="legend", xref="paper", yref="paper", x=xa, y=ya, xanchor="left",
                               yanchor="middle", showarrow=False, align="left",
                               text=f"<b>{html_escape(text)}</b>" if kind == "title" else html_escape(text),
                               font={"size": note_fs, "color": INK})
            sx0, sy0 = px_to_paper(x_row, y_row - 0.38 * note_fs)
            sx1, sy1 = px_to_paper(x_row + 2.4 * note_fs, y_row + 0.38 * note_fs)
            _, ym = px_to_paper(0, y_row)
            common = {"name": "legend", "xref": "paper", "yref": "paper", "layer": "above"}
            if kind == "line":
                w = FIGURE_WIDTH_SCALE * FLOW_CLASS_WIDTH_PX[sw] * s
                fig.add_shape(type="line", x0=sx0, x1=sx1, y0=ym, y1=ym,
                              line={"color": _rgb(FLOW_CLASS_RGB[sw]), "width": w}, **common)
            elif kind == "sup":
                fig.add_shape(type="line", x0=sx0, x1=sx1, y0=ym, y1=ym,
                              line={"color": _rgb(SUPPRESSED_RGB), "width": 1.0 * s}, **common)
            elif kind == "circle":
                cx0, _ = px_to_paper(x_row + 0.75 * note_fs, 0)
                cx1, _ = px_to_paper(x_row + 1.6 * note_fs, 0)
                cy0 = px_to_paper(0, y_row + 0.42 * note_fs)[1]
                cy1 = px_to_paper(0, y_row - 0.42 * note_fs)[1]
                fig.add_shape(type="circle", x0=cx0, x1=cx1, y0=cy0, y1=cy1,
                              line={"color": _rgb(LOCATION_RGB), "width": 1.0 * s}, fillcolor="white", **common)
            elif kind in ("box", "water"):
                fig.add_shape(type="rect", x0=sx0, x1=sx1, y0=sy1, y1=sy0, line={"color": "#9aa3ad", "width": 0.5},
                              fillcolor=sw, **common)

    for i, t in enumerate(fig.data):   # ids of our own: plotly.js would draw random ones into an SVG
        t.uid = f"map{i}"
    style(fig, None, height=Hf, projector=projector)
    fig.update_layout(
        template=template(False), width=W, height=Hf, autosize=False,
        font={"family": PAPER_FONT, "size": fs, "color": INK}, title={"text": ""},
        xaxis={"visible": False, "range": list(xr), "showgrid": False, "fixedrange": True},
        yaxis={"visible": False, "range": list(yr), "showgrid": False, "fixedrange": True},
        showlegend=False,
        margin={"l": left, "r": W - left - pw, "t": tp, "b": Hf - tp - ph, "pad": 0, "autoexpand": False},
        meta={FLOW_MAP_META: {"args": args, "font_px": note_fs, "plot_px": [left, tp, pw, ph],
                              "legend_px": list(legend_box) if legend_box else None, "km_per_px": kpp}},
    )
    return fig


def _jsonable_frame(df: pd.DataFrame | None, columns: tuple[str, ...]) -> dict:
    """The columns of ``df`` that exist, as plain lists (a figure carries its inputs in ``layout.meta``)."""
    if df is None:
        return {}
    if isinstance(df, dict):
        df = pd.DataFrame(df)
    out = {}
    for c in columns:
        if c not in df.columns:
            continue
        v = df[c].tolist()
        if c == "polygon":
            v = [np.asarray(q, float).reshape(-1, 2).tolist() for q in v]
        elif c in ("label", "o_place", "d_place"):
            v = ["" if x is None or x != x else str(x) for x in v]
        elif c == "released":
            v = [bool(x) for x in v]
        elif c != "cell":
            v = [float(x) for x in v]
        else:
            v = [x if isinstance(x, str) else int(x) for x in v]
        out[c] = v
    return out


def flow_map_at(fig: go.Figure, size: FigureSize) -> go.Figure:
    """A :func:`flow_map_figure` drawn again at ``size`` from the inputs it carries (any other figure as it is)."""
    meta = fig.layout.meta if isinstance(fig.layout.meta, dict) else {}
    if FLOW_MAP_META not in meta or "args" not in meta[FLOW_MAP_META]:
        return fig
    return flow_map_figure(**meta[FLOW_MAP_META]["args"], size=size)


def is_flow_map(fig: go.Figure) -> bool:
    meta = fig.layout.meta if isinstance(fig.layout.meta, dict) else {}
    return FLOW_MAP_META in meta


def published_map_frames(table: pd.DataFrame, centroids: pd.DataFrame, polygons, *, top_n: int | None = None,
                         min_count: float = 0.0, cell=None, merge: bool = True,
                         view_px: tuple[int, int] | None = None) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, Any]:
    """What the published map draws, from the published rows of a release table alone: ``(zones, flows, places,
    picture)``. Only ``origin, destination, noisy_count`` of the rows with ``released`` are read, and only the zones
    of published pairs are drawn, all alike: two data sets that publish the same table give the same map (a true
    count, a suppressed pair or a zone where only suppressed flows start changes nothing). The places and flows
    are the dashboard's at the same settings (:func:`odcore.report.flows.flow_picture` at the page's map size,
    :data:`odcore.report.flows.SCREEN_MAP_PX`).

    ``polygons(cells)``: the zones' outlines (a list of ``[lon, lat]`` rings) for an array of zone ids;
    ``centroids``: ``cell, lat, lon`` (and ``name``) of the zone system (its geometry, not the data's)."""
    rel = table["released"].to_numpy(bool)
    pub = pd.DataFrame({"origin": table["origin"].to_numpy()[rel], "destination": table["destination"].to_numpy()[rel],
                        "noisy_count": table["noisy_count"].to_numpy(float)[rel]})
    pub = pub.sort_values(["origin", "destination"], kind="stable").reset_index(drop=True)
    pub["released"] = True            # and no true count, no release probability: the map knows none
    used = np.unique(np.r_[pub["origin"].to_numpy(), pub["destination"].to_numpy()])
    cent = centroids.loc[centroids["cell"].isin(used)].sort_values("cell", kind="stable").reset_index(drop=True)
    pic = fl.flow_picture(pub, cent, value="noisy_count", keep=np.ones(len(pub), bool), top_n=top_n or None,
                          min_count=min_count, cell=cell,
                          view_px=(view_px or fl.SCREEN_MAP_PX) if merge else None)
    zones = pd.DataFrame({"cell": cent["cell"].to_numpy(), "polygon": list(polygons(cent["cell"].to_numpy())),
                          "value": np.nan})
    names = (dict(zip(cent["cell"].tolist(), cent["name"].tolist(), strict=True)) if "name" in cent.columns else {})
    pl, fw = pic.places, pic.flows
    flows = pd.DataFrame({"o_lon": pl["lon"].to_numpy()[fw["o"]], "o_lat": pl["lat"].to_numpy()[fw["o"]],
                          "d_lon": pl["lon"].to_numpy()[fw["d"]], "d_lat": pl["lat"].to_numpy()[fw["d"]],
                          "count": fw["count"].to_numpy(dtype=float), "released": True})
    places = pl.loc[pl["total"].to_numpy() > 0, ["lon", "lat", "total", "members"]].reset_index(drop=True)
    places["label"] = [place_label(m, names) for m in places["members"]]
    if not places["label"].astype(bool).any():   # no names (grid squares, H3): numbered, largest first
        rank = np.argsort(np.argsort(-places["total"].to_numpy(float), kind="stable"), kind="stable") + 1
        places["label"] = [str(int(k)) for k in rank]
    at = {(round(a, 6), round(b, 6)): t for a, b, t in zip(places["lon"], places["lat"], places["label"], strict=True)}
    flows["o_place"] = [at.get((round(a, 6), round(b, 6)), "") for a, b in zip(flows["o_lon"], flows["o_lat"],
                                                                                strict=True)]
    flows["d_place"] = [at.get((round(a, 6), round(b, 6)), "") for a, b in zip(flows["d_lon"], flows["d_lat"],
                                                                                strict=True)]
    return zones, flows, places.drop(columns="members"), pic


def published_map_figure(table: pd.DataFrame, centroids: pd.DataFrame, polygons, *, title: str, settings: str,
                         top_n: int | None = None, min_count: float = 0.0, cell=None, merge: bool = True,
                         size: FigureSize | None = None, projector: bool = False, water: bool = True) -> go.Figure:
    """The published map as a figure: :func:`published_map_frames` drawn by :func:`flow_map_figure`, with the
    settings (``settings``: ε, threshold, zones, in words) and what is drawn under the title; when nothing is
    published, a map that says so and a legend without count classes. What it reads of ``table`` is the published
    rows' pairs and noisy counts alone (release --map, figures, the OD release page's download)."""
    zones, flows, places, pic = published_map_frames(table, centroids, polygons, top_n=top_n, min_count=min_count,
                                                     cell=cell, merge=merge)
    shown = pic.shown_words() if len(flows) else ""
    note = None if len(flows) else "Nothing published at these settings: no flow to draw."
    return flow_map_figure(zones, flows, title=title, count_label="noisy count",
                           subtitle=settings + (f", {shown}" if shown else ""), empty_note=note, locations=places,
                           class_edges=pic.class_edges if len(flows) else None,
                           level=pic.level_words(short=True) if len(flows) else "", size=size, projector=projector,
                           water=water)


def place_label(members: list, names: dict) -> str:
    """A place's name on a map: its heaviest zone's name from the zone file (with "+ k" for the zones merged into
    it); empty where zones have no names (grid squares, H3 cells)."""
    if not members:
        return ""
    nm = names.get(members[0])
    if nm is None or nm != nm or not str(nm).strip():
        return ""
    return str(nm) if len(members) == 1 else f"{nm} + {len(members) - 1}"


def _rgba(c, alpha: int) -> str:
    r, g, b = (round(float(v)) for v in c[:3])
    return f"rgba({r},{g},{b},{alpha / 255:.2f})"


# ---- files -----------------------------------------------------------------------------------------------------

IMAGE_FORMATS = ("png", "svg", "pdf")
BROWSER_ENV = "ODLAB_BROWSER"
"""Environment variable: path of the Chrome/Chromium used for image export, or ``none`` to act as if there is none
(how the test suite checks a machine without Chromium)."""
NO_BROWSER_MESSAGE = ("PNG/SVG/PDF export needs Google Chrome or Chromium on this machine (plotly's kaleido draws "
                      "the image with it) and none was found: install the 'chromium' package (Debian/Ubuntu) or "
                      "Chrome, or set BROWSER_PATH to it. CSV and JSON downloads work without it.")


def find_browser() -> str | None:
    """Path of the Chrome/Chromium kaleido would use, or ``None`` (``ODLAB_BROWSER=none`` forces ``None``)."""
    forced = os.environ.get(BROWSER_ENV)
    if forced is not None:
        return None if forced.strip().lower() in ("", "none", "0", "off") else forced
    return _search_browser(os.environ.get("PATH", ""), os.environ.get("BROWSER_PATH", ""), int(time.time() // 60))


@lru_cache(maxsize=4)
def _search_browser(path: str, browser_path: str, minute: int) -> str | None:
    """The search of :func:`find_browser`, remembered for the minute (every page's export buttons ask)."""
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome"):
        if p := shutil.which(name):
            return p
    try:   # kaleido's own search (BROWSER_PATH, typical install folders)
        from choreographer.browsers.chromium import Chromium

        return Chromium.find_browser(skip_local=False)
    except Exception:  # pragma: no cover - choreographer missing or changed: no browser known
        return None


def require_browser() -> str:
    """:func:`find_browser` or raise :class:`odcore.errors.MissingBrowserError` saying what is missing."""
    path = find_browser()
    if path is None:
        raise MissingBrowserError(NO_BROWSER_MESSAGE)
    return path


def image_bytes(fig: go.Figure, fmt: str, *, width_in: float = 7.0, height_in: float = 4.5, dpi: int = 300) -> bytes:
    """``fig`` as PNG/SVG/PDF bytes, ``width_in`` × ``height_in`` inches; PNG at ``dpi`` (pixels = inches × dpi,
    with the resolution written into the file), type sizes true to print (plotly's px = 1/96 in).

    Raises ``ValueError`` for an unknown format or a size/dpi out of range, and
    :class:`odcore.errors.MissingBrowserError` when no Chrome/Chromium is found (:func:`find_browser`).
    """
    fmt = fmt.lower().lstrip(".")
    if fmt not in IMAGE_FORMATS:
        raise ValueError(f"image format must be one of {', '.join(IMAGE_FORMATS)}, got {fmt!r}.")
    if not (1 <= width_in <= 40 and 1 <= height_in <= 40):
        raise ValueError(f"image size must be 1 to 40 inches a side, got {width_in:g} × {height_in:g}.")
    if not 50 <= dpi <= 1200:
        raise ValueError(f"dpi must be 50 to 1200, got dpi={dpi}.")
    require_browser()
    w, h = round(width_in * CSS_PX_PER_INCH), round(height_in * CSS_PX_PER_INCH)
    if is_flow_map(fig):   # drawn again at this size (it may grow taller to hold its legend)
        fig = flow_map_at(fig, map_size(width_in, height_in, dpi))
        h = int(fig.layout.height)
    out = render_image(fig, fmt, width=w, height=h, scale=dpi / CSS_PX_PER_INCH if fmt == "png" else 1)
    if fmt == "png":
        out = _png_with_dpi(out, dpi)
    elif fmt == "svg":
        out = stable_svg_ids(out)
    return out


_SVG_UID = re.compile(r"(defs-|legend|clip|trace)([0-9a-f]{6})(?![0-9a-f])")


def stable_svg_ids(svg: bytes) -> bytes:
    """``svg`` with plotly's random element ids (the figure's and each trace's six-hex uid, drawn anew on every
    render) replaced by a digest of the rest and a number in order of appearance: the same figure gives the same
    bytes on every render, and two figures in one page keep ids of their own.

    >>> a = stable_svg_ids(b'<g id="clip3f41a1xy"/><g class="traced653e7"/><use href="url(#clip3f41a1xy)"/>')
    >>> a == stable_svg_ids(b'<g id="clip9e0b22xy"/><g class="trace0c1d2e"/><use href="url(#clip9e0b22xy)"/>')
    True
    >>> a.count(b"clip"), a.split(b"clip")[1][:9] == a.split(b"clip")[2][:9]
    (2, True)
    """
    text = svg.decode("utf-8")
    digest = hashlib.blake2b(_SVG_UID.sub(r"\1", text).encode("utf-8"), digest_size=3).hexdigest()
    seen: dict[str, str] = {}

    def number(m: re.Match) -> str:
        return m.group(1) + digest + seen.setdefault(m.group(2), f"{len(seen) + 1:03d}")

    return _SVG_UID.sub(number, text).encode("utf-8")


def _png_with_dpi(data: bytes, dpi: int) -> bytes:
    """Write the pHYs resolution chunk (so a word processor places the image at its physical size)."""
    buf = io.BytesIO()
    Image.open(io.BytesIO(data)).save(buf, format="PNG", dpi=(dpi, dpi))
    return buf.getvalue()


# ---- the image browser ------------------------------------------------------------------------------------------
# Every PNG/SVG/PDF of the lab is drawn by :func:`render_image`, one image at a time in the whole process (a lock):
# each visitor of the dashboard runs in a thread of its own, and a render that is half done must not go to another.
# A browser is started for one image, or kept for several (:func:`image_server`, a block of the command line) or
# for the life of the process (:func:`keep_image_browser`, the dashboard: the first image starts Chromium, the next
# ones take about a second). The kept browser runs on a thread of its own with its own asyncio loop; each render is
# waited for with a deadline while the thread and the Chromium process are watched, so a browser that died (crashed,
# killed, never started) is seen within a fraction of a second, dropped, and replaced.

IMAGE_TIMEOUT_S = 180.0
"""Longest wait, in seconds, for Chromium to start and then for one image (a 600 dpi map on a loaded machine takes
tens of seconds)."""
_POLL_S = 0.2          # how often a waiting render looks at the browser's thread and process

_IMAGE_LOCK = threading.RLock()   # one render at a time in the process; image_server() blocks take it too
_kept: dict[str, Any] = {"browser": None, "holds": 0, "forever": False}


class _BrowserGone(Exception):
    """The image browser's thread or Chromium process ended (or the deadline passed) before the image came back."""

    def __init__(self, what: str, *, timed_out: bool = False) -> None:
        super().__init__(what)
        self.timed_out = timed_out


class _ImageBrowser:
    """One headless Chromium (a ``kaleido.Kaleido``) owned by a daemon thread running its asyncio loop."""

    def __init__(self, path: str, timeout: float) -> None:
        self.path = path
        self._kaleido: Any = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="odlab-image-browser", daemon=True)
        self._thread.start()
        try:
            self._wait(self._submit(self._open()), timeout, watch_process=False)
        except BaseException:
            self.close(timeout=2.0)   # half started: no need to wait long for a polite close
            raise

    async def _open(self) -> None:
        import kaleido

        # mathjax=False: no script fetched from a CDN (nothing leaves the machine; the lab's labels are not LaTeX);
        # timeout=None: the deadline is kept by _wait, one clock for start and render
        self._kaleido = kaleido.Kaleido(n=1, timeout=None, path=self.path, mathjax=False)
        await self._kaleido.open()

    def _submit(self, coro) -> concurrent.futures.Future:
        """Run ``coro`` on the browser's loop; its future holds ``(True, result)`` or ``(False, exception)``, so an
        error raised after the caller stopped waiting is still taken (asyncio would log it as never retrieved)."""
        async def outcome():
            try:
                return True, await coro
            except BaseException as e:   # handed to the waiting thread, which raises it
                return False, e

        return asyncio.run_coroutine_threadsafe(outcome(), self._loop)

    def process(self):
        """The Chromium process as started (``subprocess.Popen``), or None before it is."""
        return getattr(self._kaleido, "subprocess", None)

    def alive(self) -> bool:
        proc = self.process()
        return self._thread.is_alive() and proc is not None and proc.poll() is None

    def _wait(self, fut: concurrent.futures.Future, timeout: float, *, watch_process: bool = True) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            try:
                ok, value = fut.result(timeout=_POLL_S)
            except concurrent.futures.TimeoutError:
                pass
            else:
                if ok:
                    return value
                if watch_process and (_browser_closed(value) or not self.alive()):
                    raise _BrowserGone("stopped") from value
                raise value
            gone = not self._thread.is_alive() or (watch_process and not self.alive())
            if gone or time.monotonic() > deadline:
                fut.cancel()
                raise _BrowserGone("stopped" if gone else f"did not answer within {timeout:g} s", timed_out=not gone)

    def render(self, fig_dict: dict, opts: dict, timeout: float) -> bytes:
        if not self.alive():
            raise _BrowserGone("stopped")
        coro = self._kaleido.calc_fig(fig_dict, opts=opts, topojson=_plotly_topojson())
        return self._wait(self._submit(coro), timeout)

    def close(self, timeout: float = 10.0) -> None:
        """Close Chromium, stop the loop and its thread; kill the process if it does not go within ``timeout``."""
        k = self._kaleido
        if k is not None and self._thread.is_alive():
            try:
                ok, e = self._submit(k.close()).result(timeout=timeout)
                if not ok:
                    logging.getLogger(__name__).debug("image browser close: %r", e)
            except concurrent.futures.TimeoutError:   # a broken browser may not close: the kill below is the backstop
                logging.getLogger(__name__).debug("image browser did not close within %g s", timeout)
        proc = self.process()
        if proc is not None and proc.poll() is None:
            proc.terminate()   # choreographer's wrapper passes it on to Chromium
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout)


def _browser_closed(e: BaseException) -> bool:
    """Whether ``e`` is choreographer saying the browser or its pipe closed (Chromium ended during the call)."""
    from choreographer.errors import BrowserClosedError, ChannelClosedError

    return isinstance(e, (BrowserClosedError, ChannelClosedError))


def _plotly_topojson() -> str | None:
    """plotly's ``pio.defaults.topojson`` (where geo maps find their outlines), as ``fig.to_image`` passes it."""
    return getattr(getattr(pio, "defaults", None), "topojson", None)


def _start_browser(path: str, timeout: float) -> _ImageBrowser:
    """A new image browser, or the error a person can act on (no browser at that path, one that will not start)."""
    from choreographer.errors import BrowserFailedError, ChromeNotFoundError

    try:
        return _ImageBrowser(path, timeout)
    except (ChromeNotFoundError, FileNotFoundError, PermissionError) as e:
        raise MissingBrowserError(f"{NO_BROWSER_MESSAGE} (tried {path!r})") from e
    except (BrowserFailedError, _BrowserGone) as e:
        why = str(e.args[0] if e.args else e).rstrip(".")   # choreographer's message is a tuple of sentences
        raise ImageExportError(f"the browser that draws images ({path}) did not start: {why}. Check that it runs "
                               f"(`{path} --headless --version`), or set {BROWSER_ENV} to another Chrome/Chromium.") \
            from e


def _drop_kept_browser() -> None:
    b, _kept["browser"] = _kept["browser"], None
    if b is not None:
        b.close()


def render_image(fig: go.Figure, fmt: str, *, width: int, height: int, scale: float = 1.0,
                 timeout: float = IMAGE_TIMEOUT_S) -> bytes:
    """``fig`` drawn by Chromium (kaleido) as ``fmt`` (png, svg, pdf) bytes, ``width`` × ``height`` layout pixels,
    PNG pixels ×``scale``: the one place the lab turns a figure into an image.

    One image at a time in the process. The browser kept by :func:`image_server` or :func:`keep_image_browser` is
    used when there is one (a new one is started if it is not running); else one is started for this image and
    closed. A kept browser that stops while drawing (Chromium crashed or killed) is dropped and the image drawn
    once more in a fresh one, which is kept in its place.

    Raises :class:`odcore.errors.MissingBrowserError` when no Chrome/Chromium is found (:func:`find_browser`), and
    :class:`odcore.errors.ImageExportError` when the browser does not start or gives no image within ``timeout``
    seconds.
    """
    path = require_browser()
    fig_dict = fig.to_dict()
    opts = {"format": fmt, "width": int(width), "height": int(height), "scale": float(scale)}
    with _IMAGE_LOCK:
        keep = _kept["holds"] > 0 or _kept["forever"]
        for attempt in (1, 2):
            b = _kept["browser"]
            if keep and (b is None or b.path != path or not b.alive()):
                _drop_kept_browser()
                b = _kept["browser"] = _start_browser(path, timeout)
            elif not keep:
                b = _start_browser(path, timeout)
            try:
                return b.render(fig_dict, opts, timeout)
            except _BrowserGone as e:
                logging.getLogger(__name__).warning("image browser %s (%s image, attempt %d)", e, fmt, attempt)
                if keep:
                    _drop_kept_browser()
                if attempt == 2 or e.timed_out:
                    raise ImageExportError(f"the browser drawing the {fmt.upper()} image {e}; nothing was "
                                           "written. Try again; if it keeps failing, draw a smaller image.") from e
            finally:
                if not keep:
                    b.close()
    raise AssertionError("unreachable")  # pragma: no cover


@contextmanager
def image_server() -> Iterator[None]:
    """Keep one headless browser for the images drawn inside the block: ~10 s saved per image after the first, where
    each image otherwise starts its own Chromium. Blocks nest; the browser closes when the last one ends (unless the
    process keeps it, :func:`keep_image_browser`)."""
    with _IMAGE_LOCK:
        _kept["holds"] += 1
    try:
        yield
    finally:
        with _IMAGE_LOCK:
            _kept["holds"] -= 1
            if _kept["holds"] == 0 and not _kept["forever"]:
                _drop_kept_browser()


def keep_image_browser() -> None:
    """Keep the image browser for the life of the process (the dashboard: the first image starts Chromium, the later
    ones reuse it). It is closed when the process exits."""
    with _IMAGE_LOCK:
        if not _kept["forever"]:
            _kept["forever"] = True
            atexit.register(_close_at_exit)


def release_image_browser() -> None:
    """Undo :func:`keep_image_browser`: close the kept browser (unless an :func:`image_server` block still holds it)."""
    with _IMAGE_LOCK:
        _kept["forever"] = False
        if _kept["holds"] == 0:
            _drop_kept_browser()


def _close_at_exit() -> None:
    """Close the kept browser as the process ends; an image still being drawn on another thread gets 5 s."""
    if _IMAGE_LOCK.acquire(timeout=5.0):
        try:
            _drop_kept_browser()
        finally:
            _IMAGE_LOCK.release()
    elif (b := _kept["browser"]) is not None and (proc := b.process()) is not None:
        proc.terminate()


def image_browser_running() -> bool:
    """Whether a kept image browser is running now."""
    return image_browser_pid() is not None


def image_browser_pid() -> int | None:
    """Process id of the kept image browser while it runs (kaleido starts Chromium under a small wrapper process:
    this is the wrapper's), else ``None``: two images drawn in the same browser give the same number."""
    b = _kept["browser"]
    return b.process().pid if b is not None and b.alive() else None


def write_image(fig: go.Figure, path: str | Path, **kw: Any) -> Path:
    """Write ``fig`` to ``path``; the format comes from the suffix (.png, .svg, .pdf). See :func:`image_bytes`."""
    p = Path(path)
    p.write_bytes(image_bytes(fig, p.suffix, **kw))
    return p


# ---- charts shared by the app and the CLI ----------------------------------------------------------------------

def thin_curve(x, y, tol: float = 2e-3) -> np.ndarray:
    """Indices of the points of the polyline ``(x, y)`` worth drawing: the first and the last, and each point that
    is more than ``tol`` away (in x or in y, axis units) from the last kept one. Every dropped point lies within
    ``tol`` of a kept one, so on a unit-square chart (an ROC) 2·10⁻³ is under a pixel of a 400-pixel plot, and an
    exact ROC of ~2,000 vertices is drawn with a few hundred. The data exported with the chart stays whole.

    >>> thin_curve([0, 0.0001, 0.5, 0.5001, 1], [0, 0.0001, 0.7, 0.7, 1]).tolist()
    [0, 2, 4]
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.size <= 2:
        return np.arange(x.size)
    keep, lx, ly = [0], x[0], y[0]
    for i in range(1, x.size - 1):
        if abs(x[i] - lx) > tol or abs(y[i] - ly) > tol:
            keep.append(i)
            lx, ly = x[i], y[i]
    keep.append(x.size - 1)
    return np.asarray(keep)


def marker_lines(vlines=(), hlines=()) -> dict:
    """Layout ``shapes`` and ``annotations`` of labelled marker lines, as ``add_vline``/``add_hline`` draw them,
    for one ``fig.update_layout(**marker_lines(...))`` (each add_vline call re-lays out the whole figure, ~15 ms).

    ``vlines``: ``(x, line, text, xanchor)``, a line across the plot's height at data x, its label at the top (xanchor
    "right" = annotation_position "top left"); ``hlines``: ``(y, line, text)``, across the width, labelled at the
    right above the line. ``line``: plotly line properties (``{"dash": "dot", "color": ...}``).
    """
    shapes, notes = [], []
    for x, line, text, xanchor in vlines:
        shapes.append({"type": "line", "x0": x, "x1": x, "xref": "x", "y0": 0, "y1": 1, "yref": "y domain",
                       "line": line})
        notes.append({"showarrow": False, "text": text, "x": x, "xanchor": xanchor, "xref": "x", "y": 1,
                      "yanchor": "top", "yref": "y domain"})
    for y, line, text in hlines:
        shapes.append({"type": "line", "x0": 0, "x1": 1, "xref": "x domain", "y0": y, "y1": y, "yref": "y",
                       "line": line})
        notes.append({"showarrow": False, "text": text, "x": 1, "xanchor": "right", "xref": "x domain", "y": y,
                      "yanchor": "bottom", "yref": "y"})
    return {"shapes": shapes, "annotations": notes}


def integer_bins(values: np.ndarray, hi: float, max_bins: int = 80) -> tuple[np.ndarray, np.ndarray]:
    """Histogram of integer ``values`` on ``[0, hi]`` with bins of a whole number of units centred on integers, so
    no bin holds one more integer than its neighbour (the "comb" of float-edged bins over integer data).

    >>> h, e = integer_bins(np.array([0, 1, 1, 2, 9]), 9, max_bins=5)
    >>> e.tolist(), h.tolist()
    ([-0.5, 1.5, 3.5, 5.5, 7.5, 9.5], [3, 1, 0, 0, 1])
    """
    width = max(1, math.ceil((hi + 1) / max_bins))
    edges = np.arange(-0.5, hi + width + 0.5, width, dtype=float)
    edges = edges[: max(2, np.searchsorted(edges, hi + 0.5, side="left") + 1)]
    hist, _ = np.histogram(np.asarray(values, dtype=float), bins=edges)
    return hist, edges


def release_curve_figure(true_counts: np.ndarray, epsilon: float, threshold: float, sensitivity: float = 1.0):
    """Release probability P(c + Lap ≥ τ) against the true count c, over the histogram of the observed pairs'
    true counts (right axis, log scale: a few busy pairs next to tens of thousands of pairs of one or two people).

    Returns ``(figure, curve DataFrame[true_count, release_prob])``; style it with :func:`style`.
    """
    tc = np.asarray(true_counts, dtype=float)
    x_max = float(max(2 * threshold, np.percentile(tc, 99) if len(tc) else 1.0))
    xs = np.linspace(0, x_max, 400)
    curve = pd.DataFrame({"true_count": xs, "release_prob": release_probability(xs, epsilon, threshold,
                                                                                 sensitivity)})
    hist, edges = integer_bins(tc, x_max)
    keep = hist > 0
    fig = go.Figure([
        go.Bar(x=((edges[:-1] + edges[1:]) / 2)[keep], y=hist[keep], width=np.diff(edges)[keep],
               name="observed pairs (right axis)", yaxis="y2", marker={"color": "#9db4d3", "line": {"width": 0}}),
        go.Scatter(x=curve["true_count"], y=curve["release_prob"], mode="lines", name="P(published)",
                   line={"color": PALETTE[1], "width": 3})])
    top = max(int(hist.max()) if len(hist) else 1, 1)
    fig.update_layout(   # one layout update, the threshold's line included (add_vline would re-lay out the figure)
        **marker_lines(vlines=[(threshold, {"dash": "dot", "color": INK}, f"threshold {threshold:g}", "right")]),
        xaxis={"title": {"text": "true count (distinct people on the pair)"}, "rangemode": "tozero"},
        yaxis={"title": {"text": "probability published"}, "range": [0, 1.02], "tickformat": ".1f", "dtick": 0.2},
        yaxis2={"title": {"text": "pairs (log scale)"}, "overlaying": "y", "side": "right", "showgrid": False,
                "type": "log", "range": [-0.05, math.log10(top) * 1.08 + 0.05], "dtick": 1, "tickformat": "~s",
                "automargin": True, "ticks": "outside", "showline": True},
        legend={"x": 0.99, "xanchor": "right", "y": 0.5, "yanchor": "middle"}, barmode="overlay", bargap=0,
    )
    return fig, curve


# ---- figures for a paper or a slide ----------------------------------------------------------------------------

PAPER_FONT = "DejaVu Sans"
"""The type of exported figures: a font Chromium finds on Debian (fonts-dejavu-core comes with it), whose metrics
:func:`text_width` reads, and which :func:`embed_svg_fonts` embeds in SVG files (PDF files embed it themselves)."""
PAPER_FONT_FILE = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
PAPER_FONT_BOLD_FILE = "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf"


@dataclass(frozen=True)
class FigureSize:
    """An exported figure's size: width and height in inches, PNG resolution and the base type size in points.

    >>> FigureSize.preset("single-column").width_in
    3.5
    >>> FigureSize(3, 2, dpi=10)
    Traceback (most recent call last):
    ...
    ValueError: dpi must be 50 to 1200, got dpi=10.
    """

    width_in: float
    height_in: float
    dpi: int = 300
    font_pt: float = 8.0
    legend: str = "below"   # "below" the plot, or "right" of it

    def __post_init__(self) -> None:
        if not (1 <= self.width_in <= 40 and 1 <= self.height_in <= 40):
            raise ValueError(f"figure size must be 1 to 40 inches a side, got {self.width_in:g} × "
                             f"{self.height_in:g}.")
        if not 50 <= self.dpi <= 1200:
            raise ValueError(f"dpi must be 50 to 1200, got dpi={self.dpi}.")
        if not 5 <= self.font_pt <= 40:
            raise ValueError(f"font size must be 5 to 40 pt, got font_pt={self.font_pt:g}.")
        if self.legend not in ("below", "right"):
            raise ValueError(f"legend must be 'below' or 'right', got legend={self.legend!r}.")

    @property
    def width_px(self) -> int:
        return round(self.width_in * CSS_PX_PER_INCH)

    @property
    def height_px(self) -> int:
        return round(self.height_in * CSS_PX_PER_INCH)

    @property
    def font_px(self) -> float:
        return self.font_pt * CSS_PX_PER_INCH / 72

    @classmethod
    def preset(cls, name: str, *, dpi: int | None = None) -> FigureSize:
        """One of :data:`SIZE_PRESETS` (``single-column``, ``double-column``, ``slide``)."""
        try:
            size = SIZE_PRESETS[name]
        except KeyError:
            raise ValueError(f"size preset must be one of {', '.join(SIZE_PRESETS)}, got {name!r}.") from None
        return size if dpi is None else cls(size.width_in, size.height_in, dpi, size.font_pt, size.legend)


MAP_SIZE = FigureSize(8.0, 6.0, 300, 7.5, "right")
"""The flow map's own size (``release --map-size`` 8x6, the app's custom size): legend right of the map."""
MAP_SIZE_PROJECTOR = FigureSize(8.0, 6.0, 300, 9.75, "right")


def map_size(width_in: float, height_in: float, dpi: int = 300) -> FigureSize:
    """A flow map's size for ``width_in`` × ``height_in``: the legend right of a map at least 5 in wide, else below."""
    return FigureSize(width_in, height_in, dpi, 7.5, "right" if width_in >= 5 else "below")


SIZE_PRESETS = {
    # a journal's single column (~8.9 cm) and full page width (~17.8 cm), 8 pt type; a 16:9 slide, 20 pt type
    "single-column": FigureSize(3.5, 2.8, 600, 8.0, "below"),
    "double-column": FigureSize(7.0, 3.6, 600, 9.0, "below"),
    "slide": FigureSize(13.333, 7.5, 150, 20.0, "right"),
}


@lru_cache(maxsize=1)
def _font_metrics() -> tuple[dict[int, int], float] | None:
    """DejaVu Sans advance widths (character -> units) and units per em, or None without the font."""
    if not Path(PAPER_FONT_FILE).is_file():  # pragma: no cover - fonts-dejavu-core comes with chromium
        return None
    f = TTFont(PAPER_FONT_FILE, lazy=True)
    cmap, hmtx = f.getBestCmap(), f["hmtx"]
    return {c: hmtx[g][0] for c, g in cmap.items()}, float(f["head"].unitsPerEm)


def text_width(text: str, size_px: float) -> float:
    """Width in px of ``text`` (markup stripped) set in :data:`PAPER_FONT` at ``size_px``; an estimate of 0.62 em a
    character when the font is not available.

    >>> round(text_width("ε = 0.66", 10), 1)
    42.4
    """
    plain = re.sub(r"<[^>]+>", "", text)
    m = _font_metrics()
    if m is None:  # pragma: no cover
        return 0.62 * size_px * len(plain)
    widths, upm = m
    return sum(widths.get(ord(ch), upm * 0.62) for ch in plain) * size_px / upm


def wrap_words(text: str, width_px: float, size_px: float) -> list[str]:
    """``text`` cut at spaces into lines that each fit ``width_px`` at ``size_px`` (a word longer than the width
    keeps a line of its own: never broken inside).

    >>> wrap_words("Membership attack success against k unique trips", 120, 10)
    ['Membership attack', 'success against k', 'unique trips']
    """
    lines: list[str] = []
    for word in text.split():
        if lines and text_width(f"{lines[-1]} {word}", size_px) <= width_px:
            lines[-1] = f"{lines[-1]} {word}"
        else:
            lines.append(word)
    return lines or [""]


def for_paper(fig: go.Figure, size: FigureSize, title: str | None = None) -> go.Figure:
    """Lay ``fig`` out for an exported image of ``size``: the paper type, the title wrapped to the width (never
    clipped), the legend outside the plot area (one entry a line below the plot, or to its right), margins computed
    from what they hold. Changes and returns ``fig`` (give it a copy of a shared figure)."""
    fs = size.font_px
    if title is None:   # the layout's title, or the one a figure draws as its first annotation (the flow map)
        own = [a.text for a in fig.layout.annotations if a.name == "figure title"]
        title = fig.layout.title.text or (own[0] if own else "")
    title_fs = fs * 1.15
    pad = round(fs * 0.6)
    width, height = size.width_px, size.height_px
    # a title's own line breaks kept (the map's settings line), other markup dropped, each part wrapped to the width
    parts = [re.sub(r"<[^>]+>", "", part) for part in re.split(r"<br\s*/?>", title or "")]
    lines = [line for part in parts if part.strip() for line in wrap_words(part, width - 2 * pad, title_fs)]
    top = round(len(lines) * title_fs * 1.3 + 2 * pad) if lines else pad * 2
    if is_flow_map(fig):   # a flow map is drawn again at the size, from what it carries
        return flow_map_at(fig, size)
    shown = [t for t in fig.data if t.name and t.showlegend is not False]
    show_legend = len(shown) > 1 or (len(shown) == 1 and fig.layout.showlegend is True)
    # legend entries wrapped at spaces to the room they have (beside a 40 px symbol), never wider than the figure
    room = (width * 0.34 if size.legend == "right" else width - 2 * pad) - 48
    n_lines = 0
    for t in shown:
        wrapped = wrap_words(t.name.replace("<br>", " "), room, fs)
        t.name = "<br>".join(wrapped)
        n_lines += len(wrapped)
    legend_w = max((text_width(line, fs) for t in shown for line in t.name.split("<br>")), default=0) + 48
    groups = {t.legendgroup for t in shown if t.legendgrouptitle and t.legendgrouptitle.text}
    legend_h = (n_lines + len(groups)) * fs * 1.3 + (len(shown) + 2 * len(groups)) * 5 + 8
    # Margins computed here from the text they hold, not by plotly's automargin (which, with a legend outside the
    # plot, failed on some figures with "axis scaling").
    tick_w = text_width("10,000", fs * 0.92)
    bottom = round(fs * 3.6 + pad)        # tick labels and the x-axis title
    left = round(tick_w + fs * 2.2 + pad)
    right = pad * 2 + (round(tick_w + fs * 2.2) if "yaxis2" in fig.layout and fig.layout.yaxis2.overlaying else 0)
    legend: dict = {"bgcolor": "rgba(255,255,255,0)", "borderwidth": 0, "font": {"size": fs},
                    "orientation": "v", "traceorder": "normal", "tracegroupgap": 0, "xref": "paper", "yref": "paper"}
    if show_legend and size.legend == "right":
        right += round(legend_w + pad)
    elif show_legend:
        height = max(height, round(legend_h / 0.45))   # the figure grows rather than the plot vanish
        bottom += round(legend_h)
    # axis titles wrapped to the plot's sides (a y title longer than the plot ran into the figure's title); the x
    # title to the plot's width if the y title takes two lines
    x_text = fig.layout.xaxis.title.text if fig.layout.xaxis.title else None
    x_lines = (wrap_words(re.sub(r"<br\s*/?>", " ", x_text), width - left - right - fs * 1.25, fs)
               if x_text else [])
    x_extra = round(max(len(x_lines) - 1, 0) * fs * 1.25)
    bottom += x_extra
    plot_h = max(height - top - bottom, 10)
    y_text = fig.layout.yaxis.title.text if fig.layout.yaxis.title else None
    y_lines = wrap_words(re.sub(r"<br\s*/?>", " ", y_text), plot_h, fs) if y_text else []
    left += round(max(len(y_lines) - 1, 0) * fs * 1.25)
    plot_w = max(width - left - right, 10)
    if y_lines:
        fig.update_layout(yaxis_title_text="<br>".join(y_lines))
    if x_lines:
        fig.update_layout(xaxis_title_text="<br>".join(x_lines))
    # Legend and title in the plot's (paper) coordinates: a legend placed by container coordinates moves the
    # y-axis title into the plot, and a multi-line layout title is anchored by its first line (so its top is cut);
    # the title is therefore an annotation, anchored by its whole box.
    if size.legend == "right":
        legend.update(x=1 + pad / plot_w, xanchor="left", y=1, yanchor="top")
    else:
        legend.update(x=(pad - left) / plot_w, xanchor="left", y=-(fs * 3.6 + x_extra) / plot_h, yanchor="top")
    notes = [a for a in fig.layout.annotations if a.name != "figure title"]
    if lines:
        notes.insert(0, go.layout.Annotation(
            name="figure title", text="<br>".join(lines), showarrow=False, align="left",
            xref="paper", x=(pad - left) / plot_w, xanchor="left", yref="paper", y=1 + (pad * 0.6) / plot_h,
            yanchor="bottom", font={"size": title_fs, "family": PAPER_FONT, "color": INK}))
    fig.update_annotations(font_size=fs * 0.9)
    fig.update_layout(
        template=template(False), width=width, height=height, autosize=False,
        font={"family": PAPER_FONT, "size": fs, "color": INK}, title={"text": ""},
        legend=legend, showlegend=show_legend,
        margin={"t": top, "b": bottom, "l": left, "r": right, "pad": 0, "autoexpand": False},
    )
    fig.layout.annotations = notes   # assigned: update_layout would merge the list into the old one, item by item
    fig.update_xaxes(tickfont={"size": fs * 0.92}, title_font={"size": fs}, automargin=False, linewidth=1)
    fig.update_yaxes(tickfont={"size": fs * 0.92}, title_font={"size": fs}, automargin=False, linewidth=1)
    return fig


def embed_svg_fonts(svg: bytes) -> bytes:
    """``svg`` with :data:`PAPER_FONT` embedded: the glyphs its text uses, as an ``@font-face`` data URL (so the
    file looks the same on a machine without the font). Unchanged when the font is missing."""
    if not Path(PAPER_FONT_FILE).is_file():  # pragma: no cover
        return svg
    text = svg.decode("utf-8")
    chars = {html.unescape(t) for t in re.findall(r">([^<>]+)<", text)}
    used = "".join(sorted(set("".join(chars)) | set("0123456789.,−-–·×ε ")))
    logging.getLogger("fontTools.subset").setLevel(logging.ERROR)   # "FFTM NOT subset": a timestamp table, dropped
    # the bold face too where the text has bold (the flow map's legend titles): without it the viewer fakes bold from
    # the regular face, narrower than plotly measured, and a bold line drifts off its place
    faces = [(PAPER_FONT_FILE, "normal")]
    if "font-weight:bold" in text.replace(" ", "") and Path(PAPER_FONT_BOLD_FILE).is_file():
        faces.append((PAPER_FONT_BOLD_FILE, "bold"))
    face = "<style>"
    for file, weight in faces:
        font = TTFont(file, recalcTimestamp=False)   # the same file every time: no "modified" time in it
        sub = subset.Subsetter(options=subset.Options(name_IDs=["*"], notdef_outline=True))
        sub.populate(text=used)
        sub.subset(font)
        buf = io.BytesIO()
        font.save(buf)
        face += (f"@font-face{{font-family:'{PAPER_FONT}';font-weight:{weight};src:url(data:font/ttf;base64,"
                 f"{base64.b64encode(buf.getvalue()).decode('ascii')}) format('truetype');}}")
    face += "</style>"
    text = re.sub(r"(<svg\b[^>]*>)", lambda m: m.group(1) + face, text, count=1)
    return text.encode("utf-8")


def figure_bytes(fig: go.Figure, fmt: str, size: FigureSize) -> bytes:
    """``fig`` laid out by :func:`for_paper` at ``size`` as PNG (at ``size.dpi``), SVG (fonts embedded,
    :func:`embed_svg_fonts`) or PDF (Chromium embeds the fonts it uses). ``fig`` itself is not changed."""
    out = for_paper(go.Figure(fig), size)
    if is_flow_map(out):   # laid out for the size already: image_bytes must not draw it again at another
        return _flow_map_bytes(out, fmt, size)
    data = image_bytes(out, fmt, width_in=size.width_in, height_in=out.layout.height / CSS_PX_PER_INCH,
                       dpi=size.dpi)
    return stable_svg_ids(embed_svg_fonts(data)) if fmt.lower().lstrip(".") == "svg" else data


def _flow_map_bytes(fig: go.Figure, fmt: str, size: FigureSize) -> bytes:
    fmt = fmt.lower().lstrip(".")
    if fmt not in IMAGE_FORMATS:
        raise ValueError(f"image format must be one of {', '.join(IMAGE_FORMATS)}, got {fmt!r}.")
    require_browser()
    out = render_image(fig, fmt, width=size.width_px, height=int(fig.layout.height),
                       scale=size.dpi / CSS_PX_PER_INCH if fmt == "png" else 1)
    if fmt == "png":
        return _png_with_dpi(out, size.dpi)
    return stable_svg_ids(embed_svg_fonts(out)) if fmt == "svg" else out
