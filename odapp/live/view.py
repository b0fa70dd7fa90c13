"""The live curves of the Attack, Privacy budget, OD release, See the noise and Play the attacker pages: the page's
ε slider and its curves, redrawn in the browser at every frame of a drag (:mod:`odapp.components.live`) from tables
computed once (:mod:`odcore.privacy.live`, cached across sessions in :mod:`odapp.live.cache`) or from closed forms. Plotly stays for the exports (the buttons under the curves)."""

from __future__ import annotations

import numpy as np
import streamlit as st
from plotly.colors import hex_to_rgb

from odapp.budget import cache as budget_cache
from odapp.components.live import control, fit_spec, formula_series, live_curves, table_series
from odapp.live import cache as live_cache
from odapp.release import view as release_view
from odapp.shared.state import (
    EPSILON_RANGE,
    K_EPSILON,
    K_FIT_THRESHOLD,
    K_THRESHOLD,
    THRESHOLD_RANGE,
    USER_DELTA,
)
from odapp.shared.words import epsilon_label, unit_words
from odcore.privacy.accounting import DELTA_AXIS, default_user_threshold
from odcore.privacy.live import ATTACK_GRID
from odcore.report.figures import PALETTE, thin_curve


def attack(s, curve, *, k_max: int, prior: float, mc=None, reps: int = 0) -> None:
    """The Attack page's p_k against k (both units) and the per-trip bound, live; the Bayes success at another
    prior (``curve``: :func:`odapp.attack.cache.success_curve` at the page's ε) and the Monte Carlo points are drawn at the
    page's ε only."""
    user_mode = s.mode == "user_level"
    t = live_cache.live_attack_tables(int(k_max), int(s.max_pairs) if user_mode else None)
    series = [table_series(f"exact success p_k, {unit_words('per_metric')} (50/50 prior)", t["success"],
                           key="success", width=3)]
    if user_mode:
        series.append(table_series(f"{unit_words('user_level')}: max {s.max_pairs} pairs, noise {s.max_pairs}/ε",
                                   t["success_per_person"], key="success_per_person", width=3))
    series.append(formula_series("e^ε/(1+e^ε): the per-trip bound", "bound", [0, k_max], key="bound",
                                 dash=[8, 5]))
    if "bayes_success" in curve:   # at the page's ε only (not tabulated: its kinks would need a fine grid)
        series.append({"name": f"Bayes success, prior {prior:g} (at ε = {s.epsilon:g})", "key": "bayes_success",
                       "x": curve["k"].astype(float).tolist(), "y": curve["bayes_success"].astype(float).tolist(),
                       "at": {"epsilon": float(s.epsilon)}, "dash": [2, 3]})
    head = 1 if user_mode else 0
    chart = {"id": "attack", "title": f"Membership attack success against k unique trips (ε = {{epsilon}} "
                                      f"{unit_words(s.mode)})",
             "xlabel": "k: unique trips of the victim known to the attacker",
             "ylabel": "probability the attacker is right", "ymin": 0.45, "ymax": 1.01, "ypct": True,
             "height": 400, "series": series,
             "readouts": [{"label": "p_3", "series": head, "x": 3, "fmt": "pct"},
                          {"label": "p_32", "series": head, "x": 32, "fmt": "pct"},
                          {"label": "per-trip bound", "series": [x["key"] for x in series].index("bound"), "x": 0,
                           "fmt": "pct"}]}
    if mc is not None:   # the Monte Carlo ran at the page's ε: drawn there only
        chart["points"] = {"name": f"Monte Carlo ({reps:,} per k)", "at": float(s.epsilon),
                           "x": mc["k"].astype(float).tolist(), "y": mc["mc_success"].astype(float).tolist(),
                           "lo": mc["ci_low"].astype(float).tolist(), "hi": mc["ci_high"].astype(float).tolist()}
    live_curves(controls=[control(K_EPSILON, s.epsilon, epsilon_label(s.mode), EPSILON_RANGE)], charts=[chart],
                page="attack", key="live_attack")


def budget(s, *, trips: int, weeks: int, delta: float, trips_max: int, typical: int, prior: float,
           relative_step: float) -> None:
    """The Privacy budget page's ε of a user-week against n and cumulative ε over weeks (basic, advanced, Rényi,
    tight; per person in that unit), with the posterior bounds as readouts."""
    user_mode = s.mode == "user_level"
    m = int(s.max_pairs) if user_mode else None
    tt = live_cache.live_trips_tables(int(trips_max), float(delta), m)
    wt = live_cache.live_weeks_tables(int(trips), int(weeks), float(delta), float(relative_step), m)
    n = np.arange(1, int(trips_max) + 1)
    w = np.arange(1, int(weeks) + 1)
    person = f"{unit_words('user_level')}, max {s.max_pairs} pairs (tight)"
    s1 = [formula_series("basic composition n·ε", "basic", n, key="basic"),
          formula_series(f"advanced (δ' = {delta:.0e})", "advanced", n, key="advanced", args={"delta": delta}),
          table_series("Rényi-DP bound", tt["rdp"], key="rdp"),
          table_series(f"tight ε(δ = {delta:.0e})", tt["tight"], key="tight")]
    if user_mode:
        s1.append(table_series(person, tt["person_tight"], key="person_tight", width=4))
    marks = [{"x": int(trips), "label": f"n = {int(trips)}", "color": "#888"}]
    if typical:
        marks.append({"x": int(typical), "label": f"median user, week {s.week}", "color": "#1b9e77"})
    trips_chart = {"id": "trips", "title": "ε of one user-week against n (ε = {epsilon} per "
                                          + ("person" if user_mode else "count") + ")",
                   "xlabel": "unique trips n in the week", "ylabel": "ε of the user-week", "series": s1,
                   "vlines": marks, "hlines": [{"y": 7, "label": "ε = 7, top of the usual range"}],
                   "legend": "top", "height": 380,
                   "readouts": [{"label": f"tight ε at n = {int(trips)}", "series": 3, "x": int(trips)},
                                {"label": f"attacker right at most (one week, ε and δ {delta:.0e})", "series": 3,
                                 "x": int(trips), "fmt": "pct",
                                 "success": {"delta": float(delta), "prior": float(prior)}}]}
    s2 = [formula_series("basic W·n·ε", "basic", w, key="basic", args={"mult": int(trips)}),
          formula_series("advanced", "advanced", w, key="advanced", args={"mult": int(trips), "delta": delta}),
          table_series("Rényi-DP bound", wt["rdp"], key="rdp"),
          table_series("tight (exact PLD, upper end)", wt["tight"], key="tight")]
    if user_mode:
        s2.append(table_series(f"{unit_words('user_level')}, max {s.max_pairs} pairs (tight, ≤)",
                               wt["person_tight"], key="person_tight"))
    weeks_chart = {"id": "weeks", "title": f"Cumulative ε, {int(trips)} unique trips every week",
                   "xlabel": "weeks released", "ylabel": "cumulative ε", "ylog": True, "series": s2,
                   "height": 380,
                   "readouts": [{"label": f"tight ε after {int(weeks)} weeks", "series": 3, "x": int(weeks)}]}
    live_curves(controls=[control(K_EPSILON, s.epsilon, epsilon_label(s.mode), EPSILON_RANGE)],
                charts=[trips_chart, weeks_chart, delta_chart(s, int(trips), delta)], page="budget",
                key="live_budget", columns=2)


DELTA_TABLE_TRIPS = 100
"""Above this many trips the ε-against-δ chart's tight and Rényi curves are the server's, at the page's ε (hidden while
ε is dragged): their table takes ~3 s at 70 trips, over a minute at 400."""


def delta_chart(s, trips: int, delta: float) -> dict:
    """ε of one user-week of ``trips`` counts against δ (log axis): basic and advanced composition exact in the
    browser, the tight and Rényi values read from :func:`odcore.privacy.live.delta_tables` (or, above
    :data:`DELTA_TABLE_TRIPS`, the server's at the page's ε); a line at the δ the cards use."""
    x = DELTA_AXIS
    series = [formula_series("basic (any δ)", "basic_k", x, key="basic", args={"k": int(trips)}),
              formula_series("advanced", "advanced_at", x, key="advanced", args={"k": int(trips)})]
    if trips <= DELTA_TABLE_TRIPS:
        t = live_cache.live_delta_tables(int(trips))
        series += [table_series("Rényi-DP bound", t["rdp"], key="rdp"), table_series("tight", t["tight"], key="tight")]
    else:
        exact = budget_cache.epsilon_delta_curve(float(s.epsilon), int(trips))
        for col, name in (("rdp", "Rényi-DP bound"), ("tight", "tight")):
            y = exact[col].to_numpy(dtype=float)
            series.append({"name": f"{name} (at ε = {s.epsilon:g})", "key": col, "x": x.tolist(),
                           "y": [float(v) if np.isfinite(v) else None for v in y], "at": {"epsilon": float(s.epsilon)}})
    return {"id": "delta", "title": f"ε of one user-week against δ, k = {trips} counts: smaller ε only for larger δ",
            "xlabel": "δ", "ylabel": "ε(δ)", "xlog": True, "series": series, "height": 380, "legend": "top",
            "vlines": [{"x": float(delta), "label": f"δ of the cards ({delta:.0e})", "color": "#888"}]}


def release(ctx, rcfg, table) -> None:
    """The OD release page's release probability against the true count and the counts published (coherent noise:
    each pair's unit draw of the seed, scaled by the pointer's noise scale), live in ε and, per count, τ."""
    s = ctx.settings
    user_mode = s.mode == "user_level"
    t = release_view.live_tables(ctx, rcfg, table)   # the same entry the landing page computes ahead
    span = {"mult": 2, "of": "threshold", "floor": t["p99"]}
    curve = {"id": "release", "title": "ε = {epsilon}, threshold {threshold}: release probability",
             "xlabel": "true count (distinct people on the pair)", "ylabel": "probability published",
             "ymin": 0, "ymax": 1.02, "xmin": 0, "xmax": span, "height": 380, "bars": t["bars"],
             "series": [formula_series("P(published)", "release", key="release_prob", span={**span, "n": 400},
                                       args={"sensitivity": float(rcfg.sensitivity)}, width=3, color="#ff7f0e")],
             "vlines": [{"x": "threshold", "label": "threshold {threshold}", "color": "#444"}], "legend": "top"}
    pub = {"id": "published", "title": "The counts published (noise of this seed, scaled to ε)",
           "xlabel": "true count", "ylabel": "published (noisy) count", "xmin": 0, "xmax": span, "ymin": 0,
           "height": 380, "published": True, "legend": "top",
           "series": [formula_series("true count (no noise)", "identity", key="identity", span={**span, "n": 2},
                                     color="#888", dash=[4, 4])],
           "hlines": [{"y": "threshold", "label": "threshold {threshold}", "color": "#444"}]}
    controls = [control(K_EPSILON, s.epsilon, epsilon_label(s.mode), EPSILON_RANGE)]
    if not user_mode:
        controls.append(control(K_THRESHOLD, s.threshold, "Threshold (suppress noisy counts below)",
                                THRESHOLD_RANGE))
    live_curves(controls=controls, charts=[curve, pub], page="release", key="live_release", columns=2,
                pairs=t["draws"], fixed={"threshold": float(s.threshold)}, fit=fitted(s))


def fitted(s) -> dict | None:
    """Per person with "Fit the threshold" on, the threshold follows ε (:func:`fit_spec`); else None."""
    if s.mode == "user_level" and st.session_state.get(K_FIT_THRESHOLD, True):
        return fit_spec(s.max_pairs, USER_DELTA)
    return None


def person_table(s, others: tuple, fit: bool) -> list:
    """A real person's attack success on :data:`odcore.privacy.live.ATTACK_GRID` (:func:`odapp.live.cache.live_person`;
    ``fit``: :func:`fitted`)."""
    m = int(s.max_pairs) if s.mode == "user_level" else 1
    taus = tuple(float(default_user_threshold(float(e), m, USER_DELTA)) for e in ATTACK_GRID) if fit \
        else float(s.threshold)
    return live_cache.live_person(others, m, taus)


def person(s, others: tuple, user: str, fit: bool) -> None:
    """The Attack page's real person: their attack success against ε (the thresholded release, exact on
    :data:`odcore.privacy.live.ATTACK_GRID`), read at the page's live ε slider while it is dragged (this component
    follows the Attack page's)."""
    ys = person_table(s, others, fit)
    grid = [float(e) for e in ATTACK_GRID]
    chart = {"id": "person", "title": f"User {user}: attack success against ε",
             "xlabel": "ε " + unit_words(s.mode), "ylabel": "probability the attacker is right", "ypct": True,
             "ymin": 0.45, "ymax": 1.01, "height": 300, "legend": "bottom",
             "series": [{"name": f"user {user}, thresholded release", "key": "person", "x": grid, "y": ys,
                         "width": 3},
                        formula_series("e^ε/(1+e^ε): the per-trip bound", "bound_x", grid, key="bound",
                                       dash=[8, 5])],
             "vlines": [{"x": "epsilon", "label": "ε = {epsilon}", "color": "#444"}],
             "readouts": [{"label": f"success on user {user}", "series": 0, "at": "epsilon", "fmt": "pct"}]}
    live_curves(controls=[], charts=[chart], page="attack_person", key="live_attack_person", follow="attack",
                fixed={"epsilon": float(s.epsilon)})


def roc(ur, roc_plain, user: str) -> None:
    """The Attack page's real person: the ROC of the attack on them at the page's settings (``ur``: their
    :class:`~odcore.privacy.attack.UserRisk` with its ROC; ``roc_plain``: the same person with every pair published),
    drawn on the browser's canvas like the live curves: a threshold press redraws it with no plotly figure (the
    files are made from :func:`odapp.shared.charts.roc_chart` when a download button asks). Drawn with the points that
    show (:func:`odcore.report.figures.thin_curve`); the CSV keeps every vertex."""
    def points(r) -> dict:
        keep = thin_curve(r.fpr, r.tpr)
        return {"x": np.round(np.asarray(r.fpr, dtype=float)[keep], 6).tolist(),
                "y": np.round(np.asarray(r.tpr, dtype=float)[keep], 6).tolist()}

    chart = {"id": "roc", "title": f"ROC of the attack on user {user}", "xlabel": "false-positive rate",
             "ylabel": "true-positive rate", "xmin": 0, "xmax": 1, "ymin": 0, "ymax": 1, "height": 420,
             "legend": "bottom",
             "series": [{"name": f"thresholded release (AUC {ur.roc.auc:.3f})", "key": "roc", **points(ur.roc),
                         "width": 2.5},
                        {"name": f"every pair published (AUC {roc_plain.auc:.3f})", "key": "roc_plain",
                         **points(roc_plain), "width": 2, "dash": [8, 5]},
                        formula_series("guessing", "identity", [0, 1], key="guessing", dash=[2, 3], color="#999")]}
    live_curves(controls=[], charts=[chart], page="attack_roc", key="live_attack_roc")


def noise(count: int, other: int, epsilon: float, threshold: float, sensitivity: int, *,
          other_follows: bool = False) -> None:
    """The See the noise page's picture, live in the true count and ε: the Laplace density of what is published for
    ``count`` and for ``other`` (closed forms, exact in the browser: :class:`odcore.report.teaching.NoisePicture`),
    split at the threshold into suppressed and published, with the release probabilities and the 95 % range as
    readouts. ``other_follows``: the second count is the first ∓ 25 (projector mode, where it has no input)."""
    sens = {"sensitivity": float(sensitivity)}
    second = {"center": "count", "shift": -25} if other_follows else {"center": float(other)}
    first = {"center": "count"}
    chart = {"id": "noise", "title": "What is published for a true count (ε = {epsilon}, threshold {threshold})",
             "xlabel": "noisy count", "ylabel": "probability density", "ymin": 0, "height": 460, "legend": "top",
             "series": [formula_series("true count c: what the noise makes of it", "laplace", key="count",
                                       span={"noise": True, "n": 401}, args={**first, **sens}, width=2.5,
                                       color="#1f77b4", fill="rgba(31, 119, 180, 0.35)"),
                        formula_series("the second count", "laplace", key="other", span={"noise": True, "n": 401},
                                       args={**second, **sens}, color="#ff7f0e", fill="rgba(255, 127, 14, 0.3)")],
             "vlines": [{"x": "threshold", "label": "threshold {threshold}", "color": "#444"},
                        {"x": "count", "label": "c = {count}", "color": "#1f77b4"}],
             "readouts": [{"label": "c published", "formula": "release_at", "args": {**first, **sens},
                           "key": "published", "fmt": "pct"},
                          {"label": "95 % of weeks between", "formula": "low95", "args": {**first, **sens},
                           "key": "low", "fmt": "one"},
                          {"label": "", "join": "–", "formula": "high95", "args": {**first, **sens}, "key": "high",
                           "fmt": "one"},
                          {"label": "second count published", "formula": "release_at", "args": {**second, **sens},
                           "key": "other_published", "fmt": "pct"}]}
    live_curves(controls=[control("noise_count", count, "True count c (people on a pair this week)", (0, 300, 1),
                                  name="count"),
                          control("noise_eps", epsilon, "ε for this picture", EPSILON_RANGE, name="epsilon")],
                charts=[chart], page="noise", key="live_noise", fixed={"threshold": float(threshold)})


def game(s, others, sensitivity: int) -> None:
    """The Play the attacker page's known pairs, live in ε and (per count) the threshold: the chance that each pair
    is published if the person is out (the others' count) and if they are in (one more), closed forms exact in the
    browser (:func:`odcore.privacy.release.release_probability`). Only what the attacker knows is sent: the others'
    counts, not the round's noise or coin."""
    counts = [float(c) for c in others]
    k = len(counts)
    args = {"counts": counts, "sensitivity": float(sensitivity)}
    x = list(range(1, k + 1))
    chart = {"id": "game", "title": "Your known pairs: the chance each is published (ε = {epsilon}, threshold "
                                    "{threshold})",
             "xlabel": "known pair (others on it)", "ylabel": "probability published",
             "xticklabels": {str(j): f"{j} ({int(c):,})" for j, c in zip(x, counts, strict=True)}, "ymin": 0, "ymax": 1.02, "ypct": True,
             "xmin": 0.5, "xmax": k + 0.5, "xticks": "int", "height": 320, "legend": "top",
             "series": [formula_series("if the person is out (the others alone)", "release_pair", x, key="out",
                                       args=args, marker=5, offset=-3, color="#9a9a9a"),
                        formula_series("if the person is in (one more)", "release_pair", x, key="in",
                                       args={**args, "add": 1}, marker=5, offset=3, color="#1f5fa8")],
             "readouts": [{"label": "pairs expected published if out", "sum": 0, "key": "expected_out"},
                          {"label": "if in", "sum": 1, "key": "expected_in"}]}
    controls = [control(K_EPSILON, s.epsilon, epsilon_label(s.mode), EPSILON_RANGE)]
    if s.mode != "user_level":
        controls.append(control(K_THRESHOLD, s.threshold, "Threshold (suppress noisy counts below)",
                                THRESHOLD_RANGE))
    live_curves(controls=controls, charts=[chart], page="game", key="live_game",
                fixed={"threshold": float(s.threshold)}, fit=fitted(s))


def frontier(chart: dict) -> None:
    """The Release designer's frontier (:func:`odapp.designer.cache.frontier_chart`): no slider; a point's text shows while
    the pointer is on it. The PNG/SVG files are plotly's (:func:`odapp.designer.cache.frontier_figure`)."""
    live_curves(controls=[], charts=[chart], page="design", key="live_design")


def _rgba(colour: str, alpha: float) -> str:
    return "rgba({}, {}, {}, {})".format(*hex_to_rgb(colour), alpha)


def trips_hist(hist) -> None:
    """The Data page's users by trips in the week, total and unique (``hist``: ``trips_in_week, users_total,
    users_unique``), as step outlines filled to zero (:func:`odapp.shared.charts.trips_hist_chart` drawn on a canvas: a new
    grid repaints it without plotly's redraw; plotly still makes its files). A step's text shows under the
    pointer."""
    x = [int(v) for v in hist["trips_in_week"]]
    series = []
    for i, (col, name) in enumerate((("users_total", "total trips"), ("users_unique", "unique trips"))):
        y = [int(v) for v in hist[col]]
        series.append({"name": name, "key": col, "x": x, "y": y, "step": True, "width": 2, "color": PALETTE[i],
                       "area": _rgba(PALETTE[i], 0.3),
                       "hover": [f"{n:,} users with {t} {name} in the week" for t, n in zip(x, y, strict=True)]})
    chart = {"id": "trips", "title": "Distribution over users", "xlabel": "trips in the week", "ylabel": "users",
             "ymin": 0, "xticks": "int", "height": 400, "series": series}
    live_curves(controls=[], charts=[chart], page="data", key="live_data_trips")
