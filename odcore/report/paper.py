"""The paper set: the lab's figures built from their settings alone, for ``python -m odcore figures``.

Each builder takes the numbers it draws (or computes them with the engine) and returns a plotly figure styled
with :func:`odcore.report.figures.style`; :func:`odcore.report.figures.figure_bytes` lays it out at a size preset
for a journal or a slide. The figures speak one unit each: per count (one trip of one person in one week,
Bassolas et al.'s statement) or per person and week (the bounded release: at most ``max_pairs`` pairs a person,
noise ``max_pairs/ε``); a curve of the other unit is drawn only as the comparison, and named so.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from odcore.privacy.accounting import epsilon_over_weeks
from odcore.privacy.attack import bounded_success_curve, success_curve
from odcore.report.facts import success_bound
from odcore.report.figures import INK, PALETTE, marker_lines, readable_log_ticks, release_curve_figure, style

if TYPE_CHECKING:  # pragma: no cover
    import plotly.graph_objects as go

UNITS = {"per_metric": "per count", "user_level": "per person and week"}
"""How each guarantee unit is said in a figure (the app's :data:`odapp.shared.words.UNIT_WORDS` say the same)."""

# Houssiau et al. 2022, Fig. 1 (Monte Carlo, 10,000 repetitions, ε = 0.66 per count): 70.5 % at k = 3, 95.4 % at 32
HOUSSIAU_POINTS = ((3, 0.705), (32, 0.954))


def check_mode(mode: str) -> str:
    if mode not in UNITS:
        raise ValueError(f"mode must be one of {', '.join(UNITS)}, got mode={mode!r}.")
    return mode


def attack_curve_figure(epsilon: float, mode: str, *, max_pairs: int = 10, k_max: int = 70) -> tuple[go.Figure,
                                                                                                     pd.DataFrame]:
    """Houssiau et al.'s Fig. 1: the optimal membership attacker's success against the k unique trips it knows.

    ``mode="per_metric"``: the exact success p_k of the per-count release (ε per count, every trip one more noisy
    count) with the paper's Monte Carlo points at ε = 0.66 and the per-trip bound e^ε/(1+e^ε). ``"user_level"``:
    the bounded release (ε per person and week: at most ``max_pairs`` counts, each with noise ``max_pairs/ε``),
    flat from k = max_pairs, and the per-count release at the same ε as the comparison.
    Returns the figure and its data (``k, success, ...``).
    """
    check_mode(mode)
    k = np.arange(k_max + 1)
    per_count = success_curve(epsilon, k_max)
    data = pd.DataFrame({"k": k, "success_per_count": per_count})
    fig = go.Figure()
    if mode == "per_metric":
        fig.add_scatter(x=k, y=per_count, mode="lines", name=f"exact success, ε = {epsilon:g} per count",
                        line={"width": 2.5, "color": PALETTE[0]})
        bound = success_bound(epsilon)   # the facts layer's bound, for one trip (δ = 0)
        data["bound_one_trip"] = bound
        fig.add_scatter(x=[0, k_max], y=[bound, bound], mode="lines", line={"dash": "dash", "color": PALETTE[1]},
                        name="bound promised for one trip, e^ε/(1+e^ε)")
        if abs(epsilon - 0.66) < 1e-9:
            fig.add_scatter(x=[p[0] for p in HOUSSIAU_POINTS], y=[p[1] for p in HOUSSIAU_POINTS], mode="markers",
                            marker={"size": 7, "symbol": "diamond", "color": INK},
                            name="Houssiau et al. 2022 (Monte Carlo)")
        title = f"Membership attack success against k known trips, ε = {epsilon:g} per count"
    else:
        bounded = bounded_success_curve(epsilon, max_pairs, k_max)
        data["success_per_person"] = bounded
        fig.add_scatter(x=k, y=bounded, mode="lines", line={"width": 2.5, "color": PALETTE[0]},
                        name=f"ε = {epsilon:g} per person and week (≤ {max_pairs} pairs, noise {max_pairs}/ε)")
        fig.add_scatter(x=k, y=per_count, mode="lines", line={"dash": "dot", "color": "#6b7280"},
                        name=f"comparison: ε = {epsilon:g} per count")
        title = f"Membership attack success against k known trips, ε = {epsilon:g} per person and week"
    style(fig, title)
    fig.update_layout(xaxis_title="k: the person's unique trips known to the attacker",
                      yaxis_title="probability the attacker is right", yaxis_range=[0.45, 1.01],
                      xaxis_range=[0, k_max])
    return fig, data


def budget_weeks_figure(epsilon: float, mode: str, *, trips: int = 21, weeks: int = 52, max_pairs: int = 10,
                        delta: float = 1e-6, who: str | None = None) -> tuple[go.Figure, pd.DataFrame]:
    """Cumulative ε of one person over 1..``weeks`` weekly releases (basic, advanced, Rényi-DP and tight
    composition), log axis labelled 1-2-5 in plain numbers. Per count a person with ``trips`` unique trips a week
    spends ``trips`` counts of ε a week; per person and week at most ``max_pairs`` counts of ε/max_pairs. ``who``
    names the person (the typical person of a week, :mod:`odcore.report.facts`) in the title."""
    check_mode(mode)
    if mode == "per_metric":
        data = epsilon_over_weeks(epsilon, trips, weeks, delta, interval=1e-3, lower=False)
        sub = (f"{who}, " if who else "") + f"{trips} unique trips a week, ε = {epsilon:g} per count"
    else:
        data = epsilon_over_weeks(epsilon / max_pairs, max_pairs, weeks, delta, interval=1e-3, lower=False)
        sub = f"ε = {epsilon:g} per person and week (≤ {max_pairs} pairs)"
    fig = go.Figure()
    for col, name in (("basic", "basic composition"), ("advanced", f"advanced (δ′ = {delta:.0e})"),
                      ("rdp", "Rényi-DP bound"), ("tight", f"tight (exact PLD, δ = {delta:.0e})")):
        fig.add_scatter(x=data["weeks"], y=data[col], mode="lines", name=name,
                        line={"width": 2.5} if col == "tight" else None)
    style(fig, f"A person's ε over weeks released: {sub}")
    cols = ["basic", "advanced", "rdp", "tight"]
    lo = float(np.nanmin(data[cols].to_numpy()))
    hi = float(np.nanmax(data[cols].to_numpy()))
    vals, labels = readable_log_ticks(lo, hi)
    fig.update_layout(xaxis_title="weeks released", yaxis_title="cumulative ε (log scale)", yaxis_type="log",
                      yaxis={"tickvals": vals, "ticktext": labels}, xaxis_range=[1, weeks])
    return fig, data


def release_probability_figure(true_counts: np.ndarray, epsilon: float, threshold: float, mode: str, *,
                               max_pairs: int = 10) -> tuple[go.Figure, pd.DataFrame]:
    """The chance a pair is published against its true count (Laplace noise of scale 1/ε per count, or
    max_pairs/ε per person and week, then the threshold), over the observed pairs' histogram
    (:func:`odcore.report.figures.release_curve_figure`)."""
    check_mode(mode)
    sens = 1.0 if mode == "per_metric" else float(max_pairs)
    fig, curve = release_curve_figure(true_counts, epsilon, threshold, sens)
    style(fig, f"Which pairs are published: ε = {epsilon:g} {UNITS[mode]}, threshold {threshold:g}")
    return fig, curve


def zone_comparison_figure(table: pd.DataFrame, epsilon: float, threshold: float) -> tuple[go.Figure, pd.DataFrame]:
    """What each zone system publishes and the attack's median success (``table``:
    :func:`odcore.report.zone_compare.compare_zones`), one group of bars per zone system."""
    names = [Path(str(z)).stem if "/" in str(z) else str(z) for z in table["zones"]]
    fig = go.Figure()
    fig.add_bar(x=names, y=table["user_trips_published_frac"], name="share of user-trips published",
                marker_color=PALETTE[0])
    fig.add_bar(x=names, y=table["median_success"], name="attack's median success over the week's users",
                marker_color=PALETTE[1])
    style(fig, f"Zone systems on the same data: ε = {epsilon:g} per count, threshold {threshold:g}")
    fig.update_layout(barmode="group", yaxis_title="share / probability", yaxis_range=[0, 1],
                      xaxis_title="zone system", yaxis_tickformat=".0%")
    return fig, table


def knock_auc_figure(per_target: pd.DataFrame) -> tuple[go.Figure, pd.DataFrame]:
    """Knock Knock (Pyrgelis et al. 2018): the CDF over targets of the membership classifier's AUC, one step curve
    per classifier (``per_target``: ``classifier, target, auc``), guessing at 0.5."""
    fig = go.Figure()
    for name, g in per_target.groupby("classifier", sort=False):
        x = np.sort(g["auc"].to_numpy(dtype=float))
        steps_x = np.concatenate([[0.0], np.repeat(x, 2), [1.0]])
        steps_y = np.concatenate([[0.0, 0.0], np.repeat(np.arange(1, x.size + 1) / x.size, 2)])
        fig.add_scatter(x=steps_x, y=steps_y, mode="lines", name=f"{str(name).upper()} (mean AUC {x.mean():.2f})")
    style(fig, "Knock Knock: membership inference on aggregate location time-series")
    fig.update_layout(xaxis_title="AUC of the membership classifier (0.5: guessing)",
                      yaxis_title="share of targets with AUC ≤ x", xaxis_range=[0.3, 1.0], yaxis_range=[0, 1.02],
                      **marker_lines([(0.5, {"dash": "dot", "color": "#6b7280"}, "guessing", "left")]))
    return fig, per_target
