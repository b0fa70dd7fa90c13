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
    Sampling rule (:mod:`odcore.privacy.bounding`): within each (week, user), every unique pair gets a keyed hash
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
    USER,
    WEEK,
)
from odcore.data.validate import check_param
from odcore.errors import ParameterError, check_max_pairs, check_positive, check_threshold
from odcore.privacy.bounding import HASH_PRIME, bounding_key, finish_pair_hash, user_hashes, user_week_hash

RAW_COUNT = "raw_count"
"""Distinct users on the pair before contribution bounding (equals ``true_count`` in per-metric mode)."""

RELEASE_COLUMNS = (WEEK, ORIGIN, DESTINATION, RAW_COUNT, TRUE_COUNT, NOISE, NOISY_COUNT, RELEASED, RELEASE_PROB)
PAIRS_COLUMNS = (WEEK, USER, ORIGIN, DESTINATION)

# What may leave the building: the published pairs only, their noisy counts and where they are (names are added by
# odcore.space.zones.add_zone_names). Nothing about unpublished pairs, no true count, no noise, no seed.
PUBLISHED_COLUMNS = (WEEK, "week_start", ORIGIN, DESTINATION, NOISY_COUNT, "origin_lat", "origin_lon",
                     "destination_lat", "destination_lon")
ANALYSIS_NOTICE = ("DO NOT SHARE: analysis table with the true counts, the noise and the pairs that were not "
                   "published; it discloses what the release protects. Share only the published table.")

__all__ = [
    "ANALYSIS_NOTICE",
    "BOUNDED_COLUMNS",
    "PAIRS_COLUMNS",
    "PUBLISHED_COLUMNS",
    "RAW_COUNT",
    "RELEASE_COLUMNS",
    "Mode",
    "PreparedPairs",
    "ReleaseConfig",
    "ReleaseResult",
    "bound_contributions",
    "bounded_counts",
    "prepare_pairs",
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
# Input checking and counting
# ---------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Pairs:
    """Deduplicated user-pair contributions as int64 arrays, sorted canonically by (week, origin, destination, user).

    ``u`` holds codes into ``users`` (the sorted distinct user labels), so the order — and hence every random draw —
    does not depend on the input row order.
    """

    w: np.ndarray
    o: np.ndarray
    d: np.ndarray
    u: np.ndarray
    users: np.ndarray
    n_dup: int

    def __len__(self) -> int:
        return len(self.w)

    def take(self, idx: np.ndarray) -> _Pairs:
        return _Pairs(self.w[idx], self.o[idx], self.d[idx], self.u[idx], self.users, self.n_dup)

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame({WEEK: self.w, USER: self.users[self.u] if len(self.users) else self.u,
                             ORIGIN: self.o, DESTINATION: self.d})


def _canonical_order(cols: list[np.ndarray]) -> np.ndarray:
    """Order sorting rows by ``cols`` (most significant first): one argsort of a packed int64 key when the value
    ranges fit in 63 bits (the usual case), else a lexsort."""
    n = len(cols[0])
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    key = np.zeros(n, dtype=np.int64)
    span = 1
    shifted = []
    for c in cols:
        lo, hi = int(c.min()), int(c.max())
        r = hi - lo + 1
        span *= r
        shifted.append((c - lo, r))
    if span >= 2**62:
        return np.lexsort(tuple(reversed(cols)))
    for c, r in shifted:
        key *= r
        key += c
    return _stable_argsort(key, span)


_RADIX_MIN_ROWS = 20_000


def _stable_argsort(key: np.ndarray, span: int) -> np.ndarray:
    """``np.argsort(key, kind="stable")`` of integer keys in ``[0, span)``. A stable sort has one result, so any way
    to it gives the same order: when the key and the row number fit in 63 bits together, a sort of the values
    ``key · 2^b + row`` (all distinct, so the order is the stable one; numpy sorts int64 values with SIMD, several
    times faster than an argsort), whose low bits are then the order; else least-significant-digit passes over
    16-bit digits when that is faster (many rows, keys of at most 48 bits): numpy's stable sort of uint16 is a radix
    sort."""
    n = len(key)
    bits = max(n - 1, 1).bit_length()
    if max(span - 1, 1).bit_length() + bits <= 63:
        packed = np.left_shift(key, bits, dtype=np.int64)
        packed |= np.arange(n, dtype=np.int64)
        packed.sort()
        packed &= (1 << bits) - 1
        return packed
    if span > 1 << 48 or (len(key) < _RADIX_MIN_ROWS and span > 1 << 16):
        return np.argsort(key, kind="stable")
    perm = None
    for shift in range(0, max(span - 1, 1).bit_length(), 16):
        digit = (((key if perm is None else key[perm]) >> shift) & 0xFFFF).astype(np.uint16)
        step = np.argsort(digit, kind="stable")
        perm = step if perm is None else perm[step]
    return perm


def _sorted_rows(cols: list[np.ndarray]) -> list[np.ndarray] | None:
    """The rows of the int64 columns ``cols`` sorted by ``cols`` (most significant first), as new columns; None when
    the columns' value ranges take more than 63 bits together.

    Each row is packed into one int64 (each column's offset from its minimum in a bit field of its own), the
    packed values are sorted (numpy sorts int64 values with SIMD: several times faster than an argsort and the
    gathers of each column it needs), and the fields unpacked. Equal rows are equal whatever their order, so the
    columns are those of any sort of the rows, a stable one included."""
    n = len(cols[0])
    if n == 0:
        return [c.copy() for c in cols]
    fields = []
    for c in cols:
        lo, hi = int(c.min()), int(c.max())
        fields.append((lo, (hi - lo).bit_length()))
    if sum(b for _, b in fields) > 63:
        return None
    key = np.zeros(n, dtype=np.int64)
    for c, (lo, b) in zip(cols, fields, strict=True):
        if b:
            key <<= b
            key += c      # may wrap for ids near 2^63; the next line unwraps (int64 arithmetic is modular)
            key -= lo
    key.sort()
    out = []
    for lo, b in reversed(fields):
        if b:
            f = key & ((1 << b) - 1)
            f += lo
            key >>= b
        else:
            f = np.full(n, lo, dtype=np.int64)
        out.append(f)
    return out[::-1]


def _user_codes(user: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """``pd.factorize(user, sort=True)``: int64 codes into the sorted distinct labels, and those labels. Integer ids
    already in ascending order (one week of an ODData's pairs) are coded by their run starts, without hashing."""
    if user.dtype == np.int64:
        v = user.to_numpy()
        if len(v) and bool((v[1:] >= v[:-1]).all()):
            new = np.ones(len(v), dtype=bool)
            new[1:] = v[1:] != v[:-1]
            return np.cumsum(new) - 1, v[new]
    codes, users = pd.factorize(user, sort=True)
    return codes.astype(np.int64), np.asarray(users)


def _validate_pairs(pairs: pd.DataFrame) -> _Pairs:
    """Check the per-user pairs table; return deduplicated, canonically sorted arrays (and the duplicates count)."""
    if not isinstance(pairs, pd.DataFrame):
        raise ParameterError(f"pairs must be a pandas DataFrame with columns {list(PAIRS_COLUMNS)}, "
                             f"got {type(pairs).__name__}.")
    missing = [c for c in PAIRS_COLUMNS if c not in pairs.columns]
    if missing:
        raise ParameterError(f"pairs is missing column(s) {missing}; expected columns {list(PAIRS_COLUMNS)} "
                             f"(one row per unique (week, user, origin, destination)), got {list(pairs.columns)}.")
    arrays = {}
    for col in (WEEK, ORIGIN, DESTINATION):
        s = pairs[col]
        if not pd.api.types.is_numeric_dtype(s) or pd.api.types.is_bool_dtype(s):
            raise ParameterError(f"pairs column {col!r} must hold integers, got dtype {s.dtype}.")
        if pd.api.types.is_integer_dtype(s) and not s.hasnans:
            arrays[col] = s.to_numpy(dtype=np.int64)
            continue
        v = s.to_numpy(dtype=float, na_value=np.nan)
        bad = np.isnan(v)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ParameterError(f"pairs column {col!r} has {int(bad.sum())} missing value(s); first at row {i} "
                                 f"(0-based position); expected integer ids.")
        nonint = v != np.floor(v)
        if nonint.any():
            i = int(np.flatnonzero(nonint)[0])
            raise ParameterError(f"pairs column {col!r} must hold integers; row {i} has {v[i]!r}.")
        arrays[col] = v.astype(np.int64)
    ubad = pairs[USER].isna().to_numpy()
    if ubad.any():
        i = int(np.flatnonzero(ubad)[0])
        raise ParameterError(f"pairs column 'user' has {int(ubad.sum())} missing value(s); first at row {i}.")
    ucode, users = _user_codes(pairs[USER])
    w, o, d = arrays[WEEK], arrays[ORIGIN], arrays[DESTINATION]
    # Canonical order, so the random draws do not depend on the input row order: the rows sorted by (week, origin,
    # destination, user), packed into one integer each when they fit (the sorted rows, not an order to gather by)
    packed = _sorted_rows([w, o, d, ucode])
    if packed is not None:
        w, o, d, ucode = packed
    else:
        # Rows already in (week, user) order (an ODData's pairs) need only a stable sort by pair: equal pairs keep
        # their ascending users.
        by_user = len(w) > 1 and bool(np.all((w[1:] > w[:-1]) | ((w[1:] == w[:-1]) & (ucode[1:] >= ucode[:-1]))))
        order = _canonical_order([w, o, d] if by_user else [w, o, d, ucode])
        w, o, d, ucode = w[order], o[order], d[order], ucode[order]
    n0 = len(w)
    dup = np.zeros(n0, dtype=bool)
    if n0 > 1:
        dup[1:] = (w[1:] == w[:-1]) & (o[1:] == o[:-1]) & (d[1:] == d[:-1]) & (ucode[1:] == ucode[:-1])
    n_dup = int(dup.sum())
    if n_dup:
        keep = ~dup
        w, o, d, ucode = w[keep], o[keep], d[keep], ucode[keep]
    return _Pairs(w, o, d, ucode, users, n_dup)


def bound_contributions(pairs: pd.DataFrame | PreparedPairs, max_pairs: int, rng=None
                        ) -> tuple[pd.DataFrame, dict]:
    """Keep at most ``max_pairs`` unique pairs per (week, user), chosen by the keyed hash of
    :mod:`odcore.privacy.bounding`.

    Sampling rule: the key is one draw of ``rng``; within a (week, user) the ``max_pairs`` rows with the smallest
    (hash, origin, destination) are kept — a subset of size ``min(max_pairs, n)`` that looks uniformly random, the
    same rows the DuckDB and Spark engines keep for the key. Vectorised (one sort, no loop over users).

    Parameters
    ----------
    pairs:
        DataFrame[week, user, origin, destination]; duplicate rows are removed first (and counted). Or the same
        prepared once (:func:`prepare_pairs`): the same rows are kept, and the hashes' sort for a key is shared with
        the releases of that preparation (:meth:`PreparedPairs.bound_ranks`).
    max_pairs:
        Integer >= 1.
    rng:
        ``numpy.random.Generator | int | None``.

    Returns
    -------
    (pandas.DataFrame, dict)
        The kept rows (columns week, user, origin, destination, in canonical order) and a report with
        ``rows_in``, ``duplicate_rows_dropped``, ``contributions_in``, ``contributions_dropped_by_bounding``,
        ``user_weeks``, ``user_weeks_bounded``.
    """
    m = check_max_pairs(max_pairs)
    key = bounding_key(np.random.default_rng(rng))
    prep = pairs if isinstance(pairs, PreparedPairs) else None
    p = _validate_pairs(pairs) if prep is None else prep.pairs
    keep, rep = _bound_mask(p, m, _bound_ranks(p, key) if prep is None else prep.bound_ranks(key))
    rep = {"rows_in": len(pairs) if prep is None else prep.rows_in, "duplicate_rows_dropped": p.n_dup, **rep}
    return p.take(np.flatnonzero(keep)).frame(), rep


def _bound_mask(p: _Pairs, m: int, ranks: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, dict]:
    """Boolean mask of the contributions kept under the bound ``m``, from :func:`_bound_ranks`."""
    rank, sizes = ranks
    keep = rank < m
    rep = {
        "contributions_in": len(p),
        "contributions_dropped_by_bounding": int(len(p) - keep.sum()),
        "user_weeks": len(sizes),
        "user_weeks_bounded": int((sizes > m).sum()),
    }
    return keep, rep


@dataclass(frozen=True)
class _UserWeeks:
    """Who is in which (week, user) group, the unit contribution bounding ranks rows in, independent of the hash key
    (:func:`_user_weeks`). The groups are numbered in (week, user) order.

    Per canonical row: ``group``, its group. In the group order (the canonical rows stably sorted by group, so each
    group's rows stay in (origin, destination) order): ``by_group``, the canonical row at each place, and ``pos``, its
    place within its group. Per group: ``sizes`` (rows), ``users`` (the user's code) and ``weeks``.
    """

    group: np.ndarray
    by_group: np.ndarray
    pos: np.ndarray
    sizes: np.ndarray
    users: np.ndarray
    weeks: np.ndarray


def _small(a: np.ndarray) -> np.ndarray:
    """``a`` as int32 when its values fit (half the memory for what a prepared week keeps)."""
    return a.astype(np.int32) if len(a) == 0 or (a.min() >= -2**31 and a.max() < 2**31) else a


def _user_weeks(p: _Pairs) -> _UserWeeks:
    """:class:`_UserWeeks` of ``p``: the (week, user) groups by their codes (``week · users + user``, one week: the
    user code itself), counted without a sort, and one stable sort of the rows by group (a radix pass of 16 bits
    for up to 65,536 groups)."""
    n, nu = len(p), len(p.users)
    w0 = int(p.w[0]) if n else 0
    one_week = n == 0 or p.w[-1] == w0   # p.w is sorted
    code = p.u if one_week else (p.w - w0) * nu + p.u
    span = nu if one_week else (int(p.w[-1]) - w0 + 1) * nu
    if span <= max(4 * n, 1 << 20):
        counts = np.bincount(code, minlength=span)
        present = np.flatnonzero(counts)
        dense = np.cumsum(counts > 0) - 1
        group, sizes = (code if len(present) == span else dense[code]), counts[present]
    else:   # many weeks of many users: the codes present, by a sort
        present, group, sizes = np.unique(code, return_inverse=True, return_counts=True)
    by_group = _stable_argsort(group, len(sizes))
    starts = np.cumsum(sizes) - sizes
    pos = np.arange(n) - np.repeat(starts, sizes)
    return _UserWeeks(_small(group), _small(by_group), _small(pos), sizes, present % nu if nu else present,
                      present // nu + w0 if nu else present)


def _bound_ranks(p: _Pairs, key: int, weeks: _UserWeeks | None = None,
                 uhash: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Each row's rank by (hash, origin, destination) within its (week, user), and the size of every (week, user)
    group: a row is kept under a bound m iff its rank < m. Independent of m (one sort serves every m).
    ``weeks``: :func:`_user_weeks` of ``p`` and ``uhash``: :func:`odcore.privacy.bounding.user_hashes` of
    ``p.users``, when already computed (neither depends on the key).

    The first two rounds of the hash depend on the user-week alone and run once per user-week
    (:func:`odcore.privacy.bounding.user_week_hash`). The rows, in group order (within a group: by origin and
    destination), are then sorted by (group, hash, place in the group), so ties of the hash keep the (origin,
    destination) order, as SQL's ``ORDER BY h, o, d``: one sort of the distinct int64 values
    ``group · 2^(31+b) + hash · 2^b + place`` when they fit in 63 bits (numpy sorts values with SIMD), else a
    stable sort of ``group · P + hash``. The sort keeps every row in its group's block; a row's rank is the place it
    takes there."""
    n = len(p)
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    g = _user_weeks(p) if weeks is None else weeks
    uh = user_hashes(p.users) if uhash is None else uhash
    h = finish_pair_hash(key, user_week_hash(key, uh[g.users], g.weeks)[g.group], p.o, p.d)[g.by_group]
    ng = len(g.sizes)
    b = max(int(g.sizes.max()) - 1, 1).bit_length()     # bits of a place in a group
    rank = np.empty(n, dtype=np.int64)
    if max(ng - 1, 1).bit_length() + 31 + b <= 63:
        h <<= b
        h |= g.pos
        h |= np.repeat(np.arange(ng, dtype=np.int64) << (31 + b), g.sizes)
        h.sort()
        h &= (1 << b) - 1      # at each place of the group order, the former place of the row sorted there
        h -= g.pos
        h += np.arange(n)      # ... as a place in the whole group order
        rank[g.by_group[h]] = g.pos
        return rank, g.sizes
    h += np.repeat(np.arange(ng, dtype=np.int64) * np.int64(HASH_PRIME), g.sizes)   # < 2^63 for ng < 2^32
    by = np.argsort(h, kind="stable")
    rank[g.by_group[by]] = g.pos
    return rank, g.sizes


def _count(p: _Pairs) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Distinct users per (week, origin, destination) of canonically sorted, deduplicated contributions.

    Rows are already sorted by pair, so the counts are run lengths (no hashing, no second sort). Also returns each
    row's pair index.
    """
    n = len(p)
    if n == 0:
        z = np.zeros(0, dtype=np.int64)
        return z, z, z, z, z
    new = np.ones(n, dtype=bool)
    new[1:] = (p.w[1:] != p.w[:-1]) | (p.o[1:] != p.o[:-1]) | (p.d[1:] != p.d[:-1])
    starts = np.flatnonzero(new)
    counts = np.diff(np.append(starts, n)).astype(np.int64)
    return p.w[starts], p.o[starts], p.d[starts], counts, np.cumsum(new) - 1


@dataclass(frozen=True, eq=False)
class PreparedPairs:
    """A pairs table checked, deduplicated, canonically sorted and counted once (:func:`prepare_pairs`).

    :func:`release_with_report` and :func:`release` accept it in place of the DataFrame and then skip that work
    (about two thirds of a release of the bundled city's week), so the same week can be released at many ε,
    thresholds and seeds cheaply, as the dashboard's sliders do. Its arrays are read-only.
    """

    rows_in: int
    pairs: _Pairs = field(repr=False)
    counts: tuple = field(repr=False)
    _ranks: dict = field(default_factory=dict, repr=False, compare=False)
    _groups: list = field(default_factory=list, repr=False, compare=False)
    _user_hashes: list = field(default_factory=list, repr=False, compare=False)

    RANK_SEEDS = 4
    """Keys whose contribution-bounding ranks are kept (:meth:`bound_ranks`)."""

    def __len__(self) -> int:
        return len(self.pairs)

    def bound_ranks(self, key: int) -> tuple[np.ndarray, np.ndarray]:
        """:func:`_bound_ranks` of these pairs for the hash ``key`` (:func:`odcore.privacy.bounding.bounding_key`).

        Kept for the last :attr:`RANK_SEEDS` keys: another bound, ε or threshold with the same seed (the designer's
        two releases, a slider moved in the per-person unit) reuses the hashes and their sort."""
        hit = self._ranks.get(key)
        if hit is None:
            if not self._groups:   # the user-weeks and one md5 per user, for every key
                self._groups.append(_user_weeks(self.pairs))
                self._user_hashes.append(user_hashes(self.pairs.users))
            rank, sizes = _bound_ranks(self.pairs, key, self._groups[0], self._user_hashes[0])
            ranks = (rank.astype(np.int32) if len(rank) < 2**31 else rank, sizes)   # kept small: 4 bytes a row
            for a in ranks:
                a.setflags(write=False)
            try:   # oldest first; another session's thread may change the dict meanwhile
                while len(self._ranks) >= self.RANK_SEEDS:
                    self._ranks.pop(next(iter(self._ranks)), None)
            except (RuntimeError, StopIteration):
                pass
            self._ranks[key] = ranks
            return ranks
        return hit


def prepare_pairs(pairs: pd.DataFrame) -> PreparedPairs:
    """Validate and count ``pairs`` (DataFrame[week, user, origin, destination]) once for many releases.

    Same checks and messages as :func:`release_with_report`; releasing the result gives exactly the same table and
    report as releasing ``pairs`` with the same config and seed.

    Examples
    --------
    >>> import pandas as pd
    >>> pairs = pd.DataFrame({"week": [0, 0], "user": ["a", "b"], "origin": [1, 1], "destination": [2, 2]})
    >>> prep = prepare_pairs(pairs)
    >>> release(prep, ReleaseConfig(epsilon=1.0, threshold=1), rng=0).equals(
    ...     release(pairs, ReleaseConfig(epsilon=1.0, threshold=1), rng=0))
    True
    """
    p = _validate_pairs(pairs)
    counts = _count(p)
    for a in (p.w, p.o, p.d, p.u, p.users, *counts):
        a.setflags(write=False)
    return PreparedPairs(rows_in=len(pairs), pairs=p, counts=counts)


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
        keep, brep = _bound_mask(p, int(config.max_pairs), prep.bound_ranks(key) if pairs is prep
                                 else _bound_ranks(p, key))
        report.update(brep)
        tc = np.bincount(pair_of_row[keep], minlength=len(w)).astype(np.int64)
    else:
        tc = raw
    in_domain = np.zeros(len(w), dtype=bool)
    if domain is not None:
        dw, do, dd = _domain_arrays(domain, np.unique(w) if len(w) else np.zeros(0, np.int64))
        aw, ao, ad = np.concatenate([w, dw]), np.concatenate([o, do]), np.concatenate([d, dd])
        order = _canonical_order([aw, ao, ad])
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
        from odcore.od.odtable import NO_PAIRS_REASON

        raise ParameterError(f"mode user_level bounds each person's pairs, but {NO_PAIRS_REASON}")
    rng = np.random.default_rng(rng)
    cols = [WEEK, ORIGIN, DESTINATION, COUNT]
    if not isinstance(counts, pd.DataFrame) or any(c not in counts.columns for c in cols):
        raise ParameterError(f"counts must be a DataFrame with columns {cols}.")
    a = [counts[c].to_numpy(np.int64) for c in cols]
    if len(a[0]) and a[3].min() < 1:
        raise ParameterError("counts must be >= 1 (distinct users of an observed pair).")
    order = _canonical_order(a[:3])
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


BOUNDED_COLUMNS = (WEEK, ORIGIN, DESTINATION, RAW_COUNT, TRUE_COUNT)
"""Columns of the per-pair bounded counts an OD engine computes for a user-level release (``build_od(bound=)``)."""


def bounded_counts(pairs: pd.DataFrame | PreparedPairs, max_pairs: int, key: int) -> tuple[pd.DataFrame, dict]:
    """:data:`BOUNDED_COLUMNS` of ``pairs`` under the hash ``key`` (the memory engine's side of
    ``build_od(bound=(max_pairs, key))``; DuckDB and Spark compute the same table in SQL) and the user-week counts
    ``user_weeks``, ``user_weeks_bounded``."""
    m = check_max_pairs(max_pairs)
    prep = pairs if isinstance(pairs, PreparedPairs) else prepare_pairs(pairs)
    keep, rep = _bound_mask(prep.pairs, m, prep.bound_ranks(int(key)))
    w, o, d, raw, pair_of_row = prep.counts
    tc = np.bincount(pair_of_row[keep], minlength=len(w)).astype(np.int64)
    table = pd.DataFrame(dict(zip(BOUNDED_COLUMNS, (w, o, d, raw, tc), strict=True)))
    return table, {"user_weeks": rep["user_weeks"], "user_weeks_bounded": rep["user_weeks_bounded"]}


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
    order = _canonical_order(a[:3])
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
