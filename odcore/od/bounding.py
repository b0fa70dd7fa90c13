"""Per-person contribution bounding by a keyed hash: the same rule in numpy, DuckDB SQL and Spark SQL.

Rule (``user_level`` mode, bound ``m``): within each (week, user), every unique pair (origin, destination) gets the
hash ``h(key, user, week, origin, destination)`` below, and the user keeps the ``m`` pairs with the smallest
``(h, origin, destination)``. The kept set is a function of the user's own pairs and the key only, so the L1
sensitivity of the weekly count vector is ``m`` whatever the key (Google differential-privacy library,
``max_partitions_contributed``); the key only makes the kept subset look uniformly random, which
``tests/odcore/privacy/test_release.py`` checks statistically. Because the rule needs nothing but integer ``+ * %`` and ``md5``,
every engine computes it in place (:func:`bounded_counts_sql`), keeps exactly the same pairs for a key, and sends
the driver per-pair counts only, never a per-person table.

The hash, with ``P = 2^31 - 1`` and every intermediate value below ``2^63`` (no overflow in numpy's int64, DuckDB's
BIGINT or Spark's ANSI-mode LONG):

- ``u`` = the first 8 hex digits of ``md5(user as text)`` (integer ids as their decimal text), as an integer;
- ``h = u``; then for ``x`` in ``(u, week, origin, destination, 0)`` with round constants ``(a_i, b_i)`` derived
  from the key: ``t = ((h + x mod P) mod P · a_i + b_i) mod P``, ``h = t² mod P``.

``week`` is the week index of the release table (0 = the first week with data). The key is one draw from the
release's generator (:func:`bounding_key`), so a seed fixes the key and then the noise.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache

import numpy as np

__all__ = ["HASH_PRIME", "bounded_counts_sql", "bounding_key", "finish_pair_hash", "pair_hash", "round_constants",
           "user_hashes", "user_week_hash"]

HASH_PRIME = 2**31 - 1
_ROUNDS = 5          # u, week, origin, destination, and one final round


def bounding_key(rng: np.random.Generator) -> int:
    """The hash key of a release: one 62-bit integer drawn from ``rng`` (before its noise)."""
    return int(rng.integers(0, 2**62, dtype=np.int64))


def round_constants(key: int) -> list[tuple[int, int]]:
    """``(a_i, b_i)`` of the hash rounds, ``1 <= a_i < P`` and ``0 <= b_i < P``, from the key (splitmix64)."""
    out = []
    s = int(key) & (2**64 - 1)
    for _ in range(_ROUNDS):
        vals = []
        for _ in range(2):
            s = (s + 0x9E3779B97F4A7C15) & (2**64 - 1)
            z = s
            z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & (2**64 - 1)
            z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & (2**64 - 1)
            vals.append(z ^ (z >> 31))
        out.append((1 + vals[0] % (HASH_PRIME - 1), vals[1] % HASH_PRIME))
    return out


@lru_cache(maxsize=1 << 18, typed=True)
def _user_hash(x) -> int:
    return int(hashlib.md5(str(x).encode("utf-8")).hexdigest()[:8], 16)


def user_hashes(users) -> np.ndarray:
    """``u`` of every user label (int64): the first 8 hex digits of the md5 of its text. One md5 per label, so
    call it on the distinct users; each label's is kept (the same people are bounded again at every seed and on
    every grid; by type, so ``1`` and ``1.0``, whose texts differ, are not confused)."""
    if isinstance(users, np.ndarray) and users.ndim == 1 and (users.dtype.kind == "i" or
                                                              (users.dtype.kind == "u" and users.itemsize < 8)):
        return _KNOWN_IDS.hashes(users.astype(np.int64))   # an integer's text is its decimal digits, whatever its type
    return np.fromiter((_user_hash(x) for x in users), dtype=np.int64, count=len(users))


class _IdHashes:
    """The hashes of the integer user ids seen so far, sorted by id, looked up by one binary search per id: the
    same people come back at every grid and seed, and a Python call per id (even a cached one) costs more than the
    search. Replaced whole when it grows (a reader in another thread sees the old or the new pair, both right)."""

    LIMIT = 1 << 22   # ids kept at most (64 MB); past it, only the last array's

    def __init__(self) -> None:
        self._known = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))

    def hashes(self, ids: np.ndarray) -> np.ndarray:
        known, kh = self._known
        at = np.minimum(np.searchsorted(known, ids), max(len(known) - 1, 0))
        hit = known[at] == ids if len(known) else np.zeros(len(ids), dtype=bool)
        out = np.empty(len(ids), dtype=np.int64)
        out[hit] = kh[at[hit]]
        if not hit.all():
            new = np.unique(ids[~hit])
            nh = np.fromiter((_user_hash(x) for x in new.tolist()), dtype=np.int64, count=len(new))
            out[~hit] = nh[np.searchsorted(new, ids[~hit])]
            if len(known) + len(new) > self.LIMIT:
                known, kh = known[:0], kh[:0]
            ids_all, h_all = np.concatenate([known, new]), np.concatenate([kh, nh])
            order = np.argsort(ids_all, kind="stable")
            self._known = (ids_all[order], h_all[order])
        return out


_KNOWN_IDS = _IdHashes()


def _mod_p(x: np.ndarray, *, small: bool = False) -> np.ndarray:
    """``x mod P`` for int64 ``0 <= x < 2^63`` (``small``: ``x < 2P``), in place, without a division:
    ``2^31 ≡ 1 (mod P)``, so folding the high bits onto the low ones twice leaves a value below ``P + 3``, and one
    subtraction ends it."""
    p = np.int64(HASH_PRIME)
    if not small:
        _fold(x, np.empty_like(x))
    np.subtract(x, p, out=x, where=x >= p)
    return x


def _fold(x: np.ndarray, buf: np.ndarray) -> np.ndarray:
    """``x`` (int64, ``0 <= x < 2^63``) replaced in place by a value ``≡ x (mod P)`` below ``P + 3``: the high bits
    folded onto the low ones twice (``2^31 ≡ 1``). ``buf``: scratch space of ``x``'s shape."""
    p = np.int64(HASH_PRIME)
    for _ in range(2):
        np.right_shift(x, 31, out=buf)
        np.bitwise_and(x, p, out=x)
        x += buf
    return x


def _residues(x) -> np.ndarray:
    """``x mod P`` of an id or week column (values in ``[0, P)``, the usual ids and weeks, are their own residue)."""
    x = np.asarray(x, dtype=np.int64)
    return x if len(x) == 0 or (int(x.min()) >= 0 and int(x.max()) < HASH_PRIME) else np.mod(x, np.int64(HASH_PRIME))


def _rounds(consts, h: np.ndarray, xs) -> np.ndarray:
    """The hash rounds ``t = ((h + x) mod P · a + b) mod P``, ``h = t² mod P`` over ``xs`` (residues, or None for
    ``x = 0``), in place on ``h`` (int64 in ``[0, P)``), which is returned in ``[0, P)``.

    Between rounds ``h`` is only folded below ``P + 3`` (:func:`_fold`), the same residue: every product stays below
    ``2^63`` (``(h + x)·a + b < (2P + 3)(P - 1) + P`` and ``h² < (P + 3)²``), and the one subtraction at the end
    gives the integer the ``%`` form gives. The rows go through every round a block at a time (:data:`_BLOCK`): the
    dozen passes of a round then stay in the CPU's cache (about twice as fast as whole columns)."""
    p = np.int64(HASH_PRIME)
    buf = np.empty(min(len(h), _BLOCK), dtype=np.int64)
    for s in range(0, len(h), _BLOCK):
        hs = h[s:s + _BLOCK]
        bs = buf[:len(hs)]
        for (a, b), x in zip(consts, xs, strict=True):
            if x is not None:
                hs += x[s:s + _BLOCK]   # < 2P + 3
            hs *= np.int64(a)
            hs += np.int64(b)
            _fold(hs, bs)
            hs *= hs
            _fold(hs, bs)
        np.subtract(hs, p, out=hs, where=hs >= p)
    return h


_BLOCK = 1 << 15   # rows hashed at a time: 256 kB a column


def user_week_hash(key: int, u: np.ndarray, week: np.ndarray) -> np.ndarray:
    """The hash of the rule's first two rounds (``u``, then ``week``), in ``[0, P)``: a function of the user-week
    alone, so computed once per (week, user) and finished for each of its pairs by :func:`finish_pair_hash`."""
    u = np.asarray(u, dtype=np.int64)
    h = _mod_p(u.copy())            # u < 2^32 may exceed P: its residue (the same hash)
    return _rounds(round_constants(key)[:2], h, (h.copy(), _residues(week)))


def finish_pair_hash(key: int, user_week: np.ndarray, origin: np.ndarray, destination: np.ndarray) -> np.ndarray:
    """:func:`pair_hash` from the rows' :func:`user_week_hash` (the rounds of ``origin``, ``destination`` and the
    final one)."""
    h = np.array(user_week, dtype=np.int64)   # a copy: the rounds run in place
    return _rounds(round_constants(key)[2:], h, (_residues(origin), _residues(destination), None))


def pair_hash(key: int, u: np.ndarray, week: np.ndarray, origin: np.ndarray, destination: np.ndarray) -> np.ndarray:
    """The hash of every row (int64 in ``[0, P)``), ``u`` from :func:`user_hashes`. Each ``mod P`` of the rounds is
    a fold of bits (:func:`_fold`; the same integers as ``%``, several times faster)."""
    return finish_pair_hash(key, user_week_hash(key, u, week), origin, destination)


def _round_sql(h: str, x: str, a: int, b: int) -> str:
    p = HASH_PRIME
    return f"(((({h} + ((CAST({x} AS BIGINT) % {p}) + {p}) % {p}) % {p}) * {a} + {b}) % {p})"


def bounded_counts_sql(src: str, max_pairs: int, key: int, *, week_offset: int = 0, dialect: str = "duckdb",
                       user: str = "user", week: str = "week", origin: str = "o", destination: str = "d") -> str:
    """SQL of the bounded counts of a table of unique (week, user, origin, destination) rows ``src``.

    Returns rows ``week, o, d, raw_count, true_count, bounded_users, user_rows``: distinct users per pair before
    and after bounding; ``bounded_users`` = rows whose user-week has more than ``max_pairs`` pairs and that are the
    user-week's first row (so its sum is the number of bounded user-weeks) and ``user_rows`` = first rows of any
    user-week (the user-weeks with pairs). ``week_offset`` is subtracted from ``week`` in the hash (absolute week
    numbers -> the release table's week index). The nesting keeps every ``t`` computed once (a column of the
    subquery below), so the text grows linearly with the rounds.
    """
    m = int(max_pairs)
    if dialect == "duckdb":
        md5 = f"('0x' || substr(md5(CAST({user} AS VARCHAR)), 1, 8))::BIGINT"
    elif dialect == "spark":
        md5 = f"CAST(conv(substr(md5(CAST({user} AS STRING)), 1, 8), 16, 10) AS BIGINT)"
    else:
        raise ValueError(f"dialect must be 'duckdb' or 'spark', got dialect={dialect!r}.")
    cols = f"{week} AS week, {user} AS user, {origin} AS o, {destination} AS d"
    q = f"SELECT {cols}, {md5} AS h FROM {src}"
    xs = ("h", f"(week - {int(week_offset)})", "o", "d", "0")
    p = HASH_PRIME
    for i, ((a, b), x) in enumerate(zip(round_constants(key), xs, strict=True)):
        q = f"SELECT week, user, o, d, {_round_sql('h', x, a, b)} AS t FROM ({q}) q{i}t"
        q = f"SELECT week, user, o, d, (t * t) % {p} AS h FROM ({q}) q{i}"
    ranked = (f"SELECT week, user, o, d, row_number() OVER (PARTITION BY week, user ORDER BY h, o, d) AS r, "
              f"count(*) OVER (PARTITION BY week, user) AS n FROM ({q}) qh")
    return (f"SELECT week, o, d, count(*) AS raw_count, sum(CASE WHEN r <= {m} THEN 1 ELSE 0 END) AS true_count, "
            f"sum(CASE WHEN r = 1 AND n > {m} THEN 1 ELSE 0 END) AS bounded_users, "
            f"sum(CASE WHEN r = 1 THEN 1 ELSE 0 END) AS user_rows FROM ({ranked}) qr GROUP BY week, o, d")
