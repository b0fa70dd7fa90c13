"""Risk measures of a contribution-bounded, thresholded release in the words regulators use (f-DP).

The attacker's best test for "is this person in the data?" is described by its trade-off curve: for each
false-positive rate α (FPR: people wrongly said to be in), the largest true-positive rate (TPR) any attacker can
reach (Dong, Roth, Su 2022, f-DP; Kulynych et al. 2024, "Attack-aware noise calibration"). From it:

- **TPR at FPR α** (regulators ask for a low α such as 1 %);
- **advantage** ``max_α (TPR − FPR)`` (total variation; accuracy ``½ + ½·advantage`` at equal priors);
- **posterior at prior π**: the largest belief "the person is in" an attacker can reach from a prior π,
  ``π e^{ε_max} / (π e^{ε_max} + 1 − π)`` with ``ε_max`` the largest privacy loss of the release — the slope of the
  trade-off curve at α = 0 — except with probability δ_ps (below), when it can be 1.

The release (neighbours: add or remove one person's whole week). Each person adds 1 to at most m pairs, each count
gets Laplace noise of scale m/ε (parameter ε/m per pair). An attacker who knows everyone else's data and ``j`` of the
person's kept pairs faces the ``j``-fold Laplace(ε/m) pair, whose trade-off curve is exact
(:func:`odcore.privacy.attack.tpr_at_fpr`, :func:`odcore.privacy.pld.hockey_stick_delta`). Thresholding adds one
event: a pair only this person makes can be published (probability at most δ_ps =
:func:`odcore.privacy.accounting.partition_selection_delta`), which gives them away; it never happens without them.
So the "in" world is ``(1 − δ_ps)·(Laplace in) + δ_ps·(certain giveaway)`` against the "out" world's Laplace law,
and for every test ``TPR ≤ (1 − δ_ps)·TPR_j(α) + δ_ps``; the advantage is at most ``(1 − δ_ps)·TV_j + δ_ps``. Pairs
others also make are post-processed Laplace counts, so these are upper bounds, tight for busy pairs.

Two attackers are named throughout (:class:`Attacker`):

``known``
    Houssiau et al.'s attacker: knows everyone else's data and ``k`` of the person's trips (j = min(k, m), worst
    case: all known trips kept).
``full``
    knows everything, the person's whole week included: j = m (any person with at least m unique trips).
"""

from __future__ import annotations

import math
from enum import StrEnum
from functools import lru_cache

import numpy as np

from odcore.errors import ParameterError, check_int, check_positive
from odcore.privacy import pld
from odcore.privacy.accounting import partition_selection_delta
from odcore.privacy.attack import tpr_at_fpr

__all__ = ["Attacker", "attacker_words", "largest_pair_epsilon", "posterior", "risk_measures", "tpr_bound",
           "typical_trips"]


def typical_trips(trips) -> int:
    """Unique trips of the typical person of a week: the median of the people's unique trips by nearest rank (a
    number a person of the week has; 0 for a week without people). Every page, the designer and the command line
    take the typical person this way (:mod:`odcore.report.facts`).

    >>> typical_trips([1, 3, 5, 5, 7, 9]), typical_trips([20, 21]), typical_trips([])
    (5, 20, 0)
    """
    t = np.asarray(trips)
    return int(np.quantile(t, 0.5, method="nearest")) if t.size else 0


class Attacker(StrEnum):
    """Which attacker a risk figure bounds (see the module docstring)."""

    KNOWN = "known"
    FULL = "full"


def attacker_words(attacker: Attacker | str, known_trips: int | None) -> str:
    """The attacker in a sentence."""
    if Attacker(attacker) is Attacker.FULL:
        return "an attacker who knows everyone else's data and all of the person's trips in the week"
    return f"an attacker who knows everyone else's data and {known_trips} of the person's trips in the week"


def _fraction(name: str, value) -> float:
    x = float(value) if isinstance(value, (int, float)) else math.nan
    if not 0 < x < 1:
        raise ParameterError(f"{name} must be in (0, 1), got {name}={value!r}.")
    return x


def _pairs_seen(attacker: Attacker | str, known_trips: int | None, max_pairs: int) -> int:
    if Attacker(attacker) is Attacker.FULL:
        return max_pairs
    return min(check_int("known_trips", known_trips, minimum=1), max_pairs)


def _partition_delta(epsilon: float, threshold: float, max_pairs: int) -> float:
    return float(partition_selection_delta(epsilon, threshold, max_pairs, 1))


@lru_cache(maxsize=8192)
def tpr_bound(epsilon: float, max_pairs: int, threshold: float, pairs_seen: int, fpr: float) -> float:
    """Largest TPR at false-positive rate ``fpr`` of an attacker who sees ``pairs_seen`` of the person's kept pairs
    (and everyone else's data): ``min(1, (1 − δ_ps)·TPR_j(α) + δ_ps)``, ``TPR_j`` exact for the j-fold Laplace(ε/m).

    >>> round(tpr_bound(1.0, 10, 200, 10, 0.01), 4)      # ten pairs at ε/m = 0.1: 2.13 % at FPR 1 %
    0.0213
    """
    e = check_positive("epsilon", epsilon)
    m = check_int("max_pairs", max_pairs, minimum=1)
    j = min(check_int("pairs_seen", pairs_seen, minimum=0), m)
    a = _fraction("fpr", fpr)
    d = _partition_delta(e, threshold, m)
    t = float(tpr_at_fpr(j, e / m, a)[0]) if j else a
    return min(1.0, (1.0 - d) * t + d)


@lru_cache(maxsize=8192)
def _advantage(epsilon: float, max_pairs: int, threshold: float, pairs_seen: int) -> float:
    m = max_pairs
    d = _partition_delta(epsilon, threshold, m)
    tv = float(pld.hockey_stick_delta(0.0, pairs_seen, epsilon / m)) if pairs_seen else 0.0
    return min(1.0, (1.0 - d) * tv + d)


def risk_measures(epsilon: float, max_pairs: int, threshold: float, *, known_trips: int | None = None,
                  fpr: float = 0.01, prior: float = 0.5) -> dict:
    """TPR at ``fpr``, advantage, accuracy at equal priors and the largest posterior from ``prior``, for the two
    attackers of the module docstring.

    Returns
    -------
    dict
        ``fpr``, ``prior``, ``delta_partition`` (δ_ps, the chance of a giveaway), and ``known`` (when
        ``known_trips`` is given) and ``full``, each with ``attacker`` (words), ``pairs_seen``, ``tpr``,
        ``advantage``, ``success`` (½ + ½·advantage), ``epsilon_max`` (largest privacy loss) and ``posterior``.
    """
    e = check_positive("epsilon", epsilon)
    m = check_int("max_pairs", max_pairs, minimum=1)
    a = _fraction("fpr", fpr)
    pi = _fraction("prior", prior)
    out = {"fpr": a, "prior": pi, "delta_partition": _partition_delta(e, threshold, m)}
    kinds = [Attacker.FULL] if known_trips is None else [Attacker.KNOWN, Attacker.FULL]
    for att in kinds:
        j = _pairs_seen(att, known_trips, m)
        adv = _advantage(e, m, float(threshold), j)
        eps_max = j * e / m
        out[att.value] = {
            "attacker": attacker_words(att, known_trips), "pairs_seen": j,
            "tpr": tpr_bound(e, m, float(threshold), j, a), "advantage": adv, "success": 0.5 + 0.5 * adv,
            "epsilon_max": eps_max, "posterior": posterior(eps_max, pi),
        }
    return out


def posterior(epsilon_max: float, prior: float) -> float:
    """``π e^ε / (π e^ε + 1 − π)``, computed stably.

    >>> round(posterior(math.log(3), 0.5), 4)
    0.75
    """
    lo = math.log(prior) - math.log1p(-prior) + epsilon_max          # log-odds after the loss
    return 1.0 / (1.0 + math.exp(-lo)) if lo > -700 else 0.0


@lru_cache(maxsize=1024)
def largest_pair_epsilon(measure: str, pairs_seen: int, bound: float, *, fpr: float = 0.01, prior: float = 0.5,
                         delta_cap: float = 0.0) -> float:
    """Largest per-pair Laplace parameter ε/m at which ``measure`` (``tpr``, ``advantage`` or ``posterior``) of an
    attacker seeing ``pairs_seen`` pairs stays <= ``bound``, with the giveaway chance taken at its cap ``delta_cap``
    (thresholds are chosen so that δ_ps <= that cap, and every measure grows with δ_ps: the answer holds for every m).

    The posterior is solved in closed form (``j·ε/m = logit(bound) − logit(prior)``); TPR and advantage by bisection
    on log(ε/m) to 0.05 %, starting from the pure-DP bracket (``TPR <= e^{jε/m}·α + δ``).
    """
    j = check_int("pairs_seen", pairs_seen, minimum=1)
    d = float(delta_cap)
    if measure == "posterior":
        return (math.log(bound) - math.log1p(-bound) - math.log(prior) + math.log1p(-prior)) / j

    def value(e1: float) -> float:
        if measure == "tpr":
            t = float(tpr_at_fpr(j, e1, fpr)[0])
        else:
            t = float(pld.hockey_stick_delta(0.0, j, e1))
        return (1.0 - d) * t + d

    if measure == "tpr":
        if bound <= fpr + d:
            raise ParameterError(f"TPR <= {bound:g} at FPR {fpr:g} cannot be met with δ = {d:g}.")
        lo = math.log((bound - d) / fpr) / j            # pure DP: TPR <= e^{jε₁}α + δ
    else:
        if bound <= d:
            raise ParameterError(f"advantage <= {bound:g} cannot be met with δ = {d:g}.")
        lo = 2.0 * math.atanh(min(bound - d, 1 - 1e-12)) / j   # pure DP: TV <= tanh(jε₁/2)
    hi = lo * 2.0
    while value(hi) <= bound:
        lo, hi = hi, hi * 2.0
    while hi / lo > 1.0005:
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if value(mid) <= bound else (lo, mid)
    return lo
