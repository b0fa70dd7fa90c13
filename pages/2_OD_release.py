"""OD release: the week's flows as published (noised, thresholded) or raw, on a map, with what it costs."""

from __future__ import annotations

import functools

import streamlit as st

from odapp.live import view as live_view
from odapp.release import view as rv
from odapp.shared import ahead, guide
from odapp.shared.cli_config import release_config
from odapp.shared.errors import engine_errors
from odapp.shared.export import button_row, export_buttons, reproduce
from odapp.shared.layout import metric, page
from odapp.shared.styling import projector_mode
from odapp.shared.words import num, pct, unit_words
from odcore.privacy.release import ANALYSIS_NOTICE, PUBLISHED_COLUMNS
from odcore.privacy.utility import noise_dominated, release_utility

ctx = page(
    "OD release",
    "This is what gets published: for each pair of cells, how many distinct people travelled between them this "
    "week, **plus random noise**, and only if the noisy number reaches the threshold. Busy flows survive almost "
    "unchanged; small flows — the ones that could single someone out — mostly disappear.",
    icon="🧭", live=("epsilon", "threshold"),
)
guide.panel(__file__, ctx)   # this page's step of the guided tour (odapp.shared.guide)
s = ctx.settings
with engine_errors("Could not release the week", "Check ε and the threshold (above the curves) and the guarantee unit in the sidebar."):
    rcfg = s.release_config()
    res = rv.week_release(ctx, s.week, rcfg)
table = res.table
util = release_utility(table)
released = table["released"].to_numpy()

rv.map_section(ctx, rcfg)   # the map, its options and export: a fragment of its own (odapp.release.view)

st.subheader(f"Week {s.week}: what is published")
# six metrics in three columns, two to a column (two rows of columns made fourteen elements and blocks, these ten)
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
live_view.release(ctx, rcfg, table)
row = button_row()   # there in both modes, so what follows keeps its place (updated, not rebuilt)
if not projector_mode():   # the curve at the page's ε and threshold, as files (plotly)
    export_buttons(f"DO_NOT_SHARE_release_probability_week{s.week}", fig=fig, data=curve, config=cli_config, command="release",
                   key="rel_prob", row=row)

st.subheader("The published table")
if released.any():
    pub = table.loc[released].sort_values("noisy_count", ascending=False)
    # on screen as in the file that may be shared (its columns, those the table holds): nothing else
    st.dataframe(pub[[c for c in PUBLISHED_COLUMNS if c in pub.columns]], hide_index=True, width="stretch",
                 height=300, column_config={"noisy_count": st.column_config.NumberColumn(format="%.1f")})
    with st.expander("The same pairs with their true counts and noise (analysis view: do not share)"):
        st.dataframe(pub, hide_index=True, width="stretch", height=300,
                     column_config={"noisy_count": st.column_config.NumberColumn(format="%.1f"),
                                    "noise": st.column_config.NumberColumn(format="%.2f"),
                                    "release_prob": st.column_config.NumberColumn(format="%.3f")})
else:
    st.info("Empty: no pair reached the threshold this week (see the note above the map for what to change).")
# the files in two rows, one block each: what may leave the building, then what may not
shared, private = button_row(), button_row()
# no settings file beside the published table: its seed would let anyone take the noise off, its input names the
# data; the command line's settings come with the analysis table (do not share), the public record is release.json
export_buttons(f"published_week{s.week}", data=functools.partial(rv.published_csv, ctx, rcfg, s.week),
               key="rel_table", csv_label="Published table (CSV)",
               csv_help="What may be shared: the published pairs only, with their noisy counts, names and centres "
                        "(as the CLI's published.csv). Nothing about unpublished pairs, no true counts, no noise.",
               row=shared)
if not projector_mode():   # downloads hidden in projector mode
    shared.download_button("release.json", functools.partial(rv.release_json, ctx, rcfg, s.week),
                           file_name=f"release_week{s.week}.json", mime="application/json", on_click="ignore",
                           key="rel_record", icon=":material/description:",
                           help="What may be shared beside the published table: its record (week, zones, settings "
                                "but the seed) and guarantee, as the command line's release.json. No figure of the "
                                "data.")
export_buttons(f"DO_NOT_SHARE_analysis_week{s.week}", data=functools.partial(rv.analysis_csv, ctx, rcfg, s.week),
               config=cli_config, command="release", key="rel_analysis",
               csv_label="Analysis table — do not share (CSV)", csv_first_line=ANALYSIS_NOTICE,
               csv_help="For you only: every observed pair (published or not) with its true count, noise, noisy "
                        "count and exact release probability. It discloses what the release protects.",
               row=private)
rv.report_buttons(ctx, rcfg, s.week, shared, private)
st.caption("The published table and the release report are what may leave the building. The analysis table holds "
           "every observed pair with its true count and noise, as the command line's analysis table does, and the "
           "report with the truth compares the release with those counts: do not share them.")
reproduce([("The week's release (published.csv, release.json, guarantee_sheet.html)", "release", cli_config)])
# the next grid step or seed, while the person reads this one: what this page shows, with the map's options as drawn
ahead.after(ctx, functools.partial(rv.page_view, o=dict(st.session_state.get(rv.K_MAP_OPTIONS, rv.MAP_DEFAULTS)),
                                   projector=projector_mode()))
