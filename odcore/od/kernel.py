"""What every engine shares: hour slots and weeks, the grid from a min/max pass, batch preparation, assembly.

The engines (:mod:`odcore.od.trips` in memory, :mod:`odcore.od.engines.duckdb_engine`, :mod:`odcore.od.engines.spark_engine`)
differ only in how they group rows; the per-row definitions live here, so they agree by construction:

- the zone of a point is ``grid.assign(lat, lon)`` of the zone object (a :class:`~odcore.space.grid.SquareGrid` or any
  object with the same ``assign``), called on batches of rows;
- the hour slot of a Unix time is :func:`hour_slots` (real elapsed hours aligned on the local clock's hour
  boundaries), the Monday-week of a slot :func:`week_of_slots` (the local date of the slot's start);
- the zones, when not given, are :func:`fit_zones` of the exact min/max of the kept points (a streaming pass).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from odcore.constants import (
    COUNT,
    DESTINATION,
    LAT,
    LON,
    ORIGIN,
    TIME,
    TRIPS,
    UNIQUE_TRIPS,
    USER,
    USER_WEEKS,
    WEEK,
)
from odcore.data.fingerprint import mix64
from odcore.data.traces import DROP_BBOX, DROP_DATES, DROP_MISSING, RobustBoxCounts
from odcore.data.validate import parse_times
from odcore.errors import ParameterError, TraceFormatError
from odcore.od.hours import hour_slots, time_seconds, week_of_slots
from odcore.od.oddata import HISTOGRAM_COLUMNS, ODData, WithheldTable
from odcore.space.grid import SquareGrid
from odcore.space.zones import make_zones, parse_zone_spec

__all__ = ["ENGINES", "Bounds", "PrepStats", "box_counts_batch", "fit_grid_bounds", "hour_slots", "mix64", "robust_bbox",
           "sparse_box_counts", "week_of_slots", "week_starts_of"]

ENGINES = ("memory", "duckdb", "spark")

_NS = 1_000_000_000
IMIN = np.iinfo(np.int64).min

# column names of the per-row table every engine groups (after the zone and slot of each row are known)
SLOT = "slot"
T_S = "t"


def check_engine(engine: str) -> str:
    e = str(engine).strip().lower()
    if e not in ENGINES:
        raise ParameterError(f"engine must be one of {list(ENGINES)}, got engine={engine!r}.")
    return e


# ---------------------------------------------------------------------------------------------------------------
# Time
# ---------------------------------------------------------------------------------------------------------------





def slot_week_table(smin: int, smax: int, tz: str) -> pd.DataFrame:
    """``DataFrame[slot, week]`` for every slot in ``[smin, smax]`` (small: one row per hour of the span)."""
    if smax - smin > 50_000_000:
        raise ParameterError(f"the traces span {smax - smin + 1} hours (> 5,700 years); check the time column.")
    s = np.arange(smin, smax + 1, dtype=np.int64)
    return pd.DataFrame({SLOT: s, WEEK: week_of_slots(s, tz)})


def week_starts_of(week0: int, n_weeks: int) -> list[str]:
    """ISO dates of the Mondays of absolute weeks ``week0 .. week0 + n_weeks - 1``."""
    return [str(np.datetime64(int((week0 + i) * 7 - 3), "D")) for i in range(n_weeks)]


# ---------------------------------------------------------------------------------------------------------------
# Grid from bounds
# ---------------------------------------------------------------------------------------------------------------

@dataclass
class Bounds:
    """Running min/max of latitude and longitude (a streaming pass)."""

    lat_min: float = math.inf
    lat_max: float = -math.inf
    lon_min: float = math.inf
    lon_max: float = -math.inf
    n: int = 0

    def update(self, lat: np.ndarray, lon: np.ndarray) -> None:
        if len(lat):
            self.lat_min = min(self.lat_min, float(lat.min()))
            self.lat_max = max(self.lat_max, float(lat.max()))
            self.lon_min = min(self.lon_min, float(lon.min()))
            self.lon_max = max(self.lon_max, float(lon.max()))
            self.n += len(lat)

    def merge(self, other: Bounds) -> None:
        if other.n:
            self.update(np.array([other.lat_min, other.lat_max]), np.array([other.lon_min, other.lon_max]))
            self.n += other.n - 2


def _boundary(b: Bounds) -> tuple[np.ndarray, np.ndarray]:
    """The lat/lon box of ``b`` densified (513 points a side)."""
    e = np.linspace(0, 1, 513)
    la0, la1, lo0, lo1 = b.lat_min, b.lat_max, b.lon_min, b.lon_max
    blat = np.concatenate([la0 + (la1 - la0) * e, np.full(513, la1), la1 - (la1 - la0) * e, np.full(513, la0)])
    blon = np.concatenate([np.full(513, lo0), lo0 + (lo1 - lo0) * e, np.full(513, lo1), lo1 - (lo1 - lo0) * e])
    return blat, blon


def fit_zones(b: Bounds, config):
    """The zone system of ``config`` (:attr:`odcore.od.oddata.ODConfig.zones`, default square cells of
    ``config.cell_km2``) fitted to the bounding box ``b`` of the kept points: every engine calls this, so the zone
    ids agree. Squares: :func:`fit_grid_bounds`; H3: the hexagons covering the box (``H3Zones.fit`` of its
    densified boundary); a zone file: its polygons."""
    spec = getattr(config, "zones", None)
    if spec is None:
        return fit_grid_bounds(b, config.cell_km2)
    zs = parse_zone_spec(spec)
    if zs.kind == "file":
        return make_zones(zs)
    if zs.kind == "square":
        return fit_grid_bounds(b, float(zs.value))
    _check_bounds(b)
    return make_zones(zs, *_boundary(b))


def _check_bounds(b: Bounds) -> None:
    if b.n == 0 or not np.isfinite([b.lat_min, b.lat_max, b.lon_min, b.lon_max]).all():
        raise TraceFormatError("no usable point to lay a grid over.")


def fit_grid_bounds(b: Bounds, cell_km2: float) -> SquareGrid:
    """The square grid of :meth:`SquareGrid.fit` laid over the points' lat/lon bounding box.

    Only the exact min/max of the kept points is needed (one streaming pass, any engine): the densified boundary of
    the box is projected (the projection maps the box's boundary around every point inside it; one margin cell
    absorbs the densification error), so the grid covers every point and the cells are the same squares as
    ``SquareGrid.fit`` of the points would lay (origin snapped to multiples of the side in the same CRS).
    """
    _check_bounds(b)
    blat, blon = _boundary(b)
    return SquareGrid.fit(blat, blon, cell_km2, margin_cells=1)


# ---------------------------------------------------------------------------------------------------------------
# Batches: raw rows -> (user, t, lat, lon, slot, cell)
# ---------------------------------------------------------------------------------------------------------------

@dataclass
class PrepStats:
    """What the batch preparation read, dropped (reason -> rows) and saw (slot range, bounds; the kept rows' time
    range and the times read by a stated rule, ``adjusted``, as the loader's report counts them)."""

    rows_read: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    slot_min: int = IMIN
    slot_max: int = IMIN
    bounds: Bounds = field(default_factory=Bounds)
    t_min: int = IMIN
    t_max: int = IMIN
    adjusted: dict[str, int] = field(default_factory=dict)

    def drop(self, reason: str, n: int) -> None:
        if n:
            self.dropped[reason] = self.dropped.get(reason, 0) + int(n)

    def kept_times(self, t: np.ndarray) -> None:
        """Widen the kept rows' time range (Unix seconds) by ``t``."""
        if len(t):
            lo, hi = int(t.min()), int(t.max())
            self.t_min = lo if self.t_min == IMIN else min(self.t_min, lo)
            self.t_max = hi if self.t_max == IMIN else max(self.t_max, hi)

    def slots(self, s: np.ndarray) -> None:
        if len(s):
            lo, hi = int(s.min()), int(s.max())
            self.slot_min = lo if self.slot_min == IMIN else min(self.slot_min, lo)
            self.slot_max = hi if self.slot_max == IMIN else max(self.slot_max, hi)

    def merge(self, other: PrepStats) -> None:
        self.rows_read += other.rows_read
        for k, v in other.dropped.items():
            self.drop(k, v)
        if other.slot_min != IMIN:
            self.slots(np.array([other.slot_min, other.slot_max]))
        if other.t_min != IMIN:
            self.kept_times(np.array([other.t_min, other.t_max]))
        for k, v in other.adjusted.items():
            self.adjusted[k] = self.adjusted.get(k, 0) + v
        self.bounds.merge(other.bounds)


@dataclass(frozen=True)
class Filters:
    """Row filters of a streamed file source (the loader's: missing values, box, dates, time offset)."""

    source: str = "<source>"
    tz: str = "UTC"
    time_unit: str = "auto"
    time_offset_s: float = 0.0
    bbox: tuple[float, float, float, float] | None = None   # south, west, north, east (already resolved)
    start_ns: int | None = None
    end_ns: int | None = None


def _user_missing(user) -> np.ndarray:
    if isinstance(user, (pa.Array, pa.ChunkedArray)):
        return np.asarray(user.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    return pd.isna(user)


DROP_CODES = ("missing_value", "outside_bbox", "outside_date_range", "outside_grid")   # reason code i + 1

_PER_S = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}


def is_zoned_arrow_time(time) -> bool:
    """Whether a batch's time column is an Arrow timestamp with a time zone (UTC instants: read without pandas)."""
    return (isinstance(time, (pa.Array, pa.ChunkedArray)) and pa.types.is_timestamp(time.type)
            and time.type.tz is not None)


def _time_missing(time) -> np.ndarray:
    if isinstance(time, (pa.Array, pa.ChunkedArray)):
        return np.asarray(time.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    return np.asarray(pd.isna(time), dtype=bool)


def _zoned_seconds(time, f: Filters) -> np.ndarray:
    """Unix seconds of a zone-aware Arrow timestamp column (floored, as
    :func:`odcore.data.validate.parse_times` reads a zone-aware datetime column; missing: int64 min), with its
    checks: a time outside the valid years or an implausible median sends the batch through ``parse_times``,
    which reads it as the loader does and raises the loader's message naming the row."""
    v = pc.fill_null(time.cast(pa.int64()), 0).to_numpy(zero_copy_only=False)
    per = _PER_S[time.type.unit]
    t = v // per if per != 1 else v.copy()
    ok = None if time.null_count == 0 else ~_time_missing(time)
    if ok is not None:
        t[~ok] = IMIN
    kept = t if ok is None else t[ok]
    if len(kept):
        lo, hi, med = int(kept.min()), int(kept.max()), float(np.median(kept))
        try:   # the same checks on the extremes and the median
            parse_times(pd.Series(pd.to_datetime([lo, hi, int(med)], unit="s", utc=True)), "auto", f.tz, f.source,
                        TIME)
        except (TraceFormatError, ValueError, OverflowError):   # out of range: the loader's reading and message
            return parse_times(time.to_pandas(), f.time_unit, f.tz, f.source, TIME)[0]
    return t


def _check_ranges(lat: np.ndarray, lon: np.ndarray, f: Filters) -> None:
    """Coordinates outside [-90, 90] x [-180, 180] raise (they usually mean swapped columns)."""
    with np.errstate(invalid="ignore"):
        for arr, col, lim in ((lat, LAT, 90), (lon, LON, 180)):
            bad = np.abs(arr) > lim
            if bad.any():
                i = int(np.argmax(bad))
                raise TraceFormatError(f"{col} {arr[i]} is outside [-{lim}, {lim}] (are latitude and longitude "
                                       "swapped?).", file=f.source, column=col)


def _in_bbox(lat: np.ndarray, lon: np.ndarray, bbox: tuple[float, float, float, float]) -> np.ndarray:
    """Rows inside the box (south, west, north, east; edges included; NaN is outside)."""
    s, w, n, e = bbox
    with np.errstate(invalid="ignore"):
        return (lat >= s) & (lat <= n) & (lon >= w) & (lon <= e)


def kept_points(user, time: pd.Series, lat: np.ndarray, lon: np.ndarray, f: Filters) -> tuple[np.ndarray,
                                                                                              np.ndarray]:
    """``(lat, lon)`` of the rows :func:`filter_batch` keeps (for the zones' min/max pass).

    A datetime column without a date range needs no parsing to know which rows it keeps (a missing time is a
    null), so only then is the parse skipped; a bad time still raises in :func:`filter_batch` on the next pass.
    """
    if f.start_ns is None and f.end_ns is None and (is_zoned_arrow_time(time)
                                                     or pd.api.types.is_datetime64_any_dtype(time)):
        keep = ~(np.isnan(lat) | np.isnan(lon) | _user_missing(user) | _time_missing(time))
        _check_ranges(lat, lon, f)
        if f.bbox is not None:
            keep &= _in_bbox(lat, lon, f.bbox)
    else:
        keep = filter_batch(user, time, lat, lon, f, PrepStats())[0] == 0
    return lat[keep], lon[keep]


def filter_batch(user, time: pd.Series, lat: np.ndarray, lon: np.ndarray, f: Filters, st: PrepStats):
    """Validate and filter one batch of a file source like :func:`odcore.data.traces.load_traces` does.

    Returns ``(reason codes, t seconds)``: code 0 keeps the row, ``i + 1`` drops it for ``DROP_CODES[i]``
    (missing value, outside the box, outside the date range; counted in ``st``). Coordinates outside
    [-90, 90] x [-180, 180] raise :class:`TraceFormatError` (they usually mean swapped columns).
    """
    st.rows_read += len(lat)
    if is_zoned_arrow_time(time):      # UTC instants: no zone rule applies, nothing is adjusted
        t = _zoned_seconds(time, f)
    else:
        if isinstance(time, (pa.Array, pa.ChunkedArray)):
            time = time.to_pandas()
        t, info = parse_times(time, f.time_unit, f.tz, f.source, TIME)
        for k, v in info.adjusted.items():
            if v:
                st.adjusted[k] = st.adjusted.get(k, 0) + int(v)
    missing = (t == IMIN) | np.isnan(lat) | np.isnan(lon) | _user_missing(user)
    _check_ranges(lat, lon, f)
    return filter_codes(t, missing, lat, lon, f, st)


def filter_codes(t: np.ndarray, missing: np.ndarray, lat: np.ndarray, lon: np.ndarray, f: Filters, st: PrepStats):
    """The loader's drops on rows already parsed and range-checked: ``(reason codes, t seconds + the offset)`` as
    :func:`filter_batch` returns them, for rows with a missing value (``missing``), outside the box and outside the
    date range, each counted in ``st``."""
    n = len(lat)
    code = np.zeros(n, np.int8)
    code[missing] = 1
    st.drop(DROP_MISSING, int(missing.sum()))
    t = np.where(missing, 0, t) + round(f.time_offset_s)
    if f.bbox is not None:
        out = (code == 0) & ~_in_bbox(lat, lon, f.bbox)
        code[out] = 2
        st.drop(DROP_BBOX, int(out.sum()))
    if f.start_ns is not None or f.end_ns is not None:
        ok = np.ones(n, bool)
        if f.start_ns is not None:
            ok &= t * _NS >= f.start_ns
        if f.end_ns is not None:
            ok &= t * _NS < f.end_ns
        out = (code == 0) & ~ok
        code[out] = 3
        st.drop(DROP_DATES, int(out.sum()))
    return code, t


# ---------------------------------------------------------------------------------------------------------------
# The robust box (``bbox="auto"``): counts of every usable row, the same in every engine and in the loader
# ---------------------------------------------------------------------------------------------------------------

def box_counts_batch(user, time: pd.Series, lat: np.ndarray, lon: np.ndarray, counts=None):
    """Add the rows of one raw batch with every value present to the robust box's counts (a new
    :class:`odcore.data.traces.RobustBoxCounts` when ``counts`` is None) and return them.

    The loader counts the same rows (those it does not drop as missing), so
    :meth:`~odcore.data.traces.RobustBoxCounts.box` gives every engine and the loader the same box.
    """
    counts = RobustBoxCounts() if counts is None else counts
    ok = ~(np.isnan(lat) | np.isnan(lon) | _user_missing(user) | _time_missing(time))
    counts.add(lat[ok], lon[ok])
    return counts


def sparse_box_counts(user, time: pd.Series, lat: np.ndarray, lon: np.ndarray) -> pd.DataFrame:
    """:func:`box_counts_batch` of one batch as a small ``DataFrame[axis, band, n]`` (for Spark partitions)."""
    ok = ~(np.isnan(lat) | np.isnan(lon) | _user_missing(user) | _time_missing(time))
    parts = []
    for axis, b in enumerate(RobustBoxCounts.bins(lat[ok], lon[ok])):
        band, n = np.unique(b, return_counts=True)
        parts.append(pd.DataFrame({"axis": np.full(len(band), axis, np.int8), "band": band, "n": n.astype(np.int64)}))
    return pd.concat(parts, ignore_index=True)


def robust_bbox(counts, source: str) -> tuple[float, float, float, float]:
    """:meth:`odcore.data.traces.RobustBoxCounts.box` of the counts (raises when no row was usable)."""
    if counts is None:
        counts = RobustBoxCounts()
    return counts.box(source=source).as_tuple()


def assign_batch(grid, lat: np.ndarray, lon: np.ndarray, t: np.ndarray, tz: str, st: PrepStats):
    """Zone and hour slot of each row; rows outside the grid are dropped (counted as ``outside_grid``).

    Returns ``(keep mask, slot, cell)`` over the given rows.
    """
    cell = np.asarray(grid.assign(lat, lon), dtype=np.int64)
    ok = cell >= 0
    st.drop(getattr(grid, "outside_reason", DROP_CODES[3]), int((~ok).sum()))
    slot = hour_slots(t, tz)
    st.slots(slot[ok])
    return ok, slot, cell


def frame_time_seconds(time: pd.Series) -> np.ndarray:
    """UTC Unix seconds of a datetime column (naive = UTC), as :func:`odcore.od.trips.build_od` reads it."""

    return time_seconds(time)


def iso_second(t: int) -> str:
    """ISO text of a UTC Unix second, as ``pandas.Timestamp.isoformat`` writes the loader's times.

    >>> iso_second(0)
    '1970-01-01T00:00:00+00:00'
    """
    return pd.Timestamp(int(t), unit="s", tz="UTC").isoformat()


def frame_user_array(user: pd.Series):
    """A pandas user column as an Arrow array (categoricals as their string/int values; nulls rejected)."""
    if user.isna().any():
        raise TraceFormatError("the user column has missing values.", column=USER)
    if isinstance(user.dtype, pd.CategoricalDtype):
        cats = user.cat.categories
        return pa.array(np.asarray(cats)[user.cat.codes.to_numpy()])
    if pd.api.types.is_integer_dtype(user):
        return pa.array(user.to_numpy(np.int64))
    return pa.array(user.astype(str).to_numpy(dtype=object) if user.dtype == object
                    and not all(isinstance(x, str) for x in user.iloc[:100]) else user.to_numpy())


# ---------------------------------------------------------------------------------------------------------------
# Assembly of the engines' tables into ODData
# ---------------------------------------------------------------------------------------------------------------

AGGREGATES_ONLY_REASON = (
    "the Spark engine built this OD data for a user-level release (build_od(..., engine='spark', "
    "bound=(max_pairs, key), keep_pairs=False)), which brings only aggregates to the driver: per-pair counts, the "
    "bounded per-pair counts, user-weeks by (week, trips, unique_trips) (ODData.user_week_histogram(), "
    "ODData.unique_trips_figures()) and totals (ODData.summary()). For one row per user-week, build it with "
    "keep_pairs=True or without bound (or with the memory or duckdb engine).")
"""Why an aggregates-only :class:`~odcore.od.oddata.ODData` has no per-person table (its
:class:`~odcore.od.oddata.WithheldTable` says it on any use)."""


def assemble(*, grid, config, counts: pd.DataFrame, user_week: pd.DataFrame | None, pairs: pd.DataFrame | None,
             stats: dict[str, Any], user_like: pd.Series | None = None,
             user_week_counts: pd.DataFrame | None = None):
    """ODData from tables keyed by *absolute* week numbers (``week`` = Monday-week since 1970).

    ``counts[week, origin, destination, count]``, ``user_week[week, user, trips, unique_trips]`` (every active
    user-week) and, when available, ``pairs[week, user, origin, destination]``; they are re-indexed from the
    first active week and sorted like the memory engine's output.

    Aggregates only (no per-person table reached this process): ``user_week`` None and ``user_week_counts`` the
    histogram ``[week, trips, unique_trips, user_weeks]`` of the active user-weeks, ``stats["users"]`` the distinct
    people; the result's ``user_week`` is then a :class:`~odcore.od.oddata.WithheldTable`
    (:data:`AGGREGATES_ONLY_REASON`) and ``pairs`` is empty.
    """
    weeks_of = user_week if user_week is not None else user_week_counts
    if weeks_of is None or len(weeks_of) == 0:
        raise TraceFormatError("no hourly location: every row was dropped.")
    week0 = int(weeks_of[WEEK].min())
    n_weeks = int(weeks_of[WEEK].max()) - week0 + 1

    def rel(df: pd.DataFrame, cols: list[str]) -> pd.DataFrame:
        df = df.assign(**{WEEK: df[WEEK].to_numpy(np.int64) - week0})[cols]
        keys = [df[c].cat.codes.to_numpy() if isinstance(df[c].dtype, pd.CategoricalDtype) else df[c].to_numpy()
                for c in cols]
        if len(df) > 1:
            # already sorted? (one pass) else one numpy lexsort (faster than DataFrame.sort_values)
            gt = np.zeros(len(df) - 1, bool)
            eq = np.ones(len(df) - 1, bool)
            for k in keys:
                gt |= eq & (k[1:] > k[:-1])
                eq &= k[1:] == k[:-1]
            if not (gt | eq).all():
                return df.take(np.lexsort(keys[::-1])).reset_index(drop=True)
        return df.reset_index(drop=True)

    if user_week is None:
        hist = rel(user_week_counts, list(HISTOGRAM_COLUMNS)).astype(np.int64)
        if pairs is not None:
            raise ValueError("aggregates only: pairs must be None.")
        counts = rel(counts, [WEEK, ORIGIN, DESTINATION, COUNT]).astype(
            {WEEK: np.int64, ORIGIN: np.int64, DESTINATION: np.int64, COUNT: np.int64})
        empty_user = user_like.iloc[:0].to_numpy() if user_like is not None else np.empty(0, object)
        pairs = pd.DataFrame({WEEK: np.empty(0, np.int64), USER: empty_user, ORIGIN: np.empty(0, np.int64),
                              DESTINATION: np.empty(0, np.int64)})
        if user_like is not None:
            pairs[USER] = pairs[USER].astype(user_like.dtype)
        if USER_WEEKS not in hist.columns or "users" not in stats:
            raise ValueError("aggregates only: user_week_counts needs user_weeks and stats needs users.")
        return ODData(grid=grid, week_starts=week_starts_of(week0, n_weeks),
                      user_week=WithheldTable("user_week", AGGREGATES_ONLY_REASON), pairs=pairs, counts=counts,
                      config=config, stats={**stats, "pairs_available": False, "per_user": False},
                      user_week_counts=hist)
    if user_like is None and not pd.api.types.is_numeric_dtype(user_week[USER].dtype):
        # a streamed file: text ids become the loader's categorical of the users kept (sorted)
        cats = pd.Index(np.unique(user_week[USER].to_numpy(dtype=str)), dtype=object)
        user_like = pd.Series(pd.Categorical([], categories=cats))
    elif user_like is None:
        user_like = pd.Series(np.empty(0, np.int64))
    if user_like is not None and pd.api.types.is_integer_dtype(user_like.dtype):
        user_week = user_week.astype({USER: user_like.dtype})
        if pairs is not None:
            pairs = pairs.astype({USER: user_like.dtype})
    if user_like is not None and isinstance(user_like.dtype, pd.CategoricalDtype):
        user_week = user_week.assign(**{USER: pd.Categorical(user_week[USER], dtype=user_like.dtype)})
        if pairs is not None:
            pairs = pairs.assign(**{USER: pd.Categorical(pairs[USER], dtype=user_like.dtype)})
    counts = rel(counts, [WEEK, ORIGIN, DESTINATION, COUNT]).astype(
        {WEEK: np.int64, ORIGIN: np.int64, DESTINATION: np.int64, COUNT: np.int64})
    user_week = rel(user_week, [WEEK, USER, TRIPS, UNIQUE_TRIPS]).astype(
        {WEEK: np.int64, TRIPS: np.int64, UNIQUE_TRIPS: np.int64})
    if pairs is None:
        pairs = pd.DataFrame({WEEK: np.empty(0, np.int64), USER: user_week[USER].iloc[:0].to_numpy(),
                              ORIGIN: np.empty(0, np.int64), DESTINATION: np.empty(0, np.int64)})
        pairs[USER] = pairs[USER].astype(user_week[USER].dtype)
        stats = {**stats, "pairs_available": False}
    else:
        pairs = rel(pairs, [WEEK, USER, ORIGIN, DESTINATION]).astype(
            {WEEK: np.int64, ORIGIN: np.int64, DESTINATION: np.int64})
    return ODData(grid=grid, week_starts=week_starts_of(week0, n_weeks), user_week=user_week, pairs=pairs,
                  counts=counts, config=config, stats=stats)


def grid_of_frame(df: pd.DataFrame, config):
    """Zones of ``config`` fitted to the min/max of a trace frame's points (as every engine fits them)."""
    b = Bounds()
    b.update(df[LAT].to_numpy(np.float64), df[LON].to_numpy(np.float64))
    return fit_zones(b, config)
