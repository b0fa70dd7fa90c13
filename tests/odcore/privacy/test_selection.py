"""Partition selection (odcore.privacy.selection): keep probabilities against PyDP's, the (ε, δ) constraints, the
Gaussian calibration against dp_accounting, and the comparison table on a small week (with PipelineDP when
installed)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from odcore.privacy.selection import (
    Strategy,
    compare_selection,
    gaussian_delta,
    gaussian_one_count,
    gaussian_sigma,
    keep_probability,
    truncated_geometric_keep,
)


@pytest.mark.parametrize(("eps", "m"), [(0.5, 1), (1.0, 1), (1.0, 5), (2.0, 10), (1.0, 20)])
def test_truncated_geometric_is_pydps_and_satisfies_the_dp_constraints(eps, m):
    n = np.arange(0, 2000)
    pi = truncated_geometric_keep(n, eps, 1e-6, m)
    e, d = eps / m, -math.expm1(math.log1p(-1e-6) / m)
    # (e, d)-DP for a person in one partition: both directions, every n (Desfontaines et al., Theorem 1)
    assert np.all(pi[1:] <= math.exp(e) * pi[:-1] + d + 1e-15)
    assert np.all(1 - pi[:-1] <= math.exp(e) * (1 - pi[1:]) + d + 1e-15)
    assert pi[0] == 0
    ps = pytest.importorskip("pydp.algorithms.partition_selection")
    ref = ps.create_truncated_geometric_partition_strategy(eps, 1e-6, m)
    np.testing.assert_allclose(pi, [ref.probability_of_keep(int(k)) for k in n], atol=1e-12)


@pytest.mark.parametrize("m", [1, 5, 10])
def test_the_labs_cut_is_pydps_laplace_thresholding(m):
    ps = pytest.importorskip("pydp.algorithms.partition_selection")
    ref = ps.create_laplace_partition_strategy(1.0, 1e-6, m)
    n = np.arange(0, 600)
    mine = keep_probability(Strategy.LAB_ONE_COUNT, n, 1.0, 1e-6, m)
    # PyDP compares with '>' where the lab publishes at '>=' (a Laplace tie has probability 0), and rounds its
    # threshold: the two agree to 4e-7 everywhere
    np.testing.assert_allclose(mine, [ref.probability_of_keep(int(k)) for k in n], atol=4e-7)
    assert keep_probability(Strategy.LAB_ONE_COUNT, 1, 1.0, 1e-6, m) <= -math.expm1(math.log1p(-1e-6) / m) * (1 + 1e-9)


@pytest.mark.parametrize(("eps", "delta", "l2"), [(1.0, 1e-5, 1.0), (0.5, 1e-6, math.sqrt(10)), (2.0, 1e-9, 2.0)])
def test_gaussian_calibration_against_dp_accounting(eps, delta, l2):
    pldlib = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
    sigma = gaussian_sigma(eps, delta, l2)
    assert gaussian_delta(sigma, eps, l2) == pytest.approx(delta, rel=1e-6)
    pld = pldlib.from_gaussian_mechanism(sigma, sensitivity=l2, value_discretization_interval=1e-3)
    # pessimistic PLD, coarse grid: an upper bound within a few per cent
    assert delta <= pld.get_delta_for_epsilon(eps) <= delta * 1.25
    # a smaller sigma is not enough
    assert gaussian_delta(sigma * 0.97, eps, l2) > delta


def test_gaussian_one_count_threshold_spends_half_of_delta_on_a_persons_own_pairs():
    rng = np.random.default_rng(3)
    for m in (1, 10):
        sigma, tau = gaussian_one_count(1.0, 1e-2, m)   # a large delta, so a simulation can see it
        own = 1 + rng.normal(0, sigma, size=(400_000, m))
        p_any = np.mean((own >= tau).any(axis=1))
        assert p_any == pytest.approx(0.5e-2, rel=0.1)


def _week(seed=0, n_users=4000):
    rng = np.random.default_rng(seed)
    busy = [(0, 1), (1, 0), (2, 3), (3, 2), (4, 5)]
    rows = []
    for u in range(n_users):
        k = int(rng.integers(2, 9))
        pairs = {busy[int(rng.integers(0, len(busy)))] for _ in range(2)}
        while len(pairs) < k:
            o = int(rng.integers(0, 300))
            pairs.add((o, (o + 1 + int(rng.integers(0, 5))) % 300))
        rows += [(0, u, o, d) for o, d in pairs]
    return pd.DataFrame(rows, columns=["week", "user", "origin", "destination"])


def test_compare_selection_one_count_keeps_more_than_the_composed_strategies():
    wk = _week()
    for m in (1, 5):
        t = compare_selection(wk, epsilon=1.0, delta=1e-6, max_pairs=m, rng=1, pipeline_dp=False).set_index(
            "strategy")
        best_lab = t.loc[[str(Strategy.LAB_ONE_COUNT), str(Strategy.LAB_GAUSSIAN_ONE_COUNT)], "pairs_expected"].max()
        assert best_lab >= t.loc[str(Strategy.TRUNCATED_GEOMETRIC), "pairs_expected"]
        assert best_lab >= t.loc[str(Strategy.LAPLACE_THRESHOLDING), "pairs_expected"]
        assert t["why"].str.len().min() > 20
        assert t.attrs["people"] == 4000
    again = compare_selection(wk, epsilon=1.0, max_pairs=5, rng=1, pipeline_dp=False)
    pd.testing.assert_frame_equal(again, compare_selection(wk, epsilon=1.0, max_pairs=5, rng=1, pipeline_dp=False))


def test_pipeline_dp_runs_on_the_same_pairs():
    pytest.importorskip("pipeline_dp")
    wk = _week(n_users=800)
    t = compare_selection(wk, epsilon=1.0, delta=1e-6, max_pairs=2, rng=1).set_index("strategy")
    peer = t.loc[t.index.str.startswith("PipelineDP")]
    assert len(peer) == 5   # truncated geometric, Laplace, Gaussian; Laplace and Gaussian on one count
    # mechanism for mechanism: PipelineDP's one-count Gaussian beside the lab's, named alike
    gauss = t.loc["PipelineDP: gaussian (post-aggregation thresholding)"]
    assert gauss["mechanism"] == t.loc[str(Strategy.LAB_GAUSSIAN_ONE_COUNT), "mechanism"]
    assert gauss["pairs_published"] >= 5
    assert (peer["pairs_published"] <= t.attrs["pairs"]).all()
    # the busy pairs have ~300 people: every strategy publishes them
    assert (peer["pairs_published"] >= 5).all()
