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
    Sampling rule: within each (week, user), the unique pairs are put in a uniformly random order (one
    ``rng.random()`` key per pair after a canonical sort) and the first ``max_pairs`` are kept, i.e. each user
    keeps a uniformly random subset of ``min(max_pairs, n)`` of their ``n`` unique pairs.

One comparison everywhere: a pair is published iff ``noisy_count >= threshold``. :func:`release_probability` and
:func:`threshold_delta` use the same ``>=`` (OpenDP issue #2922 was a mismatch between the two).

Only observed pairs (true count >= 1 before bounding) enter the table; there is no public list of all cell pairs,
which is why thresholding is needed and why it costs a delta (:func:`threshold_delta`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np
import pandas as pd

from odcore.constants import (
    DESTINATION,
    NOISE,
    NOISY_COUNT,
    ORIGIN,
    RELEASE_PROB,
    RELEASED,
    TRUE_COUNT,
    USER,
    WEEK,
)
from odcore.errors import ParameterError, check_positive

RAW_COUNT = "raw_count"
"""Distinct users on the pair before contribution bounding (equals ``true_count`` in per-metric mode)."""

RELEASE_COLUMNS = (WEEK, ORIGIN, DESTINATION, RAW_COUNT, TRUE_COUNT, NOISE, NOISY_COUNT, RELEASED, RELEASE_PROB)
PAIRS_COLUMNS = (WEEK, USER, ORIGIN, DESTINATION)

__all__ = [
    "PAIRS_COLUMNS",
    "RAW_COUNT",
    "RELEASE_COLUMNS",
    "Mode",
    "ReleaseConfig",
    "ReleaseResult",
    "bound_contributions",
    "release",
    "release_probability",
    "release_with_report",
    "threshold_delta",
]


class Mode(StrEnum):
    """Unit of privacy of the release."""

    PER_METRIC = "per_metric"
    USER_LEVEL = "user_level"


def _check_threshold(threshold: Any) -> float:
    try:
        t = float(threshold)
    except (TypeError, ValueError):
        raise ParameterError(f"threshold must be a number >= 1, got threshold={threshold!r}.") from None
    if not math.isfinite(t) or t < 1:
        raise ParameterError(f"threshold must be a finite number >= 1 (a count of users), got threshold={threshold!r}.")
    return t


def _check_max_pairs(max_pairs: Any) -> int:
    if isinstance(max_pairs, bool):
        raise ParameterError(f"max_pairs must be an integer >= 1, got max_pairs={max_pairs!r}.")
    try:
        f = float(max_pairs)
    except (TypeError, ValueError):
        raise ParameterError(f"max_pairs must be an integer >= 1, got max_pairs={max_pairs!r}.") from None
    if not math.isfinite(f) or f < 1 or f != int(f):
        raise ParameterError(f"max_pairs must be an integer >= 1, got max_pairs={max_pairs!r}.")
    return int(f)


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
        object.__setattr__(self, "epsilon", check_positive("epsilon", self.epsilon))
        t = _check_threshold(self.threshold)
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
            object.__setattr__(self, "max_pairs", _check_max_pairs(self.max_pairs))
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
    tau = _check_threshold(threshold)
    sens = check_positive("sensitivity", sensitivity)
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
    n = _check_max_pairs(n_pairs) if n_pairs is not None else 1
    d1 = float(release_probability(1.0, epsilon, threshold, sensitivity))
    if d1 >= 1.0:
        return 1.0
    # numerically stable 1 - (1 - d1)^n (the Google library uses the same -expm1(n*log1p(-d1)))
    return float(-np.expm1(n * np.log1p(-d1)))


# ---------------------------------------------------------------------------------------------------------------
# Input checking and counting
# ---------------------------------------------------------------------------------------------------------------

def _validate_pairs(pairs: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """Check the per-user pairs table; return it with integer keys, canonically sorted, and the duplicates count."""
    if not isinstance(pairs, pd.DataFrame):
        raise ParameterError(f"pairs must be a pandas DataFrame with columns {list(PAIRS_COLUMNS)}, "
                             f"got {type(pairs).__name__}.")
    missing = [c for c in PAIRS_COLUMNS if c not in pairs.columns]
    if missing:
        raise ParameterError(f"pairs is missing column(s) {missing}; expected columns {list(PAIRS_COLUMNS)} "
                             f"(one row per unique (week, user, origin, destination)), got {list(pairs.columns)}.")
    df = pairs.loc[:, list(PAIRS_COLUMNS)]
    for col in (WEEK, ORIGIN, DESTINATION):
        s = df[col]
        bad = s.isna().to_numpy()
        if not pd.api.types.is_numeric_dtype(s) or pd.api.types.is_bool_dtype(s):
            raise ParameterError(f"pairs column {col!r} must hold integers, got dtype {s.dtype}.")
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ParameterError(f"pairs column {col!r} has {int(bad.sum())} missing value(s); first at row {i} "
                                 f"(0-based position); expected integer ids.")
        v = s.to_numpy(dtype=float)
        nonint = v != np.floor(v)
        if nonint.any():
            i = int(np.flatnonzero(nonint)[0])
            raise ParameterError(f"pairs column {col!r} must hold integers; row {i} has {v[i]!r}.")
    ubad = df[USER].isna().to_numpy()
    if ubad.any():
        i = int(np.flatnonzero(ubad)[0])
        raise ParameterError(f"pairs column 'user' has {int(ubad.sum())} missing value(s); first at row {i}.")
    out = pd.DataFrame({
        WEEK: df[WEEK].to_numpy(dtype=np.int64),
        USER: df[USER].to_numpy(),
        ORIGIN: df[ORIGIN].to_numpy(dtype=np.int64),
        DESTINATION: df[DESTINATION].to_numpy(dtype=np.int64),
    })
    n0 = len(out)
    # Canonical order, so the random draws do not depend on the input row order.
    ucode, _ = pd.factorize(out[USER], sort=True)
    order = np.lexsort((out[DESTINATION].to_numpy(), out[ORIGIN].to_numpy(), ucode, out[WEEK].to_numpy()))
    out = out.take(order).reset_index(drop=True)
    ucode = ucode[order]
    w, o, d = (out[c].to_numpy() for c in (WEEK, ORIGIN, DESTINATION))
    dup = np.zeros(n0, dtype=bool)
    if n0 > 1:
        dup[1:] = (w[1:] == w[:-1]) & (ucode[1:] == ucode[:-1]) & (o[1:] == o[:-1]) & (d[1:] == d[:-1])
    n_dup = int(dup.sum())
    out["_ucode"] = ucode
    if n_dup:
        out = out.loc[~dup].reset_index(drop=True)
    return out, n_dup


def bound_contributions(pairs: pd.DataFrame, max_pairs: int, rng=None) -> tuple[pd.DataFrame, dict]:
    """Keep at most ``max_pairs`` unique pairs per (week, user), chosen uniformly at random.

    Sampling rule: rows are sorted canonically by (week, user, origin, destination), each gets one
    ``rng.random()`` key, and within a (week, user) the ``max_pairs`` rows with the smallest keys are kept — a
    uniformly random subset of size ``min(max_pairs, n)``. Vectorised (one lexsort, no loop over users).

    Parameters
    ----------
    pairs:
        DataFrame[week, user, origin, destination]; duplicate rows are removed first (and counted).
    max_pairs:
        Integer >= 1.
    rng:
        ``numpy.random.Generator | int | None``.

    Returns
    -------
    (pandas.DataFrame, dict)
        The kept rows (columns week, user, origin, destination) and a report with ``rows_in``,
        ``duplicate_rows_dropped``, ``contributions_in``, ``contributions_dropped_by_bounding``, ``user_weeks``,
        ``user_weeks_bounded``.
    """
    m = _check_max_pairs(max_pairs)
    rng = np.random.default_rng(rng)
    df, n_dup = _validate_pairs(pairs)
    kept, rep = _bound_sorted(df, m, rng)
    rep = {"rows_in": len(pairs), "duplicate_rows_dropped": n_dup, **rep}
    return kept.drop(columns="_ucode"), rep


def _bound_sorted(df: pd.DataFrame, m: int, rng: np.random.Generator) -> tuple[pd.DataFrame, dict]:
    n = len(df)
    w = df[WEEK].to_numpy()
    u = df["_ucode"].to_numpy()
    key = rng.random(n)
    order = np.lexsort((key, u, w))
    ws, us = w[order], u[order]
    new_group = np.ones(n, dtype=bool)
    if n > 1:
        new_group[1:] = (ws[1:] != ws[:-1]) | (us[1:] != us[:-1])
    starts = np.flatnonzero(new_group)
    group_id = np.cumsum(new_group) - 1
    rank = np.arange(n) - starts[group_id] if n else np.zeros(0, dtype=np.int64)
    keep_sorted = rank < m
    keep = np.zeros(n, dtype=bool)
    keep[order] = keep_sorted
    sizes = np.diff(np.append(starts, n))
    rep = {
        "contributions_in": int(n),
        "contributions_dropped_by_bounding": int(n - keep.sum()),
        "user_weeks": len(starts),
        "user_weeks_bounded": int((sizes > m).sum()),
    }
    return df.loc[keep].reset_index(drop=True), rep


def _count(df: pd.DataFrame) -> pd.DataFrame:
    """Distinct users per (week, origin, destination) of a deduplicated pairs table."""
    if len(df) == 0:
        return pd.DataFrame({WEEK: np.zeros(0, np.int64), ORIGIN: np.zeros(0, np.int64),
                             DESTINATION: np.zeros(0, np.int64), TRUE_COUNT: np.zeros(0, np.int64)})
    c = df.groupby([WEEK, ORIGIN, DESTINATION], sort=True).size()
    out = c.reset_index(name=TRUE_COUNT)
    out[TRUE_COUNT] = out[TRUE_COUNT].astype(np.int64)
    return out


# ---------------------------------------------------------------------------------------------------------------
# The release
# ---------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ReleaseResult:
    """A release table and what happened on the way (nothing is dropped silently)."""

    table: pd.DataFrame
    config: ReleaseConfig
    report: dict = field(default_factory=dict)


def release_with_report(pairs: pd.DataFrame, config: ReleaseConfig | None = None, rng=None) -> ReleaseResult:
    """Run the release and return the table with a report of every row removed and why.

    Parameters
    ----------
    pairs:
        DataFrame[week, user, origin, destination], one row per unique (week, user, pair)
        (``odcore.trips.ODData.pairs``). Duplicate rows are removed and counted (each user adds at most 1 to a
        count: Bassolas et al., "Each user contributes at most one increment to each partition").
    config:
        :class:`ReleaseConfig` (default: the Bassolas setting ε = 0.66, τ = 100, per metric).
    rng:
        ``numpy.random.Generator | int | None``. Same seed, same output (independent of the input row order).

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
        never submitted to the mechanism: noise and noisy_count NaN, released False, release_prob 0 (publishing
        them would let dropped contributions influence the output). ``report`` counts them.
    """
    config = ReleaseConfig() if config is None else config
    if not isinstance(config, ReleaseConfig):
        raise ParameterError(f"config must be a ReleaseConfig, got {type(config).__name__}.")
    rng = np.random.default_rng(rng)
    df, n_dup = _validate_pairs(pairs)
    raw = _count(df).rename(columns={TRUE_COUNT: RAW_COUNT})
    report: dict[str, Any] = {
        **config.to_dict(),
        "sensitivity": config.sensitivity,
        "noise_scale": config.scale,
        "rows_in": len(pairs),
        "duplicate_rows_dropped": n_dup,
        "weeks": int(raw[WEEK].nunique()),
        "users": int(df["_ucode"].nunique()) if len(df) else 0,
        "contributions_in": len(df),
        "contributions_dropped_by_bounding": 0,
    }
    if config.mode is Mode.USER_LEVEL:
        kept, brep = _bound_sorted(df, int(config.max_pairs), rng)
        report.update(brep)
        bounded = _count(kept)
        table = raw.merge(bounded, on=[WEEK, ORIGIN, DESTINATION], how="left", sort=False)
        table[TRUE_COUNT] = table[TRUE_COUNT].fillna(0).astype(np.int64)
    else:
        table = raw.assign(**{TRUE_COUNT: raw[RAW_COUNT].to_numpy()})
    tc = table[TRUE_COUNT].to_numpy()
    live = tc > 0
    noise = np.full(len(table), np.nan)
    noise[live] = rng.laplace(0.0, config.scale, size=int(live.sum()))
    noisy = tc + noise
    released = np.zeros(len(table), dtype=bool)
    released[live] = noisy[live] >= config.threshold
    prob = np.zeros(len(table))
    prob[live] = release_probability(tc[live], config.epsilon, config.threshold, config.sensitivity)
    table[NOISE] = noise
    table[NOISY_COUNT] = noisy
    table[RELEASED] = released
    table[RELEASE_PROB] = prob
    table = table.loc[:, list(RELEASE_COLUMNS)]
    report.update({
        "pairs_observed": len(table),
        "pairs_emptied_by_bounding": int((~live).sum()),
        "pairs_released": int(released.sum()),
        "pairs_released_expected": float(prob.sum()),
        "delta_per_pair": threshold_delta(config.epsilon, config.threshold, config.sensitivity, 1),
        "delta_user_week": (threshold_delta(config.epsilon, config.threshold, config.sensitivity,
                                            config.max_pairs) if config.mode is Mode.USER_LEVEL else None),
    })
    return ReleaseResult(table=table, config=config, report=report)


def release(pairs: pd.DataFrame, config: ReleaseConfig | None = None, rng=None) -> pd.DataFrame:
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
    return release_with_report(pairs, config, rng).table
