"""Privacy budget: per metric vs per user, ε against trips and weeks, and what each ε means for an attacker."""

from __future__ import annotations

import functools

import pandas as pd
import streamlit as st

from odapp.budget import cache as budget_cache
from odapp.facts import view as facts_view
from odapp.live import view as live_view
from odapp.release import view as rv
from odapp.shared import callbacks, charts, guide
from odapp.shared.cli_config import budget_config
from odapp.shared.errors import engine_errors
from odapp.shared.export import export_buttons, reproduce
from odapp.shared.layout import metric, page
from odapp.shared.styling import projector_mode
from odapp.shared.words import comparison_label, epsilon_words, num, pct, probability_words, sci, unit_words
from odcore.privacy.accounting import (
    WEEKS_RELATIVE_STEP,
    BudgetConfig,
    delta_parts,
    weeks_interval,
)
from odcore.report.facts import TYPICAL_HOW, success_bound

ctx = page(
    "Privacy budget",
    "Google's ε = 0.66 is a promise about **one count**: whether one person made one trip A → B in one week "
    "(“per metric”). A person with *n* distinct trips in a week is in *n* counts, so their own budget adds up "
    "— to n·ε per week and more over many weeks. This page puts the two readings side by side and turns each ε "
    "into the best an attacker could do.",
    icon="🧮", live=("epsilon",),
)
guide.panel(__file__, ctx)   # this page's step of the guided tour (odapp.shared.guide)
s = ctx.settings
picture = st.container()   # the live curves first; the settings and the cards below them
typical = facts_view.of(ctx)["typical_trips"].value or 0   # the typical person of every page (odcore.report.facts)

c1, c2, c3, c4 = st.columns(4)
trips = c1.number_input(
    "Unique trips of the user per week (n)", min_value=1, max_value=500, value=70, step=1, key="budget_trips",
    help="Distinct origin–destination pairs a person contributes in a week. Houssiau et al. take 70 (10 a day) as "
         f"a conservative bound; in the loaded data the typical person of week {s.week} ({TYPICAL_HOW}) has "
         f"{typical}.")
weeks = c2.number_input("Weeks released (W)", min_value=1, max_value=520, value=52, step=1, key="budget_weeks",
                        help="Number of weekly releases the person appears in (one year = 52).")
delta = c3.select_slider(
    "δ asked for (every part included)", options=[1e-12, 1e-9, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2], value=1e-6,
    key="budget_delta", format_func=callbacks.power_of_ten,
    help="The person's δ over the W weeks. As `python -m odcore budget --delta` and `release` split it: per person "
         "half goes to the noise (the δ at which ε is given) and half to the threshold; per count the threshold's "
         "tiny share comes off first. δ is not a chance that the guarantee fails (docs/handover.md).")
prior = c4.slider("Attacker's prior that the person is in the data", 0.01, 0.99, 0.5, 0.01, key="budget_prior",
                  help="What the attacker believes before seeing the release; 0.5 is a coin flip (the 16 % "
                       "statement assumes it).")

# Loss-grid step of the many-week tight bracket: 2 % of ε (width <= 2·weeks·step), so that the bracket's upper end
# is smooth in ε and the live table reads it between grid points (odcore.privacy.accounting.WEEKS_RELATIVE_STEP).
total_interval = weeks_interval(s.epsilon, WEEKS_RELATIVE_STEP)
with engine_errors("Could not compute the budget"):
    parts = delta_parts(s.epsilon, float(delta), int(weeks), threshold=s.threshold, trips=int(trips),
                        max_pairs=s.max_pairs if s.mode == "user_level" else None)
    delta_asked, delta = float(delta), parts.laplace   # below, δ is the Laplace part: the δ at which ε is given
    b = budget_cache.budget(BudgetConfig(epsilon=s.epsilon, threshold=s.threshold, trips=int(trips), weeks=int(weeks),
                                  delta=delta, max_pairs=s.max_pairs if s.mode == "user_level" else None,
                                  total_interval=total_interval))
    vs_trips, over_weeks = budget_cache.budget_curves(s.epsilon, int(trips), int(weeks), float(delta),
                                                          max(70, int(trips)), total_interval)
user_mode = s.mode == "user_level"
if user_mode:   # the same curves for the bounded release (per person and week)
    with engine_errors("Could not compute the per-person curves"):
        vs_trips, over_weeks = budget_cache.person_curves(s.epsilon, s.max_pairs, float(delta), vs_trips, over_weeks)



NBSP = "\u00a0"


def posterior_text(p: float) -> str:
    """A bound on the attacker as the cards write it (:func:`odapp.shared.words.pct`, the one formatter of chances), with
    a no-break space before "%", so that a line never ends at the number."""
    return pct(p).replace(" %", NBSP + "%")


def tight_or_rdp(span: str) -> tuple[float, str]:
    """The tight ε(δ) when the engine computed it (exact, or the upper end of a guaranteed bracket over many
    weeks), else its Rényi-DP bound (odcore.privacy.accounting.TIGHT_K_MAX)."""
    v = b[f"epsilon_user_{span}_tight"]
    if v is None:
        return float(b[f"epsilon_user_{span}_rdp"]), "Rényi bound"
    if span == "total" and b.get("tight_total_method") == "bracket":
        return float(v), f"tight (≤; true value ≥ {b['epsilon_user_total_tight_lower']:.1f})"
    return float(v), "tight"


cli_config = budget_config(s, trips=int(trips), weeks=int(weeks), delta=delta_asked,
                           total_interval=total_interval)

st.subheader(f"The same week in both units ({unit_words(s.mode)} is in use)")
left, right = st.columns(2)
e_count = s.epsilon / s.max_pairs if user_mode else b["epsilon_per_metric"]
with left, st.container(border=True):
    st.markdown(f"#### One count of the release ({s.max_pairs} pairs share ε) — what each number carries"
                if user_mode else f"#### {unit_words('per_metric').capitalize()} — what the “16 %” covers")
    a, b_, c = st.columns(3)
    metric(a, "ε of one count" if user_mode else "ε per count", num(e_count),
           f"noise {s.max_pairs}/ε on every count" if user_mode else epsilon_words(e_count))
    d_count = b["delta_partition_week_bounded"] if user_mode else b["delta_per_metric"]
    metric(b_, "δ per count" if not user_mode else "δ of thresholding", f"{d_count:.1e}",
           "chance the threshold leaks a pair")
    p = success_bound(e_count, d_count, prior)
    metric(c, "Attacker right at most", posterior_text(p), probability_words(p),
           help="The most often any attacker who starts from prior π is right, under (ε, δ): the corner of the "
                "(ε, δ) region (Kairouz, Oh and Viswanath 2015); (e^ε + δ)/(1 + e^ε) at π = ½.")
    st.markdown(
        f"Covers: *did this person travel from A to B in week W?* — an attacker who knows everyone else's trips "
        f"and starts from {pct(prior, 0).replace(' ', NBSP)} is right at most **{posterior_text(p)}** of the time "
        f"(ε and δ of one count). "
        "Does **not** cover: *is this person in the data at all*, *where else did they go*, or anything spanning "
        "several trips or weeks.")
with right, st.container(border=True):
    if user_mode:
        st.markdown(f"#### {unit_words('user_level').capitalize()} — what any person risks "
                    f"(max {s.max_pairs} pairs)")
        week_tight, week_tight_name = b["epsilon_user_week_bounded_tight"], "tight"
        total_v = b["epsilon_user_total_bounded_tight"]
        a, b_, c = st.columns(3)
        metric(a, "ε per person and week", num(week_tight), epsilon_words(week_tight),
               help=f"Exact ε(δ = {sci(delta, '.0e')}) of the {s.max_pairs}-fold Laplace(ε/{s.max_pairs}) composition: "
                    "a person changes at most max_pairs counts by 1, each with noise max_pairs/ε.")
        metric(b_, "δ per person and week", f"{b['delta_user_week_bounded_tight']:.1e}",
               f"{delta:.1e} (noise) + thresholding {b['delta_partition_week_bounded']:.1e}")
        metric(c, f"ε, {int(weeks)} weeks", num(total_v), epsilon_words(total_v),
               help=f"Tight ε of the {int(weeks)}·{s.max_pairs}-fold composition (upper end of a guaranteed "
                    f"bracket; the true value is ≥ {b['epsilon_user_total_bounded_tight_lower']:.3g}); "
                    f"δ {b['delta_user_total_bounded_tight']:.1e}.")
        pw = success_bound(week_tight, b["delta_user_week_bounded_tight"], prior)
        st.markdown(
            f"Covers the whole week of any person, however many trips they make: whether they are in the data at "
            f"all. After one week an attacker is right at most **{posterior_text(pw)}** of the time "
            f"({probability_words(pw)}; ε and δ of the week, from a {pct(prior, 0)} prior); "
            f"noise scale {num(b['noise_scale_bounded'])} instead of {num(1 / s.epsilon)}.")
        if parts.warnings():   # the same words as the command line's warnings
            st.warning(" ".join(parts.warnings()) + " Switch on 'Fit the threshold' in the sidebar.")
        # in the card (there in both units), so the charts below keep their place (updated, not rebuilt)
        if not projector_mode():   # downloads hidden in projector mode
            st.download_button("Guarantee sheet (HTML, printable)", functools.partial(rv.budget_sheet_html, ctx, b,
                                                                                      parts.to_dict()),
                               file_name="guarantee_sheet.html", on_click="ignore",
                               mime="text/html", key="budget_sheet",
                               help="One page that may be shared: unit of protection, ε and δ per week and per year, "
                                    "what an attacker can learn, in plain words. It names no figure of the data.")
            st.download_button("Sheet with the data's record — do not share (HTML)",
                               functools.partial(rv.private_sheet_html, ctx, b, parts.to_dict()),
                               file_name="DO_NOT_SHARE_guarantee_sheet.html", on_click="ignore", mime="text/html",
                               key="budget_sheet_private", type="tertiary",
                               help="For you only: the same sheet with the data's name, content fingerprint, rows and "
                                    "people, exact figures the release does not protect.")
    else:
        st.markdown(f"#### A person's week, {unit_words('per_metric')} added up — what a person with "
                    f"n = {int(trips)} trips risks")
        a, b_, c = st.columns(3)
        metric(a, "ε per week, basic", num(b["epsilon_user_week"]), epsilon_words(b["epsilon_user_week"]),
               help="n·ε: simple composition over the n counts the person is in (Houssiau et al. 46.2 at n = 70).")
        week_tight, week_tight_name = tight_or_rdp("week")
        metric(b_, f"ε per week, {week_tight_name}", num(week_tight), epsilon_words(week_tight),
               help=f"Exact ε(δ = {sci(delta, '.0e')}) of the n-fold Laplace composition from its privacy-loss distribution "
                    "(above k = 400 counts the Rényi-DP bound, within a few % of it, is shown instead).")
        metric(c, f"ε, {int(weeks)} weeks, basic", num(b["epsilon_user_total"]),
               epsilon_words(b["epsilon_user_total"]),
               help="W·n·ε (Houssiau et al. 2402.4 for 52 weeks of 70 trips).")
        pw = success_bound(week_tight, b["delta_user_week_tight"], prior)
        st.markdown(
            f"Covers the whole week of the person: whether they are in the data at all. With these numbers an "
            f"attacker is right at most **{posterior_text(pw)}** of the time after one week "
            f"({probability_words(pw)}; ε and δ of the week, from a {pct(prior, 0)} prior): the formal "
            "guarantee says almost nothing at this level.")

projector = projector_mode()
with picture:
    st.subheader("ε of one user-week against the number of unique trips, and over weeks")
    live_view.budget(s, trips=int(trips), weeks=int(weeks), delta=float(delta), trips_max=max(70, int(trips)),
                     typical=typical, prior=float(prior), relative_step=WEEKS_RELATIVE_STEP)
# the plotly charts are for the files only (the page draws the live curves): built when a button asks for them
fig = functools.partial(charts.trips_chart, vs_trips, delta=float(delta), max_pairs=s.max_pairs, trips=int(trips),
                        typical=typical, week=s.week, e_count=float(e_count), epsilon=s.epsilon, user_mode=user_mode,
                        projector=projector)
left, right = st.columns(2)   # there in both modes, so what follows keeps its place (updated, not rebuilt)
if not projector:   # the curves at the page's ε, as files (plotly)
    with left:
        export_buttons("epsilon_vs_trips", fig=fig, data=vs_trips, config=cli_config, command="budget",
                       key="eps_trips")
    with right:
        fig = functools.partial(charts.weeks_chart, over_weeks, trips=int(trips), max_pairs=s.max_pairs,
                                user_mode=user_mode, projector=projector)
        over_weeks_csv = functools.partial(   # the chart's numbers with the tight bracket's lower end
            callbacks.budget_over_weeks, s.epsilon, int(trips), int(weeks), float(delta),
            s.max_pairs if user_mode else None, vs_trips, total_interval)
        export_buttons("epsilon_over_weeks", fig=fig, data=over_weeks_csv, config=cli_config, command="budget",
                       key="eps_weeks")
    # ε against δ at the page's ε, as files: computed when a button asks; under the first row, in its column (a
    # second pair of columns with one empty made three blocks more on every rerun)
    with left:
        export_buttons("epsilon_delta", fig=functools.partial(charts.delta_figure, s.epsilon, int(trips), projector),
                       data=functools.partial(budget_cache.epsilon_delta_curve, s.epsilon, int(trips)), config=cli_config,
                       command="budget", key="eps_delta")

st.subheader("What each ε means for an attacker")
rows = [("one count (per metric)", b["epsilon_per_metric"], b["delta_per_metric"]),
        (f"one user-week, basic (n = {int(trips)})", b["epsilon_user_week"], b["delta_user_week"]),
        (f"one user-week, {tight_or_rdp('week')[1]} (δ = {sci(delta, '.0e')})", tight_or_rdp("week")[0],
         b["delta_user_week_tight"]),
        (f"{int(weeks)} weeks, basic", b["epsilon_user_total"], b["delta_user_total"]),
        (f"{int(weeks)} weeks, {tight_or_rdp('total')[1]} (δ = {sci(delta, '.0e')})", tight_or_rdp("total")[0],
         b["delta_user_total_tight"])]
if user_mode:   # the unit in use first; the per-count release at the same ε is the comparison, and says so
    rows = [(f"one count ({s.max_pairs} pairs share ε)", e_count, b["delta_partition_week_bounded"]),
            (f"one person-week, {unit_words('user_level')} (max {s.max_pairs} pairs, tight)",
             b["epsilon_user_week_bounded_tight"], b["delta_user_week_bounded_tight"]),
            (f"{int(weeks)} weeks, {unit_words('user_level')} (tight, ≤)", b["epsilon_user_total_bounded_tight"],
             b["delta_user_total_bounded_tight"]),
            *[(comparison_label(r), e, d_) for r, e, d_ in rows]]
post = [success_bound(e, min(float(d_), 1.0), prior) for _, e, d_ in rows]
# a table whose text wraps to the content's width, in both modes (the scrolling grid cut its last column and showed
# a chance below 1 as "100%"); chances written as the cards write them
st.table(pd.DataFrame({
    "guarantee": [r for r, _, _ in rows], "ε": [num(e) for _, e, _ in rows],   # written as on the cards
    "δ": [num(float(d_)) for _, _, d_ in rows],
    "attacker right at most": [posterior_text(x) for x in post],
    "in words": [probability_words(x) for x in post],
    "on the usual scale": [epsilon_words(e) for _, e, _ in rows],
}), hide_index=True)
st.caption(f"The most often any attacker starting from a {pct(prior, 0)} prior is right under (ε, δ): the corner "
           "of the (ε, δ) region (Kairouz, Oh and Viswanath 2015; (e^ε + δ)/(1 + e^ε) at a 50 % prior, Houssiau et "
           "al.'s e^ε/(1 + e^ε) when δ = 0). The tight values come from the exact privacy-loss distribution of the "
           "Laplace mechanism" + ("." if projector_mode() else " (`odcore.privacy.pld`); budgets from "
                                                               "`odcore.privacy.accounting`."))
reproduce([("Every budget figure of this page", "budget", cli_config)])
