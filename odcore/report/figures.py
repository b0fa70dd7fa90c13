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

import base64
import html
import io
import itertools
import logging
import math
import os
import re
import shutil
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from fontTools import subset
from fontTools.ttLib import TTFont
from PIL import Image

from odcore.errors import MissingBrowserError
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
                    cell_label: str = "P(a flow leaving it is published)", subtitle: str = "",
                    projector: bool = False, empty_note: str | None = None, locations: pd.DataFrame | None = None,
                    class_edges=None, level: str = "", water: bool = True) -> go.Figure:
    """The flow map as a plotly figure, the same picture as the dashboard's map: zones shaded by the chance that a
    flow leaving them is published (five classes), flows as curved arrows in four count classes (width and
    colour), places as circles sized by their totals, suppressed flows thin and grey, a scale bar; the legend in a
    column of its own right of the map (:data:`LEGEND_PX` wide at any size, every class listed, type ≥ 7.5 pt).

    Parameters
    ----------
    cells
        ``DataFrame[cell, polygon, value]``: ``polygon`` is a list of ``[lon, lat]`` corners
        (:func:`odcore.space.grid.SquareGrid.polygons`), ``value`` in [0, 1] shades the cell (NaN: outline only).
    flows
        ``DataFrame[o_lon, o_lat, d_lon, d_lat, count]`` (one row per drawn flow); a ``released`` column, where
        present, marks the suppressed flows (False), drawn thin and grey.
    title, subtitle
        Figure title and a smaller line under it (settings).
    count_label
        What ``count`` is (legend title of the arrows).
    empty_note
        Text written over the map when ``flows`` is empty (why, and what to change).
    locations
        ``DataFrame[lon, lat, total]``: the places' circles (area ∝ total); by default each flow end, sized by the
        counts drawn.
    class_edges
        The count classes' edges (default: four equal classes of the drawn counts,
        :func:`odcore.report.flows.class_bounds`).
    level
        What level is shown (zones, or nearby zones merged), written under the title.
    water
        Draw water under the zones (the bundled Natural Earth coastline, :func:`odcore.report.basemap.water_rings`)
        and list it in the legend, where the map's box has any.
    """
    big = 1.3 if projector else 1.0
    font = LEGEND_FONT_PX * big
    fig = go.Figure()
    polys = [np.asarray(p, float) for p in cells["polygon"]] if len(cells) else []
    pts = [p for p in polys if len(p)]
    if len(flows):
        pts.append(flows[["o_lon", "o_lat"]].to_numpy(float))
        pts.append(flows[["d_lon", "d_lat"]].to_numpy(float))
    allp = np.concatenate(pts) if pts else np.zeros((1, 2))
    lon0, lat0 = float(np.nanmean(allp[:, 0])), float(np.nanmean(allp[:, 1]))
    kx, ky = km_per_deg_lon(lat0), KM_PER_DEG_LAT

    def proj(lon, lat):
        return (np.asarray(lon, float) - lon0) * kx, (np.asarray(lat, float) - lat0) * ky

    ax, ay = proj(allp[:, 0], allp[:, 1])
    x_lo, x_hi = float(np.nanmin(ax)), float(np.nanmax(ax))
    y_lo, y_hi = float(np.nanmin(ay)), float(np.nanmax(ay))
    span = max(x_hi - x_lo, y_hi - y_lo, 0.5)
    km_px = span / 220          # km per px of a map about 220 px across (a 3.5 in figure); larger maps: finer

    # water under everything (islands white again over it), where the bundled coastline has any in the map's box
    sea = []
    if water:   # the box and half its size again on every side: the axes keep the map's aspect, so may widen
        lo_a, la_a = (x_lo - span / 2) / kx + lon0, (y_lo - span / 2) / ky + lat0
        lo_b, la_b = (x_hi + span / 2) / kx + lon0, (y_hi + span / 2) / ky + lat0
        sea = basemap.water_rings(lo_a, lo_b, la_a, la_b, tolerance=span / 600 / kx)
    for k, colour in ((0, _rgb(WATER_RGB)), (1, "white")):
        xs, ys = [], []
        for poly in sea:
            for ring in (poly[:1] if k == 0 else poly[1:]):
                a = np.asarray(ring, float)
                x, y = proj(a[:, 0], a[:, 1])
                xs += [*x.tolist(), float(x[0]), None]
                ys += [*y.tolist(), float(y[0]), None]
        if xs:
            fig.add_scatter(x=xs, y=ys, mode="lines", fill="toself", fillcolor=colour, hoverinfo="skip",
                            line={"width": 0}, showlegend=False)

    # zones: five shade classes of value, one filled trace each (None-separated rings)
    vals = cells["value"].to_numpy(float) if len(cells) else np.zeros(0)
    p_edges = np.linspace(0, 1, P_CLASSES + 1)
    p_cols = [_rgb(mix(CELL_LOW_RGB, CELL_HIGH_RGB, np.array([(i + 0.5) / P_CLASSES]))[0]) for i in range(P_CLASSES)]
    for i in range(P_CLASSES):
        sel = np.flatnonzero((vals >= p_edges[i]) & ((vals < p_edges[i + 1]) | (i == P_CLASSES - 1)))
        if not len(sel):
            continue
        xs: list[float | None] = []
        ys: list[float | None] = []
        for j in sel:
            x, y = proj(polys[j][:, 0], polys[j][:, 1])
            xs += [*x.tolist(), float(x[0]), None]
            ys += [*y.tolist(), float(y[0]), None]
        fig.add_scatter(x=xs, y=ys, mode="lines", fill="toself", fillcolor=p_cols[i], hoverinfo="skip",
                        line={"color": "rgba(255,255,255,0.8)", "width": 0.4}, showlegend=False)
    outline = np.flatnonzero(np.isnan(vals))
    if len(outline):
        xs, ys = [], []
        for j in outline:
            x, y = proj(polys[j][:, 0], polys[j][:, 1])
            xs += [*x.tolist(), float(x[0]), None]
            ys += [*y.tolist(), float(y[0]), None]
        fig.add_scatter(x=xs, y=ys, mode="lines", line={"color": "rgba(90,90,90,0.35)", "width": 0.5},
                        hoverinfo="skip", showlegend=False)

    # places: circles, area ∝ total (under the arrows)
    rel = flows["released"].to_numpy(bool) if "released" in flows.columns else np.ones(len(flows), bool)
    pub = flows.loc[rel]
    if locations is None and len(pub):
        ends = pd.concat([pub[["o_lon", "o_lat", "count"]].set_axis(["lon", "lat", "total"], axis=1),
                          pub[["d_lon", "d_lat", "count"]].set_axis(["lon", "lat", "total"], axis=1)])
        locations = ends.groupby(["lon", "lat"], as_index=False)["total"].sum()
    r_of = {}
    if locations is not None and len(locations):
        tot = locations["total"].to_numpy(float)
        r = (2.5 + 7.0 * np.sqrt(tot / max(float(tot.max()), 1e-9))) * big
        lx, ly = proj(locations["lon"], locations["lat"])
        fig.add_scatter(x=lx, y=ly, mode="markers", hoverinfo="skip", showlegend=False,
                        marker={"size": 2 * r, "color": "rgba(255,255,255,0.85)",
                                "line": {"color": _rgb(LOCATION_RGB), "width": 1.2}})
        r_of = {(round(a, 6), round(b, 6)): float(v) for a, b, v in
                zip(locations["lon"], locations["lat"], r, strict=True)}

    # flows: curved arrows, a line per count class and a head at the destination's circle
    if class_edges is None:
        lo, hi = (float(np.nanmin(pub["count"])), float(np.nanmax(pub["count"]))) if len(pub) else (0.0, 1.0)
        class_edges = fl.class_bounds(lo, hi if hi > lo else lo + 1.0)
    class_edges = np.asarray(class_edges, float)

    def draw(sub, cls, widths, colours, head_px):
        ox, oy = proj(sub["o_lon"], sub["o_lat"])
        dx, dy = proj(sub["d_lon"], sub["d_lat"])
        g0 = np.array([r_of.get((round(a, 6), round(b, 6)), 0.0) for a, b in zip(sub["o_lon"], sub["o_lat"],
                                                                                   strict=True)]) * km_px
        g1 = np.array([r_of.get((round(a, 6), round(b, 6)), 0.0) for a, b in zip(sub["d_lon"], sub["d_lat"],
                                                                                   strict=True)]) * km_px
        cx, cy = fl.curves(ox, oy, dx, dy, gap0=g0, gap1=g1)
        for c in np.unique(cls):
            sel = np.flatnonzero(cls == c)
            xs, ys = [], []
            for j in sel:
                xs += [*cx[j].tolist(), None]
                ys += [*cy[j].tolist(), None]
            fig.add_scatter(x=xs, y=ys, mode="lines", line={"color": colours[c], "width": widths[c] * big},
                            hoverinfo="skip", showlegend=False)
            ux, uy = cx[sel, -1] - cx[sel, -3], cy[sel, -1] - cy[sel, -3]
            un = np.hypot(ux, uy)
            un = np.where(un > 0, un, 1.0)
            size = max(head_px, 2.2 * widths[c]) * big
            back = 0.4 * size * km_px   # the triangle's centre a little before the end: its tip on the end
            fig.add_scatter(x=cx[sel, -1] - ux / un * back, y=cy[sel, -1] - uy / un * back, mode="markers",
                            hoverinfo="skip", showlegend=False,
                            marker={"symbol": "triangle-up", "size": size, "color": colours[c],
                                    "angle": (90 - np.degrees(np.arctan2(uy, ux))).tolist(), "line": {"width": 0}})

    sup = flows.loc[~rel]
    if len(sup):
        draw(sup, np.zeros(len(sup), int), [1.0], [_rgba(SUPPRESSED_RGB, 150)], 5.0)
    if len(pub):
        cls = fl.classes(pub["count"].to_numpy(float), class_edges)
        draw(pub, cls, [FIGURE_WIDTH_SCALE * w for w in FLOW_CLASS_WIDTH_PX], [_rgba(c, a) for c, a in zip(FLOW_CLASS_RGB, FLOW_CLASS_ALPHA,
                                                                                 strict=True)], 7.0)

    # scale bar (bottom left, under the data)
    pad = 0.03 * span
    bar = nice_km(x_hi - x_lo)
    bx0, by0 = x_lo, y_lo - 2.0 * pad
    tick = 0.3 * pad
    fig.add_scatter(x=[bx0, bx0, bx0 + bar, bx0 + bar], y=[by0 + tick, by0, by0, by0 + tick], mode="lines",
                    line={"color": INK, "width": 1.5 * big}, hoverinfo="skip", showlegend=False)
    # its label from the bar's left end (centred on a short bar, it ran out of the map's area at the left)
    fig.add_annotation(x=bx0, y=by0, yshift=2, text=f"{bar:g} km", showarrow=False, xanchor="left",
                       yanchor="bottom", font={"size": font, "color": INK})
    if empty_note:
        fig.add_annotation(x=(x_lo + x_hi) / 2, y=(y_lo + y_hi) / 2, text=empty_note, showarrow=False,
                           bgcolor="rgba(255,255,255,0.9)", bordercolor="#9aa3ad", borderwidth=1,
                           font={"size": font + 1, "color": INK})

    # the title as an annotation over the plot area's top left corner, the first of the figure's annotations (where
    # for_paper finds it): it grows upwards, line by line
    head = f"<b>{_wrap(title, 44)}</b>"
    small = " · ".join(x for x in (subtitle, level) if x)
    if small:
        head += f"<br><span style='font-size:{font:.1f}px'>{_wrap(small, 54)}</span>"
    n_lines = 1 + head.count("<br>")
    fig.layout.annotations = [go.layout.Annotation(
        name="figure title", xref="paper", yref="paper", x=0, y=1, xanchor="left", yanchor="bottom", yshift=4,
        showarrow=False, align="left", text=head, font={"size": 12 * big, "color": INK}), *fig.layout.annotations]

    # the legend: a framed column of px-placed rows right of the map (anchored at the plot area's top right corner,
    # outside the data area); the frame is an annotation without text or fill (name "legend"; annotations lie over
    # shapes, so a filled frame would hide the swatches), the rows' texts and swatches
    # are named "legend" too, so that for_paper can scale them to a paper's type
    rows: list[tuple] = []     # (kind, text, swatch)
    rows.append(("title", f"Flows: {count_label}", None))
    for i, (a, b) in enumerate(itertools.pairwise(class_edges.tolist())):
        rows.append(("line", count_label_text(a, b), (i, FLOW_CLASS_WIDTH_PX[i])))
    if len(sup):
        rows.append(("sup", f"suppressed ({len(sup):,})", None))
    rows.append(("circle", "place (size: people)", None))
    rows.append(("title", "Zones: chance at least", None))   # the words of the dashboard's legend and tooltips
    rows.append(("title", "one flow leaving is published", None))
    for i in range(P_CLASSES):
        rows.append(("box", f"{p_edges[i]:.1f}–{p_edges[i + 1]:.1f}", i))
    if sea:
        rows.append(("water", "water (Natural Earth)", None))
    row_h = LEGEND_ROW_PX * big
    gap, inner = LEGEND_GAP_PX * big, 4 * big      # plot area to frame; frame to its rows
    x_sw, x_tx = gap + 8 * big, gap + 35 * big
    # the frame fits its widest row (bold titles ~10 % wider than text_width's regular type, and a margin for a
    # screen font a little wider than the paper's)
    frame_w = max((x_sw if kind == "title" else x_tx) - gap + text_width(text, font) * (1.1 if kind == "title"
                                                                                       else 1.04)
                  for kind, text, _ in rows) + 8 * big
    frame_h = len(rows) * row_h + 2 * inner
    fig.add_annotation(name="legend", xref="paper", yref="paper", x=1, y=1, xanchor="left", yanchor="top",
                       xshift=gap, text=" ", width=frame_w, height=frame_h, borderpad=0, showarrow=False,
                       bgcolor="rgba(0,0,0,0)", bordercolor="#9aa3ad", borderwidth=1, font={"size": font, "color": INK})
    for k, (kind, text, sw) in enumerate(rows):
        yc = -(k + 0.5) * row_h - inner
        fig.add_annotation(name="legend", xref="paper", yref="paper", x=1, y=1, xanchor="left", yanchor="middle",
                           xshift=x_sw if kind == "title" else x_tx, yshift=yc, showarrow=False,
                           text=f"<b>{text}</b>" if kind == "title" else text,
                           font={"size": font, "color": INK})
        common = {"name": "legend", "xref": "paper", "yref": "paper", "xsizemode": "pixel", "ysizemode": "pixel",
                  "xanchor": 1, "yanchor": 1}
        if kind == "line":
            i, w = sw
            fig.add_shape(type="line", x0=x_sw, x1=x_sw + 22 * big, y0=yc, y1=yc,
                          line={"color": _rgb(FLOW_CLASS_RGB[i]), "width": FIGURE_WIDTH_SCALE * w * big}, **common)
        elif kind == "sup":
            fig.add_shape(type="line", x0=x_sw, x1=x_sw + 22 * big, y0=yc, y1=yc,
                          line={"color": _rgb(SUPPRESSED_RGB), "width": 1.0 * big}, **common)
        elif kind == "circle":
            fig.add_shape(type="circle", x0=x_sw + 6 * big, x1=x_sw + 15 * big, y0=yc - 4.5 * big,
                          y1=yc + 4.5 * big, line={"color": _rgb(LOCATION_RGB), "width": 1.2},
                          fillcolor="white", **common)
        elif kind in ("box", "water"):
            fig.add_shape(type="rect", x0=x_sw, x1=x_sw + 22 * big, y0=yc - 4.5 * big, y1=yc + 4.5 * big,
                          line={"color": "#9aa3ad", "width": 0.5},
                          fillcolor=p_cols[sw] if kind == "box" else _rgb(WATER_RGB), **common)

    style(fig, None, height=max(640, round(frame_h + 60 + 14.5 * big * n_lines)), projector=projector)
    fig.update_layout(
        xaxis={"visible": False, "range": [x_lo - pad, x_hi + pad], "showgrid": False},
        yaxis={"visible": False, "range": [by0 - 1.5 * pad, y_hi + pad], "scaleanchor": "x", "scaleratio": 1,
               "showgrid": False},
        showlegend=False,
        margin={"l": 4, "r": round(gap + frame_w + 4 * big), "t": 10 + 14.5 * big * n_lines, "b": 4},
        meta={FLOW_MAP_META: {"font_px": font, "legend_width_px": gap + frame_w, "legend_height_px": frame_h}},
    )
    return fig


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
    out = fig.to_image(format=fmt, width=w, height=h, scale=dpi / CSS_PX_PER_INCH if fmt == "png" else 1)
    if fmt == "png":
        out = _png_with_dpi(out, dpi)
    elif fmt == "svg":
        out = stable_svg_ids(out)
    return out


_SVG_UID = re.compile(r"(defs-|legend|clip|trace)([0-9a-f]{6})(?![0-9a-f])")


def stable_svg_ids(svg: bytes) -> bytes:
    """``svg`` with plotly's random element ids (the figure's and each trace's six-hex uid, drawn anew on every
    render) numbered in order of appearance: the same figure gives the same bytes on every render.

    >>> stable_svg_ids(b'<g id="clip3f41a1xy"/><g class="traced653e7"/><use href="url(#clip3f41a1xy)"/>')
    b'<g id="clip000001xy"/><g class="trace000002"/><use href="url(#clip000001xy)"/>'
    """
    text = svg.decode("utf-8")
    seen: dict[str, str] = {}

    def number(m: re.Match) -> str:
        return m.group(1) + seen.setdefault(m.group(2), f"{len(seen) + 1:06d}")

    return _SVG_UID.sub(number, text).encode("utf-8")


def _png_with_dpi(data: bytes, dpi: int) -> bytes:
    """Write the pHYs resolution chunk (so a word processor places the image at its physical size)."""
    buf = io.BytesIO()
    Image.open(io.BytesIO(data)).save(buf, format="PNG", dpi=(dpi, dpi))
    return buf.getvalue()


@contextmanager
def image_server() -> Iterator[None]:
    """Keep one headless browser for the images drawn inside the block (kaleido's sync server): ~10 s saved per
    image after the first, where each image otherwise starts its own Chromium. Without kaleido's server API the
    block runs as it is."""
    try:
        import kaleido

        kaleido.start_sync_server(silence_warnings=True)
    except (ImportError, AttributeError):  # pragma: no cover - kaleido < 1.0
        yield
        return
    try:
        with warnings.catch_warnings():   # plotly notes that the server ignores per-call browser options: none given
            warnings.filterwarnings("ignore", message="The kopts argument is ignored")
            yield
    finally:
        kaleido.stop_sync_server(silence_warnings=True)


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
    if isinstance(fig.layout.meta, dict) and FLOW_MAP_META in fig.layout.meta:
        return flow_map_for_paper(fig, size, lines, top)
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


def flow_map_for_paper(fig: go.Figure, size: FigureSize, title_lines: list[str], top: int) -> go.Figure:
    """:func:`for_paper` for a :func:`flow_map_figure`: its framed legend column (annotations and shapes named
    ``legend``) scaled to the paper's annotation type (never under 7 pt), the right margin made as wide as the
    column, the figure taller where the column is longer than the map, the title (``title_lines``, ``top`` px
    high) wrapped above the map. Changes and returns ``fig``."""
    fs = size.font_px
    pad = round(fs * 0.6)
    meta = fig.layout.meta[FLOW_MAP_META]
    note_fs = max(fs * 0.9, MIN_PAPER_PT * CSS_PX_PER_INCH / 72)
    k = note_fs / float(meta["font_px"])
    notes = []
    for a in fig.layout.annotations:
        if a.name == "figure title":
            continue
        if a.name == "legend":
            a.update(xshift=(a.xshift or 0) * k, yshift=(a.yshift or 0) * k)
            if a.width:
                a.update(width=a.width * k, height=a.height * k)
        notes.append(a)
    for sh in fig.layout.shapes:
        if sh.name == "legend":
            sh.update(x0=sh.x0 * k, x1=sh.x1 * k, y0=sh.y0 * k, y1=sh.y1 * k,
                      line_width=(sh.line.width if sh.line.width is not None else 1) * k)
    right = round(float(meta["legend_width_px"]) * k + pad)
    height = max(size.height_px, round(top + float(meta["legend_height_px"]) * k + 2 * pad))
    plot_h = max(height - top - pad, 10)
    if title_lines:
        notes.insert(0, go.layout.Annotation(
            name="figure title", text="<br>".join(title_lines), showarrow=False, align="left",
            xref="paper", x=0, xanchor="left", yref="paper", y=1 + (pad * 0.6) / plot_h,
            yanchor="bottom", font={"size": fs * 1.15, "family": PAPER_FONT, "color": INK}))
    for a in notes[1 if title_lines else 0:]:
        a.font.size = note_fs
    fig.update_layout(
        template=template(False), width=size.width_px, height=height, autosize=False,
        font={"family": PAPER_FONT, "size": fs, "color": INK}, title={"text": ""}, showlegend=False,
        margin={"t": top, "b": pad, "l": pad, "r": right, "pad": 0, "autoexpand": False},
    )
    fig.layout.annotations = notes
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
        font = TTFont(file, recalcTimestamp=False)   # the font's own dates: the same file on every run
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
    data = image_bytes(out, fmt, width_in=size.width_in, height_in=out.layout.height / CSS_PX_PER_INCH,
                       dpi=size.dpi)
    return embed_svg_fonts(data) if fmt.lower().lstrip(".") == "svg" else data
