"""The release mechanism: distinct-user OD counts + Laplace noise, published only above a threshold.

This is the mechanism Google ran for Bassolas et al. (reply, "clarified description of our data aggregation"):
for each week W and cell pair (A, B), count the distinct users who travelled A -> B in W, add zero-mean Laplace
noise of scale ``sensitivity / epsilon`` and publish the pair only if the noisy count is ``>= threshold``
(Bassolas: "remove all metrics for which the noisy number of users is lower than 100").

Two modes (:class:`Mode`):

``per_metric``
    The Bassolas setting. Each user adds at most 1 to each count (distinct users), no limit on the number of
    pairs a user touches; noise scale ``1 / epsilon``. The guarantee is per metric, i.e. per (week, A, B).
``user_level``
    Contribution bounding (Google differential-privacy library, ``max_partitions_contributed``): each user keeps
    at most ``max_pairs`` of their unique pairs per week, and the noise scale is ``max_pairs / epsilon`` (L1
    sensitivity of the weekly count vector), so the whole weekly release is (epsilon, delta)-DP per user.
    Sampling rule (:mod:`odcore.od.bounding`, :mod:`odcore.od.pairs`): within each (week, user), every unique pair gets a keyed hash
    of (key, user, week, origin, destination), the key being the first draw of the release's generator, and the
    ``max_pairs`` pairs with the smallest (hash, origin, destination) are kept — a subset of ``min(max_pairs, n)``
    of the user's ``n`` unique pairs that looks uniformly random, and the same in every OD engine (numpy here,
    DuckDB and Spark SQL in :mod:`odcore.od.engines`), so a seed gives the same table whichever engine counted.

One comparison everywhere: a pair is published iff ``noisy_count >= threshold``. :func:`release_probability` and
:func:`threshold_delta` use the same ``>=`` (OpenDP once had a mismatch between the two: opendp/opendp#2922).

Only observed pairs (true count >= 1 before bounding) enter the table; there is no public list of all cell pairs,
which is why thresholding is needed and why it costs a delta (:func:`threshold_delta`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np
import pandas as pd

from odcore.constants import (
    CELL,
    COUNT,
    DESTINATION,
    NOISE,
    NOISY_COUNT,
    ORIGIN,
    RELEASE_PROB,
    RELEASED,
    TRUE_COUNT,
    WEEK,
)
from odcore.data.validate import check_param
from odcore.errors import ParameterError, check_max_pairs, check_positive, check_threshold
from odcore.od.bounding import bounding_key
from odcore.od.odtable import NO_PAIRS_REASON
from odcore.od.pairs import (
    BOUNDED_COLUMNS,
    RAW_COUNT,
    PreparedPairs,
    bound_mask,
    bound_ranks,
    canonical_order,
    prepare_pairs,
)

RELEASE_COLUMNS = (WEEK, ORIGIN, DESTINATION, RAW_COUNT, TRUE_COUNT, NOISE, NOISY_COUNT, RELEASED, RELEASE_PROB)

# What may leave the building: the published pairs only, their noisy counts and where they are (names are added by
# odcore.space.zones.add_zone_names). Nothing about unpublished pairs, no true count, no noise, no seed.
PUBLISHED_COLUMNS = (WEEK, "week_start", ORIGIN, DESTINATION, NOISY_COUNT, "origin_lat", "origin_lon",
                     "destination_lat", "destination_lon")
ANALYSIS_NOTICE = ("DO NOT SHARE: analysis table with the true counts, the noise and the pairs that were not "
                   "published; it discloses what the release protects. Share only the published table.")

__all__ = [
    "ANALYSIS_NOTICE",
    "PUBLISHED_COLUMNS",
    "RELEASE_COLUMNS",
    "Mode",
    "ReleaseConfig",
    "ReleaseResult",
    "published_table",
    "release",
    "release_bounded_counts_with_report",
    "release_probability",
    "release_with_report",
    "threshold_delta",
]


class Mode(StrEnum):
    """Unit of privacy of the release."""

    PER_METRIC = "per_metric"
    USER_LEVEL = "user_level"


@dataclass(frozen=True)
class ReleaseConfig:
    """Parameters of one weekly release.

    Parameters
    ----------
    epsilon:
        Laplace privacy parameter, > 0 (Bassolas et al.: 0.66).
    threshold:
        Publish a pair iff its noisy count is ``>= threshold`` (Bassolas et al.: 100). Must be >= 1.
    mode:
        :class:`Mode` (or its string value). ``per_metric``: noise scale 1/epsilon. ``user_level``: each user keeps
        at most ``max_pairs`` unique pairs per week, noise scale ``max_pairs / epsilon``.
    max_pairs:
        Contribution bound, required in (and only allowed with) ``user_level`` mode.

    Raises
    ------
    ParameterError
        epsilon <= 0 or not finite, threshold < 1 or NaN, max_pairs < 1 or not an integer, unknown mode, or
        max_pairs missing/extra for the mode.
    """

    epsilon: float = 0.66
    threshold: float = 100
    mode: Mode = Mode.PER_METRIC
    max_pairs: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", float(check_param("epsilon", self.epsilon)))  # odcore.data.validate: one rule
        t = check_threshold(self.threshold)
        object.__setattr__(self, "threshold", int(t) if t == int(t) else t)
        try:
            mode = Mode(self.mode)
        except ValueError:
            choices = ", ".join(m.value for m in Mode)
            raise ParameterError(f"mode must be one of {choices}, got mode={self.mode!r}.") from None
        object.__setattr__(self, "mode", mode)
        if mode is Mode.USER_LEVEL:
            if self.max_pairs is None:
                raise ParameterError("max_pairs is required in user_level mode (an integer >= 1), got max_pairs=None.")
            object.__setattr__(self, "max_pairs", check_max_pairs(self.max_pairs))
        elif self.max_pairs is not None:
            raise ParameterError(
                f"max_pairs={self.max_pairs!r} is only used in user_level mode; per_metric mode bounds each user to 1 "
                "per pair and does not cap the number of pairs (set mode='user_level' or max_pairs=None).")

    @property
    def sensitivity(self) -> int:
        """L1 sensitivity of one count vector: 1 per metric, ``max_pairs`` per user-week."""
        return 1 if self.mode is Mode.PER_METRIC else int(self.max_pairs)

    @property
    def scale(self) -> float:
        """Laplace scale b = sensitivity / epsilon."""
        return self.sensitivity / self.epsilon

    def to_dict(self) -> dict:
        return {"epsilon": self.epsilon, "threshold": self.threshold, "mode": self.mode.value,
                "max_pairs": self.max_pairs}


# ---------------------------------------------------------------------------------------------------------------
# Closed forms (same >= comparison as the release)
# ---------------------------------------------------------------------------------------------------------------

def _laplace_sf(x: np.ndarray, scale: float) -> np.ndarray:
    """P(L >= x) for L ~ Laplace(0, scale), stable at both tails."""
    x = np.asarray(x, dtype=float)
    with np.errstate(over="ignore"):
        return np.where(x >= 0, 0.5 * np.exp(-np.abs(x) / scale), -0.5 * np.expm1(-np.abs(x) / scale) + 0.5)


_BY_VALUE_MIN = 4096   # integer arrays larger than this are computed per distinct value


def release_probability(true_count, epsilon: float, threshold: float, sensitivity: float = 1):
    """Probability that a pair with ``true_count`` users is published: ``P(true_count + Lap(b) >= threshold)``.

    ``b = sensitivity / epsilon``. With ``x = threshold - true_count``: ``½·exp(-x/b)`` if ``x >= 0`` else
    ``1 - ½·exp(x/b)``. This is the exact release rule of :func:`release` (``>=``; for continuous noise ``>`` has
    the same probability, but the code and the formula use the same comparison on purpose).

    Parameters
    ----------
    true_count:
        Scalar or array of counts (NaN propagates).
    epsilon, threshold, sensitivity:
        As in :class:`ReleaseConfig`; ``sensitivity`` is the L1 sensitivity (1 per metric, ``max_pairs`` user-level).

    Returns
    -------
    float or numpy.ndarray
        Same shape as ``true_count``.

    Examples
    --------
    >>> round(float(release_probability(100, 0.66, 100)), 3)
    0.5
    """
    eps = check_positive("epsilon", epsilon)
    tau = check_threshold(threshold)
    sens = check_positive("sensitivity", sensitivity)
    ints = np.asarray(true_count)
    if ints.dtype.kind in "iu" and ints.size > _BY_VALUE_MIN:
        lo, hi = int(ints.min()), int(ints.max())
        if hi - lo < ints.size:   # a week's counts: ~10^5 pairs, a few hundred values; each value computed once
            return _laplace_sf(tau - np.arange(lo, hi + 1, dtype=float), sens / eps)[ints - lo]
    c = np.asarray(true_count, dtype=float)
    p = _laplace_sf(tau - c, sens / eps)
    p = np.where(np.isnan(c), np.nan, p)
    return float(p) if p.ndim == 0 else p


def threshold_delta(epsilon: float, threshold: float, sensitivity: float = 1, n_pairs: int = 1) -> float:
    """Delta paid by thresholding: probability that any of a user's ``n_pairs`` singleton pairs is published.

    A pair the user alone makes exists only because of them (count 1 with them, absent without); it is published
    with probability ``δ₁ = P(1 + Lap(b) >= τ) = ½·exp(−(τ − 1)/b)`` for ``τ >= 1``, ``b = sensitivity/ε``.
    With ε = 0.66, τ = 100, b = 1/ε this is 2.07e-29, the δ = 2.1 × 10⁻²⁹ of Bassolas et al.'s reply.

    For a user touching ``n_pairs`` pairs that may all be new, the noise draws are independent, so the probability
    that at least one is published is ``δ = 1 − (1 − δ₁)^n`` — the same rule as the Google differential-privacy
    library's ``LaplacePartitionSelection::CalculateDelta`` (``cc/algorithms/partition-selection.h``: threshold
    branch ``exp((1 − τ)/diversity)/2`` with ``diversity = max_partitions_contributed/ε``, then
    ``CalculateUnadjustedDelta = 1 − (1 − δ₁)^max_partitions_contributed``). For user-level bounding pass
    ``sensitivity = n_pairs = max_pairs``; for per-metric noise touched by ``n`` trips pass ``sensitivity = 1,
    n_pairs = n`` (never more than basic composition's ``n·δ₁``).

    Parameters
    ----------
    epsilon, threshold, sensitivity:
        As in :func:`release_probability`.
    n_pairs:
        Number of pairs the user may add (integer >= 1).

    Returns
    -------
    float

    Examples
    --------
    >>> f"{threshold_delta(0.66, 100):.2g}"
    '2.1e-29'
    """
    n = check_max_pairs(n_pairs) if n_pairs is not None else 1
    d1 = float(release_probability(1.0, epsilon, threshold, sensitivity))
    if d1 >= 1.0:
        return 1.0
    # numerically stable 1 - (1 - d1)^n (the Google library uses the same -expm1(n*log1p(-d1)))
    return float(-np.expm1(n * np.log1p(-d1)))


# ---------------------------------------------------------------------------------------------------------------
# The release
# ---------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ReleaseResult:
    """A release table and what happened on the way (nothing is dropped silently)."""

    table: pd.DataFrame
    config: ReleaseConfig
    report: dict = field(default_factory=dict)


def _domain_arrays(domain: pd.DataFrame, weeks: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(week, origin, destination) of a public domain of pairs; without a week column it applies to ``weeks``."""
    if not isinstance(domain, pd.DataFrame):
        raise ParameterError(f"domain must be a pandas DataFrame with columns ['origin', 'destination'] (optionally "
                             f"'week'), got {type(domain).__name__}.")
    cols = [c for c in (WEEK, ORIGIN, DESTINATION) if c in domain.columns]
    if ORIGIN not in cols or DESTINATION not in cols:
        raise ParameterError(f"domain needs columns 'origin' and 'destination', got {list(domain.columns)}.")
    arr = {}
    for c in cols:
        s = domain[c]
        if not pd.api.types.is_integer_dtype(s) or s.hasnans:
            raise ParameterError(f"domain column {c!r} must hold integers without missing values, got dtype {s.dtype}.")
        arr[c] = s.to_numpy(dtype=np.int64)
    if WEEK in arr:
        return arr[WEEK], arr[ORIGIN], arr[DESTINATION]
    nw = len(weeks)
    return (np.repeat(weeks, len(domain)), np.tile(arr[ORIGIN], nw), np.tile(arr[DESTINATION], nw))


def release_with_report(pairs: pd.DataFrame | PreparedPairs, config: ReleaseConfig | None = None, rng=None, *,
                        domain: pd.DataFrame | None = None) -> ReleaseResult:
    """Run the release and return the table with a report of every row removed and why.

    Parameters
    ----------
    pairs:
        DataFrame[week, user, origin, destination], one row per unique (week, user, pair)
        (``odcore.od.oddata.ODData.pairs``), or the same prepared once by :func:`prepare_pairs`. Duplicate rows are
        removed and counted (each user adds at most 1 to a count: Bassolas et al., "Each user contributes at most
        one increment to each partition").
    config:
        :class:`ReleaseConfig` (default: the Bassolas setting ε = 0.66, τ = 100, per metric).
    rng:
        ``numpy.random.Generator | int | None``. Same seed, same output (independent of the input row order).
    domain:
        Optional public list of pairs (DataFrame[origin, destination], optionally with week; without week it
        applies to every week of ``pairs``) that get noise whether observed or not. A domain pair nobody made has
        true_count 0 and is published only if its noise alone reaches the threshold (probability
        ``release_probability(0, ...)`` = ½·exp(−τε/sensitivity)). Default None: only observed pairs, the Google
        setting, where the threshold is what keeps unobserved pairs out (hence δ).

    Returns
    -------
    ReleaseResult
        ``table`` has columns :data:`RELEASE_COLUMNS`, one row per observed (week, origin, destination), sorted:

        - ``raw_count``: distinct users before bounding; ``true_count``: the count the noise is added to
          (after bounding; equal to raw_count per metric);
        - ``noise`` ~ Laplace(0, sensitivity/ε) and ``noisy_count = true_count + noise``;
        - ``released = noisy_count >= threshold``;
        - ``release_prob = P(true_count + Lap >= threshold)`` (exact, :func:`release_probability`).

        Pairs whose every contribution was removed by user-level bounding (true_count 0) are kept in the table,
        never submitted to the mechanism unless they are in ``domain``: noise and noisy_count NaN, released False,
        release_prob 0 (publishing them would let dropped contributions influence the output). ``report`` counts
        them (``pairs_emptied_by_bounding``) and the pairs published with true count 0
        (``pairs_released_with_true_count_0``, only possible for domain pairs).
    """
    config = ReleaseConfig() if config is None else config
    if not isinstance(config, ReleaseConfig):
        raise ParameterError(f"config must be a ReleaseConfig, got {type(config).__name__}.")
    rng = np.random.default_rng(rng)
    prep = pairs if isinstance(pairs, PreparedPairs) else prepare_pairs(pairs)
    p = prep.pairs
    w, o, d, raw, pair_of_row = prep.counts
    report: dict[str, Any] = {
        **config.to_dict(),
        "sensitivity": config.sensitivity,
        "noise_scale": config.scale,
        "rows_in": prep.rows_in,
        "duplicate_rows_dropped": p.n_dup,
        "weeks": int(np.count_nonzero(np.diff(w)) + 1) if len(w) else 0,  # w is sorted
        "users": len(p.users),  # factorize codes every user present; dedup never removes a user
        "contributions_in": len(p),
        "contributions_dropped_by_bounding": 0,
    }
    if config.mode is Mode.USER_LEVEL:
        key = bounding_key(rng)   # the first draw; the noise follows
        keep, brep = bound_mask(p, int(config.max_pairs), prep.bound_ranks(key) if pairs is prep
                                 else bound_ranks(p, key))
        report.update(brep)
        tc = np.bincount(pair_of_row[keep], minlength=len(w)).astype(np.int64)
    else:
        tc = raw
    in_domain = np.zeros(len(w), dtype=bool)
    if domain is not None:
        dw, do, dd = _domain_arrays(domain, np.unique(w) if len(w) else np.zeros(0, np.int64))
        aw, ao, ad = np.concatenate([w, dw]), np.concatenate([o, do]), np.concatenate([d, dd])
        order = canonical_order([aw, ao, ad])
        aw, ao, ad = aw[order], ao[order], ad[order]
        src = np.concatenate([np.arange(len(w)), np.full(len(dw), -1)])[order]  # observed row index or -1
        new = np.ones(len(aw), dtype=bool)
        new[1:] = (aw[1:] != aw[:-1]) | (ao[1:] != ao[:-1]) | (ad[1:] != ad[:-1])
        gid = np.cumsum(new) - 1
        ng = int(gid[-1]) + 1 if len(gid) else 0
        obs_idx = np.full(ng, -1, dtype=np.int64)
        obs_idx[gid[src >= 0]] = src[src >= 0]
        dom = np.zeros(ng, dtype=bool)
        dom[gid[src < 0]] = True
        starts = np.flatnonzero(new)
        has = obs_idx >= 0
        raw_u, tc_u = np.zeros(ng, np.int64), np.zeros(ng, np.int64)
        raw_u[has], tc_u[has] = raw[obs_idx[has]], tc[obs_idx[has]]
        w, o, d, raw, tc, in_domain = aw[starts], ao[starts], ad[starts], raw_u, tc_u, dom
        report["domain_pairs"] = int(dom.sum())
        report["domain_pairs_unobserved"] = int((dom & ~has).sum())
    return _noisy_table(w, o, d, raw, tc, in_domain, config, rng, report)


def release_counts_with_report(counts: pd.DataFrame, config: ReleaseConfig | None = None,
                               rng=None) -> ReleaseResult:
    """The per-metric release from a counts table (``week, origin, destination, count``), e.g. an OD counts folder
    (:func:`odcore.od.odtable.read_counts_folder`) with no per-person pairs.

    Same table as :func:`release_with_report` on the pairs these counts came from, with the same ``rng`` (the noise
    is drawn in the same canonical pair order). User-level bounding needs the pairs and is refused.
    """
    config = ReleaseConfig() if config is None else config
    if not isinstance(config, ReleaseConfig):
        raise ParameterError(f"config must be a ReleaseConfig, got {type(config).__name__}.")
    if config.mode is Mode.USER_LEVEL:
        raise ParameterError(f"mode user_level bounds each person's pairs, but {NO_PAIRS_REASON}")
    rng = np.random.default_rng(rng)
    cols = [WEEK, ORIGIN, DESTINATION, COUNT]
    if not isinstance(counts, pd.DataFrame) or any(c not in counts.columns for c in cols):
        raise ParameterError(f"counts must be a DataFrame with columns {cols}.")
    a = [counts[c].to_numpy(np.int64) for c in cols]
    if len(a[0]) and a[3].min() < 1:
        raise ParameterError("counts must be >= 1 (distinct users of an observed pair).")
    order = canonical_order(a[:3])
    w, o, d, raw = (x[order] for x in a)
    if len(w) > 1 and not ((w[1:] != w[:-1]) | (o[1:] != o[:-1]) | (d[1:] != d[:-1])).all():
        raise ParameterError("counts has repeated (week, origin, destination) rows.")
    report: dict[str, Any] = {
        **config.to_dict(), "sensitivity": config.sensitivity, "noise_scale": config.scale,
        "rows_in": len(counts), "duplicate_rows_dropped": 0,
        "weeks": int(np.count_nonzero(np.diff(w)) + 1) if len(w) else 0, "users": None,
        "contributions_in": int(raw.sum()), "contributions_dropped_by_bounding": 0, "from_counts": True,
    }
    return _noisy_table(w, o, d, raw, raw, np.zeros(len(w), dtype=bool), config, rng, report)


def release_bounded_counts_with_report(bounded: pd.DataFrame, config: ReleaseConfig, seed: int,
                                       bounding: dict | None = None) -> ReleaseResult:
    """The user-level release from per-pair bounded counts computed by an engine, without any per-person table.

    ``bounded`` has :data:`BOUNDED_COLUMNS` (one row per observed pair: distinct users before and after each user
    kept the ``max_pairs`` pairs of smallest hash), computed with the key ``bounding_key(default_rng(seed))``
    (:func:`odcore.od.engines.build_od` with ``bound=(max_pairs, key)``). The noise is then drawn from the same
    generator, after the key, in the canonical pair order, so the table equals :func:`release_with_report` of the
    pairs with ``rng=seed`` exactly. ``bounding``: the engine's counts of user-weeks (``user_weeks``,
    ``user_weeks_bounded``) for the report.
    """
    if not isinstance(config, ReleaseConfig) or config.mode is not Mode.USER_LEVEL:
        raise ParameterError(f"bounded counts are released in user_level mode, got config={config!r}.")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ParameterError(f"seed must be an integer (the bounding key and the noise both come from it), "
                             f"got seed={seed!r}.")
    missing = [c for c in BOUNDED_COLUMNS if c not in bounded.columns]
    if missing:
        raise ParameterError(f"bounded counts miss column(s) {missing}; expected {list(BOUNDED_COLUMNS)}.")
    rng = np.random.default_rng(int(seed))
    bounding_key(rng)   # the key the engine used: drawn again so that the noise follows it, as in release_with_report
    a = [bounded[c].to_numpy(np.int64) for c in BOUNDED_COLUMNS]
    order = canonical_order(a[:3])
    w, o, d, raw, tc = (x[order] for x in a)
    if len(w) > 1 and not ((w[1:] != w[:-1]) | (o[1:] != o[:-1]) | (d[1:] != d[:-1])).all():
        raise ParameterError("bounded counts have repeated (week, origin, destination) rows.")
    if len(w) and (raw.min() < 1 or (tc > raw).any() or tc.min() < 0):
        raise ParameterError("bounded counts need 1 <= raw_count and 0 <= true_count <= raw_count.")
    report: dict[str, Any] = {
        **config.to_dict(), "sensitivity": config.sensitivity, "noise_scale": config.scale,
        "rows_in": int(raw.sum()), "duplicate_rows_dropped": 0,
        "weeks": int(np.count_nonzero(np.diff(w)) + 1) if len(w) else 0, "users": None,
        "contributions_in": int(raw.sum()), "contributions_dropped_by_bounding": int((raw - tc).sum()),
        **(bounding or {}), "from_bounded_counts": True,
    }
    return _noisy_table(w, o, d, raw, tc, np.zeros(len(w), dtype=bool), config, rng, report)


def _noisy_table(w, o, d, raw, tc, in_domain, config: ReleaseConfig, rng, report: dict) -> ReleaseResult:
    """Laplace noise on the live counts (canonical pair order), threshold, exact release probability."""
    live = (tc > 0) | in_domain
    draws = rng.laplace(0.0, config.scale, size=int(np.count_nonzero(live)))
    if len(draws) == len(live):   # every pair is submitted (always so per metric)
        noise = draws
    else:
        noise = np.full(len(live), np.nan)
        noise[live] = draws
    noisy = tc + noise
    released = noisy >= config.threshold   # NaN (not submitted) is never released
    prob = release_probability(tc, config.epsilon, config.threshold, config.sensitivity)
    prob[~live] = 0.0
    table = pd.DataFrame(dict(zip(RELEASE_COLUMNS, (w, o, d, raw, tc, noise, noisy, released, prob), strict=True)))
    report.update({
        "pairs_observed": len(table),
        "pairs_emptied_by_bounding": int(((raw > 0) & (tc == 0) & ~in_domain).sum()),
        "pairs_released": int(released.sum()),
        "pairs_released_with_true_count_0": int((released & (tc == 0)).sum()),
        "pairs_released_expected": float(prob.sum()),
        "delta_per_pair": threshold_delta(config.epsilon, config.threshold, config.sensitivity, 1),
        "delta_user_week": (threshold_delta(config.epsilon, config.threshold, config.sensitivity,
                                            config.max_pairs) if config.mode is Mode.USER_LEVEL else None),
    })
    return ReleaseResult(table=table, config=config, report=report)


def release(pairs: pd.DataFrame | PreparedPairs, config: ReleaseConfig | None = None, rng=None, *,
            domain: pd.DataFrame | None = None) -> pd.DataFrame:
    """Noisy, thresholded weekly OD counts (the table of :func:`release_with_report`).

    Bassolas et al. reply: "for each week W and each location pair (A, B), we compute the number of unique users
    who took a trip from location A to location B during week W. To each of these metrics, we add Laplace noise
    [...] of scale 1/0.66. We then remove all metrics for which the noisy number of users is lower than 100".

    Examples
    --------
    >>> import pandas as pd
    >>> pairs = pd.DataFrame({"week": [0, 0, 0], "user": ["a", "b", "a"], "origin": [1, 1, 2],
    ...                       "destination": [2, 2, 1]})
    >>> t = release(pairs, ReleaseConfig(epsilon=1.0, threshold=1), rng=0)
    >>> t[["origin", "destination", "true_count"]].to_numpy().tolist()
    [[1, 2, 2], [2, 1, 1]]
    >>> bool((t["released"] == (t["noisy_count"] >= 1)).all())
    True
    """
    return release_with_report(pairs, config, rng, domain=domain).table


def cell_release_probability(table: pd.DataFrame) -> pd.DataFrame:
    """Per origin cell, the probability that at least one of its outgoing pairs is published.

    ``1 − Π(1 − p)`` over the cell's pairs, with ``p`` the exact per-pair release probability (the noise draws
    are independent across pairs). The dashboard colours cells by it.

    Parameters
    ----------
    table:
        A release table with columns ``origin`` and ``release_prob`` (:func:`release`).

    Returns
    -------
    DataFrame[cell, pairs, release_prob_any]

    Examples
    --------
    >>> t = pd.DataFrame({"origin": [1, 1, 2], "release_prob": [0.5, 0.5, 0.1]})
    >>> cell_release_probability(t)["release_prob_any"].round(3).tolist()
    [0.75, 0.1]
    """
    lp = np.log1p(-np.clip(table[RELEASE_PROB].to_numpy(dtype=float), 0.0, 1.0 - 1e-16))
    g = pd.DataFrame({CELL: table[ORIGIN].to_numpy(), "lp": lp, "pairs": 1}).groupby(CELL, sort=True).sum()
    return pd.DataFrame({CELL: g.index.to_numpy(), "pairs": g["pairs"].to_numpy(),
                         "release_prob_any": -np.expm1(g["lp"].to_numpy())})


def release_csv_table(table: pd.DataFrame, centroids: pd.DataFrame, week_starts=None) -> pd.DataFrame:
    """The analysis table (``release --analysis-out``, the page's do-not-share download): the week's start date (if
    ``week_starts`` is given), both cells' centres (``origin_lat`` … ``destination_lon``), and ``raw_count`` only
    when it differs from ``true_count`` somewhere (user-level bounding); per metric it would repeat it.

    Parameters
    ----------
    table:
        :func:`release` output.
    centroids:
        ``DataFrame[cell, lat, lon]`` (``ODData.centroids()``).
    week_starts:
        Sequence of week start dates indexed by week number, or None.

    Examples
    --------
    >>> t = pd.DataFrame({"week": [0], "origin": [1], "destination": [2], "raw_count": [5], "true_count": [5]})
    >>> c = pd.DataFrame({"cell": [1, 2], "lat": [10.0, 11.0], "lon": [20.0, 21.0]})
    >>> release_csv_table(t, c).columns.tolist()
    ['week', 'origin', 'destination', 'true_count', 'origin_lat', 'origin_lon', 'destination_lat', 'destination_lon']
    """
    out = table.copy()
    if RAW_COUNT in out and TRUE_COUNT in out and np.array_equal(out[RAW_COUNT].to_numpy(),
                                                                  out[TRUE_COUNT].to_numpy()):
        out = out.drop(columns=RAW_COUNT)
    if week_starts is not None:
        starts = np.asarray(week_starts, dtype=object)
        out.insert(1, "week_start", starts[table[WEEK].to_numpy()] if len(table) else [])
    c = centroids.set_index(CELL)
    for end, col in (("origin", ORIGIN), ("destination", DESTINATION)):
        out[f"{end}_lat"] = table[col].map(c["lat"]).astype(float)
        out[f"{end}_lon"] = table[col].map(c["lon"]).astype(float)
    return out


def published_table(table: pd.DataFrame, centroids: pd.DataFrame, week_starts=None) -> pd.DataFrame:
    """The release as it may be handed over: the published rows only, with :data:`PUBLISHED_COLUMNS` (the week's
    start date only when ``week_starts`` is given), sorted by week then noisy count (largest first).

    The analysis table (:func:`release_csv_table`: true counts, noise, unpublished pairs) is for the data holder
    only (:data:`ANALYSIS_NOTICE`).

    Examples
    --------
    >>> t = pd.DataFrame({"week": [0, 0], "origin": [1, 2], "destination": [2, 1], "true_count": [150, 3],
    ...                   "noise": [1.5, 99.0], "noisy_count": [151.5, 102.0], "released": [True, False]})
    >>> c = pd.DataFrame({"cell": [1, 2], "lat": [10.0, 11.0], "lon": [20.0, 21.0]})
    >>> published_table(t, c).to_dict(orient="records")   # doctest: +NORMALIZE_WHITESPACE
    [{'week': 0, 'origin': 1, 'destination': 2, 'noisy_count': 151.5, 'origin_lat': 10.0, 'origin_lon': 20.0,
      'destination_lat': 11.0, 'destination_lon': 21.0}]
    """
    pub = table.loc[table[RELEASED].to_numpy(dtype=bool), [WEEK, ORIGIN, DESTINATION, NOISY_COUNT]]
    pub = pub.sort_values([WEEK, NOISY_COUNT], ascending=[True, False], kind="stable").reset_index(drop=True)
    out = release_csv_table(pub, centroids, week_starts)
    return out[[c for c in PUBLISHED_COLUMNS if c in out.columns]]
