"""OD release: the week's flows as published (noised, thresholded) or raw, on a map, with what it costs."""

from __future__ import annotations

import streamlit as st

from odapp import guide, maps
from odapp import release_view as rv
from odapp.cli_config import release_config
from odapp.errors import engine_errors
from odapp.export import chart, export_buttons, image_export, projector_mode, reproduce
from odapp.layout import metric, page
from odapp.words import empty_release_advice, num, pct, unit_words
from odcore.release import release_csv_table
from odcore.utility import noise_dominated, release_utility
from odcore.zones import add_zone_names

ctx = page(
    "OD release",
    "This is what gets published: for each pair of cells, how many distinct people travelled between them this "
    "week, **plus random noise**, and only if the noisy number reaches the threshold. Busy flows survive almost "
    "unchanged; small flows — the ones that could single someone out — mostly disappear.",
    icon="🧭",
)
guide.panel(__file__, ctx)   # this page's step of the guided tour (odapp.guide)
s = ctx.settings
with engine_errors("Could not release the week", "Check ε, the threshold and the guarantee unit in the sidebar."):
    rcfg = s.release_config()
    res = rv.week_release(ctx, s.week, rcfg)
table = res.table
util = release_utility(table)
cent = rv.centroids(ctx)

released = table["released"].to_numpy()
n_weeks = max(1, len(ctx.od.week_starts))


def week_cells(tbl, week):
    """Cells of a week's table (:func:`odapp.release_view.week_cells`)."""
    return rv.week_cells(ctx, rcfg, tbl, week, cent)


week_maps = week_cells(table, s.week)
cell_p, cells_df, _ = week_maps


def draw(tbl, cells, week, o: dict):
    """The week's map(s) with their legend, for the map options ``o`` (``cells``: :func:`week_cells`); returns the
    drawn :class:`~odapp.maps.FlowMap` list."""
    fms = rv.flow_maps(ctx, rcfg, tbl, week, cent, cells, o)
    with st.container(border=True):
        st.markdown(maps.flow_legend_html(fms[-1].count_label, fms[-1].lo, fms[-1].hi, fms[-1].km,
                                          suppressed=any(f.suppressed for f in fms),
                                          heading=f"Week {week}" + (f": {fms[0].heading}" if len(fms) == 1 else "")),
                    unsafe_allow_html=True)
        cols = st.columns(len(fms)) if len(fms) > 1 else [st.container()]
        for i, (col, fm) in enumerate(zip(cols, fms, strict=True)):
            if len(fms) > 1:
                col.markdown(f"**{fm.heading}**")
            col.pydeck_chart(fm.deck, height=460, key=None if week != s.week else f"map_{i}")
        if o["basemap"]:
            st.caption(maps.BASEMAP["caption"])
    return fms


@st.fragment
def map_section():
    """The map, its options and its export. A change of a map option (view, Top N, min. count, one cell, suppressed,
    base map, the week player) reruns only this part: the release, the metrics, the curve and the table stay."""
    opt = st.columns([1.5, 1, 1, 1.3])
    d = rv.MAP_DEFAULTS   # the defaults the landing page computes ahead
    view = opt[0].selectbox("Map", maps.VIEWS, index=maps.VIEWS.index(d["view"]), key="rel_view",
                            help="What is published (noisy, thresholded), the true counts before any protection, "
                                 "or what suppression removes next to what is published.")
    top_n = opt[1].number_input("Top N flows", 10, 5000, d["top_n"], 10, key="rel_topn",
                                help="Draw only the N largest flows (by the count shown) to keep the map readable.")
    min_count = opt[2].number_input("Min. count", 0, 100_000, int(d["min_count"]), 10, key="rel_min",
                                    help="Hide flows whose shown count (noisy or true) is below this.")
    busiest = cell_p.sort_values("pairs", ascending=False)["cell"].head(500).tolist()
    cell = opt[3].selectbox("One cell", [None, *busiest], key="rel_cell",
                            format_func=lambda c: "all cells" if c is None else f"cell {c}",
                            help="Show only the flows that start or end in this cell (the 500 cells with the most "
                                 "observed pairs; hover a cell on the map for its id).")
    opt2 = st.columns([1.1, 1, 1.6])
    show_sup = opt2[0].toggle("Suppressed", value=d["show_sup"], key="rel_faint",
                              help="Also draw pairs that were observed but not published, as thin red lines "
                                   "(at most 3000).")
    basemap = opt2[1].toggle("Base map", value=d["basemap"], key="rel_basemap",
                             help="Draw streets and coastline under the grid. Off by default: nothing leaves this "
                                  "machine. On: your browser fetches the map from CARTO (no key needed).")
    if n_weeks > 1:
        play = opt2[2].button(f"▶ Play weeks 0–{n_weeks - 1}", key="rel_play",
                              help="Show each week's published flows in turn (about one second each).")
    else:
        play = False
        opt2[2].caption("One week of data: no week player.")

    empty_note = st.empty()   # there whether or not the release is empty, so the map below keeps its place
    if not released.any():
        empty_note.warning(empty_release_advice(table["true_count"].to_numpy(), s.threshold, s.epsilon,
                                                rcfg.sensitivity), icon=":material/visibility_off:")

    o = {"view": view, "top_n": int(top_n), "min_count": float(min_count), "cell": cell, "show_sup": show_sup,
         "basemap": basemap}
    slot = st.empty()
    if play:
        import time

        for w in range(n_weeks):
            with slot.container():
                t_w = rv.week_release(ctx, w, rcfg).table
                draw(t_w, week_cells(t_w, w), w, o)
            time.sleep(1.0)
    with slot.container():
        fms = draw(table, week_maps, s.week, o)
    flows = fms[-1].flows
    n_sup = int((~released).sum())
    st.caption(f"{num(n_sup)} observed pairs suppressed (noisy count below {num(s.threshold)}); {num(len(flows))} "
               "flows drawn. Hover over an arc or a cell for its numbers; drag to pan, scroll to zoom, right-drag to "
               "tilt. Flows from `odcore.release`, utility from `odcore.utility`.")
    if view == "Side by side":
        sup = table.loc[~released]
        st.caption(f"Suppression removed {num(len(sup))} of {num(len(table))} pairs, carrying "
                   f"{num(int(sup['true_count'].sum()))} of {num(int(table['true_count'].sum()))} user-trips: the "
                   "red lines on the left (largest first, up to Top N) are flows that exist but are never published.")

    def map_image():
        return maps.map_figure(fms[-1], cells_df, title=f"OD flows, week {s.week}: {fms[-1].heading.lower()}",
                               subtitle=f"ε = {s.epsilon:g}, threshold {num(s.threshold)}, noise scale "
                                        f"{num(res.report['noise_scale'])}, {s.cell_km2:g} km² cells · "
                                        f"{s.dataset.label}",
                               projector=projector_mode(),
                               empty_note=None if len(flows) else "No flow to draw: nothing is published")

    image_export(map_image, f"od_map_week{s.week}", key="od_map", width_in=8, height_in=6,
                 label="Download this map as an image (PNG, SVG, PDF) with legend and scale bar")


map_section()

st.subheader(f"Week {s.week}: what is published")
c = st.columns(3)
metric(c[0], "Pairs published", num(util["pairs_published"]),
       f"of {num(util['pairs_total'])} observed pairs ({pct(util['pairs_published_frac'])})" if util["pairs_total"]
       else None,
       help="Origin–destination pairs whose noisy count reached the threshold.")
metric(c[1], "Trips published", num(util["trips_published"]),
       f"of {num(util['trips_total'])} user-trips ({pct(util['trips_published_frac'])})" if util["trips_total"]
       else None,
       help="Unique user trips on the published pairs (each person counts once per pair).")
metric(c[2], "Mean rel. error", pct(util["mean_relative_error"]) if util["pairs_published"] else "–",
       "of the published counts", help="Mean |noisy − true| / true over published pairs.")
c = st.columns(3)
metric(c[0], "Expected published", num(round(util.get("pairs_published_expected", float("nan")), 1)),
       "pairs, averaged over noise draws",
       help="Sum of the exact release probabilities: what the count above averages to over noise draws.")
metric(c[1], "Noise scale", num(res.report["noise_scale"]),
       f"Laplace, ε {unit_words(s.mode)}",
       help="Scale b of the Laplace noise: sensitivity / ε. Its standard deviation is b·√2.")
noisy_pub = int(noise_dominated(table, s.threshold))
metric(c[2], "Published but mostly noise", num(noisy_pub), f"pairs with under {num(s.threshold / 2)} people",
       help="Published pairs whose true count is under half the threshold: their value is mostly noise.")
noise_note = st.empty()   # there whether or not anything is published, so the chart below keeps its place
if util["pairs_published"]:
    noise_note.caption(
        f"{noisy_pub:,} of the {util['pairs_published']:,} published pairs have a true count under "
        f"{s.threshold / 2:g} (half the threshold): their published value is mostly noise"
        + (f" (noise scale {num(res.report['noise_scale'])} = {s.max_pairs}/ε, since ε is {unit_words(s.mode)})"
           if s.mode == "user_level" else "")
        + ". The mean relative error compares published counts with the true number of people on the pair"
        + (", before contribution bounding, so it also counts the trips bounding left out." if s.mode == "user_level"
           else "."))

cli_config = release_config(s, ctx.loaded)

st.subheader("Which flows survive: release probability against the true count")
fig, curve = rv.release_curve(ctx, rcfg, table, s.week, projector_mode())
chart(fig, f"release_probability_week{s.week}", data=curve, config=cli_config, command="release", key="rel_prob")

st.subheader("The published table")
if released.any():
    pub = table.loc[released].sort_values("noisy_count", ascending=False)
    st.dataframe(pub, hide_index=True, width="stretch", height=300,
                 column_config={"noisy_count": st.column_config.NumberColumn(format="%.1f"),
                                "noise": st.column_config.NumberColumn(format="%.2f"),
                                "release_prob": st.column_config.NumberColumn(format="%.3f")})
else:
    st.info("Empty: no pair reached the threshold this week (see the note above the map for what to change).")
export_buttons(f"release_week{s.week}", data=lambda: add_zone_names(release_csv_table(table, cent), ctx.od.grid),
               config=cli_config, command="release", key="rel_table")
st.caption("The CSV holds every observed pair of the week (published or not) with its true count, noise, noisy "
           "count, exact release probability and the centres of both cells (as the CLI's release.csv).")
reproduce([("The week's release (release.csv, release.parquet, summary.json)", "release", cli_config)])
