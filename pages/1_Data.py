"""Data: what was loaded, where the traces are, the grid, and total vs unique weekly trips per user."""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd
import streamlit as st

from odapp.components.map import deck_map
from odapp.data import cache as data_cache
from odapp.data.zones_ui import data_box, export_spec, zone_file
from odapp.facts import view as facts_view
from odapp.live import view as live_view
from odapp.maps import deck as map_deck
from odapp.maps import zones as map_zones
from odapp.shared import ahead, charts, guide, page_work
from odapp.shared.cli_config import release_config
from odapp.shared.errors import engine_errors
from odapp.shared.export import button_row, chart, code_caption, export_buttons, reproduce
from odapp.shared.layout import metric, page
from odapp.shared.styling import projector_mode
from odapp.shared.words import num, plain, short_path
from odcore.report.facts import PEOPLE_DATA_WHY
from odcore.space.grid import crs_label

ctx = page(
    "Data",
    "Everything starts from location traces: who was where, when. They are snapped to a grid of square cells, "
    "each person's busiest cell of each hour is kept, and a **trip** is a move to another cell in the next hour. "
    "What Google counted is **unique** trips: a commute made five times in a week counts once.",
    icon="📍",
)
guide.panel(__file__, ctx)   # this page's step of the guided tour (odapp.shared.guide)
s = ctx.settings
summ = ctx.loaded.summary
od = ctx.od
ods, density = page_work.data_summary_and_map(ctx)
picture = st.container()   # the map first; what was loaded below it

st.subheader("What was loaded")
c = st.columns(5)
facts = facts_view.of(ctx)   # one source for the people counted (odcore.report.facts)
people = facts.get("people_data")
metric(c[0], "People in the data", people.text if people else num(ods["users"]),
       help=f"{PEOPLE_DATA_WHY.capitalize()}: distinct pseudonymous people with at least one hourly location.")
metric(c[1], "Weeks", num(ods["weeks"]), f"from {od.week_starts[0]}" if od.week_starts else None,
       help="Monday-to-Sunday weeks covered by the traces.")
metric(c[2], "Rows read", num(summ["rows_read"] if "rows_read" in summ else len(ctx.loaded.df)),
       help="Lines the loader read.")
metric(c[3], "Rows kept", num(summ["rows_kept"] if "rows_kept" in summ else len(ctx.loaded.df)),
       help="Rows that entered the analysis after checks and filters.")
dropped = dict(summ.get("rows_dropped") or {})
metric(c[4], "Rows dropped", num(sum(dropped.values())), "see the reasons below" if dropped else "none",
       help="Rows removed while loading (missing values, duplicates, outside the box or dates, unknown POI).")
od_drops = {f"trips step: {k}": v for k, v in (od.stats.get("rows_dropped") or {}).items()}
with st.container():   # there with or without drops, so the map and charts below keep their place
    if dropped or od_drops:
        st.dataframe(pd.DataFrame({"reason": list(dropped) + list(od_drops),
                                   "rows": list(dropped.values()) + list(od_drops.values())}),
                     hide_index=True, width="content")
zone_text = (f"grid {ods['grid_cells']:,} cells of {ods['cell_km2']:.2f} km² ({ods['cells']:,} used) · CRS {crs_label(ods['crs'])}"
             if s.zones is None else f"zones: {plain(s.zones_label)} · {ods['grid_cells']:,} zones ({ods['cells']:,} used)")
st.caption(f"Source: {plain(short_path(summ.get('source', s.dataset.label)))} · format {summ.get('format', '?')} · "
           f"time span {summ.get('time_min', '?')} → {summ.get('time_max', '?')} · {zone_text}")

if not od.stats.get("pairs_available", True):   # an OD counts folder: no traces to map or compare
    st.info("The map of trace points, the trips histograms per person and the zone comparison need the traces; "
            "the data in use is an OD counts folder (weekly counts per zone pair). Open the OD release and Privacy "
            "budget pages, which work from the counts.")
    st.stop()

st.subheader("Where the traces are, on the grid" if s.zones is None else "Where the traces are, by zone")
deck, most, outside = density
with picture:
    deck_map(deck, height=480, key="data_map")
empty_words = ("not drawn" if not data_cache.empty_zones_drawn(od.grid)
               else "drawn as outlines" if map_zones.outline_style(od.grid) == "lines" else "drawn pale grey")
outside_words = "outside the grid" if getattr(od.grid, "kind", "square") != "polygons" else "outside every zone"
st.markdown(map_deck.legend_html("Trace points per zone (log scale)", 1, max(most, 1),
                             note=f"empty zones {empty_words} · {outside:,} points {outside_words}"
                                  + (f" · {words}" if (words := getattr(deck, "context_words", "")) else "")),
            unsafe_allow_html=True)

st.subheader(f"Total vs unique trips per user, week {s.week}")
uw = od.user_week
wk = uw[uw["week"] == s.week]
trips, uniq = wk["trips"].to_numpy(), wk["unique_trips"].to_numpy()
c = st.columns(4)
located, people_week = facts["people_located_week"], facts["people_week"]
metric(c[0], "People located this week", located.text, f"{people_week.text} with a trip: the week's people",
       help=f"{located.why.capitalize()}. The week's people ({people_week.text}) are those the guarantee card, the "
            "Attack page and the Release designer count.")
metric(c[1], "Median trips", num(float(np.median(trips))) if len(wk) else "–",
       help="All moves to another cell in the next hour, repeats included.")
metric(c[2], "Median unique trips", num(float(np.median(uniq))) if len(wk) else "–",
       help="Distinct origin–destination pairs: what enters the counts (each person adds at most 1 per pair).")
metric(c[3], "Repeats discarded", f"{100 * (1 - uniq.sum() / trips.sum()):.0f} %" if trips.sum() else "–",
       help="Share of trips that are repeats of a pair already made that week.")
# Drawn from binned counts (not one marker per user), so the page stays light with 25,000 users.
hi = int(max(trips.max() if len(trips) else 1, 1))
edges = np.arange(0, hi + 2)
h_total, _ = np.histogram(trips, bins=edges)
h_unique, _ = np.histogram(uniq, bins=edges)
hist = pd.DataFrame({"trips_in_week": edges[:-1], "users_total": h_total, "users_unique": h_unique})
pairs_tu = wk.groupby(["trips", "unique_trips"], sort=True).size().rename("users").reset_index()
left, right = st.columns(2)
with left:   # drawn in the browser (a new grid repaints it without plotly's redraw); plotly makes its files
    live_view.trips_hist(hist)
    row = button_row()
    if not projector_mode():
        # a partial, not a function defined here: that would keep the page's namespace after the session
        export_buttons(f"trips_hist_week{s.week}", fig=functools.partial(charts.trips_hist_chart, hist, projector=False),
                       data=hist, config=release_config(s, ctx.loaded), command="release", key="trips_hist", row=row)
with right:
    fig = charts.trips_tu_chart(pairs_tu, hi, projector=projector_mode())
    chart(fig, f"trips_total_unique_week{s.week}", data=pairs_tu, config=release_config(s, ctx.loaded),
          command="release", key="trips_total_unique")
st.caption("Houssiau et al. (2022): one author's 39 trips in a typical week were 32 unique trips, so 7 repeats "
           "were discarded; each unique trip is one count he is in."
           + ("" if projector_mode() else " Numbers from `odcore.od.trips.build_od`."))
trips_cfg = {k: v for k, v in release_config(s, ctx.loaded).items()
             if k in ("input", "format", "tz", "time_offset", "bbox", "cell_km2", "zones", "dataset")}
reproduce([("Loading, grid, hourly cells, trips and weekly unique OD counts (summary)", "trips", trips_cfg)])

st.subheader("Zone systems compared")
st.markdown(
    "The same traces, the same ε, threshold and week, cut into different zones. Bigger zones put more people on "
    "each pair, so more pairs and more of the user-trips clear the threshold, and each person has fewer distinct "
    "pairs; the membership attack (Houssiau et al. 2022, per user, exact) is scored on what each release "
    "publishes. Each zone system rebuilds the week's trips, so this takes a few seconds per system.")
zone_choices = {"square:0.5": "squares 0.5 km²", "square:1.3": "squares 1.3 km²", "square:5": "squares 5 km²",
                "h3:9": "H3 res 9 (0.11 km²)", "h3:8": "H3 res 8 (0.74 km²)", "h3:7": "H3 res 7 (5.2 km²)"}
zfile, zlabel = zone_file(st.session_state, data_box(summ))   # a zone file only when it covers the data
if zfile is not None:
    zone_choices[zfile] = zlabel
picked = st.multiselect("Zone systems", list(zone_choices),
                        default=["square:1.3", "h3:7", *([zfile] if zfile is not None else [])],
                        format_func=zone_choices.get, key="zones_compare_pick",
                        help="Squares and hexagons are fitted to the data; the zone file is the one chosen in the "
                             "sidebar (the bundled districts until you upload your own).")
if st.button("Compare zone systems", key="zones_compare_go", disabled=not picked, type="primary",
             help="Rebuild the week on each zone system, release it with the sidebar's ε, threshold and seed, "
                  "and attack every user."):
    st.session_state["zones_compare_on"] = tuple(picked)
if st.session_state.get("zones_compare_on"):
    specs = st.session_state["zones_compare_on"]
    with engine_errors("Could not compare the zone systems", "Pick other zone systems or another week."):
        comp = data_cache.zone_comparison(s.dataset.id, ctx.od_config.tz, specs, s.epsilon, s.threshold, s.week,
                                     s.seed, _df=ctx.loaded.df)
    comp = comp.assign(label=[zone_choices.get(z, z) for z in specs])
    fig = charts.zones_compare_chart(comp, week=s.week, epsilon=s.epsilon, threshold=s.threshold,
                                     projector=projector_mode())
    cmp_cfg = {**{k: v for k, v in trips_cfg.items() if k not in ("cell_km2", "zones")},
               "zones": [export_spec(z) for z in specs], "epsilon": s.epsilon, "threshold": s.threshold,
               "week": s.week, "seed": s.seed}
    chart(fig, f"zones_compare_week{s.week}", data=comp.drop(columns=["label"]), config=cmp_cfg,
          command="zones-compare", key="zones_compare_chart")
    show = comp[["label", "n_zones", "zone_km2", "rows_outside", "od_pairs", "pairs_published",
                 "user_trips_published_frac", "median_unique_pairs", "median_success", "share_above_90pct"]]
    st.dataframe(show.rename(columns={"label": "zones", "n_zones": "zones (count)", "zone_km2": "median km²",
                                      "rows_outside": "rows outside", "od_pairs": "pairs",
                                      "pairs_published": "published", "user_trips_published_frac":
                                      "user-trips published", "median_unique_pairs": "median k",
                                      "median_success": "attack median", "share_above_90pct": "users > 90 %"}),
                 hide_index=True, width="stretch")
    code_caption("Numbers from `odcore.report.zone_compare.compare_zones`: `odcore.od.trips.build_od` on each zone system, "
               "`odcore.privacy.release.release` (seeded) and `odcore.privacy.attack.week_risk` for every user of the week.")
ahead.after(ctx, page_work.data_summary_and_map)   # the next grid step or seed, while the person reads this one
