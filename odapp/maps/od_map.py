"""The OD release map: published flows over the zones (or raw counts, or both side by side), its legend, the
published zones' layers and the same map as an image (:func:`map_figure`).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pydeck as pdk

from odapp.maps.context import MapContext, zones_box
from odapp.maps.deck import SCALE_BAR_RGBA, SHAPE_DIGITS, deck, layer_rows, scale_bar, scale_bar_polygon_layer
from odapp.maps.flows import (
    PLACE_TOTALS,
    RISK_HIGH_RGB,
    RISK_LOW_RGB,
    SUPPRESSED_WORDS,
    ZONE,
    ZONE_SHADE,
    zone_label,
)
from odapp.maps.zones import Inset, cell_layers, grid_layers
from odapp.shared.words import coord, num, plain
from odcore.report import figures
from odcore.report import flows as fl


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
            + "".join(row.format("".join(p)) for p in (top, mid, low)) + tail + places_html(fm.places_named)
            + "</div>")


def places_html(named: pd.DataFrame | None) -> str:
    """The places labelled on the map (:func:`places_table`) as a table that opens under the legend: which zones
    "place 3" is, for a class pointing at the map. Names from the data go through :func:`odapp.shared.words.plain`;
    in the legend's element, so a rerun sends no element more."""
    if named is None or not len(named):
        return ""
    cell = "<td style='padding:0 0.8rem 0 0;vertical-align:top'>{}</td>"
    head = "".join(f"<th style='text-align:left;padding:0 0.8rem 0 0'>{plain(c)}</th>" for c in named.columns)
    body = "".join("<tr>" + "".join(cell.format(num(v) if isinstance(v, (int, np.integer)) else plain(v)) for v in r)
                   + "</tr>"
                   for r in named.itertuples(index=False))
    return (f"<details style='margin-top:0.2rem'><summary>The {len(named)} places labelled on the map</summary>"
            f"<table style='font-size:0.8rem;border:0'><tr>{head}</tr>{body}</table></details>")


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
    places_named: pd.DataFrame | None = None   # the places labelled on the map (places_table)

    @property
    def class_labels(self) -> list[str]:
        e = self.class_edges
        return [f"{num(round(a))}–{num(round(b))}" for a, b in itertools.pairwise(e)]


def _location_label(members: list, names: dict) -> str:
    head = zone_label(members[0], names.get(members[0]))
    return head if len(members) == 1 else f"{len(members)} {ZONE}s around {head}"


def _ring_rows(polys: np.ndarray, proj) -> list:
    lon, lat = proj.lonlat(polys[..., 0], polys[..., 1])
    return np.round(np.stack([lon, lat], axis=-1), SHAPE_DIGITS).tolist()


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
        named = None
        if len(show):   # the largest places' names, under the arrows (an arrow is never hidden by a name)
            layers.append(place_label_layer(places["members"].iloc[show].tolist(), total[show], names,
                                            *proj.lonlat(lx[show] + (r_px[show] + 3.0) * kpp, ly[show])))
            named = places_table(places["members"].iloc[show].tolist(), total[show], names,
                                 f"{label}: {PLACE_TOTALS}")
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
                       analysis or risk or sup_frame is not None, n_pub, named)

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


def place_labels(members: list, totals: np.ndarray, names: dict) -> tuple[np.ndarray, list[str]]:
    """``(order, labels)``: the largest places (indices into ``members``, largest first, at most
    :data:`odcore.report.figures.PLACE_LABELS`) and their labels on the map: a zone file's names
    (:func:`odcore.report.figures.place_label`), else numbers 1, 2, … (an H3 index is no name to read aloud)."""
    totals = np.asarray(totals, dtype=float)
    order = np.argsort(-totals, kind="stable")[:figures.PLACE_LABELS]
    labels = [figures.place_label(members[i], names)[:24] for i in order.tolist()]
    if not any(labels) or all(H3_INDEX.fullmatch(t.split(" + ")[0]) for t in labels if t):   # an H3 index is no name
        labels = [str(k + 1) for k in range(len(order))]
    return order, labels


PLACE_COLUMN = "place on the map"


def places_table(members: list, totals: np.ndarray, names: dict, count_words: str) -> pd.DataFrame:
    """The places labelled on the map (:func:`place_labels`), as the table the page shows under it: each label, the
    zones merged into the place (names and ids) and the place's count of the flows drawn (``count_words``)."""
    order, labels = place_labels(members, totals, names)
    zones = [", ".join(zone_label(c, names.get(c)) for c in members[i]) for i in order.tolist()]
    return pd.DataFrame({PLACE_COLUMN: labels, "zones": zones,
                         count_words: np.asarray(totals, dtype=float)[order].round().astype(int)})


def place_label_layer(members: list, totals: np.ndarray, names: dict, lon: np.ndarray, lat: np.ndarray) -> pdk.Layer:
    """The largest places' names on the map (:data:`odcore.report.figures.PLACE_LABELS` of them, as the exported
    map): a zone file's names (:func:`odcore.report.figures.place_label`), else numbers, largest place first.
    Each is drawn right of its circle (``lon, lat``: the label's left end) where it meets no other label. H3
    hexagons are numbered too: their index is no name to read aloud."""
    order, labels = place_labels(members, totals, names)
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
