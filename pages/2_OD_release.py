"""OD release: the week's flows as published (noised, thresholded) or raw, on a map, with what it costs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from odapp import cache, maps
from odapp.cli_config import release_config
from odapp.errors import engine_errors
from odapp.export import chart, export_buttons, reproduce, styled
from odapp.layout import metric, page
from odapp.words import num, pct
from odcore.release import cell_release_probability, release_probability
from odcore.utility import release_utility

ctx = page(
    "OD release",
    "This is what gets published: for each pair of cells, how many distinct people travelled between them this "
    "week, **plus random noise**, and only if the noisy number reaches the threshold. Busy flows survive almost "
    "unchanged; small flows — the ones that could single someone out — mostly disappear.",
    icon="🧭",
)
s = ctx.settings
with engine_errors("Could not release the week", "Check ε, the threshold and the guarantee unit in the sidebar."):
    rcfg = s.release_config()
    res = cache.week_release(s.dataset.id, ctx.od_config, s.week, rcfg, s.seed, _od=ctx.od)
table = res.table
util = release_utility(table)
cent = cache.used_centroids(s.dataset.id, ctx.od_config, _od=ctx.od)

st.subheader(f"Week {s.week}: what is published")
c = st.columns(5)
metric(c[0], "Pairs published", f"{util['pairs_published']:,}",
       f"of {util['pairs_total']:,} observed pairs ({pct(util['pairs_published_frac'])})" if util["pairs_total"]
       else None,
       help="Origin–destination pairs whose noisy count reached the threshold.")
metric(c[1], "Trips published", f"{util['trips_published']:,}",
       f"of {util['trips_total']:,} user-trips ({pct(util['trips_published_frac'])})" if util["trips_total"]
       else None,
       help="Unique user trips on the published pairs (each person counts once per pair).")
metric(c[2], "Mean relative error", pct(util["mean_relative_error"]) if util["pairs_published"] else "–",
       "of the published counts", help="Mean |noisy − true| / true over published pairs.")
metric(c[3], "Expected published", num(round(util.get("pairs_published_expected", float("nan")), 1)),
       help="Sum of the exact release probabilities: what the count above averages to over noise draws.")
metric(c[4], "Noise scale", num(res.report["noise_scale"]),
       f"Laplace, {'per user' if s.mode == 'user_level' else 'per count'}",
       help="Scale b of the Laplace noise: sensitivity / ε. Its standard deviation is b·√2.")

opt = st.columns([2, 1, 1, 1])
view = opt[0].radio("Show", ["Noised release", "Raw counts", "Side by side"], horizontal=True, key="rel_view",
                    help="The published (noised, thresholded) flows, the true counts before any protection, or "
                         "both maps next to each other.")
top_n = opt[1].slider("Top N flows", 10, 2000, 300, 10, key="rel_topn",
                      help="Draw only the N largest flows (by the count shown) to keep the map readable.")
min_count = opt[2].number_input("Minimum count", 0, 100_000, 0, 10, key="rel_min",
                                help="Hide flows whose shown count (noisy or true) is below this.")
faint = opt[3].toggle("Draw suppressed pairs faintly", value=False, key="rel_faint",
                      help="Pairs that were observed but not published, as thin grey lines (at most 3000).")

released = table["released"].to_numpy()
vmax = float(max(table["noisy_count"].max(skipna=True) if released.any() else 1.0, table["true_count"].max(), 1))
crange = (float(s.threshold) * 0.9, vmax)

cell_p = cell_release_probability(table)
shapes = cache.cell_shapes(s.dataset.id, ctx.od_config, tuple(int(x) for x in cell_p["cell"]), _grid=ctx.od.grid)
cells_df = shapes.merge(cell_p, on="cell")
cells_df["color"] = [[31, 95, 168, int(a)] for a in 20 + 170 * cells_df["release_prob_any"].to_numpy()]
cells_df["tip"] = [f"<b>cell {c}</b><br>{n} outgoing pairs<br>P(at least one published): {p:.3f}"
                   for c, n, p in zip(cells_df["cell"], cells_df["pairs"], cells_df["release_prob_any"], strict=True)]
vs = maps.view_state(cent["lat"], cent["lon"], pitch=30)


def flows_deck(raw: bool):
    value = "true_count" if raw else "noisy_count"
    keep = np.ones(len(table), bool) if raw else released
    flows = maps.flows_frame(table, cent, value=value, keep=keep, top_n=top_n, min_count=min_count,
                             color_range=crange)
    layers = [maps.grid_layer(cells_df, layer_id="cells")]
    if faint and not raw:
        sup = table.loc[~released].nlargest(3000, "true_count")
        sup_df = maps.flows_frame(sup, cent, value="true_count", keep=np.ones(len(sup), bool), top_n=3000,
                                  min_count=0, color_range=crange)
        layers.append(maps.pdk.Layer("LineLayer", data=sup_df, id="suppressed",
                                     get_source_position=["o_lon", "o_lat"], get_target_position=["d_lon", "d_lat"],
                                     get_color=[120, 120, 120, 60], get_width=1, pickable=True))
    layers.append(maps.arc_layer(flows))
    return maps.deck(layers, vs, height=540), flows


def legend():
    st.markdown(maps.legend_html("Flow count (arc colour and width)", crange[0], crange[1]) +
                "<div style='font-size:0.9rem'><span style='display:inline-block;width:14px;height:12px;"
                "background:rgba(31,95,168,0.75);margin-right:6px'></span>cells: darker = more likely that at "
                "least one flow leaving the cell is published</div>", unsafe_allow_html=True)


if view == "Side by side":
    left, right = st.columns(2)
    with left:
        st.markdown("**Raw counts** (never published)")
        deck_raw, _ = flows_deck(True)
        st.pydeck_chart(deck_raw, height=520, key="map_raw")
    with right:
        st.markdown(f"**Published**: noisy counts ≥ {s.threshold:g}")
        deck_pub, flows = flows_deck(False)
        st.pydeck_chart(deck_pub, height=520, key="map_pub")
else:
    deck_one, flows = flows_deck(view == "Raw counts")
    st.pydeck_chart(deck_one, height=560, key="map_one")
legend()
n_sup = int((~released).sum())
st.caption(f"{n_sup:,} observed pairs suppressed (noisy count below {s.threshold:g}); {len(flows):,} flows drawn. "
           "Hover over an arc or a cell for its numbers. Flows from `odcore.release`, utility from `odcore.utility`.")

cli_config = release_config(s, ctx.loaded)

st.subheader("Which flows survive: release probability against the true count")
x_max = float(max(2 * s.threshold, np.percentile(table["true_count"], 99) if len(table) else 1))
xs = np.linspace(0, x_max, 400)
curve = pd.DataFrame({"true_count": xs,
                      "release_prob": release_probability(xs, s.epsilon, s.threshold, rcfg.sensitivity)})
hist, edges = np.histogram(table["true_count"].to_numpy(), bins=80, range=(0, x_max))
fig = go.Figure()
fig.add_bar(x=(edges[:-1] + edges[1:]) / 2, y=hist, width=np.diff(edges), name="observed pairs", yaxis="y2",
            opacity=0.35)
fig.add_scatter(x=curve["true_count"], y=curve["release_prob"], mode="lines", name="P(published)")
fig.add_vline(x=s.threshold, line_dash="dot", annotation_text=f"threshold {s.threshold:g}")
styled(fig, f"ε = {s.epsilon:g}, threshold {s.threshold:g}, noise scale {res.report['noise_scale']:.3g}")
fig.update_layout(xaxis_title="true count (distinct users on the pair)", yaxis_title="probability published",
                  yaxis2={"title": "pairs", "overlaying": "y", "side": "right", "showgrid": False},
                  legend={"x": 0.01, "y": 0.99})
chart(fig, f"release_probability_week{s.week}", data=curve, config=cli_config, command="release", key="rel_prob")

st.subheader("The published table")
pub = table.loc[released].sort_values("noisy_count", ascending=False)
st.dataframe(pub, hide_index=True, width="stretch", height=300,
             column_config={"noisy_count": st.column_config.NumberColumn(format="%.1f"),
                            "noise": st.column_config.NumberColumn(format="%.2f"),
                            "release_prob": st.column_config.NumberColumn(format="%.3f")})
export_buttons(f"release_week{s.week}", data=table, config=cli_config, command="release", key="rel_table")
st.caption("The CSV holds every observed pair of the week (published or not) with its true count, noise, noisy "
           "count and exact release probability.")
reproduce([("The week's release (release.csv, release.parquet, summary.json)", "release", cli_config)])
