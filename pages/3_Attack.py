"""Attack: how often the strongest attacker of the paper tells whether a person is in the release."""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd
import streamlit as st

from odapp.attack import cache as attack_cache
from odapp.attack import learned as learned_view
from odapp.attack import view as attack_view
from odapp.live import view as live_view
from odapp.shared import ahead, charts, guide
from odapp.shared.cli_config import attack_curve_config, user_risk_config
from odapp.shared.errors import engine_errors
from odapp.shared.export import button_row, code_caption, export_buttons, reproduce
from odapp.shared.layout import metric, needs_pairs, page
from odapp.shared.styling import projector_mode
from odapp.shared.words import bound_label, comparison_label, pct, probability_words, unit_words
from odcore.privacy.attack import simulate_attack

K_MAX = attack_view.K_MAX   # Houssiau et al. 2022, Fig. 1: k = 0..70
MC_KEY = "attack.mc_results"   # session_state: {(epsilon, reps, seed): SimulationResult}

ctx = page(
    "Attack",
    "Imagine an attacker who knows **everyone else's trips** and *k* of yours, and sees the published counts: "
    "were you in the data? Each of your trips adds one more noisy hint, so the more distinct trips you make, the "
    "surer the attacker gets — from a coin flip at k = 0 towards certainty. The dashed line is what the "
    "“16 %” statement promises (one trip).",
    icon="🎯", live=("epsilon",),
)
needs_pairs(ctx, "The per-person attack")
guide.panel(__file__, ctx)   # this page's step of the guided tour (odapp.shared.guide)
s = ctx.settings
picture = st.container()   # the live curve first; the prior and the readings below it
# the prior and the three readings in four equal columns (one row: a row of three inside the last three quarters
# drew the same and made two blocks more on every rerun)
c1, *c = st.columns(4)
prior = c1.slider("Attacker's prior that you are in", 0.05, 0.95, 0.5, 0.05, key="attack_prior",
                  help="0.5 is the paper's setting (a coin flip before the attack). Other priors show the "
                       "Bayes-optimal attacker's success.")
with engine_errors("Could not compute the attack curve", "Check ε (above the curve)."):
    curve = attack_cache.success_curve(s.epsilon, K_MAX, float(prior))
user_mode = s.mode == "user_level"
if user_mode:   # the bounded release: a person's week adds min(n, m) counts, each with Laplace(m/ε)
    with engine_errors("Could not compute the per-person curve", "Check ε (above the curve) and max pairs in the sidebar."):
        curve["success_per_person"] = attack_cache.bounded_success_curve(s.epsilon, s.max_pairs, K_MAX)
head = curve["success_per_person"] if user_mode else curve["success"]
p3, p32, bound = float(head[3]), float(head[32]), float(curve["bound"][0])
pm3, pm32 = float(curve["success"][3]), float(curve["success"][32])
metric(c[0], bound_label(s.mode), pct(bound), probability_words(bound),
       help="e^ε/(1+e^ε): the most an ε-DP release lets an attacker be right about what ε covers (one trip "
            "per count; a person's whole week per person and week), from a 50/50 prior.")
unit = unit_words(s.mode)
metric(c[1], "Success with k = 3 trips", pct(p3),
       f"{probability_words(p3)} ({unit}; {comparison_label(pct(pm3))})" if user_mode else probability_words(p3),
       help="Exact success against the release in the chosen unit. Per count: p_3 (Houssiau et al. report "
            "70.5 % by Monte Carlo at ε = 0.66). Per person: the bounded release, min(3, max pairs) counts "
            "each with noise max_pairs/ε.")
metric(c[2], "Success with k = 32 trips", pct(p32),
       f"{probability_words(p32)} ({unit}; {comparison_label(pct(pm32))})" if user_mode else probability_words(p32),
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

mc = st.session_state.get(MC_KEY, {}).get((float(s.epsilon), int(reps), int(s.seed)))
# drawn for the files only (the page draws the live curves), when a button asks for it
fig = functools.partial(charts.curve_chart, curve, mc if show_mc else None, mode=s.mode, epsilon=s.epsilon,
                        max_pairs=s.max_pairs, prior=float(prior), reps=int(reps), p3=p3, p32=p32,
                        projector=projector_mode())
curve_data = curve if mc is None else curve.merge(mc, on="k", how="left")
with picture:
    live_view.attack(s, curve, k_max=K_MAX, prior=float(prior), mc=mc if show_mc else None, reps=int(reps))
row = button_row()   # there in both modes, so what follows keeps its place (updated, not rebuilt)
if not projector_mode():   # the curve at the page's ε, as files (plotly)
    export_buttons("attack_success_curve", fig=fig, data=curve_data,
                   config=attack_curve_config(s, k_max=K_MAX, prior=float(prior),
                                              monte_carlo=int(reps) if mc is not None else None),
                   command="attack-curve", key="attack_curve", row=row)

# ---- a real user of the week ------------------------------------------------------------------------------------
attack_view.real_person(ctx, bound)   # its own fragment (odapp.attack.view)
code_caption("Curves: `odcore.privacy.attack.success_curve` (exact, from the privacy-loss distribution of `odcore.privacy.pld`), "
           "`simulate_attack` (the paper's Monte Carlo), `user_risk` / `week_risk` (the thresholded release).")
reproduce([("The p_k curve" + (" with the Monte Carlo" if mc is not None else ""), "attack-curve",
            attack_curve_config(s, k_max=K_MAX, prior=float(prior), monte_carlo=int(reps) if mc is not None else None)),
           (f"Every user of week {s.week} (add --user ID for one user's ROC)", "user-risk",
            user_risk_config(s, ctx.loaded))])
# ---- learned attacks beside the exact optimum (odapp.attack.learned) ----------------------------------------------------
learned_view.section(ctx)
# the next grid step or seed, while the person reads this one: the same person pick, on the next tables
ahead.after(ctx, functools.partial(attack_view.person_tables, pick=st.session_state.get("attack_pick", next(iter(attack_view.PICKS))),
                                   uid_text=st.session_state.get("attack_uid"), fit=live_view.fitted(s)))
