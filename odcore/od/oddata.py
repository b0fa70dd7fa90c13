"""What the OD step takes and returns: :class:`ODConfig` (cell size, time zone, zones) and :class:`ODData`.

Every engine returns the same :class:`ODData`; :mod:`odcore.od.trips` re-exports both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from odcore.constants import COUNT, DESTINATION, ORIGIN, TRIPS, UNIQUE_TRIPS, USER, WEEK
from odcore.errors import ParameterError, check_positive
from odcore.space.grid import SquareGrid


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
            from odcore.space.zones import parse_zone_spec

            object.__setattr__(self, "zones", str(parse_zone_spec(self.zones)))


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

    def busiest_week(self) -> tuple[int, int]:
        """``(week, people)``: the week with most people who make at least one trip (ties: the earliest), and
        that count; ``(0, 0)`` when no week has a trip. The default week to release: never an empty one."""
        uw = self.user_week
        if not len(uw):
            return 0, 0
        people = uw.loc[uw[TRIPS].to_numpy() > 0].groupby(WEEK).size()
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
