"""The Attack page's "learned attacks beside the optimum" section (:mod:`odcore.recover.learned`)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from odapp.attack import cache as attack_cache
from odapp.shared.errors import engine_errors
from odapp.shared.layout import metric
from odapp.shared.words import pct
from odcore.privacy.attack import success_curve
from odcore.recover.learned import LearnedConfig, learned_vs_exact, people_of_week

RESULTS_KEY = "attack.learned_results"   # session_state: {(dataset, week, ε per pair, people, seed): result}
PEOPLE = 12


@st.cache_data(max_entries=8, show_spinner="Training the learned attacks…")
def learned(people_k: tuple[tuple[str, int], ...], config: LearnedConfig) -> dict:
    ks = pd.Series([k for _, k in people_k], index=[p for p, _ in people_k])
    return learned_vs_exact(ks, config)


def figure(res: dict) -> go.Figure:
    t = res["people"].sort_values("k")
    kmax = int(t["k"].max())
    exact = success_curve(res["epsilon"], kmax)
    fig = go.Figure(go.Scatter(x=np.arange(kmax + 1), y=exact, mode="lines", name="exact p_k (optimal attacker)"))
    for col, name, sym in (("two_threshold", "two-threshold (learned)", "circle"),
                           ("one_threshold", "one-threshold (learned)", "square"),
                           ("best_classifier_success", "Knock Knock's best classifier", "diamond")):
        fig.add_trace(go.Scatter(x=t["k"], y=t[col], mode="markers", name=name, marker={"symbol": sym, "size": 9}))
    fig.update_layout(xaxis={"title": "k (the person's unique trips this week)"},
                      yaxis={"title": "attack success", "range": [0.45, 1.0]}, height=360,
                      margin={"l": 50, "r": 20, "t": 30, "b": 40}, legend={"orientation": "h"})
    return fig


def section(ctx) -> None:
    """Learned attacks and the exact p_k for the same people of the week (a button runs them: ~1 min)."""
    s = ctx.settings
    st.subheader("Learned attacks beside the optimum")
    st.markdown("The curve above is what the **best possible** attacker achieves. Attackers that learn their rule "
                "from simulated releases can fall short of it; how far is the risk a learned audit would miss.")
    rcfg = s.release_config()
    eps_pair = 1.0 / rcfg.scale
    with engine_errors("Could not prepare the week for the attack"):
        pairs, _ = attack_cache.attack_pairs(s.dataset.id, ctx.od_config, s.week, rcfg, s.seed, _od=ctx.od)
    if pairs.empty:
        st.caption("No trips this week.")
        return
    key = (s.dataset.id, int(s.week), float(eps_pair), PEOPLE, int(s.seed))
    results = st.session_state.setdefault(RESULTS_KEY, {})
    if st.button(f"Train the learned attacks on {PEOPLE} people of week {s.week}", key="attack_learned_run",
                 help="For each person: 2,000 simulated releases to learn from, 4,000 to score on; Knock Knock's four "
                      "classifiers, a two-threshold and a one-threshold rule."):
        with engine_errors("The learned attacks failed"):
            ks = people_of_week(pairs, int(s.week), PEOPLE, int(s.seed))
            people_k = tuple((str(p), int(k)) for p, k in ks.items())
            results[key] = learned(people_k, LearnedConfig(epsilon=eps_pair, seed=int(s.seed)))
    res = results.get(key)
    if res is None:
        st.caption(f"Not run yet for week {s.week} at ε = {eps_pair:.3g} per pair.")
        return
    c = st.columns(3)
    gap = res["gap_pp"]
    metric(c[0], "Gap of Knock Knock's best classifier", f"{gap['best_classifier_success']:.1f} points",
           "below the exact success, on average over these people",
           help=f"Mean of p_k − success over the people; one success is measured on {res['n_test']:,} games "
                f"(±{res['mc_error_pp']:.1f} points, 95 %).")
    metric(c[1], "Gap of the two-threshold rule", f"{gap['two_threshold']:.1f} points", "near the optimum")
    metric(c[2], "Gap of the one-threshold rule", f"{gap['one_threshold']:.1f} points", "a linear rule")
    st.plotly_chart(figure(res), key="attack_learned_chart", theme=None)
    st.caption("Points are people of the week (their k); the line is the exact p_k at the release's noise per pair "
               f"(ε = {eps_pair:.3g}). Success of the best of a classifier on 50/50 games: "
               + ", ".join(f"{r.person}: {pct(r.best_classifier_success)} vs {pct(r.exact)}"
                           for r in res["people"].head(4).itertuples()) + " …")
