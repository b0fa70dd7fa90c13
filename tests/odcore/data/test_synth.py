"""Synthetic city: reproducible, validated, and with the trip statistics the papers discuss."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from odcore.data.synth import SynthConfig, generate_city
from odcore.errors import ParameterError
from odcore.od.trips import ODConfig, build_od
from odcore.paths import SAMPLE_DATA_DIR

SMALL = SynthConfig(users=1500, weeks=1)


@pytest.fixture(scope="module")
def small_city():
    return generate_city(SMALL, 7)


def test_schema_and_sorting(small_city):
    df = small_city
    assert list(df.columns) == ["user", "time", "lat", "lon"]
    assert str(df["time"].dtype) == "datetime64[ns, UTC]"
    assert df["user"].nunique() == SMALL.users
    key = df["user"].to_numpy() * 10**12 + df["time"].astype("int64").to_numpy() // 10**9
    assert (np.diff(key) >= 0).all()
    # one location per user-hour
    hours = df["time"].dt.floor("h")
    assert not pd.DataFrame({"u": df["user"], "h": hours}).duplicated().any()
    # inside the simulated week and near the centre
    assert df["time"].min() >= pd.Timestamp(SMALL.start, tz="UTC")
    assert df["time"].max() < pd.Timestamp(SMALL.start, tz="UTC") + pd.Timedelta(days=7)
    dist_km = np.hypot((df["lat"] - SMALL.center[0]) * 111.32,
                       (df["lon"] - SMALL.center[1]) * 111.32 * np.cos(np.radians(SMALL.center[0])))
    assert dist_km.max() < 1.25 * SMALL.extent_km


def test_same_seed_same_output_different_seed_differs(small_city):
    again = generate_city(SMALL, 7)
    pd.testing.assert_frame_equal(small_city, again)
    other = generate_city(SMALL, 8)
    assert not other.equals(small_city)
    gen = generate_city(SynthConfig(users=50), np.random.default_rng(3))
    assert gen.equals(generate_city(SynthConfig(users=50), 3))


def test_trip_statistics_small_city(small_city):
    od = build_od(small_city, ODConfig())
    ut = od.user_week["unique_trips"].to_numpy()
    # median in the tens, long tail (Houssiau et al. 2022 discuss k up to 70)
    assert 10 <= np.median(ut) <= 40
    assert np.percentile(ut, 99) >= 35
    trips = od.user_week["trips"].to_numpy()
    assert (trips >= ut).all()
    assert trips.sum() > 1.2 * ut.sum()        # commuting repeats pairs


def test_local_schedule_time_zone():
    df = generate_city(SynthConfig(users=300, tz="America/New_York"), 1)
    local_hour = df["time"].dt.tz_convert("America/New_York").dt.hour
    # nights at home: few records start between 3 and 4 local (only stay boundaries)
    by_hour = local_hour.value_counts()
    assert by_hour.get(3, 0) < by_hour.get(8, 0)


@pytest.mark.parametrize(("kw", "match"), [
    ({"users": 1}, "users"),
    ({"weeks": 0}, "weeks"),
    ({"center": (95, 0)}, "center"),
    ({"extent_km": -1}, "extent_km"),
    ({"start": "2024-01-09"}, "Monday"),
    ({"tz": "Mars/Base"}, "tz"),
    ({"commuter_share": 1.5}, "commuter_share"),
    ({"outing_rate": 0}, "outing_rate"),
    ({"rho": 0}, "rho"),
    ({"venues": 3}, "venues"),
])
def test_config_validation(kw, match):
    with pytest.raises(ParameterError, match=match):
        SynthConfig(**kw)


def test_bundled_sample_meets_the_targets():
    """The shipped sample: hundreds of pairs >= 100 users at 1.3 km², median unique trips in the tens."""
    from odcore.data.traces import load_traces

    p = SAMPLE_DATA_DIR / "synthetic_city.parquet"
    if not p.exists():
        pytest.skip("sample_data/synthetic_city.parquet not generated")
    tr = load_traces(p)
    od = build_od(tr.df, ODConfig(cell_km2=1.3))
    s = od.summary(threshold=100)
    assert s["od_pairs_over_threshold"] >= 200
    q = s["unique_trips_per_user_week"]
    assert 10 <= q["p50"] <= 40
    assert q["max"] >= 55


@pytest.mark.slow
def test_200k_users():
    df = generate_city(SynthConfig(users=200_000), 1)
    assert df["user"].nunique() == 200_000


# --- the random ingredients follow their laws (KS at tiny alpha; the same test rejects a wrong parameter) ------

def _lomax_cdf(r, r0, beta, cap):
    """CDF of P(r) ~ (r + r0)^-(1+beta) on [0, cap] (Song et al. 2010 jump lengths)."""
    f = 1 - (1 + np.minimum(r, cap) / r0) ** (-beta)
    return f / (1 - (1 + cap / r0) ** (-beta))


def test_jump_lengths_follow_truncated_power_law():
    from scipy import stats

    from odcore.data.synth import _truncated_power_law

    cfg = SynthConfig(users=10)
    r = _truncated_power_law(20_000, cfg, np.random.default_rng(0))
    cap = 1.5 * cfg.extent_km
    assert r.min() >= 0
    assert r.max() <= cap
    assert stats.kstest(r, lambda x: _lomax_cdf(x, cfg.r0_km, cfg.beta, cap)).pvalue > 1e-4
    for wrong in (0.7, 1.3):
        p = stats.kstest(r, lambda x, w=wrong: _lomax_cdf(x, cfg.r0_km, cfg.beta * w, cap)).pvalue
        assert p < 1e-6


def test_radial_density_is_clark_exponential():
    """Points with density ~ exp(-r/s) in the plane: radius ~ Gamma(2, s)."""
    from scipy import stats

    from odcore.data.synth import _radial

    s = 3.0
    pts = _radial(20_000, s, np.random.default_rng(1))
    r = np.hypot(pts[:, 0], pts[:, 1])
    assert stats.kstest(r, stats.gamma(2, scale=s).cdf).pvalue > 1e-4
    for wrong in (0.7, 1.3):
        assert stats.kstest(r, stats.gamma(2, scale=s * wrong).cdf).pvalue < 1e-6
    # isotropic: angles uniform
    ang = np.arctan2(pts[:, 1], pts[:, 0])
    assert stats.kstest(ang, stats.uniform(-np.pi, 2 * np.pi).cdf).pvalue > 1e-4
