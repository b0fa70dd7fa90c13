"""Local time for trips: UTC offsets, hour slots on the local clock, and Monday-weeks in local time.

Shared by the in-memory build (:mod:`odcore.od.trips`) and every engine (:mod:`odcore.od.engines`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from odcore.constants import TIME
from odcore.errors import TraceFormatError

_NS = 1_000_000_000


def local_offsets(t_s: np.ndarray, tz: str) -> np.ndarray:
    """UTC offset in seconds of ``tz`` at each Unix time ``t_s`` (vectorised, exact at 15-minute resolution).

    Offsets are computed once per 15-minute bucket of the covered span (tz transitions fall on such boundaries)
    and gathered, so the cost is O(n) plus one pandas conversion of the span's buckets.
    """
    t_s = np.asarray(t_s, dtype=np.int64)
    if tz.upper() == "UTC" or t_s.size == 0:
        return np.zeros(t_s.shape, dtype=np.int64)
    b = t_s // 900
    b0, b1 = int(b.min()), int(b.max())
    if b1 - b0 > 5_000_000:  # > ~140 years: convert unique buckets instead
        ub, inv = np.unique(b, return_inverse=True)
        return _bucket_offsets(ub, tz)[inv]
    table = _bucket_offsets(np.arange(b0, b1 + 1, dtype=np.int64), tz)
    return table[b - b0]


def _bucket_offsets(buckets: np.ndarray, tz: str) -> np.ndarray:
    utc = pd.DatetimeIndex((buckets * 900 * _NS).view("datetime64[ns]"))
    local = utc.tz_localize("UTC").tz_convert(tz).tz_localize(None)
    return (local.asi8 - utc.asi8) // _NS


def whole_hour_offsets(t0: int, t1: int, tz: str) -> bool:
    """True when every UTC offset of ``tz`` between Unix times t0 and t1 is a whole number of hours."""
    if tz.upper() == "UTC":
        return True
    b = np.arange(t0 // 900, t1 // 900 + 1, dtype=np.int64)
    if b.size > 5_000_000:
        return False
    return bool((_bucket_offsets(b, tz) % 3600 == 0).all())


def time_seconds(time: pd.Series | np.ndarray) -> np.ndarray:
    s = pd.Series(time) if not isinstance(time, pd.Series) else time
    if not pd.api.types.is_datetime64_any_dtype(s):
        raise TraceFormatError(f"column {TIME!r} must hold datetimes, got dtype {s.dtype}.", column=TIME)
    if s.dt.tz is None:
        s = s.dt.tz_localize("UTC")
    ns = s.dt.tz_convert("UTC").to_numpy(dtype="datetime64[ns]").view(np.int64)
    return ns // _NS


def hour_slots(t_s: np.ndarray, tz: str) -> np.ndarray:
    """Absolute hour slot of each Unix time: ``(t + offset mod 3600) // 3600``.

    Real elapsed hours aligned on the local clock's hour boundaries; equal to ``t // 3600`` when every offset of
    ``tz`` in the span is a whole number of hours (then the offset table is skipped).
    """
    t_s = np.asarray(t_s, dtype=np.int64)
    if t_s.size == 0 or whole_hour_offsets(int(t_s.min()), int(t_s.max()), tz):
        return t_s // 3600
    return (t_s + local_offsets(t_s, tz) % 3600) // 3600


def week_of_slots(slots: np.ndarray, tz: str) -> np.ndarray:
    """Absolute Monday-week number (days since 1970-01-01 + 3, // 7) of each slot's local start date."""
    t_slot = np.asarray(slots, dtype=np.int64) * 3600
    t_start = t_slot - local_offsets(t_slot, tz) % 3600
    return ((t_start + local_offsets(t_start, tz)) // 86400 + 3) // 7
