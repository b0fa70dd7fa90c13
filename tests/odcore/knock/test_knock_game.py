"""The distinguishability game and its priors (Pyrgelis et al. 2018, §III-B, §IV-A, §VI, §VII-B)."""

from __future__ import annotations

import numpy as np
import pytest

from odcore.errors import ParameterError
from odcore.knock.game import GameConfig, make_game, sample_unique_groups
from odcore.knock.metrics import privacy_loss, sample_targets

N, SLOTS = 534, 504  # SFC sizes


def _unique_rows(g):
    return len(np.unique(np.sort(g, axis=1), axis=0)) == len(g)


def _check_labels(groups, labels, target, m):
    assert groups.shape == (len(labels), m)
    assert labels.sum() * 2 == len(labels)  # balanced
    has = (groups == target).any(axis=1)
    np.testing.assert_array_equal(has, labels == 1)
    assert all(len(set(row)) == m for row in groups)  # no user twice in a group
    assert _unique_rows(groups[labels == 1])
    assert _unique_rows(groups[labels == 0])


def test_subset_prior_paper_sizes():
    g = make_game(N, SLOTS, target=17, config=GameConfig(prior="subset", m=10, alpha=0.2), rng=0)
    _check_labels(g.train_groups, g.train_labels, 17, 10)
    _check_labels(g.test_groups, g.test_labels, 17, 10)
    assert len(g.train_groups) == 400
    assert len(g.test_groups) == 100
    known = set(g.train_groups.ravel()) - {17}
    unknown = set(g.test_groups.ravel()) - {17}
    assert len(known) <= 105  # floor(0.2 * 534) = 106 users including the target (§VI-A: 106 cabs)
    assert not known & unknown  # test groups come from users outside the prior
    assert g.train_windows == g.test_windows == ((0, 168),)  # T_O = T_I = first week


def test_same_groups_prior_trains_on_past_weeks():
    g = make_game(N, SLOTS, target=3, config=GameConfig(prior="same-groups", m=100), rng=1)
    _check_labels(g.train_groups, g.train_labels, 3, 100)
    assert len(g.train_groups) == 150  # beta
    np.testing.assert_array_equal(g.train_groups, g.test_groups)
    assert g.train_windows == ((0, 168), (168, 336))
    assert g.test_windows == ((336, 504),)
    assert len(g.sample_labels("train")) == 300


def test_shorter_inference_periods_observe_the_same_weekday():
    # §VI-C: days (24 slots), inference on the third week's Monday (period 14), observed on the Mondays before
    cfg = GameConfig(prior="same-groups", m=100, period_slots=24, inference_period=14, observation_stride=7)
    g = make_game(N, SLOTS, target=3, config=cfg, rng=1)
    assert g.test_windows == ((336, 360),)
    assert g.train_windows == ((0, 24), (168, 192))
    # Saturday of the third week (period 19): Saturdays 5 and 12; 8-hour periods: 21 a week
    g = make_game(N, SLOTS, target=3, config=GameConfig(prior="same-groups", m=100, period_slots=24,
                                                        inference_period=19, observation_stride=7), rng=1)
    assert g.train_windows == ((120, 144), (288, 312))
    g = make_game(N, SLOTS, target=3, config=GameConfig(prior="same-groups", m=100, period_slots=8,
                                                        inference_period=43, observation_stride=21), rng=1)
    assert g.train_windows == ((8, 16), (176, 184))
    every = make_game(N, SLOTS, target=3, config=GameConfig(prior="same-groups", m=100, period_slots=24,
                                                            inference_period=14), rng=1)
    assert len(every.train_windows) == 20
    with pytest.raises(ParameterError, match="observation_stride"):
        GameConfig(observation_stride=0)


def test_different_groups_prior_split():
    g = make_game(N, SLOTS, target=5, config=GameConfig(prior="different-groups", m=50), rng=2)
    assert len(g.train_groups) == 300
    assert len(g.test_groups) == 100
    assert g.train_labels.sum() == 150
    assert g.test_labels.sum() == 50
    both = np.concatenate([g.train_groups, g.test_groups])
    assert _unique_rows(both)
    assert g.test_windows == ((336, 504),)
    assert len(g.train_windows) == 2


def test_perfect_prior_trains_on_released_groups():
    g = make_game(N, SLOTS, target=9, config=GameConfig(prior="perfect", m=500), rng=3)
    np.testing.assert_array_equal(g.train_groups, g.test_groups)
    assert g.train_windows == g.test_windows == ((0, 168),)
    _check_labels(g.train_groups, g.train_labels, 9, 500)


def test_same_seed_same_game_and_different_seed_differs():
    cfg = GameConfig(prior="subset", m=5)
    a = make_game(100, 168, 1, cfg, rng=42)
    b = make_game(100, 168, 1, cfg, rng=42)
    c = make_game(100, 168, 1, cfg, rng=43)
    np.testing.assert_array_equal(a.train_groups, b.train_groups)
    np.testing.assert_array_equal(a.test_labels, b.test_labels)
    assert not np.array_equal(a.train_groups, c.train_groups)


def test_unique_groups_are_uniform():
    # every user of the pool appears in a group with probability m/n (chi-square against uniform)
    from scipy import stats

    g = sample_unique_groups(0, np.arange(50), 5, 2000)
    counts = np.bincount(g.ravel(), minlength=50)
    assert stats.chisquare(counts).pvalue > 1e-4
    assert _unique_rows(g)


def test_impossible_uniqueness_is_an_error_or_recorded_repeat():
    with pytest.raises(ParameterError, match="distinct groups"):
        make_game(30, 168, 0, GameConfig(prior="perfect", m=1, n_groups=40))
    notes: list[str] = []
    g = sample_unique_groups(0, np.arange(10), 1, 20, allow_repeats=True, notes=notes)
    assert g.shape == (20, 1)
    assert notes
    with pytest.raises(ParameterError, match="m=200"):
        make_game(N, SLOTS, 0, GameConfig(prior="subset", m=200, alpha=0.2))
    with pytest.raises(ParameterError, match="2 periods"):
        make_game(N, 200, 0, GameConfig(prior="same-groups", m=10))
    with pytest.raises(ParameterError, match="alpha"):
        GameConfig(alpha=1.5)


def test_target_sampling_by_mobility_thirds():
    reports = np.arange(90)
    idx, cls = sample_targets(reports, 12, rng=0)
    assert len(idx) == 12
    assert list(cls).count("high") == list(cls).count("mild") == list(cls).count("somewhat") == 4
    assert (reports[idx[cls == "high"]] >= 60).all()
    assert (reports[idx[cls == "somewhat"]] < 30).all()
    assert len(set(idx)) == 12


def test_privacy_loss_eq3():
    np.testing.assert_allclose(privacy_loss(np.array([1.0, 0.75, 0.5, 0.2])), [1.0, 0.5, 0.0, 0.0])
