"""Exact k-fold Laplace PLD (odcore.privacy.pld): closed forms, dp_accounting, Monte Carlo, stability, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from odcore.errors import ParameterError
from odcore.privacy import pld, pld_weeks

dp_pld = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")


def _dp_accounting(eps: float, k: int):
    # Connect-the-dots pessimistic PLD; value_discretization_interval 1e-4 keeps its own error ~1e-9 here
    # (measured: |dp - exact| <= 2e-9 over this grid), well below the 1e-6 the issue asks for.
    return dp_pld.from_laplace_mechanism(1.0 / eps, sensitivity=1, value_discretization_interval=1e-4).self_compose(k)


# ---------------------------------------------------------------------------------------------------------------
# Closed forms
# ---------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("eps", [0.01, 0.66, 3.0, 10.0])
def test_one_coordinate_closed_form(eps):
    # Laplace mechanism, sensitivity 1: δ(ε') = 1 − exp((ε' − ε)/2) for 0 <= ε' <= ε, 0 beyond.
    ep = np.linspace(0, 1.2 * eps, 13)
    want = np.where(ep <= eps, -np.expm1((ep - eps) / 2), 0.0)
    np.testing.assert_allclose(pld.hockey_stick_delta(ep, 1, eps), want, atol=1e-13)


@pytest.mark.parametrize("eps", [0.01, 0.66, 3.0, 10.0])
def test_two_coordinates_closed_form(eps):
    # k = 2 by hand in the T = c1 + c2 picture: TV = P(T < 1) − P(T > 1) (Q(T < 1) = P(T > 1) by reflection).
    e = math.exp(-eps)
    p_lt = 0.25 + 0.5 * (1 - e) + 0.25 * (1 - e * (1 + eps))
    p_gt = e * 0.5 * (1 - e) + 0.25 * e * e + 0.25 * e * (eps - 1 + e)
    assert pld.hockey_stick_delta(0.0, 2, eps) == pytest.approx(p_lt - p_gt, abs=1e-14)


def test_k_zero_and_trivial():
    assert pld.optimal_accuracy(0, 0.66) == 0.5
    assert pld.hockey_stick_delta(0.0, 0, 1.0) == 0.0
    assert pld.epsilon_for_delta(1e-5, 0, 1.0) == 0.0


def test_houssiau_golden_values():
    # Houssiau et al. 2022, Fig. 1 (Monte Carlo, 10,000 reps): p_3 = 70.5 %, p_32 = 95.4 %; the issue gives
    # exact values near 70.7 % and 95.5 % and p_2 = 0.6563. A 10,000-rep MC has s.e. <= 0.005, so the paper's
    # figures must lie within 3 s.e. of the exact ones.
    acc = pld.optimal_accuracy(np.array([2, 3, 32]), 0.66)
    assert acc[0] == pytest.approx(0.6563, abs=5e-5)
    assert acc[1] == pytest.approx(0.707, abs=5e-4)
    assert acc[2] == pytest.approx(0.955, abs=5e-4)
    for p_paper, p in [(0.705, acc[1]), (0.954, acc[2])]:
        se = math.sqrt(p * (1 - p) / 10_000)
        assert abs(p_paper - p) < 3 * se


def test_monotone_and_bounded():
    for eps in (0.01, 0.66, 10.0):
        acc = pld.optimal_accuracy(np.arange(201), eps)
        assert np.all(np.diff(acc) >= -1e-12)
        assert np.all((acc >= 0.5) & (acc <= 1.0))
        d = pld.hockey_stick_delta(np.linspace(0, 5 * eps, 50), 10, eps)
        assert np.all(np.diff(d) <= 1e-12)


@pytest.mark.parametrize("eps", [0.01, 0.66, 10.0])
def test_total_mass_is_one_at_k200(eps):
    # Stability of the Bernstein recursion: P(T > -1) = Q(T > -1) = 1 to ~1e-12 even at k = 200.
    st = list(pld.iter_k_fold(200, eps))[-1]
    p, q = st.tails(np.array([-1.0]))
    assert abs(p[0] - 1) < 1e-11
    assert abs(q[0] - 1) < 1e-11


def test_vectorised_equals_scalar_and_shapes():
    ks = np.array([[1, 5], [9, 5]])
    v = pld.hockey_stick_delta(0.3, ks, 0.8)
    assert v.shape == (2, 2)
    for i in range(2):
        for j in range(2):
            assert v[i, j] == pytest.approx(pld.hockey_stick_delta(0.3, int(ks[i, j]), 0.8), abs=1e-15)
    assert isinstance(pld.optimal_accuracy(3, 0.66), float)
    assert pld.epsilon_for_delta(1e-6, [1, 2], 0.66).shape == (2,)


# ---------------------------------------------------------------------------------------------------------------
# Independent library: dp_accounting
# ---------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("eps", "k"), [(0.05, 1), (0.05, 40), (0.66, 2), (0.66, 3), (0.66, 32), (0.66, 70),
                                        (2.0, 7), (2.0, 20), (10.0, 5), (10.0, 30)])
def test_against_dp_accounting(eps, k):
    ref = _dp_accounting(eps, k)
    eps_primes = [0.0, 0.3 * eps, eps, eps * math.sqrt(k)]
    want = np.array([ref.get_delta_for_epsilon(e) for e in eps_primes])
    got = pld.hockey_stick_delta(eps_primes, k, eps)
    np.testing.assert_allclose(got, want, atol=1e-6, rtol=0)
    # accuracy = ½ + ½·δ(0)
    assert pld.optimal_accuracy(k, eps) == pytest.approx(0.5 + 0.5 * want[0], abs=1e-6)


@pytest.mark.parametrize(("eps", "k", "delta"), [(0.66, 32, 1e-6), (0.66, 70, 1e-9), (2.0, 20, 1e-5)])
def test_epsilon_for_delta_against_dp_accounting(eps, k, delta):
    ref = _dp_accounting(eps, k)
    got = pld.epsilon_for_delta(delta, k, eps)
    # check through δ (dp_accounting's own ε(δ) inverts a discretised curve, less precise than its δ(ε))
    assert pld.hockey_stick_delta(got, k, eps) == pytest.approx(delta, rel=1e-6)
    assert ref.get_delta_for_epsilon(got) == pytest.approx(delta, rel=1e-3)
    assert got == pytest.approx(ref.get_epsilon_for_delta(delta), abs=1e-3)
    assert got <= k * eps


@pytest.mark.slow
def test_against_dp_accounting_k200():
    for eps in (0.05, 0.66, 10.0):
        ref = _dp_accounting(eps, 200)
        for e in (0.0, eps, 5 * eps):
            assert pld.hockey_stick_delta(e, 200, eps) == pytest.approx(ref.get_delta_for_epsilon(e), abs=1e-6)


# ---------------------------------------------------------------------------------------------------------------
# Simulation
# ---------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("eps", "k"), [(0.66, 3), (1.5, 10)])
def test_against_simulation(eps, k):
    rng = np.random.default_rng(20220129)
    n = 200_000
    x = rng.laplace(0.0, 1.0 / eps, size=(n, k))
    loss = eps * (np.abs(x - 1) - np.abs(x)).sum(axis=1)   # under P
    for e in (0.0, 0.5 * eps):
        est = np.maximum(0.0, -np.expm1(e - loss))           # δ(ε') = E_P[(1 − e^{ε'−L})₊]
        se = est.std() / math.sqrt(n)
        assert abs(est.mean() - pld.hockey_stick_delta(e, k, eps)) < 5 * se
    # the law of T = Σ clip(x, 0, 1): exact CDF vs samples (KS on the continuous region, exact atoms)
    st = list(pld.iter_k_fold(k, eps))[-1]
    t_samples = np.clip(x, 0, 1).sum(axis=1)
    grid = np.linspace(0.05, k - 0.05, 60)
    p_exact, _ = st.tails(grid)
    p_emp = (t_samples[:, None] > grid[None, :]).mean(axis=0)
    assert np.max(np.abs(p_exact - p_emp)) < 1.63 * 2 / math.sqrt(n)  # DKW at alpha ~ 1e-2, ample margin


def test_simulation_detects_wrong_scale():
    # The comparison above must be able to fail: samples drawn with scale ×0.7 or ×1.3 are rejected.
    eps, k = 0.66, 3
    st = list(pld.iter_k_fold(k, eps))[-1]
    grid = np.linspace(0.05, k - 0.05, 60)
    p_exact, _ = st.tails(grid)
    rng = np.random.default_rng(7)
    for factor in (0.7, 1.3):
        x = rng.laplace(0.0, factor / eps, size=(200_000, k))
        t_samples = np.clip(x, 0, 1).sum(axis=1)
        p_emp = (t_samples[:, None] > grid[None, :]).mean(axis=0)
        assert np.max(np.abs(p_exact - p_emp)) > 0.01


def test_t_law_continuous_part_ks():
    # KS on T given "all coordinates in (0, 1)" for k = 1: truncated exponential.
    eps = 2.0
    rng = np.random.default_rng(3)
    x = rng.laplace(0.0, 1.0 / eps, size=100_000)
    inside = x[(x > 0) & (x < 1)]
    st = list(pld.iter_k_fold(1, eps))[-1]
    p_in = st.tails(np.array([0.0]))[0][0] - st.atoms[1]

    def cdf(v):
        return 1.0 - (st.tails(np.asarray(v))[0] - st.atoms[1]) / p_in

    assert stats.kstest(inside, cdf).pvalue > 1e-4
    assert stats.kstest(inside * 0.9, cdf).pvalue < 1e-6


# ---------------------------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), "x"])
def test_bad_epsilon(bad):
    with pytest.raises(ParameterError, match="epsilon"):
        pld.optimal_accuracy(3, bad)


@pytest.mark.parametrize("bad", [-1, 1.5, [1, -2], True, float("nan"), 1001])
def test_bad_k(bad):
    with pytest.raises(ParameterError, match="k must be"):
        pld.optimal_accuracy(bad, 0.66)


@pytest.mark.parametrize("bad", [-0.1, 1.5, "x"])
def test_bad_delta(bad):
    with pytest.raises(ParameterError, match="delta"):
        pld.epsilon_for_delta(bad, 3, 0.66)


def test_bad_eps_prime():
    with pytest.raises(ParameterError, match="eps_prime"):
        pld.hockey_stick_delta(float("nan"), 3, 0.66)


def test_epsilon_for_delta_broadcasts_over_delta():
    # many deltas at once (bracketed by one vectorised scan) give the same roots as one delta at a time
    ds = np.logspace(-30, -0.5, 12)
    many = pld.epsilon_for_delta(ds, 40, 0.66)
    one = np.array([pld.epsilon_for_delta(float(d), 40, 0.66) for d in ds])
    assert many.shape == ds.shape
    np.testing.assert_allclose(many, one, atol=1e-9)
    assert np.all(np.diff(many) <= 1e-12)  # larger delta, smaller epsilon
    both = pld.epsilon_for_delta(ds[:, None], np.array([[10, 40]]), 0.66)
    assert both.shape == (12, 2)
    np.testing.assert_allclose(both[:, 1], one, atol=1e-9)


@pytest.mark.parametrize("eps", [0.05, 0.66, 0.67, 2.0, 10.0])
def test_epsilon_for_delta_is_the_root_of_hockey_stick_delta(eps):
    # The vectorised Newton solve (all k and δ at once) against Brent's method on the public δ(ε') of each k,
    # one k and one δ at a time (the way epsilon_for_delta solved it before), for δ from 1e-30 to 0.5.
    from scipy import optimize

    ks = np.array([1, 2, 3, 7, 22, 32, 70, 71])
    for delta in (1e-30, 1e-12, 1e-6, 1e-3, 0.5):
        got = pld.epsilon_for_delta(delta, ks, eps)
        for k, e in zip(ks, got, strict=True):
            if pld.hockey_stick_delta(0.0, int(k), eps) <= delta:
                want = 0.0
            else:
                want = optimize.brentq(lambda x, k=k, d=delta: pld.hockey_stick_delta(x, int(k), eps) - d, 0.0,
                                       k * eps, xtol=1e-13, rtol=4 * np.finfo(float).eps, maxiter=300)
            assert e == pytest.approx(want, abs=1e-9), (eps, int(k), delta)


@pytest.mark.parametrize(("k", "weeks", "eps"), [(5, 4, 0.66), (70, 3, 0.66), (20, 10, 0.3), (12, 8, 2.0)])
def test_composed_bracket_contains_the_exact_value(k, weeks, eps):
    # the weekly law rounded up / down on a loss grid and composed by FFT brackets the exact k·weeks-fold value
    for delta in (1e-3, 1e-6, 1e-10):
        exact = pld.epsilon_for_delta(delta, k * weeks, eps)
        lo, hi = pld_weeks.composed_epsilon_bounds(delta, k, eps, weeks, interval=1e-3)
        assert lo <= exact + 1e-9
        assert exact <= hi + 1e-9
        assert hi - lo <= 2 * weeks * 1e-3 + 1e-9


def test_composed_bracket_narrows_with_the_grid_and_a_year_of_weeks():
    # Houssiau et al.'s year (52 weeks x 70 trips, eps 0.66): far below basic composition 2402.4 and below the
    # Renyi bound, and the finer grid's bracket sits inside the coarser one
    from odcore.privacy.accounting import rdp_epsilon

    lo1, hi1 = pld_weeks.composed_epsilon_bounds(1e-6, 70, 0.66, 52, interval=1e-2)
    lo2, hi2 = pld_weeks.composed_epsilon_bounds(1e-6, 70, 0.66, 52, interval=2e-3)
    assert lo1 <= lo2 <= hi2 <= hi1
    assert hi2 - lo2 <= 2 * 52 * 2e-3
    assert hi1 < rdp_epsilon(1e-6, 70 * 52, 0.66) < 2402.4


def test_composed_bracket_errors():
    with pytest.raises(ParameterError, match="weeks"):
        pld_weeks.composed_epsilon_bounds(1e-6, 5, 0.66, 0)
    with pytest.raises(ParameterError, match="delta"):
        pld_weeks.composed_epsilon_bounds(0.0, 5, 0.66, 2)
    with pytest.raises(ParameterError, match="interval"):
        pld_weeks.composed_epsilon_bounds(1e-6, 70, 0.66, 52, interval=1e-7)


def test_composed_bracket_upper_end_against_dp_accounting():
    # Independent check of the year-long bound: Google's dp_accounting (pessimistic connect-the-dots PLD, 52
    # compositions of the 70-fold Laplace) already gives delta <= 1e-6 at our upper end, which is therefore a
    # valid (eps, 1e-6) guarantee; its own eps(1e-6) is a little looser.
    dpl = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
    lo, hi = pld_weeks.composed_epsilon_bounds(1e-6, 70, 0.66, 52, interval=1e-3)
    p = dpl.from_laplace_mechanism(parameter=1 / 0.66, sensitivity=1, value_discretization_interval=1e-3)
    year = p.self_compose(70).self_compose(52)
    assert year.get_delta_for_epsilon(hi) <= 1e-6 * (1 + 1e-3)
    assert year.get_epsilon_for_delta(1e-6) >= lo


def test_composed_curve_equals_the_bounds_one_week_count_at_a_time():
    weeks = [1, 3, 7]
    lo, hi = pld_weeks.composed_epsilon_curve(1e-5, 9, 0.8, weeks, interval=2e-3)
    for i, w in enumerate(weeks):
        assert (lo[i], hi[i]) == pytest.approx(pld_weeks.composed_epsilon_bounds(1e-5, 9, 0.8, w, interval=2e-3), abs=1e-9)
    with pytest.raises(ParameterError, match="weeks"):
        pld_weeks.composed_epsilon_curve(1e-5, 9, 0.8, [1, 2.5])


def test_composed_window_equals_the_whole_support_composition():
    # The composed law is computed on a window around its bulk (Chernoff bound, tail mass 1e-9·δ per side). The
    # reference composes the same rounded weekly law on its whole support (no window): same ε to 1e-6.
    from scipy import fft

    delta, k, eps, h, weeks = 1e-6, 30, 0.66, 1e-2, np.array([1, 2, 5, 13, 26])
    lo, hi = pld_weeks.composed_epsilon_curve(delta, k, eps, weeks, interval=h)
    masses = pld_weeks._loss_bin_masses(pld.laws_by_k(np.array([k]), eps)[k], h)
    lower_pmf = np.append(masses[1:], 0.0)
    lower_pmf[0] += masses[0]
    for pmf, got in ((masses, hi), (lower_pmf, lo)):
        size = fft.next_fast_len(int(weeks.max()) * (pmf.size - 1) + 1, real=True)
        spec = fft.rfft(pmf, size)
        for w, g in zip(weeks, got, strict=True):
            full = np.maximum(fft.irfft(spec ** int(w), size)[: int(w) * (pmf.size - 1) + 1], 0.0)
            assert g == pytest.approx(pld_weeks._epsilon_from_pmf(full, -int(w) * k * eps, h, delta), abs=1e-6)
    # the window is much smaller than the support at many weeks, and it holds all but a tiny tail
    wlo, whi = pld_weeks._chernoff_window(masses, -k * eps, h, np.array([26]), 1e-15)
    assert (whi[0] - wlo[0]) < 0.5 * 26 * 2 * k * eps


@pytest.mark.parametrize("n", [0, 1, 5, 69, 300, 600])
def test_bernstein_eval_equals_the_basis_matrix(n):
    # Horner in s/(1 − s) (or its mirror) against the explicit basis (exponentials of log binomials), endpoints too
    rng = np.random.default_rng(n)
    coef = rng.exponential(size=(7, n + 1))
    s = np.concatenate([rng.uniform(size=(7, 9)), np.tile([0.0, 0.5, 1.0], (7, 1))], axis=1)
    want = np.einsum("pnr,pr->pn", pld._bernstein_matrix(n, s), coef)
    np.testing.assert_allclose(pld.bernstein_eval(coef, s), want, rtol=1e-11, atol=0)


def _horner_both_sides(cc, cc_rev, n, s):
    # the plain form: both of Horner's branches on every point, each point keeping its side's value
    low = s <= 0.5
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        t = np.nan_to_num(np.where(low, s / (1.0 - s), (1.0 - s) / s), nan=0.0, posinf=0.0)
    acc_lo, acc_hi = np.zeros_like(s), np.zeros_like(s)
    for r in range(cc.shape[1] - 1, -1, -1):
        acc_lo = acc_lo * t + cc[:, r, None]
        acc_hi = acc_hi * t + cc_rev[:, r, None]
    nn = np.asarray(n)[:, None] if np.ndim(n) else n
    return np.where(low, acc_lo * (1.0 - s) ** nn, acc_hi * s**nn)


@pytest.mark.parametrize("per_row_degree", [False, True])
def test_horner_on_each_rows_side_only_gives_the_same_values(per_row_degree):
    # Rows wholly below ½, wholly above, mixed, and the end points: each branch runs on the rows with a point on
    # its side only, and every value is the same, to the bit, as running both branches everywhere
    rng = np.random.default_rng(7)
    n = 40
    coef = rng.exponential(size=(9, n + 1))
    s = np.concatenate([rng.uniform(0.0, 0.5, size=(3, 8)), rng.uniform(0.5001, 1.0, size=(3, 8)),
                        rng.uniform(size=(2, 8)), np.tile([0.0, 0.5, 1.0, 0.5, 0.5, 0.5, 0.5, 0.5], (1, 1))])
    deg = rng.integers(0, n + 1, size=9) if per_row_degree else n
    cc = coef * np.exp(pld._log_binomials(n)[1])
    if per_row_degree:
        cc = np.where(np.arange(n + 1)[None, :] <= deg[:, None], cc, 0.0)
        idx = deg[:, None] - np.arange(n + 1)
        cc_rev = np.where(idx >= 0, np.take_along_axis(cc, np.maximum(idx, 0), axis=1), 0.0)
    else:
        cc_rev = cc[:, ::-1]
    got = pld._horner_bernstein(cc, cc_rev, deg, s)
    np.testing.assert_array_equal(got, _horner_both_sides(cc, cc_rev, deg, s))
    # and one side only for every row
    for part in (s[:3], s[3:6]):
        np.testing.assert_array_equal(pld._horner_bernstein(cc[:3], cc_rev[:3], deg if np.ndim(deg) == 0 else deg[:3],
                                                            part),
                                      _horner_both_sides(cc[:3], cc_rev[:3], deg if np.ndim(deg) == 0 else deg[:3],
                                                         part))


def test_composed_curve_in_small_batches_gives_the_same_values(monkeypatch):
    # the w-fold laws go back from their spectra a batch at a time; batches of one give the same values, in order
    args = (1e-6, 20, 0.5, np.array([9, 1, 4, 30, 2, 17]))
    lo, hi = pld_weeks.composed_epsilon_curve(*args, interval=5e-3)
    monkeypatch.setattr(pld_weeks, "IFFT_BATCH_BYTES", 1)
    lo1, hi1 = pld_weeks.composed_epsilon_curve(*args, interval=5e-3)
    np.testing.assert_array_equal(lo1, lo)
    np.testing.assert_array_equal(hi1, hi)
    assert np.all(np.diff(hi[np.argsort(args[3])]) > 0)


@pytest.mark.parametrize("delta", [1e-9, 1e-6, 1e-3, 5e-3, 0.2])
def test_epsilon_from_pmf_against_the_direct_sum(delta):
    # the crossing search over the top of the grid only finds the smallest ε' with Σ p_j (1 − e^{ε' − L_j})₊ <= δ
    rng = np.random.default_rng(3)
    p = rng.exponential(size=3000) * np.exp(-np.linspace(0, 30, 3000) ** 1.3)
    p /= p.sum()
    l0, h = -5.0, 0.02
    got = pld_weeks._epsilon_from_pmf(p, l0, h, delta)
    grid = l0 + h * np.arange(p.size)

    def d(e: float) -> float:
        return float(np.sum(p * np.maximum(-np.expm1(e - grid), 0.0)))

    if got == 0.0:
        assert d(0.0) <= delta
    else:
        assert d(got) == pytest.approx(delta, rel=1e-9)
        assert d(got - 1e-6) > delta


@pytest.mark.parametrize("n", [101, 150, 400, 1040])
def test_many_node_gauss_legendre_is_exact_on_polynomials_and_agrees_with_scipy(n):
    # above 100 nodes (k_max > 120) the nodes come from Newton's iteration on the angle; an n-node rule integrates
    # every polynomial of degree <= 2n - 1 exactly: ∫0^1 t^k dt = 1/(k+1), and by symmetry ∫0^1 (1-t)^k dt too
    special = pytest.importorskip("scipy.special")
    x, w = pld.gauss_legendre(n)
    assert np.all(np.diff(x) > 0)
    assert 0 < x[0] < x[-1] < 1
    assert np.all(w > 0)
    for k in (0, 1, 7, n, 2 * n - 1):
        assert (w * x**k).sum() * (k + 1) == pytest.approx(1.0, abs=1e-11)
        assert (w * (1 - x) ** k).sum() * (k + 1) == pytest.approx(1.0, abs=1e-11)
    xs, ws = special.roots_legendre(n)
    np.testing.assert_allclose(x, 0.5 * (xs + 1), rtol=0, atol=1e-15)
    np.testing.assert_allclose(w, 0.5 * ws, rtol=1e-7)
