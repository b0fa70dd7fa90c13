"""What the OD release page computes for a week, in one place: the page draws it, and :mod:`odapp.shared.ahead` has its
first view computed while the person is still on the landing page.

Everything here goes through :mod:`odapp.release.cache` (shared by every session with the same data and settings), so a
computation done ahead is exactly the one the page would do: same function, same arguments, same cache entry.

The page's map section (:func:`map_section`, a fragment) and its downloads live here, not in the page script: a
session keeps its fragment and its deferred downloads after the run (and for two minutes after it closes), and a
function defined in a page script would keep the whole page's variables with it (this session's release, map and
tables: ~8 MB). These take only the context and the settings, and fetch what they draw from the caches.
"""

from __future__ import annotations

import functools
import time

import streamlit as st

from odapp.components.map import deck_map
from odapp.live import cache as live_cache
from odapp.maps import deck as map_deck
from odapp.maps import od_map
from odapp.maps.flows import ZONE, zone_label
from odapp.release import cache as release_cache
from odapp.shared.export import button_row, image_export
from odapp.shared.state import USER_DELTA, USER_WEEKS, DataSource
from odapp.shared.styling import projector_mode
from odapp.shared.words import empty_release_advice, num
from odcore.data.fingerprint import trace_fingerprint
from odcore.od.engines.cab_stream import fix_density_cabspotting
from odcore.privacy.release import published_table, release_csv_table
from odcore.report import figures
from odcore.report.private_report import release_reports
from odcore.report.published import (
    RELEASE_DEFAULTS,
    document_text,
    guarantee_part,
    private_sheet,
    public_record,
    public_sheet,
    published_weeks,
    release_document,
    settings_guarantee,
)
from odcore.report.sheet import data_fingerprint, release_record
from odcore.space.zones import add_zone_names, zones_summary

# The map options a person sees first (the widgets' defaults on the OD release page).
# Top N 0: "auto", as many of the largest flows as keep the map legible (odcore.report.flows.auto_top).
K_MAP_OPTIONS = "rel.map_options"   # session_state: the options the map was last drawn with (:func:`page_view`)
MAP_DEFAULTS = {"view": "Published", "top_n": 0, "min_count": 0.0, "cell": None, "show_sup": False,
                "basemap": False, "level": "Auto", "context": True, "risk": False}


def bounding_seed(settings) -> int | None:
    """Per user, the seed also picks the pairs each person keeps; per metric the exact probabilities (cells, curve)
    do not depend on it."""
    return settings.seed if settings.mode == "user_level" else None


def week_release(ctx, week: int, rcfg):
    """The week's release (:func:`odapp.release.cache.week_release`) for the context's data and seed."""
    s = ctx.settings
    return release_cache.week_release(s.dataset.id, ctx.od_config, week, rcfg, s.seed, _od=ctx.od)


def centroids(ctx):
    return release_cache.used_centroids(ctx.settings.dataset.id, ctx.od_config, _od=ctx.od)


def week_cells(ctx, rcfg, table, week: int, cent):
    """``(cell_p, cells_df, edges, layers)``: the week's cells shaded by the chance that one of their flows is
    published (exact probabilities, the same for every seed, so cached per week and release settings)."""
    s = ctx.settings
    return release_cache.release_cells(s.dataset.id, ctx.od_config, week, rcfg, bounding_seed(s), _table=table,
                               _grid=ctx.od.grid, _cent=cent)


def flow_maps(ctx, rcfg, table, week: int, cent, cells, o: dict):
    """The week's :class:`~odapp.maps.od_map.FlowMap` list for the map options ``o`` (keys of :data:`MAP_DEFAULTS`)."""
    s = ctx.settings
    context = bool(o.get("context", False))
    risk = bool(o.get("risk", False)) and ctx.od.stats.get("pairs_available", True)
    base = release_cache.risk_cells(s.dataset.id, ctx.od_config, week, rcfg, s.seed, _cells=cells, _grid=ctx.od.grid,
                            _od=ctx.od)[1] if risk else cells[3]
    return release_cache.release_map(s.dataset.id, ctx.od_config, week, rcfg, s.seed, o["view"], int(o["top_n"] or 0),
                             float(o["min_count"]), o["cell"], o["show_sup"], o["basemap"], o.get("level", "Auto"),
                             _table=table, _cent=cent,
                             _cells_df=cells[1], _edges=cells[2], _base_layers=base, context=context,
                             _context=map_context(ctx, cells[1]) if context else None, risk=risk)


def map_context(ctx, cells_df):
    """The map's offline base layer (:func:`odapp.release.cache.map_context`): water, and the image of the traces' fixes for
    uploaded traces only. A synthetic city's fixes are simulated stays round invented centres: their image is a
    speckle, not streets, and it cost the bundled city's map a textured layer (one more shader program to compile
    in a browser without a GPU) and a slower first draw and ε press in the browser benchmark (docs/flow_map.md)."""
    cabs = getattr(ctx.loaded, "cabs", None)
    if cabs is not None:      # a streamed Cabspotting upload: the image's counts read group by group, no table
        fixes = functools.partial(fix_density_cabspotting, cabs.folder, tz=ctx.loaded.tz,
                                  bbox=ctx.loaded.summary.get("bbox_used"), keep_dir=cabs.keep_dir)
        return release_cache.map_context(ctx.settings.dataset.id, ctx.od_config, _cells_df=cells_df, _fixes=fixes)
    frame = getattr(ctx.loaded, "df", None) if ctx.settings.dataset.kind == DataSource.UPLOAD else None
    return release_cache.map_context(ctx.settings.dataset.id, ctx.od_config, _cells_df=cells_df, _frame=frame)


def release_curve(ctx, rcfg, table, week: int, projector: bool):
    """``(figure, curve)``: release probability against the true count (:func:`odapp.release.cache.release_curve`)."""
    s = ctx.settings
    return release_cache.release_curve(s.dataset.id, ctx.od_config, week, rcfg, bounding_seed(s), projector,
                               _true_counts=table["true_count"].to_numpy())


def week_view(ctx, rcfg, week: int):
    """``(release, centroids, cells)`` of a week: what its map is drawn from (all from the caches)."""
    res = week_release(ctx, week, rcfg)
    cent = centroids(ctx)
    return res, cent, week_cells(ctx, rcfg, res.table, week, cent)


def first_view(ctx) -> None:
    """Compute into the caches what the OD release page shows when it is opened with these settings: the week's
    release, its cells, the map with the default options, the release-probability chart and its live tables."""
    page_view(ctx, MAP_DEFAULTS, projector=False)


def page_view(ctx, o: dict, projector: bool) -> None:
    """Compute into the caches what the OD release page shows for ``ctx`` with the map options ``o`` (keys of
    :data:`MAP_DEFAULTS`, as :func:`map_section` last drew them: :data:`K_MAP_OPTIONS`) and ``projector``."""
    s = ctx.settings
    rcfg = s.release_config()
    res, cent, cells = week_view(ctx, rcfg, s.week)
    flow_maps(ctx, rcfg, res.table, s.week, cent, cells, o)
    release_curve(ctx, rcfg, res.table, s.week, projector=projector)
    live_tables(ctx, rcfg, res.table)


def live_tables(ctx, rcfg, table) -> dict:
    """The live curves' tables of the week (:func:`odapp.live.cache.live_release`): the seed's unit draws by true count
    and the histogram of the true counts."""
    s = ctx.settings
    return live_cache.live_release(s.dataset.id, ctx.od_config, s.week, s.mode,
                              s.max_pairs if s.mode == "user_level" else None, s.seed, float(rcfg.sensitivity),
                              _scale=float(rcfg.scale), _table=table)


def published_csv(ctx, rcfg, week: int):
    """The week's published pairs, as the CLI's published.csv (the page's main download: what may be shared)."""
    return add_zone_names(published_table(week_release(ctx, week, rcfg).table, centroids(ctx), ctx.od.week_starts),
                          ctx.od.grid)


@st.cache_data(max_entries=4, show_spinner=False)
def _release_reports(dataset_id: str, od_config, week: int, rcfg, seed: int, with_map: bool, _od) -> tuple[str, str]:
    """Both reports of the week's release (:func:`odcore.report.private_report.release_reports`, the page's seed so
    the same table): (may be shared, do not share)."""
    r = release_reports(_od, week, rcfg, weeks=USER_WEEKS, delta=USER_DELTA, seed=seed, with_map=with_map)
    return r.public_html, r.private_html


def report_html(ctx, rcfg, week: int, which: str) -> str:
    """``which`` = ``"public"`` (built from the published table and the public settings only) or ``"private"``
    (with the truth: do not share), made when a button asks for it (a minute with the map and the audit)."""
    s = ctx.settings
    pub, priv = _release_reports(s.dataset.id, ctx.od_config, week, rcfg, s.seed, figures.find_browser() is not None,
                                 _od=ctx.od)
    return pub if which == "public" else priv


def report_buttons(ctx, rcfg, week: int, shared=None, private=None) -> None:
    """The two HTML reports of the week's release as downloads (the CLI's ``report``): the one that may be shared
    in ``shared``, the one with the truth in ``private`` (:func:`odapp.shared.export.button_row` rows, the page's rows of
    files that may leave the building and of those that may not; one new row for both if not given)."""
    if shared is None or private is None:
        shared = private = button_row()
    if projector_mode():   # downloads are secondary controls: hidden in projector mode, as its switch says
        return
    if not ctx.od.stats.get("pairs_available", True):
        shared.caption("The release report needs each person's pairs (traces), not an OD counts folder.")
        return
    shared.download_button("Release report (HTML)", data=functools.partial(report_html, ctx, rcfg, week, "public"),
                        file_name=f"report_week{week}.html", mime="text/html", key="rel_report_public",
                        icon=":material/description:",
                        help="One printable page that may be shared: the published map and table, the guarantee per "
                             "count and per person, the verdict on the guarantee, the attack summary. Built from the "
                             "published table and the settings only.")
    private.download_button("Report with the truth — do not share (HTML)",
                        data=functools.partial(report_html, ctx, rcfg, week, "private"),
                        file_name=f"DO_NOT_SHARE_report_week{week}.html", mime="text/html", key="rel_report_private",
                        icon=":material/lock:",
                        help="For you only: adds the release against the true counts (SMAPE, Jensen–Shannon, earth "
                             "mover's distance, top-N flows, the RMSE split), the designer's full verdict and the "
                             "audit on this week's data.")


def analysis_csv(ctx, rcfg, week: int):
    """The week's analysis table (true counts, noise, unpublished pairs; do not share), as the CLI's
    ``--analysis-out`` table."""
    return add_zone_names(release_csv_table(week_release(ctx, week, rcfg).table, centroids(ctx), ctx.od.week_starts),
                          ctx.od.grid)


@st.cache_data(max_entries=8, show_spinner=False)
def _data_facts(dataset_id: str, od_key, _frame) -> tuple[str, int, int | None]:
    """(content fingerprint, rows, people) of the data in use (hashing 1.6 M rows takes ~0.3 s: once per dataset)."""
    cols = [c for c in ("user", "time", "lat", "lon") if c in _frame.columns]
    users = int(_frame["user"].nunique()) if "user" in _frame.columns else None
    fp = trace_fingerprint(_frame) if len(cols) == 4 else data_fingerprint(_frame[cols] if cols else _frame)
    return fp, len(_frame), users


def sheet_record(ctx) -> dict:
    """The record a guarantee sheet made on a page carries (:func:`odcore.report.sheet.release_record`): the data
    in use (label, fingerprint, rows, people), the week shown, the zone system and the sidebar's settings but the
    seed."""
    s = ctx.settings
    cabs = getattr(ctx.loaded, "cabs", None)
    if cabs is not None and cabs.fingerprint:   # a streamed Cabspotting upload: hashed as it was streamed
        fp, rows, users = cabs.fingerprint, ctx.loaded.summary["rows"], ctx.loaded.summary["users"]
    else:
        frame = getattr(ctx.loaded, "df", None)
        if frame is None or not len(frame):
            frame = ctx.od.counts
        fp, rows, users = _data_facts(s.dataset.id, ctx.od_config, frame)
    settings = {k: v for k, v in s.as_dict().items() if k not in ("dataset", "seed")}
    zs = zones_summary(ctx.od.grid)
    return release_record(dataset=s.dataset.label, fingerprint=fp, rows=rows, users=users,
                          week_starts=ctx.od.week_starts, weeks_covered=[s.week], zones=zs["spec"] or zs["kind"],
                          settings=settings)


def public_record_of(ctx, trips: int | None = None) -> dict:
    """The public record of the page's release (:func:`odcore.report.published.public_record`): the week shown,
    the zone system and the sidebar's public settings; ``trips`` the assumed trips of the per-count figures. No
    figure of the data (the data holder's record is :func:`sheet_record`)."""
    s = ctx.settings
    starts = ctx.od.week_starts
    zs = zones_summary(ctx.od.grid)
    return public_record(weeks=[{"week": s.week, "start": str(starts[s.week]) if s.week < len(starts) else None}],
                         zones=zs["spec"] or zs["kind"], settings=s.as_dict(), trips=trips)


def budget_sheet_html(ctx, b: dict, delta_parts: dict | None = None) -> str:
    """The Privacy budget page's guarantee sheet, which may be shared: the public record, δ split and the trips the
    page's figures assume (:func:`odcore.report.published.public_sheet`; made when the download is clicked)."""
    user = b.get("max_pairs") is not None
    return public_sheet(b, record=public_record_of(ctx, None if user else b.get("trips")), delta_parts=delta_parts)


def private_sheet_html(ctx, b: dict, delta_parts: dict | None = None) -> str:
    """The same sheet with the data holder's record (the data's label, fingerprint, rows, people): do not share
    (:func:`odcore.report.published.private_sheet`)."""
    return private_sheet(b, record=sheet_record(ctx), delta_parts=delta_parts)


def release_json(ctx, rcfg, week: int) -> str:
    """The week's ``release.json`` as the command line writes it beside published.csv
    (:func:`odcore.report.published.release_document`): the public record, the release's settings and its
    guarantee, with the command's defaults for δ, weeks and the assumed trips
    (:data:`odcore.report.published.RELEASE_DEFAULTS`)."""
    s = ctx.settings
    pub = published_csv(ctx, rcfg, week)
    user = s.mode == "user_level"
    parts, b = settings_guarantee(epsilon=s.epsilon, threshold=s.threshold, mode=s.mode,
                                  max_pairs=s.max_pairs if user else None)
    zs = zones_summary(ctx.od.grid)
    settings = {**s.as_dict(), **RELEASE_DEFAULTS, "week": int(week)}
    if not user:
        settings.pop("max_pairs", None)
    rec = public_record(weeks=published_weeks(pub), zones=zs["spec"] or zs["kind"], settings=settings,
                        trips=RELEASE_DEFAULTS["trips"])
    doc = release_document(pub, record=rec, release={"epsilon": s.epsilon, "threshold": s.threshold,
                                                     "mode": s.mode, "max_pairs": s.max_pairs if user else None,
                                                     "noise_scale": rcfg.scale},
                           guarantee=guarantee_part(user_level=user, delta_parts=parts, budget=b))
    return document_text(doc)


def _draw(ctx, rcfg, table, week: int, cent, cells, o: dict):
    """The week's map(s) with their legend, for the map options ``o`` (``cells``: :func:`week_cells`); returns the
    drawn :class:`~odapp.maps.od_map.FlowMap` list."""
    fms = flow_maps(ctx, rcfg, table, week, cent, cells, o)
    with st.container(border=True):   # the heading, the map(s), then the legend under them (the map starts high)
        heading = f"Week {week}" + (f": {fms[0].heading}" if len(fms) == 1 else "")
        cols = st.columns(len(fms)) if len(fms) > 1 else [st.container()]
        for i, (col, fm) in enumerate(zip(cols, fms, strict=True)):
            col.markdown(f"**{fm.heading if len(fms) > 1 else heading}**")
            deck_map(fm.deck, height=460, key=None if week != ctx.settings.week else f"map_{i}", where=col)
        n_sup = int((~table["released"].to_numpy(bool)).sum())
        note = (f"{num(n_sup)} observed pairs suppressed (noisy count below {num(ctx.settings.threshold)}). Hover "
                "over an arrow, a circle or a zone for its numbers; drag to pan, scroll to zoom."
                + ("" if projector_mode() else " Flows from <code>odcore.privacy.release</code>, utility from "
                                               "<code>odcore.privacy.utility</code>.")
                + (" One week of data: no week player." if len(ctx.od.week_starts) <= 1 else ""))
        st.markdown(od_map.flow_legend_html(fms[-1],
                                          heading=f"Week {week}" if len(fms) > 1 else "", note=note),
                    unsafe_allow_html=True)
        if o["basemap"]:
            st.caption(map_deck.BASEMAP["caption"])
    return fms


def _map_image(ctx, rcfg, o: dict, projector: bool):
    """The map of the week with the options ``o`` as a styled figure (the map's image download)."""
    s = ctx.settings
    res, cent, cells = week_view(ctx, rcfg, s.week)
    settings = (f"ε = {s.epsilon:g}, threshold {num(s.threshold)}, noise scale {num(res.report['noise_scale'])}, "
                f"{s.cell_km2:g} km² cells · {s.dataset.label}")
    if o["view"] == "Published" and not o["show_sup"] and not o.get("risk", False):
        # the published view: from the published rows alone, as release --map and figures draw it
        poly = dict(zip(cells[1]["cell"].tolist(), cells[1]["polygon"].tolist(), strict=True))
        return figures.published_map_figure(
            res.table, cent, lambda ids: [poly[c] for c in ids.tolist()], title=f"Published OD flows, week {s.week}",
            settings=settings, top_n=int(o["top_n"] or 0) or None, min_count=float(o["min_count"]), cell=o["cell"],
            merge=o.get("level", "Auto") == "Auto", projector=projector, water=bool(o.get("context", False)))
    fm = flow_maps(ctx, rcfg, res.table, s.week, cent, cells, o)[-1]
    return od_map.map_figure(fm, cells[1], title=f"{od_map.ANALYSIS_WORDS}: OD flows, week {s.week}, "
                                               f"{fm.heading.lower()}",
                           subtitle=settings, projector=projector, empty_note=None if len(fm.flows) else
                           "No flow to draw: nothing is published", water=bool(o.get("context", False)))


def _cell_label(c) -> str:
    return f"all {ZONE}s" if c is None else zone_label(c)


@st.fragment
def map_section(ctx, rcfg) -> None:
    """The OD release page's map, its options and its export. A change of a map option (view, Top N, min. count,
    one zone, suppressed, base map, the week player) reruns only this part: the release, the metrics, the curve and
    the table stay. The week's release and cells come from the caches (the same entries the page just used)."""
    s = ctx.settings
    res, cent, cells = week_view(ctx, rcfg, s.week)
    table = res.table
    released = table["released"].to_numpy()
    n_weeks = max(1, len(ctx.od.week_starts))

    options = st.container(key="rel_map_options")   # projector mode keeps them in two rows (odapp.shared.projector)
    opt = options.columns([1.5, 1, 1, 1.3])
    d = MAP_DEFAULTS   # the defaults the landing page computes ahead
    # a week with nothing published opens side by side: the flows that exist, in grey, next to the empty release
    first_view = d["view"] if released.any() else "Side by side"
    view = opt[0].selectbox("Map", od_map.VIEWS, index=od_map.VIEWS.index(first_view), key="rel_view",
                            help="What is published (noisy, thresholded), the true counts before any protection, "
                                 "or what suppression removes next to what is published.")
    top_n = opt[1].number_input("Top N flows", 10, 5000, d["top_n"] or None, 10, key="rel_topn", placeholder="auto",
                                help="Draw only the N largest flows (by the count shown). Empty (auto): the largest "
                                     "pairs of places, both ways, up to 60 flows or fewer when fewer carry 80 % of "
                                     "the volume; the legend says how many of how many are drawn. Type a number for "
                                     "more.")
    min_count = opt[2].number_input("Min. count", 0, 100_000, int(d["min_count"]), 10, key="rel_min",
                                    help="Hide flows whose shown count (noisy or true) is below this.")
    busiest = cells[0].sort_values("pairs", ascending=False)["cell"].head(500).tolist()
    cell = opt[3].selectbox("One zone", [None, *busiest], key="rel_cell", format_func=_cell_label,
                            help="Show only the flows that start or end in this zone (the 500 zones with the most "
                                 "observed pairs; hover a zone on the map for its id).")
    opt2 = options.columns([1.1, 1, 1.6])   # what is drawn (the base layer's switches are under the map: it starts on the
    # first screen at 1024×768)
    merge = opt2[2].toggle("Merge nearby zones", value=d["level"] == "Auto", key="rel_level",
                           help="On: when most of the largest flows are between neighbouring zones, nearby zones "
                                "are merged into places and the flows between places are drawn (the legend says "
                                "how far). Off, or with one zone chosen: every zone on its own.")
    level = od_map.LEVELS[0] if merge else od_map.LEVELS[1]
    show_sup = opt2[0].toggle("Suppressed", value=d["show_sup"], key="rel_faint",
                              help="Also draw pairs that were observed but not published, as thin grey arrows "
                                   "(the largest, up to Top N).")
    basemap = st.session_state.get("rel_basemap", d["basemap"])     # their switches are drawn under the map
    context = st.session_state.get("rel_context", d["context"])
    has_pairs = ctx.od.stats.get("pairs_available", True)
    risk = opt2[1].toggle("Per-person risk", value=d["risk"], key="rel_risk", disabled=not has_pairs,
                          help="Shade the zones by the chance that an attacker who knows everyone else's data and a "
                               "person's trips of the week tells whether that person is in the data (the Attack "
                               "page's figure for every person), for the people who start a trip in the zone: the "
                               "median, and in the tooltip the highest. Computed for every person of the week: a second "
                               "or two for each new ε or threshold." if has_pairs else
                               "Needs each person's trips: an OD counts folder has only the counts.")
    play = st.session_state.get("rel_play", False) and n_weeks > 1   # the week player's button, under the map

    empty_note = st.empty()   # there whether or not the release is empty, so the map below keeps its place
    if not released.any():
        empty_note.warning(empty_release_advice(table["true_count"].to_numpy(), s.threshold, s.epsilon,
                                                rcfg.sensitivity), icon=":material/visibility_off:")

    o = {"view": view, "top_n": int(top_n or 0), "min_count": float(min_count), "cell": cell, "show_sup": show_sup,
         "basemap": basemap, "level": level, "context": context, "risk": risk}
    st.session_state[K_MAP_OPTIONS] = o
    slot = st.empty()
    if play:
        for w in range(n_weeks):
            with slot.container():
                res_w, _, cells_w = week_view(ctx, rcfg, w)
                _draw(ctx, rcfg, res_w.table, w, cent, cells_w, o)
            time.sleep(1.0)
    with slot.container():
        _draw(ctx, rcfg, table, s.week, cent, cells, o)
    st.toggle("Streets & water", value=d["context"], key="rel_context",
              help="An offline base layer: water from a bundled coastline (Natural Earth) and a grey image of where "
                   "the data's GPS fixes lie (on taxi traces, the streets). Drawn on this machine: nothing is fetched.")
    st.toggle("Base map", value=d["basemap"], key="rel_basemap",
              help="Draw streets and coastline under the grid. Off by default: nothing leaves this machine. On: your "
                   "browser fetches the map from CARTO (no key needed).")
    if n_weeks > 1:
        st.button(f"▶ Play weeks 0–{n_weeks - 1}", key="rel_play",
                  help="Show each week's published flows in turn (about one second each).")
    if view == "Side by side":
        sup = table.loc[~released]
        st.caption(f"Suppression removed {num(len(sup))} of {num(len(table))} pairs, carrying "
                   f"{num(int(sup['true_count'].sum()))} of {num(int(table['true_count'].sum()))} user-trips: the "
                   "grey arrows on the left (between the places of the published flows, largest first, up to Top N) "
                   "are flows that exist but are never published; the coloured arrows on the right are published.")

    image_export(functools.partial(_map_image, ctx, rcfg, o, projector_mode()), f"od_map_week{s.week}",
                 key="od_map", width_in=8, height_in=6,
                 label="Download this map as an image (PNG, SVG, PDF) with legend and scale bar")
