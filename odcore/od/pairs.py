"""A week's per-person pairs counted with bounded contributions: checked, canonically ordered, deduplicated and
counted once (:func:`prepare_pairs`), and each person's contribution bounded to ``max_pairs`` pairs per week by the
keyed hash of :mod:`odcore.od.bounding` (:func:`bound_contributions`, :func:`bounded_counts`).

The counts that :mod:`odcore.privacy.release` adds noise to come from here: distinct users per (week, origin,
destination), before (``raw_count``) and after (``true_count``) contribution bounding. The canonical order (rows
sorted by week, origin, destination, user) makes every later random draw independent of the input row order.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from odcore.constants import DESTINATION, ORIGIN, TRUE_COUNT, USER, WEEK
from odcore.errors import ParameterError, check_max_pairs
from odcore.od.bounding import HASH_PRIME, bounding_key, finish_pair_hash, user_hashes, user_week_hash

RAW_COUNT = "raw_count"
"""Distinct users on the pair before contribution bounding (equals ``true_count`` in per-metric mode)."""

PAIRS_COLUMNS = (WEEK, USER, ORIGIN, DESTINATION)
"""Columns of the per-person pairs table: one row per unique (week, user, origin, destination)."""

__all__ = [
    "BOUNDED_COLUMNS",
    "PAIRS_COLUMNS",
    "RAW_COUNT",
    "PreparedPairs",
    "bound_contributions",
    "bound_mask",
    "bound_ranks",
    "bounded_counts",
    "canonical_order",
    "prepare_pairs",
]


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


def canonical_order(cols: list[np.ndarray]) -> np.ndarray:
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
        order = canonical_order([w, o, d] if by_user else [w, o, d, ucode])
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
    :mod:`odcore.od.bounding`.

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
    keep, rep = bound_mask(p, m, bound_ranks(p, key) if prep is None else prep.bound_ranks(key))
    rep = {"rows_in": len(pairs) if prep is None else prep.rows_in, "duplicate_rows_dropped": p.n_dup, **rep}
    return p.take(np.flatnonzero(keep)).frame(), rep


def bound_mask(p: _Pairs, m: int, ranks: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, dict]:
    """Boolean mask of the contributions kept under the bound ``m``, from :func:`bound_ranks`."""
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


def bound_ranks(p: _Pairs, key: int, weeks: _UserWeeks | None = None,
                 uhash: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Each row's rank by (hash, origin, destination) within its (week, user), and the size of every (week, user)
    group: a row is kept under a bound m iff its rank < m. Independent of m (one sort serves every m).
    ``weeks``: :func:`_user_weeks` of ``p`` and ``uhash``: :func:`odcore.od.bounding.user_hashes` of
    ``p.users``, when already computed (neither depends on the key).

    The first two rounds of the hash depend on the user-week alone and run once per user-week
    (:func:`odcore.od.bounding.user_week_hash`). The rows, in group order (within a group: by origin and
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

    :func:`odcore.privacy.release.release_with_report` and :func:`~odcore.privacy.release.release` accept it in place of the DataFrame and then skip that work
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
        """:func:`bound_ranks` of these pairs for the hash ``key`` (:func:`odcore.od.bounding.bounding_key`).

        Kept for the last :attr:`RANK_SEEDS` keys: another bound, ε or threshold with the same seed (the designer's
        two releases, a slider moved in the per-person unit) reuses the hashes and their sort."""
        hit = self._ranks.get(key)
        if hit is None:
            if not self._groups:   # the user-weeks and one md5 per user, for every key
                self._groups.append(_user_weeks(self.pairs))
                self._user_hashes.append(user_hashes(self.pairs.users))
            rank, sizes = bound_ranks(self.pairs, key, self._groups[0], self._user_hashes[0])
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

    Same checks and messages as :func:`odcore.privacy.release.release_with_report`; releasing the result gives
    exactly the same table and report as releasing ``pairs`` with the same config and seed.

    Examples
    --------
    >>> import pandas as pd
    >>> pairs = pd.DataFrame({"week": [0, 0], "user": ["a", "b"], "origin": [1, 1], "destination": [2, 2]})
    >>> prep = prepare_pairs(pairs)
    >>> len(prep), prep.rows_in
    (2, 2)
    >>> bound_contributions(prep, 1, rng=0)[0].equals(bound_contributions(pairs, 1, rng=0)[0])
    True
    """
    p = _validate_pairs(pairs)
    counts = _count(p)
    for a in (p.w, p.o, p.d, p.u, p.users, *counts):
        a.setflags(write=False)
    return PreparedPairs(rows_in=len(pairs), pairs=p, counts=counts)




BOUNDED_COLUMNS = (WEEK, ORIGIN, DESTINATION, RAW_COUNT, TRUE_COUNT)
"""Columns of the per-pair bounded counts an OD engine computes for a user-level release (``build_od(bound=)``)."""


def bounded_counts(pairs: pd.DataFrame | PreparedPairs, max_pairs: int, key: int) -> tuple[pd.DataFrame, dict]:
    """:data:`BOUNDED_COLUMNS` of ``pairs`` under the hash ``key`` (the memory engine's side of
    ``build_od(bound=(max_pairs, key))``; DuckDB and Spark compute the same table in SQL) and the user-week counts
    ``user_weeks``, ``user_weeks_bounded``."""
    m = check_max_pairs(max_pairs)
    prep = pairs if isinstance(pairs, PreparedPairs) else prepare_pairs(pairs)
    keep, rep = bound_mask(prep.pairs, m, prep.bound_ranks(int(key)))
    w, o, d, raw, pair_of_row = prep.counts
    tc = np.bincount(pair_of_row[keep], minlength=len(w)).astype(np.int64)
    table = pd.DataFrame(dict(zip(BOUNDED_COLUMNS, (w, o, d, raw, tc), strict=True)))
    return table, {"user_weeks": rep["user_weeks"], "user_weeks_bounded": rep["user_weeks_bounded"]}
