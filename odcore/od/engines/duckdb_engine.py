"""The trace -> weekly OD step in embedded DuckDB: out of core, bounded memory, both cores.

Two stages:

A. **Rows -> (user, slot, cell), by user shard.** DuckDB scans the source (``read_parquet`` / ``read_csv``, or an
   Arrow view of an in-memory table) and hands Arrow record batches to Python, which applies the loader's filters
   and the shared per-row definitions (:func:`odcore.od.kernel.filter_batch`, the zones' ``assign``,
   :func:`~odcore.od.kernel.hour_slots`) on two threads (numpy and pyproj release the GIL on whole arrays) and
   splits each batch by a hash of the user (DuckDB's ``hash`` for text ids); each part is appended to its shard's
   Arrow IPC file in the work folder, outside DuckDB's memory.
B. **Per user shard, in SQL.** Each user falls in one shard, so per shard: winner-takes-all per user-hour (most
   records, ties to the lower cell id, exact duplicate rows once), trips with ``lead()`` over the user's hours
   (next slot = slot + 1, distinct cell), the week of the origin hour from a slot -> week table, unique pairs per
   user-week; the distinct-user counts of every shard are then summed by (week, origin, destination), which is
   exact because a user's pairs are all in one shard. When every user-hour of a shard has one row (synthetic
   cities, sparse real data: the common case), one window over the rows gives both the winners and the trips
   (:func:`_run_shard`).

Memory is bounded by DuckDB's ``memory_limit``, a few batches in flight and one shard's rows (read back from its
file, about ``shard_rows`` x 48 B, which DuckDB scans in place); stage B has the whole ``memory_limit`` for one
shard, so its cost per shard does not grow with the input.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from odcore.constants import COUNT, DESTINATION, LAT, LON, ORIGIN, TIME, TRIPS, UNIQUE_TRIPS, USER, WEEK
from odcore.data.fingerprint import TraceFingerprint, row_hashes
from odcore.data.traces import DROP_DUPLICATE, BBox, RobustBoxCounts, resolve_mapping, to_time_ns
from odcore.errors import ParameterError, TraceFormatError
from odcore.od import kernel as K
from odcore.od.bounding import bounded_counts_sql
from odcore.od.engines.sources import FileSource
from odcore.od.pairs import BOUNDED_COLUMNS

__all__ = ["build_od_duckdb"]

BATCH_ROWS = 1_000_000
SHARD_ROWS = 12_000_000


def _connect(memory_limit: str, threads: int | None, temp_dir: str, in_order: bool = False):
    """A DuckDB connection; ``in_order``: scans return the rows in the files' order (what :class:`RowOrder` reads
    a proof from), else in any order."""
    import duckdb

    cfg: dict[str, Any] = {"memory_limit": memory_limit, "temp_directory": temp_dir,
                           "preserve_insertion_order": in_order}
    if threads:
        cfg["threads"] = int(threads)
    con = duckdb.connect(config=cfg)
    con.execute("SET enable_progress_bar = false")   # a bar on stderr per query: noise in the CLI and the logs
    return con


def _q(name: str) -> str:
    return '"' + str(name).replace('"', '""') + '"'


def _sql_list(paths) -> str:
    return "[" + ", ".join("'" + p.replace("'", "''") + "'" for p in paths) + "]"


class _Scan:
    """Raw rows of a source as Arrow batches (user, time, lat, lon), read by DuckDB."""

    def __init__(self, con, source, batch_rows: int):
        self.con, self.source, self.batch_rows = con, source, batch_rows
        self._cursors: dict[int, Any] = {}
        self._lock = threading.Lock()
        if isinstance(source, FileSource):
            if source.format == "parquet":
                scan = f"read_parquet({_sql_list(source.paths)}, union_by_name = true)"
            else:
                scan = f"read_csv({_sql_list(source.paths)}, header = true, union_by_name = true)"
            try:
                cols = [r[0] for r in con.execute(f"DESCRIBE SELECT * FROM {scan}").fetchall()]
            except Exception as exc:  # duckdb raises several types for unreadable files
                raise TraceFormatError(f"cannot read as {source.format} ({type(exc).__name__}: {exc}).",
                                       file=source.display) from None
            mp = resolve_mapping(cols, dict(source.mapping) if source.mapping else None, source.display)
            self.time_unit = mp.time_unit or "auto"
            self.sql = (f"SELECT {_q(mp.user)} AS user, {_q(mp.time)} AS time, "
                        f"TRY_CAST({_q(mp.lat)} AS DOUBLE) AS lat, TRY_CAST({_q(mp.lon)} AS DOUBLE) AS lon "
                        f"FROM {scan}")
            self.checks = (mp.lat, mp.lon, scan)
        else:
            self.time_unit = "auto"
            self.sql = None

    def cursor(self):
        """The calling thread's own cursor on the scan's connection (a cursor must not be shared by threads)."""
        key = threading.get_ident()
        with self._lock:
            if key not in self._cursors:
                self._cursors[key] = self.con.cursor()
            return self._cursors[key]

    def close(self) -> None:
        for cur in self._cursors.values():
            cur.close()
        self._cursors.clear()
        self.con.close()

    def count(self) -> int:
        if self.sql is None:
            return len(self.source)
        if self.source.format == "parquet":
            return int(self.con.execute(f"SELECT count(*) FROM ({self.sql})").fetchall()[0][0])
        return max(1, self.source.n_bytes // 40)

    def check_numbers(self) -> None:
        """Text in a coordinate column that is not a number: one clear message (the loader's rule)."""
        if self.sql is None:
            return
        la, lo, scan = self.checks
        for col in (la, lo):
            bad = self.con.execute(
                f"SELECT {_q(col)} FROM {scan} WHERE {_q(col)} IS NOT NULL AND TRY_CAST({_q(col)} AS DOUBLE) IS NULL "
                "LIMIT 1").fetchall()
            if bad:
                raise TraceFormatError(f"cannot parse {bad[0][0]!r} as a number.", file=self.source.display,
                                       column=col)

    def count_exact(self) -> int:
        """The source's row count (CSV: DuckDB counts the rows; :meth:`count` only estimates it from the size)."""
        if self.sql is None:
            return len(self.source)
        return int(self.con.execute(f"SELECT count(*) FROM ({self.sql})").fetchall()[0][0])

    def raw_batches(self):
        """Yield the source's batches as read (:meth:`columns` turns one into arrays; that part can run on
        another thread)."""
        if self.sql is None:
            df = self.source
            user = K.frame_user_array(df[USER])
            t_s = K.frame_time_seconds(df[TIME])
            lat = df[LAT].to_numpy(np.float64)
            lon = df[LON].to_numpy(np.float64)
            for i in range(0, len(df), self.batch_rows):
                sl = slice(i, i + self.batch_rows)
                yield user[sl], t_s[sl], lat[sl], lon[sl]
            return
        yield from self.con.sql(self.sql).to_arrow_reader(self.batch_rows)

    @staticmethod
    def columns(b):
        """(user Arrow array, time pandas Series, lat, lon) of a batch of :meth:`raw_batches`."""
        if isinstance(b, tuple):
            return b
        return (b.column(0), b.column(1).to_pandas(), b.column(2).to_numpy(zero_copy_only=False),
                b.column(3).to_numpy(zero_copy_only=False))


def trace_filters(source, tz: str, time_unit: str, bbox) -> K.Filters | None:
    if not isinstance(source, FileSource):
        return None
    return K.Filters(source=source.display, tz=source.tz, time_unit=time_unit, time_offset_s=source.time_offset_s,
                     bbox=bbox,
                     start_ns=None if source.start is None else to_time_ns(source.start, source.tz, "start"),
                     end_ns=None if source.end is None else to_time_ns(source.end, source.tz, "end"))


def _resolve_bbox(scan: _Scan, source, workers: int = 1) -> tuple[float, float, float, float] | None:
    if not isinstance(source, FileSource) or source.bbox is None:
        return None
    if isinstance(source.bbox, str) and source.bbox.strip().lower() == "auto":
        counts = RobustBoxCounts()
        # every usable row counted (kernel.sparse_box_counts): the loader's and every engine's box
        for c in _threaded(lambda x: K.sparse_box_counts(*scan.columns(x)), scan.raw_batches(), workers):
            counts.add_sparse(c["axis"].to_numpy(), c["band"].to_numpy(), c["n"].to_numpy())
        return K.robust_bbox(counts, source.display)
    return BBox.parse(source.bbox).as_tuple()


def _prepare(raw, scan: _Scan, grid, tz: str, filters: K.Filters | None, n_shards: int, outside: bool = False,
             runs: bool = True):
    """One batch of :meth:`_Scan.raw_batches` -> (``[(shard, Arrow table user, t, lat, lon, slot, cell)]`` of the
    kept rows, its :class:`~odcore.od.kernel.PrepStats`). The shard of a row is a hash of its user modulo
    ``n_shards`` (integer ids: :func:`~odcore.od.kernel.mix64`; text: DuckDB's ``hash`` on a cursor of this
    thread's own). ``outside``: the rows the filters keep but no zone takes come too, as shard -1 (slot 0, cell
    -1)."""
    user, time_, lat, lon = scan.columns(raw)
    st = K.PrepStats()
    if filters is None:
        st.rows_read += len(lat)
        t = np.asarray(time_, dtype=np.int64)
    else:
        code, t = K.filter_batch(user, time_, lat, lon, filters, st)
        keep = code == 0
        if not keep.all():
            idx = np.flatnonzero(keep)
            user, t, lat, lon = user.take(pa.array(idx)), t[idx], lat[idx], lon[idx]
    ok, slot, cell = K.assign_batch(grid, lat, lon, t, tz, st)
    out_part = []
    if outside and not ok.all():
        far = np.flatnonzero(~ok)
        u_far = user.take(pa.array(far))
        if isinstance(u_far, pa.ChunkedArray):
            u_far = u_far.combine_chunks()
        out_part = [(-1, pa.table([u_far, pa.array(t[far]), pa.array(lat[far]), pa.array(lon[far]),
                                   pa.array(np.zeros(far.size, np.int64)), pa.array(np.full(far.size, -1, np.int64))],
                                  names=[USER, K.T_S, LAT, LON, K.SLOT, "cell"]))]
    if not ok.all():
        idx = np.flatnonzero(ok)
        user, t, lat, lon, slot, cell = user.take(pa.array(idx)), t[idx], lat[idx], lon[idx], slot[idx], cell[idx]
    if isinstance(user, pa.ChunkedArray):
        user = user.combine_chunks()
    st.order = _order_facts(user, t, slot) if runs else None
    tbl = pa.table([user, pa.array(t), pa.array(lat), pa.array(lon), pa.array(slot), pa.array(cell)],
                   names=[USER, K.T_S, LAT, LON, K.SLOT, "cell"])
    if n_shards == 1 or not len(tbl):
        return _with_runs([(0, tbl)], st) + out_part, st
    if pa.types.is_integer(user.type):   # integer ids: a splitmix64 hash in numpy
        sh = (K.mix64(user.to_numpy().astype(np.int64).view(np.uint64)) % np.uint64(n_shards)).astype(np.int32)
    else:                                # text ids: DuckDB's hash; the row number goes along, because the
        cur = scan.cursor()              # connections do not preserve insertion order (rows may come back reordered)
        cur.register("batch_tbl", pa.table({"i": np.arange(len(tbl), dtype=np.int64), USER: tbl.column(USER)}))
        got = cur.execute(f"SELECT i, (hash(user) % {n_shards})::INTEGER AS s FROM batch_tbl").fetchnumpy()
        cur.unregister("batch_tbl")
        sh = np.empty(len(tbl), np.int32)
        sh[got["i"]] = got["s"]
    if n_shards <= 4:                    # a few shards: one mask each is cheaper than sorting the batch
        parts = [(k, tbl.filter(pa.array(sh == k))) for k in range(n_shards)]
        return _with_runs([(k, p) for k, p in parts if len(p)], st) + out_part, st
    order = np.argsort(sh, kind="stable")
    ends = np.cumsum(np.bincount(sh, minlength=n_shards))
    tbl = tbl.take(pa.array(order))
    return _with_runs([(k, tbl.slice(int(e - n), int(n))) for k, (e, n) in enumerate(zip(
        ends, np.diff(ends, prepend=0), strict=True)) if n], st) + out_part, st


def _with_runs(parts: list, st: K.PrepStats) -> list:
    """``parts`` and, when the batch's rows are in order (:func:`_order_facts`), each part's rows counted by runs
    of equal (user, slot, cell) (``(("runs", k), Arrow table user, slot, cell, n)``): what stage B reads instead of
    the rows once the order has proved that no row is a duplicate."""

    f = getattr(st, "order", None)
    if f is None or not f["in_order"]:
        return parts
    out = list(parts)
    for k, tbl in parts:
        n = len(tbl)
        user = tbl.column(USER).combine_chunks()
        slot = tbl.column(K.SLOT).to_numpy()
        cell = tbl.column("cell").to_numpy()
        same = pc.fill_null(pc.equal(user.slice(1), user.slice(0, n - 1)), False).to_numpy(zero_copy_only=False)
        same &= (slot[1:] == slot[:-1]) & (cell[1:] == cell[:-1])
        starts = np.r_[0, np.flatnonzero(~same) + 1]
        out.append((("runs", k), pa.table([user.take(pa.array(starts)), pa.array(slot[starts]),
                                           pa.array(cell[starts]), pa.array(np.diff(np.r_[starts, n]))],
                                          names=[USER, K.SLOT, "cell", "n"])))
    return out


def _order_facts(user, t: np.ndarray, slot: np.ndarray) -> dict[str, Any] | None:
    """How a batch's rows (in the source's order) come: whether each user's rows are in time order within their
    runs, how many rows follow a row of the same user with the same time (``same_time``) or the same hour
    (``same_hour``), the runs' user ids, and the first and last row's (user, t, slot), for :class:`RowOrder`."""

    n = len(t)
    if n == 0:
        return None
    if n > 1:
        same = pc.fill_null(pc.equal(user.slice(1), user.slice(0, n - 1)), False).to_numpy(zero_copy_only=False)
        dt = t[1:] - t[:-1]
        in_order = bool((~same | (dt >= 0)).all())
        same_time = int((same & (dt == 0)).sum())
        same_hour = int((same & (slot[1:] == slot[:-1])).sum())
        starts = np.r_[0, np.flatnonzero(~same) + 1]
    else:
        in_order, same_time, same_hour, starts = True, 0, 0, np.zeros(1, np.int64)
    return {"in_order": in_order, "same_time": same_time, "same_hour": same_hour,
            "ids": user.take(pa.array(starts)),
            "first": (user[0].as_py(), int(t[0]), int(slot[0])), "last": (user[n - 1].as_py(), int(t[-1]),
                                                                            int(slot[-1]))}


class RowOrder:
    """What the order of the kept rows proves, added batch by batch in the source's order: when every user's rows
    form one run in time order and no row follows one of the same user and time, no two rows are exact duplicates
    (:attr:`no_duplicates`); when, moreover, none follows one of the same user and hour, every user-hour has one
    row (:attr:`one_row_hours`). Only a proof is used: an order that proves nothing leaves stage B as it is."""

    def __init__(self) -> None:
        self.ok = True
        self.ids: list = []
        self.last = None
        self.same_time = self.same_hour = 0

    def add(self, f: dict[str, Any] | None) -> None:
        if f is None or not self.ok:
            return
        if not f["in_order"] or (None in (f["first"][0], f["last"][0])):
            self.ok = False
            return
        ids = f["ids"]
        if self.last is not None and self.last[0] == f["first"][0]:
            if f["first"][1] < self.last[1]:
                self.ok = False
                return
            self.same_time += f["first"][1] == self.last[1]
            self.same_hour += f["first"][2] == self.last[2]
            ids = ids.slice(1)
        self.ids.append(ids)
        self.last = f["last"]
        self.same_time += f["same_time"]
        self.same_hour += f["same_hour"]

    def _grouped(self) -> bool:

        if not self.ok or not self.ids:
            return False
        ids = pa.chunked_array(self.ids)
        return ids.null_count == 0 and pc.count_distinct(ids).as_py() == len(ids)

    def facts(self) -> tuple[bool, bool]:
        """``(no_duplicates, one_row_hours)``."""
        no_dup = self.same_time == 0 and self._grouped()
        return no_dup, no_dup and self.same_hour == 0


def _threaded(fn, items, workers: int):
    """``map(fn, items)`` in order on ``workers`` threads, at most ``workers + 1`` items in flight (memory stays
    that of a few batches). The per-row work is numpy and pyproj, which release the GIL on whole arrays, so a
    second thread uses the second core while DuckDB and the first thread are busy."""
    if workers <= 1:
        yield from map(fn, items)
        return
    with ThreadPoolExecutor(workers) as ex:
        pending: deque = deque()
        for it in items:
            pending.append(ex.submit(fn, it))
            if len(pending) > workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def prepared_batches(scan: _Scan, grid, tz: str, filters: K.Filters | None, st: K.PrepStats, workers: int = 1,
                     n_shards: int = 1, outside: bool = False, order: RowOrder | None = None):
    """Yield, per source batch, ``[(shard, Arrow table user, t, lat, lon, slot, cell)]`` of the kept rows,
    prepared on ``workers`` threads (what was read and dropped is added to ``st``; ``outside``: as
    :func:`_prepare`; ``order``: receives the batches' :func:`_order_facts`, in the source's order)."""
    for parts, bst in _threaded(lambda b: _prepare(b, scan, grid, tz, filters, n_shards, outside, order is not None),
                                scan.raw_batches(), workers):
        if order is not None:
            order.add(getattr(bst, "order", None))
        st.merge(bst)
        yield parts


class _ShardFiles:
    """The prepared rows (``ROWS_COLS``) of each user shard in an Arrow IPC stream file, appended batch by batch;
    a shard is read back whole, and its file deleted, when its turn comes."""

    def __init__(self, folder: Path) -> None:
        self.dir = folder
        self.dir.mkdir(parents=True, exist_ok=True)
        self.writers: dict[int, Any] = {}
        self.schema = None

    def path(self, k: int) -> Path:
        return self.dir / f"s{k:05d}.arrows"

    def append(self, k: int, tbl) -> None:
        w = self.writers.get(k)
        if w is None:
            if self.schema is None:
                self.schema = tbl.schema
            w = self.writers[k] = pa.ipc.new_stream(str(self.path(k)), self.schema)
        w.write_table(tbl.cast(self.schema) if tbl.schema != self.schema else tbl)

    def finish(self) -> list[int]:
        for w in self.writers.values():
            w.close()
        return sorted(self.writers)

    def remove(self) -> None:
        """Close and delete every file (the folder stays)."""
        for k in self.finish():
            self.path(k).unlink(missing_ok=True)
        self.writers.clear()
        self.schema = None

    def read(self, k: int, keep: bool = False):
        """Shard ``k``'s rows, memory-mapped: DuckDB scans only the columns a query names, so only their pages are
        read into memory."""
        with pa.memory_map(str(self.path(k)), "r") as f:
            tbl = pa.ipc.open_stream(f).read_all()
        if not keep:
            self.path(k).unlink()
        return tbl


_B32 = 4294967296   # 2**32: the winner's (count, -cell) packed in one BIGINT
ROWS_COLS = "user, t, lat, lon, slot, cell"


def _winners_sql(src: str, dedupe: bool, packed: bool, counted: bool = False) -> str:
    """Winner of every user-hour of ``src`` (rows ``user, t, lat, lon, slot, cell``) as ``user, slot, cell, n``
    (``n``: the hour's rows after duplicate removal).

    Houssiau et al. 2022, Methods: winner takes all per user-hour, ties to the lower cell id. Exact duplicate rows
    (same user, time and coordinates: their slot and cell are then equal too) count once. ``packed`` (cell ids
    below 2**31): the winner is the integer ``max(n * 2**32 + (2**32 - 1 - cell))`` (most records, then the lowest
    cell id), about twice as fast as ``arg_max`` over a struct, with the same result. ``counted``: ``src`` holds
    the counts already (``user, slot, cell, n``, one row per user, slot and cell).
    """
    rows = (f"(SELECT user, any_value(slot) AS slot, any_value(cell) AS cell FROM {src} GROUP BY user, t, lat, lon)"
            if dedupe else src)
    pts = f"SELECT user, slot, cell, n FROM {src}" if counted else \
        f"SELECT user, slot, cell, count(*) AS n FROM {rows} GROUP BY ALL"
    if packed:
        return (f"SELECT user, slot, {_B32 - 1} - max(n * {_B32} + ({_B32 - 1} - cell)) % {_B32} AS cell, "
                f"sum(n)::BIGINT AS n FROM ({pts}) GROUP BY user, slot")
    return f"SELECT user, slot, arg_max(cell, (n, -cell)) AS cell, sum(n)::BIGINT AS n FROM ({pts}) GROUP BY ALL"


SHARD_PATHS = ("one row per user-hour", "hours aggregated", "several-row hours apart", "all rows deduplicated",
               "rows counted by user, hour and cell")


def _run_shard(con, src: str, dedupe: bool, keep_pairs: bool, packed: bool, rows_window: bool,
               bounded_sql: str | None = None, no_duplicates: bool = False) -> str:
    """The per-shard pipeline (user-hours -> winners -> trips -> unique pairs), appended into the result tables.

    With ``rows_window``, one window over the shard's rows (each user's rows by hour, the next row's hour
    and cell) comes first: when no row is followed by a row of the same hour, every user-hour has one row, which is
    its winner (and no row can be a duplicate of another): the same window gives the trips. That is the case in the
    synthetic cities and in sparse real data. Otherwise the user-hours are aggregated: an hour with one row has that
    row's cell as winner, and only the rows of hours with several rows go through duplicate removal and the
    per-cell count (:func:`_winners_sql`), or all rows when most are in such hours (dense GPS traces); the window
    then runs over the winners. Returns the path taken (:data:`SHARD_PATHS`); the caller tries the one window again
    on the next shard only if it held. ``no_duplicates`` (the rows' order proved that no two rows are exact
    duplicates, :class:`RowOrder`) with ``rows_window`` False: the rows are cut first, counted by (user, hour,
    cell), and the winners and the window come from those counts (about 50 fixes a user-hour become a few rows).
    """
    nxt = "lead(slot) OVER u AS nslot, lead(cell) OVER u AS ncell"
    single = False
    if rows_window:   # (over the run counts when no_duplicates: one run per row when the window holds)
        con.execute(f"CREATE OR REPLACE TEMP TABLE lw AS SELECT user, slot, cell, {nxt} FROM {src} "
                    "WINDOW u AS (PARTITION BY user ORDER BY slot)")
        same_hour, n_rows = con.execute(
            "SELECT count(*) FILTER (WHERE nslot = slot), count(*) FROM lw").fetchall()[0]
        single = same_hour == 0
    if single:
        n_dedup, path = n_rows, SHARD_PATHS[0]
    elif no_duplicates:   # src: the rows counted by runs (user, slot, cell, n), summed per (user, slot, cell)
        path = SHARD_PATHS[4]
        pts = f"(SELECT user, slot, cell, sum(n)::BIGINT AS n FROM {src} GROUP BY ALL)"
        con.execute(f"CREATE OR REPLACE TEMP TABLE win AS {_winners_sql(pts, False, packed, counted=True)}")
        n_rows = n_dedup = int(con.execute("SELECT sum(n) FROM win").fetchall()[0][0] or 0)
        con.execute(f"CREATE OR REPLACE TEMP TABLE lw AS SELECT user, slot, cell, {nxt} FROM win "
                    "WINDOW u AS (PARTITION BY user ORDER BY slot)")
    else:
        con.execute(f"CREATE OR REPLACE TEMP TABLE hrs AS SELECT user, slot, count(*) AS c, min(cell) AS cell "
                    f"FROM {src} GROUP BY user, slot")
        n_rows, n_multi_rows = (int(x or 0) for x in con.execute(
            "SELECT sum(c), sum(c) FILTER (WHERE c > 1) FROM hrs").fetchall()[0])
        if n_multi_rows == 0:
            win, path = "SELECT user, slot, cell, c AS n FROM hrs", SHARD_PATHS[1]
        elif n_multi_rows > n_rows // 2:
            win, path = _winners_sql(src, dedupe, packed), SHARD_PATHS[3]
        else:
            path = SHARD_PATHS[2]
            con.execute(f"CREATE OR REPLACE TEMP TABLE mrows AS SELECT s.* FROM {src} s SEMI JOIN "
                        "(SELECT user, slot FROM hrs WHERE c > 1) h ON s.user = h.user AND s.slot = h.slot")
            win = (f"SELECT user, slot, cell, c AS n FROM hrs WHERE c = 1 UNION ALL "
                   f"{_winners_sql('mrows', dedupe, packed)}")
        con.execute(f"CREATE OR REPLACE TEMP TABLE win AS {win}")
        n_dedup = int(con.execute("SELECT sum(n) FROM win").fetchall()[0][0] or 0)
        con.execute(f"CREATE OR REPLACE TEMP TABLE lw AS SELECT user, slot, cell, {nxt} FROM win "
                    "WINDOW u AS (PARTITION BY user ORDER BY slot)")
    # trips: to a distinct cell in the next hour slot, in the week of the origin hour; pairs: distinct per user-week
    con.execute("CREATE OR REPLACE TEMP TABLE prs AS SELECT sw.week, w.user, w.cell AS o, w.ncell AS d, "
                "count(*) AS k FROM lw w JOIN slot_week sw ON sw.slot = w.slot "
                "WHERE w.nslot = w.slot + 1 AND w.ncell <> w.cell GROUP BY ALL")
    con.execute("INSERT INTO r_counts SELECT week, o, d, count(*) FROM prs GROUP BY ALL")
    con.execute("INSERT INTO r_user_week SELECT a.week, a.user, coalesce(p.trips, 0), coalesce(p.uniq, 0) FROM "
                "(SELECT DISTINCT sw.week, w.user FROM lw w JOIN slot_week sw USING (slot)) a "
                "LEFT JOIN (SELECT week, user, sum(k)::BIGINT AS trips, count(*) AS uniq FROM prs GROUP BY ALL) p "
                "USING (week, user)")
    con.execute("INSERT INTO r_cells SELECT DISTINCT cell FROM lw")
    con.execute(f"INSERT INTO r_stats SELECT {int(n_rows)}, {n_dedup}, count(*) FROM lw")
    if keep_pairs:
        con.execute("INSERT INTO r_pairs SELECT week, user, o, d FROM prs")
    if bounded_sql is not None:   # per-person bounding in SQL (odcore.od.bounding): a user is in one shard
        con.execute(f"INSERT INTO r_bounded {bounded_sql}")
    return path


def build_od_duckdb(source, config, *, grid=None, keep_pairs: bool = True, memory_limit: str = "3GB",
                    threads: int | None = None, temp_dir: str | None = None, shard_rows: int = SHARD_ROWS,
                    batch_rows: int = BATCH_ROWS, bound: tuple[int, int] | None = None, describe: bool = False,
                    fingerprint: bool = True):
    """Weekly unique OD counts of ``source`` (a trace DataFrame or a :class:`FileSource`) computed in DuckDB.

    Parameters
    ----------
    source:
        A trace table (``user, time, lat, lon``, as :func:`odcore.od.trips.build_od` takes) or a
        :class:`~odcore.od.engines.sources.FileSource` streamed from disk (filters and duplicate removal as the
        loader's).
    config:
        :class:`odcore.od.oddata.ODConfig`.
    grid:
        Zone object with ``assign(lat, lon)`` (default: :func:`~odcore.od.kernel.fit_zones` of a
        min/max pass over the kept rows).
    keep_pairs:
        Also return every user's unique pairs (needed by the attacks; large for big inputs).
    memory_limit, threads, temp_dir:
        DuckDB settings (spilling goes to ``temp_dir``; default: a fresh temporary folder).
    shard_rows:
        Rows per user shard of stage B (the number of shards is rows / shard_rows, rounded up).
    bound:
        ``(max_pairs, key)``: also count every pair's distinct users after each user-week kept its ``max_pairs``
        pairs of smallest keyed hash (:func:`odcore.od.bounding.bounded_counts_sql`), in each shard's SQL;
        the result's ``stats["bounded_counts"]`` (:data:`odcore.od.pairs.BOUNDED_COLUMNS`) and
        ``stats["bounding"]``.
    describe:
        A :class:`FileSource`: also what :func:`odcore.data.traces.load_traces` would report of the fixes it keeps
        (after the filters, exact duplicates once, zones not applied): ``stats["traces"]``,
        ``stats["loader_drops"]`` and ``stats["fingerprint"]``, as :func:`odcore.od.engines.spark_engine.build_od_spark`
        gives them; the rows no zone takes are kept in one more table for it, and the distinct rows are read back
        once, in batches, to be hashed (``fingerprint`` False: not hashed, ``stats["fingerprint"]`` None).
    """
    describe = describe and isinstance(source, FileSource)
    tz = config.tz
    work = Path(tempfile.mkdtemp(prefix="odcore-duckdb-", dir=temp_dir))
    timings: dict[str, float] = {}
    try:
        con = _connect(memory_limit, threads, str(work / "spill"))
        src_con = _connect(memory_limit, threads, str(work / "spill-src"), in_order=True)
        if isinstance(source, FileSource):
            scan = _Scan(src_con, source, batch_rows)
            scan.check_numbers()
        else:
            for col in (USER, TIME, LAT, LON):
                if col not in source.columns:
                    raise TraceFormatError(f"traces miss column {col!r}; have {list(source.columns)}.", column=col)
            if len(source) == 0:
                raise TraceFormatError("no trace rows.")
            scan = _Scan(src_con, source, batch_rows)
        t0 = time.perf_counter()
        c0 = time.process_time()
        cpu: dict[str, float] = {}
        workers = int(threads) if threads else max(1, min(2, os.cpu_count() or 1))   # Python threads per pass
        bbox = _resolve_bbox(scan, source, workers)
        filters = trace_filters(source, tz, scan.time_unit, bbox)
        if grid is None:   # the grid from a streaming min/max pass over the kept rows
            b = K.Bounds()
            if filters is None:
                b.update(source[LAT].to_numpy(np.float64), source[LON].to_numpy(np.float64))
            else:
                for la, lo in _threaded(lambda x: K.kept_points(*scan.columns(x), filters), scan.raw_batches(),
                                        workers):
                    b.update(la, lo)
            grid = K.fit_zones(b, config)
        timings["grid"] = time.perf_counter() - t0
        cpu["grid"] = time.process_time() - c0
        n_est = scan.count()
        n_shards = max(1, math.ceil(n_est / max(1, int(shard_rows))))
        # --- stage A: prepared rows, into one DuckDB table per user shard ---------------------------------------
        st = K.PrepStats()
        n_batches = 0
        shards = _ShardFiles(work / "shards")
        # Driven from this thread: each prepared batch is split by a hash of the user and appended to its shard's
        # Arrow IPC file, outside DuckDB's memory, so that stage B has the whole memory_limit for one shard's
        # windows and aggregates (shard tables inside DuckDB filled memory_limit once the input outgrew it, and
        # were then spilled, read back, and left stage B to spill its own work too). With ``describe``, the rows no
        # zone takes go to shard -1.
        # First in the hope that the rows' order proves no duplicate (RowOrder): then only the rows counted by runs
        # are written (and the rows too with ``describe``, which reads them). Once the order proves nothing, stage A
        # starts again and writes the rows (in files of another order this shows in the first batch).
        order: RowOrder | None = RowOrder()
        while True:
            runs = _ShardFiles(work / "runs")
            batches = prepared_batches(scan, grid, tz, filters, st, workers, n_shards, outside=describe, order=order)
            for parts in batches:
                if order is not None and not order.ok and not describe:
                    batches.close()     # the batches in flight are dropped; the scan starts again below
                    break
                for k, part_tbl in parts:
                    if isinstance(k, tuple):    # counts by runs: kept only while the order may still prove something
                        if order is not None and order.ok:
                            runs.append(k[1], part_tbl)
                    elif describe or order is None:
                        shards.append(k, part_tbl)
                n_batches += 1
                del parts
            if order is None or describe or order.facts()[0]:
                break
            runs.remove()
            shards.remove()
            order, st, n_batches = None, K.PrepStats(), 0
            shards = _ShardFiles(work / "shards")
        if n_batches == 0:
            raise TraceFormatError("no trace rows.")
        scan.close()
        created = set(shards.finish())
        no_dup, one_row_hours = order.facts() if order is not None else (False, False)
        run_keys = sorted(runs.finish())
        timings["stage_a"] = time.perf_counter() - t0 - timings["grid"]
        cpu["stage_a"] = time.process_time() - c0 - cpu["grid"]
        described = None
        if describe:   # every kept row once more, as DuckDB tables for the summary (the shard files stay for stage B)
            names = {k: f"rows_{k}" if k >= 0 else "rows_out" for k in created}
            for k, name in names.items():
                con.register("part_tbl", shards.read(k, keep=True))
                con.execute(f"CREATE TEMP TABLE {name} AS SELECT {ROWS_COLS} FROM part_tbl")
                con.unregister("part_tbl")
            described = _describe_kept(con, sorted(created), workers, fingerprint)
            for name in names.values():
                con.execute(f"DROP TABLE {name}")
            if -1 in created:
                shards.path(-1).unlink()
        created.discard(-1)
        created = run_keys if no_dup else sorted(created)
        if st.slot_min == K.IMIN or not created:
            raise TraceFormatError("no trace row falls inside the grid.")
        con.register("sw", K.slot_week_table(st.slot_min, st.slot_max, tz))
        con.execute("CREATE TEMP TABLE slot_week AS SELECT * FROM sw")
        con.unregister("sw")
        con.register("schema_tbl", (runs if no_dup else shards).schema.empty_table())
        utype = con.execute("DESCRIBE SELECT user FROM schema_tbl").fetchall()[0][1]
        con.unregister("schema_tbl")
        con.execute("CREATE TEMP TABLE r_counts (week BIGINT, o BIGINT, d BIGINT, n BIGINT)")
        con.execute(f"CREATE TEMP TABLE r_user_week (week BIGINT, user {utype}, trips BIGINT, uniq BIGINT)")
        con.execute(f"CREATE TEMP TABLE r_pairs (week BIGINT, user {utype}, o BIGINT, d BIGINT)")
        con.execute("CREATE TEMP TABLE r_cells (cell BIGINT)")
        con.execute("CREATE TEMP TABLE r_stats (rows_in BIGINT, rows_dedup BIGINT, user_hours BIGINT)")
        bounded_sql = None
        if bound is not None:
            week0 = int(con.execute("SELECT min(week) FROM slot_week").fetchall()[0][0])
            bounded_sql = bounded_counts_sql("prs", bound[0], bound[1], week_offset=week0)
            con.execute("CREATE TEMP TABLE r_bounded (week BIGINT, o BIGINT, d BIGINT, raw_count BIGINT, "
                        "true_count BIGINT, bounded_users BIGINT, user_rows BIGINT)")
        # --- stage B: per shard -------------------------------------------------------------------------------
        dedupe = isinstance(source, FileSource)
        packed = grid.n_cells < 2**31
        paths = dict.fromkeys(SHARD_PATHS, 0)
        # the one window is tried first, and again only while it holds, unless the rows' order proved that some
        # user-hour has several rows and no row is a duplicate: then the rows are counted by user, hour and cell.
        # With the proof, stage B reads the rows counted by runs (one row per row when every user-hour has one).
        path = SHARD_PATHS[0] if one_row_hours or not no_dup else SHARD_PATHS[4]
        for k in created:
            con.register("shard_rows", runs.read(k) if no_dup else shards.read(k))
            path = _run_shard(con, "shard_rows", dedupe and not no_dup, keep_pairs, packed, path == SHARD_PATHS[0],
                              bounded_sql, no_duplicates=no_dup)
            con.unregister("shard_rows")
            paths[path] += 1
        timings["stage_b"] = time.perf_counter() - t0 - timings["grid"] - timings["stage_a"]
        cpu["stage_b"] = time.process_time() - c0 - cpu["grid"] - cpu["stage_a"]
        # sorted here (both cores) in the order of the memory engine's tables, which assemble() then only checks
        counts = con.execute("SELECT week, o AS origin, d AS destination, sum(n)::BIGINT AS count FROM r_counts "
                             "GROUP BY ALL ORDER BY ALL").df()
        user_week = con.execute("SELECT week, user, trips, uniq AS unique_trips FROM r_user_week "
                                "ORDER BY week, user").df()
        pairs = (con.execute("SELECT week, user, o AS origin, d AS destination FROM r_pairs").df()
                 if keep_pairs else None)
        cells = np.sort(con.execute("SELECT DISTINCT cell FROM r_cells").df()["cell"].to_numpy(np.int64))
        bounded = None
        if bound is not None:
            bounded = con.execute(
                f"SELECT week - {week0} AS week, o AS origin, d AS destination, sum(raw_count)::BIGINT AS raw_count, "
                "sum(true_count)::BIGINT AS true_count, sum(bounded_users)::BIGINT AS b, sum(user_rows)::BIGINT AS u "
                "FROM r_bounded GROUP BY ALL ORDER BY ALL").df()
        rows_in, rows_dedup, user_hours = (int(x or 0) for x in con.execute(
            "SELECT sum(rows_in), sum(rows_dedup), sum(user_hours) FROM r_stats").fetchall()[0])
        con.close()
    except ParameterError:
        raise
    except TraceFormatError:
        raise
    except Exception as exc:
        import duckdb

        if isinstance(exc, duckdb.Error):
            raise TraceFormatError(f"DuckDB could not run the OD pipeline ({type(exc).__name__}: {exc}).") from None
        raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    dropped = dict(st.dropped)
    if rows_in > rows_dedup:
        dropped[DROP_DUPLICATE] = rows_in - rows_dedup
    like = source[USER] if isinstance(source, pd.DataFrame) else None
    stats = {"rows_read": st.rows_read, "rows_used": rows_dedup, "rows_dropped": dropped, "user_hours": user_hours,
             "cells_used": cells, "engine": "duckdb", "shards": n_shards, "shard_paths": paths, "bbox_used": bbox,
             "seconds": {k: round(v, 3) for k, v in timings.items()},
             "cpu_seconds": {k: round(v, 3) for k, v in cpu.items()}}
    if bounded is not None:
        stats.update(bounded_stats(bounded))
    if described is not None:
        stats.update(described)
    return K.assemble(grid=grid, config=config, counts=counts, user_week=user_week, pairs=pairs, stats=stats,
                      user_like=like)


def _describe_kept(con, tables: list[int], workers: int = 1, fingerprint: bool = True) -> dict[str, Any]:
    """``stats["traces"]``, ``stats["loader_drops"]`` and ``stats["fingerprint"]`` of ``describe``, from the shard
    tables ``rows_k`` and ``rows_out`` (k = -1) of stage A: every row the filters keep, each distinct row once."""
    names = [f"rows_{k}" if k >= 0 else "rows_out" for k in tables]
    union = " UNION ALL ".join(f"SELECT user, t, lat, lon, {int(k < 0)} AS far FROM {n}"
                               for k, n in zip(tables, names, strict=True))
    con.execute(f"CREATE TEMP TABLE kept_fixes AS SELECT DISTINCT user, t, lat, lon, far FROM ({union})")
    n_raw = int(con.execute(f"SELECT sum(n) FROM ({' UNION ALL '.join(f'SELECT count(*) AS n FROM {n}' for n in names)})"
                            ).fetchall()[0][0] or 0)
    a = con.execute("SELECT count(*), count(DISTINCT user), sum(far), min(t), max(t), min(lat), max(lat), min(lon), "
                    "max(lon) FROM kept_fixes").fetchall()[0]
    fp = TraceFingerprint() if fingerprint else None
    if fp is not None:
        reader = con.sql("SELECT user, t, lat, lon FROM kept_fixes").to_arrow_reader(BATCH_ROWS)

        def hashes(b):
            return row_hashes(b.column(0).to_pandas(), b.column(1).to_numpy() * 1_000_000_000,
                              b.column(2).to_numpy(), b.column(3).to_numpy())

        for h in _threaded(hashes, reader, workers):
            fp.add(h)
    con.execute("DROP TABLE kept_fixes")
    rows = int(a[0])
    iso = K.iso_second
    traces = {"rows": rows, "users": int(a[1]), "outside_zones": int(a[2] or 0),
              "time_min": iso(a[3]) if rows else None, "time_max": iso(a[4]) if rows else None,
              "lat_range": [float(a[5]), float(a[6])] if rows else None,
              "lon_range": [float(a[7]), float(a[8])] if rows else None}
    return {"traces": traces, "loader_drops": {DROP_DUPLICATE: n_raw - rows} if n_raw > rows else {},
            "fingerprint": None if fp is None else fp.hexdigest()}


_COLS = (WEEK, ORIGIN, DESTINATION, COUNT, TRIPS, UNIQUE_TRIPS)  # documented output columns


def bounded_stats(bounded: pd.DataFrame) -> dict[str, Any]:
    """``stats["bounded_counts"]`` and ``stats["bounding"]`` of an engine's bounded counts (columns of
    :data:`odcore.od.pairs.BOUNDED_COLUMNS` plus ``b``, ``u``: bounded and all user-weeks per pair row)."""
    return {"bounded_counts": bounded[list(BOUNDED_COLUMNS)].astype(np.int64).reset_index(drop=True),
            "bounding": {"user_weeks": int(bounded["u"].sum()), "user_weeks_bounded": int(bounded["b"].sum())}}

