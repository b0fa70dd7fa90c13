"""Release designer: state a goal per person, get settings (max pairs, noise, threshold) and what they keep."""

from __future__ import annotations

import functools
import json

import pandas as pd
import streamlit as st

from odapp.facts import view as facts_view
from odapp.live import view as live_view
from odapp.shared import ahead, callbacks, page_work, projector
from odapp.shared.cli_config import design_config
from odapp.shared.errors import engine_errors
from odapp.shared.export import export_buttons, opened_expander, reproduce
from odapp.shared.layout import metric, needs_pairs, page
from odapp.shared.words import comparison_label, num, pct, probability_words, sci, unit_words
from odcore.privacy.accounting import partition_threshold
from odcore.privacy.design import DEFAULT_MAX_PAIRS, Goal, GoalKind, verdict_rows
from odcore.report.facts import DELTA_SPLIT_DESIGNER, DELTA_SPLIT_SELECTION
from odcore.report.sheet import guarantee_sheet

ctx = page(
    "Release designer",
    "Say what a **person** should be protected against, in plain words; the designer finds how many trips each "
    "person may contribute per week (*max pairs*), how much noise to add and which threshold to use, checks the "
    "guarantee exactly, and shows what the release still publishes on the loaded week — next to Google's "
    "per-count setting.",
    icon="🛠️",
)
needs_pairs(ctx, "The release designer (it bounds each person's pairs)")
s = ctx.settings
picture = st.container()   # the frontier first; the goal, the verdict and the settings below it
GOAL_LABELS = {GoalKind.WEEK.value: "ε per person per week ≤ X",
               GoalKind.TOTAL.value: "ε per person over W weeks ≤ X",
               GoalKind.ATTACK.value: "an attacker who knows k trips is right at most p of the time",
               GoalKind.TPR.value: "attacker's TPR at FPR α ≤ r",
               GoalKind.ADVANTAGE.value: "attacker's advantage TPR − FPR ≤ r",
               GoalKind.POSTERIOR.value: "attacker's belief from prior π ≤ r"}
RISK_KINDS = (GoalKind.TPR.value, GoalKind.ADVANTAGE.value, GoalKind.POSTERIOR.value)

with st.form("design_goal"):
    kind = st.radio("Goal", list(GOAL_LABELS), format_func=GOAL_LABELS.get, horizontal=True, key="design_kind",
                    help="The unit is always one person: everything they do in a week (or over W weeks).")
    c = st.container(horizontal=True, gap="small")      # one block per row (st.columns makes one per cell)
    x = c.number_input("X (largest ε)", 0.01, 100.0, 1.0, 0.1, key="design_x",
                          help="Goals on ε: the largest ε per person (per week, or over W weeks).")
    d = c.select_slider("D (largest δ)", [1e-9, 1e-8, 1e-7, 1e-6, 1e-5, 1e-4], value=1e-6, key="design_d",
                           format_func=callbacks.power_of_ten,
                           help="Chance the guarantee fails, thresholding included (half for the noise, half for "
                                "the threshold).")
    w = c.number_input("W (weeks)", 1, 520, 52, key="design_w", help="Weekly releases the total covers.")
    k = c.number_input("k (trips known)", 1, 200, 32, key="design_k",
                          help="Attack goal: unique trips of the person the attacker knows (Houssiau et al.: 32).")
    p = c.number_input("p (largest success)", 0.51, 0.99, 0.6, 0.01, key="design_p",
                          help="Attack goal: the attacker may be right at most this often (0.5 = coin flip).")
    c = st.container(horizontal=True, gap="small")
    r = c.number_input("r (largest risk)", 0.001, 0.999, 0.05, 0.01, format="%.3f", key="design_r",
                          help="Risk goals: the largest TPR at FPR α, advantage, or belief after the release.")
    fpr = c.number_input("α (FPR)", 0.0001, 0.5, 0.01, 0.005, format="%.4f", key="design_fpr",
                            help="False-positive rate the attacker's TPR is read at (regulators ask for 1 % or less).")
    prior = c.number_input("π (prior)", 0.001, 0.999, 0.5, 0.05, format="%.3f", key="design_prior",
                              help="The attacker's belief, before the release, that the person is in the data.")
    attacker = c.radio("Attacker", ["known", "full"], horizontal=True, key="design_attacker",
                          format_func={"known": "knows k trips", "full": "knows the whole week"}.get,
                          help="Risk goals: both know everyone else's data; 'known' knows k of the person's trips.")
    c = st.container(horizontal=True, gap="small", vertical_alignment="bottom")
    tune = c.toggle("Tune max pairs on the data", value=False, key="design_tune",
                       help="Of the max pairs whose expected error is under 10 %, keep the one publishing most "
                            "trips on this week. That choice uses the data; off: the data-independent default.")
    fixed_m = c.number_input("Fixed max pairs", 1, 200, DEFAULT_MAX_PAIRS, key="design_m",
                                help=f"Used when tuning is off; {DEFAULT_MAX_PAIRS} is the data-independent default.")
    c.form_submit_button("Design the release", type="primary")

with engine_errors("Could not design the release", "Loosen the goal (larger X, p or D)."):
    risky = kind in RISK_KINDS
    goal = Goal(kind=kind, epsilon=float(x), delta=float(d), weeks=int(w),
                known_trips=int(k) if kind == "attack" or risky else None,
                success=float(p) if kind == "attack" else None, risk=float(r) if risky else None,
                fpr=float(fpr), prior=float(prior), attacker=attacker)
    max_pairs = None if tune or int(fixed_m) == DEFAULT_MAX_PAIRS else int(fixed_m)
    work = functools.partial(page_work.design, goal=goal, max_pairs=max_pairs, tune=bool(tune))
    rep, rep_key, frontier = work(ctx)

st.subheader(f"Design for: {rep['goal']['words']}")
verdict = rep["verdict"]
{"useful": st.success, "not_useful": st.warning, "not_met": st.error}[verdict["status"]](
    f"**{'Useful' if rep['useful'] else 'Not useful'}.** {verdict['headline']} "
    f"(Goal figure {num(rep['goal_value'])}, checked on the exact privacy-loss distribution.)")
if rep["would_change"]:
    st.markdown("**What would change it:**\n" + "\n".join(f"- {c['words']}" for c in rep["would_change"]))
st.table(pd.DataFrame(verdict_rows(rep), columns=["", "value"]).set_index(""))
c = st.columns(4)
metric(c[0], "Max pairs per person and week", num(rep["max_pairs"]),
       "tuned on this week's data" if rep["tuned_on_data"] else "fixed in advance")
metric(c[1], "Noise scale", num(round(rep["noise_scale"], 2)), f"Laplace, ε {num(round(rep['epsilon'], 3))} "
       f"{unit_words('user_level')}")
pure_tau = partition_threshold(rep["goal"]["epsilon"], rep["max_pairs"], rep["goal"]["delta"]) \
    if rep["goal"]["kind"] == GoalKind.WEEK.value and rep["goal"].get("epsilon") else None
metric(c[2], "Threshold", num(rep["threshold"]), f"thresholding δ {sci(rep['delta_partition_week'])} per week"
       + (f"; {num(round(pure_tau, 1))} on the Audit page" if pure_tau else ""),
       help=f"Why the Audit page's comparison differs at the same goal: {DELTA_SPLIT_DESIGNER}; "
            f"{DELTA_SPLIT_SELECTION}.")
metric(c[3], "ε per person and week", num(round(rep["epsilon_user_week"], 3)),
       f"δ {rep['delta_user_week']:.1e} (tight)")
c = st.columns(4)
metric(c[0], f"ε per person, {rep['weeks']} weeks", num(round(rep["epsilon_user_total"], 3)),
       f"δ {rep['delta_user_total']:.1e} (tight, ≤)")
metric(c[1], f"Attack on a typical person ({rep['typical_trips']} trips)", pct(rep["attack_success_typical"]),
       probability_words(rep["attack_success_typical"]))
metric(c[2], f"Attack on the busiest ({rep['busy_trips']} trips)", pct(rep["attack_success_busy"]),
       probability_words(rep["attack_success_busy"]))
g = rep["google"]
google_trips = f"{g['typical_trips']} trips at ε {g['epsilon']}"   # Google's per-count release, the comparison
card_facts = facts_view.of(ctx)
card = card_facts.get("epsilon_person_week") if ctx.settings.mode == "per_metric" else None
same_as_card = (card is not None and ctx.settings.epsilon == g["epsilon"] and ctx.settings.threshold == g["threshold"])
metric(c[3], "Google's setting, typical person", f"ε {num(round(g['epsilon_user_week_typical'], 2))}",
       f"per week at δ {sci(rep['goal']['delta'] / 2)}, half of D ({comparison_label(google_trips)})"
       + (f"; {card.text} at δ {sci(card_facts['delta_noise'].value)} on the card above" if same_as_card else ""),
       help="Tight ε of the typical person's week under Google's per-count release, at the designer's δ for the "
            "noise (half of D). The guarantee card at the top gives the same person's ε at δ 10⁻⁶ for the noise: "
            "a smaller δ gives a slightly larger ε.")

st.subheader(f"What the release keeps in week {rep['week']}")
c = st.columns(4)
metric(c[0], "Pairs published", num(rep["pairs_published"]), f"of {num(rep['pairs_total'])}")
metric(c[1], "User-trips published", num(rep["trips_published"]),
       f"of {num(rep['trips_total'])} ({pct(rep['trips_published_frac'])})")
metric(c[2], "Mean relative error", pct(rep["mean_relative_error"]) if rep["pairs_published"] else "–",
       "published counts vs true counts")
metric(c[3], "Published but mostly noise", num(rep["noise_dominated_published"]),
       f"true count under {num(rep['threshold'] / 2)}")
(st.warning if rep["tuned_on_data"] else st.info)(rep["tuning_note"])

dflt = rep["default"]
compare = pd.DataFrame([
    {"design": f"chosen (max pairs {rep['max_pairs']})", "ε per person-week": rep["epsilon_user_week"],
     "noise scale": rep["noise_scale"], "threshold": rep["threshold"], "user-trips published": rep["trips_published"],
     "pairs published": rep["pairs_published"], "mean relative error": rep["mean_relative_error"]},
    {"design": f"data-independent default (max pairs {dflt['max_pairs']})",
     "ε per person-week": dflt["epsilon_user_week"], "noise scale": dflt["noise_scale"],
     "threshold": dflt["threshold"], "user-trips published": dflt["trips_published"],
     "pairs published": dflt["pairs_published"], "mean relative error": dflt["mean_relative_error"]},
])
# a table whose text wraps to the content's width (the scrolling grid hid its last columns on a 1024-pixel projector)
st.table(compare.assign(**{c: [num(float(v)) for v in compare[c]] for c in
                           ("ε per person-week", "noise scale", "threshold", "user-trips published",
                            "pairs published")},
                        **{"mean relative error": ["–" if v is None or pd.isna(v) else pct(float(v))   # none published
                                                   for v in compare["mean relative error"]]}),
         hide_index=True)

cfg = design_config(s, ctx.loaded, goal, max_pairs=max_pairs, tune=bool(tune))
with picture:
    st.subheader("Utility against per-person ε")
    live_view.frontier(frontier)   # drawn in the browser: a new design repaints it without plotly's redraw
if not projector.on():   # the files: plotly's chart and the table, made when a button is clicked (partials of
    # module functions: a function defined here would keep this page's namespace alive after the session closes)
    export_buttons("design_frontier", fig=functools.partial(page_work.frontier_figure, rep_key, rep),
                   data=functools.partial(pd.DataFrame, rep["frontier"]), config=cfg, command="design",
                   key="design_frontier")
st.caption("Each line: one max pairs, the release ε varied, the threshold fitted to its noise; y is the exact expected "
           f"share given one seeded contribution bounding. Filled points are useful (expected relative error at most "
           f"{pct(rep['error_level'])}), open points are not. Google's points: its per-count release, whose per-person "
           "ε depends on how many trips a person makes.")

if not projector.on():   # downloads are hidden in projector mode, as its switch says
    c = st.columns(2)
    # both made when clicked (a callable's data), not built and sent again on every rerun of the page
    c[0].download_button("Design report (JSON)",
                         functools.partial(json.dumps, {k: v for k, v in rep.items() if k != "frontier"}, indent=2,
                                           allow_nan=False),
                         file_name="design.json", mime="application/json", key="design_json", on_click="ignore",
                         help="The same keys as `python -m odcore design --json`.")
    c[1].download_button("Design sheet — do not share (HTML)", functools.partial(guarantee_sheet, rep),
                         file_name="DO_NOT_SHARE_design_sheet.html", mime="text/html", key="design_sheet",
                         on_click="ignore",
                         help="For you: who is protected, ε and δ per week and per year, what an attacker can learn, "
                              "what is published and what it costs, with the typical and busiest person and the "
                              "verdict computed on the true data. The sheet to share is the Privacy budget page's.")
box = opened_expander("Candidates tried: expected utility of every max pairs on this week (the frontier)",
                      "design_candidates")   # made when opened: closed, it sends nothing on a rerun
if box is not None:
    with box:
        st.dataframe(pd.DataFrame(rep["candidates"]), hide_index=True, width="stretch",
                     column_config={k: st.column_config.NumberColumn(format="percent") for k in
                                    ("relative_error", "relative_error_bounding", "relative_error_noise",
                                     "trips_published_frac")})
        st.caption(f"Useful: expected relative error at most {pct(rep['error_level'])} and at least one pair "
                   f"published. Check the budget: `{rep['budget_command']}`")
reproduce([("This design", "design", cfg)])
ahead.after(ctx, work)   # the next grid step or seed, while the person reads this one
