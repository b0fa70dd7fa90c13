"""The designer's report is the same, to the bit, as the one computed one setting at a time.

The designer asks :func:`odcore.privacy.utility.expected_errors` for many settings in one pass (the searches of
what would change, the frontier), groups each m's counts by one bincount and remembers thresholds. The reference
here is the straightforward formulation: the closed forms as first written (one exponential per tail and moment),
one :func:`expected_error` per setting, one sort per m, no memory. Both must give the same JSON on the bundled city
at several grids and seeds (JSON prints every float exactly, so equal text is equal bits).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from odcore.privacy import design as design_module
from odcore.privacy.design import Goal, GoalKind, WeekIndex, design_report

# ---- the reference: the closed forms and the scans written one setting at a time ------------------------------


def _sf(s, b):
    half = 0.5 * np.exp(-np.abs(s) / b)
    return np.where(s >= 0, half, 1.0 - half)


def _upper_mean(s, b):
    a = np.abs(s)
    return 0.5 * (a + b) * np.exp(-a / b)


def _abs_dev_above(a, t, b):
    u = np.maximum(t, a)
    above = _upper_mean(u, b) - a * _sf(u, b)
    between = np.where(t < a, a * (_sf(t, b) - _sf(a, b)) - (_upper_mean(t, b) - _upper_mean(a, b)), 0.0)
    return above + between


def reference_expected_error(raw, true, epsilon, threshold, sensitivity=1, *, weights=None, n_pairs=None,
                             trips_total=None) -> dict:
    raw = np.asarray(raw, dtype=float)
    true = np.asarray(true, dtype=float)
    eps, tau = float(epsilon), float(threshold)
    b = float(sensitivity) / eps
    w = np.ones_like(raw) if weights is None else np.asarray(weights, dtype=float)
    n_all = float(w.sum()) if n_pairs is None else float(n_pairs)
    trips_all = float((w * raw).sum()) if trips_total is None else float(trips_total)
    keep = true > 0
    raw, true, w = raw[keep], true[keep], w[keep]
    t = tau - true
    p = _sf(t, b)
    cut = raw - true
    err_total = w * _abs_dev_above(cut, t, b) / raw
    err_noise = w * _abs_dev_above(np.zeros_like(t), t, b) / raw
    err_bound = w * cut * p / raw
    mostly_noise = w * _sf(np.maximum(true, t), b)
    n_pub = float((w * p).sum())
    trips_pub = float((w * raw * p).sum())
    nan = float("nan")
    return {
        "pairs_published_expected": n_pub,
        "pairs_published_frac": n_pub / n_all if n_all else nan,
        "trips_published_expected": trips_pub,
        "trips_published_frac": trips_pub / trips_all if trips_all else nan,
        "relative_error": float(err_total.sum() / n_pub) if n_pub > 0 else nan,
        # the Shapley split of the total between the two causes: the mean of what each adds first and second
        "relative_error_bounding": float((err_total.sum() - err_noise.sum() + err_bound.sum()) / 2 / n_pub)
        if n_pub > 0 else nan,
        "relative_error_noise": float((err_total.sum() - err_bound.sum() + err_noise.sum()) / 2 / n_pub)
        if n_pub > 0 else nan,
        "mostly_noise_expected": float(mostly_noise.sum()),
    }


def reference_expected_errors(raw, true, epsilons, thresholds, sensitivity=1, *, weights=None, scales=None,
                              n_pairs=None, trips_total=None, split=True) -> dict:
    eps = np.atleast_1d(np.asarray(epsilons, dtype=float))
    tau = np.broadcast_to(np.asarray(thresholds, dtype=float), eps.shape)
    sc = np.ones(eps.shape) if scales is None else np.broadcast_to(np.asarray(scales, dtype=float), eps.shape)
    tt = np.broadcast_to(np.asarray(math.nan if trips_total is None else trips_total, dtype=float), eps.shape)
    rows = [reference_expected_error(np.asarray(raw, dtype=float) * sc[i], np.asarray(true, dtype=float) * sc[i],
                                     eps[i], tau[i], sensitivity, weights=weights, n_pairs=n_pairs,
                                     trips_total=None if trips_total is None else tt[i]) for i in range(eps.size)]
    return {k: np.array([r[k] for r in rows]) for k in rows[0]}


def reference_published_error(raw, true, epsilons, thresholds, sensitivity=1, *, weights=None, scales=None):
    e = reference_expected_errors(raw, true, epsilons, thresholds, sensitivity, weights=weights, scales=scales)
    return e["pairs_published_expected"], e["relative_error"]


def reference_groups(self, m):
    key = ("groups", m)
    if key not in self._hist:
        c = self.counts(m).astype(np.int64)
        r = self.raw.astype(np.int64)
        keep = c > 0
        base = int(c.max(initial=0)) + 1
        u, w = np.unique(r[keep] * base + c[keep], return_counts=True)
        self._hist[key] = ((u // base).astype(float), (u % base).astype(float), w.astype(float))
    return self._hist[key]


def reference_first_useful(self, m, values, setting, level, chunk=8):
    for v in values:
        e, tau, sc = setting(v)
        raw, true, w = self.groups(m)
        u = reference_expected_error(raw * sc, true * sc, e, tau, 1 if m is None else m, weights=w)
        if design_module.is_useful(u, level):
            return float(v)
    return None


@pytest.fixture(scope="module")
def city():
    from odcore.data.traces import load_traces
    from odcore.paths import SAMPLE_DATA_DIR

    return load_traces(SAMPLE_DATA_DIR / "synthetic_city.parquet").df


def _report(od, goal, seed, **kw) -> str:
    from odcore.report.plain_json import jsonable

    uw = od.user_week
    week = int(uw["week"].min())
    trips = uw.loc[uw["week"] == week, "unique_trips"].to_numpy()
    rep = design_report(goal, WeekIndex(od.week_pairs(week)), trips, week=week, rng=seed, with_frontier=True, **kw)
    return json.dumps(jsonable(rep), sort_keys=True)


ALL_CASES = ((Goal(), 0, {}), (Goal(), 7, {}), (Goal(), 7, {"tune": True}),
             (Goal(GoalKind.ATTACK, known_trips=32, success=0.6), 0, {"max_pairs": 3}))


@pytest.mark.parametrize(("cell_km2", "cases"), [
    (1.3, ALL_CASES[:1]),                                         # the default run: the page's default design
    pytest.param(1.3, ALL_CASES[1:], marks=pytest.mark.slow),
    pytest.param(3.0, ALL_CASES, marks=pytest.mark.slow),
])
def test_design_report_is_the_one_computed_one_setting_at_a_time(city, cell_km2, cases, monkeypatch):
    from odcore.od.trips import ODConfig, build_od

    od = build_od(city, ODConfig(cell_km2=cell_km2))
    fast = [_report(od, g, seed, **kw) for g, seed, kw in cases]
    with monkeypatch.context() as mp:
        mp.setattr(design_module, "expected_error", reference_expected_error)
        mp.setattr(design_module, "expected_errors", reference_expected_errors)
        mp.setattr(design_module, "published_error", reference_published_error)
        mp.setattr(design_module, "threshold_for", design_module.threshold_for.__wrapped__)
        mp.setattr(design_module._Ranked, "groups", reference_groups)
        mp.setattr(design_module._Ranked, "first_useful", reference_first_useful)
        slow = [_report(od, g, seed, **kw) for g, seed, kw in cases]
    assert any(json.loads(r)["would_change"] for r in fast)        # the searches ran
    for f, s in zip(fast, slow, strict=True):
        assert f == s


def test_expected_errors_are_expected_error_to_the_bit():
    """Many settings in one pass, the closed forms sharing their exponentials: the reference's floats, on counts
    with and without bounding cuts, margins on both sides of 0, scaled counts, and a weightless empty input."""
    from odcore.privacy.utility import expected_error, expected_errors

    rng = np.random.default_rng(11)
    raw = rng.integers(1, 400, 3000).astype(float)
    true = np.minimum(raw, rng.integers(0, 300, 3000)).astype(float)
    w = rng.integers(1, 9, 3000).astype(float)
    eps = rng.uniform(0.05, 20.0, 17)
    tau = rng.integers(1, 200, 17).astype(float)
    sc = rng.uniform(1.0, 50.0, 17)
    for m in (1, 7):
        got = expected_errors(raw, true, eps, tau, m, weights=w, scales=sc, n_pairs=5000)
        want = reference_expected_errors(raw, true, eps, tau, m, weights=w, scales=sc, n_pairs=5000)
        for k in want:
            np.testing.assert_array_equal(got[k], want[k], err_msg=k)
        one = expected_error(raw, true, eps[3], tau[3], m, weights=w)
        assert json.dumps(one) == json.dumps(reference_expected_error(raw, true, eps[3], tau[3], m, weights=w))
    empty = expected_error([], [], 1.0, 10)
    assert json.dumps(empty) == json.dumps(reference_expected_error([], [], 1.0, 10))
    # the test can fail: a scale applied to the true counts only moves the numbers
    moved = expected_errors(raw, true * 1.01, eps, tau, 1, weights=w)["relative_error"]
    assert not np.array_equal(moved, reference_expected_errors(raw, true, eps, tau, 1, weights=w)["relative_error"])


def reference_frontier_figure(projector_on: bool, rep: dict):
    """The designer's frontier chart built trace by trace (add_scatter) and one layout update at a time."""
    import pandas as pd
    import plotly.graph_objects as go

    from odapp.shared.styling import styled
    from odapp.shared.words import unit_words
    from odcore.report.figures import legend_at, readable_log_ticks

    g, d = rep["google"], rep["goal"]["delta"]
    front = pd.DataFrame(rep["frontier"])
    fig = go.Figure()
    for m, grp in front.groupby("max_pairs"):
        fig.add_scatter(x=grp["epsilon_user_week"], y=grp["trips_published_frac"], mode="lines+markers",
                        name=f"max pairs {m} (threshold fitted, δ ≤ {d:.0e})",
                        marker={"symbol": ["circle" if u else "circle-open" for u in grp["useful"]], "size": 8},
                        customdata=grp[["relative_error"]].to_numpy(),
                        hovertemplate=("ε %{x:.3g}: %{y:.1%} of user-trips, expected error %{customdata[0]:.1%}"
                                       "<extra></extra>"))
    for who, key, trips, symbol in (("typical person", "epsilon_user_week_typical", g["typical_trips"], "x"),
                                    ("busiest person", "epsilon_user_week_max", g["max_trips"], "diamond")):
        fig.add_scatter(x=[g[key]], y=[g["trips_published_frac"]], mode="markers",
                        marker={"size": 12, "symbol": symbol, "color": "#66a61e"}, cliponaxis=False,
                        name=f"Google per-count (ε 0.66, threshold 100), {who} ({trips} trips)")
    fig.add_scatter(x=[rep["epsilon_user_week"]], y=[rep["trips_published_frac"]], mode="markers",
                    marker={"size": 14, "symbol": "star"}, name="this design (one seeded release)")
    styled(fig, f"Share of user-trips published against ε {unit_words('user_level')}, week {rep['week']}",
           height=480)
    if not projector_on:
        extra = sum(1 for t in fig.data if t.name) * 20 + 10
        fig.update_layout(legend=legend_at({}, True), height=480 + extra, margin={"b": 70 + extra})
    fig.update_layout(xaxis_title=f"ε {unit_words('user_level')} (tight, δ = {d / 2:.0e} + thresholding)",
                      yaxis_title="share of user-trips on published pairs", xaxis_type="log",
                      yaxis_tickformat=".0%")
    xs = [*front["epsilon_user_week"], g["epsilon_user_week_typical"], g["epsilon_user_week_max"],
          rep["epsilon_user_week"]]
    xs = [float(x) for x in xs if x is not None and float(x) > 0]
    vals, labels = readable_log_ticks(min(xs) / 1.2, max(xs) * 1.2)
    fig.update_xaxes(tickvals=vals, ticktext=labels)
    return fig


def test_frontier_figure_is_the_one_built_trace_by_trace(city):
    """The designer's chart, built from plain trace dicts with one layout update, is the same figure (the same JSON
    text) as the one built with add_scatter and an update per setting, on a screen and on a projector."""
    from odapp.designer import cache as designer_cache
    from odcore.od.trips import ODConfig, build_od

    od = build_od(city, ODConfig(cell_km2=2.0))
    for seed, projector_on in ((0, False), (5, True)):
        rep = json.loads(_report(od, Goal(), seed))
        fig, front = designer_cache.frontier_figure(("reference", seed, projector_on), projector_on, _rep=rep)
        assert fig.to_json() == reference_frontier_figure(projector_on, rep).to_json()
        assert len(front) == len(rep["frontier"])
    moved = {**rep, "google": {**rep["google"], "typical_trips": rep["google"]["typical_trips"] + 1}}
    fig, _ = designer_cache.frontier_figure(("reference", "moved"), True, _rep=moved)   # the comparison can fail
    assert fig.to_json() != reference_frontier_figure(True, rep).to_json()


def frontier_chart_problems(chart: dict, fig) -> list[str]:
    """Where the live frontier chart (what the page draws) differs from the plotly figure (what the files hold):
    each trace's name, points, colour, marker (symbol, open or filled), the title, the axes' titles and ticks."""
    from odcore.report.figures import PALETTE

    out = []
    if len(chart["series"]) != len(fig.data):
        return [f"{len(chart['series'])} series, {len(fig.data)} traces"]
    for i, (s, t) in enumerate(zip(chart["series"], fig.data, strict=True)):
        if s["name"] != t.name:
            out.append(f"series {i}: {s['name']!r} against {t.name!r}")
        if not np.allclose(np.array(s["x"], dtype=float), np.array(t.x, dtype=float)) or \
                not np.allclose(np.array(s["y"], dtype=float), np.array(t.y, dtype=float)):
            out.append(f"series {i} ({s['name']}): other points")
        symbols = t.marker.symbol if isinstance(t.marker.symbol, tuple | list) else [t.marker.symbol or "circle"]
        want = [str(x).removesuffix("-open") for x in symbols] * (1 if len(symbols) > 1 else len(s["x"]))
        opened = [str(x).endswith("-open") for x in symbols] * (1 if len(symbols) > 1 else len(s["x"]))
        got = [s.get("symbol", "circle")] * len(s["x"])
        got_open = s["open"] if isinstance(s.get("open"), list) else [bool(s.get("open"))] * len(s["x"])
        if got != want or got_open != opened:
            out.append(f"series {i} ({s['name']}): markers {got}/{got_open} against {want}/{opened}")
        colour = t.marker.color or PALETTE[i % len(PALETTE)]
        if s["color"] != colour:
            out.append(f"series {i} ({s['name']}): colour {s['color']} against {colour}")
        if "lines" in (t.mode or "") and not s.get("line"):
            out.append(f"series {i} ({s['name']}): no line")
    lay = fig.layout
    for what, got, want in (("title", chart["title"], lay.title.text.replace("<br>", " ")), ("x title", chart["xlabel"], lay.xaxis.title.text),
                            ("y title", chart["ylabel"], lay.yaxis.title.text),
                            ("x ticks", chart["xticktext"], list(lay.xaxis.ticktext)),
                            ("x log", chart["xlog"], lay.xaxis.type == "log")):
        if got != want:
            out.append(f"{what}: {got!r} against {want!r}")
    return out


def test_the_page_draws_the_frontier_the_files_hold(city):
    """The frontier the designer draws in the browser (:func:`odapp.designer.cache.frontier_chart`) has the plotly figure's
    traces point for point (checked above against a trace-by-trace build), with their names, colours and markers,
    and its title and axes; each point's hover text names its max pairs, ε, share and expected error."""
    from odapp.designer import cache as designer_cache
    from odapp.shared.words import pct
    from odcore.od.trips import ODConfig, build_od

    od = build_od(city, ODConfig(cell_km2=2.0))
    for seed in (0, 5):
        rep = json.loads(_report(od, Goal(), seed))
        chart = designer_cache.frontier_chart(("reference", seed), _rep=rep)
        fig, _ = designer_cache.frontier_figure(("reference", seed, False), False, _rep=rep)
        assert not frontier_chart_problems(chart, fig)
        first = chart["series"][0]
        row = next(r for r in rep["frontier"] if r["max_pairs"] == int(first["key"].rsplit("_", 1)[1]))
        assert first["hover"][0] == (f"max pairs {row['max_pairs']}, ε {row['epsilon_user_week']:.3g}: "
                                     f"{pct(row['trips_published_frac'])} of user-trips, expected error "
                                     f"{pct(row['relative_error'])}")
        assert any(first["open"]) or all(r["useful"] for r in rep["frontier"])
    # the comparison can fail: another report's chart against this figure
    moved = {**rep, "frontier": [{**r, "trips_published_frac": r["trips_published_frac"] * 1.1}
                                 for r in rep["frontier"]]}
    assert frontier_chart_problems(designer_cache.frontier_chart(("reference", "moved"), _rep=moved), fig)
