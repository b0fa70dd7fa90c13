"""Audit: the guarantee tested on this week's release (canaries, one release, an empirical lower bound on ε), and
which pairs each partition-selection strategy would publish at the same guarantee."""

from __future__ import annotations

import functools

import pandas as pd
import streamlit as st

from odapp.audit import cache as audit_cache
from odapp.shared import ahead, guide, page_work, projector
from odapp.shared.errors import engine_errors
from odapp.shared.layout import metric, needs_pairs, page
from odcore.numbers import number_text
from odcore.report.facts import DELTA_SPLIT_DESIGNER, DELTA_SPLIT_SELECTION, audit_most_shown, audit_sentence

ctx = page(
    "Audit",
    "The theory says what a release *promises*. An audit measures what an attacker *actually learns* from it: "
    "plant canary people in the week (each one in or out by a coin toss), release the week once, guess each "
    "canary from the published table with the Attack page's likelihood ratio, and turn the right guesses into a "
    "lower bound on ε at 95 % confidence (Steinke, Nasr and Jagielski 2023).",
    icon="🔬",
)
guide.panel(__file__, ctx)
needs_pairs(ctx, "The audit")
s = ctx.settings
UNITS = (("count", "per count"), ("person", "per person and week"))
c1, c2, c3 = st.columns(3)
canaries = int(c1.select_slider("Canaries", options=[200, 500, 1000, 2000], value=1000, key="audit_canaries",
                                help="More canaries give a tighter bound (the bound cannot exceed about "
                                     "log(canaries) even when every guess is right) and take longer."))
placement = c2.radio("Canary pairs", ["visible", "typical"], key="audit_placement", horizontal=True,
                     format_func=lambda v: {"visible": "published (worst case)",
                                            "typical": "a typical person's"}[v],
                     help="Published: each canary's pairs carry enough other people to be published, the counts "
                          "the per-count guarantee must cover. A typical person's: pairs drawn like a random "
                          "person's, most of them suppressed by the threshold.")
run = c3.button("Run the audit", key="audit_run", type="primary",
                help="About 5–15 s on the bundled city: one release of the week with the canaries.")
if run or st.session_state.get("audit_done"):
    st.session_state["audit_done"] = True
    rows = []
    with engine_errors("Could not audit this week", "Try fewer canaries, or the other placement."):
        for unit, label in UNITS:
            r = audit_cache.audit(s.dataset.id, ctx.od_config, s.week, float(s.epsilon), float(s.threshold), unit,
                            placement, canaries, int(s.seed), _od=ctx.od)
            rows.append((label, r))
    if rows:
        cols = st.columns(len(rows))
        for col, (label, r) in zip(cols, rows, strict=True):
            most = audit_most_shown(r["guesses"])
            metric(col, f"Measured ε, {label}", f"≥ {r['epsilon_lower']:.2f}",
                   f"theory {r['epsilon_theory']:.2f}; {r['guesses']} guesses show at most {most:.2f} "
                   f"({r['trips']} pair{'s' if r['trips'] > 1 else ''} a canary)",
                   help=f"{r['correct']} right of {r['guesses']} guesses on {r['canaries']} canaries; the 95 % "
                        "lower bound of Steinke, Nasr and Jagielski (2023), Theorem 3.1. Even with every guess "
                        f"right it cannot pass {most:.2f}.")
        st.caption(audit_sentence({unit: r for (unit, _), (_, r) in zip(UNITS, rows, strict=False)}, float(s.epsilon))
                   + f" `python -m odcore audit --seed {int(s.seed)}` gives the same numbers.")

st.subheader("Which pairs survive: the lab's cut beside the libraries' partition selection")
st.markdown(
    "Google's and PipelineDP's pipelines choose the published pairs with a selection mechanism of their own and "
    "add a separate noisy count, splitting ε between the two; the lab's release uses one noisy count for both. "
    "Same guarantee per person and week, same data:")
d1, d2, d3 = st.columns(3)
eps_p = d1.number_input("ε per person and week", 0.1, 10.0, 1.0, 0.1, key="sel_eps",
                        help="The guarantee every strategy below meets.")
m = int(d2.number_input("Max pairs a person", 1, 100, 10, 1, key="sel_m",
                        help="Each person's week is cut to this many pairs first (the same cut for every row)."))
delta = 1e-6
d3.markdown(f"δ = {delta:g} per person and week")
work = functools.partial(page_work.selection, epsilon=float(eps_p), delta=delta, max_pairs=m)
with engine_errors("Could not compare the strategies", "Try another ε or max pairs."):
    t = work(ctx)
    show = pd.DataFrame({
        "strategy": t["strategy"],
        "mechanism": t["mechanism"],
        "pairs published (expected)": [f"{p} ({e:.1f})" for p, e in zip(t["pairs_published"], t["pairs_expected"],
                                                                        strict=True)],
        "user-trips published": [number_text(int(v)) for v in t["user_trips_published"]],
        "error (bounding / noise)": [("–" if pd.isna(a) else f"{a:.0%} ({b:.0%} / {c:.0%})")
                                     for a, b, c in zip(t["mre_total"], t["mre_bounding"], t["mre_noise"],
                                                        strict=True)],
        "why": t["why"],
    })
    st.dataframe(show, hide_index=True, width="stretch")
    st.caption(f"At the same ε, max pairs and δ the Release designer's threshold, pairs and error differ: "
               f"{DELTA_SPLIT_DESIGNER}; {DELTA_SPLIT_SELECTION}.")
    st.caption("Compare rows of the same mechanism: the lab's one-count Laplace with PipelineDP's post-aggregation "
               "Laplace, the lab's one-count Gaussian with PipelineDP's post-aggregation Gaussian, a separate "
               "selection with a separate count."
               + ("" if projector.on() else " PipelineDP itself on the same pairs: `python -m odcore selection` "
                                            "(with `pip install pipeline-dp`); the measured table is in docs/audit.md."))
ahead.after(ctx, work)   # the next grid step or seed, while the person reads this one
