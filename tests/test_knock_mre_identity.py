"""The defences' MRE table and the perturbed aggregates are bitwise those of a plain formulation.

``mre_table`` and ``perturb`` draw their noise in a faster way (EFPA-G's Gumbel-max selection from uniforms, shared
transforms across ε); the reference below is the plain formulation, kept verbatim: every ``rng`` call in the same
order, ``rng.gumbel`` itself, one transform per call. Results must be equal, not close: the MRE table the Knock
Knock page shows must not move by one bit.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy.fft import dct, idct

from odcore.knock import MREConfig, build_timeseries, mre_table
from odcore.knock.defences import (
    ALL_MECHANISMS,
    Clip,
    DefenceConfig,
    Mechanism,
    TransformNorm,
    gaussian_sigma,
    perturb,
)
from odcore.knock.game import sample_unique_groups
from odcore.knock.timeseries import TimeSeriesConfig

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data" / "synthetic_city.parquet"


# ---- the plain formulation (reference) -------------------------------------------------------------------------


def ref_clip(x, clip, group_size):
    if clip == Clip.NONE:
        return x
    if clip == Clip.NONNEG or group_size is None:
        return np.maximum(x, 0.0, out=x)
    return np.clip(x, 0.0, float(group_size), out=x)


def ref_fpa(x, kappa, scale, rng, *, noise_divisor=1.0):
    x = np.asarray(x, dtype=np.float64)
    n = x.shape[-1]
    f = np.fft.rfft(x, axis=-1, norm="ortho")
    k = min(int(kappa), f.shape[-1])
    kept = f[..., :k]
    noise = rng.laplace(0.0, scale, (*kept.shape, 2)) / noise_divisor
    g = np.zeros_like(f)
    g[..., :k] = kept + noise[..., 0] + 1j * noise[..., 1]
    return np.fft.irfft(g, n=n, axis=-1, norm="ortho")


def ref_efpag(x, epsilon, delta, l2_sensitivity, rng, *, noise_divisor=1.0):
    x = np.asarray(x, dtype=np.float64)
    n = x.shape[-1]
    eps1 = eps2 = epsilon / 2
    sigma = gaussian_sigma(eps2, delta, l2_sensitivity) / noise_divisor
    c = dct(x, type=2, axis=-1, norm="ortho")
    sq = c * c
    rev = np.cumsum(sq[..., ::-1], axis=-1)[..., ::-1]
    tail = np.sqrt(np.concatenate([rev[..., 1:], np.zeros((*sq.shape[:-1], 1))], axis=-1))
    ks = np.arange(1, n + 1)
    err = tail + np.sqrt(ks) * sigma
    logits = -eps1 * err / (2.0 * l2_sensitivity)
    gumbel = rng.gumbel(size=logits.shape)
    kappa = np.argmax(logits + gumbel, axis=-1) + 1
    keep = np.arange(n) < kappa[..., None]
    noisy = np.where(keep, c + rng.normal(0.0, sigma, c.shape), 0.0)
    return idct(noisy, type=2, axis=-1, norm="ortho")


def ref_perturb(agg, config, rng, *, group_size=None):
    x = np.asarray(agg, dtype=np.float64)
    s = config.scales()
    mech = config.mechanism
    n = x.shape[-1]
    if mech in (Mechanism.LPA, Mechanism.LPA_EVENT):
        out = rng.laplace(0.0, s["laplace_scale"], x.shape)
        out += x
    elif mech == Mechanism.GSM:
        out = rng.normal(0.0, s["sigma"], x.shape)
        out += x
    elif mech == Mechanism.FPA:
        div = math.sqrt(n) if config.norm == TransformNorm.BACKWARD else 1.0
        out = ref_fpa(x, config.kappa, s["laplace_scale"], rng, noise_divisor=div)
    else:
        div = math.sqrt(2 * n) if config.norm == TransformNorm.BACKWARD else 1.0
        out = ref_efpag(x, config.epsilon, config.delta, config.delta2, rng, noise_divisor=div)
    out = ref_clip(out, config.clip, group_size)
    return np.rint(out, out=out) if config.round_counts else out


def ref_mre(true, noisy, gamma_fraction=0.001, scope="series"):
    y = np.asarray(true, dtype=float)
    z = np.asarray(noisy, dtype=float)
    if scope == "series":
        gamma = gamma_fraction * y.sum(axis=-1, keepdims=True)
    else:
        gamma = np.broadcast_to(gamma_fraction * y.sum(axis=(-2, -1), keepdims=True), (*y.shape[:-1], 1))
    den, undefined = np.maximum(gamma, y), np.squeeze(gamma, -1) <= 0
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.abs(z - y) / den
    out = r.mean(axis=-1)
    out[undefined] = np.nan
    return out


def ref_mre_table(ts, config):
    rng = np.random.default_rng(config.seed)
    p = config.inference_period
    t0, t1 = p * config.period_slots, (p + 1) * config.period_slots
    m = config.m if config.m is not None else min(500, ts.n_users - 1)
    groups = sample_unique_groups(rng, np.arange(ts.n_users), m, config.n_groups, allow_repeats=True)
    agg = ts.aggregate(groups, t0, t1)
    delta_l1 = ts.sensitivity(t0, t1)
    table, medians, undefined = {}, {}, 0
    for mech in config.mechanisms:
        row, med = {}, {}
        for eps in config.epsilons:
            cfg = DefenceConfig(mech, eps, delta_l1, delta=config.delta, kappa=config.kappa, clip=config.clip,
                                norm=config.norm, round_counts=config.round_counts)
            r = ref_mre(agg, ref_perturb(agg, cfg, rng, group_size=m), scope=config.gamma_scope)
            undefined = int(np.isnan(r).sum())
            row[f"{eps:g}"] = float(np.nanmean(r))
            med[f"{eps:g}"] = float(np.nanmedian(r))
        table[mech.value] = row
        medians[mech.value] = med
    return {"mre": table, "mre_median": medians, "sensitivity": delta_l1, "l2_sensitivity": float(np.sqrt(delta_l1)),
            "m": m, "n_groups": config.n_groups, "inference_slots": [t0, t1], "series_without_mre": undefined,
            "clip": config.clip.value, "norm": config.norm.value, "round_counts": config.round_counts,
            "gamma_scope": config.gamma_scope, "kappa": config.kappa, "delta": config.delta}


# ---- the comparisons ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def city_series():
    """The bundled city as the Knock Knock page builds it (UTC, the default ROI grid)."""
    if not SAMPLE.is_file():
        pytest.skip("the bundled sample is missing (make sample-data)")
    from odcore.data.traces import load_traces

    t = load_traces(SAMPLE, tz="auto")
    return build_timeseries(t.df, TimeSeriesConfig(tz="UTC"))


def assert_same_table(a, b):
    """Equal dicts, floats compared bit for bit (``==``; NaN only where the reference has NaN)."""
    assert a.keys() == b.keys()
    for key in a:
        if key in ("mre", "mre_median"):
            assert a[key].keys() == b[key].keys()
            for mech in a[key]:
                np.testing.assert_array_equal(np.array(list(a[key][mech].values())),
                                              np.array(list(b[key][mech].values())), err_msg=f"{key} {mech}")
                assert list(a[key][mech]) == list(b[key][mech])
        else:
            assert a[key] == b[key], key


@pytest.mark.parametrize(("seed", "m"), [(1, 100), (2, 100), (3, 100), (7, 500)])
def test_page_mre_table_equals_the_reference_on_the_bundled_city(city_series, seed, m):
    """What the Knock Knock page computes per Seed (MREConfig(m, n_groups=20, seed)), bit for bit."""
    cfg = MREConfig(m=m, n_groups=20, seed=seed)
    assert_same_table(mre_table(city_series, cfg), ref_mre_table(city_series, cfg))


@pytest.mark.parametrize("options", [
    {"clip": "none", "norm": "backward"},
    {"clip": "nonneg", "round_counts": True, "gamma_scope": "matrix", "kappa": 7},
    {"epsilons": (0.05, 3.0), "mechanisms": ("efpag", "lpa", "fpa", "efpag"), "delta": 0.01},
])
def test_other_mre_settings_equal_the_reference(city_series, options):
    cfg = MREConfig(m=50, n_groups=8, seed=11, **options)
    assert_same_table(mre_table(city_series, cfg), ref_mre_table(city_series, cfg))


@pytest.mark.parametrize("mech", ALL_MECHANISMS)
@pytest.mark.parametrize("clip", [Clip.GROUP, Clip.NONE])
def test_perturb_draws_the_same_noise(mech, clip):
    """perturb (also used by the experiment) returns the reference's arrays and leaves ``rng`` where it would."""
    agg = np.random.default_rng(3).poisson(2.0, (12, 9, 168)).astype(np.float32)
    for eps in (0.01, 1.0, 30.0):
        cfg = DefenceConfig(mech, eps, 40.0, clip=clip)
        a_rng, b_rng = np.random.default_rng(4), np.random.default_rng(4)
        memo: dict = {}
        for _ in range(2):   # twice: the memo's second use
            np.testing.assert_array_equal(perturb(agg, cfg, a_rng, group_size=12, memo=memo),
                                          ref_perturb(agg, cfg, b_rng, group_size=12))
        assert a_rng.bit_generator.state == b_rng.bit_generator.state
