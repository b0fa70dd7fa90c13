"""Tests of odcore.privacy.release: noise distribution, release rule, closed forms vs simulation, bounding, errors."""

from __future__ import annotations

import copy
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import stats

from odcore.errors import ParameterError
from odcore.od.pairs import RAW_COUNT, bound_contributions, prepare_pairs
from odcore.privacy.release import (
    RELEASE_COLUMNS,
    Mode,
    ReleaseConfig,
    release,
    release_probability,
    release_with_report,
    threshold_delta,
)

ALPHA = 1e-6  # tiny alpha: a correct implementation fails with probability 1e-6 per test at a fixed seed anyway


def singleton_pairs(n: int, weeks: int = 1) -> pd.DataFrame:
    """n distinct pairs per week, each made by exactly one user."""
    w = np.repeat(np.arange(weeks), n)
    i = np.tile(np.arange(n), weeks)
    return pd.DataFrame({"week": w, "user": [f"u{k}" for k in i], "origin": i, "destination": i + 1})


def pairs_with_count(c: int, n_pairs: int) -> pd.DataFrame:
    """n_pairs pairs in week 0, each with exactly c distinct users."""
    p = np.repeat(np.arange(n_pairs), c)
    u = np.tile(np.arange(c), n_pairs)
    return pd.DataFrame({"week": 0, "user": u, "origin": p, "destination": p})


# ------------------------------------------------------------------ noise distribution


@pytest.mark.parametrize(("mode", "max_pairs", "eps", "scale"),
                         [(Mode.PER_METRIC, None, 0.66, 1 / 0.66), (Mode.USER_LEVEL, 4, 0.5, 8.0)])
def test_noise_is_laplace_and_wrong_scales_are_rejected(mode, max_pairs, eps, scale):
    cfg = ReleaseConfig(epsilon=eps, threshold=100, mode=mode, max_pairs=max_pairs)
    assert cfg.scale == pytest.approx(scale)
    noise = release(singleton_pairs(20_000), cfg, rng=12345)["noise"].to_numpy()
    assert stats.kstest(noise, stats.laplace(scale=scale).cdf).pvalue > ALPHA
    # The same test must be able to fail: it rejects a noise scale 30% too small or too large.
    for wrong in (0.7, 1.3):
        assert stats.kstest(noise, stats.laplace(scale=wrong * scale).cdf).pvalue < ALPHA


def test_noisy_count_is_true_count_plus_noise_and_release_rule():
    t = release(pairs_with_count(3, 5000), ReleaseConfig(epsilon=0.5, threshold=4), rng=1)
    np.testing.assert_array_equal(t["noisy_count"].to_numpy(), t["true_count"].to_numpy() + t["noise"].to_numpy())
    np.testing.assert_array_equal(t["released"].to_numpy(), t["noisy_count"].to_numpy() >= 4)
    assert list(t.columns) == list(RELEASE_COLUMNS)
    assert (t["true_count"] == 3).all()


# ------------------------------------------------------------------ release probability (same >= everywhere)


@pytest.mark.parametrize(("c", "eps", "tau"), [(1, 1.0, 5), (3, 0.5, 4), (6, 0.5, 4), (100, 0.66, 100)])
def test_released_fraction_matches_exact_release_probability(c, eps, tau):
    n = 20_000
    t = release(pairs_with_count(c, n), ReleaseConfig(epsilon=eps, threshold=tau), rng=7)
    k = int(t["released"].sum())
    p = release_probability(c, eps, tau)
    assert t["release_prob"].to_numpy() == pytest.approx(p)
    assert stats.binomtest(k, n, p).pvalue > ALPHA
    # ... and the test would see an off-by-one in the count or the threshold (the OpenDP #2922 kind of bug).
    for wrong in (release_probability(c + 1, eps, tau), release_probability(c - 1, eps, tau)):
        assert stats.binomtest(k, n, wrong).pvalue < ALPHA


def test_release_probability_closed_form_and_scipy():
    # P(c + Lap(b) >= tau) = laplace.sf(tau - c) (continuous: >= and > coincide)
    c = np.arange(0, 200)
    for eps, tau, sens in [(0.66, 100, 1), (1.0, 5, 3), (0.1, 1, 1)]:
        expect = stats.laplace(scale=sens / eps).sf(tau - c)
        np.testing.assert_allclose(release_probability(c, eps, tau, sens), expect, rtol=1e-12, atol=1e-300)
    assert release_probability(100, 0.66, 100) == 0.5  # tie: count exactly at the threshold, P(L >= 0) = 1/2
    assert np.isnan(release_probability([np.nan], 1, 5)[0])
    p = release_probability(np.arange(0, 300), 0.66, 100)
    assert np.all(np.diff(p) >= 0)
    assert np.all(np.diff(p[:150]) > 0)
    assert p[-1] <= 1


def test_release_probability_of_many_integer_counts_is_computed_per_value_with_the_same_numbers():
    # a week's ~10^5 counts take a few hundred values: each value is computed once; the numbers must be those of
    # the same counts as floats, bit for bit, whatever the integer type, shape or spread
    rng = np.random.default_rng(5)
    cases = [rng.zipf(1.7, 20_000).clip(max=5_000), rng.integers(-50, 400, (90, 100)),
             rng.integers(0, 300, 9_000).astype(np.uint16), np.array([1, 2**40] * 3_000),   # spread: per element
             rng.integers(0, 200, 100)]                                                     # small: per element
    for c in cases:
        for eps, tau, sens in [(0.66, 100, 1), (1.0, 5, 3), (0.05, 1, 1)]:
            got = release_probability(c, eps, tau, sens)
            want = release_probability(c.astype(float), eps, tau, sens)
            assert got.shape == c.shape
            assert got.dtype == np.float64
            assert got.tobytes() == want.tobytes()


def _reference_noisy_table(w, o, d, raw, tc, in_domain, config, rng):
    """The release's table as the engine first built it (column by column, every pair through the masks)."""
    table = pd.DataFrame({"week": w, "origin": o, "destination": d, RAW_COUNT: raw, "true_count": tc})
    live = (tc > 0) | in_domain
    noise = np.full(len(table), np.nan)
    noise[live] = rng.laplace(0.0, config.scale, size=int(live.sum()))
    noisy = tc + noise
    released = np.zeros(len(table), dtype=bool)
    released[live] = noisy[live] >= config.threshold
    prob = np.zeros(len(table))
    prob[live] = stats.laplace(scale=config.sensitivity / config.epsilon).sf(config.threshold - tc[live])
    table["noise"], table["noisy_count"], table["released"], table["release_prob"] = noise, noisy, released, prob
    return table.loc[:, list(RELEASE_COLUMNS)]


@pytest.mark.parametrize("config", [ReleaseConfig(), ReleaseConfig(epsilon=2.0, threshold=3),
                                    ReleaseConfig(epsilon=1.0, threshold=4, mode="user_level", max_pairs=2)])
def test_release_table_equals_the_column_by_column_reference(config):
    # the table is built in one go (and, when every pair is submitted, without masks): the same noise, the same
    # decisions, the same columns and types as the first version; release_prob within 1e-12 of scipy's Laplace
    from odcore.privacy import release as rel

    rng = np.random.default_rng(11)
    n = 30_000
    pairs = pd.DataFrame({"week": rng.integers(0, 2, n), "user": rng.integers(0, 4_000, n),
                          "origin": rng.zipf(1.6, n) % 40, "destination": rng.zipf(1.6, n) % 40})
    domain = pd.DataFrame({"origin": [0, 1, 39, 38], "destination": [1, 0, 38, 39]})
    calls = []
    spy = rel._noisy_table

    def record(*a):
        calls.append((*a[:7], copy.deepcopy(a[7])))   # the generator as it was given (bounding may have drawn)
        return spy(*a)

    for dom in (None, domain):
        try:
            rel._noisy_table = record
            got = release_with_report(pairs, config, rng=3, domain=dom).table
        finally:
            rel._noisy_table = spy
        w, o, d, raw, tc, in_domain, cfg, gen = calls[-1]
        want = _reference_noisy_table(w, o, d, raw, tc, in_domain, cfg, gen)
        assert list(got.columns) == list(want.columns)
        assert list(got.dtypes) == list(want.dtypes)
        for c in RELEASE_COLUMNS:
            if c == "release_prob":
                np.testing.assert_allclose(got[c], want[c], rtol=1e-12, atol=1e-300)
            else:
                assert got[c].to_numpy().tobytes() == want[c].to_numpy().tobytes(), c
        assert (tc == 0).any() == (config.mode is Mode.USER_LEVEL or dom is not None)   # both paths are run


def test_threshold_delta_golden_bassolas():
    # Bassolas et al. reply: "epsilon = 0.66 and delta = 2.1 x 10^-29"; 1/2 exp(-0.66 * 99) = 2.0998e-29
    d = threshold_delta(0.66, 100)
    assert d == pytest.approx(0.5 * math.exp(-0.66 * 99), rel=1e-12)
    assert f"{d:.1e}" == "2.1e-29"
    assert d == release_probability(1, 0.66, 100)


@pytest.mark.parametrize(("eps", "tau", "sens", "n"), [(1.0, 5, 1, 1), (1.0, 5, 1, 4), (1.0, 5, 3, 3), (2.0, 3, 2, 2)])
def test_threshold_delta_matches_simulation_of_the_release(eps, tau, sens, n):
    """A user alone on n pairs: delta = P(any of them published) = 1 - (1 - delta_1)^n (Google partition selection)."""
    weeks = 20_000
    pairs = singleton_pairs(n, weeks=weeks)
    pairs["user"] = "victim"  # the same user makes all n pairs each week
    if sens == 1:
        cfg = ReleaseConfig(epsilon=eps, threshold=tau)
    else:
        assert sens == n  # user-level bounding with max_pairs = n keeps them all
        cfg = ReleaseConfig(epsilon=eps, threshold=tau, mode="user_level", max_pairs=n)
    t = release(pairs, cfg, rng=2024)
    any_released = t.groupby("week")["released"].any().to_numpy()
    d = threshold_delta(eps, tau, sens, n)
    assert d > 1e-3  # large enough to see
    k = int(any_released.sum())
    assert stats.binomtest(k, weeks, d).pvalue > ALPHA
    if n > 1:  # the single-pair delta would be visibly wrong
        assert stats.binomtest(k, weeks, threshold_delta(eps, tau, sens, 1)).pvalue < ALPHA
    assert d <= n * threshold_delta(eps, tau, sens, 1) + 1e-15  # never above basic composition


# ------------------------------------------------------------------ contribution bounding


def test_bounding_keeps_at_most_max_pairs_and_counts_drops():
    rng = np.random.default_rng(0)
    n = 5000
    pairs = pd.DataFrame({"week": rng.integers(0, 3, n), "user": rng.integers(0, 50, n),
                          "origin": rng.integers(0, 10, n), "destination": rng.integers(0, 10, n)})
    kept, rep = bound_contributions(pairs, 3, rng=1)
    per_uw = kept.groupby(["week", "user"]).size()
    assert per_uw.max() <= 3
    uniq = pairs.drop_duplicates()
    full = uniq.groupby(["week", "user"]).size()
    np.testing.assert_array_equal(per_uw.reindex(full.index).to_numpy(), np.minimum(full.to_numpy(), 3))
    assert rep["duplicate_rows_dropped"] == n - len(uniq)
    assert rep["contributions_in"] - rep["contributions_dropped_by_bounding"] == len(kept)
    assert rep["user_weeks_bounded"] == int((full > 3).sum())
    # kept rows are a subset of the input
    assert len(kept.merge(uniq, how="inner")) == len(kept)


@pytest.mark.parametrize("label", ["a", 7])
def test_bounding_subset_is_uniform(label):
    # one user with 5 pairs per week, keep 1: each pair kept 1/5 of the time (chi-square), over 10,000 weeks;
    # the keyed hash (odcore.od.bounding) with text and integer user ids
    weeks, k = 10_000, 5
    pairs = singleton_pairs(k, weeks=weeks)
    pairs["user"] = label
    kept, _ = bound_contributions(pairs, 1, rng=3)
    obs = kept["origin"].value_counts().reindex(range(k), fill_value=0).to_numpy()
    assert stats.chisquare(obs).pvalue > ALPHA
    # and a biased rule (always the first pair) would be rejected
    assert stats.chisquare(np.r_[weeks, np.zeros(k - 1)] + 1e-9).pvalue < ALPHA


def test_bounding_subsets_of_two_are_uniform_across_users_and_seeds():
    # 20,000 users, one week, 5 neighbouring pairs each, keep 2: each of the C(5,2) = 10 subsets 1/10 of the time;
    # the same for one user over 2,000 seeds (the key changes with the seed). A rule keeping a run of neighbours
    # (a linear hash's rotation) has 5 subsets only and is rejected.
    from itertools import combinations

    subsets = {s: i for i, s in enumerate(combinations(range(5), 2))}
    subset_of = np.full((5, 5), -1)          # (smaller origin, larger origin) -> the subset's index
    for (a, b), i in subsets.items():
        subset_of[a, b] = i

    def histogram(kept):
        w, u, o = (kept[c].to_numpy() for c in ("week", "user", "origin"))
        order = np.lexsort((o, u, w))
        wu = np.c_[w, u][order].reshape(-1, 2, 2)
        assert len(np.unique(np.c_[w, u], axis=0)) * 2 == len(kept)    # two rows kept per user-week ...
        assert (wu[:, 0] == wu[:, 1]).all()
        two = o[order].reshape(-1, 2)
        assert (two[:, 0] < two[:, 1]).all()                            # ... of two distinct origins
        return np.bincount(subset_of[two[:, 0], two[:, 1]], minlength=10)

    n = 20_000
    pairs = pd.DataFrame({"week": 0, "user": np.repeat(np.arange(n), 5), "origin": np.tile(np.arange(5), n),
                          "destination": 100})
    obs = histogram(bound_contributions(pairs, 2, rng=11)[0])
    assert stats.chisquare(obs).pvalue > ALPHA
    one = pairs[pairs["user"] == 0]
    obs_seeds = sum(histogram(bound_contributions(one, 2, rng=s)[0]) for s in range(2000))
    assert stats.chisquare(obs_seeds).pvalue > ALPHA
    runs = np.zeros(10)
    runs[[subsets[(i, i + 1)] for i in range(4)] + [subsets[(0, 4)]]] = n / 5
    assert stats.chisquare(runs + 1e-9).pvalue < ALPHA


def test_bounding_is_the_documented_hash_rule():
    """Loop reference of odcore.od.bounding's rule: per (week, user), the pairs of smallest (hash, o, d);
    md5 of the id's text, so 5 and "5" are the same person to the hash (as in SQL's CAST to text)."""
    import hashlib

    from odcore.od.bounding import HASH_PRIME, bounding_key, round_constants

    rng = np.random.default_rng(2)
    n = 600
    pairs = pd.DataFrame({"week": rng.integers(0, 3, n), "user": rng.integers(0, 15, n),
                          "origin": rng.integers(0, 2**40, n) % 7, "destination": rng.integers(0, 6, n)})
    key = bounding_key(np.random.default_rng(4))

    def h(u, w, o, d):
        v = int(hashlib.md5(str(u).encode()).hexdigest()[:8], 16)
        x0 = v
        for (a, b), x in zip(round_constants(key), (x0, w, o, d, 0), strict=True):
            t = ((v + x % HASH_PRIME) % HASH_PRIME * a + b) % HASH_PRIME
            v = t * t % HASH_PRIME
        return v

    ref = set()
    for (w, u), g in pairs.drop_duplicates().groupby(["week", "user"]):
        rows = sorted((h(u, w, o, d), o, d) for o, d in zip(g["origin"], g["destination"], strict=True))
        ref |= {(w, u, o, d) for _, o, d in rows[:3]}
    kept, _ = bound_contributions(pairs, 3, rng=4)
    assert set(kept[["week", "user", "origin", "destination"]].itertuples(index=False, name=None)) == ref
    as_text, _ = bound_contributions(pairs.astype({"user": str}), 3, rng=4)
    np.testing.assert_array_equal(as_text["origin"], kept["origin"])


def test_user_level_counts_match_loop_reference_and_emptied_pairs_are_never_published():
    rng = np.random.default_rng(5)
    n = 400
    pairs = pd.DataFrame({"week": rng.integers(0, 2, n), "user": rng.integers(0, 20, n),
                          "origin": rng.integers(0, 6, n), "destination": rng.integers(0, 6, n)})
    cfg = ReleaseConfig(epsilon=1.0, threshold=1, mode="user_level", max_pairs=2)
    res = release_with_report(pairs, cfg, rng=9)
    t = res.table
    # slow reference: distinct users per pair before bounding
    ref = {}
    for w, u, o, d in pairs.drop_duplicates().itertuples(index=False):
        ref.setdefault((w, o, d), set()).add(u)
    got = {(w, o, d): c for w, o, d, c in t[["week", "origin", "destination", RAW_COUNT]].itertuples(index=False)}
    assert got == {k: len(v) for k, v in ref.items()}
    assert (t["true_count"] <= t[RAW_COUNT]).all()
    # the bounded counts are those of bound_contributions with the same seed (same sampling rule)
    kept, _ = bound_contributions(pairs, 2, rng=9)
    ref_b = kept.groupby(["week", "origin", "destination"]).size()
    got_b = t.set_index(["week", "origin", "destination"])["true_count"]
    pd.testing.assert_series_equal(got_b[got_b > 0], ref_b, check_names=False)
    assert t["true_count"].sum() == res.report["contributions_in"] - res.report["contributions_dropped_by_bounding"]
    empty = t["true_count"] == 0
    assert empty.sum() == res.report["pairs_emptied_by_bounding"] > 0
    assert not t.loc[empty, "released"].any()
    assert t.loc[empty, "noise"].isna().all()
    assert (t.loc[empty, "release_prob"] == 0).all()
    assert res.report["delta_user_week"] == pytest.approx(threshold_delta(1.0, 1, 2, 2))


@pytest.mark.parametrize("mode", ["per_metric", "user_level"])
def test_domain_pairs_with_true_count_zero_published_only_by_noise(mode):
    """A public domain: unobserved pairs get noise too; they appear only when Laplace noise alone reaches tau."""
    eps, tau = 1.0, 2
    cfg = (ReleaseConfig(epsilon=eps, threshold=tau) if mode == "per_metric"
           else ReleaseConfig(epsilon=eps, threshold=tau, mode=mode, max_pairs=1))
    observed = singleton_pairs(50)
    n = 20_000
    domain = pd.DataFrame({"origin": np.arange(1000, 1000 + n), "destination": np.arange(n)})
    res = release_with_report(observed, cfg, rng=11, domain=domain)
    t = res.table
    zero = t["true_count"] == 0
    assert zero.sum() == n
    z = t[zero]
    np.testing.assert_array_equal(z["released"].to_numpy(), z["noise"].to_numpy() >= tau)
    p0 = release_probability(0, eps, tau, cfg.sensitivity)  # = 1/2 exp(-tau eps / sensitivity)
    assert p0 == pytest.approx(0.5 * math.exp(-tau * eps / cfg.sensitivity))
    k = int(z["released"].sum())
    assert stats.binomtest(k, n, p0).pvalue > ALPHA
    assert stats.binomtest(k, n, release_probability(1, eps, tau, cfg.sensitivity)).pvalue < ALPHA
    assert res.report["pairs_released_with_true_count_0"] == k
    assert res.report["domain_pairs_unobserved"] == n
    # without the domain, nothing with true count 0 is ever published
    assert release_with_report(observed, cfg, rng=11).report["pairs_released_with_true_count_0"] == 0


def test_domain_overlapping_observed_pairs_and_week_column():
    pairs = pd.DataFrame({"week": [0, 0, 1], "user": ["a", "b", "a"], "origin": [1, 1, 2], "destination": [2, 2, 3]})
    dom = pd.DataFrame({"week": [0, 1, 1], "origin": [1, 2, 5], "destination": [2, 3, 5]})
    t = release(pairs, ReleaseConfig(epsilon=1, threshold=1), rng=0, domain=dom)
    assert t[["week", "origin", "destination", "true_count"]].to_numpy().tolist() == [
        [0, 1, 2, 2], [1, 2, 3, 1], [1, 5, 5, 0]]
    assert t["noise"].notna().all()
    with pytest.raises(ParameterError, match="domain"):
        release(pairs, ReleaseConfig(), domain=pd.DataFrame({"origin": [1]}))


def test_duplicates_are_removed_and_counted():
    pairs = pd.DataFrame({"week": [0, 0, 0], "user": ["a", "a", "b"], "origin": [1, 1, 1], "destination": [2, 2, 2]})
    res = release_with_report(pairs, ReleaseConfig(epsilon=1, threshold=1), rng=0)
    assert res.report["duplicate_rows_dropped"] == 1
    assert res.table["true_count"].tolist() == [2]


def test_empty_input():
    t = release(singleton_pairs(0), ReleaseConfig(), rng=0)
    assert len(t) == 0
    assert list(t.columns) == list(RELEASE_COLUMNS)


# ------------------------------------------------------------------ properties


pairs_strategy = st.lists(
    st.tuples(st.integers(0, 2), st.integers(0, 15), st.integers(0, 5), st.integers(0, 5)), min_size=0, max_size=80,
).map(lambda rows: pd.DataFrame(rows, columns=["week", "user", "origin", "destination"], dtype="int64"))

config_strategy = st.one_of(
    st.builds(ReleaseConfig, epsilon=st.floats(0.05, 5), threshold=st.integers(1, 6)),
    st.builds(ReleaseConfig, epsilon=st.floats(0.05, 5), threshold=st.integers(1, 6),
              mode=st.just(Mode.USER_LEVEL), max_pairs=st.integers(1, 4)),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pairs=pairs_strategy, cfg=config_strategy, seed=st.integers(0, 2**32 - 1))
def test_properties(pairs, cfg, seed):
    t = release(pairs, cfg, rng=seed)
    pub = t[t["released"]]
    assert (pub["noisy_count"] >= cfg.threshold).all()  # every published count clears the threshold
    np.testing.assert_array_equal(t["released"].to_numpy(), t["noisy_count"].to_numpy() >= cfg.threshold)
    assert (pub["true_count"] >= 1).all()  # a pair with true count 0 (emptied by bounding) is never published
    pd.testing.assert_frame_equal(t, release(pairs, cfg, rng=seed))  # same seed, same output
    # input row order does not matter
    shuffled = pairs.sample(frac=1.0, random_state=seed % 1000)
    pd.testing.assert_frame_equal(t, release(shuffled, cfg, rng=seed))
    assert t["release_prob"].between(0, 1).all()
    assert len(t) == len(pairs.drop_duplicates()[["week", "origin", "destination"]].drop_duplicates())


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pairs=pairs_strategy, cfg=config_strategy, seed=st.integers(0, 2**32 - 1),
       dom=st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), max_size=20, unique=True))
def test_properties_with_domain(pairs, cfg, seed, dom):
    domain = pd.DataFrame(dom, columns=["origin", "destination"], dtype="int64")
    res = release_with_report(pairs, cfg, rng=seed, domain=domain)
    t = res.table
    pub = t[t["released"]]
    assert (pub["noisy_count"] >= cfg.threshold).all()
    # a published pair with true count 0 is a domain pair pushed over the threshold by noise alone
    z = pub[pub["true_count"] == 0]
    assert (z["noise"] >= cfg.threshold).all()
    keys = set(map(tuple, domain.to_numpy().tolist()))
    assert all((o, d) in keys for o, d in z[["origin", "destination"]].itertuples(index=False))
    assert res.report["pairs_released_with_true_count_0"] == len(z)
    pd.testing.assert_frame_equal(t, release(pairs, cfg, rng=seed, domain=domain))


def test_different_seeds_differ():
    p = singleton_pairs(50)
    a = release(p, ReleaseConfig(), rng=1)["noise"].to_numpy()
    b = release(p, ReleaseConfig(), rng=2)["noise"].to_numpy()
    assert not np.array_equal(a, b)


# ------------------------------------------------------------------ errors


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"epsilon": 0}, "epsilon"), ({"epsilon": -1}, "epsilon"), ({"epsilon": float("nan")}, "epsilon"),
    ({"epsilon": float("inf")}, "epsilon"), ({"epsilon": "abc"}, "epsilon"),
    ({"threshold": 0.5}, "threshold"), ({"threshold": float("nan")}, "threshold"), ({"threshold": -3}, "threshold"),
    ({"mode": "user_level", "max_pairs": 0}, "max_pairs"), ({"mode": "user_level", "max_pairs": 2.5}, "max_pairs"),
    ({"mode": "user_level", "max_pairs": float("nan")}, "max_pairs"), ({"mode": "user_level"}, "max_pairs"),
    ({"max_pairs": 3}, "max_pairs"), ({"mode": "per_user"}, "mode"),
])
def test_bad_config(kwargs, match):
    with pytest.raises(ParameterError, match=match):
        ReleaseConfig(**kwargs)


def test_bad_function_parameters():
    with pytest.raises(ParameterError, match="epsilon"):
        release_probability(3, 0, 5)
    with pytest.raises(ParameterError, match="threshold"):
        threshold_delta(1, 0.2)
    with pytest.raises(ParameterError, match="max_pairs"):
        threshold_delta(1, 5, 1, 0)
    with pytest.raises(ParameterError, match="max_pairs"):
        bound_contributions(singleton_pairs(3), 0)


def test_bad_pairs_tables():
    with pytest.raises(ParameterError, match="missing column"):
        release(pd.DataFrame({"week": [0], "user": [1], "origin": [1]}))
    bad = singleton_pairs(3).astype({"origin": float})
    bad.loc[1, "origin"] = np.nan
    with pytest.raises(ParameterError, match=r"'origin'.*row 1"):
        release(bad)
    with pytest.raises(ParameterError, match="pandas DataFrame"):
        release([1, 2, 3])
    with pytest.raises(ParameterError, match="integers"):
        release(singleton_pairs(3).astype({"destination": str}))


def test_config_mode_string_and_sensitivity():
    cfg = ReleaseConfig(epsilon=0.5, threshold=10, mode="user_level", max_pairs=7)
    assert cfg.mode is Mode.USER_LEVEL
    assert cfg.sensitivity == 7
    assert cfg.scale == 14
    assert ReleaseConfig().to_dict() == {"epsilon": 0.66, "threshold": 100, "mode": "per_metric", "max_pairs": None}
    assert hash(cfg) == hash(ReleaseConfig(epsilon=0.5, threshold=10, mode=Mode.USER_LEVEL, max_pairs=7))


def test_cell_release_probability_matches_simulation():
    # P(at least one outgoing pair of a cell is published) = 1 − Π(1 − p_pair); checked against many releases
    from odcore.privacy.release import cell_release_probability

    pairs = pd.DataFrame({"week": 0, "user": np.arange(300),
                          "origin": np.r_[np.zeros(200, int), np.ones(100, int)],
                          "destination": np.r_[np.repeat([5, 6], 100), np.full(100, 7)]})
    cfg = ReleaseConfig(epsilon=0.5, threshold=100)
    table = release(pairs, cfg, rng=0)
    exact = cell_release_probability(table).set_index("cell")["release_prob_any"]
    rng = np.random.default_rng(1)
    prep = prepare_pairs(pairs)   # the same releases as of the DataFrame (test_prepared_pairs_release_exactly_as_the_table)
    hits = np.zeros(2)
    n = 4000
    for _ in range(n):
        t = release(prep, cfg, rng=rng)
        origin, released = t["origin"].to_numpy(), t["released"].to_numpy()
        hits += [released[origin == 0].any(), released[origin == 1].any()]
    # binomial tolerance at alpha ~ 1e-6 (5 standard errors)
    se = np.sqrt(exact.to_numpy() * (1 - exact.to_numpy()) / n)
    assert np.all(np.abs(hits / n - exact.to_numpy()) < 5 * se + 1e-9)


@pytest.mark.parametrize(("mode", "max_pairs"), [("per_metric", None), ("user_level", 2)])
def test_prepared_pairs_release_exactly_as_the_table(mode, max_pairs):
    """Preparing a week once (the dashboard's sliders) changes nothing: same table and report, any config/seed;
    duplicates and row order are handled as for the DataFrame; the prepared arrays cannot be written to."""
    rng = np.random.default_rng(5)
    n = 4000
    pairs = pd.DataFrame({"week": rng.integers(0, 2, n), "user": rng.integers(0, 300, n).astype(str),
                          "origin": rng.integers(0, 12, n), "destination": rng.integers(0, 12, n)})
    pairs = pd.concat([pairs, pairs.iloc[:50]]).sample(frac=1.0, random_state=1)   # duplicates, shuffled
    prep = prepare_pairs(pairs)
    for eps, tau, seed in [(0.66, 5, 0), (2.0, 1, 7), (0.1, 20, 123)]:
        cfg = ReleaseConfig(epsilon=eps, threshold=tau, mode=mode, max_pairs=max_pairs)
        a, b = release_with_report(pairs, cfg, rng=seed), release_with_report(prep, cfg, rng=seed)
        pd.testing.assert_frame_equal(a.table, b.table)
        assert a.report == b.report
        assert b.report["duplicate_rows_dropped"] == int(pairs.duplicated().sum()) >= 50
    assert not prep.counts[3].flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        prep.pairs.w[0] = 1


@pytest.mark.parametrize("bits", [8, 17, 33, 47, 60])
def test_stable_argsort_by_radix_passes_is_numpys(bits, monkeypatch):
    """The canonical order's radix passes give numpy's stable argsort exactly (ties kept in input order)."""
    from odcore.od.pairs import _stable_argsort

    rng = np.random.default_rng(bits)
    for n, min_rows in ((30_000, 20_000), (500, 1)):
        monkeypatch.setattr("odcore.od.pairs._RADIX_MIN_ROWS", min_rows)
        key = rng.integers(0, 2**bits, n)
        key[: n // 3] = key[n // 3: 2 * (n // 3)]      # many ties
        rng.shuffle(key)
        np.testing.assert_array_equal(_stable_argsort(key, 2**bits), np.argsort(key, kind="stable"))


def test_seed_memo_of_prepared_pairs_changes_no_release():
    """Per person, a prepared week keeps each seed's bounding draw: releases at other bounds, ε and thresholds with
    a seed seen before (and after it was evicted) are exactly those of a fresh preparation."""
    from odcore.od.pairs import PreparedPairs

    rng = np.random.default_rng(11)
    n = 6000
    pairs = pd.DataFrame({"week": np.zeros(n, int), "user": rng.integers(0, 400, n),
                          "origin": rng.integers(0, 15, n), "destination": rng.integers(0, 15, n)})
    prep = prepare_pairs(pairs)
    seeds = [3, 4, 3, *range(10, 10 + PreparedPairs.RANK_SEEDS), 3, 4]
    for i, seed in enumerate(seeds):
        cfg = ReleaseConfig(epsilon=0.5 + i / 10, threshold=1 + i % 4, mode="user_level", max_pairs=1 + i % 5)
        a, b = release_with_report(pairs, cfg, rng=seed), release_with_report(prep, cfg, rng=seed)
        pd.testing.assert_frame_equal(a.table, b.table)
        assert a.report == b.report
    assert len(prep._ranks) == PreparedPairs.RANK_SEEDS
    for m in (1, 3):      # the attack pages bound the prepared week with the release's seed: the same rows
        (kept, rep), (kept_p, rep_p) = bound_contributions(pairs, m, rng=4), bound_contributions(prep, m, rng=4)
        pd.testing.assert_frame_equal(kept, kept_p)
        assert rep == rep_p
    gen = release_with_report(prep, cfg, rng=np.random.default_rng(4))   # a generator: drawn, not memoised
    pd.testing.assert_frame_equal(gen.table, b.table)


def test_rows_in_week_user_order_get_the_same_canonical_order():
    """An ODData's pairs come in (week, user) order and take the shorter sort by pair; the prepared week is the one
    a shuffled copy gives (the general sort), duplicates included."""
    rng = np.random.default_rng(8)
    n = 30_000
    pairs = pd.DataFrame({"week": rng.integers(0, 3, n), "user": rng.integers(0, 900, n),
                          "origin": rng.integers(0, 40, n), "destination": rng.integers(0, 40, n)})
    pairs = pd.concat([pairs, pairs.iloc[:300]])
    ordered = pairs.sort_values(["week", "user"], kind="stable").reset_index(drop=True)
    shuffled = pairs.sample(frac=1.0, random_state=2).reset_index(drop=True)
    a, b = prepare_pairs(ordered), prepare_pairs(shuffled)
    for x, y in zip((a.pairs.w, a.pairs.o, a.pairs.d, a.pairs.u, *a.counts), (b.pairs.w, b.pairs.o, b.pairs.d,
                                                                             b.pairs.u, *b.counts), strict=True):
        np.testing.assert_array_equal(x, y)
    assert a.pairs.n_dup == b.pairs.n_dup == int(pairs.duplicated().sum()) >= 300


def test_the_hash_folds_bits_to_the_same_integers_as_the_modulo():
    """pair_hash reduces mod P = 2^31 - 1 by folding bits (odcore.od.bounding._mod_p): the same integers as the
    rule written with ``%`` (the form the SQL engines run), on ids in and out of [0, P), negative weeks and the
    extreme values; a user's hash is kept per label and type (1 and 1.0 have different texts)."""
    from odcore.od import bounding

    def plain(key, u, week, origin, destination):
        p = np.int64(bounding.HASH_PRIME)
        h = np.asarray(u, dtype=np.int64).copy()
        for (a, b), x in zip(bounding.round_constants(key), (h, week, origin, destination, np.zeros(len(h), np.int64)),
                             strict=True):
            h = ((h + np.mod(np.asarray(x, dtype=np.int64), p)) % p * np.int64(a) + np.int64(b)) % p
            h = h * h % p
        return h

    rng = np.random.default_rng(11)
    n, P = 50_000, bounding.HASH_PRIME
    for small in (True, False):
        key = int(rng.integers(0, 2**62))
        u = rng.integers(0, 2**32, n)
        w = rng.integers(-3, 60, n)
        o = rng.integers(0, 5000, n) if small else rng.integers(-2**40, 2**40, n)
        d = rng.integers(0, 5000, n) if small else rng.integers(0, 2**62, n)
        if not small:
            o[:5] = [0, P - 1, P, -1, -P]
            u[:3] = [0, 2**32 - 1, P]
        np.testing.assert_array_equal(bounding.pair_hash(key, u, w, o, d), plain(key, u, w, o, d))
    x = np.array([0, 1, P - 1, P, P + 1, 2 * P, (P - 1) ** 2, 2**62 - 1, 2**63 - 1], dtype=np.int64)
    np.testing.assert_array_equal(bounding._mod_p(x.copy()), x % np.int64(P))
    u1, u2 = bounding.user_hashes([1, 1.0])
    assert u1 != u2
    assert u1 == bounding.user_hashes([np.int64(1)])[0]
