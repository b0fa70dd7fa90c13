"""Hourly locations, trips and weekly unique origin-destination (OD) counts.

Follows Houssiau et al. (2022), Methods, "Generating trips from empirical data": each user's trajectory is
segmented with a *winner-takes-all* rule (the most used location in every hour), and a trip is a move from one
location to a *distinct* one in the consecutive hour. Locations are square grid cells of ~1.3 km²
(:class:`odcore.space.grid.SquareGrid`), and, as in Bassolas et al. (2022, reply), the released metric for a week W and a
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
from odcore.od.hourly import BIG_KEY, modes, od_tables, winners
from odcore.od.hours import hour_slots, local_offsets, time_seconds, week_of_slots
from odcore.od.kernel import grid_of_frame
from odcore.od.oddata import ODConfig, ODData
from odcore.space.grid import SquareGrid

__all__ = ["HourIndex", "ODConfig", "ODData", "build_od", "grid_side_km", "hourly_locations", "local_offsets"]

__all__ = ["HourIndex", "ODConfig", "ODData", "build_od", "hourly_locations", "local_offsets"]

_NS = 1_000_000_000






# ---------------------------------------------------------------------------------------------------------------
# Time: local offsets, hours, weeks
# ---------------------------------------------------------------------------------------------------------------











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
    t = time_seconds(traces_df[TIME])
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
    slot_abs = hour_slots(t, tz)     # shared with the DuckDB and Spark engines
    del t
    out = winners(u, slot_abs, cell, len(labels), grid.n_cells, tz)
    out.update({"labels": labels, "dropped": dropped, "rows_used": int(ok.sum())})
    return out






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

        for col in (USER, TIME, LAT, LON):
            if col not in traces_df.columns:
                raise TraceFormatError(f"traces miss column {col!r}; have {list(traces_df.columns)}.", column=col)
        if len(traces_df) == 0:
            raise TraceFormatError("no trace rows.")
        u, labels = _user_codes(traces_df[USER])
        slot = hour_slots(time_seconds(traces_df[TIME]), tz)
        smin = int(slot.min())
        slot -= smin
        n_slots = int(slot.max()) + 1
        n_users = len(labels)
        if n_users * n_slots >= BIG_KEY:
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
            if n_multi * n_cells >= BIG_KEY:
                cells_map, mc = np.unique(mc, return_inverse=True)
                n_cells = len(cells_map)
                if n_multi * n_cells >= BIG_KEY:
                    raise ParameterError("too many users x hours x cells for 63-bit keys; split the input by time.")
            mkey = np.repeat(np.arange(n_multi, dtype=np.int64), size[multi]) * n_cells + mc
            del mc, rows
            mkey.sort()
            _, win = modes(mkey, n_cells)
            wc[multi] = win if cells_map is None else cells_map[win]
        if hours is None:
            return self.gu, self.gs, wc, rows_used
        return self.gu[hours], self.gs[hours], wc, rows_used


# ---------------------------------------------------------------------------------------------------------------
# Trips and weekly unique OD counts
# ---------------------------------------------------------------------------------------------------------------

def build_od(traces_df: pd.DataFrame, config: ODConfig | None = None, *, grid: SquareGrid | Any | None = None,
             hours: HourIndex | None = None) -> ODData:
    """Traces -> grid cells -> hourly winner-takes-all cells -> trips -> weekly unique OD counts, in memory.

    The other engines (DuckDB, Spark) and file sources go through :func:`odcore.od.engines.build_od`, which
    calls this for ``engine="memory"``.

    Parameters
    ----------
    traces_df:
        Trace table (``user, time, lat, lon``; ``time`` UTC), e.g. ``load_traces(...).df``. An optional ``loc``
        column is not used: locations are the grid cells of the coordinates (Bassolas et al.).
    config:
        :class:`ODConfig` (cell area, time zone). Default: 1.3 km² cells, UTC.
    grid:
        Use this grid or zone system (anything with ``assign``/``n_cells``, :mod:`odcore.space.zones`) instead of fitting
        one to the data (e.g. to compare two datasets on the same cells). Points outside every zone are dropped and
        counted in ``stats["rows_dropped"]`` under the zone system's ``outside_reason``.
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
    if hours is None:
        hours = HourIndex.of(traces_df, config.tz)
    elif hours.tz != config.tz:
        raise ParameterError(f"the hour index was built for tz={hours.tz!r}, the config asks for tz={config.tz!r}.")
    if grid is None:   # zones from a min/max pass, as every engine does (odcore.od.kernel.fit_zones)
        grid = grid_of_frame(traces_df, config)
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
    tb = od_tables(wu, ws, wc, hours.week_of_slot[ws], hours.n_users, grid.n_cells)
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




def grid_side_km(cell_km2: float) -> float:
    """Side of a square cell of ``cell_km2`` km². ``grid_side_km(1.3)`` ≈ 1.14 km."""
    return math.sqrt(check_positive("cell_km2", cell_km2))
