"""Winner-takes-all hourly cells and the trip tables built from them (numpy kernels on integer codes).

Shared by the in-memory build (:mod:`odcore.od.trips`) and the streaming memory engine
(:mod:`odcore.od.engines.memory_stream`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from odcore.errors import ParameterError
from odcore.od.hours import local_offsets, week_of_slots

BIG_KEY = 2**62
"""Keys are packed into int64 below this bound (users x hours x cells)."""


def unique_sorted(keys: np.ndarray, return_counts: bool = False):
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


def winners(u: np.ndarray, slot_abs: np.ndarray, cell: np.ndarray, n_users: int, n_cells: int,
             tz: str) -> dict[str, Any]:
    """Winner-takes-all cell of every (user code, absolute hour slot); ties to the lower cell id.

    Consumes ``u``, ``slot_abs`` and ``cell`` (int64; callers pass arrays they no longer need). Returns the
    winners sorted by (user, slot): ``wu, ws`` (slot relative to the first), ``wc``, ``wweek`` (absolute
    Monday-week), ``slot`` (absolute), ``slot_shift`` and ``n_users``.
    """
    smin = int(slot_abs.min())
    s = slot_abs - smin
    del slot_abs
    n_slots = int(s.max()) + 1
    cells_map = None
    if n_users * n_slots * n_cells >= BIG_KEY:
        cells_map, cell = np.unique(cell, return_inverse=True)
        n_cells = len(cells_map)
        if n_users * n_slots * n_cells >= BIG_KEY:
            raise ParameterError("too many users x hours x cells for 63-bit keys; split the input by time.")
    # --- winner-takes-all per (user, hour) -------------------------------------------------------------------
    key = u * n_slots + s
    del u, s
    by_hour = bool((key[1:] >= key[:-1]).all())   # rows often come by user and time already
    key *= n_cells
    key += cell
    del cell
    if not bool((key[1:] >= key[:-1]).all()):
        # by user-hour already, only the cells within each hour out of order: a merge sort finds the sorted runs
        key.sort(kind="stable" if by_hour else "quicksort")
    wus, wc = modes(key, n_cells)
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


def modes(key: np.ndarray, n_cells: int) -> tuple[np.ndarray, np.ndarray]:
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
    if gnew.all():                  # one cell in every group (one row per user-hour): it wins
        return us, uc
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


def od_tables(wu: np.ndarray, ws: np.ndarray, wc: np.ndarray, wweek: np.ndarray, n_users: int,
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
    if n_weeks * n_users * n_c * n_c < BIG_KEY:
        pk = (uw_trip * n_c + t_o) * n_c + t_d
        pk = unique_sorted(pk)
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
        ck, cc = unique_sorted(ck, return_counts=True)
    c_week, rem = np.divmod(ck, n_c * n_c)
    c_o, c_d = np.divmod(rem, n_c)
    return {"a_week": a_week.astype(np.int64) + week0, "a_user": a_user, "trips": trips.astype(np.int64),
            "uniq": uniq.astype(np.int64), "p_week": p_week.astype(np.int64) + week0, "p_user": p_user,
            "p_o": used_cells[p_o], "p_d": used_cells[p_d], "c_week": c_week.astype(np.int64) + week0,
            "c_o": used_cells[c_o], "c_d": used_cells[c_d], "c_n": cc.astype(np.int64),
            "used_cells": used_cells, "user_hours": len(wu)}
