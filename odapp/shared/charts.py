"""The pages' charts, each built once per set of inputs and shared by every rerun and session.

Building a plotly figure (its traces, the lab's template, marker lines and axes) took 55–60 % of the Privacy budget
page's script time on every rerun and ~40 % of the Attack page's, also when nothing the charts show had changed
(the threshold, the seed, the grid or the prior leave the budget curves as they are). Each function here takes
*everything its chart shows* as arguments (tables and arrays hashed by value, the numbers in titles and labels,
projector mode), so a rerun with the same arguments gets the same figure object from the cache, Streamlit sends the
same spec and the browser does not redraw it. A builder must not read anything else (session state, settings): what
it does not take cannot change its chart. The figures are shared by reruns and sessions: nothing may change them
after they are returned (:func:`odapp.shared.export.chart` only reads them). ``tests/app/test_charts.py`` checks that every
page draws the same specs as building the figures afresh would.
"""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from odapp.attack import cache as attack_cache
from odapp.budget import cache as budget_cache
from odapp.maps.deck import ramp_stops
from odapp.shared.words import chart_text, comparison_label, num, pct, unit_words
from odcore.report import figures
from odcore.report.figures import thin_curve
from odcore.report.teaching import noise_picture

# ---- Privacy budget ---------------------------------------------------------------------------------------------

@st.cache_resource(max_entries=32, show_spinner=False)
def trips_chart(vs_trips: pd.DataFrame, *, delta: float, max_pairs: int, trips: int, typical: int, week: int,
                e_count: float, epsilon: float, user_mode: bool, projector: bool) -> go.Figure:
    """ε of one user-week against the number of unique trips, with the markers of ``trips`` and the median user."""
    fig = go.Figure()
    for col, name in (("basic", "basic composition <i>n·ε</i>"), ("advanced", f"advanced (δ' = {delta:.0e})"),
                      ("rdp", "Rényi-DP bound"), ("tight", f"tight ε(δ = {delta:.0e})"),
                      ("person_tight", f"{unit_words('user_level')}, max {max_pairs} pairs (tight)")):
        if col in vs_trips:
            fig.add_scatter(x=vs_trips["trips"], y=vs_trips[col], mode="lines", name=name,
                            line={"width": 4} if col == "person_tight" else None)
    # The marker lines in one layout update (figures.marker_lines: what add_vline/add_hline draw, without their
    # per-call re-layout of the whole figure, ~20 ms a rerun).
    marks = [(int(trips), {"dash": "dot", "color": "#888"}, f"n = {int(trips)}", "left")]
    if typical:
        marks.append((typical, {"dash": "dash", "color": "#1b9e77"}, f"median user, week {week}", "right"))
    figures.style(fig, ("ε per person and week" if user_mode else "ε of a person's week, added up over their trips")
                  + f", per-count ε = {e_count:.3g}" + (
        f" (noise {max_pairs}/ε; {unit_words('user_level')} ε = {epsilon:g})" if user_mode else ""),
        projector=projector)
    fig.update_layout(xaxis_title="unique trips n in the week", yaxis_title="ε of the user-week",
                      **figures.marker_lines(marks, [(7, {"dash": "dot", "color": "#d95f02"},
                                                      "ε = 7, top of the usual range")]))
    return fig


@st.cache_resource(max_entries=32, show_spinner=False)
def weeks_chart(over_weeks: pd.DataFrame, *, trips: int, max_pairs: int, user_mode: bool,
                projector: bool) -> go.Figure:
    """Cumulative ε over the weeks released, log axis with one notation."""
    fig = go.Figure()
    for col, name in (("basic", "basic <i>W·n·ε</i>"), ("advanced", "advanced"), ("rdp", "Rényi-DP bound"),
                      ("tight", "tight (exact PLD, upper end)"),
                      ("person_tight", f"{unit_words('user_level')}, max {max_pairs} pairs (tight, ≤)")):
        if col in over_weeks:
            fig.add_scatter(x=over_weeks["weeks"], y=over_weeks[col], mode="lines", name=name)
    figures.style(fig, f"{int(trips)} unique trips every week" + (f"; {unit_words('user_level')} bounded at "
                                                                  f"{max_pairs} pairs" if user_mode else ""),
                  projector=projector)
    shown = [c for c in ("basic", "advanced", "rdp", "tight", "person_tight") if c in over_weeks]
    y_lo = float(over_weeks[shown].min().min())
    y_hi = float(over_weeks[shown].max().max())
    vals, _ = figures.log_ticks(y_lo, y_hi)
    fig.update_layout(xaxis_title="weeks released", yaxis_title="cumulative ε", yaxis_type="log",
                      yaxis={"tickvals": vals, "ticktext": [num(v) for v in vals]},
                      # top left: the curves rise from the bottom left, and the per-person one runs along the bottom
                      legend=figures.legend_at({"x": 0.01, "xanchor": "left", "y": 0.99, "yanchor": "top"},
                                               projector))
    return fig


@st.cache_resource(max_entries=32, show_spinner=False)
def delta_chart(eps_delta: pd.DataFrame, *, trips: int, projector: bool) -> go.Figure:
    """ε against δ for one user-week, log δ axis."""
    fig = go.Figure()
    for col, name in (("basic", "basic (any δ)"), ("advanced", "advanced"), ("rdp", "Rényi-DP bound"),
                      ("tight", "tight")):
        if col in eps_delta:
            fig.add_scatter(x=eps_delta["delta"], y=eps_delta[col], mode="lines", name=name)
    figures.style(fig, f"k = {int(trips)} counts: smaller ε only for larger δ", projector=projector)
    vals, labels = figures.log_ticks(float(eps_delta["delta"].min()), float(eps_delta["delta"].max()))
    if len(vals) > 4:   # every other power from the top: level labels that fit a half-page chart (not turned upright)
        vals, labels = vals[::-1][::2][::-1], labels[::-1][::2][::-1]
    fig.update_layout(xaxis_title="δ", yaxis_title="ε(δ)", xaxis_type="log",
                      xaxis={"tickvals": vals, "ticktext": labels, "tickangle": 0})
    if not projector:   # under the plot on a screen too: the curves' heights follow n, no corner is always free
        extra = len(fig.data) * 20 + 10
        fig.update_layout(legend=figures.legend_at({}, True), height=fig.layout.height + extra,
                          margin={"b": 60 + extra})
    return fig


def delta_figure(epsilon: float, trips: int, projector: bool) -> go.Figure:
    """:func:`delta_chart` of the exact ε(δ) at ``epsilon`` (for the page's files: the page draws the live chart)."""
    return delta_chart(budget_cache.epsilon_delta_curve(float(epsilon), int(trips)), trips=int(trips), projector=projector)


# ---- Attack -----------------------------------------------------------------------------------------------------

@st.cache_resource(max_entries=32, show_spinner=False)
def curve_chart(curve: pd.DataFrame, mc: pd.DataFrame | None, *, mode: str, epsilon: float, max_pairs: int,
                prior: float, reps: int, p3: float, p32: float, projector: bool) -> go.Figure:
    """The membership attack's success against k (``curve``: :func:`odapp.attack.cache.success_curve`, with the per-person
    column in the per-user mode), the Monte Carlo points ``mc`` if given, the k = 3 and k = 32 markers."""
    user_mode = mode == "user_level"
    fig = go.Figure()
    fig.add_scatter(x=curve["k"], y=curve["success"], mode="lines", line={"width": 3},
                    name=(comparison_label if user_mode else str)(
                        f"exact success p<sub>k</sub>, {unit_words('per_metric')} (50/50 prior)"))
    if user_mode:
        fig.add_scatter(x=curve["k"], y=curve["success_per_person"], mode="lines", line={"width": 3},
                        name=f"{unit_words('user_level')}: max {max_pairs} pairs, noise {max_pairs}/ε")
    fig.add_scatter(x=curve["k"], y=curve["bound"], mode="lines", line={"dash": "dash"},
                    name="e<sup>ε</sup>/(1+e<sup>ε</sup>): " + ("the per-trip bound" if not user_mode
                                                                else "the bound per person and week"))
    if "bayes_success" in curve:
        fig.add_scatter(x=curve["k"], y=curve["bayes_success"], mode="lines", name=f"Bayes success, prior {prior:g}",
                        line={"dash": "dot"})
    if mc is not None:
        fig.add_scatter(x=mc["k"], y=mc["mc_success"], mode="markers", name=f"Monte Carlo ({reps:,} per k)",
                        error_y={"type": "data", "symmetric": False, "array": mc["ci_high"] - mc["mc_success"],
                                 "arrayminus": mc["mc_success"] - mc["ci_low"]}, marker={"size": 5})
    fig.add_scatter(x=[3, 32], y=[p3, p32], mode="markers+text", name="k = 3 and k = 32",
                    text=[pct(p3), pct(p32)], textposition="bottom right", marker={"size": 10, "symbol": "diamond"},
                    showlegend=False)
    figures.style(fig, f"Membership attack success against k unique trips (ε = {epsilon:g} {unit_words(mode)})"
                  + (f": flat from k = {max_pairs}" if user_mode else ""), height=460, projector=projector)
    fig.update_layout(xaxis_title="k: unique trips of the victim known to the attacker",
                      yaxis_title="probability the attacker is right", yaxis_range=[0.45, 1.01],
                      legend=figures.legend_at({"x": 0.55, "y": 0.05}, projector))
    return fig


@st.cache_resource(max_entries=32, show_spinner=False)
def roc_chart(others: tuple, eps_pair: float, threshold: float, user: str, *, projector: bool) -> go.Figure:
    """The ROC of the attack on ``user`` (whose pairs' other people are ``others``: the arguments of
    :func:`odapp.attack.cache.user_risk`, which gives the curves), beside every pair published and guessing; drawn with the
    points that show (thin_curve), the CSV keeps every vertex."""
    ur, roc_plain = attack_cache.user_risk(others, eps_pair, threshold)
    fig = go.Figure()
    t1, t2 = thin_curve(ur.roc.fpr, ur.roc.tpr), thin_curve(roc_plain.fpr, roc_plain.tpr)
    fig.add_scatter(x=np.asarray(ur.roc.fpr)[t1], y=np.asarray(ur.roc.tpr)[t1], mode="lines",
                    name=f"thresholded release (AUC {ur.roc.auc:.3f})")
    fig.add_scatter(x=np.asarray(roc_plain.fpr)[t2], y=np.asarray(roc_plain.tpr)[t2], mode="lines",
                    line={"dash": "dash"}, name=f"every pair published (AUC {roc_plain.auc:.3f})")
    fig.add_scatter(x=[0, 1], y=[0, 1], mode="lines", line={"dash": "dot", "color": "#999"}, name="guessing")
    figures.style(fig, f"ROC of the attack on user {chart_text(user)}", projector=projector)
    fig.update_layout(xaxis_title="false-positive rate", yaxis_title="true-positive rate")
    if not projector:   # the legend under the plot on a screen too: in a half-page chart no corner is free of the
        # curves and the diagonal (projector mode puts it there already: figures.style)
        extra = 3 * 20 + 10
        fig.update_layout(legend=figures.legend_at({}, True), height=fig.layout.height + extra,
                          margin={"b": 60 + extra})
    return fig


# ---- Data -------------------------------------------------------------------------------------------------------

# Each chart's layout (the lab's template, title, axes, legend) depends on projector mode only, not on the data: it is
# made once (kept for the server's life, one per mode; never changed: a figure copies it) and every new grid's,
# week's or dataset's chart starts from it (building it again took half of each chart's ~10 ms).
# ``tests/app/test_charts.py`` checks that the charts equal those built in one go.

@st.cache_resource(max_entries=32, show_spinner=False)
def trips_hist_chart(hist: pd.DataFrame, *, projector: bool) -> go.Figure:
    """Users by trips in the week, total and unique (``hist``: ``trips_in_week, users_total, users_unique``), as
    step outlines: one value per integer, no bar edges to alias into a comb."""
    return _trips_hist_traces(go.Figure(layout=_trips_hist_layout(projector)), hist)


def _trips_hist_traces(fig: go.Figure, hist: pd.DataFrame) -> go.Figure:
    fig.add_scatter(x=hist["trips_in_week"], y=hist["users_total"], name="total trips", mode="lines",
                    line={"shape": "hvh", "width": 2}, fill="tozeroy")
    fig.add_scatter(x=hist["trips_in_week"], y=hist["users_unique"], name="unique trips", mode="lines",
                    line={"shape": "hvh", "width": 2}, fill="tozeroy")
    return fig


@functools.lru_cache(maxsize=2)
def _trips_hist_layout(projector: bool) -> go.Layout:
    """The layout of :func:`trips_hist_chart` (styled with its traces in place: projector mode counts them)."""
    fig = _trips_hist_traces(go.Figure(), pd.DataFrame({"trips_in_week": [], "users_total": [], "users_unique": []}))
    figures.style(fig, "Distribution over users", projector=projector)
    fig.update_layout(xaxis_title="trips in the week", yaxis_title="users", yaxis_rangemode="tozero",
                      legend=figures.legend_at({"x": 0.99, "xanchor": "right"}, projector))
    return fig.layout


@st.cache_resource(max_entries=32, show_spinner=False)
def trips_tu_chart(pairs_tu: pd.DataFrame, hi: int, *, projector: bool) -> go.Figure:
    """Users by (total, unique) trips of the week as a grid of squares coloured by their number (log scale, the
    maps' colours; ``pairs_tu``: ``trips, unique_trips, users``), the diagonal up to ``hi`` and Houssiau et al.'s
    39 → 32.

    A heatmap, not one marker per (total, unique) pair: the bundled city has ~1,300 such pairs, and as SVG markers
    they cost the browser ~0.4 s on every redraw (the grid, the zones, the data and projector mode change them);
    the heatmap is one image (~0.15 s), and no marker hides another. Its side is at most the week's hours (a trip
    is a move from one hour to the next), so the grid stays small whatever the data."""
    return _trips_tu_traces(go.Figure(layout=_trips_tu_layout(projector)), pairs_tu, hi)


def _trips_tu_traces(fig: go.Figure, pairs_tu: pd.DataFrame, hi: int) -> go.Figure:
    t = pairs_tu["trips"].to_numpy(dtype=int)
    u = pairs_tu["unique_trips"].to_numpy(dtype=int)
    n = pairs_tu["users"].to_numpy(dtype=float)
    nx, ny = max(int(t.max(initial=0)), hi, 1) + 1, max(int(u.max(initial=0)), 1) + 1
    users = np.full((ny, nx), np.nan)
    users[u, t] = n
    top = max(float(np.log10(n.max(initial=1))), 1.0)
    ticks = list(range(int(top) + 1))
    fig.add_heatmap(x=np.arange(nx), y=np.arange(ny), z=np.log10(users), customdata=users, zmin=0, zmax=top,
                    colorscale=[list(stop) for stop in ramp_stops()],
                    hoverongaps=False, name="users",
                    hovertemplate="%{x} trips, %{y} unique: %{customdata:,.0f} users<extra></extra>",
                    colorbar={"title": {"text": "users"}, "tickvals": ticks,
                              "ticktext": [f"{10 ** k:,}" for k in ticks], "thickness": 14})
    fig.add_scatter(x=[0, hi], y=[0, hi], mode="lines", name="every trip unique", line={"dash": "dot"})
    fig.add_scatter(x=[39], y=[32], mode="markers+text", name="Houssiau et al.: 39 → 32",
                    text=["39 → 32"], textposition="top left",   # above the diagonal: no user there
                    marker={"size": 14, "symbol": "star", "color": "white", "line": {"color": "black", "width": 1.5}})
    return fig


@functools.lru_cache(maxsize=2)
def _trips_tu_layout(projector: bool) -> go.Layout:
    """The layout of :func:`trips_tu_chart` (styled with its traces in place: projector mode counts them)."""
    fig = _trips_tu_traces(go.Figure(), pd.DataFrame({"trips": [], "unique_trips": [], "users": []}), 1)
    figures.style(fig, "Total vs unique trips", projector=projector)
    # the legend under the axes: beside the colour bar it would cover the bar's title in a narrow column
    fig.update_layout(xaxis_title="total trips", yaxis_title="unique trips",
                      legend={"orientation": "h", "x": 0, "xanchor": "left", "y": 0, "yanchor": "bottom",
                              "yref": "container"})
    return fig.layout


# ---- See the noise ----------------------------------------------------------------------------------------------

@st.cache_resource(max_entries=32, show_spinner=False)
def noise_chart(count: int, other: int, epsilon: float, threshold: float, sensitivity: int, *,
                projector: bool) -> tuple[go.Figure, pd.DataFrame]:
    """``(figure, table)``: what the release publishes for a true count ``count`` and for ``other``
    (:func:`odcore.report.teaching.noise_picture` of each), with the threshold and ``count`` marked; the table is the
    first count's density (the chart's download)."""
    pic = noise_picture(count, epsilon, threshold, sensitivity=sensitivity)
    pic2 = noise_picture(other, epsilon, threshold, sensitivity=sensitivity)
    fig = go.Figure()
    for p, name in ((pic, f"true count {count}"), (pic2, f"true count {other}")):
        d = p.density()
        pub = d[d["published"]]
        sup = d[~d["published"]]
        fig.add_scatter(x=d["noisy_count"], y=d["density"], mode="lines", name=f"{name}: what the noise makes of it")
        fig.add_scatter(x=sup["noisy_count"], y=sup["density"], mode="lines", fill="tozeroy", line={"width": 0},
                        fillcolor="rgba(120,120,120,0.35)", name=f"{name}: suppressed ({pct(1 - p.p_published)})",
                        hoverinfo="skip")
        fig.add_scatter(x=pub["noisy_count"], y=pub["density"], mode="lines", fill="tozeroy", line={"width": 0},
                        name=f"{name}: published ({pct(p.p_published)})", hoverinfo="skip", opacity=0.4)
    figures.style(fig, f"What is published for a true count (Laplace noise of scale {pic.scale:.3g}, "
                       f"ε = {epsilon:g})", height=600, projector=projector)
    # The two vertical lines as add_vline draws them, set in one layout update (add_vline takes ~15 ms each).
    # The legend under the plot: at its top left it covered the count's own peak, the thing the page explains.
    fig.update_layout(xaxis_title="noisy count", yaxis_title="probability density",
                      legend=figures.legend_at({}, True),
                      **figures.marker_lines([(threshold, {"dash": "dash", "width": 3}, f"threshold {threshold:g}",
                                               "right"),
                                              (count, {"dash": "dot"}, f"c = {count}", "left")]))
    return fig, pic.density().assign(true_count=count)


# ---- Play the attacker ------------------------------------------------------------------------------------------

@st.cache_resource(max_entries=32, show_spinner=False)
def game_score_chart(plain: np.ndarray, theory_k: dict, scores: pd.DataFrame | None, theory_rounds: int, *,
                     projector: bool) -> go.Figure:
    """The game's success against k: ``plain`` (p_k without a threshold, k = 0..), the optimal attacker's mean
    success in this game by k (``theory_k``) and the rounds played (``scores``: ``k, who, success, ci_low,
    ci_high``, or None before the first round)."""
    fig = go.Figure()
    fig.add_scatter(x=np.arange(len(plain)), y=plain, mode="lines", line={"dash": "dash"},
                    name="no threshold: p_k (Houssiau et al. Fig. 1)")
    fig.add_scatter(x=list(theory_k), y=list(theory_k.values()), mode="lines+markers", marker={"size": 11},
                    name=f"this game: optimal attacker vs the thresholded release (mean of {theory_rounds} rounds)")
    if scores is not None:
        for who, sym in (("you", "circle"), ("optimal attacker", "diamond")):
            d = scores[scores["who"] == who]
            fig.add_scatter(x=d["k"], y=d["success"], mode="markers", marker={"size": 12, "symbol": sym},
                            name=f"{who} (95 % interval)",
                            error_y={"type": "data", "symmetric": False, "array": d["ci_high"] - d["success"],
                                     "arrayminus": d["success"] - d["ci_low"]})
    figures.style(fig, "Success against the number of known trips k", height=420, projector=projector)
    fig.update_layout(xaxis_title="k: known unique trips", yaxis_title="share of rounds right", yaxis_range=[0, 1.02],
                      # bottom right, under the curves (which start at 0.5), its right edge on the plot's
                      legend=figures.legend_at({"x": 0.99, "xanchor": "right", "y": 0.03, "yanchor": "bottom"},
                                               projector))
    return fig


@st.cache_resource(max_entries=32, show_spinner=False)
def population_chart(success: np.ndarray, bound: float, user_success: float, user: str, *,
                     projector: bool) -> go.Figure:
    """Histogram of the attack's success over the users of the week (``success``), the per-trip bound and the
    user shown above marked."""
    fig = go.Figure()
    fig.add_histogram(x=success, nbinsx=50, name="users")
    fig.add_vline(x=bound, line_dash="dash", annotation_text="per-trip bound", annotation_position="top left")
    fig.add_vline(x=user_success, line_dash="dot", line_color="#d95f02", annotation_text=f"user {chart_text(user)}",
                  annotation_position="bottom right")
    figures.style(fig, "Attack success over the users of the week", projector=projector)
    fig.update_layout(xaxis_title="probability the attacker is right", yaxis_title="users", showlegend=False)
    return fig


@st.cache_resource(max_entries=32, show_spinner=False)
def zones_compare_chart(comp: pd.DataFrame, *, week: int, epsilon: float, threshold: float,
                        projector: bool) -> go.Figure:
    """The Data page's zone systems compared (``comp``: :func:`odapp.data.cache.zone_comparison` with a ``label``
    column): share of user-trips published, median and 90th-percentile attack success."""
    fig = go.Figure()
    labels = [chart_text(lb) for lb in comp["label"]]   # file names: the axis and the hover show them as text
    fig.add_bar(x=labels, y=100 * comp["user_trips_published_frac"], name="user-trips published (%)",
                customdata=np.stack([comp["pairs_published"], comp["od_pairs"]], axis=1),
                hovertemplate="%{x}: %{y:.1f} % of user-trips; %{customdata[0]:,} of %{customdata[1]:,} pairs"
                              "<extra></extra>")
    fig.add_scatter(x=labels, y=100 * comp["median_success"], name="attack success, median user (%)",
                    mode="lines+markers", yaxis="y")
    fig.add_scatter(x=labels, y=100 * comp["p90_success"], name="attack success, 90th percentile (%)",
                    mode="lines+markers", line={"dash": "dot"})
    figures.style(fig, f"Week {week}, ε = {epsilon:g}, threshold {threshold:g}: what is published and how exposed "
                       "people are", projector=projector)
    fig.update_layout(yaxis_title="%", yaxis_range=[0, 100], xaxis_title="zone system (median zone area)")
    fig.update_xaxes(ticktext=[f"{lb}<br>{a:.2g} km²" for lb, a in zip(labels, comp["zone_km2"], strict=True)],
                     tickvals=labels)
    return fig


@st.cache_resource(max_entries=32, show_spinner=False)
def llr_chart(ex: pd.DataFrame, k: int, *, projector: bool) -> go.Figure:
    """The last round's log-likelihood ratio, pair by pair (``ex``: ``pair, llr, cumulative, state``), of a round
    with ``k`` known pairs."""
    fig = go.Figure()
    fig.add_bar(x=ex["pair"], y=ex["llr"], name="this pair's evidence",
                marker_color=np.where(ex["state"] == "released", "#1f5fa8", "#9a9a9a").tolist(),
                hovertext=ex["state"])
    fig.add_scatter(x=ex["pair"], y=ex["cumulative"], mode="lines+markers", name="running total",
                    line={"color": "#d95f02"})
    fig.add_hline(y=0, line_color="#000")
    figures.style(fig, "The optimal attacker's log-likelihood ratio, pair by pair (> 0: in)", height=300,
                  projector=projector)
    fig.update_xaxes(range=[0.4, k + 0.6], dtick=1 if k <= 16 else 4)
    fig.update_layout(xaxis_title="known pair (blue: published, grey: suppressed)", yaxis_title="LLR",
                      legend={"orientation": "h", "y": 1.12, "x": 0.3}, margin={"t": 70})
    return fig


# ---- Knock Knock ------------------------------------------------------------------------------------------------

@st.cache_resource(max_entries=32, show_spinner=False)
def knock_cdf_chart(per: pd.DataFrame, *, projector: bool) -> go.Figure:
    """CDF of the AUC over targets, one step curve per classifier (``per``: ``classifier, auc, …``)."""
    fig = go.Figure()
    for name, g in per.groupby("classifier", sort=False):
        x = np.sort(g["auc"].to_numpy())
        steps_x = np.concatenate([[0.0], np.repeat(x, 2), [1.0]])
        steps_y = np.concatenate([[0.0, 0.0], np.repeat(np.arange(1, x.size + 1) / x.size, 2)])
        fig.add_scatter(x=steps_x, y=steps_y, mode="lines", name=name.upper())
    fig.add_vline(x=0.5, line_dash="dot", annotation_text="guessing")
    figures.style(fig, "CDF of AUC over targets", projector=projector)
    fig.update_layout(xaxis_title="AUC", yaxis_title="fraction of targets with AUC ≤ x", xaxis_range=[0.3, 1.0],
                      yaxis_range=[0, 1.02])
    return fig


@st.cache_resource(max_entries=32, show_spinner=False)
def knock_pl_chart(per: pd.DataFrame, *, projector: bool) -> go.Figure:
    """Privacy loss per classifier, one box with every target's point (``per``: ``classifier, pl, …``)."""
    fig = go.Figure()
    for name, g in per.groupby("classifier", sort=False):
        fig.add_box(y=g["pl"], name=name.upper(), boxpoints="all", jitter=0.3)
    figures.style(fig, "Privacy loss per classifier", projector=projector)
    fig.update_layout(yaxis_title="PL = (AUC − 0.5)/0.5", showlegend=False, yaxis_range=[-0.02, 1.02])
    return fig


@st.cache_resource(max_entries=32, show_spinner=False)
def knock_roc_chart(roc: dict, auc: dict, target: str, *, projector: bool) -> go.Figure:
    """One target's ROC curve per classifier (``roc``: classifier → ``{"fpr", "tpr"}``; ``auc``: classifier →
    AUC) and guessing."""
    fig = go.Figure()
    for name, r in roc.items():
        fig.add_scatter(x=r["fpr"], y=r["tpr"], mode="lines", name=f"{name.upper()} (AUC {auc[name]:.3f})")
    fig.add_scatter(x=[0, 1], y=[0, 1], mode="lines", line={"dash": "dot", "color": "#999"}, name="guessing")
    figures.style(fig, f"ROC, target {chart_text(target)}", projector=projector)
    fig.update_layout(xaxis_title="false-positive rate", yaxis_title="true-positive rate")
    return fig
