"""pydeck maps of the grid, trace density and OD flows (presentation only; the numbers come from odcore).

No base map: this lab must work offline, so ``map_style=None`` and the grid itself is drawn as the background.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pydeck as pdk

# Sequential colour ramp (light yellow -> dark blue, viridis-like but readable on white), RGB.
RAMP = np.array([[253, 231, 37], [122, 209, 81], [34, 168, 132], [42, 120, 142], [65, 68, 135], [68, 1, 84]],
                dtype=float)
GREY = [150, 150, 150]


def ramp(values: np.ndarray, vmin: float, vmax: float, alpha: int = 200) -> list[list[int]]:
    """RGBA colours of ``values`` on :data:`RAMP` between ``vmin`` and ``vmax`` (clipped)."""
    v = np.asarray(values, dtype=float)
    t = np.clip((v - vmin) / (vmax - vmin), 0, 1) if vmax > vmin else np.zeros_like(v)
    pos = t * (len(RAMP) - 1)
    i = np.minimum(pos.astype(int), len(RAMP) - 2)
    f = (pos - i)[:, None]
    rgb = RAMP[i] * (1 - f) + RAMP[i + 1] * f
    out = np.concatenate([rgb, np.full((len(v), 1), alpha)], axis=1).round().astype(int)
    return out.tolist()


def legend_html(title: str, vmin: float, vmax: float, fmt: str = "{:,.0f}", note: str = "") -> str:
    """A horizontal colour-bar legend (HTML) matching :func:`ramp`."""
    stops = ", ".join(f"rgb({r:.0f},{g:.0f},{b:.0f}) {100 * k / (len(RAMP) - 1):.0f}%"
                      for k, (r, g, b) in enumerate(RAMP))
    return (f"<div style='font-size:0.9rem;margin:0.2rem 0 0.6rem 0'><b>{title}</b>"
            f"<div style='display:flex;align-items:center;gap:0.5rem'><span>{fmt.format(vmin)}</span>"
            f"<div style='flex:0 0 240px;height:12px;border-radius:3px;background:linear-gradient(to right,{stops})'>"
            f"</div><span>{fmt.format(vmax)}</span><span style='color:#555'>{note}</span></div></div>")


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


def cell_polygons(grid, cells: np.ndarray) -> pd.DataFrame:
    """``DataFrame[cell, polygon]`` with the cell squares as lists of [lon, lat] (for a PolygonLayer)."""
    gdf = grid.polygons(np.asarray(cells, dtype=np.int64))
    import shapely

    xy = np.round(shapely.get_coordinates(gdf.geometry.to_numpy()), 6).reshape(len(gdf), 5, 2)[:, :4]
    coords = xy.tolist()
    return pd.DataFrame({"cell": gdf["cell"].to_numpy(), "polygon": coords})


class CompactDeck(pdk.Deck):
    """A :class:`pydeck.Deck` whose JSON is compact (no indentation), so the C JSON encoder is used.

    pydeck indents its JSON, which forces Python's pure-Python encoder: ~10× slower on a map of a thousand cell
    polygons, too slow for a slider change to redraw within 300 ms.
    """

    def to_json(self) -> str:
        from pydeck.bindings.json_tools import default_serialize

        return json.dumps(self, sort_keys=True, default=default_serialize, separators=(",", ":"))


def deck(layers: list, vs: pdk.ViewState, tooltip_html: str | None = "{tip}", height: int = 560) -> pdk.Deck:
    tooltip = {"html": tooltip_html, "style": {"backgroundColor": "#1b1f24", "color": "white",
                                               "fontSize": "13px"}} if tooltip_html else False
    return CompactDeck(layers=layers, initial_view_state=vs, map_style=None, map_provider=None, tooltip=tooltip,
                    height=height)


def grid_layer(cells_df: pd.DataFrame, color: list | str = "color", *, line: bool = True, pickable: bool = True,
               layer_id: str = "cells") -> pdk.Layer:
    return pdk.Layer("PolygonLayer", data=cells_df, id=layer_id, get_polygon="polygon", get_fill_color=color,
                     get_line_color=[90, 90, 90, 120], line_width_min_pixels=0.5 if line else 0, stroked=line,
                     filled=True, pickable=pickable, auto_highlight=pickable)


def arc_layer(flows: pd.DataFrame, *, width: str = "width", color: str = "color", layer_id: str = "flows",
              pickable: bool = True) -> pdk.Layer:
    return pdk.Layer("ArcLayer", data=flows, id=layer_id, get_source_position=["o_lon", "o_lat"],
                     get_target_position=["d_lon", "d_lat"], get_source_color=color, get_target_color=color,
                     get_width=width, width_min_pixels=1, width_max_pixels=14, pickable=pickable,
                     auto_highlight=pickable, great_circle=False)


def flows_frame(table: pd.DataFrame, centroids: pd.DataFrame, *, value: str, keep: np.ndarray, top_n: int,
                min_count: float, color_range: tuple[float, float]) -> pd.DataFrame:
    """Arcs for the ``top_n`` rows of ``table`` (where ``keep``) by ``value`` (>= ``min_count``), with positions,
    width/colour by ``value`` and an HTML tooltip showing origin, destination, true and noisy count and the
    release probability."""
    t = table.loc[keep & (table[value].to_numpy() >= min_count)]
    t = t.nlargest(int(top_n), value) if len(t) > top_n else t.sort_values(value, ascending=False)
    c = centroids.set_index("cell")
    o = c.reindex(t["origin"].to_numpy())
    d = c.reindex(t["destination"].to_numpy())
    out = pd.DataFrame({
        "origin": t["origin"].to_numpy(), "destination": t["destination"].to_numpy(),
        "true_count": t["true_count"].to_numpy(), "noisy_count": t["noisy_count"].to_numpy(),
        "release_prob": t["release_prob"].to_numpy(),
        "o_lat": o["lat"].to_numpy(), "o_lon": o["lon"].to_numpy(),
        "d_lat": d["lat"].to_numpy(), "d_lon": d["lon"].to_numpy(),
    })
    v = t[value].to_numpy(dtype=float)
    lo, hi = color_range
    out["width"] = 1 + 9 * np.clip((v - lo) / (hi - lo), 0, 1) if hi > lo else 2.0
    out["color"] = ramp(v, lo, hi, alpha=210)
    out["tip"] = [
        f"<b>{a} → {b}</b><br>true count: {tc:,.0f}<br>noisy count: {nc:,.1f}<br>release probability: {p:.3f}"
        for a, b, tc, nc, p in zip(out["origin"], out["destination"], out["true_count"], out["noisy_count"],
                                   out["release_prob"], strict=True)]
    return out


