"""The content fingerprint of a trace table (``user, time, lat, lon``), computable in pieces and in any order.

A release record names its data by this fingerprint (:func:`odcore.report.sheet.release_record`). It is a hash of
the *set* of kept fixes, so the loader's table, a Cabspotting folder streamed in groups of cabs and a Parquet input
counted by DuckDB or Spark (rows hashed on every executor, sums added up) give the same value for the same data:

- each row's 64-bit hash is :func:`pandas.util.hash_pandas_object` of ``(user, time, lat, lon)`` with integer user
  ids as ``int64``, any other id as its text, the time as int64 nanoseconds UTC, the coordinates as ``float64``;
- four running sums mod 2^64, one per lane ``k``, of ``mix64(hash ^ LANE_KEYS[k])`` (the splitmix64 finaliser, a
  bijection that is not linear, so the lanes are four different sums: an incremental multiset hash, Bellare &
  Micciancio 1997, "AdHash");
- SHA-256 of a version line, the number of rows and the four sums.

The row order does not enter (the loader's order is fixed anyway: by user, then time); one changed, added or
removed fix changes the value. Release records written before this definition carry the SHA-256 of the loader's
table in its row order (:func:`odcore.report.sheet.data_fingerprint`): the values differ.

>>> import pandas as pd
>>> t = pd.DataFrame({"user": ["a", "b"], "time": pd.to_datetime([0, 60], unit="s", utc=True),
...                   "lat": [1.0, 2.0], "lon": [3.0, 4.0]})
>>> trace_fingerprint(t) == trace_fingerprint(t.iloc[::-1])
True
>>> trace_fingerprint(t) == trace_fingerprint(t.assign(lat=[1.0, 2.5]))
False
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from odcore.constants import LAT, LON, TIME, USER

__all__ = ["FINGERPRINT_VERSION", "LANE_KEYS", "TraceFingerprint", "mix64", "row_hashes", "trace_fingerprint"]

FINGERPRINT_VERSION = "odcore trace fingerprint 2: sha256(n, 4 lane sums of mix64(row hash ^ key))"
LANE_KEYS = (0x9E3779B97F4A7C15, 0xD1B54A32D192ED03, 0x8CB92BA72F3D8DD7, 0xF39CC0605CEDC835)

_MIX1, _MIX2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser (a bijection of uint64), vectorised; also the engines' shard hash
    (:mod:`odcore.od.kernel`)."""
    x = np.asarray(x).astype(np.uint64, copy=True)
    with np.errstate(over="ignore"):
        x ^= x >> np.uint64(30)
        x *= _MIX1
        x ^= x >> np.uint64(27)
        x *= _MIX2
        x ^= x >> np.uint64(31)
    return x


def _user_values(user) -> np.ndarray | pd.Series:
    """Integer ids as int64, anything else as text (categoricals: their categories as text, taken by code)."""
    s = user if isinstance(user, pd.Series) else pd.Series(user)
    if isinstance(s.dtype, pd.CategoricalDtype):
        cats = s.cat.categories
        if pd.api.types.is_integer_dtype(cats.dtype):
            return cats.to_numpy(np.int64)[s.cat.codes.to_numpy()]
        return pd.Categorical.from_codes(s.cat.codes.to_numpy(),
                                         categories=pd.Index(cats.astype(str).to_numpy(dtype=object), dtype=object))
    if pd.api.types.is_integer_dtype(s.dtype) and not pd.api.types.is_bool_dtype(s.dtype):
        return s.to_numpy(np.int64)
    if s.dtype == object and all(isinstance(x, str) for x in s.iloc[:100]):
        return s.to_numpy(dtype=object)
    return s.astype(str).to_numpy(dtype=object)


def row_hashes(user, time_ns, lat, lon) -> np.ndarray:
    """The per-row uint64 hashes of the fingerprint: ``user`` ids (any array or Series), ``time_ns`` int64
    nanoseconds UTC (or a datetime column), ``lat`` and ``lon`` degrees."""
    t = time_ns
    if isinstance(t, pd.Series) and pd.api.types.is_datetime64_any_dtype(t.dtype):
        t = t.dt.tz_convert("UTC") if t.dt.tz is not None else t
        t = t.to_numpy("datetime64[ns]").view(np.int64)
    frame = pd.DataFrame({USER: _user_values(user), TIME: np.asarray(t, dtype=np.int64),
                          LAT: np.asarray(lat, dtype=np.float64), LON: np.asarray(lon, dtype=np.float64)},
                         copy=False)
    return pd.util.hash_pandas_object(frame, index=False).to_numpy(np.uint64)


@dataclass
class TraceFingerprint:
    """Running state of the fingerprint: rows and lane sums; :meth:`add` hashes, :meth:`merge` another state (any
    order), :meth:`hexdigest` the value. :meth:`partial` gives a batch's state as plain integers split in 32-bit
    halves (a Spark or SQL sum of them cannot overflow), :meth:`from_halves` adds such sums back."""

    n: int = 0
    lanes: list[int] = field(default_factory=lambda: [0, 0, 0, 0])

    def add(self, hashes: np.ndarray) -> None:
        h = np.asarray(hashes, dtype=np.uint64)
        self.n += int(h.size)
        if h.size:
            for k, key in enumerate(LANE_KEYS):
                s = int(mix64(h ^ np.uint64(key)).sum(dtype=np.uint64))
                self.lanes[k] = (self.lanes[k] + s) % 2**64

    def merge(self, other: TraceFingerprint) -> None:
        self.n += other.n
        self.lanes = [(a + b) % 2**64 for a, b in zip(self.lanes, other.lanes, strict=True)]

    def partial(self) -> dict[str, int]:
        """``{"n": rows, "l0_hi": .., "l0_lo": .., ...}``: each lane as two 32-bit halves (sums of up to 2^31 of
        them fit a signed 64-bit integer)."""
        out = {"n": self.n}
        for k, v in enumerate(self.lanes):
            out[f"l{k}_hi"], out[f"l{k}_lo"] = v >> 32, v & 0xFFFFFFFF
        return out

    @classmethod
    def from_halves(cls, sums: dict[str, int]) -> TraceFingerprint:
        """The state whose lanes are ``(sum of hi) << 32 + (sum of lo)`` mod 2^64 (sums of :meth:`partial`)."""
        return cls(int(sums["n"]), [((int(sums[f"l{k}_hi"]) << 32) + int(sums[f"l{k}_lo"])) % 2**64
                                    for k in range(len(LANE_KEYS))])

    def hexdigest(self) -> str:
        h = hashlib.sha256(FINGERPRINT_VERSION.encode())
        h.update(int(self.n).to_bytes(8, "little"))
        for v in self.lanes:
            h.update(int(v).to_bytes(8, "little"))
        return h.hexdigest()


def trace_fingerprint(frame: pd.DataFrame) -> str:
    """The fingerprint (hex SHA-256) of a trace table's ``user, time, lat, lon`` (see the module's text)."""
    fp = TraceFingerprint()
    if len(frame):
        fp.add(row_hashes(frame[USER], frame[TIME], frame[LAT], frame[LON]))
    return fp.hexdigest()
