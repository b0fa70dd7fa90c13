"""The Attack page's cached computations: the success curves, the week's pairs and people, one person's others and
risk, and every person's risk."""

from __future__ import annotations

import numpy as np
import pandas as pd

from odapp.data.cache import week_pairs_prepared
from odapp.shared.caching import cache_data, cache_resource
from odcore.od.pairs import bound_contributions
from odcore.privacy import attack
from odcore.privacy.attack import bounded_success_curve as _curve
from odcore.privacy.attack import person_others, risk_summary, roc_plain
from odcore.privacy.attack import user_risk as risk
from odcore.privacy.attack import week_risk as _week_risk
from odcore.privacy.release import (
    Mode,
)


@cache_data(max_entries=64, show_spinner=False)
def success_curve(epsilon: float, k_max: int, prior: float):
    """Exact p_k (equal priors), the Bayes success at ``prior`` and the posterior bound, for k = 0..k_max."""
    k = np.arange(k_max + 1)
    df = pd.DataFrame({"k": k, "success": attack.success_curve(epsilon, k_max),
                       "bound": attack.posterior_bound(epsilon, 0.5)})
    if prior != 0.5:
        df["bayes_success"] = np.asarray(attack.bayes_success(k, epsilon, prior), dtype=float)
        df["posterior_bound_prior"] = attack.posterior_bound(epsilon, prior)
    return df


@cache_data(max_entries=64, show_spinner=False)
def bounded_success_curve(epsilon: float, max_pairs: int, k_max: int):
    """:func:`odcore.privacy.attack.bounded_success_curve`: the per-person (bounded) release, k = 0..k_max."""
    return _curve(epsilon, max_pairs, k_max)


def pairs_key(release_config, seed: int) -> tuple:
    """What the week's (user, pair) rows of a release depend on besides data and week (:func:`attack_pairs`, the
    attacker pool): per user, the contribution bound and the seed of :func:`odcore.od.pairs.bound_contributions`; per
    metric nothing (not ε, threshold or seed)."""
    if release_config.mode is Mode.USER_LEVEL:
        return (release_config.mode.value, int(release_config.max_pairs), int(seed))
    return (release_config.mode.value,)


def attack_pairs(dataset_id: str, od_config, week: int, release_config, seed: int, _od):
    """The week's (user, pair) rows the release counts, and per pair the count of *other* users' trips.

    Per-metric: every unique pair; user-level: the pairs kept by :func:`odcore.od.pairs.bound_contributions`
    (seeded as the release). Returns ``(pairs, counts or None)`` as :func:`odcore.privacy.attack.week_risk` takes them.
    Built once per data, week and :func:`pairs_key`: an ε or threshold press (and, per metric, a seed) reuses them.
    """
    return _attack_pairs(dataset_id, od_config, week, pairs_key(release_config, seed),
                         _release_config=release_config, _seed=seed, _od=_od)


@cache_resource(max_entries=16, show_spinner=False)
def _attack_pairs(dataset_id: str, od_config, week: int, key: tuple, _release_config, _seed: int, _od):
    release_config, seed = _release_config, _seed
    if release_config.mode is Mode.USER_LEVEL:   # the week as the release prepared it (and its seed's draw)
        pairs, _ = bound_contributions(week_pairs_prepared(dataset_id, od_config, week, _od=_od),
                                       release_config.max_pairs, rng=seed)
        return pairs, None
    counts = _od.counts
    return _od.week_pairs(week), counts.loc[counts["week"].to_numpy() == week]


@cache_resource(max_entries=16, show_spinner=False)
def attack_users(dataset_id: str, od_config, week: int, key: tuple, _pairs):
    """The Attack page's people of the week: unique pairs per user (``Series`` indexed by user, sorted), from
    :func:`attack_pairs`' rows of :func:`pairs_key` ``key``. Grouping ~10⁵ rows took about a third of every rerun
    of the page, a rerun with nothing changed included. Shared and read-only."""
    return _pairs.groupby("user", sort=True).size()


@cache_data(max_entries=256, show_spinner=False)
def attack_others(dataset_id: str, od_config, week: int, key: tuple, user, _pairs, _counts):
    """Per pair of ``user``, the count of the *other* users who made it (the attacker's knowledge in
    :func:`odcore.privacy.attack.user_risk`), as a float array (:func:`odcore.privacy.attack.person_others`: from
    the person's rows of :func:`attack_pairs` and the rows on their pairs, not a table of the whole week)."""
    return person_others(_pairs, _counts, week, user)


@cache_resource(max_entries=16, show_spinner="Attacking every user of the week…")
def week_risk(dataset_id: str, od_config, week: int, release_config, seed: int, _pairs, _counts):
    risk, report = _week_risk(_pairs, week, 1.0 / release_config.scale, release_config.threshold, counts=_counts)
    return risk, report, risk_summary(risk)


def user_risk(others: tuple[float, ...], epsilon_pair: float, threshold: float):
    """:func:`odcore.privacy.attack.user_risk` with its ROC, and the ROC of the same person with every pair published
    (:func:`~odcore.privacy.attack.roc_plain`, which a threshold change does not touch: kept on its own)."""
    return _user_risk(others, epsilon_pair, threshold), _roc_plain(len(others), epsilon_pair)


@cache_data(max_entries=64, show_spinner=False)
def _user_risk(others: tuple[float, ...], epsilon_pair: float, threshold: float):
    return risk(list(others), epsilon_pair, threshold, roc=True)


@cache_data(max_entries=64, show_spinner=False)
def _roc_plain(k: int, epsilon_pair: float):
    return roc_plain(k, epsilon_pair)
