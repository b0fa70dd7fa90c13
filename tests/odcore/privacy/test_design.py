"""Tests of odcore.privacy.design (the release designer), odcore.report.sheet and the ``design`` CLI on the bundled city."""

from __future__ import annotations

import json
import shlex

import numpy as np
import pandas as pd
import pytest

from odcore.cli import main
from odcore.errors import ParameterError
from odcore.privacy.accounting import partition_selection_delta, user_level_budget
from odcore.privacy.attack import bounded_success_curve, simulate_attack
from odcore.privacy.design import (
    DEFAULT_MAX_PAIRS,
    Goal,
    GoalKind,
    achieved,
    design_report,
    frontier,
    goal_epsilon,
)


@pytest.fixture(scope="module")
def week0():
    from odcore.data.traces import load_traces
    from odcore.od.trips import ODConfig, build_od
    from odcore.paths import SAMPLE_DATA_DIR

    od = build_od(load_traces(SAMPLE_DATA_DIR / "synthetic_city.parquet").df, ODConfig())
    uw = od.user_week
    return od.week_pairs(0), uw.loc[uw["week"] == 0, "unique_trips"].to_numpy()


def _budget_cli(capsys, command: str) -> dict:
    argv = shlex.split(command)[3:]            # drop "python -m odcore"
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


GOALS = [Goal(GoalKind.WEEK, epsilon=1.0), Goal(GoalKind.TOTAL, epsilon=10.0, weeks=52),
         Goal(GoalKind.ATTACK, known_trips=32, success=0.6)]


@pytest.mark.parametrize("goal", GOALS, ids=lambda g: g.kind.value)
def test_design_meets_goal_checked_by_budget_cli(goal, week0, capsys):
    pairs, trips = week0
    rep = design_report(goal, pairs, trips, max_pairs=None if goal.kind is GoalKind.WEEK else 20, rng=0)
    assert rep["goal_met"]
    b = _budget_cli(capsys, rep["budget_command"])            # the budget CLI on the design's settings
    assert b["epsilon_user_week_bounded_tight"] == pytest.approx(rep["epsilon_user_week"], rel=1e-12)
    assert b["epsilon_user_total_bounded_tight"] == pytest.approx(rep["epsilon_user_total"], rel=1e-12)
    assert b["delta_user_week_bounded_tight"] == pytest.approx(rep["delta_user_week"], rel=1e-12)
    assert b["delta_user_total_bounded_tight"] == pytest.approx(rep["delta_user_total"], rel=1e-12)
    if goal.kind is GoalKind.WEEK:
        assert b["epsilon_user_week_bounded_tight"] <= goal.epsilon
        assert b["delta_user_week_bounded_tight"] <= goal.delta
    elif goal.kind is GoalKind.TOTAL:
        assert b["epsilon_user_total_bounded_tight"] <= goal.epsilon
        assert b["delta_user_total_bounded_tight"] <= goal.delta
    else:
        k = min(goal.known_trips, rep["max_pairs"])
        succ = bounded_success_curve(rep["epsilon"], rep["max_pairs"], k, rep["threshold"])[k]
        assert succ <= goal.success
        assert b["delta_user_week_bounded_tight"] <= goal.delta
    # the search is not slack: 1 % more ε breaks the goal
    assert achieved(goal, rep["epsilon"] * 1.01, rep["max_pairs"]) > (goal.success or goal.epsilon)
    for key in ("max_pairs", "noise_scale", "threshold", "epsilon_user_week", "delta_user_week",
                "epsilon_user_total", "delta_user_total", "weeks", "pairs_published", "trips_published",
                "mean_relative_error", "noise_dominated_published", "goal"):
        assert key in rep


def test_tuning_is_said_and_default_is_data_independent(week0):
    pairs, trips = week0
    rep = design_report(GOALS[0], pairs, trips, rng=0)
    assert not rep["tuned_on_data"]                      # the data-independent m by default
    assert "data-independent default" in rep["tuning_note"]
    rep = design_report(Goal(GoalKind.WEEK, epsilon=5.0), pairs, trips, tune=True, rng=0)
    assert rep["tuned_on_data"]                          # at ε 5 some m is useful: tuning picks among those
    assert "uses the data" in rep["tuning_note"]
    assert rep["default"]["max_pairs"] == DEFAULT_MAX_PAIRS
    assert not rep["default"]["tuned_on_data"]
    assert {c["max_pairs"] for c in rep["candidates"]} >= {1, 10, 20, 50}
    fixed = design_report(GOALS[0], pairs, trips, max_pairs=5, rng=0)
    assert not fixed["tuned_on_data"]
    assert "fixed before" in fixed["tuning_note"]


def test_goal_epsilon_monotone_and_bad_goals():
    g = Goal(GoalKind.WEEK, epsilon=1.0)
    e5, e20 = goal_epsilon(g, 5), goal_epsilon(g, 20)
    assert 1.0 <= e5 <= e20            # more pairs share the budget: tight ε per week falls, so ε can rise
    assert achieved(g, e20, 20) <= 1.0
    with pytest.raises(ParameterError, match="goal"):
        Goal("yearly", epsilon=1.0)
    with pytest.raises(ParameterError, match="success"):
        Goal(GoalKind.ATTACK, known_trips=3, success=0.4)
    with pytest.raises(ParameterError, match="delta"):
        Goal(GoalKind.WEEK, epsilon=1.0, delta=0)


def test_frontier_shape(week0):
    pairs, _ = week0
    f = frontier(pairs, max_pairs=(1, 10), epsilons=[0.5, 2.0, 8.0], rng=0)
    assert len(f) == 6
    for _, g in f.groupby("max_pairs"):
        assert np.all(np.diff(g["trips_published_frac"].to_numpy()) >= 0)     # more ε, more published
        assert np.all(g["epsilon_user_week"].to_numpy() <= g["epsilon"].to_numpy() + 1e-12)


def test_bounded_success_curve_flat_at_m_and_vs_monte_carlo():
    eps, m = 0.66, 5
    c = bounded_success_curve(eps, m, 12)
    assert np.all(np.diff(c[: m + 1]) > 0)
    assert np.allclose(c[m:], c[m])
    # the paper's Monte Carlo at the per-pair parameter ε/m and min(n, m) coordinates
    sim = simulate_attack(eps / m, [m], reps=40_000, rng=3)
    assert sim.ci_low[0] <= c[m] <= sim.ci_high[0]
    # wrong noise (per-count ε instead of ε/m) is rejected by the same check
    wrong = simulate_attack(eps, [m], reps=40_000, rng=3)
    assert not wrong.ci_low[0] <= c[m] <= wrong.ci_high[0]
    # with a threshold: the bound adds half the partition-selection δ
    ct = bounded_success_curve(eps, m, 12, threshold=30)
    assert ct[m] == pytest.approx(c[m] + 0.5 * partition_selection_delta(eps, 30, m), abs=1e-12)


def test_design_cli_json_and_sheet(tmp_path, capsys):
    sheet = tmp_path / "sheet.html"
    code = main(["design", "--goal", "total", "--target-epsilon", "10", "--max-pairs", "20", "--json",
                 "--sheet", str(sheet)])
    assert code == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["goal"]["kind"] == "total"
    assert rep["goal_met"]
    b = user_level_budget(rep["epsilon"], 20, rep["threshold"], 52, rep["delta"])
    assert b["epsilon_user_total_tight"] == pytest.approx(rep["epsilon_user_total"], rel=1e-12)
    text = sheet.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>")
    assert "<script" not in text
    assert "http" not in text
    assert "One person, all of their trips, every week" in text
    assert f"{rep['threshold']}" in text


@pytest.mark.parametrize(("argv", "match"), [
    (["design", "--goal", "attack", "--success", "0.3"], "success"),
    (["design", "--target-delta", "2"], "delta"),
    (["design", "--week", "9"], "week"),
])
def test_design_cli_bad_input(argv, match, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:")
    assert match in err
    assert "Traceback" not in err


def test_budget_sheet_is_self_contained():
    from odcore.privacy.accounting import BudgetConfig, budget
    from odcore.report.sheet import budget_sheet

    b = budget(BudgetConfig(max_pairs=20, threshold=610, total_interval=1e-3))
    text = budget_sheet(b)
    assert text.startswith("<!DOCTYPE html>")
    assert "<script" not in text
    assert "http" not in text
    assert "0.555" in text                  # ε per person and week at m = 20 (tight)
    assert "@media print" in text


def test_ranking_and_expected_match_the_direct_formulas(week0):
    """The seed-independent index, the two-sort ranking and the per-count sums give what the direct rules give:
    the rank of numpy.lexsort((position in rng.permutation, user)) (rows in canonical order), and Σ raw·P / Σ raw
    pair by pair."""
    from odcore.privacy.design import WeekIndex, _Ranked
    from odcore.privacy.release import release_probability

    pairs, _ = week0
    week = WeekIndex(pairs)
    p = pairs[["user", "origin", "destination"]].drop_duplicates()
    assert np.array_equal(week.raw, p.groupby(["origin", "destination"], sort=True).size().to_numpy())
    uid = week.prepared.pairs.u
    for seed in (0, 1, 12345):
        ranked = _Ranked(week, seed)
        position = np.argsort(np.random.default_rng(seed).permutation(len(p)))
        order = np.lexsort((position, uid))
        starts = np.r_[0, np.flatnonzero(np.diff(uid[order])) + 1]
        rank = np.empty(len(p), dtype=np.int64)
        rank[order] = np.arange(len(p)) - np.repeat(starts, np.diff(np.r_[starts, len(p)]))
        assert np.array_equal(ranked.rank, rank)
        for m, eps, tau in ((1, 0.5, 20), (10, 2.0, 35), (50, 8.0, 60), (None, 0.66, 100)):
            true = ranked.raw if m is None else np.bincount(ranked.pid[rank < m], minlength=ranked.n_pairs)
            assert np.array_equal(ranked.counts(m), true)
            prob = np.where(true > 0, release_probability(true, eps, tau, 1 if m is None else m), 0.0)
            frac, n_pub = ranked.expected(m, eps, tau)
            assert frac == pytest.approx((ranked.raw * prob).sum() / ranked.raw.sum(), rel=1e-12)
            assert n_pub == pytest.approx(prob.sum(), rel=1e-12)


def test_ranking_is_uniform_within_each_person():
    """Each of a person's n rows takes each rank 0..n-1 equally often over seeds (chi-square at α = 1e-4), so
    rank < m keeps a uniform subset of min(m, n); the same test rejects a ranking biased towards some rows."""
    from scipy import stats

    from odcore.privacy.design import WeekIndex, _Ranked

    pairs = pd.DataFrame({"week": 0, "user": ["a"] * 4 + ["b"] * 2 + ["c"],
                          "origin": [1, 2, 3, 4, 1, 2, 1], "destination": [2, 3, 4, 1, 2, 3, 5]})
    week = WeekIndex(pairs)
    rows_a = np.flatnonzero(week.prepared.pairs.u == 0)
    n = 4000
    seen = np.zeros((4, 4))
    biased = np.zeros((4, 4))
    for seed in range(n):
        r = _Ranked(week, seed).rank[rows_a]
        seen[np.arange(4), r] += 1
        keys = np.random.default_rng(seed).random(4) ** np.array([1.0, 1.0, 1.0, 1.6])  # row 3 favoured
        biased[np.arange(4), np.argsort(np.argsort(keys))] += 1
    assert stats.chisquare(seen.ravel()).pvalue > 1e-4
    assert stats.chisquare(biased.ravel()).pvalue < 1e-4
    assert seen.sum(axis=1).tolist() == [n] * 4


def test_report_does_not_depend_on_row_order(week0):
    """The ranking's keys are drawn in canonical order: a shuffled copy of the week gives the same report."""
    pairs, trips = week0
    shuffled = pairs.sample(frac=1.0, random_state=3).reset_index(drop=True)
    a = design_report(GOALS[0], pairs, trips, rng=8, with_frontier=True)
    b = design_report(GOALS[0], shuffled, trips, rng=8, with_frontier=True)
    assert json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


def test_report_from_the_week_index_is_the_report_from_the_pairs(week0):
    """The dashboard passes the cached WeekIndex; the CLI the DataFrame: same seed, same report (and another seed
    a different seeded release)."""
    from odcore.privacy.design import WeekIndex

    pairs, trips = week0
    week = WeekIndex(pairs)

    def same(x: dict, y: dict) -> bool:
        return json.dumps(x, sort_keys=True, default=str) == json.dumps(y, sort_keys=True, default=str)

    a = design_report(GOALS[0], pairs, trips, rng=5, with_frontier=True)
    b = design_report(GOALS[0], week, trips, rng=5, with_frontier=True)
    assert same(a, b)
    c = design_report(GOALS[0], week, trips, rng=6, with_frontier=True)
    assert c["frontier"] != b["frontier"]
    assert same(design_report(GOALS[0], week, trips, max_pairs=5, rng=5),
                design_report(GOALS[0], pairs, trips, max_pairs=5, rng=5))


def test_the_searches_ask_many_settings_at_once_and_get_the_same_numbers(week0):
    """What would change searches ε and the number of people for the first useful release; it asks
    utility.published_error for several settings at once. Its numbers are expected_error's to the bit, and the
    first useful value is the one a scan of expected_error finds (at the level that makes the scan stop inside the
    grid, and at one no value reaches)."""
    from odcore.privacy.design import WeekIndex, _Ranked, is_useful, threshold_for
    from odcore.privacy.utility import published_error

    pairs, _ = week0
    ranked = _Ranked(WeekIndex(pairs), 3)
    goal = Goal(GoalKind.WEEK, epsilon=0.66)
    found = []
    for m in (None, 1, 10):
        raw, true, w = ranked.groups(m)
        eps = np.geomspace(0.05, 40.0, 13)
        tau = np.array([threshold_for(goal, e, m or 1) for e in eps], dtype=float)
        scales = np.geomspace(1.0, 300.0, 13)
        n_pub, err = published_error(raw, true, eps, tau, 1 if m is None else m, weights=w, scales=scales)
        for i in range(eps.size):
            want = ranked.expected_error(m, eps[i], tau[i], scale=scales[i])
            assert n_pub[i] == want["pairs_published_expected"]
            assert err[i] == want["relative_error"] or (np.isnan(err[i]) and np.isnan(want["relative_error"]))
        grid = 0.2 * np.geomspace(1.0, 100.0, 41)

        def setting(e, m=m):
            return e, threshold_for(goal, e, m or 1), 1.0

        for level in (0.05, 0.5, 1e-9):
            scan = next((float(e) for e in grid
                         if is_useful(ranked.expected_error(m, *setting(e)[:2]), level)), None)
            got = ranked.first_useful(m, grid, setting, level, chunk=5)
            assert got == scan
            found.append(got)
    assert any(f is not None and f > grid[0] for f in found)   # a stop inside the grid
    assert None in found                                        # and a search that finds nothing
