"""The rows a flow map draws: which flows, their tooltips, the zones' shades (chance a flow leaving is published)
and the per-person risk by origin zone, with the words tooltips and legends share."""

from __future__ import annotations

import numpy as np
import pandas as pd

from odapp.maps.deck import DIGITS
from odapp.shared.words import coord, num
from odcore.report import figures

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
    (``head``). A zone is named as the flows name it (``centroids``' names, :func:`odapp.release.cache.used_centroids`: none
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
