"""Trajectory recovery: whole trajectories rebuilt from counts per cell and hour (Xu et al. 2017)."""

from __future__ import annotations

import math

import streamlit as st

from odapp.components.map import deck_map
from odapp.recovery import view as recover_view
from odapp.shared import projector
from odapp.shared.errors import engine_errors
from odapp.shared.layout import metric, needs_pairs, page
from odapp.shared.words import pct
from odcore.recover.defences import Defence, DefenceSpec
from odcore.recover.experiment import SweepConfig

ctx = page(
    "Trajectory recovery",
    "Publish only **how many people are in each area, hour by hour** — no ids, no trips. Xu et al. (WWW 2017) "
    "rebuild everyone's trajectory from those counts alone: at night each trajectory takes the nearest count, by "
    "day the count nearest where its speed would take it, and days are chained by how little a person's set of "
    "places grows. Grey: a person's true path; orange: the path the attack rebuilt for them.",
    icon="🧩", headline=False,
)
needs_pairs(ctx, "Trajectory recovery (it needs each person's traces to score the attack)")
s = ctx.settings
c = st.columns([1, 1, 1, 1.4, 1.2])
people = c[0].select_slider("People", [50, 100, 150, 200, 300], value=150, key="recover_people",
                            help="Drawn at random from the data: the attack solves one people × people assignment "
                                 "per hour, so the page keeps it small. The CLI runs everyone.")
days = c[1].select_slider("Days", [1, 2, 3, 5, 7], value=2, key="recover_days",
                          help="The first whole days of the data (local time).")
side = c[2].select_slider("Grid", [10, 15, 20, 30], value=20, key="recover_grid", format_func=lambda v: f"{v}×{v}",
                          help="Cells over the central 98 % of the points.")
defence = c[3].selectbox("Defence", [d.value for d in Defence], key="recover_defence",
                         help="none; Laplace 1/ε per count; Laplace then threshold 5; per-person bounding (24 hours "
                              "kept, Laplace 24/ε); Knock Knock's lpa, gsm, fpa, efpag (user-level).")
eps = c[4].select_slider("ε", [0.1, 0.3, 1.0, 3.0, 10.0, 50.0], value=1.0, key="recover_eps",
                         disabled=defence == Defence.NONE.value)
rs = recover_view.RecoverSettings(people=people, days=days, grid_side=side, tz=ctx.loaded.tz, seed=int(s.seed))
spec = DefenceSpec(defence, math.inf if defence in (Defence.NONE.value,) else float(eps))
with engine_errors("Could not build the hourly cells", "Pick fewer days, or data with whole days."):
    pop = recover_view.population(s.dataset.id, rs, _df=ctx.loaded.df)
with engine_errors("The attack failed"):
    res = recover_view.recovery(s.dataset.id, rs, spec, _pop=pop)
sc = res["score"]
frame = recover_view.path_frame(pop, res["recovered"], res["matching"], recover_view.most_moving(pop, 4))
deck_map(recover_view.paths_deck(frame, pop), height=460, key="recover_map")
m = st.columns(4)
metric(m[0], "Accuracy", pct(sc["accuracy"]), "person-hours in the right cell",
       help="Recovered trajectories matched one-to-one to people by the assignment that maximises agreeing hours "
            "(docs/recover.md).")
metric(m[1], "Chance", pct(res["chance"]), "same counts, hours linked at random",
       help="Each hour's true counts dealt to the trajectories in a random order, scored the same way.")
metric(m[2], "Within a day", pct(sum(sc["per_day_accuracy"]) / len(sc["per_day_accuracy"])),
       "each day matched on its own (night and day phases)")
metric(m[3], "Re-identified by top 2 places", pct(sc["reidentified_top_k"]["2"]),
       f"{pct(sc['unique_true_top_k']['2'])} of people are unique by theirs",
       help="Share of people whose two most visited cells are those of exactly one recovered trajectory, the one "
            "matched to them.")
st.plotly_chart(recover_view.per_slot_figure(res["per_slot"], res["chance"]), key="recover_per_slot", theme=None)
st.caption(f"{pop.n_users} people drawn at random (seed {s.seed}) · {pop.sequences.shape[1]} hourly slots · "
           f"{pop.cells.n_cells} cells · paths of the 4 people who move most; a slot with no record of a person "
           "keeps their last cell.")

st.subheader("Accuracy against ε")
cfg = SweepConfig(defences=("laplace", "threshold", "bounding", "lpa"), epsilons=(0.1, 1.0, 10.0, 50.0),
                  seed=int(s.seed))
key = ("recover.sweep", s.dataset.id, rs, cfg)
if st.button("Run every defence at ε = 0.1, 1, 10, 50", key="recover_run_sweep",
             help="15 attacks on the drawn people (about a minute for 150 people over 2 days)."):
    with engine_errors("The sweep failed"):
        st.session_state[key] = recover_view.sweep(s.dataset.id, rs, cfg, _pop=pop)
result = st.session_state.get(key)
if result is None:
    st.caption("Not run yet for these people and settings.")
else:
    st.plotly_chart(recover_view.curve_figure(result), key="recover_curve", theme=None)
    st.dataframe(recover_view.chance_table(result), hide_index=True)
with st.expander("How the attack works and how it is scored"):
    st.markdown(
        "- **Input**: counts per cell per hour"
        + ("" if projector.on() else " (`python -m odcore recover --write-counts DIR` writes them as `counts.csv` "
                                     "and `cells.csv`, so another implementation can run on the same numbers)")
        + ".\n"
        "- **Night (0–6 h)**: each trajectory continues to the nearest location among that hour's counts; "
        "**day**: to the one nearest its velocity prediction; **across days**: pieces are joined where the "
        "entropy of the person's visited cells grows least. Each step is one assignment problem (Hungarian).\n"
        "- **Noise**: the attacker turns noisy counts back into whole people (negatives to zero, rescaled to the "
        "population, largest remainders) and runs the same steps.\n"
        "- **Chance**: the same counts with the hours linked at random. Where a defence's curve meets it, the "
        "counts no longer tell who went where.\n"
        "- Details, choices and measurements: `docs/recover.md`.")
