"""Data: what was loaded, where the traces are, the grid, and total vs unique weekly trips per user."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from odapp import cache, guide, maps
from odapp.cli_config import release_config
from odapp.export import chart, reproduce, styled
from odapp.layout import metric, page
from odapp.words import num, short_path

MAX_GRID_CELLS_DRAWN = 20_000

ctx = page(
    "Data",
    "Everything starts from location traces: who was where, when. They are snapped to a grid of square cells, "
    "each person's busiest cell of each hour is kept, and a **trip** is a move to another cell in the next hour. "
    "What Google counted is **unique** trips: a commute made five times in a week counts once.",
    icon="📍",
)
guide.panel(__file__, ctx)   # this page's step of the guided tour (odapp.guide)
s = ctx.settings
summ = ctx.loaded.summary
od = ctx.od
ods = od.summary(threshold=int(s.threshold))

st.subheader("What was loaded")
c = st.columns(5)
metric(c[0], "Users", num(ods["users"]), help="Distinct pseudonymous users with at least one hourly location.")
metric(c[1], "Weeks", num(ods["weeks"]), f"from {od.week_starts[0]}" if od.week_starts else None,
       help="Monday-to-Sunday weeks covered by the traces.")
metric(c[2], "Rows read", num(summ.get("rows_read", len(ctx.loaded.df))), help="Lines the loader read.")
metric(c[3], "Rows kept", num(summ.get("rows_kept", len(ctx.loaded.df))),
       help="Rows that entered the analysis after checks and filters.")
dropped = dict(summ.get("rows_dropped") or {})
metric(c[4], "Rows dropped", num(sum(dropped.values())), "see the reasons below" if dropped else "none",
       help="Rows removed while loading (missing values, duplicates, outside the box or dates, unknown POI).")
od_drops = {f"trips step: {k}": v for k, v in (od.stats.get("rows_dropped") or {}).items()}
if dropped or od_drops:
    st.dataframe(pd.DataFrame({"reason": list(dropped) + list(od_drops),
                               "rows": list(dropped.values()) + list(od_drops.values())}),
                 hide_index=True, width="content")
st.caption(f"Source: {short_path(summ.get('source', s.dataset.label))} · format {summ.get('format', '?')} · "
           f"time span {summ.get('time_min', '?')} → {summ.get('time_max', '?')} · grid {ods['grid_cells']:,} cells "
           f"of {ods['cell_km2']:.2f} km² ({ods['cells']:,} used) · CRS {ods['crs']}")

st.subheader("Where the traces are, on the grid")
density, outside = cache.cell_density(s.dataset.id, ctx.od_config, _df=ctx.loaded.df, _grid=od.grid)
draw = density if od.grid.n_cells <= MAX_GRID_CELLS_DRAWN else density[density["points"] > 0]
shapes = cache.cell_shapes(s.dataset.id, ctx.od_config, None if len(draw) == od.grid.n_cells
                           else tuple(int(x) for x in draw["cell"]), _grid=od.grid)
cells_df = shapes.merge(draw, on="cell")
logp = np.log10(cells_df["points"].to_numpy() + 1)
vmax = float(logp.max()) if len(logp) else 1.0
empty = cells_df["points"].to_numpy() == 0
cells_df["color"] = [[255, 255, 255, 0] if e else c
                     for c, e in zip(maps.ramp(logp, 0, vmax, alpha=190), empty, strict=True)]
cells_df["tip"] = [f"cell {c}\n{num(int(p))} trace points" for c, p in zip(cells_df["cell"], cells_df["points"],
                                                                          strict=True)]
cent = od.grid.centroids(cells_df.loc[~empty, "cell"].to_numpy())
st.pydeck_chart(maps.deck([maps.grid_layer(cells_df), *maps.scale_bar_layers(cent["lat"], cent["lon"])],
                          maps.view_state(cent["lat"], cent["lon"], height_px=480)),
                height=480, key="data_map")
st.markdown(maps.legend_html("Trace points per cell (log scale)", 1, 10 ** vmax,
                             note=f"· empty cells drawn as outlines · {outside:,} points outside the grid"),
            unsafe_allow_html=True)

st.subheader(f"Total vs unique trips per user, week {s.week}")
uw = od.user_week
wk = uw[uw["week"] == s.week]
trips, uniq = wk["trips"].to_numpy(), wk["unique_trips"].to_numpy()
c = st.columns(4)
metric(c[0], "Users active this week", num(len(wk)))
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
with left:
    fig = go.Figure()   # step outlines: one value per integer, no bar edges to alias into a comb
    fig.add_scatter(x=hist["trips_in_week"], y=hist["users_total"], name="total trips", mode="lines",
                    line={"shape": "hvh", "width": 2}, fill="tozeroy")
    fig.add_scatter(x=hist["trips_in_week"], y=hist["users_unique"], name="unique trips", mode="lines",
                    line={"shape": "hvh", "width": 2}, fill="tozeroy")
    styled(fig, "Distribution over users")
    fig.update_layout(xaxis_title="trips in the week", yaxis_title="users", yaxis_rangemode="tozero",
                      legend={"x": 0.99, "xanchor": "right"})
    chart(fig, f"trips_hist_week{s.week}", data=hist, config=release_config(s, ctx.loaded), command="release",
          key="trips_hist")
with right:
    fig = go.Figure()
    fig.add_scatter(x=pairs_tu["trips"], y=pairs_tu["unique_trips"], mode="markers", name="users",
                    marker={"size": 4 + 10 * np.sqrt(pairs_tu["users"] / max(pairs_tu["users"].max(), 1)),
                            "opacity": 0.5},
                    customdata=pairs_tu["users"], hovertemplate="%{x} trips, %{y} unique: %{customdata} users")
    fig.add_scatter(x=[0, hi], y=[0, hi], mode="lines", name="every trip unique", line={"dash": "dot"})
    fig.add_scatter(x=[39], y=[32], mode="markers+text", name="Houssiau et al.: 39 → 32",
                    text=["39 → 32"], textposition="top center", marker={"size": 12, "symbol": "star"})
    styled(fig, "Each user: total vs unique (marker size = users)")
    fig.update_layout(xaxis_title="total trips", yaxis_title="unique trips")
    chart(fig, f"trips_scatter_week{s.week}", data=pairs_tu, config=release_config(s, ctx.loaded),
          command="release", key="trips_scatter")
st.caption("Houssiau et al. (2022): one author's 39 trips in a typical week were 32 unique trips, so 7 repeats "
           "were discarded; each unique trip is one count he is in. Numbers from `odcore.trips.build_od`.")
trips_cfg = {k: v for k, v in release_config(s, ctx.loaded).items()
             if k in ("input", "format", "tz", "time_offset", "bbox", "cell_km2", "dataset")}
reproduce([("Loading, grid, hourly cells, trips and weekly unique OD counts (summary)", "trips", trips_cfg)])
