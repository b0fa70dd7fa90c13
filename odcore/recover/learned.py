"""Learned membership attacks beside the exact optimum, on the OD release, for the same people.

The game is the one of :mod:`odcore.privacy.attack` (Houssiau et al. 2022, Methods): the attacker knows everyone's
records but the victim's and the victim's ``k`` unique weekly pairs; subtracting the known counts leaves, per pair,
``y_j = b + Lap(1/ε)`` with ``b = 1`` if the victim is in (fair coin). The exact success of the optimal attacker is
``p_k`` (:func:`odcore.privacy.attack.success_curve`). Beside it, attackers that *learn* their rule from games
they simulate (``n_train`` draws), scored on fresh games (``n_test``):

- **two-threshold** (the family Liu et al. 2024, arXiv 2412.20456, find near-optimal under Laplace noise): score
  ``Σ_j clip(y_j, lo, hi)``, "in" above a cut; ``lo``, ``hi`` and the cut fitted by grid search on the training
  games. The likelihood ratio test is the member ``lo = 0, hi = 1`` (the per-pair log-likelihood ratio is
  ``ε·(clip(y, 0, 1)·2 − 1)``), so this attacker can reach ``p_k``;
- **one-threshold**: ``Σ_j y_j`` above a fitted cut (a linear rule; what Liu et al. find a neural classifier
  learns);
- **Knock Knock's classifiers** (:mod:`odcore.knock.classifiers`: lr, knn, rf, mlp with the paper's settings) on
  the ``k`` residuals; the best of them on the test games is reported.

The *gap* of an attacker is ``p_k − its success``, in percentage points, averaged over the people.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from odcore.errors import ParameterError, check_positive
from odcore.knock.classifiers import fit_scores, parse_classifiers
from odcore.privacy.attack import success_curve

#: Candidate clip bounds of the two-threshold attacker (in units of one count).
CLIP_GRID = np.round(np.arange(-1.5, 2.51, 0.25), 2)


@dataclass(frozen=True)
class LearnedConfig:
    """Settings of :func:`learned_vs_exact`."""

    epsilon: float = 0.66
    n_train: int = 2000
    n_test: int = 4000
    classifiers: tuple[str, ...] = ("lr", "knn", "rf", "mlp")
    seed: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_positive("epsilon", self.epsilon))
        for name in ("n_train", "n_test"):
            v = getattr(self, name)
            if int(v) != v or v < 20:
                raise ParameterError(f"{name} must be an integer >= 20, got {name}={v!r}.")
        object.__setattr__(self, "classifiers", tuple(c.value for c in parse_classifiers(list(self.classifiers))))


def games(k: int, epsilon: float, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``n`` games of a victim with ``k`` pairs: residuals ``y`` (``n × max(k, 1)``; a zero column for ``k = 0``)
    and membership labels (a fair coin each)."""
    b = rng.integers(0, 2, n)
    if k == 0:
        return np.zeros((n, 1)), b
    return b[:, None] + rng.laplace(0.0, 1.0 / epsilon, (n, k)), b


def best_cut(score: np.ndarray, label: np.ndarray) -> tuple[float, float]:
    """``(cut, accuracy)`` of the rule "in iff score > cut" with the highest accuracy on ``(score, label)``."""
    order = np.argsort(score, kind="stable")
    s, y = score[order], label[order]
    n = s.size
    # cut below index i: predictions 0 for s[:i], 1 for s[i:]; only between distinct values
    correct = np.concatenate([[0], np.cumsum(1 - y)]) + np.concatenate([np.cumsum(y[::-1])[::-1], [0]])
    valid = np.ones(n + 1, bool)
    valid[1:n] = s[1:] > s[:-1]
    i = int(np.argmax(np.where(valid, correct, -1)))
    cut = -np.inf if i == 0 else (np.inf if i == n else (s[i - 1] + s[i]) / 2)
    return float(cut), float(correct[i] / n)


def fit_two_threshold(y: np.ndarray, label: np.ndarray) -> dict[str, float]:
    """Grid search of ``lo < hi`` (:data:`CLIP_GRID`) and the cut for ``Σ clip(y, lo, hi)``."""
    best = {"accuracy": -1.0}
    for i, lo in enumerate(CLIP_GRID):
        for hi in CLIP_GRID[i + 1:]:
            cut, acc = best_cut(np.clip(y, lo, hi).sum(axis=1), label)
            if acc > best["accuracy"]:
                best = {"lo": float(lo), "hi": float(hi), "cut": cut, "accuracy": acc}
    return best


def threshold_accuracy(score: np.ndarray, cut: float, label: np.ndarray) -> float:
    return float(np.mean((score > cut) == (label == 1)))


def attack_one(k: int, config: LearnedConfig, rng: np.random.Generator) -> dict[str, Any]:
    """Every attacker's test success for a victim with ``k`` pairs."""
    yt, bt = games(k, config.epsilon, config.n_train, rng)
    ye, be = games(k, config.epsilon, config.n_test, rng)
    two = fit_two_threshold(yt, bt)
    cut1, _ = best_cut(yt.sum(axis=1), bt)
    out = {"two_threshold": threshold_accuracy(np.clip(ye, two["lo"], two["hi"]).sum(axis=1), two["cut"], be),
           "two_threshold_lo": two["lo"], "two_threshold_hi": two["hi"],
           "one_threshold": threshold_accuracy(ye.sum(axis=1), cut1, be)}
    seed = int(rng.integers(2**31))
    for name in config.classifiers:
        (s,) = fit_scores(name, yt, bt, [ye], seed=seed, n_jobs=1)
        out[name] = float(np.mean((s > 0.5) == (be == 1)))
    best = max(config.classifiers, key=lambda c: out[c])
    out["best_classifier"], out["best_classifier_success"] = best, out[best]
    return out


def learned_vs_exact(people_k: pd.Series, config: LearnedConfig | None = None) -> dict[str, Any]:
    """Exact ``p_k`` and every learned attacker's success for each person (``people_k``: person id -> k).

    People with the same ``k`` play the same game: it is simulated once per distinct ``k``. Returns
    ``{"people": DataFrame, "gap": {attacker: mean pp below p_k}, "max_gap": {...}, ...}``.
    """
    config = config or LearnedConfig()
    if len(people_k) == 0:
        raise ParameterError("no people to attack: people_k is empty.")
    ks = people_k.to_numpy(dtype=np.int64)
    if (ks < 0).any():
        raise ParameterError("k (unique pairs per person) must be >= 0.")
    rng = np.random.default_rng(config.seed)
    exact = success_curve(config.epsilon, int(ks.max()))
    per_k = {int(k): attack_one(int(k), config, rng) for k in np.unique(ks)}
    rows = []
    for person, k in zip(people_k.index, ks, strict=True):
        r = per_k[int(k)]
        rows.append({"person": person, "k": int(k), "exact": float(exact[k]), "two_threshold": r["two_threshold"],
                     "one_threshold": r["one_threshold"], "best_classifier": r["best_classifier"],
                     "best_classifier_success": r["best_classifier_success"],
                     **{c: r[c] for c in config.classifiers}})
    frame = pd.DataFrame(rows)
    attackers = ["two_threshold", "one_threshold", "best_classifier_success", *config.classifiers]
    gap = {a: round(float((frame["exact"] - frame[a]).mean() * 100), 2) for a in attackers}
    max_gap = {a: round(float((frame["exact"] - frame[a]).max() * 100), 2) for a in attackers}
    # the Monte Carlo error of one success estimate on n_test games (95 %, at p = 0.75)
    mc = round(float(1.96 * np.sqrt(0.75 * 0.25 / config.n_test) * 100), 2)
    return {"people": frame, "gap_pp": gap, "max_gap_pp": max_gap, "mc_error_pp": mc,
            "epsilon": config.epsilon, "n_train": config.n_train, "n_test": config.n_test}


def people_of_week(pairs: pd.DataFrame, week: int, n: int, rng: np.random.Generator | int | None = None
                   ) -> pd.Series:
    """``n`` people of ``week`` drawn at random (all if fewer), as person id -> their unique pairs ``k``."""
    rng = np.random.default_rng(rng)
    p = pairs[pairs["week"] == week]
    if p.empty:
        raise ParameterError(f"week {week} has no pairs.")
    k = p.groupby("user").size()
    if n < len(k):
        k = k.iloc[np.sort(rng.choice(len(k), size=n, replace=False))]
    return k
