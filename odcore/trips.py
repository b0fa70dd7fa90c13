"""Hourly locations, trips and weekly unique origin-destination (OD) counts.

Follows Houssiau et al. (2022), Methods, "Generating trips from empirical data": each user's trajectory is
segmented with a *winner-takes-all* rule (the most used location in every hour), and a trip is a move from one
location to a *distinct* one in the consecutive hour. Locations are square grid cells of ~1.3 km²
(:class:`odcore.grid.SquareGrid`), and, as in Bassolas et al. (2022, reply), the released metric for a week W and a
cell pair (A, B) is the number of distinct users who made the trip A -> B at least once in W (each user counts at
most once per pair and week). Weeks start on Monday 00:00 in the chosen time zone.

Everything is vectorised with integer keys and one sort of the trace rows: no Python loop over users or rows.

Conventions
-----------
- Hours are real elapsed hours aligned on the local clock's hour boundaries, so "consecutive hours" stays right
  across daylight-saving changes (the local 01:00-02:00 of a fall-back night is two hours, not one).
- Ties in the winner-takes-all (two cells with the same number of records in an hour) go to the lower cell id.
- A trip belongs to the week of its origin hour (a trip Sunday 23:xx -> Monday 00:xx counts in the earlier week).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from odcore.constants import CELL, COUNT, DESTINATION, LAT, LON, ORIGIN, TIME, TRIPS, UNIQUE_TRIPS, USER, WEEK
from odcore.errors import ParameterError, TraceFormatError, check_positive
from odcore.grid import SquareGrid

__all__ = ["HourIndex", "ODConfig", "ODData", "build_od", "hourly_locations", "local_offsets"]

_NS = 1_000_000_000
_BIG = 2**62


@dataclass(frozen=True)
class ODConfig:
    """How traces become weekly unique OD counts.

    Parameters
    ----------
    cell_km2:
        Grid cell area in km² (Bassolas et al. 2022: ~1.3 km²).
    tz:
        IANA time zone defining local hours and Monday-00:00 week starts (timestamps stay UTC).
    zones:
        Zone system spec (:func:`odcore.zones.parse_zone_spec`: ``square:1.3``, ``h3:8`` or a zone file path);
        None = squares of ``cell_km2``.
    """

    cell_km2: float = 1.3
    tz: str = "UTC"
    zones: str | None = None

    def __post_init__(self) -> None:
        check_positive("cell_km2", self.cell_km2)
        if self.cell_km2 > 10_000:
            raise ParameterError(f"cell_km2 must be <= 10000 km², got cell_km2={self.cell_km2}.")
        try:
            pd.Timestamp("2020-01-01").tz_localize(self.tz)
        except Exception:
            raise ParameterError(f"tz must be an IANA time zone such as 'UTC' or 'Europe/London', got tz={self.tz!r}.") \
                from None
        if self.zones is not None:
            from odcore.zones import parse_zone_spec

            object.__setattr__(self, "zones", str(parse_zone_spec(self.zones)))


@dataclass(frozen=True)
class ODData:
    """Weekly unique OD data built by :func:`build_od`.

    Attributes
    ----------
    grid:
        The zone system the cells refer to: a :class:`~odcore.grid.SquareGrid` or any :mod:`odcore.zones` system
        (H3 hexagons, the user's polygons); ``origin``/``destination`` are its zone ids.
    week_starts:
        ISO dates of the Mondays; index = week number.
    user_week:
        ``DataFrame[week, user, trips, unique_trips]``: one row per user active (at least one hourly location) in a
        week; ``trips`` counts every move, ``unique_trips`` the distinct (origin, destination) pairs
        (Houssiau et al.: 39 trips of one author gave 32 unique trips).
    pairs:
        ``DataFrame[week, user, origin, destination]``, one row per unique pair of a user in a week.
    counts:
        ``DataFrame[week, origin, destination, count]``: distinct users per week and pair (count >= 1).
    config:
        The :class:`ODConfig` used.
    stats:
        Rows used, rows dropped (reason -> count), user-hours.
    """

    grid: SquareGrid | Any
    week_starts: list[str]
    user_week: pd.DataFrame
    pairs: pd.DataFrame
    counts: pd.DataFrame
    config: ODConfig = field(default_factory=ODConfig)
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def n_weeks(self) -> int:
        return len(self.week_starts)

    @property
    def cells(self) -> np.ndarray:
        """Sorted ids of the cells that hold at least one hourly location."""
        return np.asarray(self.stats.get("cells_used", np.unique(np.concatenate(
            [self.counts[ORIGIN].to_numpy(), self.counts[DESTINATION].to_numpy()]))), dtype=np.int64)

    def _check_week(self, w: int) -> int:
        if not (0 <= int(w) < self.n_weeks):
            raise ParameterError(f"week must be in [0, {self.n_weeks}), got week={w}.")
        return int(w)

    def week_pairs(self, w: int) -> pd.DataFrame:
        """Unique pairs of week ``w`` (``user, origin, destination``)."""
        w = self._check_week(w)
        p = self.pairs
        return p.loc[p[WEEK].to_numpy() == w].reset_index(drop=True)

    def week_counts(self, w: int) -> pd.DataFrame:
        """Distinct-user counts of week ``w`` (``origin, destination, count``)."""
        w = self._check_week(w)
        c = self.counts
        return c.loc[c[WEEK].to_numpy() == w].reset_index(drop=True)

    def week_matrix(self, w: int):
        """Week ``w`` as a ``scipy.sparse.coo_matrix`` of shape (n_cells, n_cells) indexed by grid cell ids."""
        from scipy import sparse

        c = self.week_counts(w)
        n = self.grid.n_cells
        return sparse.coo_matrix((c[COUNT].to_numpy(), (c[ORIGIN].to_numpy(), c[DESTINATION].to_numpy())),
                                 shape=(n, n))

    def user_pairs(self, user, week: int | None = None) -> pd.DataFrame:
        """Unique pairs of one user (all weeks, or one week)."""
        p = self.pairs
        m = (p[USER] == user).to_numpy()
        if week is not None:
            m = m & (p[WEEK].to_numpy() == self._check_week(week))  # to_numpy() may be read-only (CoW)
        return p.loc[m].reset_index(drop=True)

    def centroids(self) -> pd.DataFrame:
        """``DataFrame[cell, lat, lon]`` of the used cells (for maps)."""
        return self.grid.centroids(self.cells)

    def summary(self, threshold: int = 100) -> dict[str, Any]:
        """JSON-able figures: users, weeks, cells, trips, unique trips and their quantiles, OD pairs.

        ``od_pairs_over_threshold`` counts (week, pair) entries with at least ``threshold`` distinct users.
        """
        uw = self.user_week
        ut = uw[UNIQUE_TRIPS].to_numpy()
        q = (lambda p: float(np.percentile(ut, p))) if len(ut) else (lambda p: 0.0)
        cnt = self.counts[COUNT].to_numpy()
        return {
            "users": int(uw[USER].nunique()),
            "weeks": self.n_weeks,
            "week_starts": list(self.week_starts),
            "cells": len(self.cells),
            "grid_cells": int(self.grid.n_cells),
            "cell_km2": round(self.grid.cell_km2, 6),
            "crs": self.grid.crs,
            "user_hours": int(self.stats.get("user_hours", 0)),
            "user_weeks": len(uw),
            "trips": int(uw[TRIPS].sum()),
            "unique_trips": int(ut.sum()),
            "unique_trips_per_user_week": {"p10": q(10), "p50": q(50), "p90": q(90),
                                           "max": int(ut.max()) if len(ut) else 0,
                                           "mean": float(ut.mean()) if len(ut) else 0.0},
            "od_pairs": len(self.counts),
            "threshold": int(threshold),
            "od_pairs_over_threshold": int((cnt >= threshold).sum()),
            "max_count": int(cnt.max()) if len(cnt) else 0,
        }


# ---------------------------------------------------------------------------------------------------------------
# Time: local offsets, hours, weeks
# ---------------------------------------------------------------------------------------------------------------

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


def _whole_hour_offsets(t0: int, t1: int, tz: str) -> bool:
    """True when every UTC offset of ``tz`` between Unix times t0 and t1 is a whole number of hours."""
    if tz.upper() == "UTC":
        return True
    b = np.arange(t0 // 900, t1 // 900 + 1, dtype=np.int64)
    if b.size > 5_000_000:
        return False
    return bool((_bucket_offsets(b, tz) % 3600 == 0).all())


def _unique(keys: np.ndarray, return_counts: bool = False):
    """Sorted distinct values (and counts) of an int64 array by one sort (faster than hashing here)."""
    k = np.sort(keys)
    if k.size == 0:
        return (k, np.empty(0, np.int64)) if return_counts else k
    m = np.empty(k.size, bool)
    m[0] = True
    np.not_equal(k[1:], k[:-1], out=m[1:])
    u = k[m]
    if not return_counts:
        return u
    starts = np.flatnonzero(m)
    return u, np.diff(np.append(starts, k.size))


def _bucket_offsets(buckets: np.ndarray, tz: str) -> np.ndarray:
    utc = pd.DatetimeIndex((buckets * 900 * _NS).view("datetime64[ns]"))
    local = utc.tz_localize("UTC").tz_convert(tz).tz_localize(None)
    return (local.asi8 - utc.asi8) // _NS


def _time_seconds(time: pd.Series | np.ndarray) -> np.ndarray:
    s = pd.Series(time) if not isinstance(time, pd.Series) else time
    if not pd.api.types.is_datetime64_any_dtype(s):
        raise TraceFormatError(f"column {TIME!r} must hold datetimes, got dtype {s.dtype}.", column=TIME)
    if s.dt.tz is None:
        s = s.dt.tz_localize("UTC")
    ns = s.dt.tz_convert("UTC").to_numpy(dtype="datetime64[ns]").view(np.int64)
    return ns // _NS


def _user_codes(user: pd.Series) -> tuple[np.ndarray, Any]:
    """(int codes, labels) where labels[code] is the user id."""
    if isinstance(user.dtype, pd.CategoricalDtype):
        codes = user.cat.codes.to_numpy().astype(np.int64)
        if (codes < 0).any():
            raise TraceFormatError("the user column has missing values.", column=USER)
        return codes, user.cat.categories
    if user.isna().any():
        raise TraceFormatError("the user column has missing values.", column=USER)
    codes, labels = pd.factorize(user, sort=True)
    return codes.astype(np.int64), labels


def _labels_take(labels, codes: np.ndarray, like: pd.Series) -> Any:
    if isinstance(like.dtype, pd.CategoricalDtype):
        return pd.Categorical.from_codes(codes.astype(like.cat.codes.dtype), dtype=like.dtype)
    return np.asarray(labels)[codes]


# ---------------------------------------------------------------------------------------------------------------
# Winner-takes-all hourly locations
# ---------------------------------------------------------------------------------------------------------------

def hourly_locations(traces_df: pd.DataFrame, grid: SquareGrid, tz: str = "UTC") -> pd.DataFrame:
    """Winner-takes-all hourly cells: ``DataFrame[user, hour, cell, week]`` (hour = UTC time of the slot start).

    Slower, readable helper for inspection and tests; :func:`build_od` does the same inline.
    """
    core = _core(traces_df, grid, tz)
    hour_utc = (core["slot"] * 3600 - core["slot_shift"]) * _NS
    return pd.DataFrame({
        USER: _labels_take(core["labels"], core["wu"], traces_df[USER]),
        "hour": pd.DatetimeIndex(hour_utc.view("datetime64[ns]")).tz_localize("UTC"),
        CELL: core["wc"],
        WEEK: core["wweek"],
    })


def _core(traces_df: pd.DataFrame, grid: SquareGrid, tz: str) -> dict[str, Any]:
    for col in (USER, TIME, LAT, LON):
        if col not in traces_df.columns:
            raise TraceFormatError(f"traces miss column {col!r}; have {list(traces_df.columns)}.", column=col)
    n_rows = len(traces_df)
    if n_rows == 0:
        raise TraceFormatError("no trace rows.")
    u, labels = _user_codes(traces_df[USER])
    t = _time_seconds(traces_df[TIME])
    cell = grid.assign(traces_df[LAT].to_numpy(np.float64), traces_df[LON].to_numpy(np.float64))
    dropped: dict[str, int] = {}
    ok = cell >= 0
    if not ok.all():
        reason = getattr(grid, "outside_reason", "outside_grid")
        dropped[reason] = int((~ok).sum())
        u, t, cell = u[ok], t[ok], cell[ok]
        if u.size == 0:
            raise TraceFormatError("no trace row falls inside the grid." if reason == "outside_grid" else
                                   f"no trace row falls inside the zones ({getattr(grid, 'spec', '')}).")
    from odcore.engines.kernel import hour_slots

    slot_abs = hour_slots(t, tz)     # shared with the DuckDB and Spark engines
    del t
    out = _winners(u, slot_abs, cell, len(labels), grid.n_cells, tz)
    out.update({"labels": labels, "dropped": dropped, "rows_used": int(ok.sum())})
    return out


def _winners(u: np.ndarray, slot_abs: np.ndarray, cell: np.ndarray, n_users: int, n_cells: int,
             tz: str) -> dict[str, Any]:
    """Winner-takes-all cell of every (user code, absolute hour slot); ties to the lower cell id.

    Consumes ``u``, ``slot_abs`` and ``cell`` (int64; callers pass arrays they no longer need). Returns the
    winners sorted by (user, slot): ``wu, ws`` (slot relative to the first), ``wc``, ``wweek`` (absolute
    Monday-week), ``slot`` (absolute), ``slot_shift`` and ``n_users``.
    """
    from odcore.engines.kernel import week_of_slots

    smin = int(slot_abs.min())
    s = slot_abs - smin
    del slot_abs
    n_slots = int(s.max()) + 1
    cells_map = None
    if n_users * n_slots * n_cells >= _BIG:
        cells_map, cell = np.unique(cell, return_inverse=True)
        n_cells = len(cells_map)
        if n_users * n_slots * n_cells >= _BIG:
            raise ParameterError("too many users x hours x cells for 63-bit keys; split the input by time.")
    # --- winner-takes-all per (user, hour) -------------------------------------------------------------------
    key = (u * n_slots + s) * n_cells + cell
    del u, s, cell
    key.sort()
    wus, wc = _modes(key, n_cells)
    del key
    if cells_map is not None:
        wc = cells_map[wc]
    wu = wus // n_slots
    ws = wus % n_slots
    # local Monday-week of each hour slot, from a table over the (few) slots: offset at the slot start
    slots = np.arange(n_slots, dtype=np.int64) + smin
    week_of_slot = week_of_slots(slots, tz)
    t_start = slots * 3600
    t_start -= local_offsets(t_start, tz) % 3600
    off_shift = local_offsets(t_start, tz) % 3600
    wweek = week_of_slot[ws]
    return {"wu": wu, "ws": ws, "wc": wc, "wweek": wweek, "slot": ws + smin, "slot_shift": off_shift[ws],
            "n_users": n_users}


def _modes(key: np.ndarray, n_cells: int) -> tuple[np.ndarray, np.ndarray]:
    """Most frequent cell of each group, ties to the lower cell id, from sorted ``key = group * n_cells + cell``.

    Returns ``(group, cell)`` of each group's winner, in group order.
    """
    n_key = key.size
    new = np.empty(n_key, bool)
    new[0] = True
    np.not_equal(key[1:], key[:-1], out=new[1:])
    starts = np.flatnonzero(new)
    del new
    ukey = key[starts]
    cnt = np.diff(np.append(starts, n_key))
    us = ukey // n_cells
    uc = ukey % n_cells
    gnew = np.empty(us.size, bool)
    gnew[0] = True
    np.not_equal(us[1:], us[:-1], out=gnew[1:])
    gstart = np.flatnonzero(gnew)
    gmax = np.maximum.reduceat(cnt, gstart)
    del gnew
    is_max = cnt == np.repeat(gmax, np.diff(np.append(gstart, us.size)))
    # first max of each group = lowest cell id among the most used (keys sorted by cell within a group)
    cand = np.flatnonzero(is_max)
    first = np.empty(cand.size, bool)
    if cand.size:
        first[0] = True
        np.not_equal(us[cand[1:]], us[cand[:-1]], out=first[1:])
    win = cand[first]
    return us[win], uc[win]


@dataclass(frozen=True, eq=False)
class HourIndex:
    """What :func:`build_od` needs of a trace table before any zone is known, for one time zone.

    The user code and local hour slot of every row, with the rows ordered by (user, hour slot), plus each slot's
    Monday-week. Zones change only the cell of each row, so a new grid (the dashboard's grid cell area control)
    starts from here: the rows are not sorted again and an hour with a single row needs no vote. For square grids
    the rows' metric coordinates are kept per projection (:meth:`cells`), so another cell size only floors them.
    Its arrays are read-only; it remembers the last projection and square grid it was asked for. Safe to share
    between threads.
    """

    tz: str
    gu: np.ndarray = field(repr=False)       # user code of each (user, hour) with rows, sorted by (user, hour)
    gs: np.ndarray = field(repr=False)       # its hour slot, relative to smin
    starts: np.ndarray | None = field(repr=False)   # first row of each (user, hour); None: one row each
    n_slots: int
    smin: int                                # absolute slot of relative slot 0
    n_users: int
    labels: Any = field(repr=False)          # labels[code] = user id
    like: pd.Series = field(repr=False)      # an empty slice of the user column (its dtype)
    lat: np.ndarray = field(repr=False)      # rows in key order
    lon: np.ndarray = field(repr=False)
    week_of_slot: np.ndarray = field(repr=False)   # absolute Monday-week of each relative slot
    _memo: dict = field(default_factory=dict, repr=False, compare=False)
    """``"xy"``: (crs, x, y) of the rows' last projection; ``"cells"``: (grid, ids) of the last square grid."""

    MEMO_MAX_ROWS = 3_000_000
    """Above this many rows the projection and cells are not kept (24 bytes a row); each grid projects again."""

    @classmethod
    def of(cls, traces_df: pd.DataFrame, tz: str = "UTC") -> HourIndex:
        """Index ``traces_df`` (``user, time, lat, lon``; raises :class:`TraceFormatError` when unusable)."""
        from odcore.engines.kernel import hour_slots, week_of_slots

        for col in (USER, TIME, LAT, LON):
            if col not in traces_df.columns:
                raise TraceFormatError(f"traces miss column {col!r}; have {list(traces_df.columns)}.", column=col)
        if len(traces_df) == 0:
            raise TraceFormatError("no trace rows.")
        u, labels = _user_codes(traces_df[USER])
        slot = hour_slots(_time_seconds(traces_df[TIME]), tz)
        smin = int(slot.min())
        slot -= smin
        n_slots = int(slot.max()) + 1
        n_users = len(labels)
        if n_users * n_slots >= _BIG:
            raise ParameterError("too many users x hours for 63-bit keys; split the input by time.")
        key = u * n_slots + slot
        del u, slot
        lat = traces_df[LAT].to_numpy(np.float64)
        lon = traces_df[LON].to_numpy(np.float64)
        if key.size > 1 and not (key[1:] >= key[:-1]).all():   # files are usually in (user, time) order already
            order = np.argsort(key, kind="stable")
            key, lat, lon = key[order], lat[order], lon[order]
        new = np.empty(key.size, bool)
        new[0] = True
        np.not_equal(key[1:], key[:-1], out=new[1:])
        starts = np.flatnonzero(new)
        del new
        gu, gs = np.divmod(key[starts], n_slots)
        starts = None if starts.size == key.size else starts
        del key
        for a in (gu, gs, starts, lat, lon):
            if a is not None:
                a.setflags(write=False)   # shared (read-only views of the trace table or copies in key order)
        wos = week_of_slots(np.arange(n_slots, dtype=np.int64) + smin, tz)
        return cls(tz=tz, gu=gu, gs=gs, starts=starts, n_slots=n_slots, smin=smin, n_users=n_users, labels=labels,
                   like=traces_df[USER].iloc[:0], lat=lat, lon=lon, week_of_slot=wos)

    def cells(self, zones) -> np.ndarray:
        """Zone id of every row (key order, read-only), as ``zones.assign``. Square grids reuse the projected
        coordinates, and the last square grid's ids are kept (the trips and a map of the points both ask)."""
        if not isinstance(zones, SquareGrid) or self.lat.size > self.MEMO_MAX_ROWS:
            return zones.assign(self.lat, self.lon)
        last = self._memo.get("cells")
        if last is not None and last[0] == zones:
            return last[1]
        proj = self._memo.get("xy")
        if proj is None or proj[0] != zones.crs:
            proj = self._memo["xy"] = (zones.crs, *zones.project(self.lat, self.lon))
        cell = zones.cells_of_xy(proj[1], proj[2])
        cell.setflags(write=False)
        self._memo["cells"] = (zones, cell)
        return cell

    def winners(self, cell: np.ndarray, n_cells: int) -> tuple[np.ndarray, np.ndarray, int, int]:
        """Winner-takes-all cell of every (user, hour) with a row in a zone (``cell >= 0``); ties to the lower id.

        Returns ``(wu, ws, wc, rows_used)``: user code, relative slot and cell of each winner, sorted by (user, slot)
        (read-only when they are the index's own arrays).
        """
        n = cell.size
        rows_used = n - int(np.count_nonzero(cell < 0))
        starts, hours = self.starts, None          # hours: the (user, hour)s left, when rows were dropped
        if rows_used < n:
            ok = cell >= 0
            g = np.arange(n) if starts is None else np.repeat(np.arange(starts.size), np.diff(np.append(starts, n)))
            g, cell, n = g[ok], cell[ok], rows_used
            new = np.empty(n, bool)
            new[0] = True
            np.not_equal(g[1:], g[:-1], out=new[1:])
            starts = np.flatnonzero(new)
            hours = g[starts]
            del g, new, ok
        wc = cell if starts is None else cell[starts]
        if starts is not None and starts.size < n:    # hours with several rows: the most used cell of each
            size = np.diff(np.append(starts, n))
            multi = size > 1
            rows = np.repeat(multi, size)
            n_multi = int(multi.sum())
            mc = cell[rows]
            cells_map = None
            if n_multi * n_cells >= _BIG:
                cells_map, mc = np.unique(mc, return_inverse=True)
                n_cells = len(cells_map)
                if n_multi * n_cells >= _BIG:
                    raise ParameterError("too many users x hours x cells for 63-bit keys; split the input by time.")
            mkey = np.repeat(np.arange(n_multi, dtype=np.int64), size[multi]) * n_cells + mc
            del mc, rows
            mkey.sort()
            _, win = _modes(mkey, n_cells)
            wc[multi] = win if cells_map is None else cells_map[win]
        if hours is None:
            return self.gu, self.gs, wc, rows_used
        return self.gu[hours], self.gs[hours], wc, rows_used


# ---------------------------------------------------------------------------------------------------------------
# Trips and weekly unique OD counts
# ---------------------------------------------------------------------------------------------------------------

def build_od(traces_df: pd.DataFrame, config: ODConfig | None = None, *, grid: SquareGrid | Any | None = None,
             engine: str = "memory", keep_pairs: bool = True, hours: HourIndex | None = None) -> ODData:
    """Traces -> grid cells -> hourly winner-takes-all cells -> trips -> weekly unique OD counts.

    Parameters
    ----------
    traces_df:
        Trace table (``user, time, lat, lon``; ``time`` UTC), e.g. ``load_traces(...).df``. An optional ``loc``
        column is not used: locations are the grid cells of the coordinates (Bassolas et al.).
    config:
        :class:`ODConfig` (cell area, time zone). Default: 1.3 km² cells, UTC.
    grid:
        Use this grid or zone system (anything with ``assign``/``n_cells``, :mod:`odcore.zones`) instead of fitting
        one to the data (e.g. to compare two datasets on the same cells). Points outside every zone are dropped and
        counted in ``stats["rows_dropped"]`` under the zone system's ``outside_reason``.
    engine:
        ``memory`` (numpy, here), ``duckdb`` or ``spark`` (:mod:`odcore.engines`; identical results).
    keep_pairs:
        For ``duckdb`` / ``spark``: also return every user's unique pairs (``ODData.pairs``).
    hours:
        :class:`HourIndex` of ``traces_df`` for ``config.tz`` (memory engine), to build several grids of the same
        traces without sorting them again; made here when None.

    Returns
    -------
    ODData

    References
    ----------
    Houssiau et al. 2022, Methods, "Generating trips from empirical data" (winner-takes-all hours, trips to a
    distinct cell in the consecutive hour); Bassolas et al. 2022 (reply): distinct users per week and pair, cells
    of ~1.3 km².
    """
    config = config or ODConfig()
    if engine != "memory":
        from odcore.engines import build_od as build_with

        return build_with(traces_df, config, grid=grid, engine=engine, keep_pairs=keep_pairs)
    if hours is None:
        hours = HourIndex.of(traces_df, config.tz)
    elif hours.tz != config.tz:
        raise ParameterError(f"the hour index was built for tz={hours.tz!r}, the config asks for tz={config.tz!r}.")
    if grid is None:   # zones from a min/max pass, as every engine does (odcore.engines.kernel.fit_zones)
        from odcore.engines import _grid_of_frame

        grid = _grid_of_frame(traces_df, config)
    cell = hours.cells(grid)
    dropped: dict[str, int] = {}
    n_out = int((cell < 0).sum())
    if n_out:
        reason = getattr(grid, "outside_reason", "outside_grid")
        dropped[reason] = n_out
        if n_out == cell.size:
            raise TraceFormatError("no trace row falls inside the grid." if reason == "outside_grid" else
                                   f"no trace row falls inside the zones ({getattr(grid, 'spec', '')}).")
    wu, ws, wc, rows_used = hours.winners(cell, grid.n_cells)
    del cell
    tb = _od_tables(wu, ws, wc, hours.week_of_slot[ws], hours.n_users, grid.n_cells)
    del wu, ws, wc
    week0 = int(tb["a_week"].min())
    n_weeks = int(tb["a_week"].max()) - week0 + 1
    week_starts = [str(np.datetime64(int((week0 + i) * 7 - 3), "D")) for i in range(n_weeks)]
    labels, like = hours.labels, hours.like
    user_week = pd.DataFrame({
        WEEK: tb["a_week"] - week0,
        USER: _labels_take(labels, tb["a_user"], like),
        TRIPS: tb["trips"],
        UNIQUE_TRIPS: tb["uniq"],
    })
    pairs = pd.DataFrame({
        WEEK: tb["p_week"] - week0,
        USER: _labels_take(labels, tb["p_user"], like),
        ORIGIN: tb["p_o"],
        DESTINATION: tb["p_d"],
    })
    counts = pd.DataFrame({WEEK: tb["c_week"] - week0, ORIGIN: tb["c_o"], DESTINATION: tb["c_d"],
                           COUNT: tb["c_n"]})
    stats = {"rows_used": rows_used, "rows_dropped": dropped, "user_hours": tb["user_hours"],
             "cells_used": tb["used_cells"]}
    return ODData(grid=grid, week_starts=week_starts, user_week=user_week, pairs=pairs, counts=counts,
                  config=config, stats=stats)


def _od_tables(wu: np.ndarray, ws: np.ndarray, wc: np.ndarray, wweek: np.ndarray, n_users: int,
               grid_cells: int) -> dict[str, Any]:
    """Trips, active user-weeks, unique pairs and distinct-user counts from the winners (absolute weeks).

    Returns int64 arrays: ``a_week, a_user, trips, uniq`` (every active user-week, sorted by (week, user)),
    ``p_week, p_user, p_o, p_d`` (unique pairs, sorted), ``c_week, c_o, c_d, c_n`` (counts, sorted), plus
    ``used_cells`` and ``user_hours``.
    """
    week0 = int(wweek.min())
    wk = wweek - week0
    n_weeks = int(wk.max()) + 1

    # Trips: consecutive hour slots of the same user, to a distinct cell (Houssiau et al. 2022, Methods).
    is_trip = (wu[1:] == wu[:-1]) & (ws[1:] == ws[:-1] + 1) & (wc[1:] != wc[:-1])
    i = np.flatnonzero(is_trip)
    del is_trip
    t_user, t_week = wu[i], wk[i]          # a trip belongs to the week of its origin hour
    if grid_cells <= 50_000_000:   # lookup table instead of a sort
        present = np.zeros(grid_cells, dtype=bool)
        present[wc] = True
        used_cells = np.flatnonzero(present)
        remap = np.cumsum(present, dtype=np.int64) - 1
        t_o, t_d = remap[wc[i]], remap[wc[i + 1]]
        del present, remap
    else:
        used_cells, wc_compact = np.unique(wc, return_inverse=True)
        t_o, t_d = wc_compact[i], wc_compact[i + 1]
        del wc_compact
    del i
    n_c = len(used_cells)

    # user-weeks active (at least one hourly location); winners are sorted by (user, hour), so the
    # user-major key user * W + week is sorted too and its distinct values are where it changes.
    k_active = wu * n_weeks + wk
    chg = np.empty(k_active.size, bool)
    chg[0] = True
    np.not_equal(k_active[1:], k_active[:-1], out=chg[1:])
    ua = k_active[chg]
    del k_active, chg
    a_user, a_week = np.divmod(ua, n_weeks)
    uw_active = np.sort(a_week * n_users + a_user)
    uw_trip = t_week * n_users + t_user
    del t_week, t_user
    # unique pairs per user-week
    if n_weeks * n_users * n_c * n_c < _BIG:
        pk = (uw_trip * n_c + t_o) * n_c + t_d
        pk = _unique(pk)
        p_uw, rem = np.divmod(pk, n_c * n_c)
        del pk
        p_o, p_d = np.divmod(rem, n_c)
        del rem
    else:  # pragma: no cover - huge grids with many users
        dd = pd.DataFrame({"uw": uw_trip, "o": t_o, "d": t_d}).drop_duplicates().sort_values(["uw", "o", "d"])
        p_uw, p_o, p_d = (dd[c].to_numpy() for c in ("uw", "o", "d"))
    del t_o, t_d
    p_week, p_user = np.divmod(p_uw, n_users)

    # per user-week: total trips and unique trips (every trip's and pair's user-week is an active one)
    n_uw = n_weeks * n_users
    if n_uw <= 16 * len(uw_active) + 4096:   # a table over every user-week: counts without a search
        trips = np.bincount(uw_trip, minlength=n_uw)[uw_active]
        uniq = np.bincount(p_uw, minlength=n_uw)[uw_active]
    else:
        trips = np.bincount(np.searchsorted(uw_active, uw_trip), minlength=len(uw_active))
        uniq = np.bincount(np.searchsorted(uw_active, p_uw), minlength=len(uw_active))
    del uw_trip, p_uw
    a_week, a_user = np.divmod(uw_active, n_users)
    # distinct users per (week, origin, destination): pairs rows are unique per user, so count rows
    ck = (p_week * n_c + p_o) * n_c + p_d
    n_ck = n_weeks * n_c * n_c
    if n_ck <= max(8 * ck.size, 1 << 22):    # a table over every (week, origin, destination): no sort
        cc = np.bincount(ck, minlength=n_ck)
        ck = np.flatnonzero(cc)
        cc = cc[ck]
    else:
        ck, cc = _unique(ck, return_counts=True)
    c_week, rem = np.divmod(ck, n_c * n_c)
    c_o, c_d = np.divmod(rem, n_c)
    return {"a_week": a_week.astype(np.int64) + week0, "a_user": a_user, "trips": trips.astype(np.int64),
            "uniq": uniq.astype(np.int64), "p_week": p_week.astype(np.int64) + week0, "p_user": p_user,
            "p_o": used_cells[p_o], "p_d": used_cells[p_d], "c_week": c_week.astype(np.int64) + week0,
            "c_o": used_cells[c_o], "c_d": used_cells[c_d], "c_n": cc.astype(np.int64),
            "used_cells": used_cells, "user_hours": len(wu)}


def grid_side_km(cell_km2: float) -> float:
    """Side of a square cell of ``cell_km2`` km². ``grid_side_km(1.3)`` ≈ 1.14 km."""
    return math.sqrt(check_positive("cell_km2", cell_km2))
