"""What the OD step takes and returns: :class:`ODConfig` (cell size, time zone, zones) and :class:`ODData`.

Every engine returns the same :class:`ODData`; :mod:`odcore.od.trips` re-exports both. An :class:`ODData` built for a
user-level release on Spark holds aggregates only (:attr:`ODData.per_user` is False): its ``user_week`` is a
:class:`WithheldTable` that refuses any use, and its figures come from :meth:`ODData.user_week_histogram`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from odcore.constants import COUNT, DESTINATION, ORIGIN, TRIPS, UNIQUE_TRIPS, USER, USER_WEEKS, WEEK
from odcore.errors import AggregatesOnlyError, ParameterError, check_positive
from odcore.space.grid import SquareGrid
from odcore.space.zones import parse_zone_spec


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
        Zone system spec (:func:`odcore.space.zones.parse_zone_spec`: ``square:1.3``, ``h3:8`` or a zone file path);
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
            object.__setattr__(self, "zones", str(parse_zone_spec(self.zones)))


HISTOGRAM_COLUMNS = (WEEK, TRIPS, UNIQUE_TRIPS, USER_WEEKS)
"""Columns of :meth:`ODData.user_week_histogram`: how many active user-weeks have each (week, trips, unique trips)."""


class WithheldTable:
    """Stands where a per-person table would be in OD data that holds aggregates only: any use (``len``, indexing,
    iteration, an attribute such as ``.loc``) raises :class:`odcore.errors.AggregatesOnlyError` with ``reason``.

    ``dataclasses.replace``, ``repr`` and pickling still work on the :class:`ODData` that holds it.
    """

    __slots__ = ("name", "reason")

    def __init__(self, name: str, reason: str) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "reason", reason)

    def refuse(self, *_args: Any, **_kwargs: Any):
        raise AggregatesOnlyError(f"ODData.{self.name} is not available: {self.reason}")

    __getitem__ = __len__ = __iter__ = __contains__ = __bool__ = __array__ = refuse

    def __getattr__(self, attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        self.refuse()

    def __repr__(self) -> str:
        return f"WithheldTable({self.name!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, WithheldTable) and (self.name, self.reason) == (other.name, other.reason)

    def __hash__(self) -> int:
        return hash((self.name, self.reason))

    def __reduce__(self):
        return WithheldTable, (self.name, self.reason)


def histogram_percentile(values: np.ndarray, weights: np.ndarray, p: float) -> float:
    """``np.percentile(x, p)`` (linear interpolation) of the values ``x`` that repeat each ``values[i]``
    ``weights[i]`` times, without building ``x``: the same float, bit for bit (numpy's virtual index and ``_lerp``).

    ``values`` ascending and distinct, ``weights`` >= 1, their sum >= 1.

    >>> histogram_percentile(np.array([1, 4, 9]), np.array([2, 1, 3]), 50), float(np.percentile([1, 1, 4, 9, 9, 9], 50))
    (6.5, 6.5)
    """
    n = int(weights.sum())
    vi = (n - 1) * (float(p) / 100)
    cum = np.cumsum(weights)
    if vi >= n - 1:
        return float(values[-1])
    lo = int(np.floor(vi))
    t = vi - lo
    a = int(values[np.searchsorted(cum, lo, side="right")])
    b = int(values[np.searchsorted(cum, lo + 1, side="right")])
    d = b - a
    return float(b - d * (1 - t)) if t >= 0.5 else float(a + d * t)


def histogram_median(values: np.ndarray, weights: np.ndarray) -> float:
    """``np.median(x)`` of the repeated values (as :func:`histogram_percentile`): the middle value, or the mean of
    the two middle ones.

    >>> histogram_median(np.array([1, 4]), np.array([1, 1]))
    2.5
    """
    n = int(weights.sum())
    cum = np.cumsum(weights)
    a = int(values[np.searchsorted(cum, (n - 1) // 2, side="right")])
    if n % 2:
        return float(a)
    b = int(values[np.searchsorted(cum, n // 2, side="right")])
    return float(np.float64(a) + np.float64(b)) / 2


@dataclass(frozen=True)
class ODData:
    """Weekly unique OD data built by :func:`build_od`.

    Attributes
    ----------
    grid:
        The zone system the cells refer to: a :class:`~odcore.space.grid.SquareGrid` or any :mod:`odcore.space.zones` system
        (H3 hexagons, the user's polygons); ``origin``/``destination`` are its zone ids.
    week_starts:
        ISO dates of the Mondays; index = week number.
    user_week:
        ``DataFrame[week, user, trips, unique_trips]``: one row per user active (at least one hourly location) in a
        week; ``trips`` counts every move, ``unique_trips`` the distinct (origin, destination) pairs
        (Houssiau et al.: 39 trips of one author gave 32 unique trips). A :class:`WithheldTable` when the data
        holds aggregates only (:attr:`per_user` False): then :meth:`user_week_histogram` has the same figures.
    pairs:
        ``DataFrame[week, user, origin, destination]``, one row per unique pair of a user in a week.
    counts:
        ``DataFrame[week, origin, destination, count]``: distinct users per week and pair (count >= 1).
    config:
        The :class:`ODConfig` used.
    stats:
        Rows used, rows dropped (reason -> count), user-hours; ``users`` (distinct people) when aggregates only.
    user_week_counts:
        Aggregates only: :meth:`user_week_histogram` as the engine computed it (:data:`HISTOGRAM_COLUMNS`, absolute
        week numbers re-indexed like ``counts``); None when ``user_week`` is a table (the histogram is then
        derived from it).
    """

    grid: SquareGrid | Any
    week_starts: list[str]
    user_week: pd.DataFrame
    pairs: pd.DataFrame
    counts: pd.DataFrame
    config: ODConfig = field(default_factory=ODConfig)
    stats: dict[str, Any] = field(default_factory=dict)
    user_week_counts: pd.DataFrame | None = None

    @property
    def n_weeks(self) -> int:
        return len(self.week_starts)

    @property
    def per_user(self) -> bool:
        """True when ``user_week`` is a table (one row per active user-week); False for aggregates only."""
        return not isinstance(self.user_week, WithheldTable)

    @property
    def n_users(self) -> int:
        """Distinct people with at least one hourly location (any week)."""
        if self.per_user:
            return int(self.user_week[USER].nunique())
        return int(self.stats["users"])

    def user_week_histogram(self, week: int | None = None) -> pd.DataFrame:
        """``DataFrame[week, trips, unique_trips, user_weeks]``: how many active user-weeks (of week ``week``, or of
        every week) have each number of trips and unique trips, sorted by those three; its size depends on the
        weeks and the trips a week can hold, never on the number of people."""
        h = self.user_week_counts if self.user_week_counts is not None else self._histogram_of_user_week
        if week is not None:
            h = h.loc[h[WEEK].to_numpy() == int(week)].reset_index(drop=True)
        return h[list(HISTOGRAM_COLUMNS)]

    @functools.cached_property
    def _histogram_of_user_week(self) -> pd.DataFrame:
        """:meth:`user_week_histogram` of the ``user_week`` table, computed once per object (it is frozen)."""
        uw = self.user_week
        return (uw.groupby([WEEK, TRIPS, UNIQUE_TRIPS], sort=True).size().rename(USER_WEEKS).reset_index()
                .astype(np.int64)[list(HISTOGRAM_COLUMNS)])

    def unique_trips_figures(self, week: int | None = None) -> dict[str, Any]:
        """Unique trips per active user-week (of week ``week`` or every week), from :meth:`user_week_histogram`:
        ``user_weeks``, ``trips`` and ``unique_trips`` (sums), ``median``, ``p10``, ``p50``, ``p90``, ``max``,
        ``mean`` (as numpy gives them on the per-user-week column; None when there is no user-week)."""
        h = self.user_week_histogram(week)
        n = int(h[USER_WEEKS].sum())
        if n == 0:
            return {"user_weeks": 0, "trips": 0, "unique_trips": 0, "median": None, "p10": None, "p50": None,
                    "p90": None, "max": None, "mean": None}
        by_ut = h.groupby(UNIQUE_TRIPS, sort=True)[USER_WEEKS].sum()
        v, w = by_ut.index.to_numpy(np.int64), by_ut.to_numpy(np.int64)
        total = int((v * w).sum())
        return {"user_weeks": n, "trips": int((h[TRIPS].to_numpy(np.int64) * h[USER_WEEKS].to_numpy()).sum()),
                "unique_trips": total, "median": histogram_median(v, w),
                **{f"p{q}": histogram_percentile(v, w, q) for q in (10, 50, 90)},
                "max": int(v[-1]), "mean": float(np.float64(total) / n)}

    @property
    def cells(self) -> np.ndarray:
        """Sorted ids of the cells that hold at least one hourly location."""
        return np.asarray(self.stats.get("cells_used", np.unique(np.concatenate(
            [self.counts[ORIGIN].to_numpy(), self.counts[DESTINATION].to_numpy()]))), dtype=np.int64)

    def _check_week(self, w: int) -> int:
        if not (0 <= int(w) < self.n_weeks):
            raise ParameterError(f"week must be in [0, {self.n_weeks}), got week={w}.")
        return int(w)

    def busiest_week(self) -> tuple[int, int]:
        """``(week, people)``: the week with most people who make at least one trip (ties: the earliest), and
        that count; ``(0, 0)`` when no week has a trip. The default week to release: never an empty one."""
        h = self.user_week_histogram()
        people = h.loc[h[TRIPS].to_numpy() > 0].groupby(WEEK)[USER_WEEKS].sum()
        if not len(people):
            return 0, 0
        w = int(people.idxmax())
        return w, int(people.loc[w])

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
        f = self.unique_trips_figures()
        empty = f["user_weeks"] == 0
        cnt = self.counts[COUNT].to_numpy()
        return {
            "users": self.n_users,
            "weeks": self.n_weeks,
            "week_starts": list(self.week_starts),
            "cells": len(self.cells),
            "grid_cells": int(self.grid.n_cells),
            "cell_km2": round(self.grid.cell_km2, 6),
            "crs": self.grid.crs,
            "user_hours": int(self.stats.get("user_hours", 0)),
            "user_weeks": f["user_weeks"],
            "trips": f["trips"],
            "unique_trips": f["unique_trips"],
            "unique_trips_per_user_week": {k: 0.0 if empty else f[k] for k in ("p10", "p50", "p90")}
            | {"max": 0 if empty else f["max"], "mean": 0.0 if empty else f["mean"]},
            "od_pairs": len(self.counts),
            "threshold": int(threshold),
            "od_pairs_over_threshold": int((cnt >= threshold).sum()),
            "max_count": int(cnt.max()) if len(cnt) else 0,
        }
