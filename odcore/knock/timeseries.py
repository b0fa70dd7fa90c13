"""Per-user binary location time-series ``L_u`` and group aggregates ``A_X`` (Pyrgelis et al. 2018, §III-A, §V-A).

``L_u[s, t] = 1`` if user ``u`` reported a location in region of interest (ROI) ``s`` during time slot ``t``; a
slot in which the user reported nothing inside the ROIs is assigned to the special *null* ROI (always the last
ROI index, so the SFC grid has 100 + 1 = 101 ROIs). All users' series are stored together as one sparse
``users × (ROI·T)`` matrix whose column ``s·T + t`` is cell ``(s, t)``; the aggregate of many groups at once is the
sparse product ``(groups × users) @ (users × ROI·T)`` (:meth:`LocationTimeSeries.aggregate`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

from odcore.constants import LAT, LOC, LON, TIME, USER
from odcore.data.validate import check_param, check_trace_table
from odcore.errors import ParameterError, check_positive, coerce_enum

#: Mean Earth radius used for the small-box degree <-> km conversion (km).
EARTH_RADIUS_KM = 6371.0088
#: 0.18 square miles in km², the SFC cell area of Pyrgelis et al. 2018, §V-A.
SFC_CELL_KM2 = 0.18 * 1.609344**2
#: Centre of our SFC box (SoMa, 1.7 km south-west of the Ferry Building). The paper names "downtown San Francisco"
#: and a 10 × 10 grid of 0.18 sq mi cells but prints no coordinates. We chose the centre, on a 0.0025° lattice, so
#: that the §V-A statistics of the 534 cabs match the paper: ROI reports per cab 3,877 ± 1,112 (paper
#: 3,827 ± 1,069), median 4,160 (4,111), max 8,248 (8,136), min 504 (504), active slots 335 ± 94 (340 ± 94),
#: Δ of week 1 = 2,709 (2,685). See docs/knock_knock_results.md.
SFC_CENTER = (37.7775, -122.3975)


class GridKind(StrEnum):
    """How ROIs are defined."""

    AUTO = "auto"    # 10 × 10 grid over the box holding the central 98% of points
    SFC = "sfc"      # the paper's SFC grid: 10 × 10 square cells of 0.18 sq mi over downtown San Francisco
    BBOX = "bbox"    # a given bounding box and shape
    LOC = "loc"      # one ROI per distinct value of the ``loc`` column


@dataclass(frozen=True)
class ROIGrid:
    """A rows × cols lat/lon grid over a bounding box; ROI id = ``row·cols + col`` (row 0 = south).

    Cells are half-open ``[min, max)``; points outside the box get ROI ``-1`` (they count as "no report").
    """

    lat_min: float
    lat_max: float
    lon_min: float
    lon_max: float
    rows: int = 10
    cols: int = 10

    def __post_init__(self) -> None:
        for name in ("lat_min", "lat_max", "lon_min", "lon_max"):
            v = getattr(self, name)
            if not np.isfinite(v):
                raise ParameterError(f"grid {name} must be finite, got {name}={v!r}.")
        if not (-90 <= self.lat_min < self.lat_max <= 90):
            raise ParameterError(f"grid box needs -90 <= lat_min < lat_max <= 90, got lat_min={self.lat_min}, "
                                 f"lat_max={self.lat_max}.")
        if not (-180 <= self.lon_min < self.lon_max <= 180):
            raise ParameterError(f"grid box needs -180 <= lon_min < lon_max <= 180, got lon_min={self.lon_min}, "
                                 f"lon_max={self.lon_max}.")
        for name in ("rows", "cols"):
            v = getattr(self, name)
            if int(v) != v or v < 1:
                raise ParameterError(f"grid {name} must be an integer >= 1, got {name}={v!r}.")

    @property
    def n_cells(self) -> int:
        return int(self.rows * self.cols)

    @classmethod
    def sfc(cls, center: tuple[float, float] = SFC_CENTER, rows: int = 10, cols: int = 10,
            cell_km2: float = SFC_CELL_KM2) -> ROIGrid:
        """The paper's SFC grid: ``rows × cols`` square cells of ``cell_km2`` (0.18 sq mi) centred on ``center``.

        Degrees per km use a sphere at the centre latitude (error < 0.5% over a 7 km box).
        """
        check_positive("cell_km2", cell_km2)
        side = math.sqrt(cell_km2)
        dlat = math.degrees(side * rows / EARTH_RADIUS_KM)
        dlon = math.degrees(side * cols / (EARTH_RADIUS_KM * math.cos(math.radians(center[0]))))
        return cls(center[0] - dlat / 2, center[0] + dlat / 2, center[1] - dlon / 2, center[1] + dlon / 2,
                   rows, cols)

    @classmethod
    def central(cls, lat: np.ndarray, lon: np.ndarray, *, coverage: float = 0.98, rows: int = 10,
                cols: int = 10) -> ROIGrid:
        """Grid over the box from the ``(1-coverage)/2`` to ``(1+coverage)/2`` quantiles of lat and lon."""
        lat = np.asarray(lat, dtype=float)
        lon = np.asarray(lon, dtype=float)
        ok = np.isfinite(lat) & np.isfinite(lon)
        if not ok.any():
            raise ParameterError("cannot fit a grid: no finite lat/lon values.")
        if not 0 < coverage <= 1:
            raise ParameterError(f"coverage must be in (0, 1], got coverage={coverage}.")
        q = [(1 - coverage) / 2, (1 + coverage) / 2]
        la = np.quantile(lat[ok], q)
        lo = np.quantile(lon[ok], q)
        # widen the upper edge by a hair so the top quantile point falls inside the half-open box
        eps_la = max(1e-9, 1e-9 * abs(la[1]))
        eps_lo = max(1e-9, 1e-9 * abs(lo[1]))
        if la[1] - la[0] <= 0:
            la = [la[0] - 1e-4, la[1] + 1e-4]
        if lo[1] - lo[0] <= 0:
            lo = [lo[0] - 1e-4, lo[1] + 1e-4]
        return cls(float(la[0]), float(la[1] + eps_la), float(lo[0]), float(lo[1] + eps_lo), rows, cols)

    def assign(self, lat: np.ndarray, lon: np.ndarray) -> np.ndarray:
        """ROI id of each point, ``-1`` outside the box (or non-finite)."""
        lat = np.asarray(lat, dtype=float)
        lon = np.asarray(lon, dtype=float)
        with np.errstate(invalid="ignore"):
            r = np.floor((lat - self.lat_min) / (self.lat_max - self.lat_min) * self.rows)
            c = np.floor((lon - self.lon_min) / (self.lon_max - self.lon_min) * self.cols)
            inside = (r >= 0) & (r < self.rows) & (c >= 0) & (c < self.cols)
        out = np.full(lat.shape, -1, dtype=np.int64)
        out[inside] = (r[inside] * self.cols + c[inside]).astype(np.int64)
        return out

    def cell_km2(self) -> float:
        """Approximate area of one cell (km², spherical, at the box's mid latitude)."""
        mid = math.radians((self.lat_min + self.lat_max) / 2)
        h = math.radians(self.lat_max - self.lat_min) * EARTH_RADIUS_KM / self.rows
        w = math.radians(self.lon_max - self.lon_min) * EARTH_RADIUS_KM * math.cos(mid) / self.cols
        return h * w

    def to_dict(self) -> dict[str, Any]:
        return {"lat_min": self.lat_min, "lat_max": self.lat_max, "lon_min": self.lon_min,
                "lon_max": self.lon_max, "rows": self.rows, "cols": self.cols,
                "cell_km2": round(self.cell_km2(), 4)}


@dataclass(frozen=True)
class TimeSeriesConfig:
    """How traces become location time-series.

    Parameters
    ----------
    grid:
        :class:`GridKind` (``auto`` default, ``sfc``, ``bbox`` with ``bbox`` and ``shape``, ``loc``).
    bbox:
        ``(lat_min, lon_min, lat_max, lon_max)`` for ``grid="bbox"``.
    shape:
        ``(rows, cols)`` of the grid (default the paper's 10 × 10).
    slot_minutes:
        Length of a time slot (paper: one hour).
    start:
        First slot's start (anything ``pandas.Timestamp`` accepts; naive values are read in ``tz``). Default:
        midnight, in ``tz``, of the day of the first record, so weeks start where the data's days start.
    n_slots:
        Number of slots (default: up to the last record).
    tz:
        Time zone for ``start`` and its default (Cabspotting: America/Los_Angeles).
    drop_empty_users:
        Drop users with no report inside the ROIs over the whole span (the paper drops 2 such cabs); counted.
    """

    grid: GridKind = GridKind.AUTO
    bbox: tuple[float, float, float, float] | None = None
    shape: tuple[int, int] = (10, 10)
    slot_minutes: int = 60
    start: str | None = None
    n_slots: int | None = None
    tz: str = "UTC"
    drop_empty_users: bool = True

    def __post_init__(self) -> None:
        coerce_enum(self, "grid", GridKind)
        if self.grid == GridKind.BBOX and self.bbox is None:
            raise ParameterError("grid='bbox' needs bbox=(lat_min, lon_min, lat_max, lon_max).")
        if self.bbox is not None:
            if len(self.bbox) != 4:
                raise ParameterError(f"bbox must be (lat_min, lon_min, lat_max, lon_max), got bbox={self.bbox!r}.")
            object.__setattr__(self, "bbox", tuple(float(v) for v in self.bbox))
            if self.grid == GridKind.AUTO:
                object.__setattr__(self, "grid", GridKind.BBOX)
        if len(self.shape) != 2:
            raise ParameterError(f"shape must be (rows, cols) of integers >= 1, got shape={self.shape!r}.")
        object.__setattr__(self, "shape", tuple(int(check_param("grid_side", v, flag="shape (--grid-shape) rows and "
                                                                "columns each")) for v in self.shape))
        object.__setattr__(self, "slot_minutes", int(check_param("slot_minutes", self.slot_minutes)))
        if self.n_slots is not None and (int(self.n_slots) != self.n_slots or self.n_slots < 1):
            raise ParameterError(f"n_slots must be an integer >= 1, got n_slots={self.n_slots!r}.")


@dataclass(frozen=True, eq=False)
class LocationTimeSeries:
    """All users' binary location time-series.

    Attributes
    ----------
    matrix:
        ``users × (n_rois·n_slots)`` CSR matrix of 0/1 (float32); column ``s·n_slots + t``. ROI ``n_rois-1`` is null.
    users:
        User ids, row order of ``matrix``.
    n_rois:
        Number of ROIs including the null ROI.
    n_slots, slot_minutes, start:
        Time axis: slot ``t`` covers ``[start + t·slot, start + (t+1)·slot)``.
    grid:
        The :class:`ROIGrid` used (``None`` for location ids), with ``roi_labels`` naming the ROIs.
    report:
        Counts of rows used and dropped, with reasons.
    """

    matrix: sp.csr_matrix
    users: np.ndarray
    n_rois: int
    n_slots: int
    slot_minutes: int
    start: pd.Timestamp
    grid: ROIGrid | None = None
    roi_labels: tuple[str, ...] = ()
    report: dict[str, Any] = field(default_factory=dict)
    _memo: dict = field(default_factory=dict, repr=False, compare=False)   # sensitivity per window

    @property
    def n_users(self) -> int:
        return int(self.matrix.shape[0])

    @property
    def null_roi(self) -> int:
        return self.n_rois - 1

    def dense(self, t0: int = 0, t1: int | None = None) -> np.ndarray:
        """``users × ROI × T`` dense 0/1 array for slots ``[t0, t1)`` (small data only: tests, plots)."""
        return self.window(t0, t1).toarray().reshape(self.n_users, self.n_rois, -1)

    def _check_window(self, t0: int, t1: int | None) -> tuple[int, int]:
        t1 = self.n_slots if t1 is None else int(t1)
        t0 = int(t0)
        if not 0 <= t0 < t1 <= self.n_slots:
            raise ParameterError(f"time window must satisfy 0 <= t0 < t1 <= n_slots={self.n_slots}, "
                                 f"got t0={t0}, t1={t1}.")
        return t0, t1

    def window(self, t0: int = 0, t1: int | None = None) -> sp.csr_matrix:
        """``users × (ROI·(t1-t0))`` CSR of the slots ``[t0, t1)``, same column layout (``s·T_w + t``)."""
        t0, t1 = self._check_window(t0, t1)
        if t0 == 0 and t1 == self.n_slots:
            return self.matrix
        cols = (np.arange(self.n_rois)[:, None] * self.n_slots + np.arange(t0, t1)[None, :]).ravel()
        return self.matrix[:, cols].tocsr()

    def reports(self, t0: int = 0, t1: int | None = None, *, include_null: bool = True) -> np.ndarray:
        """Number of ROI reports (ones of ``L_u``) per user in ``[t0, t1)`` (§V-A "number of ROIs reported")."""
        t0, t1 = self._check_window(t0, t1)
        total = np.asarray(self.window(t0, t1).sum(axis=1)).ravel()
        if include_null:
            return total.astype(np.int64)
        null_cols = self.null_roi * self.n_slots + np.arange(t0, t1)
        nulls = np.asarray(self.matrix[:, null_cols].sum(axis=1)).ravel()
        return (total - nulls).astype(np.int64)

    def sensitivity(self, t0: int = 0, t1: int | None = None) -> int:
        """Δ: the largest number of ROI reports (null included) of any user in ``[t0, t1)`` (§VII-B).

        This is the L1 sensitivity of the aggregate matrix: adding/removing a user changes ``A_X`` in at most
        Δ cells, each by 1 (so the L2 sensitivity is ``sqrt(Δ)``).
        """
        t0, t1 = self._check_window(t0, t1)
        key = ("sensitivity", t0, t1)
        if key not in self._memo:   # the matrix does not change: once per window
            self._memo[key] = int(self.reports(t0, t1).max()) if self.n_users else 0
        return self._memo[key]

    def aggregation_operand(self, t0: int = 0, t1: int | None = None, *,
                            max_dense_bytes: int = 256 * 2**20) -> sp.csr_matrix | np.ndarray:
        """The ``users × ROI·T`` operand for :meth:`aggregate`: dense float32 when it fits ``max_dense_bytes``
        (faster products, see ``benchmarks/bench_knock.py``), else the sparse :meth:`window`. Cache it per window."""
        t0, t1 = self._check_window(t0, t1)
        w = self.window(t0, t1)
        if self.n_users * w.shape[1] * 4 <= max_dense_bytes:
            return w.toarray()
        return w

    def aggregate(self, groups: np.ndarray, t0: int = 0, t1: int | None = None, *,
                  window: sp.csr_matrix | np.ndarray | None = None) -> np.ndarray:
        """``A_X`` for many groups at once: ``(groups × users) @ (users × ROI·T)`` in one product (§III-A).

        The group indicator is a sparse CSR matrix. With a sparse ``window`` the product is sparse × sparse; with a
        dense ``window`` (:meth:`aggregation_operand`) it is sparse × dense for small groups (``m <= 32``) and a
        BLAS dense product for larger ones — on the SFC data (400 groups × 534 users × 17k columns) that is
        0.04 s instead of 0.24 s at m = 10, and 0.09 s instead of 0.87 s at m = 500. Never a loop over users.

        Parameters
        ----------
        groups:
            ``(n_groups, m)`` integer array of row indices into :attr:`users` (a 1-D array is one group).
        t0, t1:
            Slot window.
        window:
            Pre-sliced :meth:`window` or :meth:`aggregation_operand` (saves re-slicing in repeated calls).

        Returns
        -------
        numpy.ndarray
            ``(n_groups, n_rois, t1 - t0)`` float32 counts.
        """
        t0, t1 = self._check_window(t0, t1)
        g = np.asarray(groups)
        if g.ndim == 1:
            g = g[None, :]
        if g.ndim != 2 or not np.issubdtype(g.dtype, np.integer):
            raise ParameterError(f"groups must be a 2-D integer array (n_groups, m), got shape {g.shape} "
                                 f"dtype {g.dtype}.")
        if g.size and (g.min() < 0 or g.max() >= self.n_users):
            raise ParameterError(f"groups hold user indices outside [0, {self.n_users}).")
        n, m = g.shape
        ind = sp.csr_matrix((np.ones(n * m, dtype=np.float32), g.ravel(), np.arange(0, n * m + 1, m)),
                            shape=(n, self.n_users))
        ind.sum_duplicates()
        w = self.window(t0, t1) if window is None else window
        if w.shape != (self.n_users, self.n_rois * (t1 - t0)):
            raise ParameterError(f"window has shape {w.shape}, expected {(self.n_users, self.n_rois * (t1 - t0))}.")
        if sp.issparse(w):
            out = (ind @ w).toarray()
        elif m <= 32:
            out = np.asarray(ind @ w, dtype=np.float32)
        else:
            out = ind.toarray() @ np.asarray(w, dtype=np.float32)
        return out.reshape(n, self.n_rois, t1 - t0)

    # --- persistence (experiments re-use the parsed series) -------------------------------------------------
    def save(self, path: str | Path) -> None:
        """Write to a compressed ``.npz`` (for re-use across runs; never commit real-data files)."""
        m = self.matrix.tocsr()
        np.savez_compressed(
            path, data=m.data, indices=m.indices, indptr=m.indptr, shape=np.array(m.shape),
            users=np.asarray(self.users).astype(str), n_rois=self.n_rois, n_slots=self.n_slots,
            slot_minutes=self.slot_minutes, start=str(self.start),
            grid=np.array([] if self.grid is None else [self.grid.lat_min, self.grid.lat_max, self.grid.lon_min,
                                                        self.grid.lon_max, self.grid.rows, self.grid.cols]),
            roi_labels=np.array(self.roi_labels, dtype=str), report=np.array(_json(self.report)))

    @classmethod
    def load(cls, path: str | Path) -> LocationTimeSeries:
        z = np.load(path, allow_pickle=False)
        mat = sp.csr_matrix((z["data"], z["indices"], z["indptr"]), shape=tuple(z["shape"]))
        g = z["grid"]
        grid = None if g.size == 0 else ROIGrid(float(g[0]), float(g[1]), float(g[2]), float(g[3]), int(g[4]),
                                                 int(g[5]))
        return cls(mat, z["users"], int(z["n_rois"]), int(z["n_slots"]), int(z["slot_minutes"]),
                   pd.Timestamp(str(z["start"])), grid, tuple(str(s) for s in z["roi_labels"]),
                   json.loads(str(z["report"])))

    def summary(self) -> dict[str, Any]:
        rep = self.reports()
        return {"users": self.n_users, "rois": self.n_rois, "slots": self.n_slots,
                "slot_minutes": self.slot_minutes, "start": self.start.isoformat(),
                "grid": None if self.grid is None else self.grid.to_dict(),
                "reports_per_user_mean": float(rep.mean()) if rep.size else 0.0,
                "reports_per_user_std": float(rep.std()) if rep.size else 0.0,
                **self.report}


def _json(obj: Any) -> str:
    return json.dumps(obj, default=lambda o: o.item() if hasattr(o, "item") else str(o))


def build_grid(config: TimeSeriesConfig, lat: np.ndarray, lon: np.ndarray) -> ROIGrid:
    """The ROI grid chosen by ``config`` (fitted to the points for ``auto``)."""
    rows, cols = config.shape
    if config.grid == GridKind.SFC:
        return ROIGrid.sfc(rows=rows, cols=cols)
    if config.grid == GridKind.BBOX:
        la0, lo0, la1, lo1 = config.bbox
        return ROIGrid(la0, la1, lo0, lo1, rows, cols)
    if config.grid == GridKind.AUTO:
        return ROIGrid.central(lat, lon, coverage=0.98, rows=rows, cols=cols)
    raise ParameterError(f"grid={config.grid.value!r} has no lat/lon grid.")


def build_timeseries(df: pd.DataFrame, config: TimeSeriesConfig | None = None) -> LocationTimeSeries:
    """Turn a trace table (``user, time, lat, lon[, loc]``) into :class:`LocationTimeSeries` (§V-A).

    Vectorised: one ``np.unique`` over ``(user, ROI, slot)`` codes; the null ROI is filled from a
    ``users × T`` "has any report" mask.

    Raises
    ------
    TraceFormatError
        A required column is missing or ``time`` is not tz-aware.
    ParameterError
        Bad configuration, or nothing left to build series from.
    """
    config = config or TimeSeriesConfig()
    need = [USER, TIME] + ([LOC] if config.grid == GridKind.LOC else [LAT, LON])
    check_trace_table(df, need, f"location time-series (grid={config.grid.value})")
    times = df[TIME]
    rows_in = len(df)
    drops: dict[str, int] = {}

    slot = pd.Timedelta(minutes=int(config.slot_minutes))
    if config.start is not None:
        start = pd.Timestamp(config.start)
        start = start.tz_localize(config.tz) if start.tzinfo is None else start
    else:
        start = times.min().tz_convert(config.tz).normalize()
    start = start.tz_convert("UTC")
    secs = (times - start).dt.total_seconds().to_numpy()
    slot_idx = np.floor(secs / slot.total_seconds())
    n_slots = config.n_slots if config.n_slots is not None else int(np.nanmax(slot_idx)) + 1
    in_time = (slot_idx >= 0) & (slot_idx < n_slots)
    drops["outside_time_window"] = int((~in_time).sum())

    user_codes, users = pd.factorize(df[USER], sort=True)
    users = np.asarray(users)
    grid: ROIGrid | None = None
    if config.grid == GridKind.LOC:
        loc = df[LOC]
        nan_loc = loc.isna().to_numpy()
        roi_codes, roi_vals = pd.factorize(loc, sort=True)
        roi = np.where(nan_loc, -1, roi_codes).astype(np.int64)
        n_cells = len(roi_vals)
        labels = tuple(str(v) for v in roi_vals)
        drops["missing_loc"] = int((nan_loc & in_time).sum())
    else:
        lat = df[LAT].to_numpy(dtype=float)
        lon = df[LON].to_numpy(dtype=float)
        grid = build_grid(config, lat[in_time], lon[in_time])
        roi = grid.assign(lat, lon)
        n_cells = grid.n_cells
        labels = tuple(f"r{r}c{c}" for r in range(grid.rows) for c in range(grid.cols))
        drops["outside_grid"] = int(((roi < 0) & in_time).sum())
    keep = in_time & (roi >= 0)
    n_rois = n_cells + 1
    n_users = len(users)
    u = user_codes[keep].astype(np.int64)
    s = roi[keep]
    t = slot_idx[keep].astype(np.int64)
    ncols = n_rois * n_slots
    codes = np.unique(u * ncols + s * n_slots + t)
    # null ROI: slots in which the user reported nothing inside the ROIs
    active = np.zeros((n_users, n_slots), dtype=bool)
    active[u, t] = True
    nu, nt = np.nonzero(~active)
    null_codes = nu.astype(np.int64) * ncols + n_cells * n_slots + nt
    all_codes = np.concatenate([codes, null_codes])
    all_codes.sort()
    rows = all_codes // ncols
    cols = all_codes % ncols
    mat = sp.csr_matrix((np.ones(len(all_codes), dtype=np.float32), (rows, cols)), shape=(n_users, ncols))
    report: dict[str, Any] = {"rows_in": rows_in, "rows_used": int(keep.sum()),
                              "rows_not_used": {k: v for k, v in drops.items() if v}}
    if config.drop_empty_users:
        empty = ~active.any(axis=1)
        if empty.any():
            report["users_dropped_no_report_in_rois"] = int(empty.sum())
            mat = mat[~empty].tocsr()
            users = users[~empty]
    if mat.shape[0] == 0:
        raise ParameterError("no user has any report inside the ROIs and time window; check the grid/bbox "
                             f"({None if grid is None else grid.to_dict()}) and the time window.")
    return LocationTimeSeries(mat, users, n_rois, int(n_slots), int(config.slot_minutes), start, grid,
                              (*labels, "null"), report)
