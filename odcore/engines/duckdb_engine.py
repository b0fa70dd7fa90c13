"""The trace -> weekly OD step in embedded DuckDB: out of core, bounded memory, both cores.

Two stages, both DuckDB:

A. **Rows -> (user, slot, cell).** DuckDB scans the source (``read_parquet`` / ``read_csv``, or an Arrow view of an
   in-memory table) and hands Arrow record batches to Python, which applies the loader's filters and the shared
   per-row definitions (:func:`odcore.engines.kernel.filter_batch`, ``grid.assign``, :func:`~odcore.engines.kernel.
   hour_slots`); DuckDB reads the prepared batches back as an Arrow stream and writes them, hash-partitioned by
   user, to a temporary Parquet folder (``COPY ... PARTITION_BY``).
B. **Per user shard, in SQL.** Each user falls in one shard, so per shard: winner-takes-all per user-hour
   (``arg_max(cell, (n, -cell))``: most records, ties to the lower cell id), trips with ``lead()`` over the user's
   hours (next slot = slot + 1, distinct cell), the week of the origin hour from a slot -> week table, unique pairs
   per user-week; the distinct-user counts of every shard are then summed by (week, origin, destination), which is
   exact because a user's pairs are all in one shard.

Memory is bounded by DuckDB's ``memory_limit`` (spilling to ``temp_directory`` beyond it) and by the shard size.
"""

from __future__ import annotations

import math
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from odcore.constants import COUNT, DESTINATION, LAT, LON, ORIGIN, TIME, TRIPS, UNIQUE_TRIPS, USER, WEEK
from odcore.engines import kernel as K
from odcore.engines.sources import FileSource
from odcore.errors import ParameterError, TraceFormatError

__all__ = ["build_od_duckdb"]

BATCH_ROWS = 1_000_000
SHARD_ROWS = 12_000_000


def _connect(memory_limit: str, threads: int | None, temp_dir: str):
    import duckdb

    cfg: dict[str, Any] = {"memory_limit": memory_limit, "temp_directory": temp_dir,
                           "preserve_insertion_order": False}
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
            from odcore.traces import _resolve_mapping

            mp = _resolve_mapping(cols, dict(source.mapping) if source.mapping else None, source.display)
            self.time_unit = mp.time_unit or "auto"
            self.sql = (f"SELECT {_q(mp.user)} AS user, {_q(mp.time)} AS time, "
                        f"TRY_CAST({_q(mp.lat)} AS DOUBLE) AS lat, TRY_CAST({_q(mp.lon)} AS DOUBLE) AS lon "
                        f"FROM {scan}")
            self.checks = (mp.lat, mp.lon, scan)
        else:
            self.time_unit = "auto"
            self.sql = None

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

    def batches(self):
        """Yield (user Arrow array, time pandas Series, lat, lon) per batch."""
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
        rdr = self.con.sql(self.sql).to_arrow_reader(self.batch_rows)
        for b in rdr:
            yield (b.column(0), b.column(1).to_pandas(), b.column(2).to_numpy(zero_copy_only=False),
                   b.column(3).to_numpy(zero_copy_only=False))


def _filters(source, tz: str, time_unit: str, bbox) -> K.Filters | None:
    if not isinstance(source, FileSource):
        return None
    from odcore.traces import _to_time_ns

    return K.Filters(source=source.display, tz=source.tz, time_unit=time_unit, time_offset_s=source.time_offset_s,
                     bbox=bbox,
                     start_ns=None if source.start is None else _to_time_ns(source.start, source.tz, "start"),
                     end_ns=None if source.end is None else _to_time_ns(source.end, source.tz, "end"))


def _resolve_bbox(scan: _Scan, source) -> tuple[float, float, float, float] | None:
    from odcore.traces import BBox

    if not isinstance(source, FileSource) or source.bbox is None:
        return None
    if isinstance(source.bbox, str) and source.bbox.strip().lower() == "auto":
        n_rows = scan.count_exact()
        la, lo = [], []
        for user, time_, lat, lon in scan.batches():   # the same rows as every engine's sample
            a, b = K.sample_batch(user, time_, lat, lon, n_rows)
            la.append(a)
            lo.append(b)
        return K.robust_bbox(la, lo, source.display)
    return BBox.parse(source.bbox).as_tuple()


def prepared_batches(scan: _Scan, grid, tz: str, filters: K.Filters | None, st: K.PrepStats):
    """Yield Arrow batches ``user, t, lat, lon, slot, cell`` of the kept rows (shared by the DuckDB stages)."""
    import pyarrow as pa

    for user, time_, lat, lon in scan.batches():
        if filters is None:
            st.rows_read += len(lat)
            t = np.asarray(time_, dtype=np.int64)
            keep = None
        else:
            code, t = K.filter_batch(user, time_, lat, lon, filters, st)
            keep = code == 0
            if not keep.all():
                idx = np.flatnonzero(keep)
                user, t, lat, lon = user.take(pa.array(idx)), t[idx], lat[idx], lon[idx]
        ok, slot, cell = K.assign_batch(grid, lat, lon, t, tz, st)
        if not ok.all():
            idx = np.flatnonzero(ok)
            user, t, lat, lon, slot, cell = user.take(pa.array(idx)), t[idx], lat[idx], lon[idx], slot[idx], cell[idx]
        if isinstance(user, pa.ChunkedArray):
            user = user.combine_chunks()
        yield pa.record_batch([user, pa.array(t), pa.array(lat), pa.array(lon), pa.array(slot), pa.array(cell)],
                              names=[USER, K.T_S, LAT, LON, K.SLOT, "cell"])


_B32 = 4294967296   # 2**32: (slot, cell) packed in one BIGINT, and the winner's (count, -cell) in another


def _shard_sql(src: str, dedupe: bool, keep_pairs: bool, slot_min: int, packed: bool) -> list[str]:
    """The per-shard pipeline (tables pts -> win -> trp -> prs), appended into the result tables.

    ``packed`` (cell ids and the hour span below 2**31): the hour (relative to ``slot_min``) and the cell are one
    BIGINT key ``s * 2**32 + cell`` and the winner is the plain ``max`` of ``n * 2**32 + (2**32 - 1 - cell)`` (most
    records, then the lowest cell id): integer aggregates, about twice as fast as grouping by three columns and
    ``arg_max`` over a struct, with the same result.
    """
    # exact duplicate rows (same user, time and coordinates; their slot and cell are then equal too) count once
    rows = (f"(SELECT user, any_value(slot) AS slot, any_value(cell) AS cell FROM {src} GROUP BY user, t, lat, lon)"
            if dedupe else src)
    if packed:
        pts = (f"CREATE OR REPLACE TEMP TABLE pts AS SELECT user, (slot - {int(slot_min)}) * {_B32} + cell AS sc, "
               f"count(*) AS n FROM {rows} GROUP BY ALL")
        npts = "CREATE OR REPLACE TEMP TABLE npts AS SELECT sum(n)::BIGINT AS n FROM pts"
        # Houssiau et al. 2022, Methods: winner takes all per user-hour, ties to the lower cell id
        win = (f"CREATE OR REPLACE TEMP TABLE win AS SELECT user, sc // {_B32} + {int(slot_min)} AS slot, "
               f"{_B32 - 1} - max(n * {_B32} + ({_B32 - 1} - sc % {_B32})) % {_B32} AS cell FROM pts "
               f"GROUP BY user, sc // {_B32}")
    else:
        pts = f"CREATE OR REPLACE TEMP TABLE pts AS SELECT user, slot, cell, count(*) AS n FROM {rows} GROUP BY ALL"
        npts = "CREATE OR REPLACE TEMP TABLE npts AS SELECT sum(n)::BIGINT AS n FROM pts"
        win = ("CREATE OR REPLACE TEMP TABLE win AS SELECT user, slot, arg_max(cell, (n, -cell)) AS cell FROM pts "
               "GROUP BY ALL")
    out = [
        f"CREATE OR REPLACE TEMP TABLE nrows AS SELECT count(*) AS n FROM {src}",
        pts, npts, win,
        # trips: to a distinct cell in the next hour slot; week of the origin hour
        "CREATE OR REPLACE TEMP TABLE trp AS SELECT w.user, sw.week, w.cell AS o, w.ncell AS d FROM ("
        "  SELECT user, slot, cell, lead(slot) OVER u AS nslot, lead(cell) OVER u AS ncell FROM win"
        "  WINDOW u AS (PARTITION BY user ORDER BY slot)) w JOIN slot_week sw ON sw.slot = w.slot "
        "WHERE w.nslot = w.slot + 1 AND w.ncell <> w.cell",
        "CREATE OR REPLACE TEMP TABLE prs AS SELECT DISTINCT week, user, o, d FROM trp",
        "INSERT INTO r_counts SELECT week, o, d, count(*) FROM prs GROUP BY ALL",
        "INSERT INTO r_user_week SELECT a.week, a.user, coalesce(t.n, 0), coalesce(p.n, 0) FROM "
        "(SELECT DISTINCT sw.week, w.user FROM win w JOIN slot_week sw USING (slot)) a "
        "LEFT JOIN (SELECT week, user, count(*) AS n FROM trp GROUP BY ALL) t USING (week, user) "
        "LEFT JOIN (SELECT week, user, count(*) AS n FROM prs GROUP BY ALL) p USING (week, user)",
        "INSERT INTO r_cells SELECT DISTINCT cell FROM win",
        "INSERT INTO r_stats SELECT (SELECT n FROM nrows), (SELECT n FROM npts), (SELECT count(*) FROM win)",
    ]
    if keep_pairs:
        out.append("INSERT INTO r_pairs SELECT week, user, o, d FROM prs")
    return out


def build_od_duckdb(source, config, *, grid=None, keep_pairs: bool = True, memory_limit: str = "3GB",
                    threads: int | None = None, temp_dir: str | None = None, shard_rows: int = SHARD_ROWS,
                    batch_rows: int = BATCH_ROWS):
    """Weekly unique OD counts of ``source`` (a trace DataFrame or a :class:`FileSource`) computed in DuckDB.

    Parameters
    ----------
    source:
        A trace table (``user, time, lat, lon``, as :func:`odcore.trips.build_od` takes) or a
        :class:`~odcore.engines.sources.FileSource` streamed from disk (filters and duplicate removal as the
        loader's).
    config:
        :class:`odcore.trips.ODConfig`.
    grid:
        Zone object with ``assign(lat, lon)`` (default: :func:`~odcore.engines.kernel.fit_zones` of a
        min/max pass over the kept rows).
    keep_pairs:
        Also return every user's unique pairs (needed by the attacks; large for big inputs).
    memory_limit, threads, temp_dir:
        DuckDB settings (spilling goes to ``temp_dir``; default: a fresh temporary folder).
    shard_rows:
        Rows per user shard of stage B (the number of shards is rows / shard_rows, rounded up).
    """
    tz = config.tz
    work = Path(tempfile.mkdtemp(prefix="odcore-duckdb-", dir=temp_dir))
    timings: dict[str, float] = {}
    try:
        con = _connect(memory_limit, threads, str(work / "spill"))
        src_con = _connect(memory_limit, threads, str(work / "spill-src"))
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
        bbox = _resolve_bbox(scan, source)
        filters = _filters(source, tz, scan.time_unit, bbox)
        if grid is None:   # the grid from a streaming min/max pass over the kept rows
            b = K.Bounds()
            if filters is None:
                b.update(source[LAT].to_numpy(np.float64), source[LON].to_numpy(np.float64))
            else:
                for user, time_, lat, lon in scan.batches():
                    code, _ = K.filter_batch(user, time_, lat, lon, filters, K.PrepStats())
                    b.update(lat[code == 0], lon[code == 0])
            grid = K.fit_zones(b, config)
        timings["grid"] = time.perf_counter() - t0
        n_est = scan.count()
        n_shards = max(1, math.ceil(n_est / max(1, int(shard_rows))))
        # --- stage A: prepared rows, partitioned by a hash of the user ------------------------------------------
        import pyarrow as pa

        st = K.PrepStats()
        part = work / "rows"
        part.mkdir()
        n_batches = 0
        # One COPY per prepared batch, driven from this thread (DuckDB never calls back into Python while it
        # reads the source on the other connection): each writes its rows hash-partitioned by user.
        for i, batch in enumerate(prepared_batches(scan, grid, tz, filters, st)):
            tbl = pa.Table.from_batches([batch])
            con.execute(f"COPY (SELECT *, (hash(user) % {n_shards})::INTEGER AS shard FROM tbl) TO "
                        f"'{part / f'b{i:06d}'}' (FORMAT parquet, PARTITION_BY (shard), COMPRESSION snappy)")
            n_batches += 1
            del tbl
        if n_batches == 0:
            raise TraceFormatError("no trace rows.")
        src_con.close()
        timings["stage_a"] = time.perf_counter() - t0 - timings["grid"]
        if st.slot_min == K.IMIN:
            raise TraceFormatError("no trace row falls inside the grid.")
        sw = K.slot_week_table(st.slot_min, st.slot_max, tz)   # noqa: F841 (read by DuckDB by name)
        con.execute("CREATE TEMP TABLE slot_week AS SELECT * FROM sw")
        utype = con.execute(f"SELECT typeof(user) FROM read_parquet('{part}/*/*/*.parquet') LIMIT 1").fetchall()[0][0]
        con.execute("CREATE TEMP TABLE r_counts (week BIGINT, o BIGINT, d BIGINT, n BIGINT)")
        con.execute(f"CREATE TEMP TABLE r_user_week (week BIGINT, user {utype}, trips BIGINT, uniq BIGINT)")
        con.execute(f"CREATE TEMP TABLE r_pairs (week BIGINT, user {utype}, o BIGINT, d BIGINT)")
        con.execute("CREATE TEMP TABLE r_cells (cell BIGINT)")
        con.execute("CREATE TEMP TABLE r_stats (rows_in BIGINT, rows_dedup BIGINT, user_hours BIGINT)")
        # --- stage B: per shard -------------------------------------------------------------------------------
        dedupe = isinstance(source, FileSource)
        packed = grid.n_cells < 2**31 and st.slot_max - st.slot_min < 2**31
        shard_dirs = sorted({d.name for b in part.iterdir() for d in b.iterdir()})
        for name in shard_dirs:
            files = f"read_parquet('{part}/*/{name}/*.parquet')"
            for sql in _shard_sql(files, dedupe, keep_pairs, st.slot_min, packed):
                con.execute(sql)
        timings["stage_b"] = time.perf_counter() - t0 - timings["grid"] - timings["stage_a"]
        counts = con.execute("SELECT week, o AS origin, d AS destination, sum(n)::BIGINT AS count FROM r_counts "
                             "GROUP BY ALL").df()
        user_week = con.execute("SELECT week, user, trips, uniq AS unique_trips FROM r_user_week").df()
        pairs = (con.execute("SELECT week, user, o AS origin, d AS destination FROM r_pairs").df()
                 if keep_pairs else None)
        cells = np.sort(con.execute("SELECT DISTINCT cell FROM r_cells").df()["cell"].to_numpy(np.int64))
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
        from odcore.traces import DROP_DUPLICATE

        dropped[DROP_DUPLICATE] = rows_in - rows_dedup
    like = source[USER] if isinstance(source, pd.DataFrame) else None
    stats = {"rows_read": st.rows_read, "rows_used": rows_dedup, "rows_dropped": dropped, "user_hours": user_hours,
             "cells_used": cells, "engine": "duckdb", "shards": n_shards, "bbox_used": bbox,
             "seconds": {k: round(v, 3) for k, v in timings.items()}}
    return K.assemble(grid=grid, config=config, counts=counts, user_week=user_week, pairs=pairs, stats=stats,
                      user_like=like)


_COLS = (WEEK, ORIGIN, DESTINATION, COUNT, TRIPS, UNIQUE_TRIPS)  # documented output columns
