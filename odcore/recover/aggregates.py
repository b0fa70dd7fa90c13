"""Per-person cell sequences and the per-cell, per-slot counts the trajectory-recovery attack reads, with their
plain CSV files.

Xu et al. 2017 (§2) assume that every person is at exactly one location in every time slot and that the release
gives, for each slot, how many people are at each location. From traces we build that as follows:

- cells: the lat/lon grid of :mod:`odcore.knock.timeseries` (:class:`~odcore.knock.timeseries.ROIGrid`);
- a person's cell in a slot: the cell holding most of their records in it (winner-takes-all, ties to the lower cell
  id, :func:`odcore.od.hourly.modes`, as for the OD release's hourly cells);
- a slot without a record of the person inside the grid: the person's last known cell (the first known one before
  their first record). People with a record in fewer than ``min_coverage`` of the slots are dropped and counted.

Plain files (documented in docs/recover.md, "File formats"):

- ``counts.csv``: ``slot,start,cell,count`` — one row per (slot, cell) with a count > 0 (absent rows are 0);
  ``start`` is the slot's local start time (ISO 8601 with its UTC offset). Counts may be non-integer or negative
  (a noisy release).
- ``cells.csv``: ``cell,lat,lon`` — the cell centres.
- ``truth_do_not_share.csv``: ``user,slot,cell`` — the true sequences (to score a recovery; never published).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from odcore.constants import CELL, LAT, LON, TIME, USER
from odcore.data.validate import check_trace_table
from odcore.errors import ParameterError, TraceFormatError
from odcore.knock.timeseries import EARTH_RADIUS_KM, GridKind, ROIGrid, TimeSeriesConfig, build_grid
from odcore.od.hourly import modes
from odcore.paths import atomic_output

SLOT = "slot"
START = "start"
COUNT = "count"

COUNTS_COLUMNS = (SLOT, START, CELL, COUNT)
CELLS_COLUMNS = (CELL, LAT, LON)
TRUTH_COLUMNS = (USER, SLOT, CELL)


@dataclass(frozen=True, eq=False)
class CellSpace:
    """Cell centres and their planar coordinates (km, equirectangular about the centres' mean).

    Centres are rounded to 1e-8 degrees (about 1 mm), the precision of ``cells.csv``, so that a recovery from the
    files is the recovery from memory (the assignment breaks ties between equal distances by order, and a last-bit
    difference in a distance would break them differently).
    """

    lat: np.ndarray
    lon: np.ndarray

    def __post_init__(self) -> None:
        lat = np.asarray(self.lat, dtype=float)
        lon = np.asarray(self.lon, dtype=float)
        if lat.shape != lon.shape or lat.ndim != 1 or lat.size == 0:
            raise ParameterError(f"cells need equal-length lat and lon vectors, got {lat.shape} and {lon.shape}.")
        if not (np.isfinite(lat).all() and np.isfinite(lon).all()):
            raise ParameterError("cell centres must be finite numbers.")
        object.__setattr__(self, "lat", np.round(lat, 8))
        object.__setattr__(self, "lon", np.round(lon, 8))

    @property
    def n_cells(self) -> int:
        return int(self.lat.size)

    def xy_km(self) -> np.ndarray:
        """``n_cells × 2`` planar coordinates in km."""
        lat0 = math.radians(float(self.lat.mean()))
        lon0 = float(self.lon.mean())
        y = np.radians(self.lat - self.lat.mean()) * EARTH_RADIUS_KM
        x = np.radians(self.lon - lon0) * EARTH_RADIUS_KM * math.cos(lat0)
        return np.column_stack([x, y])

    @classmethod
    def from_grid(cls, grid: ROIGrid) -> CellSpace:
        r, c = np.divmod(np.arange(grid.n_cells), grid.cols)
        lat = grid.lat_min + (r + 0.5) * (grid.lat_max - grid.lat_min) / grid.rows
        lon = grid.lon_min + (c + 0.5) * (grid.lon_max - grid.lon_min) / grid.cols
        return cls(lat, lon)


@dataclass(frozen=True, eq=False)
class Aggregates:
    """Counts per cell per slot (what the attack reads), with the time axis.

    ``counts`` is ``n_slots × n_cells`` (float: a noisy release may hold any real value).
    """

    counts: np.ndarray
    cells: CellSpace
    starts: tuple[str, ...]     # local start of every slot, ISO 8601 with its UTC offset

    def __post_init__(self) -> None:
        object.__setattr__(self, "starts", tuple(str(s) for s in self.starts))
        c = np.asarray(self.counts, dtype=float)
        if c.ndim != 2 or c.shape[1] != self.cells.n_cells or c.shape[0] != len(self.starts):
            raise ParameterError(f"counts must be slots × cells = {len(self.starts)} × {self.cells.n_cells}, "
                                 f"got shape {c.shape}.")
        object.__setattr__(self, "counts", c)

    @property
    def n_slots(self) -> int:
        return int(self.counts.shape[0])

    def minute_of_day(self) -> np.ndarray:
        """Local wall-clock minute of the day at which each slot starts."""
        ts = [pd.Timestamp(x) for x in self.starts]
        return np.array([t.hour * 60 + t.minute for t in ts], dtype=np.int64)

    def with_counts(self, counts: np.ndarray) -> Aggregates:
        return Aggregates(counts, self.cells, self.starts)


@dataclass(frozen=True, eq=False)
class Population:
    """True cell sequences (``users × slots`` cell ids) and the aggregates they make (do-not-share)."""

    sequences: np.ndarray
    users: np.ndarray
    cells: CellSpace
    starts: tuple[str, ...]
    report: dict[str, Any] = field(default_factory=dict)

    @property
    def n_users(self) -> int:
        return int(self.sequences.shape[0])

    def aggregates(self) -> Aggregates:
        """Exact counts: ``counts[t, c]`` = people in cell ``c`` during slot ``t``."""
        t = self.sequences.shape[1]
        k = self.cells.n_cells
        flat = (np.arange(t)[None, :] * k + self.sequences).ravel()
        counts = np.bincount(flat, minlength=t * k).reshape(t, k).astype(float)
        return Aggregates(counts, self.cells, self.starts)

    def subsample(self, n: int, rng: np.random.Generator | int | None = None) -> Population:
        """``n`` people drawn without replacement (all of them when ``n`` >= the population)."""
        rng = np.random.default_rng(rng)
        if n >= self.n_users:
            return self
        keep = np.sort(rng.choice(self.n_users, size=int(n), replace=False))
        rep = {**self.report, "subsampled_from": self.n_users, "users": int(n)}
        return Population(self.sequences[keep], self.users[keep], self.cells, self.starts, rep)


@dataclass(frozen=True)
class SlotConfig:
    """How traces become one cell per person per slot.

    Parameters
    ----------
    series:
        Grid and time axis (:class:`~odcore.knock.timeseries.TimeSeriesConfig`: ``grid``, ``shape``,
        ``slot_minutes``, ``start``, ``n_slots``, ``tz``). The slot must divide a day.
    min_coverage:
        Keep people with a record inside the grid in at least this fraction of the slots.
    """

    series: TimeSeriesConfig = field(default_factory=TimeSeriesConfig)
    min_coverage: float = 0.0

    def __post_init__(self) -> None:
        if self.series.grid == GridKind.LOC:
            raise ParameterError("trajectory recovery needs a lat/lon grid (distances between cells), got grid='loc'.")
        if 1440 % self.series.slot_minutes:
            raise ParameterError(f"slot_minutes must divide a day (1440 minutes), got "
                                 f"slot_minutes={self.series.slot_minutes}.")
        if not 0 <= self.min_coverage <= 1:
            raise ParameterError(f"min_coverage must be in [0, 1], got min_coverage={self.min_coverage}.")


def build_population(df: pd.DataFrame, config: SlotConfig | None = None) -> Population:
    """One cell per person per slot from a trace table (``user, time, lat, lon``); see the module docstring."""
    config = config or SlotConfig()
    sc = config.series
    check_trace_table(df, [USER, TIME, LAT, LON], "cell sequences")
    times = df[TIME]
    slot = pd.Timedelta(minutes=sc.slot_minutes)
    if sc.start is not None:
        start = pd.Timestamp(sc.start)
        start = start.tz_localize(sc.tz) if start.tzinfo is None else start.tz_convert(sc.tz)
    else:
        start = times.min().tz_convert(sc.tz).normalize()
    secs = (times - start.tz_convert("UTC")).dt.total_seconds().to_numpy()
    slot_idx = np.floor(secs / slot.total_seconds())
    n_slots = sc.n_slots if sc.n_slots is not None else int(np.nanmax(slot_idx)) + 1
    # whole days only: the attack works day by day
    per_day = 1440 // sc.slot_minutes
    n_slots = (n_slots // per_day) * per_day
    if n_slots < per_day:
        raise ParameterError(f"the traces span less than one whole day of {per_day} slots from {start}; "
                             "trajectory recovery works on whole days.")
    lat = df[LAT].to_numpy(dtype=float)
    lon = df[LON].to_numpy(dtype=float)
    in_time = (slot_idx >= 0) & (slot_idx < n_slots)
    grid = build_grid(sc, lat[in_time], lon[in_time])
    cell = grid.assign(lat, lon)
    keep = in_time & (cell >= 0)
    codes, users = pd.factorize(df[USER], sort=True)
    users = np.asarray(users)
    n_users, n_cells = len(users), grid.n_cells
    u = codes[keep].astype(np.int64)
    s = slot_idx[keep].astype(np.int64)
    key = np.sort((u * n_slots + s) * n_cells + cell[keep])
    seq = np.full((n_users, n_slots), -1, dtype=np.int64)
    if key.size:
        group, win = modes(key, n_cells)
        seq.ravel()[group] = win
    seen = seq >= 0
    coverage = seen.mean(axis=1)
    ok = seen.any(axis=1) & (coverage >= config.min_coverage)
    report: dict[str, Any] = {"rows_in": len(df), "rows_used": int(keep.sum()),
                              "users_in": int(n_users), "users_dropped_low_coverage": int((~ok).sum()),
                              "min_coverage": config.min_coverage}
    seq, users, seen = seq[ok], users[ok], seen[ok]
    if seq.shape[0] < 2:
        raise ParameterError(f"{seq.shape[0]} person(s) left with records in the grid and time window "
                             f"(min_coverage={config.min_coverage}); trajectory recovery needs at least 2.")
    report["filled_slot_share"] = round(float(1 - seen.mean()), 4)
    # last known cell forward, the first known one backward
    idx = np.where(seen, np.arange(n_slots)[None, :], -1)
    np.maximum.accumulate(idx, axis=1, out=idx)
    first = seen.argmax(axis=1)
    idx = np.where(idx < 0, first[:, None], idx)
    seq = np.take_along_axis(seq, idx, axis=1)
    starts = tuple(s.isoformat() for s in pd.date_range(start, periods=n_slots, freq=slot))
    report.update({"users": int(seq.shape[0]), "slots": int(n_slots), "slot_minutes": sc.slot_minutes,
                   "grid": grid.to_dict()})
    return Population(seq, users, CellSpace.from_grid(grid), starts, report)


# ------------------------------------------------------------------------------------------------------------------
# Plain files
# ------------------------------------------------------------------------------------------------------------------

def write_counts(agg: Aggregates, counts_path: str | Path, cells_path: str | Path) -> None:
    """Write ``counts.csv`` (non-zero counts) and ``cells.csv``; each file all or nothing."""
    t, c = np.nonzero(agg.counts)
    starts = np.asarray(agg.starts)
    frame = pd.DataFrame({SLOT: t, START: starts[t], CELL: c, COUNT: agg.counts[t, c]})
    with atomic_output(counts_path) as tmp:
        frame.to_csv(tmp, index=False, float_format="%.10g")
    cells = pd.DataFrame({CELL: np.arange(agg.cells.n_cells), LAT: agg.cells.lat, LON: agg.cells.lon})
    with atomic_output(cells_path) as tmp:
        cells.to_csv(tmp, index=False, float_format="%.8f")


def _read_csv(path: str | Path, columns: tuple[str, ...]) -> pd.DataFrame:
    path = Path(path)
    try:
        frame = pd.read_csv(path)
    except FileNotFoundError:
        raise TraceFormatError("no such file.", file=str(path)) from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise TraceFormatError(f"not a CSV table ({exc}).", file=str(path)) from None
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise TraceFormatError(f"lacks column(s) {missing}; expected {list(columns)}.", file=str(path),
                               column=missing[0])
    return frame


def _int_column(frame: pd.DataFrame, col: str, path: str | Path, *, minimum: int = 0) -> np.ndarray:
    v = pd.to_numeric(frame[col], errors="coerce").to_numpy(dtype=float)
    bad = ~np.isfinite(v) | (v != np.round(v)) | (v < minimum)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise TraceFormatError(f"must be an integer >= {minimum}, got {frame[col].iloc[i]!r}.", file=str(path),
                               row=i + 1, column=col)
    return v.astype(np.int64)


def read_cells(path: str | Path) -> CellSpace:
    """Read ``cells.csv`` (cells numbered 0..n-1, each once)."""
    frame = _read_csv(path, CELLS_COLUMNS)
    ids = _int_column(frame, CELL, path)
    if len(frame) == 0 or not np.array_equal(np.sort(ids), np.arange(len(frame))):
        raise TraceFormatError(f"cells must be numbered 0..{len(frame) - 1}, each once.", file=str(path),
                               column=CELL)
    order = np.argsort(ids)
    for col in (LAT, LON):
        v = pd.to_numeric(frame[col], errors="coerce").to_numpy(dtype=float)
        if not np.isfinite(v).all():
            i = int(np.flatnonzero(~np.isfinite(v))[0])
            raise TraceFormatError(f"must be a number, got {frame[col].iloc[i]!r}.", file=str(path), row=i + 1,
                                   column=col)
    return CellSpace(frame[LAT].to_numpy(float)[order], frame[LON].to_numpy(float)[order])


def read_counts(counts_path: str | Path, cells_path: str | Path) -> Aggregates:
    """Read ``counts.csv`` + ``cells.csv``. Slots are 0..max(slot); a slot with no row must still be named once
    (the writer names every slot with a non-zero count; a slot of all zeros cannot be told apart from a gap, so
    every slot from 0 to the last must appear)."""
    cells = read_cells(cells_path)
    frame = _read_csv(counts_path, COUNTS_COLUMNS)
    if len(frame) == 0:
        raise TraceFormatError("holds no counts.", file=str(counts_path))
    slot = _int_column(frame, SLOT, counts_path)
    cell = _int_column(frame, CELL, counts_path)
    if (cell >= cells.n_cells).any():
        i = int(np.flatnonzero(cell >= cells.n_cells)[0])
        raise TraceFormatError(f"cell {cell[i]} is not in the cells file (0..{cells.n_cells - 1}).",
                               file=str(counts_path), row=i + 1, column=CELL)
    count = pd.to_numeric(frame[COUNT], errors="coerce").to_numpy(dtype=float)
    if not np.isfinite(count).all():
        i = int(np.flatnonzero(~np.isfinite(count))[0])
        raise TraceFormatError(f"must be a number, got {frame[COUNT].iloc[i]!r}.", file=str(counts_path),
                               row=i + 1, column=COUNT)
    n_slots = int(slot.max()) + 1
    present = np.zeros(n_slots, bool)
    present[slot] = True
    if not present.all():
        raise TraceFormatError(f"slot {int(np.flatnonzero(~present)[0])} has no row; every slot 0..{n_slots - 1} "
                               "must appear.", file=str(counts_path), column=SLOT)
    dup = pd.Series(slot * cells.n_cells + cell).duplicated().to_numpy()
    if dup.any():
        i = int(np.flatnonzero(dup)[0])
        raise TraceFormatError(f"(slot {slot[i]}, cell {cell[i]}) appears twice.", file=str(counts_path),
                               row=i + 1)
    counts = np.zeros((n_slots, cells.n_cells))
    counts[slot, cell] = count
    first = pd.Series(frame[START].astype(str).to_numpy()).groupby(slot).first().sort_index()
    for i, text in enumerate(first):
        try:
            ok = pd.Timestamp(text).tzinfo is not None
        except ValueError:
            ok = False
        if not ok:
            raise TraceFormatError(f"start of slot {i} must be ISO 8601 with a UTC offset, got {text!r}.",
                                   file=str(counts_path), column=START)
    starts = tuple(first)
    return Aggregates(counts, cells, starts)


def write_truth(pop: Population, path: str | Path) -> None:
    """Write ``truth_do_not_share.csv`` (``user,slot,cell``), all or nothing."""
    n, t = pop.sequences.shape
    frame = pd.DataFrame({USER: np.repeat(pop.users, t), SLOT: np.tile(np.arange(t), n),
                          CELL: pop.sequences.ravel()})
    with atomic_output(path) as tmp:
        frame.to_csv(tmp, index=False)


def read_sequences(path: str | Path, id_column: str, n_slots: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Read ``id,slot,cell`` rows (truth or recovered) into ``(ids, ids × slots cell matrix)``; every id needs every
    slot exactly once."""
    frame = _read_csv(path, (id_column, SLOT, CELL))
    slot = _int_column(frame, SLOT, path)
    cell = _int_column(frame, CELL, path)
    codes, ids = pd.factorize(frame[id_column], sort=True)
    t = int(slot.max()) + 1 if n_slots is None else int(n_slots)
    if (slot >= t).any():
        raise TraceFormatError(f"slot {int(slot.max())} is beyond the {t} slots of the counts.", file=str(path),
                               column=SLOT)
    seq = np.full((len(ids), t), -1, dtype=np.int64)
    flat = codes.astype(np.int64) * t + slot
    if pd.Series(flat).duplicated().any():
        raise TraceFormatError("an (id, slot) appears twice.", file=str(path))
    seq.ravel()[flat] = cell
    if (seq < 0).any():
        i, j = np.argwhere(seq < 0)[0]
        raise TraceFormatError(f"{id_column} {ids[i]!r} has no cell for slot {j}; every slot is needed.",
                               file=str(path))
    return np.asarray(ids), seq
