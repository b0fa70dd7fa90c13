"""Attack: how often the strongest attacker of the paper tells whether a person is in the release."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from odapp import cache, guide
from odapp.cli_config import attack_curve_config, user_risk_config
from odapp.errors import engine_errors
from odapp.export import chart, reproduce, styled
from odapp.layout import metric, needs_pairs, page
from odapp.words import num, pct, probability_words, unit_words
from odcore.attack import simulate_attack
from odcore.figures import thin_curve

K_MAX = 70   # Houssiau et al. 2022, Fig. 1: k = 0..70
MC_KEY = "attack.mc_results"   # session_state: {(epsilon, reps, seed): SimulationResult}

ctx = page(
    "Attack",
    "Imagine an attacker who knows **everyone else's trips** and *k* of yours, and sees the published counts: "
    "were you in the data? Each of your trips adds one more noisy hint, so the more distinct trips you make, the "
    "surer the attacker gets — from a coin flip at k = 0 towards certainty. The dashed line is what the "
    "“16 %” statement promises (one trip).",
    icon="🎯",
)
needs_pairs(ctx, "The per-person attack")
guide.panel(__file__, ctx)   # this page's step of the guided tour (odapp.guide)
s = ctx.settings
c1, c2 = st.columns([1, 3])
prior = c1.slider("Attacker's prior that you are in", 0.05, 0.95, 0.5, 0.05, key="attack_prior",
                  help="0.5 is the paper's setting (a coin flip before the attack). Other priors show the "
                       "Bayes-optimal attacker's success.")
with engine_errors("Could not compute the attack curve", "Check ε in the sidebar."):
    curve = cache.success_curve(s.epsilon, K_MAX, float(prior))
user_mode = s.mode == "user_level"
if user_mode:   # the bounded release: a person's week adds min(n, m) counts, each with Laplace(m/ε)
    with engine_errors("Could not compute the per-person curve", "Check ε and max pairs in the sidebar."):
        curve["success_per_person"] = cache.bounded_success_curve(s.epsilon, s.max_pairs, K_MAX)
head = curve["success_per_person"] if user_mode else curve["success"]
p3, p32, bound = float(head[3]), float(head[32]), float(curve["bound"][0])
pm3, pm32 = float(curve["success"][3]), float(curve["success"][32])
with c2:
    c = st.columns(3)
    metric(c[0], "Bound promised (one trip)", pct(bound), probability_words(bound),
           help="e^ε/(1+e^ε): the most an ε-DP count lets an attacker be right, from a 50/50 prior.")
    unit = unit_words(s.mode)
    metric(c[1], "Success with k = 3 trips", pct(p3),
           f"{probability_words(p3)} ({unit}; per count: {pct(pm3)})" if user_mode else probability_words(p3),
           help="Exact success against the release in the chosen unit. Per count: p_3 (Houssiau et al. report "
                "70.5 % by Monte Carlo at ε = 0.66). Per person: the bounded release, min(3, max pairs) counts "
                "each with noise max_pairs/ε.")
    metric(c[2], "Success with k = 32 trips", pct(p32),
           f"{probability_words(p32)} ({unit}; per count: {pct(pm32)})" if user_mode else probability_words(p32),
           help="Exact success for the author's 32 unique trips (Houssiau et al.: 95.4 % per count at ε = 0.66); "
                "per person it stops growing at max pairs.")

with st.expander("Monte Carlo check (the paper's simulation)", expanded=False):
    m1, m2, m3 = st.columns([1, 1, 2])
    reps = m1.select_slider("Repetitions per k", [500, 1000, 2000, 5000, 10_000], value=2000, key="attack_reps",
                            help="The paper used 10,000 per k; 2,000 takes a few seconds here.")
    show_mc = m2.toggle("Show the points", value=True, key="attack_show_mc",
                        help="Draw the Monte Carlo estimates with 95 % Wilson intervals on the curve.")
    mc_key = (float(s.epsilon), int(reps), int(s.seed))
    results = st.session_state.setdefault(MC_KEY, {})
    if m3.button("Run the Monte Carlo", key="attack_run_mc",
                 help="Draw membership and Laplace noise, run the likelihood-ratio test, repeat; k = 0..70."):
        bar = st.progress(0.0, text="Simulating…")
        gen = np.random.default_rng(int(s.seed))   # one stream, consumed k by k: equals the CLI's --seed run
        parts = []
        chunks = np.array_split(np.arange(K_MAX + 1), 12)
        for i, ks in enumerate(chunks):
            with engine_errors("Monte Carlo failed"):
                parts.append(simulate_attack(s.epsilon, ks, reps=int(reps), rng=gen))
            bar.progress((i + 1) / len(chunks), text=f"Simulating… k up to {int(ks[-1])}")
        bar.empty()
        results[mc_key] = pd.DataFrame({
            "k": np.concatenate([p.k for p in parts]), "mc_success": np.concatenate([p.success for p in parts]),
            "ci_low": np.concatenate([p.ci_low for p in parts]), "ci_high": np.concatenate([p.ci_high for p in parts])})
    mc = results.get(mc_key)
    if mc is None:
        st.caption(f"No Monte Carlo run yet for ε = {s.epsilon:g}, {reps:,} repetitions, seed {s.seed}.")
    else:
        inside = float(np.mean((curve["success"] >= mc["ci_low"]) & (curve["success"] <= mc["ci_high"])))
        st.caption(f"{pct(inside, 0)} of the exact values fall inside the 95 % intervals (expect about 95 %).")

fig = go.Figure()
fig.add_scatter(x=curve["k"], y=curve["success"], mode="lines",
                name=f"exact success p<sub>k</sub>, {unit_words('per_metric')} (50/50 prior)", line={"width": 3})
if user_mode:
    fig.add_scatter(x=curve["k"], y=curve["success_per_person"], mode="lines", line={"width": 3},
                    name=f"{unit_words('user_level')}: max {s.max_pairs} pairs, noise {s.max_pairs}/ε")
fig.add_scatter(x=curve["k"], y=curve["bound"], mode="lines", name="e<sup>ε</sup>/(1+e<sup>ε</sup>): the per-trip bound",
                line={"dash": "dash"})
if "bayes_success" in curve:
    fig.add_scatter(x=curve["k"], y=curve["bayes_success"], mode="lines", name=f"Bayes success, prior {prior:g}",
                    line={"dash": "dot"})
mc = st.session_state.get(MC_KEY, {}).get((float(s.epsilon), int(reps), int(s.seed)))
if mc is not None and show_mc:
    fig.add_scatter(x=mc["k"], y=mc["mc_success"], mode="markers", name=f"Monte Carlo ({reps:,} per k)",
                    error_y={"type": "data", "symmetric": False, "array": mc["ci_high"] - mc["mc_success"],
                             "arrayminus": mc["mc_success"] - mc["ci_low"]}, marker={"size": 5})
fig.add_scatter(x=[3, 32], y=[p3, p32], mode="markers+text", name="k = 3 and k = 32",
                text=[pct(p3), pct(p32)], textposition="bottom right", marker={"size": 10, "symbol": "diamond"},
                showlegend=False)
styled(fig, f"Membership attack success against k unique trips (ε = {s.epsilon:g} {unit_words(s.mode)})"
       + (f": flat from k = {s.max_pairs}" if user_mode else ""), height=460)
fig.update_layout(xaxis_title="k: unique trips of the victim known to the attacker",
                  yaxis_title="probability the attacker is right", yaxis_range=[0.45, 1.01],
                  legend={"x": 0.55, "y": 0.05})
curve_data = curve if mc is None else curve.merge(mc, on="k", how="left")
chart(fig, "attack_success_curve", data=curve_data,
      config=attack_curve_config(s, k_max=K_MAX, prior=float(prior), monte_carlo=int(reps) if mc is not None
                                 else None),
      command="attack-curve", key="attack_curve")

# ---- a real user of the week ------------------------------------------------------------------------------------
@st.fragment
def real_person():
    """One real person of the week and the whole week's population: its controls (person, id, population) rerun
    only this part of the page (st.fragment); a sidebar change reruns the page and this with it."""
    st.subheader(f"A real person of week {s.week}, in the thresholded release")
    st.markdown("In the real release, pairs with few people are usually suppressed, and a suppressed pair says little. "
                "So a person's **effective k** — the k of the curve above with the same success — is often far "
                "below their number of trips.")
    unit_note = st.empty()   # in both units, so the charts below keep their place (updated, not rebuilt)
    if s.mode == "user_level":
        unit_note.caption(f"Per-user mode: each person keeps at most {s.max_pairs} pairs and every count gets noise "
                          f"of scale {s.max_pairs}/ε, so each pair carries ε/{s.max_pairs} = "
                          f"{s.epsilon / s.max_pairs:.3g}.")
    rcfg = s.release_config()
    with engine_errors("Could not prepare the week for the attack"):
        pairs, counts = cache.attack_pairs(s.dataset.id, ctx.od_config, s.week, rcfg, s.seed, _od=ctx.od)
    if pairs.empty:
        st.info("No trips this week: pick another week in the sidebar.")
        st.stop()
    per_user = pairs.groupby("user", sort=True).size()
    pick = st.radio("Person", ["typical (median trips)", "busiest", "quiet (10th percentile)", "by id"],
                    horizontal=True, key="attack_pick",
                    help="Which user of the week to attack: picked by their number of unique trips, or by id.")
    ks = per_user.to_numpy()
    if pick == "by id":
        uid_text = st.text_input("User id", value=str(per_user.index[0]), key="attack_uid",
                                 help="The pseudonymous id as in the data (see the Data page's CSV).")
        match = [u for u in per_user.index[:200_000] if str(u) == uid_text.strip()]
        if not match:
            st.error(f"No user with id {uid_text!r} has trips in week {s.week}; try another id or a quick pick.")
            st.stop()
        user = match[0]
    else:
        q = {"typical (median trips)": 0.5, "busiest": 1.0, "quiet (10th percentile)": 0.1}[pick]
        target = np.quantile(ks, q, method="nearest")
        user = per_user.index[int(np.flatnonzero(ks == target)[0])]
    up = pairs.loc[(pairs["user"] == user).to_numpy()]
    if counts is None:   # user-level: counts of the bounded pairs
        cnt = pairs.groupby(["origin", "destination"], sort=False).size().rename("count").reset_index()
    else:
        cnt = counts[["origin", "destination", "count"]]
    others = up.merge(cnt, on=["origin", "destination"], how="left")["count"].to_numpy(dtype=float) - 1.0
    eps_pair = 1.0 / rcfg.scale
    with engine_errors("Could not attack this user"):
        ur, roc_plain = cache.user_risk(tuple(np.sort(others).tolist()), eps_pair, float(rcfg.threshold))
    k_user = len(others)
    # p_k of the release's own per-pair noise (1/scale: ε per count, or ε/max_pairs in the per-user mode)
    plain_k = float(cache.success_curve(eps_pair, max(k_user, 1), 0.5)["success"][k_user]) if k_user else 0.5
    c = st.columns(4)
    metric(c[0], "User", str(user), f"{k_user} unique trips this week")
    metric(c[1], "Effective k after suppression", num(round(ur.effective_k, 1)),
           f"{ur.k_informative} of {k_user} pairs carry any signal",
           help="The k of the plain curve with the same success.")
    metric(c[2], "Attack success on this user", pct(ur.success), probability_words(ur.success),
           help=f"Exact (within {ur.error_bound:.0e}): ½ + ½·TV of what the release shows with and without them.")
    metric(c[3], "Without suppression", pct(plain_k) if np.isfinite(plain_k) else "–",
           "if every pair were published" if np.isfinite(plain_k) else None,
           help="p_k at this user's k for the release's per-pair noise (the curve above in per-metric mode).")
    left, right = st.columns(2)
    with left:
        fig = go.Figure()   # drawn with the points that show (thin_curve); the CSV keeps every vertex
        t1, t2 = thin_curve(ur.roc.fpr, ur.roc.tpr), thin_curve(roc_plain.fpr, roc_plain.tpr)
        fig.add_scatter(x=np.asarray(ur.roc.fpr)[t1], y=np.asarray(ur.roc.tpr)[t1], mode="lines",
                        name=f"thresholded release (AUC {ur.roc.auc:.3f})")
        fig.add_scatter(x=np.asarray(roc_plain.fpr)[t2], y=np.asarray(roc_plain.tpr)[t2], mode="lines",
                        line={"dash": "dash"}, name=f"every pair published (AUC {roc_plain.auc:.3f})")
        fig.add_scatter(x=[0, 1], y=[0, 1], mode="lines", line={"dash": "dot", "color": "#999"}, name="guessing")
        styled(fig, f"ROC of the attack on user {user}")
        fig.update_layout(xaxis_title="false-positive rate", yaxis_title="true-positive rate",
                          legend={"x": 0.35, "y": 0.05})
        roc_df = pd.DataFrame({"fpr": ur.roc.fpr, "tpr": ur.roc.tpr})
        chart(fig, f"roc_user_{user}", data=roc_df,
              config=user_risk_config(s, ctx.loaded, user=str(user)),
              command="user-risk", key="roc_user")

    # ---- the population ---------------------------------------------------------------------------------------------
    with right:
        st.markdown(f"**Everyone in week {s.week}**")
        pop = st.toggle("Attack every user of the week", value=False, key="attack_population",
                        help="Exact success for each user (a few seconds for 25,000 users; cached per setting).")
        if pop:
            with engine_errors("Could not attack the population"):
                risk, _report, summary = cache.week_risk(s.dataset.id, ctx.od_config, s.week, rcfg, s.seed,
                                                        _pairs=pairs, _counts=counts)
            fig = go.Figure()
            fig.add_histogram(x=risk["success"], nbinsx=50, name="users")
            fig.add_vline(x=bound, line_dash="dash", annotation_text="per-trip bound", annotation_position="top left")
            fig.add_vline(x=float(ur.success), line_dash="dot", line_color="#d95f02", annotation_text=f"user {user}",
                          annotation_position="bottom right")
            styled(fig, "Attack success over the users of the week")
            fig.update_layout(xaxis_title="probability the attacker is right", yaxis_title="users", showlegend=False)
            chart(fig, f"population_risk_week{s.week}", data=risk.astype({"user": str}),
                  config=user_risk_config(s, ctx.loaded), command="user-risk", key="pop_risk")
            share = summary["share_above"]
            st.markdown(
                f"Median success **{pct(summary['quantiles']['median'])}** "
                f"({probability_words(summary['quantiles']['median'])}); "
                f"{pct(float(np.mean(risk['success'] > bound)))} of users are above the per-trip "
                f"bound, {pct(share['0.9'])} above 90 %. Median effective k {summary['median_effective_k']:.1f} "
                f"for a median of {summary['median_k']:.0f} unique trips.")
        else:
            st.caption("Switch on to compute the attack's success for every user of the week "
                       "(`odcore.attack.week_risk`).")


real_person()
st.caption("Curves: `odcore.attack.success_curve` (exact, from the privacy-loss distribution of `odcore.pld`), "
           "`simulate_attack` (the paper's Monte Carlo), `user_risk` / `week_risk` (the thresholded release).")
reproduce([("The p_k curve" + (" with the Monte Carlo" if mc is not None else ""), "attack-curve",
            attack_curve_config(s, k_max=K_MAX, prior=float(prior), monte_carlo=int(reps) if mc is not None else None)),
           (f"Every user of week {s.week} (add --user ID for one user's ROC)", "user-risk",
            user_risk_config(s, ctx.loaded))])
