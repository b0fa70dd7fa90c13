"""Membership attack (odcore.privacy.attack): paper values, simulation vs exact, thresholded model, ROC, priors, population."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from odcore.errors import ParameterError
from odcore.privacy import attack, pld
from odcore.privacy.release import release_probability

EPS = 0.66  # Bassolas et al. / Houssiau et al.


# ---------------------------------------------------------------------------------------------------------------
# The paper's curve
# ---------------------------------------------------------------------------------------------------------------

def test_success_curve_paper_values():
    curve = attack.success_curve(EPS, 70)
    assert curve.shape == (71,)
    assert curve[0] == 0.5
    # Houssiau et al. 2022, Fig. 1: p_3 = 70.5 %, p_32 = 95.4 % from 10,000 Monte Carlo reps (s.e. <= 0.5 %);
    # issue: exact values near 70.7 % and 95.5 %, p_2 = 0.6563.
    assert curve[2] == pytest.approx(0.6563, abs=5e-5)
    for k, paper in [(3, 0.705), (32, 0.954)]:
        se = math.sqrt(curve[k] * (1 - curve[k]) / 10_000)
        assert abs(curve[k] - paper) < 3 * se
    assert curve[3] == pytest.approx(0.707, abs=5e-4)
    assert curve[32] == pytest.approx(0.955, abs=5e-4)
    # bound claimed from the per-metric guarantee: e^ε/(1+e^ε) = 65.9 %, exceeded from k = 3 on
    bound = attack.posterior_bound(EPS)
    assert bound == pytest.approx(0.659, abs=5e-4)
    assert curve[2] < bound < curve[3]


def test_success_curve_bad_input():
    with pytest.raises(ParameterError, match="k_max"):
        attack.success_curve(EPS, -1)
    with pytest.raises(ParameterError, match="k_max"):
        attack.success_curve(EPS, 2.5)
    with pytest.raises(ParameterError, match="epsilon"):
        attack.success_curve(0, 3)


# ---------------------------------------------------------------------------------------------------------------
# Monte Carlo as the paper ran it
# ---------------------------------------------------------------------------------------------------------------

def test_simulation_agrees_with_exact_within_ci():
    ks = np.arange(0, 71, 5)
    sim = attack.simulate_attack(EPS, ks, reps=4000, rng=2022)
    exact = attack.success_curve(EPS, 70)[ks]
    # each k: exact inside a wide (99.99 %) Wilson interval; jointly: chi-square of the z-scores
    lo, hi = attack.wilson_interval(np.round(sim.success * sim.reps), sim.reps, 0.9999)
    assert np.all((exact >= lo - 1e-12) & (exact <= hi + 1e-12))
    inner = (exact > 0.5) & (exact < 1)
    z = (sim.success - exact)[inner] / np.sqrt(exact * (1 - exact) / sim.reps)[inner]
    assert stats.chi2.sf(np.sum(z**2), inner.sum()) > 1e-4


def test_simulation_ties_k2_and_paper_values():
    # k = 2 has exact LLR ties with probability 2·P(y1 <= 0)·P(y2 >= 1) mixed over in/out; with the fair-coin
    # rule the success is the exact 0.6563 (a float sum of ±ε would mis-decide ties).
    sim = attack.simulate_attack(EPS, [2], reps=200_000, rng=5)
    assert sim.ties[0] > 0
    assert sim.ci_low[0] <= 0.65629 <= sim.ci_high[0]
    # the paper's own Monte Carlo values are reproduced within 10,000-rep noise
    sim = attack.simulate_attack(EPS, [3, 32], reps=10_000, rng=1)
    for got, paper in zip(sim.success, (0.705, 0.954), strict=True):
        assert abs(got - paper) < 4 * math.sqrt(paper * (1 - paper) / 10_000)


def test_simulation_rejects_wrong_model():
    # A simulation at ε ×1.3 / ×0.7 must be detected as different from the exact curve at ε.
    ks = np.array([3, 10, 32])
    exact = attack.success_curve(EPS, 32)[ks]
    for factor in (0.7, 1.3):
        sim = attack.simulate_attack(EPS * factor, ks, reps=20_000, rng=9)
        outside = (exact < sim.ci_low) | (exact > sim.ci_high)
        assert outside.any()


def test_simulation_seeded_and_validated():
    a = attack.simulate_attack(EPS, [1, 4], reps=500, rng=3)
    b = attack.simulate_attack(EPS, [1, 4], reps=500, rng=3)
    np.testing.assert_array_equal(a.success, b.success)
    assert a.to_dict()["k"] == [1, 4]
    assert attack.simulate_attack(EPS, [0], reps=2000, rng=1).success[0] == pytest.approx(0.5, abs=0.05)
    with pytest.raises(ParameterError, match="reps"):
        attack.simulate_attack(EPS, [1], reps=0)
    with pytest.raises(ParameterError, match="k_values"):
        attack.simulate_attack(EPS, [-1])


def test_wilson_interval_coverage_known_case():
    lo, hi = attack.wilson_interval(50, 100, 0.95)
    assert lo == pytest.approx(0.4038, abs=1e-3)
    assert hi == pytest.approx(0.5962, abs=1e-3)


# ---------------------------------------------------------------------------------------------------------------
# Priors
# ---------------------------------------------------------------------------------------------------------------

def test_bayes_success_priors():
    ks = np.array([0, 1, 3, 32])
    half = attack.bayes_success(ks, EPS, 0.5)
    np.testing.assert_allclose(half, attack.success_curve(EPS, 32)[ks], atol=1e-14)
    for prior in (0.01, 0.2, 0.9):
        s = attack.bayes_success(ks, EPS, prior)
        assert s[0] == pytest.approx(max(prior, 1 - prior), abs=1e-14)   # k = 0: guess the likelier side
        assert np.all(np.diff(s) >= -1e-12)
        assert np.all(s >= max(prior, 1 - prior) - 1e-12)
    # brute force for k = 1: Σ max(π q, (1 − π) p) by numerical integration
    prior = 0.2
    x = np.linspace(-60, 60, 1_200_001)
    p = stats.laplace.pdf(x, 0, 1 / EPS)
    q = stats.laplace.pdf(x, 1, 1 / EPS)
    brute = np.trapezoid(np.maximum(prior * q, (1 - prior) * p), x)
    assert attack.bayes_success(1, EPS, prior) == pytest.approx(brute, abs=1e-6)


def test_posterior_bound():
    assert attack.posterior_bound(EPS, 0.5) == pytest.approx(math.exp(EPS) / (1 + math.exp(EPS)))
    assert attack.posterior_bound(EPS, 0.1) == pytest.approx(0.1 * math.exp(EPS) / (0.1 * math.exp(EPS) + 0.9))
    assert attack.posterior_bound(800, 0.5) == pytest.approx(1.0)
    with pytest.raises(ParameterError, match="prior"):
        attack.posterior_bound(EPS, 1.0)


# ---------------------------------------------------------------------------------------------------------------
# ROC
# ---------------------------------------------------------------------------------------------------------------

def test_roc_plain_properties_and_simulation():
    k = 5
    roc = attack.roc_plain(k, EPS)
    assert roc.fpr[0] == 0
    assert roc.fpr[-1] == 1
    assert roc.tpr[-1] == 1
    assert np.all(np.diff(roc.fpr) >= 0)
    assert np.all(np.diff(roc.tpr) >= 0)
    # max over thresholds of (TPR − FPR) is TV
    assert np.max(roc.tpr - roc.fpr) == pytest.approx(pld.hockey_stick_delta(0.0, k, EPS), abs=1e-6)
    # exact TPR at FPR 1 % and 0.1 %: agrees with the curve and with a simulated LR test
    t = attack.tpr_at_fpr(k, EPS, [0.01, 0.001])
    np.testing.assert_allclose(roc.tpr_at([0.01, 0.001]), t, atol=1e-4)
    rng = np.random.default_rng(11)
    n = 400_000
    t_out = np.clip(rng.laplace(0, 1 / EPS, (n, k)), 0, 1).sum(1)
    t_in = np.clip(rng.laplace(1, 1 / EPS, (n, k)), 0, 1).sum(1)
    thr = np.quantile(t_out, 0.99)
    assert np.mean(t_in > thr) == pytest.approx(t[0], abs=4 * math.sqrt(t[0] / n) + 2e-3)
    # duality: TPR(α) = min over ε' of δ(ε') + e^{ε'}·α
    ep = np.linspace(-k * EPS, k * EPS, 4001)
    dual = np.min(pld.hockey_stick_delta(ep, k, EPS) + np.exp(ep) * 0.01)
    assert t[0] == pytest.approx(dual, abs=1e-4)


def test_tpr_curve_matches_pointwise():
    curve = attack.tpr_curve(EPS, 6, [0.01, 0.2])
    for k in range(7):
        np.testing.assert_allclose(curve[k], attack.tpr_at_fpr(k, EPS, [0.01, 0.2]), atol=1e-12)
    assert np.all(np.diff(curve[:, 0]) >= -1e-12)


def test_roc_identical_and_separable():
    # k = 0: nothing to learn, the ROC is the diagonal (AUC ½); huge ε: separable, AUC → 1
    assert attack.roc_plain(0, EPS).auc == pytest.approx(0.5)
    assert attack.roc_plain(3, 30.0).auc > 0.999
    assert attack.tpr_at_fpr(0, EPS, 0.01)[0] == pytest.approx(0.01)


# ---------------------------------------------------------------------------------------------------------------
# Thresholded release: per-pair model
# ---------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("c", [0.0, 50.0, 97.0, 99.0, 99.5, 100.0, 103.0, 140.0, np.inf])
def test_pair_pmf_masses(c):
    eps, tau, R = EPS, 100, 64
    for method in ("connect_dots", "round_down"):
        pm = attack.pair_loss_pmf([c], eps, tau, resolution=R, method=method)[0]
        assert pm.sum() == pytest.approx(1.0, abs=1e-12)
        assert np.all(pm >= 0)
    pm = attack.pair_loss_pmf([c], eps, tau, resolution=R)[0]
    loss = (np.arange(2 * R + 1) - R) * eps / R
    assert np.sum(pm * np.exp(-loss)) == pytest.approx(1.0, abs=1e-12)   # connect-the-dots keeps Q-mass
    # the suppressed P-mass is the release module's 1 − P(published)
    if np.isfinite(c):
        assert attack.pair_errors(np.array([c]), eps, tau)[1][0] == pytest.approx(
            (1 - release_probability(c, eps, tau)) + (1 - release_probability(c + 1, eps, tau)), abs=1e-12)


def test_pair_tv_against_simulation():
    # one pair at the threshold: TV from the closed form vs the LR test simulated on the thresholded observation
    eps, tau, c = EPS, 10.0, 9.0
    tv = attack.pair_errors(np.array([c]), eps, tau)[0][0]
    rng = np.random.default_rng(4)
    n = 400_000
    y_out = c + rng.laplace(0, 1 / eps, n)
    y_in = c + 1 + rng.laplace(0, 1 / eps, n)
    def llr(y):  # log p_out / p_in for the observation (suppressed or value)
        sup = y < tau
        l_sup = math.log(stats.laplace.cdf(tau - c, 0, 1 / eps) / stats.laplace.cdf(tau - c - 1, 0, 1 / eps))
        return np.where(sup, l_sup, eps * (np.abs(y - c - 1) - np.abs(y - c)))
    acc = 0.5 * np.mean(llr(y_out) > 0) + 0.5 * np.mean(llr(y_in) < 0)
    assert acc == pytest.approx(0.5 + 0.5 * tv, abs=5 * 0.5 / math.sqrt(n))


@pytest.mark.parametrize("k", [1, 2, 3, 20, 32, 70])
def test_user_risk_reduces_to_plain_far_above(k):
    r = attack.user_risk([10**6] * k, EPS, 100)
    exact = pld.optimal_accuracy(k, EPS)
    assert r.success == pytest.approx(exact, abs=1e-6)
    assert r.success_low - 1e-12 <= exact <= r.success_high + 1e-12
    assert r.effective_k == pytest.approx(k, abs=1e-3)
    assert r.k == k
    assert r.k_informative == k


@pytest.mark.parametrize("prior", [0.05, 0.3, 0.5, 0.9])
def test_user_risk_prior_matches_plain(prior):
    for k in (1, 4, 25):
        r = attack.user_risk([10**6] * k, EPS, 100, prior=prior)
        assert r.success_prior == pytest.approx(attack.bayes_success(k, EPS, prior), abs=1e-5)
    assert attack.user_risk([0] * 5, EPS, 100, prior=prior).success_prior == pytest.approx(max(prior, 1 - prior))


def test_user_risk_half_far_below():
    r = attack.user_risk([0] * 40 + [3] * 10, EPS, 100)
    assert r.success == pytest.approx(0.5, abs=1e-12)
    assert r.k_informative == 0
    assert r.effective_k == 0
    assert r.error_bound < 1e-20


def test_user_risk_mixed_is_between_and_matches_fine_grid():
    others = [95, 99, 100, 101, 120, 300, 3, 5, 60, 99]
    r = attack.user_risk(others, EPS, 100, roc=True)
    fine = attack.user_risk(others, EPS, 100, resolution=2048)
    assert r.success == pytest.approx(fine.success, abs=1e-6)
    assert r.success_low <= r.success <= r.success_high
    # thresholding is post-processing: never more than the plain attack on the same k, never below ½
    assert 0.5 < r.success < pld.optimal_accuracy(len(others), EPS)
    assert 0 < r.effective_k < len(others)
    assert np.max(r.roc.tpr - r.roc.fpr) == pytest.approx(2 * r.success - 1, abs=1e-6)
    d = r.to_dict()
    assert set(d) >= {"k", "effective_k", "success", "roc"}
    assert 0 <= d["roc"]["tpr_at_fpr_0.1pct"] <= d["roc"]["tpr_at_fpr_1pct"] <= 1


@pytest.mark.parametrize("tau", [10.0, 9.5])
def test_user_risk_against_simulation(tau):
    # Monte Carlo of the optimal LR test on the thresholded observations of 6 pairs near τ (τ = 9.5: the
    # suppression boundary falls inside the continuous part of some pairs, 0 < τ − c < 1)
    eps = 1.0
    others = np.array([8.0, 9.0, 9.0, 10.0, 12.0, 6.0])
    r = attack.user_risk(others, eps, tau)
    rng = np.random.default_rng(8)
    n = 300_000
    b = 1 / eps

    def llr(y):
        sup = y < tau
        l_sup = np.log(stats.laplace.cdf(tau - others, 0, b) / stats.laplace.cdf(tau - others - 1, 0, b))
        return np.where(sup, l_sup, eps * (np.abs(y - others - 1) - np.abs(y - others))).sum(axis=1)

    lo = llr(others + rng.laplace(0, b, (n, others.size)))
    li = llr(others + 1 + rng.laplace(0, b, (n, others.size)))
    acc = 0.5 * np.mean(lo > 0) + 0.5 * np.mean(li < 0)
    assert acc == pytest.approx(r.success, abs=5 * 0.5 / math.sqrt(n))
    # the same check must fail for a wrong noise scale
    lo2 = llr(others + rng.laplace(0, 1.3 * b, (n, others.size)))
    li2 = llr(others + 1 + rng.laplace(0, 1.3 * b, (n, others.size)))
    assert abs(0.5 * np.mean(lo2 > 0) + 0.5 * np.mean(li2 < 0) - r.success) > 5 * 0.5 / math.sqrt(n)


@settings(max_examples=25, deadline=None)
@given(others=st.lists(st.integers(0, 40), min_size=1, max_size=8), extra=st.integers(0, 40),
       tau=st.sampled_from([3.0, 10.0, 25.0]))
def test_user_risk_properties(others, extra, tau):
    # ½ <= success <= plain p_k (thresholding is post-processing); one more pair never helps the user
    r = attack.user_risk(others, EPS, tau, resolution=64)
    assert 0.5 - 1e-9 <= r.success <= pld.optimal_accuracy(len(others), EPS) + 1e-6
    assert r.success_low - 1e-9 <= r.success <= r.success_high + 1e-9
    r2 = attack.user_risk([*others, extra], EPS, tau, resolution=64)
    assert r2.success >= r.success - 1e-6


def test_user_risk_bad_input():
    with pytest.raises(ParameterError, match="others_counts"):
        attack.user_risk([-1, 3], EPS, 100)
    with pytest.raises(ParameterError, match="threshold"):
        attack.user_risk([1], EPS, 0)


# ---------------------------------------------------------------------------------------------------------------
# Population view
# ---------------------------------------------------------------------------------------------------------------

def _toy_week(rng, n_users=300, n_pairs=400, mean_k=12, week=0):
    """Users pick pairs from a Zipf-like popularity: a few busy pairs, many quiet ones."""
    pop = 1.0 / np.arange(1, n_pairs + 1) ** 1.1
    pop /= pop.sum()
    rows = []
    ks = rng.poisson(mean_k, n_users) + 1
    for u, k in enumerate(ks):
        chosen = rng.choice(n_pairs, size=min(k, n_pairs), replace=False, p=pop)
        rows.append(pd.DataFrame({"week": week, "user": u, "origin": chosen, "destination": chosen % 7}))
    return pd.concat(rows, ignore_index=True)


def test_week_risk_matches_per_user_loop():
    rng = np.random.default_rng(0)
    pairs = _toy_week(rng)
    tau = 20
    # precise mode: resolution 32 with Richardson extrapolation (measured max error ~1.5e-6 vs resolution 512)
    risk, rep = attack.week_risk(pairs, 0, EPS, tau, resolution=32, extrapolate=True)
    assert rep["users"] == pairs["user"].nunique() == len(risk)
    counts = pairs.groupby(["origin", "destination"]).size().rename("count").reset_index()
    merged = pairs.merge(counts, on=["origin", "destination"])
    for u in rng.choice(risk["user"].to_numpy(), 8, replace=False):
        others = merged.loc[merged["user"] == u, "count"].to_numpy() - 1
        ref = attack.user_risk(others, EPS, tau)
        row = risk.loc[risk["user"] == u].iloc[0]
        assert row["k"] == len(others)
        assert row["success"] == pytest.approx(ref.success, abs=3e-6)
        assert row["effective_k"] == pytest.approx(ref.effective_k, abs=1e-3)
    # fast mode: pessimistic, within 1e-4
    fast, _ = attack.week_risk(pairs, 0, EPS, tau)
    assert np.all(fast["success"].to_numpy() >= risk["success"].to_numpy() - 1e-7)
    assert np.max(np.abs(fast["success"] - risk["success"])) < 1e-4


def test_week_risk_with_counts_and_summary():
    rng = np.random.default_rng(1)
    pairs = _toy_week(rng, n_users=200)
    counts = pairs.groupby(["week", "origin", "destination"]).size().rename("count").reset_index()
    a, _ = attack.week_risk(pairs, 0, EPS, 5)
    b, _ = attack.week_risk(pairs, 0, EPS, 5, counts=counts)
    pd.testing.assert_frame_equal(a, b)
    s = attack.risk_summary(a)
    assert s["users"] == 200
    assert 0 <= s["share_above_90pct"] <= 1
    assert s["share_above_90pct"] == pytest.approx(np.mean(a["success"] > 0.9))
    # high threshold: everyone is (almost) safe
    c, _ = attack.week_risk(pairs, 0, EPS, 10_000)
    assert np.allclose(c["success"], 0.5)
    # wrong counts are an error naming the pair
    bad = counts.copy()
    bad.loc[0, "count"] = 0
    with pytest.raises(ParameterError, match="disagree"):
        attack.week_risk(pairs, 0, EPS, 5, counts=bad)
    with pytest.raises(ParameterError, match="week=3"):
        attack.week_risk(pairs, 3, EPS, 5)


def test_week_risk_scales_to_a_realistic_week():
    # A week of 3,000 users x 3,000 pairs (speed is measured in benchmarks/bench_attack.py, not here):
    # every user gets a success in [0.5, 1] and k equals their number of unique pairs.
    rng = np.random.default_rng(2)
    pairs = _toy_week(rng, n_users=3000, n_pairs=3000, mean_k=20)
    risk, rep = attack.week_risk(pairs, 0, EPS, 10)
    k = pairs.groupby("user").size()
    assert len(risk) == k.size == rep["users"]
    assert np.array_equal(risk.set_index("user")["k"].sort_index().to_numpy(), k.sort_index().to_numpy())
    assert risk["success"].between(0.5 - 1e-9, 1 + 1e-9).all()


@pytest.mark.realdata
def test_week_risk_on_real_checkins(shared_data):
    # Gowalla (1,000 users), busiest week 57: with τ = 100 no pair comes close to the threshold, so the release
    # tells the attacker (almost) nothing; with τ = 5 the quiet pairs leak. Per-user values match user_risk.
    from odcore.data.traces import load_traces
    from odcore.od.trips import ODConfig, build_od

    tr = load_traces(shared_data / "gowalla_liu2017_1k", time_offset_s=28800)
    od = build_od(tr.df, ODConfig())
    risk, rep = attack.week_risk(od.pairs, 57, EPS, 100, counts=od.counts)
    assert rep["users"] == int((od.user_week["week"] == 57).sum() - (od.user_week.query("week == 57")
                                                                         ["unique_trips"] == 0).sum())
    assert risk["success"].max() < 0.5 + 1e-9
    low, _ = attack.week_risk(od.pairs, 57, EPS, 5, counts=od.counts, resolution=32, extrapolate=True)
    assert low["success"].max() > 0.6
    merged = od.week_pairs(57).merge(od.week_counts(57), on=["week", "origin", "destination"])
    top = low.sort_values("success").tail(3)["user"]
    for u in top:
        others = merged.loc[merged["user"] == u, "count"].to_numpy() - 1
        assert low.loc[low["user"] == u, "success"].iloc[0] == pytest.approx(
            attack.user_risk(others, EPS, 5).success, abs=1e-5)


@pytest.mark.parametrize("epsilon", [0.05, 0.66, 1.7])
def test_success_curve_values_do_not_depend_on_k_max(epsilon):
    """The Attack page reads a person's p_k from the page's curve to k = 70 (odapp.attack.view), not from a curve to
    the person's own k: the same numbers only if p_k does not depend on where the curve stops."""
    full = np.asarray(attack.success_curve(epsilon, 70))
    for k_max in (1, 3, 32, 65):
        np.testing.assert_array_equal(np.asarray(attack.success_curve(epsilon, k_max)), full[:k_max + 1])


def test_success_grid_gives_user_risks_success_at_every_setting():
    """success_grid (the live curve of a real person) is user_risk's success, setting by setting: pairs far above
    and far below τ, near it, a person with no informative pair, a threshold per ε and the per-person scale."""
    from odcore.privacy.attack import success_grid, user_risk

    rng = np.random.default_rng(7)
    people = [[150, 90, 99, 101, 300, 12, 0, 5000, 130, 99, 99, 2], rng.integers(0, 400, 25).tolist(), [0] * 5,
              [10_000] * 3]
    eps = np.geomspace(0.05, 8.0, 9)
    for others in people:
        for tau in (1.0, 20.0, 100.0, np.linspace(5, 150, eps.size)):
            got = success_grid(others, eps, tau)
            taus = np.broadcast_to(tau, eps.shape)
            want = [user_risk(others, e, t).success for e, t in zip(eps, taus, strict=True)]
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    with pytest.raises(ParameterError, match="epsilon"):
        success_grid([1, 2], [0.5, -1.0], 10)


def test_success_grid_in_batches_of_settings(monkeypatch):
    # settings composed a batch at a time (here of 7, so the last batch is short) give user_risk's success too
    from odcore.privacy import attack

    monkeypatch.setattr(attack, "GRID_BATCH", 7)
    others = [150, 90, 99, 101, 300, 12, 0, 5000, 130, 99, 99, 2, 400, 64]
    eps = np.geomspace(0.05, 5.0, 30)
    got = attack.success_grid(others, eps, 100.0, resolution=64)
    want = [attack.user_risk(others, e, 100.0, resolution=64).success for e in eps]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    assert np.all(np.diff(got) >= -1e-12)
    assert got[-1] > got[0]
