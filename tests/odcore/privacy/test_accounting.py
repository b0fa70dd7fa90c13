"""Tests of odcore.privacy.accounting: golden values from the papers, composition, tight ε(δ) vs dp_accounting."""

from __future__ import annotations

import math

import numpy as np
import pytest

from odcore.errors import ParameterError
from odcore.privacy.accounting import (
    TIGHT_K_MAX,
    BudgetConfig,
    advanced_composition,
    basic_composition,
    budget,
    default_user_threshold,
    epsilon_delta_curve,
    epsilon_over_weeks,
    epsilon_vs_trips,
    partition_selection_delta,
    partition_threshold,
    posterior_bound,
    posterior_gain,
    rdp_epsilon,
    tight_epsilon,
    user_level_budget,
)
from odcore.privacy.release import threshold_delta


def _has_pld() -> bool:
    try:
        from odcore.privacy import pld  # noqa: F401
    except ImportError:
        return False
    return True


needs_pld = pytest.mark.skipif(not _has_pld(), reason="odcore.privacy.pld (attack module) not available yet")


# ------------------------------------------------------------------ golden values


def test_golden_posterior_bound():
    # Bassolas et al. reply / Houssiau et al. Methods: e^0.66/(1+e^0.66) = 0.6593, "at most 16%" over 0.5
    assert posterior_bound(0.66) == pytest.approx(math.exp(0.66) / (1 + math.exp(0.66)), rel=1e-14)
    assert round(posterior_bound(0.66), 3) == 0.659
    assert round(posterior_gain(0.66), 2) == 0.16
    assert posterior_bound(2402.4) == 1.0  # no overflow
    # prior generalisation: pi e^eps / (pi e^eps + 1 - pi)
    for pi in (0.01, 0.3, 0.9):
        e = math.exp(0.66)
        assert posterior_bound(0.66, pi) == pytest.approx(pi * e / (pi * e + 1 - pi), rel=1e-13)
    np.testing.assert_allclose(posterior_bound(np.array([0.1, 1.0])), 1 / (1 + np.exp(-np.array([0.1, 1.0]))))


def test_golden_composition():
    # Houssiau et al. 2022, Methods: 70 unique trips x 0.66 = 46.2 per week; 52 x 70 x 0.66 = 2402.4 per year
    assert basic_composition(0.66, 0.0, 70)[0] == pytest.approx(46.2, abs=1e-9)
    assert basic_composition(0.66, 0.0, 52 * 70)[0] == pytest.approx(2402.4, abs=1e-9)
    e, d = basic_composition(0.66, 2e-29, np.array([1, 2, 3]))
    np.testing.assert_allclose(e, [0.66, 1.32, 1.98])
    np.testing.assert_allclose(d, [2e-29, 4e-29, 6e-29])


def test_advanced_composition_formula():
    # DRV: sqrt(2k ln(1/d')) eps + k eps (e^eps - 1), delta = k delta + d'
    e, d = advanced_composition(0.1, 100, 1e-5, 1e-9)
    assert e == pytest.approx(math.sqrt(200 * math.log(1e5)) * 0.1 + 100 * 0.1 * (math.exp(0.1) - 1))
    assert d == pytest.approx(100 * 1e-9 + 1e-5)
    # for small eps and many k it beats basic composition; at eps=0.66, k=70, delta'=1e-6 it does not
    assert advanced_composition(0.01, 10_000, 1e-6)[0] < 0.01 * 10_000
    assert advanced_composition(0.66, 70, 1e-6)[0] > 46.2


@needs_pld
def test_budget_keys_and_golden_values():
    b = budget(BudgetConfig(epsilon=0.66, threshold=100, trips=70, weeks=52, delta=1e-6))
    for key in ("epsilon_per_metric", "delta_per_metric", "posterior_bound_per_metric", "epsilon_user_week",
                "delta_user_week", "epsilon_user_total", "delta_user_total", "epsilon_user_week_tight"):
        assert key in b
    assert b["epsilon_per_metric"] == 0.66
    assert f"{b['delta_per_metric']:.1e}" == "2.1e-29"  # Bassolas et al.
    assert round(b["posterior_bound_per_metric"], 3) == 0.659
    assert b["epsilon_user_week"] == pytest.approx(46.2)  # Houssiau et al.
    assert b["epsilon_user_total"] == pytest.approx(2402.4)
    assert b["delta_user_week"] == pytest.approx(70 * threshold_delta(0.66, 100))
    assert b["delta_user_total"] == pytest.approx(52 * 70 * threshold_delta(0.66, 100))
    assert b["delta_user_week_partition"] <= b["delta_user_week"]
    assert b["epsilon_user_week_tight"] < b["epsilon_user_week"]
    # k = 3640 is above TIGHT_K_MAX: the tight value comes as a guaranteed bracket (weekly law composed by FFT),
    # below the Renyi bound; with total_interval=0 it is left out and only the Renyi bound is given
    assert b["tight_total_method"] == "bracket"
    assert b["epsilon_user_total_tight_lower"] <= b["epsilon_user_total_tight"] < b["epsilon_user_total_rdp"]
    assert b["epsilon_user_total_tight"] - b["epsilon_user_total_tight_lower"] <= 2 * 52 * b["total_interval"]
    assert budget(BudgetConfig(total_interval=0))["epsilon_user_total_tight"] is None
    assert b["epsilon_user_week_tight"] < b["epsilon_user_week_rdp"] < b["epsilon_user_week"]
    assert b["epsilon_user_total_rdp"] < b["epsilon_user_total"]
    small = budget(BudgetConfig(trips=5, weeks=4))
    assert small["epsilon_user_total_tight"] == pytest.approx(tight_epsilon(1e-6, 20, 0.66))


# ------------------------------------------------------------------ tight epsilon vs an independent library


@needs_pld
@pytest.mark.parametrize(("eps", "k", "delta"), [(0.66, 1, 1e-6), (0.66, 3, 1e-3), (0.66, 70, 1e-6), (0.1, 50, 1e-5)])
def test_tight_epsilon_vs_dp_accounting(eps, k, delta):
    pld_lib = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
    interval = 1e-4
    ref = pld_lib.from_laplace_mechanism(parameter=1 / eps, sensitivity=1,
                                         value_discretization_interval=interval).self_compose(k)
    e_ref = ref.get_epsilon_for_delta(delta)
    ours = tight_epsilon(delta, k, eps)
    # dp_accounting is pessimistic by at most ~ k * interval from discretisation
    assert ours <= e_ref + 1e-9
    assert ours == pytest.approx(e_ref, abs=k * interval + 1e-6)


@needs_pld
def test_tight_epsilon_single_laplace_and_vectorised():
    # one Laplace(1/eps) mechanism is eps-DP with delta 0; at any delta > 0 its tight eps is <= eps
    assert tight_epsilon(1e-12, 1, 0.66) <= 0.66 + 1e-12
    ks = np.array([1, 5, 70])
    np.testing.assert_allclose(tight_epsilon(1e-6, ks, 0.66), [tight_epsilon(1e-6, int(k), 0.66) for k in ks])


# ------------------------------------------------------------------ curves


@needs_pld
def test_curves_shapes_and_order():
    t = epsilon_vs_trips(0.66, 70, 1e-6)
    assert list(t.columns) == ["trips", "basic", "advanced", "rdp", "tight", "posterior_basic", "posterior_tight"]
    assert (t["tight"] <= t["rdp"] + 1e-9).all()
    assert len(t) == 70
    assert t["basic"].iloc[-1] == pytest.approx(46.2)
    assert (t["tight"] <= t["basic"] + 1e-9).all()
    assert np.all(np.diff(t["tight"].to_numpy()) >= -1e-9)
    w = epsilon_over_weeks(0.66, 70, 52, 1e-6)
    assert w["basic"].iloc[-1] == pytest.approx(2402.4)
    ok = w["tight"].notna()
    assert ok.sum() == (w["k"] <= TIGHT_K_MAX).sum() > 0
    assert (w.loc[ok, "tight"] <= w.loc[ok, "rdp"] + 1e-9).all()
    assert (w["rdp"] <= w["basic"] + 1e-9).all()
    c = epsilon_delta_curve(0.66, 70, np.logspace(-30, -1, 12))
    # Houssiau et al.: better bounds require larger delta -> tight eps decreases as delta grows
    assert np.all(np.diff(c["tight"].to_numpy()) <= 1e-9)
    assert np.all(np.diff(c["advanced"].to_numpy()) <= 1e-9)
    assert c["tight"].iloc[0] > c["tight"].iloc[-1]


@pytest.mark.parametrize(("eps", "k", "delta"), [(0.66, 70, 1e-6), (0.66, 3640, 1e-6), (0.1, 1000, 1e-9), (2.0, 3, 1e-3)])
def test_rdp_epsilon_vs_dp_accounting_rdp_accountant(eps, k, delta):
    dpa = pytest.importorskip("dp_accounting")
    from dp_accounting import rdp

    from odcore.privacy.rdp import RDP_ORDERS as _RDP_ORDERS

    acc = rdp.RdpAccountant(orders=list(_RDP_ORDERS))
    acc.compose(dpa.LaplaceDpEvent(noise_multiplier=1 / eps), k)
    assert rdp_epsilon(delta, k, eps) == pytest.approx(min(acc.get_epsilon(delta), k * eps), rel=1e-9)


def test_rdp_epsilon_default_orders_cached_equal_the_same_orders_given():
    # the default orders' terms are kept per ε; the bound is the same, to the bit, as with the orders passed in
    from odcore.privacy.rdp import RDP_ORDERS

    ks = np.array([1, 7, 70, 3640])
    for eps in (0.05, 0.66, 0.66, 4.0):
        for delta in (1e-12, 1e-6, 0.1):
            np.testing.assert_array_equal(rdp_epsilon(delta, ks, eps), rdp_epsilon(delta, ks, eps, RDP_ORDERS.copy()))
    assert rdp_epsilon(1e-6, 70, 0.66) < rdp_epsilon(1e-6, 70, 0.67)


@needs_pld
def test_rdp_is_an_upper_bound_on_tight():
    ks = np.array([1, 2, 10, 70, 200])
    for delta in (1e-3, 1e-6, 1e-10):
        assert np.all(tight_epsilon(delta, ks, 0.66) <= rdp_epsilon(delta, ks, 0.66) + 1e-9)


def test_curves_without_pld_parts():
    # advanced composition grows like sqrt(k) for tiny eps
    e = advanced_composition(0.01, np.array([100, 400]), 1e-6)[0]
    assert e[1] / e[0] == pytest.approx(2.0, rel=0.05)


# ------------------------------------------------------------------ errors


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"epsilon": 0}, "epsilon"), ({"epsilon": float("nan")}, "epsilon"), ({"threshold": 0}, "threshold"),
    ({"trips": 0}, "trips"), ({"trips": 2.5}, "trips"), ({"weeks": -1}, "weeks"), ({"delta": 0}, "delta"),
    ({"delta": 1}, "delta"), ({"delta": float("nan")}, "delta"), ({"max_pairs": 0}, "max_pairs"),
])
def test_bad_budget_config(kwargs, match):
    with pytest.raises(ParameterError, match=match):
        BudgetConfig(**kwargs)


def test_bad_function_arguments():
    with pytest.raises(ParameterError, match="prior"):
        posterior_bound(0.66, prior=1.0)
    with pytest.raises(ParameterError, match="epsilon"):
        posterior_bound(-1)
    with pytest.raises(ParameterError, match="k"):
        basic_composition(0.66, 0.0, 0)
    with pytest.raises(ParameterError, match="delta_prime"):
        advanced_composition(0.66, 3, 0.0)
    with pytest.raises(ParameterError, match="deltas"):
        epsilon_delta_curve(0.66, 3, [0.0, 0.1])


# ------------------------------------------------------------------ user level (contribution bounding to m pairs)

def _dp_pessimistic(eps: float, m: int, weeks: int, delta: float, interval: float = 1e-4) -> float:
    """dp_accounting's pessimistic PLD of the (weeks·m)-fold Laplace with parameter ε/m (noise m/ε, sensitivity 1)."""
    pld_lib = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
    one = pld_lib.from_laplace_mechanism(parameter=m / eps, sensitivity=1, pessimistic_estimate=True,
                                         value_discretization_interval=interval)
    return one.self_compose(m * weeks).get_epsilon_for_delta(delta)


@needs_pld
@pytest.mark.parametrize(("m", "weeks", "golden", "tol"), [
    (20, 52, 5.20, 0.01),    # dp_accounting, pessimistic, grid 1e-4: 5.2023
    (5, 52, 11.42, 0.01),    # dp_accounting, pessimistic: 11.42
    (20, 1, 0.555, 0.005),   # dp_accounting: one week at m = 20 (the reply says 0.66)
])
def test_user_level_tight_golden_values(m, weeks, golden, tol):
    ul = user_level_budget(0.66, m, 100, weeks, 1e-6)
    tight = ul["epsilon_user_total_tight"]
    assert tight == pytest.approx(golden, abs=tol)
    ref = _dp_pessimistic(0.66, m, weeks, 1e-6)
    # our bracket holds the true value; dp_accounting's pessimistic value is >= the true value and within ~K·1e-4
    assert ul["epsilon_user_total_tight_lower"] <= ref + 1e-9
    assert tight == pytest.approx(ref, abs=0.005)
    if weeks == 1:
        assert ul["epsilon_user_week_tight"] == pytest.approx(tight, abs=1e-12)
        assert ul["tight_total_method"] == "exact"


@needs_pld
@pytest.mark.parametrize(("eps", "m", "weeks", "delta"), [
    (1.0, 10, 4, 1e-6), (0.3, 3, 10, 1e-5), (2.0, 8, 30, 1e-7), (0.66, 50, 8, 1e-6), (0.1, 1, 100, 1e-6)])
def test_user_level_tight_vs_dp_accounting(eps, m, weeks, delta):
    ul = user_level_budget(eps, m, 100, weeks, delta)
    ref = _dp_pessimistic(eps, m, weeks, delta)
    lo, hi = ul["epsilon_user_total_tight_lower"], ul["epsilon_user_total_tight"]
    assert lo <= hi
    assert lo <= ref + 1e-9                          # pessimistic reference is never below the truth
    assert hi == pytest.approx(ref, abs=0.01)
    # order of the bounds: tight <= Rényi <= basic, tight <= advanced
    assert hi <= ul["epsilon_user_total_rdp"] + 1e-9 <= ul["epsilon_user_total"] + 2e-9
    assert hi <= ul["epsilon_user_total_advanced"] + 1e-9
    week_ref = _dp_pessimistic(eps, m, 1, delta)
    assert ul["epsilon_user_week_tight"] <= week_ref + 1e-9
    assert ul["epsilon_user_week_tight"] == pytest.approx(week_ref, abs=m * 1e-4 + 1e-6)


def test_user_level_tight_is_not_the_per_count_composition():
    # the old, wrong reading: W-fold composition of Laplace(ε) (26.55 at 52 weeks) is far above the truth
    ul = user_level_budget(0.66, 20, 100, 52, 1e-6)
    assert ul["epsilon_user_total_tight"] < 0.25 * tight_epsilon(1e-6, 52, 0.66)


def test_partition_selection_delta_matches_google_formula_and_simulation():
    eps, m, tau = 0.66, 20, 100
    d1 = 0.5 * math.exp((1 - tau) * eps / m)     # LaplacePartitionSelection::CalculateDelta, threshold >= 1
    assert partition_selection_delta(eps, tau, m) == pytest.approx(1 - (1 - d1) ** m, rel=1e-12)
    assert partition_selection_delta(eps, tau, m) == pytest.approx(0.319, abs=5e-4)   # independent check: 0.319
    assert partition_selection_delta(eps, tau, m, 3) == pytest.approx(1 - (1 - d1) ** (3 * m), rel=1e-12)
    # simulation: a person alone on m pairs; the chance that at least one of them is published
    rng = np.random.default_rng(10)
    noisy = 1 + rng.laplace(0.0, m / eps, size=(200_000, m))
    hit = np.mean(np.any(noisy >= tau, axis=1))
    se = math.sqrt(hit * (1 - hit) / 200_000)
    assert abs(hit - partition_selection_delta(eps, tau, m)) < 6 * se
    # a wrong noise scale (1/ε instead of m/ε) is rejected by the same check
    assert abs(hit - threshold_delta(eps, tau, 1, m)) > 6 * se


@pytest.mark.parametrize(("eps", "m", "delta", "weeks"), [(0.66, 20, 1e-6, 1), (0.66, 5, 1e-6, 52), (2.0, 1, 1e-9, 1),
                                                         (0.1, 30, 1e-3, 4)])
def test_partition_threshold_is_the_inverse(eps, m, delta, weeks):
    tau = partition_threshold(eps, m, delta, weeks)
    assert partition_selection_delta(eps, tau, m, weeks) == pytest.approx(delta, rel=1e-9)
    assert partition_selection_delta(eps, tau - 0.01, m, weeks) > delta        # smallest such τ
    t_int = default_user_threshold(eps, m, delta, weeks)
    assert t_int >= tau > t_int - 1
    assert partition_selection_delta(eps, t_int, m, weeks) <= delta


def test_user_level_every_delta_includes_partition_selection():
    ul = user_level_budget(0.66, 20, 100, 52, 1e-6)
    assert ul["delta_partition_week"] == pytest.approx(0.319, abs=5e-4)
    for key in ("delta_user_week", "delta_user_week_tight", "delta_user_week_advanced", "delta_user_week_rdp"):
        assert ul[key] >= ul["delta_partition_week"]
    assert ul["delta_user_total_tight"] == 1.0                                      # useless at τ = 100
    tau = default_user_threshold(0.66, 20, 1e-6, 52)
    ok = user_level_budget(0.66, 20, tau, 52, 1e-6)
    assert ok["delta_partition_total"] <= 1e-6
    assert ok["delta_user_total_tight"] <= 2e-6 + 1e-12
    assert ok["delta_user_total_tight"] >= 1e-6 + ok["delta_partition_total"]


def test_budget_bounded_keys_come_from_user_level_budget():
    b = budget(BudgetConfig(max_pairs=20, threshold=490))
    ul = user_level_budget(0.66, 20, 490, 52, 1e-6)
    assert b["epsilon_user_total_bounded_tight"] == ul["epsilon_user_total_tight"]
    assert b["epsilon_user_week_bounded_tight"] == ul["epsilon_user_week_tight"]
    assert b["delta_user_week_bounded_tight"] == ul["delta_user_week_tight"]
    assert b["noise_scale_bounded"] == pytest.approx(20 / 0.66)


def test_user_level_bad_input():
    with pytest.raises(ParameterError, match="max_pairs"):
        user_level_budget(0.66, 0, 100)
    with pytest.raises(ParameterError, match="threshold"):
        user_level_budget(0.66, 5, 0.5)
    with pytest.raises(ParameterError, match="delta"):
        partition_threshold(0.66, 5, 0.0)


def test_person_week_in_both_units():
    from odcore.privacy.accounting import person_week

    pm = person_week("per_metric", 0.66, 100, 70)
    assert pm["epsilon_person_week"] == pytest.approx(tight_epsilon(1e-6, 70, 0.66))     # 32.98, Houssiau n = 70
    ul = person_week("user_level", 0.66, 490, 70, max_pairs=20)
    assert ul["epsilon_person_week"] == pytest.approx(0.555, abs=0.005)                   # independent check: one week
    assert ul["delta_person_week"] == pytest.approx(
        user_level_budget(0.66, 20, 490, 1, 1e-6)["delta_user_week_tight"], rel=1e-12)
    with pytest.raises(ParameterError, match="mode"):
        person_week("per_trip", 0.66, 100, 3)


def test_epsilon_over_weeks_tight_runs_to_the_last_week():
    # The cumulative-ε chart's tight line runs past k = TIGHT_K_MAX (week 5 at 70 trips): with a loss grid it is a
    # guaranteed bracket at every week, and at 52 weeks it agrees with budget()'s year-long bracket.
    from odcore.privacy.accounting import BudgetConfig, budget, epsilon_over_weeks

    ow = epsilon_over_weeks(0.66, trips=70, weeks=52, delta=1e-6, interval=2e-2)
    assert ow["tight"].notna().all()
    assert (ow["tight_lower"] <= ow["tight"]).all()
    assert (ow["tight"] <= ow["basic"] + 1e-9).all()
    b = budget(BudgetConfig(epsilon=0.66, threshold=100, trips=70, weeks=52, delta=1e-6, total_interval=2e-2))
    assert ow["tight"].iloc[-1] == pytest.approx(b["epsilon_user_total_tight"], abs=1e-6)
    assert ow["tight_lower"].iloc[-1] <= 807.5 <= ow["tight"].iloc[-1] + 1.0


def test_epsilon_over_weeks_upper_only_is_the_same_curve():
    # the chart's curve without the lower end of the bracket (composed only for the CSV): the same upper end
    import pandas as pd

    full = epsilon_over_weeks(0.7, trips=30, weeks=12, delta=1e-6, interval=2e-2)
    upper = epsilon_over_weeks(0.7, trips=30, weeks=12, delta=1e-6, interval=2e-2, lower=False)
    assert "tight_lower" not in upper
    pd.testing.assert_frame_equal(upper, full.drop(columns="tight_lower"))
