"""The privacy budget of the weekly OD release: per metric, per user-week, over weeks; basic, advanced, tight.

What is claimed and what it adds up to:

- Per metric (Bassolas et al. reply): each (week, A, B) count gets Laplace(1/ε) noise and is published iff the
  noisy count is >= τ, which is (ε, δ)-DP for the presence of one user on that one pair, with
  δ = ½·exp(−ε(τ − 1)) = 2.1e-29 at ε = 0.66, τ = 100 (:func:`odcore.privacy.release.threshold_delta`).
- Per user and week (Houssiau et al. 2022, Methods, "Conservative estimate of the privacy loss"): a user with n
  unique trips touches n counts, so basic composition gives (n·ε, n·δ): 46.2 at n = 70. (Houssiau et al. keep
  δ = 2.1e-29 there; composing n thresholded releases costs n·δ by basic composition, or exactly
  1 − (1 − δ)^n for the thresholding event, the Google partition-selection rule; both are reported.)
- Over W weeks: W·n·ε (2402.4 for 52 weeks, 70 trips).
- Advanced composition (Dwork, Rothblum, Vadhan 2010; Dwork & Roth 2014, Thm 3.20): k mechanisms each (ε, δ)-DP
  are (ε', kδ + δ')-DP with ε' = sqrt(2k ln(1/δ'))·ε + k·ε·(e^ε − 1).
- Tight: the exact ε(δ) of the k-fold Laplace composition from its privacy-loss distribution
  (:mod:`odcore.privacy.pld`, cross-checked in the tests against Google's ``dp_accounting`` PLD). For the thresholded
  release the δ of the thresholding event is added: δ_total = δ_PLD + (1 − (1 − δ₁)^n).
  Houssiau et al., Methods: "while better bounds can be obtained, they require larger values of δ" — the ε(δ)
  curves (:func:`epsilon_delta_curve`) show it.
- Posterior bound (Houssiau et al., Methods, "Theoretical bounds"): for an ε-DP mechanism and prior π that the
  user is in the data, the attacker's posterior is at most π·e^ε / (π·e^ε + 1 − π); e^ε/(1 + e^ε) = 0.659 at
  π = ½, ε = 0.66 — the "16%" over a random guess of Bassolas et al.

Why odcore.privacy.pld for the tight value and dp_accounting only as a reference: odcore.privacy.pld computes the Laplace PLD in
closed form (no discretisation, vectorised over k, cheap at k = 3640), while dp_accounting discretises the loss
(pessimistic by up to k times the discretisation interval) and is a test-only dependency (requirements-dev.txt).
"""

from __future__ import annotations

import collections
import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd

from odcore.data.validate import check_param
from odcore.errors import (
    ParameterError,
    check_max_pairs,
    check_positive,
    check_prob,
    check_threshold,
)
from odcore.privacy import pld, pld_weeks
from odcore.privacy.rdp import check_count, rdp_epsilon
from odcore.privacy.release import release_probability, threshold_delta

__all__ = [
    "DELTA_NO_GUARANTEE",
    "BudgetConfig",
    "DeltaParts",
    "advanced_composition",
    "basic_composition",
    "budget",
    "default_user_threshold",
    "delta_parts",
    "epsilon_delta_curve",
    "epsilon_over_weeks",
    "epsilon_vs_trips",
    "loss_exceeds_probability",
    "partition_selection_delta",
    "partition_threshold",
    "person_week",
    "posterior_bound",
    "posterior_gain",
    "rdp_epsilon",
    "tight_epsilon",
    "user_level_budget",
]

TIGHT_K_MAX = 400
"""Largest k for which :func:`budget` and the curves call the exact PLD (odcore.privacy.pld's cost grows like k^2.7:
~1.3 s at k = 400, ~8 s at k = 800 on one core); above it the tight value is left out (None / NaN) and the
Rényi-DP bound :func:`rdp_epsilon` (cheap, within a few % of tight) is given instead."""

def _out(x: np.ndarray, like):
    return float(x) if np.ndim(like) == 0 else x


# ---------------------------------------------------------------------------------------------------------------
# Posterior bound
# ---------------------------------------------------------------------------------------------------------------

def posterior_bound(epsilon, prior: float = 0.5):
    """Largest posterior an attacker can reach that the user is in the data, for an ε-DP release.

    Houssiau et al. 2022, Methods, "Theoretical bounds": π(y)/(1 − π(y)) <= e^ε · prior/(1 − prior), so
    π(y) <= prior·e^ε / (prior·e^ε + 1 − prior); with prior ½ this is e^ε/(1 + e^ε) (0.659 at ε = 0.66).
    Computed as a logistic function, so huge ε (2402.4) gives 1.0 without overflow.

    Parameters
    ----------
    epsilon:
        Scalar or array, > 0.
    prior:
        Attacker's prior probability that the user is in the data, in (0, 1).

    Examples
    --------
    >>> round(posterior_bound(0.66), 3)
    0.659
    """
    eps = np.asarray(epsilon, dtype=float)
    if eps.size == 0 or np.any(~np.isfinite(eps)) or np.any(eps <= 0):
        raise ParameterError(f"epsilon must be finite and > 0, got epsilon={epsilon!r}.")
    p = check_prob("prior", prior)
    log_odds = eps + math.log(p) - math.log1p(-p)
    return _out(1.0 / (1.0 + np.exp(-log_odds)), epsilon)


def posterior_gain(epsilon, prior: float = 0.5):
    """Posterior bound minus the prior: 0.159 at ε = 0.66 — Bassolas et al.'s "at most 16%" over a random guess."""
    return _out(np.asarray(posterior_bound(epsilon, prior)) - prior, epsilon)


# ---------------------------------------------------------------------------------------------------------------
# Composition
# ---------------------------------------------------------------------------------------------------------------

def basic_composition(epsilon: float, delta: float, k):
    """k mechanisms each (ε, δ)-DP are (k·ε, k·δ)-DP (Dwork & Roth 2014, Thm 3.16). Vectorised over k.

    >>> basic_composition(0.66, 0.0, 70)[0]
    46.2
    """
    eps = check_positive("epsilon", epsilon)
    d = check_positive("delta", delta, allow_zero=True)
    kk = check_count("k", k)
    e, dd = np.round(kk * eps, 12), np.minimum(kk * d, 1.0)
    return _out(e, k), _out(dd, k)


def advanced_composition(epsilon: float, k, delta_prime: float, delta: float = 0.0):
    """Advanced composition (Dwork, Rothblum, Vadhan 2010; Dwork & Roth 2014, Thm 3.20).

    k mechanisms each (ε, δ)-DP are (ε', k·δ + δ')-DP with
    ε' = sqrt(2k·ln(1/δ'))·ε + k·ε·(e^ε − 1). Vectorised over k.

    Returns
    -------
    (epsilon_total, delta_total)
    """
    eps = check_positive("epsilon", epsilon)
    dp = check_prob("delta_prime", delta_prime)
    d = check_positive("delta", delta, allow_zero=True)
    kk = check_count("k", k).astype(float)
    e = np.sqrt(2.0 * kk * math.log(1.0 / dp)) * eps + kk * eps * math.expm1(eps)
    return _out(e, k), _out(np.minimum(kk * d + dp, 1.0), k)


def tight_epsilon(delta: float, k, epsilon: float):
    """Exact smallest ε' such that the k-fold Laplace(1/ε) composition is (ε', δ)-DP.

    Delegates to :func:`odcore.privacy.pld.epsilon_for_delta` (exact privacy-loss distribution of the k-fold Laplace
    mechanism, sensitivity 1 per coordinate); vectorised over k. Never above basic composition k·ε.
    """
    # The attack module's exact PLD, imported lazily (one implementation in the engine).
    eps = check_positive("epsilon", epsilon)
    d = check_prob("delta", delta)
    kk = check_count("k", k)
    res = np.asarray(pld.epsilon_for_delta(d, kk, eps), dtype=float)
    return _out(np.minimum(res, kk * eps), k)


def _tight_or_nan(delta: float, k: np.ndarray, epsilon: float) -> np.ndarray:
    """Tight ε for k <= TIGHT_K_MAX, NaN above (see :data:`TIGHT_K_MAX`)."""
    k = np.asarray(k)
    out = np.full(k.shape, np.nan)
    ok = k <= TIGHT_K_MAX
    if ok.any():
        out[ok] = tight_epsilon(delta, k[ok], epsilon)
    return out


# ---------------------------------------------------------------------------------------------------------------
# One budget
# ---------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class BudgetConfig:
    """Parameters of the budget computation (the ``budget`` CLI's flags, same names).

    Parameters
    ----------
    epsilon:
        Per-metric Laplace ε (0.66).
    threshold:
        Publication threshold τ (100), >= 1.
    trips:
        Unique trips (OD pairs) of one user in one week, n (70 in Houssiau et al.'s conservative estimate).
    weeks:
        Number of weekly releases W (52).
    delta:
        δ at which advanced composition and the tight ε(δ) are evaluated (1e-6), in (0, 1).
    max_pairs:
        Optional user-level contribution bound; adds the budget of the user-level release
        (:class:`odcore.privacy.release.Mode` ``user_level``, noise max_pairs/ε).
    total_interval:
        Loss-grid step of the tight ε over many weeks when ``weeks·trips`` exceeds :data:`TIGHT_K_MAX`
        (:func:`odcore.privacy.pld_weeks.composed_epsilon_bounds`: the exact weekly law, rounded both ways and composed by FFT;
        the bracket is at most ``2·weeks·total_interval`` wide). 0 skips it (then only the Rényi bound is given).
    """

    epsilon: float = 0.66
    threshold: float = 100
    trips: int = 70
    weeks: int = 52
    delta: float = 1e-6
    max_pairs: int | None = None
    total_interval: float = 1e-3

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", float(check_param("epsilon", self.epsilon)))  # odcore.data.validate: one rule
        t = check_threshold(self.threshold)
        object.__setattr__(self, "threshold", int(t) if t == int(t) else t)
        object.__setattr__(self, "trips", int(check_count("trips", self.trips)))
        object.__setattr__(self, "weeks", int(check_count("weeks", self.weeks)))
        object.__setattr__(self, "delta", check_prob("delta", self.delta))
        if self.max_pairs is not None:
            object.__setattr__(self, "max_pairs", check_max_pairs(self.max_pairs))
        object.__setattr__(self, "total_interval", check_positive("total_interval", self.total_interval,
                                                                  allow_zero=True))


def _tight_total(c: BudgetConfig) -> tuple[float | None, float | None, str | None]:
    """(lower, upper, method) of the tight ε of the ``weeks·trips``-fold composition at ``c.delta``."""
    n, w = c.trips, c.weeks
    if n * w <= TIGHT_K_MAX:
        e = tight_epsilon(c.delta, n * w, c.epsilon)
        return e, e, "exact"
    if n <= TIGHT_K_MAX and c.total_interval > 0:
        # the grid is capped at 5e7 points: a coarser step still gives a valid (wider) bracket
        h = max(c.total_interval, 2.0 * w * n * c.epsilon / 4e7)
        lo, hi = pld_weeks.composed_epsilon_bounds(c.delta, n, c.epsilon, w, interval=h)
        return lo, min(hi, n * w * c.epsilon), "bracket"
    return None, None, None


@lru_cache(maxsize=64)
def _threshold_free(epsilon: float, trips: int, weeks: int, delta: float, total_interval: float) -> tuple:
    """The figures of :func:`budget` that the threshold does not change (the tight and Rényi ε, the costly ones),
    kept: a new threshold recomputes only the δ of thresholding and what it enters."""
    c = BudgetConfig(epsilon=epsilon, trips=trips, weeks=weeks, delta=delta, total_interval=total_interval)
    return (tight_epsilon(delta, trips, epsilon) if trips <= TIGHT_K_MAX else None, _tight_total(c),
            rdp_epsilon(delta, trips, epsilon), rdp_epsilon(delta, trips * weeks, epsilon))


def budget(config: BudgetConfig | None = None) -> dict:
    """Every budget figure of the release for one user, as a JSON-able dict.

    Keys (Houssiau et al. 2022 golden values at the defaults in brackets):

    - ``epsilon_per_metric`` (0.66), ``delta_per_metric`` (2.1e-29, :func:`odcore.privacy.release.threshold_delta`),
      ``posterior_bound_per_metric`` (0.659), ``posterior_gain_per_metric`` (0.159, the "16%");
    - ``epsilon_user_week`` = n·ε (46.2), ``delta_user_week`` = n·δ (basic composition),
      ``delta_user_week_partition`` = 1 − (1 − δ)^n (Google partition-selection rule, <= n·δ);
    - ``epsilon_user_total`` = W·n·ε (2402.4), ``delta_user_total`` = W·n·δ;
    - ``epsilon_user_week_advanced`` / ``delta_user_week_advanced`` (DRV at δ' = ``delta``), same ``_total``;
    - ``epsilon_user_week_tight``: exact ε of the n-fold Laplace composition at δ = ``delta`` (odcore.privacy.pld), with
      ``delta_user_week_tight`` = ``delta`` + 1 − (1 − δ)^n (the thresholding event); ``epsilon_user_total_tight``
      for the W·n-fold composition: exact when W·n <= :data:`TIGHT_K_MAX`, else the upper end of a guaranteed
      bracket (``epsilon_user_total_tight_lower`` is its lower end; :func:`odcore.privacy.pld_weeks.composed_epsilon_bounds`,
      ``tight_total_method`` says which); the Rényi-DP bounds ``epsilon_user_week_rdp`` /
      ``epsilon_user_total_rdp`` are always given (>= tight);
    - ``posterior_bound_user_week`` / ``_total`` (basic ε);
    - with ``max_pairs``: ``epsilon_user_week_bounded`` = ε, ``delta_user_week_bounded`` (thresholding of the
      user-level release, scale max_pairs/ε), ``epsilon_user_total_bounded`` = W·ε and its tight counterpart.
    """
    c = BudgetConfig() if config is None else config
    if not isinstance(c, BudgetConfig):
        raise ParameterError(f"config must be a BudgetConfig, got {type(c).__name__}.")
    eps, n, w = c.epsilon, c.trips, c.weeks
    d1 = threshold_delta(eps, c.threshold)
    d_part = threshold_delta(eps, c.threshold, 1, n)
    e_week, d_week = basic_composition(eps, d1, n)
    e_tot, d_tot = basic_composition(eps, d1, n * w)
    ea_week, da_week = advanced_composition(eps, n, c.delta, d1)
    ea_tot, da_tot = advanced_composition(eps, n * w, c.delta, d1)
    et_week, (et_tot_lo, et_tot, tot_method), rdp_week, rdp_tot = _threshold_free(eps, n, w, c.delta,
                                                                                  c.total_interval)
    out = {
        **{k: getattr(c, k) for k in ("epsilon", "threshold", "trips", "weeks", "delta", "max_pairs",
                                      "total_interval")},
        "epsilon_per_metric": eps,
        "delta_per_metric": d1,
        "posterior_bound_per_metric": posterior_bound(eps),
        "posterior_gain_per_metric": posterior_gain(eps),
        "epsilon_user_week": e_week,
        "delta_user_week": d_week,
        "delta_user_week_partition": d_part,
        "epsilon_user_total": e_tot,
        "delta_user_total": d_tot,
        "epsilon_user_week_advanced": ea_week,
        "delta_user_week_advanced": da_week,
        "epsilon_user_total_advanced": ea_tot,
        "delta_user_total_advanced": da_tot,
        "epsilon_user_week_tight": et_week,
        "delta_user_week_tight": min(c.delta + d_part, 1.0),
        "epsilon_user_week_rdp": rdp_week,
        "epsilon_user_total_rdp": rdp_tot,
        "tight_k_max": TIGHT_K_MAX,
        "delta_user_total_tight": min(c.delta + float(threshold_delta(eps, c.threshold, 1, n * w)), 1.0),
        "epsilon_user_total_tight": et_tot,
        "epsilon_user_total_tight_lower": et_tot_lo,
        "tight_total_method": tot_method,
        "posterior_bound_user_week": posterior_bound(e_week),
        "posterior_bound_user_total": posterior_bound(e_tot),
    }
    if c.max_pairs is not None:
        out.update(bounded_keys(user_level_budget(eps, c.max_pairs, c.threshold, w, c.delta, c.total_interval)))
    return out


# ---------------------------------------------------------------------------------------------------------------
# Curves (the dashboard plots them)
# ---------------------------------------------------------------------------------------------------------------

def epsilon_vs_trips(epsilon: float = 0.66, trips_max: int = 70, delta: float = 1e-6) -> pd.DataFrame:
    """ε of one user-week against the number n of unique trips: basic n·ε, advanced (δ'), tight (δ).

    Returns
    -------
    DataFrame[trips, basic, advanced, rdp, tight, posterior_basic, posterior_tight]; tight is NaN above
    :data:`TIGHT_K_MAX` (posterior_tight too).
    """
    n = np.arange(1, int(check_count("trips_max", trips_max)) + 1)
    basic = basic_composition(epsilon, 0.0, n)[0]
    adv = advanced_composition(epsilon, n, delta)[0]
    tight = _tight_or_nan(delta, n, epsilon)
    post_tight = np.full(n.shape, np.nan)
    ok = np.isfinite(tight)
    if ok.any():
        post_tight[ok] = posterior_bound(tight[ok])
    return pd.DataFrame({"trips": n, "basic": basic, "advanced": adv, "rdp": rdp_epsilon(delta, n, epsilon),
                         "tight": tight, "posterior_basic": posterior_bound(basic), "posterior_tight": post_tight})


WEEKS_RELATIVE_STEP = 2e-2
"""Loss-grid step of the many-week tight bracket per unit of ε: the Privacy budget page composes at the step
``WEEKS_RELATIVE_STEP·ε`` (:func:`weeks_interval`). The k-fold Laplace loss is ``ε·(2T − k)`` with T free of ε, so a
step proportional to ε rounds the same law at every ε, and the bracket's upper end is a smooth function of ε that a
grid of ε can be interpolated on (:func:`odcore.privacy.live.weeks_tables`). A fixed step rounds a different law at
each ε: the upper end then jumps by up to ``w·step`` as ε moves (5 % of the value at 10 trips, 104 weeks, ε = 0.055,
step 0.02). Its bracket is at most ``2·w·WEEKS_RELATIVE_STEP·ε`` wide, the same share of ε at every ε."""


def weeks_interval(epsilon: float, relative_step: float = WEEKS_RELATIVE_STEP) -> float:
    """The loss-grid step ``relative_step·ε`` of :data:`WEEKS_RELATIVE_STEP` for :func:`epsilon_over_weeks` and
    :class:`BudgetConfig` ``total_interval`` at ``epsilon``.

    >>> weeks_interval(0.5)
    0.01
    """
    return float(check_positive("relative_step", relative_step)) * float(check_positive("epsilon", epsilon))


def person_weeks_interval(epsilon: float, weeks: int) -> float:
    """Loss-grid step of the per-person (``max_pairs``-fold Laplace(ε/m)) curve over 1..``weeks`` weeks on the
    Privacy budget page: ``ε·max(1/1000, 2·weeks/2^18)`` (at least 2,000 loss bins a week, at most 2^18 over all the
    weeks). Proportional to ε for the reason of :data:`WEEKS_RELATIVE_STEP`: the curve read between the grid points of
    :func:`odcore.privacy.live.weeks_tables` is then smooth in ε.

    >>> person_weeks_interval(0.5, 52)
    0.0005
    """
    eps = float(check_positive("epsilon", epsilon))
    return eps * max(1e-3, 2.0 * int(check_count("weeks", weeks)) / 2**18)


def epsilon_over_weeks(epsilon: float = 0.66, trips: int = 70, weeks: int = 52, delta: float = 1e-6,
                       interval: float | None = None, lower: bool = True) -> pd.DataFrame:
    """Cumulative ε of one user after 1..W weekly releases of ``trips`` unique trips each (k = w·trips).

    With ``interval`` (a loss-grid step) the tight ε of every week count comes from
    :func:`odcore.privacy.pld_weeks.composed_epsilon_curve` (one weekly law, one FFT): ``tight_lower`` ≤ true ε ≤ ``tight``,
    a guaranteed bracket at most ``2·w·interval`` wide, for any k (without it, ``tight`` is NaN where
    k > :data:`TIGHT_K_MAX`, near week 5 at 70 trips).

    Returns
    -------
    DataFrame[weeks, k, basic, advanced, rdp, tight] (+ ``tight_lower`` with ``interval``, unless ``lower`` is
    False: then only the upper end is composed, half the work, for a chart that draws ``tight`` only).
    """
    n = int(check_count("trips", trips))
    w = np.arange(1, int(check_count("weeks", weeks)) + 1)
    k = w * n
    out = pd.DataFrame({"weeks": w, "k": k, "basic": basic_composition(epsilon, 0.0, k)[0],
                        "advanced": advanced_composition(epsilon, k, delta)[0],
                        "rdp": rdp_epsilon(delta, k, epsilon)})
    if interval is not None and n <= TIGHT_K_MAX:
        lo, hi = pld_weeks.composed_epsilon_curve(delta, n, epsilon, w, interval=interval, lower=lower)
        out["tight"] = np.minimum(hi, out["basic"].to_numpy())
        if lower:
            out["tight_lower"] = np.minimum(lo, out["tight"].to_numpy())
    else:
        out["tight"] = _tight_or_nan(delta, k, epsilon)
    return out


DELTA_AXIS = np.logspace(-30.0, -2.0, 57)
"""The δ of :func:`epsilon_delta_curve` by default: 1e-30 to 1e-2, every half power of ten. Above 1e-2 (the largest δ
the Privacy budget page offers) δ is a chance of disclosure nobody would accept, and ε falls to 0 there in a way
the live chart cannot read between its grid points within 0.5 % (:func:`odcore.privacy.live.delta_tables`)."""
DELTA_AXIS.setflags(write=False)


def epsilon_delta_curve(epsilon: float = 0.66, k: int = 70, deltas=None) -> pd.DataFrame:
    """ε(δ) of the k-fold composition: basic (constant k·ε), advanced and tight, over a grid of δ.

    Houssiau et al. 2022, Methods: "better bounds can be obtained, [but] they require larger values of δ".

    Parameters
    ----------
    deltas:
        Values in (0, 1); default :data:`DELTA_AXIS` (1e-30 to 1e-2, every half power of ten).

    Returns
    -------
    DataFrame[delta, basic, advanced, rdp, tight] (tight NaN if k > :data:`TIGHT_K_MAX`)
    """
    kk = int(check_count("k", k))
    ds = DELTA_AXIS if deltas is None else np.asarray(deltas, dtype=float)
    if ds.size == 0 or np.any(~(ds > 0)) or np.any(~(ds < 1)):
        raise ParameterError(f"deltas must all be in (0, 1), got deltas={deltas!r}.")
    basic = np.full(ds.shape, basic_composition(epsilon, 0.0, kk)[0])
    adv = np.array([advanced_composition(epsilon, kk, float(d))[0] for d in ds])  # closed form; len(ds) is small
    rdp = np.array([rdp_epsilon(float(d), kk, epsilon) for d in ds])
    if kk <= TIGHT_K_MAX:
        tight = np.minimum(np.asarray(pld.epsilon_for_delta(ds, kk, epsilon), dtype=float), kk * epsilon)
    else:
        tight = np.full(ds.shape, np.nan)
    return pd.DataFrame({"delta": ds, "basic": basic, "advanced": adv, "rdp": rdp, "tight": tight})


# ---------------------------------------------------------------------------------------------------------------
# User level: contribution bounding to m pairs per person and week, noise m/ε, threshold τ
# ---------------------------------------------------------------------------------------------------------------

USER_GRID_POINTS = 2**20
"""Loss-grid size of the user-level bracket over many weeks: the step is ``2·W·ε / USER_GRID_POINTS`` (at most
the ``total_interval`` asked for), so the bracket is narrow whatever W and ε (52 weeks at ε = 0.66: step 6.5e-5,
bracket [5.2012, 5.2027] around dp_accounting's 5.2023)."""


def partition_selection_delta(epsilon: float, threshold: float, max_pairs: int, weeks: int = 1) -> float:
    """δ of thresholding for a person who may add ``max_pairs`` new pairs per week, over ``weeks`` weeks.

    Google's ``LaplacePartitionSelection::CalculateDelta`` (differential-privacy, ``cc/algorithms/
    partition-selection.h``) with ``max_partitions_contributed = m``: diversity ``b = m/ε``, per-partition
    ``δ₁ = ½·exp((1 − τ)/b)`` for ``τ >= 1`` (the chance that a pair only this person makes, count 1, is
    published), then ``1 − (1 − δ₁)^m`` (``CalculateUnadjustedDelta``). Over W weeks the person's new pairs number at
    most ``m·W``, so ``1 − (1 − δ₁)^{m·W}``.

    >>> f"{partition_selection_delta(0.66, 100, 20):.3f}"   # Google's tau = 100 is useless with noise 20/0.66
    '0.319'
    """
    m = check_max_pairs(max_pairs)
    w = int(check_count("weeks", weeks))
    return threshold_delta(epsilon, threshold, m, m * w)


def partition_threshold(epsilon: float, max_pairs: int, delta: float, weeks: int = 1) -> float:
    """Smallest threshold τ whose partition-selection δ over ``weeks`` weeks is <= ``delta``.

    Google's ``LaplacePartitionSelection::CalculateThreshold`` with ``max_partitions_contributed = m·W`` new pairs
    at noise ``m/ε``: ``δ_adj = 1 − (1 − δ)^{1/(m·W)}`` (``CalculateAdjustedDelta``), then
    ``τ = 1 − (m/ε)·log(2·δ_adj)`` for ``δ <= ½`` (``τ = 1 + (m/ε)·log(2(1 − δ_adj))`` above), at least 1. The
    exact inverse of :func:`partition_selection_delta` (tested both ways).

    >>> round(partition_threshold(0.66, 20, 1e-6), 1)
    489.4
    >>> round(partition_threshold(0.66, 1, threshold_delta(0.66, 100)), 6)   # Google's per-metric setting
    100.0
    """
    eps = check_positive("epsilon", epsilon)
    m = check_max_pairs(max_pairs)
    d = check_prob("delta", delta)
    n = m * int(check_count("weeks", weeks))
    d_adj = -math.expm1(math.log1p(-d) / n)
    b = m / eps
    tau = 1.0 + b * math.log(2.0 * (1.0 - d_adj)) if d > 0.5 else 1.0 - b * math.log(2.0 * d_adj)
    return max(tau, 1.0)


def default_user_threshold(epsilon: float, max_pairs: int, delta: float = 1e-6, weeks: int = 1) -> int:
    """The whole-number threshold proposed in user-level mode: :func:`partition_threshold` rounded up, so the
    partition-selection δ over ``weeks`` weeks stays <= ``delta`` (δ falls as τ grows).

    >>> default_user_threshold(0.66, 20)
    490
    """
    return math.ceil(partition_threshold(epsilon, max_pairs, delta, weeks) - 1e-9)


DELTA_NO_GUARANTEE = 1e-3
"""Above this total δ the lab says "no meaningful guarantee". (ε, δ)-DP allows a mechanism that publishes a whole
person's data with probability δ, so δ must be far below 1/n for n people (Dwork & Roth 2014, §2.3: "values of δ
on the order of 1/‖x‖₁ are very dangerous"); 1e-3 is already 1/n for a town of a thousand people."""


@dataclass(frozen=True)
class DeltaParts:
    """How the δ asked for is spent: the one rule of ``release``, ``budget``, ``design`` and the pages.

    ``delta = laplace + threshold_cost`` is the person's δ over ``weeks`` weeks (``total``), where

    - ``laplace``: the δ at which ε of the Laplace part (noise on counts the person changes) is given;
    - ``threshold_cost`` = η = −log(1 − δ_ps): what the threshold costs, δ_ps (``partition``) being the chance that
      a pair only this person makes is published in ``weeks`` weeks (:func:`partition_selection_delta`;
      :func:`user_level_budget` explains why η, not δ_ps, is added).

    Per person (``max_pairs`` set): the Laplace part gets half of δ and the threshold, unless given, is the smallest
    whole number whose η over ``weeks`` weeks is at most the other half (as the release designer,
    :mod:`odcore.privacy.design`). Per metric (τ fixed, 100 by default): the Laplace part gets δ minus η (η is
    below 1e-20 at τ = 100). A threshold given by hand may make ``total`` exceed ``asked``: :meth:`warnings` says so.
    """

    asked: float
    laplace: float
    partition: float
    threshold_cost: float
    threshold: float
    threshold_fitted: bool
    fitted_threshold: float | None
    weeks: int
    max_pairs: int | None

    @property
    def total(self) -> float:
        return min(self.laplace + self.threshold_cost, 1.0)

    def lines(self) -> list[str]:
        """Every part of δ and how they combine, in words (the CLI prints these)."""
        w = self.weeks
        how = ("fitted: the smallest whole threshold whose part is <= half the delta asked for"
               if self.threshold_fitted else "set, not fitted")
        return [
            f"delta over {w} week{'s' if w != 1 else ''}: asked {self.asked:.3g}",
            f"  Laplace part (the delta at which epsilon is given): {self.laplace:.3g}",
            f"  threshold part: eta = -log(1 - {self.partition:.3g}) = {self.threshold_cost:.3g}, where "
            f"{self.partition:.3g} is the chance that a pair only this person makes is published in {w} "
            f"week{'s' if w != 1 else ''} (threshold {self.threshold:g}, {how})",
            f"  total = Laplace part + threshold part = {self.laplace:.3g} + {self.threshold_cost:.3g} = "
            f"{self.total:.3g} ({'within' if self.total <= self.asked * (1 + 1e-9) else 'ABOVE'} the "
            f"{self.asked:.3g} asked for)",
        ]

    def warnings(self) -> list[str]:
        """Plain warnings: total above what was asked; total above :data:`DELTA_NO_GUARANTEE`."""
        out = []
        if self.total > self.asked * (1 + 1e-9):
            fit = (f"; threshold {self.fitted_threshold:g} would keep it within"
                   if self.fitted_threshold is not None else "")
            out.append(f"total delta {self.total:.3g} is above the delta asked for ({self.asked:.3g}): threshold "
                       f"{self.threshold:g} is low for the noise{fit}.")
        if self.total > DELTA_NO_GUARANTEE:
            out.append(f"delta {self.total:.3g} > {DELTA_NO_GUARANTEE:g}: no meaningful guarantee (a release may "
                       f"expose a person's pairs with probability up to delta).")
        return out

    def to_dict(self) -> dict:
        return {"delta_asked": self.asked, "delta_laplace": self.laplace, "delta_partition": self.partition,
                "delta_threshold_cost": self.threshold_cost, "delta_total": self.total, "threshold": self.threshold,
                "threshold_fitted": self.threshold_fitted, "fitted_threshold": self.fitted_threshold,
                "weeks": self.weeks, "max_pairs": self.max_pairs, "warnings": self.warnings()}


def delta_parts(epsilon: float, delta: float, weeks: int, *, max_pairs: int | None = None,
                threshold: float | None = None, trips: int = 1) -> DeltaParts:
    """The split of ``delta`` (the person's δ over ``weeks`` weeks) of :class:`DeltaParts`; ``threshold`` None fits
    it (per person) or takes Google's 100 (per metric, where a person of ``trips`` unique trips a week may make that
    many new pairs a week).

    >>> p = delta_parts(0.66, 1e-6, 52, max_pairs=10)
    >>> p.threshold == default_user_threshold(0.66, 10, -math.expm1(-5e-7), 52), p.total <= 1e-6
    (True, True)
    >>> delta_parts(0.66, 1e-6, 1, max_pairs=10, threshold=50).warnings()[-1][:30]
    'delta 0.199 > 0.001: no meanin'
    """
    eps = check_positive("epsilon", epsilon)
    d = check_prob("delta", delta)
    w = int(check_count("weeks", weeks))
    if max_pairs is not None:
        m = check_max_pairs(max_pairs)
        fitted = default_user_threshold(eps, m, -math.expm1(-d / 2), w)
        tau = float(fitted if threshold is None else check_threshold(threshold))
        ps = partition_selection_delta(eps, tau, m, w)
        eta = -math.log1p(-ps) if ps < 1 else math.inf
        return DeltaParts(d, d / 2, ps, min(eta, 1.0), tau, threshold is None, fitted, w, m)
    tau = float(100 if threshold is None else check_threshold(threshold))
    ps = float(threshold_delta(eps, tau, 1, int(check_count("trips", trips)) * w))
    eta = -math.log1p(-ps) if ps < 1 else math.inf
    lap = d - eta if eta <= d / 2 else d / 2
    return DeltaParts(d, lap, ps, min(eta, 1.0), tau, False, None, w, None)


def loss_exceeds_probability(eps_prime: float, k: int, epsilon: float) -> float:
    """The chance that a person's privacy loss exceeds ``eps_prime``: ``P[L > ε']`` for the k-fold Laplace mechanism
    of parameter ``epsilon`` per coordinate, from its exact privacy-loss distribution (:mod:`odcore.privacy.pld`).

    This is what δ is often mistaken for. (ε, δ)-DP only says ``E[(1 − e^{ε − L})₊] <= δ``; the loss exceeds ε with
    a larger probability: 28·δ at m = 20 counts of ε/m = 0.033 (tight ε 0.555 at δ = 1e-6), about 1,000·δ at m = 10.
    With the person in the data the loss is ``L = ε·(2T − k)`` with ``T = Σ clip(x_i, 0, 1)``, so
    ``P[L > ε'] = Q(T > (k + ε'/ε)/2)`` (:meth:`odcore.privacy.pld.LaplaceKFold.tails`); the other direction gives
    the same by symmetry.

    >>> p = loss_exceeds_probability(tight_epsilon(1e-6, 20, 0.033), 20, 0.033)
    >>> round(p / 1e-6)
    28
    """

    eps = check_positive("epsilon", epsilon)
    kk = int(check_count("k", k))
    ep = float(eps_prime)
    if kk == 0:
        return 0.0
    law = _last_law(kk, eps)
    return float(law.tails((kk + ep / eps) / 2.0)[1][0]) if math.isfinite(ep) else 0.0


def _last_law(k: int, epsilon: float):
    return collections.deque(pld.iter_k_fold(k, epsilon), maxlen=1)[0]


def bounded_keys(ul: dict) -> dict:
    """:func:`user_level_budget`'s figures under the ``budget`` names: ``epsilon_user_week_tight`` ->
    ``epsilon_user_week_bounded_tight``, ``noise_scale`` -> ``noise_scale_bounded`` (its inputs are left out)."""
    out = {}
    for k, v in ul.items():
        if k in ("epsilon", "max_pairs", "threshold", "weeks", "delta"):
            continue
        for unit in ("user_week", "user_total", "partition_week", "partition_total"):
            if f"_{unit}" in k:
                k = k.replace(f"_{unit}", f"_{unit}_bounded", 1)
                break
        else:
            k = f"{k}_bounded"
        out[k] = v
    return out


def user_level_budget(epsilon: float, max_pairs: int, threshold: float, weeks: int = 52, delta: float = 1e-6,
                      total_interval: float = 1e-3) -> dict:
    """The privacy budget of the contribution-bounded release, per person and week and over ``weeks`` weeks.

    Neighbouring relation (the unit of protection): two datasets differ by **one person's whole contribution**
    (all their trips, every week). The release keeps at most ``m = max_pairs`` of each person's unique pairs per week
    (a random subset drawn for that person alone), adds Laplace noise of scale ``m/ε`` to every distinct-user count
    and publishes a pair iff its noisy count is >= τ. Adding or removing a person then changes at most m counts per
    week by 1 each; each count's noise Laplace(m/ε) is the Laplace mechanism with parameter ε/m at sensitivity 1,
    so on the pairs that exist without the person the privacy loss is the **(W·m)-fold composition of Laplace
    with parameter ε/m** (fewer changed counts only lower it: post-processing). The person's *new* pairs (count 1
    with them, absent without) are published only by the thresholding event, of probability
    ``δ_ps = 1 − (1 − δ₁)^{m·W}`` (:func:`partition_selection_delta`).

    Combining the two: with ``g = 1 − δ_ps`` the chance that none of the new pairs is published, the add direction
    costs ``δ_L(ε') + δ_ps`` and the remove direction ``δ_L(ε' − η)`` with ``η = −log g``; since the hockey-stick
    curve ``δ_L`` has slope in [−1, 0], both are at most ``δ_L(ε') + η``. Every δ below therefore adds
    ``η = −log(1 − δ_ps) = m·W·(−log(1 − δ₁))`` (equal to δ_ps to 7 digits when δ_ps <= 1e-7) to the δ of the
    Laplace part.

    Figures (keys end in ``_week`` for one week, ``_total`` for W weeks):

    - basic: ε per week (m·(ε/m)), W·ε in total; δ = η.
    - advanced (Dwork–Rothblum–Vadhan at δ' = ``delta``) of the m·W mechanisms ε/m each, capped at basic.
    - Rényi: :func:`rdp_epsilon` of the m·W-fold composition at ``delta``.
    - tight: the exact ε(δ = ``delta``) of the m-fold (per week) and m·W-fold compositions (:mod:`odcore.privacy.pld`):
      exact when the number of coordinates is <= :data:`TIGHT_K_MAX`, else a guaranteed bracket
      (:func:`odcore.privacy.pld_weeks.composed_epsilon_bounds`: exact weekly law rounded up and down on a loss grid of step
      ``min(total_interval, 2·W·ε/USER_GRID_POINTS)``, composed by FFT); ``..._tight`` is its upper end (a valid
      guarantee), ``..._tight_lower`` the lower end. Cross-checked against dp_accounting's pessimistic PLD: at
      ε = 0.66, δ = 1e-6, 52 weeks: 5.20 at m = 20, 11.42 at m = 5; one week at m = 20: 0.555.

    Parameters
    ----------
    epsilon:
        ε per person and week (the noise is Laplace(m/ε)).
    max_pairs:
        m, unique pairs kept per person and week.
    threshold:
        τ >= 1.
    weeks:
        W weekly releases.
    delta:
        δ of the Laplace part at which advanced, Rényi and tight ε are given (the partition-selection η is added).
    total_interval:
        Largest loss-grid step of the bracket; 0 skips the bracket (the tight total is then None unless exact).
    """
    eps = check_positive("epsilon", epsilon)
    m = check_max_pairs(max_pairs)
    tau = check_threshold(threshold)
    w = int(check_count("weeks", weeks))
    d = check_prob("delta", delta)
    h_max = check_positive("total_interval", total_interval, allow_zero=True)
    e1 = eps / m
    ps_week = partition_selection_delta(eps, tau, m, 1)
    ps_total = partition_selection_delta(eps, tau, m, w)
    d1 = float(release_probability(1.0, eps, tau, m))   # a pair only this person makes is published
    eta1 = -m * math.log1p(-d1) if d1 < 1 else math.inf
    eta_week, eta_total = min(eta1, 1.0), min(w * eta1, 1.0)

    def add(x: float) -> float:
        return min(x, 1.0)

    out: dict = {
        "epsilon": eps, "max_pairs": m, "threshold": tau, "weeks": w, "delta": d,
        "noise_scale": m / eps, "epsilon_per_count": e1,
        "delta_partition_week": ps_week, "delta_partition_total": ps_total,
        "threshold_for_delta_week": partition_threshold(eps, m, d, 1),
        "threshold_for_delta_total": partition_threshold(eps, m, d, w),
        "epsilon_user_week": eps, "delta_user_week": eta_week,
        "epsilon_user_total": w * eps, "delta_user_total": eta_total,
    }
    for key, k, cap, eta in (("week", m, eps, eta_week), ("total", m * w, w * eps, eta_total)):
        ea = float(advanced_composition(e1, k, d)[0])
        out[f"epsilon_user_{key}_advanced"] = min(ea, cap)
        out[f"delta_user_{key}_advanced"] = add(d + eta)
        out[f"epsilon_user_{key}_rdp"] = float(rdp_epsilon(d, k, e1))
        out[f"delta_user_{key}_rdp"] = add(d + eta)
        out[f"delta_user_{key}_tight"] = add(d + eta)
    et_week = float(tight_epsilon(d, m, e1)) if m <= TIGHT_K_MAX else None
    out["epsilon_user_week_tight"] = et_week
    lo = hi = None
    method = None
    if m * w <= TIGHT_K_MAX:
        lo = hi = float(tight_epsilon(d, m * w, e1))
        method = "exact"
    elif m <= TIGHT_K_MAX and h_max > 0:
        # at most 4e7 grid points (pld caps at 5e7): a coarser step still gives a valid, wider bracket
        h = max(min(h_max, 2.0 * w * eps / USER_GRID_POINTS), 2.0 * w * eps / 4e7)
        lo, hi = pld_weeks.composed_epsilon_bounds(d, m, e1, w, interval=h)
        hi = min(hi, w * eps)
        method = "bracket"
    out["epsilon_user_total_tight"] = hi
    out["epsilon_user_total_tight_lower"] = lo
    out["tight_total_method"] = method
    best_week = et_week if et_week is not None else out["epsilon_user_week_rdp"]
    best_total = hi if hi is not None else out["epsilon_user_total_rdp"]
    out["posterior_bound_user_week"] = posterior_bound(best_week) if best_week > 0 else 0.5
    out["posterior_bound_user_total"] = posterior_bound(best_total) if best_total > 0 else 0.5
    return out



def person_week(mode: str, epsilon: float, threshold: float, trips: int, max_pairs: int | None = None,
                delta: float = 1e-6) -> dict:
    """What one person with ``trips`` unique trips risks in one week, in either unit (cheap: one week only).

    ``per_metric`` (noise 1/ε per count, no bounding): the person is in ``trips`` counts, so the tight ε is that of
    the ``trips``-fold Laplace(ε) composition and δ adds the thresholding event ``1 − (1 − δ₁)^trips``.
    ``user_level``: the m-fold Laplace(ε/m) composition (:func:`user_level_budget`, one week), whatever ``trips``.

    Returns ``{"unit_epsilon", "epsilon_person_week", "delta_person_week", "delta_threshold_week",
    "posterior_person_week", "trips"}`` (``delta_threshold_week``: the thresholding part of ``delta_person_week``):
    ``unit_epsilon`` is the ε the unit promises (per count, or per person and week); ``epsilon_person_week`` the
    tight ε of this person's week at ``delta`` (δ of the thresholding added in ``delta_person_week``).
    """
    eps = check_positive("epsilon", epsilon)
    d = check_prob("delta", delta)
    n = int(check_count("trips", max(int(trips), 1)))
    if mode == "user_level":
        m = check_max_pairs(max_pairs)
        e_week = float(tight_epsilon(d, m, eps / m)) if m <= TIGHT_K_MAX else float(rdp_epsilon(d, m, eps / m))
        d1 = float(release_probability(1.0, eps, threshold, m))
        eta = min(-m * math.log1p(-d1), 1.0) if d1 < 1 else 1.0
        out = {"unit_epsilon": eps, "epsilon_person_week": e_week, "delta_person_week": min(d + eta, 1.0),
               "delta_threshold_week": eta}
    elif mode == "per_metric":
        e_week = float(tight_epsilon(d, n, eps)) if n <= TIGHT_K_MAX else float(rdp_epsilon(d, n, eps))
        eta = threshold_delta(eps, threshold, 1, n)
        out = {"unit_epsilon": eps, "epsilon_person_week": e_week, "delta_person_week": min(d + eta, 1.0),
               "delta_threshold_week": eta}
    else:
        raise ParameterError(f"mode must be 'per_metric' or 'user_level', got mode={mode!r}.")
    out["posterior_person_week"] = posterior_bound(e_week) if e_week > 0 else 0.5
    out["trips"] = n
    return out
