"""DP defences (Pyrgelis et al. 2018, §VII-A): the noise has the stated scale (tests that can fail), FPA/EFPAG
reconstruct smooth series at large ε, MRE/PG definitions."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from scipy.fft import dct

from odcore.errors import ParameterError
from odcore.knock.defences import (
    Clip,
    DefenceConfig,
    Mechanism,
    efpag,
    efpag_kappa_probabilities,
    fpa,
    gaussian_sigma,
    perturb,
)
from odcore.knock.metrics import mre, privacy_gain

ALPHA = 1e-4  # KS tests: fixed seeds, tiny alpha


def ks_p(sample, dist, scale):
    return stats.kstest(sample, dist(loc=0, scale=scale).cdf).pvalue


def assert_scale(sample, dist, scale):
    """Accept the stated scale and reject x0.7 and x1.3 (a test that cannot fail proves nothing)."""
    assert ks_p(sample, dist, scale) > ALPHA
    assert ks_p(sample, dist, 0.7 * scale) < ALPHA
    assert ks_p(sample, dist, 1.3 * scale) < ALPHA


ZERO = np.zeros((40, 5, 168))  # no clipping influence below: clip none


@pytest.mark.parametrize(("mech", "expected"), [("lpa", 300 / 0.5), ("lpa-event", 1 / 0.5)])
def test_laplace_scales(mech, expected):
    cfg = DefenceConfig(mech, 0.5, sensitivity=300, clip="none")
    assert cfg.scales()["laplace_scale"] == pytest.approx(expected)
    noise = perturb(ZERO + 7.0, cfg, rng=1) - 7.0
    assert_scale(noise.ravel()[:20000], stats.laplace, expected)


def test_gaussian_scale():
    cfg = DefenceConfig("gsm", 2.0, sensitivity=400, delta=0.1, clip="none")
    sigma = math.sqrt(2 * math.log(2 / 0.1)) * math.sqrt(400) / 2.0  # §VII-A, Δ₂ = sqrt(Δ)
    assert cfg.scales()["sigma"] == pytest.approx(sigma)
    noise = perturb(ZERO, cfg, rng=2)
    assert_scale(noise.ravel()[:20000], stats.norm, sigma)


def test_fpa_coefficient_noise_is_laplace_with_stated_scale():
    kappa, scale = 20, 3.0
    out = fpa(np.zeros((2000, 168)), kappa, scale, rng=3)
    coef = np.fft.rfft(out, axis=-1, norm="ortho")
    assert np.allclose(coef[:, kappa:], 0, atol=1e-9)  # only the first κ coefficients are released
    sample = np.concatenate([coef[:, :kappa].real.ravel(), coef[:, 1:kappa].imag.ravel()])[:30000]
    assert_scale(sample, stats.laplace, scale)
    cfg = DefenceConfig("fpa", 0.5, sensitivity=100, kappa=kappa)
    assert cfg.scales()["laplace_scale"] == pytest.approx(math.sqrt(kappa) * 10 / 0.5)


def test_efpag_gaussian_noise_on_kept_coefficients():
    eps, delta, l2 = 4.0, 0.1, 1.0
    out, kappa = efpag(np.zeros((3000, 64)), eps, delta, l2, rng=4, return_kappa=True)
    c = dct(out, type=2, axis=-1, norm="ortho")
    kept = np.arange(64)[None, :] < kappa[:, None]
    assert np.allclose(c[~kept], 0, atol=1e-9)
    sigma = gaussian_sigma(eps / 2, delta, l2)
    assert_scale(c[kept][:20000], stats.norm, sigma)


def test_efpag_selection_follows_exponential_mechanism():
    # a series whose DCT spectrum decays geometrically, so every κ trades tail error against noise error;
    # the mechanism's exact P(κ) vs Monte Carlo, chi-square at tiny alpha
    from scipy.fft import idct

    series = idct(8 * 0.85 ** np.arange(32), type=2, norm="ortho")
    eps, delta, l2 = 3.0, 0.1, 1.0
    p = efpag_kappa_probabilities(series, eps, delta, l2)
    _, k = efpag(np.tile(series, (20000, 1)), eps, delta, l2, rng=5, return_kappa=True)
    counts = np.bincount(k - 1, minlength=32)
    keep = p * 20000 >= 5

    def chi2_p(probs):
        exp = np.maximum(np.r_[probs[keep], probs[~keep].sum()], 1e-12)
        obs = np.r_[counts[keep], counts[~keep].sum()]
        return stats.chisquare(obs, exp / exp.sum() * obs.sum()).pvalue

    assert chi2_p(p) > ALPHA
    # the same test rejects a selection that ignores the data (all-zero series) or mis-scales the score
    # (a spectrum 30% larger)
    assert chi2_p(efpag_kappa_probabilities(np.zeros(32), eps, delta, l2)) < ALPHA
    assert chi2_p(efpag_kappa_probabilities(1.3 * series, eps, delta, l2)) < ALPHA


@pytest.mark.parametrize("mech", ["fpa", "efpag"])
def test_fourier_mechanisms_reconstruct_smooth_series_at_large_epsilon(mech):
    t = np.arange(168)
    smooth = 1000 + 400 * np.sin(2 * np.pi * t / 168) + 200 * np.cos(2 * np.pi * 3 * t / 168)
    x = np.tile(smooth, (3, 2, 1))
    cfg = DefenceConfig(mech, 1e4, sensitivity=4.0, kappa=10, clip="none")
    err = mre(x, perturb(x, cfg, rng=6))
    assert np.nanmax(err) < 0.01
    # at small epsilon the same series is badly distorted
    cfg_small = DefenceConfig(mech, 0.01, sensitivity=400.0, kappa=10, clip="none")
    assert np.nanmean(mre(x, perturb(x, cfg_small, rng=6))) > 0.3


def test_clipping_and_rounding_postprocessing():
    cfg = DefenceConfig("lpa", 0.01, sensitivity=100, clip=Clip.GROUP, round_counts=True)
    out = perturb(np.full((10, 3, 50), 5.0), cfg, rng=7, group_size=20)
    assert out.min() >= 0
    assert out.max() <= 20
    assert np.array_equal(out, np.rint(out))
    cfg2 = DefenceConfig("gsm", 0.01, sensitivity=100, clip="nonneg")
    assert perturb(np.zeros((5, 40)), cfg2, rng=8).min() >= 0


def test_same_seed_same_noise_and_fresh_noise_otherwise():
    x = np.ones((4, 3, 24))
    for mech in Mechanism:
        cfg = DefenceConfig(mech, 1.0, sensitivity=10)
        np.testing.assert_array_equal(perturb(x, cfg, rng=9, group_size=5), perturb(x, cfg, rng=9, group_size=5))
        assert not np.array_equal(perturb(x, cfg, rng=9, group_size=5), perturb(x, cfg, rng=10, group_size=5))


def test_backward_norm_divides_noise():
    cfg = DefenceConfig("fpa", 1.0, sensitivity=100, kappa=84, clip="none", norm="backward")
    ortho = DefenceConfig("fpa", 1.0, sensitivity=100, kappa=84, clip="none")
    z = np.zeros((200, 168))
    ratio = np.std(perturb(z, ortho, rng=11)) / np.std(perturb(z, cfg, rng=11))
    assert ratio == pytest.approx(math.sqrt(168), rel=1e-9)


def test_metrics_golden_values():
    # MRE, Eq. 7: γ = 0.1% of the series' sum
    y = np.array([[1000.0, 0.0, 1000.0]])
    z = np.array([[1010.0, 1.0, 990.0]])
    assert mre(y, z)[0] == pytest.approx((0.01 + 1 / 2 + 0.01) / 3)
    assert np.isnan(mre(np.zeros((1, 3)), np.ones((1, 3)))[0])  # undefined for an all-zero series
    # PG, Eq. 6
    assert privacy_gain(1.0, 0.5) == 1.0
    assert privacy_gain(0.9, 0.95) == 0.0
    assert privacy_gain(1.0, 0.4) == 1.0  # below the random guess: full protection (default reading)
    assert privacy_gain(1.0, 0.4, literal=True) == 0.0  # printed definition: requires AUC_A' >= 0.5
    assert privacy_gain(0.5, 0.5) == 0.0


def test_config_errors():
    with pytest.raises(ParameterError, match="epsilon"):
        DefenceConfig("lpa", 0, sensitivity=1)
    with pytest.raises(ParameterError, match="mechanism"):
        DefenceConfig("laplace", 1, sensitivity=1)
    with pytest.raises(ParameterError, match="delta"):
        DefenceConfig("gsm", 1, sensitivity=1, delta=1.5)
    with pytest.raises(ParameterError, match="kappa"):
        DefenceConfig("fpa", 1, sensitivity=1, kappa=0)


def test_shared_work_across_epsilons_gives_the_same_noise_and_mre():
    """mre_table computes the EFPA-G basis and the MRE denominators once for all ε (perturb's memo, mre's
    denominator): same numbers as perturbing and measuring each ε from scratch with the same generator."""
    from odcore.knock.metrics import mre_denominator

    rng = np.random.default_rng(5)
    agg = rng.poisson(3.0, (6, 4, 168)).astype(float)
    agg[0, 0] = 0.0                                   # an all-zero series: MRE undefined (NaN) both ways
    den = mre_denominator(agg)
    memo: dict = {}
    fresh, shared = np.random.default_rng(11), np.random.default_rng(11)
    for mech in Mechanism:
        for eps in (0.1, 1.0, 10.0):
            cfg = DefenceConfig(mech, eps, 4.0, clip=Clip.GROUP)
            a = mre(agg, perturb(agg, cfg, fresh, group_size=6))
            b = mre(agg, perturb(agg, cfg, shared, group_size=6, memo=memo), denominator=den)
            np.testing.assert_array_equal(a, b)
            assert np.isnan(b[0, 0])
            assert not np.isnan(b[1:]).any()
    assert "efpag_basis" in memo
