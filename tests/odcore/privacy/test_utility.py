"""Tests of odcore.privacy.utility: utility of a release and the Atlanta arithmetic."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from odcore.errors import ParameterError
from odcore.privacy.release import ReleaseConfig, release, release_probability
from odcore.privacy.utility import atlanta_arithmetic, release_utility, utility_by_week


def _pairs(rng, n=20_000, users=3000, cells=12, weeks=2):
    return pd.DataFrame({"week": rng.integers(0, weeks, n), "user": rng.integers(0, users, n),
                         "origin": rng.integers(0, cells, n), "destination": rng.integers(0, cells, n)})


def test_hand_made_table():
    t = pd.DataFrame({"week": [0, 0, 1, 1], "raw_count": [100, 200, 5, 50], "true_count": [100, 150, 5, 50],
                      "noisy_count": [110.0, 190.0, 7.0, 40.0], "released": [True, True, False, False],
                      "release_prob": [0.5, 0.9, 0.0, 0.1]})
    u = release_utility(t)
    assert u["pairs_total"] == 4
    assert u["pairs_published"] == 2
    assert u["pairs_published_frac"] == 0.5
    assert u["trips_total"] == 355
    assert u["trips_published"] == 300
    assert u["trips_after_bounding"] == 305
    assert u["mean_relative_error"] == pytest.approx((10 / 100 + 10 / 200) / 2)
    assert u["mean_relative_error_noise_only"] == pytest.approx((10 / 100 + 40 / 150) / 2)
    assert u["pairs_published_expected"] == pytest.approx(1.5)
    w = utility_by_week(t)
    assert w["pairs_published"].tolist() == [2, 0]
    assert w["trips_total"].tolist() == [300, 55]
    assert w["mean_relative_error"].iloc[0] == pytest.approx(0.075)
    assert np.isnan(w["mean_relative_error"].iloc[1])


def test_nothing_published():
    t = pd.DataFrame({"true_count": [1, 2], "noisy_count": [0.5, 1.0], "released": [False, False]})
    u = release_utility(t)
    assert u["pairs_published"] == 0
    assert np.isnan(u["mean_relative_error"])


def test_on_a_release_matches_expectations():
    rng = np.random.default_rng(0)
    t = release(_pairs(rng), ReleaseConfig(epsilon=0.5, threshold=70), rng=1)
    u = release_utility(t)
    assert u["pairs_total"] == len(t)
    assert u["trips_total"] == int(t["true_count"].sum())
    # published count vs sum of exact release probabilities: within 6 binomial standard deviations
    p = release_probability(t["true_count"].to_numpy(), 0.5, 70)
    sd = np.sqrt((p * (1 - p)).sum())
    assert abs(u["pairs_published"] - p.sum()) < 6 * sd
    # mean relative error of Laplace(b) on counts ~c is about b / c
    assert u["mean_relative_error"] == pytest.approx(np.mean(2.0 / t.loc[t["released"], "true_count"]), rel=0.2)
    w = utility_by_week(t)
    assert w["pairs_published"].sum() == u["pairs_published"]
    assert w["trips_published"].sum() == u["trips_published"]


def test_user_level_bias_counts_in_relative_error():
    rng = np.random.default_rng(1)
    pairs = _pairs(rng, n=20_000, users=300)
    t = release(pairs, ReleaseConfig(epsilon=1.0, threshold=5, mode="user_level", max_pairs=5), rng=2)
    u = release_utility(t)
    assert u["trips_after_bounding"] < u["trips_total"]
    # against the real count the error includes the bounding bias, so it is larger than the noise alone
    assert u["mean_relative_error"] > u["mean_relative_error_noise_only"]


def test_atlanta_golden():
    # Houssiau et al. 2022, Methods: 46,333 connections x >= 100 trips => at least 4.6 M people if 1 trip each
    a = atlanta_arithmetic(46_333, 100)
    assert a["min_user_trips"] == 4_633_300
    assert round(a["min_user_trips"] / 1e6, 1) == 4.6
    assert a["share_of_population"] == pytest.approx(0.92666)
    assert a["min_trips_per_possible_user"] > 1  # more than the 67% of 5 M who could be in the data
    b = atlanta_arithmetic(46_333, 100, epsilon=0.66, alpha=0.05)
    assert b["min_true_count_per_pair"] < 100
    # union bound: every published pair has true count >= 100 - ln(P / (2 alpha)) / eps
    assert b["min_true_count_per_pair"] == int(np.ceil(100 - np.log(46_333 / 0.1) / 0.66))
    assert b["min_trips_per_possible_user_noise_aware"] > 1


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"published_pairs": -1}, "published_pairs"), ({"published_pairs": 2.5}, "published_pairs"),
    ({"threshold": 0}, "threshold"), ({"population": 0}, "population"), ({"app_share": 1.5}, "app_share"),
    ({"epsilon": 0}, "epsilon"), ({"epsilon": 1, "alpha": 1}, "alpha"),
])
def test_atlanta_bad_parameters(kwargs, match):
    with pytest.raises(ParameterError, match=match):
        atlanta_arithmetic(**kwargs)


def test_bad_table():
    with pytest.raises(ParameterError, match="missing column"):
        release_utility(pd.DataFrame({"true_count": [1]}))
    with pytest.raises(ParameterError, match="DataFrame"):
        release_utility([1, 2])
    with pytest.raises(ParameterError, match="week"):
        utility_by_week(pd.DataFrame({"true_count": [1], "noisy_count": [1.0], "released": [True]}))


def test_the_laplace_tails_are_the_two_sided_forms_to_the_bit():
    """The tail probability and partial mean behind expected_error share one exponential of −|s|/b: the same floats
    as the forms written with one branch for s >= 0 and one below (checked on both sides of 0, at ±0 and tiny s,
    and with one scale per row as the designer's searches use them)."""
    from odcore.privacy.utility import _laplace_tail

    def sf(s, b):
        return np.where(s >= 0, 0.5 * np.exp(-np.maximum(s, 0.0) / b), 1.0 - 0.5 * np.exp(np.minimum(s, 0.0) / b))

    def upper_mean(s, b):
        return np.where(s >= 0, 0.5 * (np.maximum(s, 0.0) + b) * np.exp(-np.maximum(s, 0.0) / b),
                        0.5 * (b - np.minimum(s, 0.0)) * np.exp(np.minimum(s, 0.0) / b))

    rng = np.random.default_rng(5)
    for spread in (1.0, 100.0, 1e4):
        s = rng.normal(0.0, spread, 20_000)
        s[:4] = [0.0, -0.0, 1e-300, -1e-300]
        for b in (0.01, 1.5, 100.0, rng.uniform(0.1, 50.0, (1, 1))):
            tail, mean = _laplace_tail(s, b)
            np.testing.assert_array_equal(tail, sf(s, b))
            np.testing.assert_array_equal(mean, upper_mean(s, b))
