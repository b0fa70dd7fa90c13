"""odcore.report.utility_measures against independent implementations (scipy, POT, brute force from the definitions)
and the RMSE split against 1,000 simulated releases."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy.spatial.distance import jensenshannon
from scipy.stats import entropy, kendalltau, wasserstein_distance
from sklearn.metrics.pairwise import haversine_distances

from odcore.errors import ParameterError
from odcore.od.pairs import bounded_counts
from odcore.privacy.release import Mode, ReleaseConfig, release_bounded_counts_with_report
from odcore.report import utility_measures as um

ot = pytest.importorskip("ot")   # POT (requirements-dev.txt): the exact transport solver the zone EMD is checked with

TOL = 1e-9
SEEDS = (0, 1, 2)   # three inputs per measure


def vectors(seed: int, n: int = 60) -> tuple[np.ndarray, np.ndarray]:
    """Two count vectors with zeros on each side and ties, as a release against the truth has them."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 40, n).astype(float)
    b = np.where(rng.random(n) < 0.3, 0.0, a + rng.laplace(0, 4, n))
    b = np.clip(b, 0, None)
    a[0] = b[0] = 0.0              # a pair both sides lack
    b[1] = a[1] = 7.0              # a tie
    return a, b


@pytest.mark.parametrize("seed", SEEDS)
def test_smape_equals_the_definition_entry_by_entry(seed):
    a, b = vectors(seed)
    ref = 0.0
    for x, y in zip(b, a, strict=True):   # dp-mobility-report's definition: 0 where both are 0
        ref += 0.0 if x + y == 0 else abs(x - y) / ((abs(x) + abs(y)) / 2)
    assert um.smape(b, a) == pytest.approx(ref / len(a), abs=TOL)


@pytest.mark.parametrize("seed", SEEDS)
def test_jensen_shannon_and_kl_equal_scipy(seed):
    a, b = vectors(seed)
    assert um.js_distance(b, a) == pytest.approx(float(jensenshannon(b, a)), abs=TOL)
    keep = a > 0      # KL(b || a) is finite where a covers b
    assert um.kl_divergence(b[keep], a[keep]) == pytest.approx(float(entropy(b[keep], a[keep])), abs=TOL)
    assert um.kl_divergence(a + 1, a * 0 + 1) == pytest.approx(float(entropy(a + 1, a * 0 + 1)), abs=TOL)


def test_kl_is_infinite_where_the_base_has_no_mass_and_js_is_bounded():
    assert um.kl_divergence([1, 1], [1, 0]) == math.inf
    assert um.js_distance([1, 0], [0, 1]) == pytest.approx(math.sqrt(math.log(2)), abs=TOL)


@pytest.mark.parametrize("seed", SEEDS)
def test_kendall_tau_b_equals_scipy(seed):
    a, b = vectors(seed)
    assert um.kendall_tau_b(a, b) == pytest.approx(float(kendalltau(a, b).statistic), abs=TOL)


@pytest.mark.parametrize("seed", SEEDS)
def test_top_n_coverage_equals_a_sort_by_hand(seed):
    a, b = vectors(seed)
    keys = pd.DataFrame({"origin": np.arange(len(a)) // 7, "destination": np.arange(len(a)) % 7})
    for n in (5, 10, 30):
        def top(v, n=n):   # largest first, ties by (origin, destination); zeros are never a top flow
            idx = sorted(range(len(v)), key=lambda i: (-v[i], keys.origin[i], keys.destination[i]))[:n]
            return {i for i in idx if v[i] > 0}

        ta, tb = top(a), top(b)
        assert um.top_n_coverage(a, b, n, keys) == pytest.approx(len(ta & tb) / len(ta), abs=TOL)


@pytest.mark.parametrize("seed", SEEDS)
def test_emd_over_flow_lengths_equals_scipy_and_pot(seed):
    rng = np.random.default_rng(seed)
    u, v = rng.gamma(2, 3, 80), rng.gamma(2.5, 2.5, 50)
    uw, vw = rng.integers(1, 30, 80).astype(float), rng.integers(1, 30, 50).astype(float)
    got = um.emd_1d(u, v, uw, vw)
    assert got == pytest.approx(float(wasserstein_distance(u, v, uw, vw)), abs=TOL)
    assert got == pytest.approx(float(ot.wasserstein_1d(u, v, uw / uw.sum(), vw / vw.sum(), p=1)), abs=TOL)


@pytest.mark.parametrize("seed", SEEDS)
def test_emd_over_zones_equals_pot_exact_transport(seed):
    rng = np.random.default_rng(seed)
    na, nb = 25 + seed * 5, 18
    alat, alon = 37.7 + rng.random(na) * 0.1, -122.5 + rng.random(na) * 0.1
    blat, blon = 37.7 + rng.random(nb) * 0.1, -122.5 + rng.random(nb) * 0.1
    aw, bw = rng.integers(1, 50, na).astype(float), rng.integers(1, 50, nb).astype(float)
    cost = haversine_distances(np.radians(np.c_[alat, alon]), np.radians(np.c_[blat, blon])) * um.EARTH_RADIUS_KM
    ref = float(ot.emd2(aw / aw.sum(), bw / bw.sum(), cost))
    assert um.emd_zones(alat, alon, aw, blat, blon, bw) == pytest.approx(ref, abs=TOL)


def test_emd_zones_refuses_too_many_zones_by_name():
    w = np.ones(5)
    with pytest.raises(ParameterError, match="max_pairs=24"):
        um.emd_zones(np.arange(5.0), np.zeros(5), w, np.arange(5.0), np.zeros(5), w, max_pairs=24)


def test_compare_flows_aligns_pairs_and_reads_identical_releases_as_equal():
    base = pd.DataFrame({"origin": [0, 0, 1, 2], "destination": [1, 2, 2, 0], "count": [10.0, 5.0, 3.0, 1.0]})
    cen = pd.DataFrame({"cell": [0, 1, 2], "lat": [37.70, 37.75, 37.80], "lon": [-122.4, -122.45, -122.4]})
    same = um.compare_flows(base, base, base_value="count", other_value="count", centroids_base=cen)
    assert same["smape"] == 0
    assert same["jsd"] == 0
    assert same["kl"] == 0
    assert same["emd_length_km"] == pytest.approx(0, abs=TOL)
    assert same["emd_zones_km"] == pytest.approx(0, abs=TOL)
    assert same["top_n"][10] == {"coverage": 1.0, "kendall_tau": 1.0}
    other = pd.DataFrame({"origin": [0, 1, 2], "destination": [1, 0, 0], "count": [10.0, 4.0, 0.0]})
    r = um.compare_flows(base, other, base_value="count", other_value="count", centroids_base=cen)
    assert r["pairs_union"] == 5
    assert r["pairs_other"] == 2
    pa = np.array([10, 5, 0, 3, 1]) / 19   # union in key order: (0,1) (0,2) (1,0) (1,2) (2,0)
    pb = np.array([10, 0, 4, 0, 0]) / 14
    assert r["smape"] == pytest.approx(um.smape(pb, pa), abs=TOL)
    assert r["jsd"] == pytest.approx(float(jensenshannon(pb, pa)), abs=TOL)
    assert r["kl"] == math.inf


def small_week(seed: int = 7) -> pd.DataFrame:
    """A week of unique (user, pair) rows: 400 people, 12 zones, busy pairs and rare ones."""
    rng = np.random.default_rng(seed)
    rows = []
    for u in range(400):
        k = int(rng.integers(1, 9))
        pairs = {(int(o), int(d)) for o, d in zip(rng.zipf(1.6, k) % 12, rng.integers(0, 12, k), strict=True)}
        rows += [(0, u, o, d) for o, d in pairs]
    return pd.DataFrame(rows, columns=["week", "user", "origin", "destination"])


def test_observed_parts_add_up_to_the_observed_rmse():
    bounded, _ = bounded_counts(small_week(), 3, key=11)
    cfg = ReleaseConfig(epsilon=1.0, threshold=8, mode=Mode.USER_LEVEL, max_pairs=3)
    t = release_bounded_counts_with_report(bounded, cfg, 5).table
    p = um.rmse_parts(t)
    raw = t["raw_count"].to_numpy(float)
    err = np.where(t["released"], t["noisy_count"].fillna(0) - raw, -raw)   # the definition, row by row
    assert p["rmse"] == pytest.approx(math.sqrt(np.mean(err ** 2)), rel=1e-12)
    assert p["bounding"] + p["noise"] + p["cross"] + p["dropped"] == pytest.approx(p["mse"], rel=1e-12)


@pytest.mark.parametrize("max_pairs", [1, 3])
def test_expected_parts_match_1000_simulated_releases(max_pairs):
    # PipelineDP's split, with dropped pairs counted: the expected parts add up to the RMSE that 1,000 releases of
    # the same bounded counts observe (2 % on the RMSE; the Monte Carlo standard error is under 0.5 % here)
    bounded, _ = bounded_counts(small_week(), max_pairs, key=3)
    cfg = ReleaseConfig(epsilon=1.0, threshold=6, mode=Mode.USER_LEVEL, max_pairs=max_pairs)
    sims = [um.rmse_parts(release_bounded_counts_with_report(bounded, cfg, s).table) for s in range(1000)]
    exp = um.expected_rmse_parts(bounded["raw_count"], bounded["true_count"], cfg.epsilon, cfg.threshold,
                                 cfg.sensitivity)
    observed_rmse = math.sqrt(np.mean([s["mse"] for s in sims]))
    assert exp["rmse"] == pytest.approx(observed_rmse, rel=0.02)
    assert exp["bounding"] + exp["noise"] + exp["cross"] + exp["dropped"] == pytest.approx(exp["mse"], rel=1e-12)
    for part in ("bounding", "noise", "dropped"):
        assert exp[part] == pytest.approx(np.mean([s[part] for s in sims]), rel=0.05), part
    assert exp["bounding"] > 0
    assert exp["dropped"] > 0
    assert exp["noise"] > 0


def test_release_vs_truth_on_a_release():
    week = small_week()
    bounded, _ = bounded_counts(week, 4, key=2)
    cfg = ReleaseConfig(epsilon=2.0, threshold=5, mode=Mode.USER_LEVEL, max_pairs=4)
    t = release_bounded_counts_with_report(bounded, cfg, 1).table
    cen = pd.DataFrame({"cell": np.arange(12), "lat": 37.7 + np.arange(12) * 0.01, "lon": -122.4 + (np.arange(12) % 3) * 0.01})
    r = um.release_vs_truth(t, cen, epsilon=cfg.epsilon, threshold=cfg.threshold, sensitivity=cfg.sensitivity)
    rel = t["released"].to_numpy()
    assert r["pairs_published"] == int(rel.sum())
    assert r["pairs_total"] == len(t)
    assert r["trips_published_frac"] == pytest.approx(t["raw_count"][rel].sum() / t["raw_count"].sum())
    truth = t["raw_count"].to_numpy(float)
    pub = np.where(rel, t["noisy_count"].fillna(0).to_numpy(float), 0.0)
    assert r["jsd"] == pytest.approx(float(jensenshannon(pub, truth)), abs=TOL)
    assert r["emd_zones_km"] is not None
    assert r["emd_length_km"] is not None
    assert set(r["rmse_expected"]) >= {"bounding", "noise", "cross", "dropped", "rmse"}


def test_bad_input_names_the_parameter():
    with pytest.raises(ParameterError, match="same length"):
        um.smape([1, 2], [1])
    with pytest.raises(ParameterError, match="sums to 0"):
        um.js_distance([0, 0], [1, 1])
    with pytest.raises(ParameterError, match="miss column"):
        um.compare_flows(pd.DataFrame({"origin": [1]}), pd.DataFrame({"origin": [1]}))
