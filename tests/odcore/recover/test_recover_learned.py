"""Learned membership attacks beside the exact optimum (odcore.recover.learned)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from odcore.cli import main
from odcore.errors import ParameterError
from odcore.privacy.attack import success_curve
from odcore.recover.learned import LearnedConfig, best_cut, learned_vs_exact, people_of_week


@pytest.mark.parametrize("seed", range(6))
def test_best_cut_is_the_best_of_every_cut(seed):
    rng = np.random.default_rng(seed)
    s = np.round(rng.normal(size=40), 1)           # ties on purpose
    y = rng.integers(0, 2, 40)
    cut, acc = best_cut(s, y)
    cands = np.concatenate([[-np.inf], np.unique(s)])
    brute = max(np.mean((s > c) == (y == 1)) for c in cands)
    assert acc == pytest.approx(brute)
    assert np.mean((s > cut) == (y == 1)) == pytest.approx(acc)


def test_two_threshold_reaches_the_optimum_and_one_threshold_does_not():
    # Houssiau et al. 2022 (Fig. 1, ε = 0.66): p_3 = 70.5 %, p_32 = 95.4 % by Monte Carlo
    cfg = LearnedConfig(epsilon=0.66, n_train=3000, n_test=6000, classifiers=("lr",), seed=1)
    res = learned_vs_exact(pd.Series([3, 32], index=["p3", "p32"]), cfg)
    t = res["people"].set_index("person")
    exact = success_curve(0.66, 32)
    assert t.loc["p3", "exact"] == pytest.approx(exact[3])
    mc = 2 * np.sqrt(0.25 / 6000)                    # two standard errors of a success near 0.75
    for p in ("p3", "p32"):
        assert abs(t.loc[p, "two_threshold"] - t.loc[p, "exact"]) < 2 * mc + 0.01
    # a linear rule wastes the information of clipping: measured 4–5 points below p_32
    assert t.loc["p32", "exact"] - t.loc["p32", "one_threshold"] > 2 * mc
    assert t.loc["p32", "exact"] - t.loc["p32", "lr"] > 2 * mc
    assert res["gap_pp"]["one_threshold"] > res["gap_pp"]["two_threshold"]


def test_people_with_no_pairs_are_a_coin_flip():
    res = learned_vs_exact(pd.Series([0, 0], index=[1, 2]), LearnedConfig(n_test=4000, classifiers=("lr",)))
    assert res["people"]["exact"].tolist() == [0.5, 0.5]
    assert abs(res["people"]["two_threshold"].iloc[0] - 0.5) < 0.03


def test_people_of_week_and_checks():
    pairs = pd.DataFrame({"user": [1, 1, 2, 3, 3, 3], "week": [0, 0, 0, 0, 0, 1], "origin": [1, 2, 1, 1, 2, 3],
                          "destination": [2, 1, 2, 2, 1, 1]})
    assert people_of_week(pairs, 0, 10).to_dict() == {1: 2, 2: 1, 3: 2}
    assert len(people_of_week(pairs, 0, 2, 0)) == 2
    with pytest.raises(ParameterError, match="week 5"):
        people_of_week(pairs, 5, 2)
    with pytest.raises(ParameterError, match="n_train"):
        LearnedConfig(n_train=3)
    with pytest.raises(ParameterError, match="classifier"):
        LearnedConfig(classifiers=("svm",))


def test_cli_attack_learned(capsys):
    assert main(["attack-learned", "--people", "2", "--classifiers", "lr", "--n-train", "100", "--n-test", "200",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["people"]) == 2
    assert set(out["gap_pp"]) >= {"two_threshold", "one_threshold", "best_classifier_success", "lr"}
    assert main(["attack-learned", "--people", "0"]) == 2
