"""The defences' MRE table (the Knock Knock page's Tables II/III) against a reference written from the papers.

Pyrgelis et al. 2018, §VII: the released aggregate of a group is perturbed by LPA (Laplace of scale Δ/ε per cell),
LPA-event (scale 1/ε), GSM (Gaussian, σ = sqrt(2·ln(2/δ))·Δ₂/ε), FPA (Rastogi & Nath 2010: the first κ
coefficients of the orthonormal DFT get Laplace noise of scale sqrt(κ)·Δ₂/ε on their real and imaginary parts, the
others are dropped) or EFPA-G (Ács & Castelluccia 2014: half of ε picks κ by the exponential mechanism with score
−(root-sum-square of the dropped orthonormal-DCT coefficients + sqrt(κ)·σ) and sensitivity Δ₂, the other half
calibrates σ of the Gaussian noise on the kept coefficients), and MRE = mean over the slots of
|released − true| / max(γ, true), γ = 0.1 % of the series' sum.

The reference builds the transforms as explicit matrices from their definitions, draws its own noise (numpy's
``choice`` for κ, not the code's Gumbel-max) and runs its own Monte Carlo; it shares no code and no random stream
with :mod:`odcore.knock`. The data is a city whose users all move alike, so every group's aggregate is known
without the code: m times one user's series. The table must agree with the reference's expectation within five
standard errors, and be more than three away from a reference whose noise is 30 % too large or too small.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from odcore.knock import MREConfig, mre_table
from odcore.knock.defences import Clip
from odcore.knock.metrics import mre
from odcore.knock.timeseries import LocationTimeSeries

T = 168          # one week of hourly slots
N_ROIS = 4       # three places and the null ROI (no report)
N_USERS = 30
M = 20           # group size
GROUPS = 40
DELTA = 0.1      # δ of GSM and EFPA-G (the paper's)
KAPPA = 20       # FPA's κ (the paper's SFC setting)
REF_DRAWS = 3000


def one_user_roi() -> np.ndarray:
    """The ROI of the (one) user at each hour of the week: home at night, work on weekdays, out on some evenings,
    no report (null ROI) on weekend afternoons."""
    hour, day = np.arange(T) % 24, np.arange(T) // 24
    roi = np.zeros(T, dtype=np.int64)
    roi[(day < 5) & (hour >= 9) & (hour < 17)] = 1
    roi[(hour >= 19) & (hour < 22) & (day % 2 == 0)] = 2
    roi[(day >= 5) & (hour >= 12) & (hour < 18)] = 3
    return roi


def alike_city() -> LocationTimeSeries:
    roi = one_user_roi()
    row = np.zeros(N_ROIS * T, dtype=np.float32)
    row[roi * T + np.arange(T)] = 1.0          # column s·T + t, as the time series lays out ROI s at slot t
    matrix = sp.csr_matrix(np.tile(row, (N_USERS, 1)))
    return LocationTimeSeries(matrix=matrix, users=np.arange(N_USERS), n_rois=N_ROIS, n_slots=T, slot_minutes=60,
                              start=pd.Timestamp("2024-01-01"))


def true_series() -> np.ndarray:
    """Each ROI's aggregate of any group of M users: (N_ROIS, T)."""
    roi = one_user_roi()
    return M * (roi[None, :] == np.arange(N_ROIS)[:, None]).astype(float)


# ---- the reference, from the papers --------------------------------------------------------------------------


def dft_matrix(n: int) -> np.ndarray:
    """Unitary DFT: F[k, t] = exp(−2πi·k·t/n) / sqrt(n)."""
    k, t = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    return np.exp(-2j * np.pi * k * t / n) / math.sqrt(n)


def dct_matrix(n: int) -> np.ndarray:
    """Orthonormal DCT-II: C[k, t] = s_k·cos(π·(2t+1)·k / (2n)), s_0 = sqrt(1/n), s_k = sqrt(2/n)."""
    k, t = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    s = np.where(k == 0, math.sqrt(1 / n), math.sqrt(2 / n))
    return s * np.cos(np.pi * (2 * t + 1) * k / (2 * n))


F, C = dft_matrix(T), dct_matrix(T)


def paper_sigma(epsilon: float, delta: float, l2: float) -> float:
    # Pyrgelis et al. 2018, §VII-A (GSM)
    return math.sqrt(2 * math.log(2 / delta)) * l2 / epsilon


def ref_released(y: np.ndarray, mech: str, eps: float, sens: float, rng, n: int, noise_factor: float = 1.0):
    """``n`` independent releases of the series ``y`` (length T): (n, T)."""
    l2 = math.sqrt(sens)
    if mech in ("lpa", "lpa-event"):
        b = (sens if mech == "lpa" else 1.0) / eps * noise_factor
        return y + rng.laplace(0, b, (n, T))
    if mech == "gsm":
        return y + rng.normal(0, paper_sigma(eps, DELTA, l2) * noise_factor, (n, T))
    if mech == "fpa":
        # Rastogi & Nath: keep DFT coefficients 0..κ-1, each gets Lap on its real and imaginary part; the released
        # series is real, so coefficient T-k is the conjugate of coefficient k (the DC term is real).
        b = math.sqrt(KAPPA) * l2 / eps * noise_factor
        X = F @ y
        G = np.zeros((n, T), dtype=complex)
        for k in range(KAPPA):
            noisy = X[k] + rng.laplace(0, b, n) + 1j * rng.laplace(0, b, n)
            if k == 0:
                noisy = noisy.real + 0j
            G[:, k] = noisy
            if k:
                G[:, T - k] = np.conj(noisy)
        return (G @ F.conj()).real          # x = F^H g, row by row
    # EFPA-G
    eps1 = eps2 = eps / 2
    sigma = paper_sigma(eps2, DELTA, l2) * noise_factor
    c = C @ y
    dropped = np.array([math.sqrt(float((c[k:] ** 2).sum())) for k in range(1, T + 1)])   # κ = 1..T
    score = -(dropped + np.sqrt(np.arange(1, T + 1)) * sigma)
    w = np.exp(eps1 * (score - score.max()) / (2 * l2))
    kappas = rng.choice(np.arange(1, T + 1), size=n, p=w / w.sum())
    coef = np.where(np.arange(T) < kappas[:, None], c + rng.normal(0, sigma, (n, T)), 0.0)
    return coef @ C                         # x = C^T coef, row by row


def ref_mre(y: np.ndarray, z: np.ndarray) -> np.ndarray:
    """MRE of each release (rows of ``z``) of the series ``y``, with a loop over the slots."""
    gamma = 0.001 * y.sum()
    total = np.zeros(len(z))
    for t in range(T):
        total += np.abs(z[:, t] - y[t]) / max(gamma, y[t])
    return total / T


def ref_table_value(mech, eps, sens, clip, rng, noise_factor=1.0):
    """Expected table value (mean over the groups' ROI series) and its standard error for GROUPS groups."""
    means, variances = [], []
    for y in true_series():
        z = ref_released(y, mech, eps, sens, rng, REF_DRAWS, noise_factor)
        if clip == Clip.GROUP:
            z = np.clip(z, 0, M)
        r = ref_mre(y, z)
        means.append(r.mean())
        variances.append(r.var(ddof=1))
    means, variances = np.array(means), np.array(variances)
    n_series = GROUPS * N_ROIS
    # table: mean of GROUPS iid series per ROI; reference: mean of REF_DRAWS per ROI
    se = math.sqrt(variances.sum() * GROUPS / n_series**2 + variances.sum() / (N_ROIS**2 * REF_DRAWS))
    return float(means.mean()), se


# ---- the checks ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def city():
    return alike_city()


def test_the_alike_city_has_the_sensitivity_and_aggregates_the_reference_assumes(city):
    # every user reports one ROI (the null one included) in each of the T slots: Δ = T (§VII-B)
    assert city.sensitivity(0, T) == T
    groups = np.array([np.arange(M), np.arange(N_USERS - M, N_USERS)])
    np.testing.assert_array_equal(city.aggregate(groups, 0, T), np.stack([true_series()] * 2))


def test_mre_is_the_papers_definition():
    rng = np.random.default_rng(0)
    y = rng.poisson(3.0, (6, T)).astype(float)
    y[2] = 0.0                                   # an all-zero series: γ = 0, MRE undefined
    y[3, :100] = 0.0
    z = y + rng.normal(0, 2.0, y.shape)
    got = mre(y, z)
    for i in range(len(y)):
        if i == 2:
            assert np.isnan(got[i])
        else:
            assert got[i] == pytest.approx(ref_mre(y[i], z[i : i + 1])[0], rel=1e-12)


@pytest.mark.parametrize("clip", [Clip.NONE, Clip.GROUP])
def test_mre_table_agrees_with_the_reference(city, clip):
    epsilons = (20.0, 100.0)   # below ~20 the group clip and EFPA-G's choice of κ hide the noise's scale
    table = mre_table(city, MREConfig(epsilons=epsilons, m=M, n_groups=GROUPS, clip=clip, delta=DELTA,
                                      kappa=KAPPA, seed=7))
    assert table["sensitivity"] == T
    assert table["series_without_mre"] == 0
    rng = np.random.default_rng(12345)
    for mech, row in table["mre"].items():
        for eps in epsilons:
            want, se = ref_table_value(mech, eps, T, clip, rng)
            got = row[f"{eps:g}"]
            assert abs(got - want) <= 5 * se, (mech, eps, got, want, se)
            for factor in (0.7, 1.3):            # the check has power: a wrong noise scale is seen
                off, se_off = ref_table_value(mech, eps, T, clip, rng, noise_factor=factor)
                assert abs(got - off) > 3 * math.hypot(se, se_off), (mech, eps, factor, got, off)


def test_the_reference_meets_the_closed_forms():
    """E|Lap(b)| = b and E|N(0, σ)| = σ·sqrt(2/π): the reference's Monte Carlo of LPA and GSM (no clipping) against
    the expectation of the MRE in closed form."""
    rng = np.random.default_rng(3)
    eps, y = 2.0, true_series()
    gamma = 0.001 * y.sum(axis=1, keepdims=True)
    inv_den = (1 / np.maximum(gamma, y)).mean(axis=1).mean()
    for mech, mean_abs in (("lpa", T / eps), ("gsm", paper_sigma(eps, DELTA, math.sqrt(T)) * math.sqrt(2 / math.pi))):
        want = mean_abs * inv_den
        got, se = ref_table_value(mech, eps, T, Clip.NONE, rng)
        assert abs(got - want) <= 5 * se, (mech, got, want)
