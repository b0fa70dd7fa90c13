"""The memory engine on files: streamed, sharded by a hash of the user, one shard in memory at a time.

Instead of loading the whole trace table into pandas (``load_traces``) and running :func:`odcore.od.trips.build_od` on
it, the files are read in Arrow batches (``pyarrow.dataset``: the four columns only, one batch in flight), filtered
like the loader does (:func:`odcore.od.kernel.filter_batch`) and split into user shards by a 64-bit hash of
the user id (numpy over the Arrow buffers: no Python object per id). With several shards each goes to a temporary
Arrow IPC file, so memory holds one batch while reading and one shard (about ``shard_rows`` rows) while computing.
Each shard then gets its zones and hour slots (the shared per-row code) and runs the numpy kernel
(:func:`odcore.od.trips.winners`, :func:`odcore.od.trips.od_tables`) alone; the distinct-user counts of the shards are
summed, which is exact because every user is in exactly one shard. Text user ids are factorised per shard by Arrow
(``dictionary_encode``), so distinct ids never merge, whatever their hashes. With several shards, two ``spawn``ed
worker processes share both passes (each reads part of the files into its own shard files, then computes whole
shards), one shard per worker in memory."""

from __future__ import annotations

import contextlib
import itertools
import math
import multiprocessing as mp
import os
import shutil
import tempfile
from collections import deque
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from odcore.constants import COUNT, DESTINATION, ORIGIN, TRIPS, UNIQUE_TRIPS, USER, WEEK
from odcore.data.traces import DROP_DUPLICATE, BBox, RobustBoxCounts, resolve_mapping, to_time_ns
from odcore.errors import ParameterError, TraceFormatError
from odcore.od import kernel as K
from odcore.od.engines.sources import FileSource
from odcore.od.hourly import od_tables, winners

__all__ = ["CountsSum", "ShardMerger", "build_od_memory_stream", "duplicate_rows", "run_shard", "user_hash"]

BATCH_ROWS = 1_000_000
SHARD_ROWS = 2_000_000
RUN_BATCH_ROWS = 65_536
RUN_CHUNK_ROWS = 250_000
"""Read batches and chunks of whole users of an input grouped by user (:func:`_grouped_by_user`): small, as
nothing else is in memory and the kernel's temporaries of two chunks at a time are its peak."""
_P = np.uint64(0x100000001B3)          # FNV-1a 64-bit prime (used as a polynomial base here)
_mix = K.mix64


def user_hash(user) -> np.ndarray:
    """A 64-bit hash (uint64) of each user id of an Arrow array (integers or text), vectorised.

    Integers: splitmix64 of the value. Text: a polynomial hash of the UTF-8 bytes read straight from the Arrow
    buffers, then splitmix64. Only used to pick a shard; ids are compared exactly within a shard.
    """
    if isinstance(user, pa.ChunkedArray):
        user = user.combine_chunks()
    if pa.types.is_integer(user.type):
        return _mix(user.to_numpy(zero_copy_only=False).astype(np.int64).view(np.uint64))
    if pa.types.is_dictionary(user.type):
        user = user.cast(user.type.value_type)
    if not (pa.types.is_string(user.type) or pa.types.is_large_string(user.type)):
        user = pc.cast(user, pa.string())
    user = user.cast(pa.large_string())
    n = len(user)
    bufs = user.buffers()
    offs = np.frombuffer(bufs[1], dtype=np.int64)[user.offset:user.offset + n + 1]
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    lo, hi = int(offs[0]), int(offs[-1])
    seg = data[lo:hi].astype(np.uint64)
    lens = np.diff(offs)
    out = lens.astype(np.uint64)                      # empty strings hash to their length (0)
    if seg.size:
        # h = sum(byte_i * P^(len-1-i)) mod 2^64: powers by position from each string's end
        end = np.repeat(offs[1:] - lo, lens)
        pos_from_end = end - np.arange(seg.size) - 1
        maxlen = int(lens.max())
        pw = np.ones(maxlen, dtype=np.uint64)
        with np.errstate(over="ignore"):
            for i in range(1, maxlen):
                pw[i] = pw[i - 1] * _P
            vals = seg * pw[pos_from_end] + np.uint64(1)
        nz = lens > 0
        starts = (offs[:-1] - lo)[nz]
        with np.errstate(over="ignore"):
            out[nz] += np.add.reduceat(vals, starts)
    return _mix(out)


class _Reader:
    """Arrow batches (user, time, lat, lon) of a FileSource with the loader's column mapping.

    Only the four columns are read (projection), one batch at a time (no read-ahead: pyarrow's default keeps 16
    batches and 4 files in flight, about 1 GiB more at a million rows per batch).
    """

    def __init__(self, src: FileSource, batch_rows: int):
        try:
            self.ds = ds.dataset(list(src.paths), format="parquet" if src.format == "parquet" else "csv")
        except Exception as exc:  # pyarrow raises several types for unreadable files
            raise TraceFormatError(f"cannot read as {src.format} ({type(exc).__name__}: {exc}).",
                                   file=src.display) from None
        mp = resolve_mapping(list(self.ds.schema.names), dict(src.mapping) if src.mapping else None, src.display)
        self.cols = [mp.user, mp.time, mp.lat, mp.lon]
        self.time_unit = mp.time_unit or "auto"
        self.batch_rows = batch_rows
        self.src = src

    def count(self) -> int:
        return int(self.ds.count_rows())

    def batches(self):
        yield from _ScanJob(tuple(self.ds.get_fragments()), self.ds.schema, tuple(self.cols), self.batch_rows,
                            self.src.display).batches()

    def jobs(self, n: int) -> list[_ScanJob]:
        """The source split into ``n`` scans of about as many rows (contiguous pieces in file order: a Parquet file's
        row groups, or whole CSV files), for ``n`` worker processes."""
        pieces, sizes = [], []
        for frag in self.ds.get_fragments():
            if hasattr(frag, "split_by_row_group"):
                for g in frag.split_by_row_group():
                    pieces.append(g)
                    sizes.append(sum(rg.num_rows for rg in g.row_groups))
            else:
                pieces.append(frag)
                try:
                    sizes.append(Path(frag.path).stat().st_size)
                except OSError:
                    sizes.append(1)
        ends = np.cumsum(sizes, dtype=np.float64)
        cut = np.searchsorted(ends, ends[-1] * np.arange(1, n) / n, side="left") + 1 if len(ends) else []
        bounds = [0, *(int(c) for c in cut), len(pieces)]
        return [_ScanJob(tuple(pieces[a:b]), self.ds.schema, tuple(self.cols), self.batch_rows, self.src.display)
                for a, b in itertools.pairwise(bounds) if b > a]


class _ScanJob:
    """Some pieces of a source (Parquet row groups or files: pyarrow fragments, which pickle) and how to read them:
    what a worker process needs to stream its part of the files."""

    def __init__(self, pieces: tuple, schema, cols: tuple[str, ...], batch_rows: int, display: str) -> None:
        self.pieces, self.schema, self.cols, self.batch_rows, self.display = pieces, schema, cols, batch_rows, display

    def batches(self):
        """(user Arrow array, time, lat, lon) of every non-empty batch, one batch in flight; the time a pandas Series,
        or the Arrow array of a zone-aware timestamp column (:func:`odcore.od.kernel.filter_batch` reads both)."""
        # Parquet without pre-buffering: the reader fetches each column chunk as it decodes it rather than a whole
        # row group's ranges ahead (about 100 MiB less at the peak for a few % more CPU)
        no_prebuffer = {"fragment_scan_options": ds.ParquetFragmentScanOptions(pre_buffer=False)}
        for frag in self.pieces:
            for b in frag.to_batches(schema=self.schema, columns=list(self.cols), batch_size=self.batch_rows,
                                     batch_readahead=1, fragment_readahead=1,
                                     **(no_prebuffer if isinstance(frag, ds.ParquetFileFragment) else {})):
                if b.num_rows == 0:
                    continue
                try:
                    lat = pc.cast(b.column(2), pa.float64()).to_numpy(zero_copy_only=False)
                    lon = pc.cast(b.column(3), pa.float64()).to_numpy(zero_copy_only=False)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                    raise TraceFormatError("a coordinate is not a number.", file=self.display) from None
                tm = b.column(1)     # zone-aware timestamps stay Arrow (UTC instants, read in numpy); others: pandas
                yield (b.column(0), tm if K.is_zoned_arrow_time(tm) else tm.to_pandas(), np.asarray(lat, np.float64),
                       np.asarray(lon, np.float64))


def _user_array(user):
    """One Arrow array of user ids: integers as int64, text and uint64 as large_string (one type for every batch)."""
    if isinstance(user, pa.ChunkedArray):
        user = user.combine_chunks()
    if pa.types.is_dictionary(user.type):
        user = user.cast(user.type.value_type)
    if pa.types.is_integer(user.type) and user.type != pa.uint64():
        return user.cast(pa.int64())
    return user.cast(pa.large_string())   # text, and unsigned 64-bit ids (beyond int64 from 2**63)


class _Shards:
    """The kept rows (user, t, lat, lon) split by a hash of the user: one shard in memory, or several in temporary
    Arrow IPC files (one per shard, appended batch by batch), so that only one shard is ever in memory."""

    def __init__(self, n_shards: int, temp_dir: str | None, folder: Path | None = None, prefix: str = ""):
        self.n = n_shards
        self.mem: list = []
        self.dir = None
        self.own_dir = folder is None
        self.prefix = prefix
        self.writers: dict[int, Any] = {}
        if folder is not None:
            self.dir = Path(folder)
        elif n_shards > 1:
            self.dir = Path(tempfile.mkdtemp(prefix="odcore-memory-", dir=temp_dir))

    def path(self, k: int) -> Path:
        return self.dir / f"{self.prefix}s{k:05d}.arrows"

    def append(self, batch) -> None:
        if self.n == 1:
            self.mem.append(batch)
            return
        sh = user_hash(batch.column(0)) % np.uint64(self.n)
        # small shard ids: a stable sort of 16-bit keys is numpy's radix sort (linear), not a merge sort
        sh = sh.astype(np.uint16 if self.n <= 2**16 else np.int64)
        order = np.argsort(sh, kind="stable")
        bounds = np.r_[0, np.cumsum(np.bincount(sh, minlength=self.n))]
        for k in np.flatnonzero(np.diff(bounds)):
            part = batch.take(pa.array(order[bounds[k]:bounds[k + 1]]))
            w = self.writers.get(k)
            if w is None:
                w = self.writers[k] = pa.ipc.new_stream(str(self.path(k)), part.schema)
            w.write_batch(part)

    def tables(self):
        """Yield each non-empty shard as an Arrow table (its file is deleted once read)."""
        if self.n == 1:
            if self.mem:
                tbl = pa.Table.from_batches(self.mem)
                self.mem = []
                yield tbl
            return
        for k in self.finish():
            yield read_shard([self.path(k)])

    def finish(self) -> list[int]:
        """Close the shard files; the shards written (non-empty), in order."""
        for w in self.writers.values():
            w.close()
        return sorted(self.writers)

    def close(self) -> None:
        for w in self.writers.values():
            try:
                w.close()
            except Exception:  # already closed
                pass
        if self.dir is not None and self.own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)


def read_shard(paths) -> Any:
    """One shard as an Arrow table from its IPC stream files (in order; each deleted once read)."""
    tables = []
    for path in paths:
        with pa.OSFile(str(path), "rb") as f:
            tables.append(pa.ipc.open_stream(f).read_all())
        Path(path).unlink()
    return tables[0] if len(tables) == 1 else pa.concat_tables(tables)


def scatter(batches, f: K.Filters, shards: _Shards, st: K.PrepStats) -> None:
    """Filter every batch of ``batches`` (``_ScanJob.batches`` items) like the loader, keep the kept rows' bounds in
    ``st`` and append them (user, t, lat, lon) to their user's shard."""
    for user, time_, lat, lon in batches:
        code, t = K.filter_batch(user, time_, lat, lon, f, st)
        idx = np.flatnonzero(code == 0)
        if idx.size == 0:
            continue
        lat, lon = lat[idx], lon[idx]
        st.bounds.update(lat, lon)      # the zones, when not given, come from the kept rows' min/max
        st.kept_times(t[idx])
        u = _user_array(user)
        if idx.size < len(code):
            u = u.take(pa.array(idx))
        shards.append(pa.record_batch([u, pa.array(t[idx]), pa.array(lat), pa.array(lon)],
                                      names=[USER, K.T_S, "lat", "lon"]))
        del u, code, t, lat, lon, idx


class CountsSum:
    """Running sum of the shards' distinct-user counts by (week, origin, destination), compacted as it grows
    (each shard repeats most pairs, so the pending rows are summed whenever they outgrow the running table).

    A compaction packs (week, origin, destination) into one int64 key and sorts the keys with a stable sort, which
    finds the sorted runs that the running table and each shard's counts already are (a merge, not a full sort), then
    sums the runs of equal keys."""

    def __init__(self, min_rows: int = 1_000_000) -> None:
        self.min_rows = min_rows
        self.total: tuple[np.ndarray, ...] | None = None
        self.pending: list[tuple[np.ndarray, ...]] = []
        self.n_pending = 0

    def add(self, week, o, d, n) -> None:
        self.pending.append(tuple(np.asarray(a, dtype=np.int64) for a in (week, o, d, n)))
        self.n_pending += len(week)
        if self.n_pending > max(self.min_rows, 0 if self.total is None else len(self.total[0])):
            self._compact()

    def _compact(self) -> None:
        parts = ([] if self.total is None else [self.total]) + self.pending
        self.pending, self.n_pending = [], 0
        if not parts:
            return
        w, o, d, n = (np.concatenate([p[i] for p in parts]) for i in range(4))
        if len(w) == 0:
            self.total = (w, o, d, n)
            return
        w0 = int(w.min())
        side = int(max(o.max(), d.max())) + 1
        if (int(w.max()) - w0 + 1) * side * side >= 2**62:       # no room for one key: sort the three columns
            order = np.lexsort((d, o, w))
            w, o, d, n = w[order], o[order], d[order], n[order]
            new = np.r_[True, (w[1:] != w[:-1]) | (o[1:] != o[:-1]) | (d[1:] != d[:-1])]
        else:
            key = ((w - w0) * side + o) * side + d
            order = np.argsort(key, kind="stable")
            key, n = key[order], n[order]
            new = np.r_[True, key[1:] != key[:-1]]
            w, o, d = w[order], o[order], d[order]
        starts = np.flatnonzero(new)
        self.total = (w[starts], o[starts], d[starts], np.add.reduceat(n, starts))

    def result(self) -> pd.DataFrame:
        self._compact()
        if self.total is None:
            return pd.DataFrame({c: np.empty(0, np.int64) for c in (WEEK, ORIGIN, DESTINATION, COUNT)})
        return pd.DataFrame(dict(zip((WEEK, ORIGIN, DESTINATION, COUNT), self.total, strict=True)))


POOLS = ("auto", "threads", "processes")


def build_od_memory_stream(src: FileSource, config, *, grid=None, keep_pairs: bool = True,
                           shard_rows: int = SHARD_ROWS, batch_rows: int = BATCH_ROWS, temp_dir: str | None = None,
                           workers: int | None = None, pool: str = "auto"):
    """Weekly unique OD data of Parquet/CSV files with the numpy kernel, streamed and sharded by user.

    Same filters, duplicate removal, zones and tables as :func:`odcore.data.traces.load_traces` followed by
    :func:`odcore.od.trips.build_od` (``bbox="auto"``: the robust box of every usable row's counts,
    :func:`odcore.od.kernel.box_counts_batch`, the same in every engine). One pass reads the files (the
    robust box needs one more): rows are filtered, their bounding box kept for the zones, and they go to the shard
    of their user's hash; then each shard (about ``shard_rows`` rows; in temporary files under ``temp_dir`` when
    there are several) gets its zones and hour slots and runs the numpy kernel alone, and the shards' counts are
    summed.

    Shards are independent (a user is in one shard), and so are the parts of the files, so ``workers`` (default:
    2, or 1 on one core) share both passes. ``pool="processes"`` (the default, ``"auto"``, when there are several
    shards and workers): ``spawn``ed worker processes each read a contiguous part of the files (Parquet row groups,
    or whole CSV files) and write their own shard files, then each computes whole shards, which come back as their
    small tables; the process holding the result merges them as they come. ``"threads"``: one process reads, and
    the shards run on ``workers`` threads (numpy releases the GIL on whole arrays, the Python between its calls
    does not). At most ``workers`` shards are in memory at a time, and their results are merged in shard order,
    so the tables depend on neither ``workers`` nor ``pool``.

    The result's ``stats`` also say what :func:`odcore.data.traces.load_traces` would report of the input:
    ``rows_dropped`` by reason in the loader's order (missing value, box, dates, exact duplicates), then the zones';
    ``traces`` (the kept fixes' ``rows``, ``users``, ``time_min``, ``time_max``, ``lat_range``, ``lon_range`` and
    ``outside_zones``); ``loader_drops`` (the duplicates) and ``rows_adjusted`` (naive times read by a
    daylight-saving rule or next to times with offsets).
    """
    if pool not in POOLS:
        raise ValueError(f"pool must be one of {list(POOLS)}, got pool={pool!r}.")
    rd = _Reader(src, batch_rows)
    n_rows = rd.count()
    n_shards = max(1, math.ceil(n_rows / max(1, int(shard_rows))))
    n_workers = int(workers) if workers else max(1, min(2, os.cpu_count() or 1))
    jobs = rd.jobs(n_workers) if n_workers > 1 and pool != "threads" and (n_shards > 1 or pool == "processes") \
        else []
    with _process_pool(len(jobs)) as ex:
        bbox = None
        if src.bbox is not None:
            if isinstance(src.bbox, str) and src.bbox.strip().lower() == "auto":
                if ex is None:
                    counts = None
                    for user, time_, lat, lon in rd.batches():
                        counts = K.box_counts_batch(user, time_, lat, lon, counts)
                else:
                    counts = RobustBoxCounts()
                    for sp in ordered_results(ex, _box_task, jobs, len(jobs)):
                        counts.add_sparse(*sp)
                bbox = K.robust_bbox(counts, src.display)
            else:
                bbox = BBox.parse(src.bbox).as_tuple()
        f = K.Filters(source=src.display, tz=src.tz, time_unit=rd.time_unit, time_offset_s=src.time_offset_s,
                      bbox=bbox, start_ns=None if src.start is None else to_time_ns(src.start, src.tz, "start"),
                      end_ns=None if src.end is None else to_time_ns(src.end, src.tz, "end"))
        if pool == "auto":
            st = K.PrepStats()
            if grid is None:   # the zones of the kept rows' min/max, before the kernel needs them
                for user, time_, lat, lon in rd.batches():
                    st.bounds.update(*K.kept_points(user, time_, lat, lon, f))
                if st.bounds.n == 0:
                    raise TraceFormatError("no trace row falls inside the grid.", file=src.display)
                grid = K.fit_zones(st.bounds, config)
                st = K.PrepStats()
            try:
                od = _grouped_by_user(_Reader(src, min(batch_rows, RUN_BATCH_ROWS)), f, grid, config, keep_pairs,
                                      min(shard_rows, RUN_CHUNK_ROWS), n_workers, st, bbox)
            except _NotGrouped:
                od = None
            if od is not None:
                return od
        shards = _Shards(n_shards, temp_dir)
        st = K.PrepStats()
        try:
            if ex is None:
                scatter(rd.batches(), f, shards, st)
                pa.default_memory_pool().release_unused()
                written: dict[int, list[Path]] = {}
            else:
                written = {}
                for j, (wst, ks) in enumerate(ordered_results(ex, _scatter_task, [
                        (job, f, n_shards, str(shards.dir), f"w{j}_") for j, job in enumerate(jobs)], len(jobs))):
                    st.merge(wst)
                    for k in ks:
                        written.setdefault(k, []).append(shards.dir / f"w{j}_s{k:05d}.arrows")
            if st.bounds.n == 0:
                raise TraceFormatError("no trace row falls inside the grid.", file=src.display)
            if grid is None:
                grid = K.fit_zones(st.bounds, config)
            merged = ShardMerger(keep_pairs)
            if ex is None:
                results = _in_parallel(shards.tables(),
                                       lambda tbl: _run_shard_alone(tbl, grid, config.tz, keep_pairs), n_workers)
            else:
                results = ordered_results(ex, _shard_task, [(written[k], grid, config.tz, keep_pairs)
                                                     for k in sorted(written)], 2 * len(jobs))
            for part, shard_st in results:
                st.merge(shard_st)
                merged.add(part)
                del part
        finally:
            shards.close()
    if st.slot_min == K.IMIN:
        raise TraceFormatError("no trace row falls inside the grid.", file=src.display)
    od = merged.result(grid, config, st, bbox=bbox, n_shards=n_shards)
    return replace(od, stats={**od.stats, "pool": "threads" if ex is None else "processes",
                              "workers": n_workers if ex is None else len(jobs)})


class _NotGrouped(Exception):
    """A user's rows are not in one run of consecutive rows: the input needs the user shards."""


def _user_runs(u) -> tuple[np.ndarray, Any]:
    """Start of every run of equal consecutive user ids of an Arrow array (nulls: one run each), and the run's ids
    (Arrow)."""

    if len(u) < 2:
        return np.zeros(min(len(u), 1), np.int64), u.slice(0, 1)
    change = pc.fill_null(pc.not_equal(u.slice(1), u.slice(0, len(u) - 1)), True)
    starts = np.r_[0, np.flatnonzero(change.to_numpy(zero_copy_only=False)) + 1]
    return starts, u.take(pa.array(starts))


def _grouped_chunks(batches, f: K.Filters, st: K.PrepStats, shard_rows: int, seen: list):
    """The kept rows of ``batches`` in chunks of whole users of about ``shard_rows`` rows, cut where the user
    changes, each user as an integer code (its run's number; its id is ``seen``'s entry of that number).

    Raises :class:`_NotGrouped` as soon as a batch shows a user's rows split in two runs; ``seen`` receives every
    run's id, so that the caller checks the runs across batches."""

    pending: list = []
    n_pending = 0
    last = None
    n_runs = 0
    for user, time_, lat, lon in batches:
        code, t = K.filter_batch(user, time_, lat, lon, f, st)
        u = _user_array(user)
        if u.null_count:          # a missing id (a dropped row) inside a user's run does not end the run
            u = pc.fill_null_forward(u)
        starts, ids = _user_runs(u)
        if not len(ids):
            continue
        go_on = last is not None and ids[0].as_py() == last and ids[0].is_valid
        new_ids = ids.slice(1) if go_on else ids
        valid = new_ids.drop_null()
        if len(valid) != len(valid.unique()):
            raise _NotGrouped
        seen.append(new_ids)
        first = n_runs - 1 if go_on else n_runs
        n_runs = first + len(ids)
        last = ids[len(ids) - 1].as_py()
        codes = np.repeat(np.arange(first, n_runs, dtype=np.int64), np.diff(np.r_[starts, len(u)]))
        del u, ids, new_ids
        idx = np.flatnonzero(code == 0)
        if idx.size == 0:
            continue
        if idx.size < len(code):
            codes, t, lat, lon = codes[idx], t[idx], lat[idx], lon[idx]
        st.bounds.update(lat, lon)
        st.kept_times(t)
        pending.append(pa.record_batch([pa.array(codes), pa.array(t), pa.array(lat), pa.array(lon)],
                                       names=[USER, K.T_S, "lat", "lon"]))
        n_pending += len(codes)
        if n_pending >= shard_rows:     # cut before this batch's last user (its rows may go on)
            cut = int(np.searchsorted(codes, codes[-1]))
            if cut > 0:
                tail = pending[-1]
                pending[-1] = tail.slice(0, cut)
                yield pa.Table.from_batches(pending)
                pending, n_pending = [tail.slice(cut)], len(tail) - cut
        del code, codes, t, lat, lon, idx
    if pending:
        yield pa.Table.from_batches(pending)


def _grouped_by_user(rd: _Reader, f: K.Filters, grid, config, keep_pairs: bool, shard_rows: int, n_workers: int,
                     st: K.PrepStats, bbox):
    """The memory engine on an input whose users each come in one run of consecutive rows (files written sorted
    or grouped by user, as most exports are): chunks of whole users are the shards, so no row is hashed, split or
    written to a temporary file, and no text id is copied. One reading thread filters the batches and cuts the
    chunks; ``n_workers`` threads run the kernel on them. Raises :class:`_NotGrouped` when a user's rows turn out
    to be split (the caller then shards by a hash of the user; nothing of this pass is kept)."""

    seen: list = []
    merged = ShardMerger(keep_pairs)
    n_chunks = 0
    for part, shard_st in _in_parallel(_grouped_chunks(rd.batches(), f, st, shard_rows, seen),
                                       lambda tbl: _run_shard_alone(tbl, grid, config.tz, keep_pairs), n_workers):
        st.merge(shard_st)
        merged.add(part)
        n_chunks += 1
        del part
    ids = pa.chunked_array(seen, type=seen[0].type) if seen else pa.chunked_array([], pa.int64())
    valid = ids.drop_null()
    if pc.count_distinct(valid).as_py() != len(valid):
        raise _NotGrouped
    if st.slot_min == K.IMIN:
        raise TraceFormatError("no trace row falls inside the grid.", file=rd.src.display)
    merged.relabel(ids.to_numpy())

    od = merged.result(grid, config, st, bbox=bbox, n_shards=n_chunks)
    return replace(od, stats={**od.stats, "pool": "user runs", "workers": n_workers})


@contextlib.contextmanager
def _process_pool(workers: int):
    """``workers`` ``spawn``ed processes (None for fewer than two: the work runs in this process). Spawned
    workers import what a task needs and copy nothing of the parent's memory; as the parent's children their CPU
    time is the parent's, as ``getrusage`` and ``time`` report it."""
    if workers <= 1:
        yield None
        return
    ex = ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn"))
    try:
        yield ex
    finally:
        ex.shutdown(wait=True, cancel_futures=True)


def ordered_results(ex, fn, items, in_flight: int, advice: str = "or pass workers=1 or pool='threads'"):
    """``fn`` of every item on the pool ``ex``, in the items' order, at most ``in_flight`` submitted at a time; a
    process pool that breaks (a worker killed, or a script that spawned workers import again) gives a clear error
    ending in ``advice``."""
    pending: deque = deque()
    try:
        for x in items:
            pending.append(ex.submit(fn, x))
            if len(pending) >= in_flight:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    except BrokenProcessPool:
        raise ParameterError(
            "the worker processes stopped before their work was done: out of memory, or the program calling this "
            f"is a script without `if __name__ == '__main__':` (spawned workers import it again). Guard the script, "
            f"{advice}.") from None


def _box_task(job: _ScanJob):
    """The robust box's counts of one part of the files, as sparse (axis, band, count) arrays."""
    counts = None
    for user, time_, lat, lon in job.batches():
        counts = K.box_counts_batch(user, time_, lat, lon, counts)
    if counts is None:
        return np.empty(0, np.int8), np.empty(0, np.int64), np.empty(0, np.int64)
    return counts.sparse()


def _scatter_task(args) -> tuple[K.PrepStats, list[int]]:
    """One part of the files filtered and written to its own shard files (``<prefix>s<k>.arrows`` in the shared
    folder): what was read and dropped, and which shards it wrote."""
    job, f, n_shards, folder, prefix = args
    st = K.PrepStats()
    shards = _Shards(n_shards, None, folder=Path(folder), prefix=prefix)
    try:
        scatter(job.batches(), f, shards, st)
        return st, shards.finish()
    finally:
        shards.close()
        pa.default_memory_pool().release_unused()


def _shard_task(args) -> tuple[dict[str, Any] | None, K.PrepStats]:
    """One shard, read from its files (one per part of the files), through :func:`run_shard`."""
    paths, grid, tz, keep_pairs = args
    return _run_shard_alone(read_shard(paths), grid, tz, keep_pairs)


class ShardMerger:
    """The tables of user shards (:func:`run_shard` outputs, added in shard order) merged into one
    :class:`~odcore.od.oddata.ODData`: distinct-user counts summed (exact: a user is in one shard), per-user tables
    concatenated with each shard's user labels."""

    def __init__(self, keep_pairs: bool) -> None:
        self.keep_pairs = keep_pairs
        self.counts = CountsSum()
        self.acc: dict[str, list] = {k: [] for k in ("a_week", "a_user", "trips", "uniq", "used_cells", "p_week",
                                                      "p_user", "p_o", "p_d")}
        self.rows_used = self.user_hours = self.dups = self.users = 0
        self.cell_points = None

    def add(self, part: dict[str, Any] | None) -> None:
        if part is None:
            return
        self.rows_used += part["rows"]
        self.user_hours += part["user_hours"]
        self.dups += part["dups"]
        self.users += len(part["labels"])
        if "cell_points" in part:
            cp = part["cell_points"]
            self.cell_points = cp if self.cell_points is None else self.cell_points + cp
        self.counts.add(part["c_week"], part["c_o"], part["c_d"], part["c_n"])
        labels = part["labels"]
        for k in ("a_week", "trips", "uniq", "used_cells") + (("p_week", "p_o", "p_d") if self.keep_pairs else ()):
            self.acc[k].append(part[k])
        self.acc["a_user"].append(labels[part["a_user"]])
        if self.keep_pairs:
            self.acc["p_user"].append(labels[part["p_user"]])

    def relabel(self, ids: np.ndarray) -> None:
        """Users given as integer codes (positions in ``ids``) take their ids."""
        for k in ("a_user", "p_user"):
            self.acc[k] = [ids[c] for c in self.acc[k]]

    def result(self, grid, config, st: K.PrepStats, *, bbox, n_shards: int, engine: str = "memory"):
        if self.cell_points is not None:
            od = _merge(self.acc, self.counts.result(), grid, config, st, self.dups, self.rows_used, self.user_hours,
                        bbox, n_shards, self.keep_pairs, engine, self.users)
            return replace(od, stats={**od.stats, "cell_points": self.cell_points})
        return _merge(self.acc, self.counts.result(), grid, config, st, self.dups, self.rows_used, self.user_hours,
                      bbox, n_shards, self.keep_pairs, engine, self.users)


def _run_shard_alone(tbl, grid, tz: str, keep_pairs: bool) -> tuple[dict[str, Any] | None, K.PrepStats]:
    """:func:`run_shard` with its own :class:`~odcore.od.kernel.PrepStats` (merged by the caller, in order)."""
    st = K.PrepStats()
    return run_shard(tbl, grid, tz, keep_pairs, st), st


def _in_parallel(items, fn, workers: int):
    """``fn`` of every item, in the items' order, with at most ``workers`` items taken from the iterator and
    running at a time (bounded memory)."""
    if workers <= 1:
        for x in items:
            yield fn(x)
        return
    with ThreadPoolExecutor(workers) as ex:
        pending: deque = deque()
        for x in items:
            pending.append(ex.submit(fn, x))
            del x
            if len(pending) >= workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def run_shard(tbl, grid, tz: str, keep_pairs: bool, st: K.PrepStats, cell_points: bool = False) -> dict[str, Any] | None:
    """Zones, hour slots, duplicate removal and the numpy kernel on one user shard (an Arrow table).

    ``cell_points``: also count the rows (duplicates dropped) in each zone (``out["cell_points"]``, one count per
    zone of ``grid``), the figure of a map of where the traces are."""
    def col(name, dtype):
        c = tbl.column(name)
        return np.concatenate([x.to_numpy(zero_copy_only=False) for x in c.chunks]).astype(dtype, copy=False) \
            if c.num_chunks != 1 else c.chunk(0).to_numpy(zero_copy_only=False).astype(dtype, copy=False)

    t = col(K.T_S, np.int64)
    lat = col("lat", np.float64)
    lon = col("lon", np.float64)
    users = tbl.column(USER).combine_chunks()
    if len(t) == 0:
        return None
    if pa.types.is_integer(users.type):
        u = users.to_numpy(zero_copy_only=False)
        step = u[1:] != u[:-1]
        if len(u) and bool((u[1:] >= u[:-1]).all()):      # already grouped in order (a cab file after another)
            labels = u[np.r_[0, np.flatnonzero(step) + 1]]
            codes = np.r_[0, np.cumsum(step, dtype=np.int64)]
        else:
            labels, codes = np.unique(u, return_inverse=True)
            codes = codes.astype(np.int64).ravel()
        del u, step
    else:
        enc = users.dictionary_encode()
        d = enc.dictionary.to_numpy(zero_copy_only=False).astype(object)
        order = np.argsort(d.astype(str), kind="stable")
        rank = np.empty(len(order), np.int64)
        rank[order] = np.arange(len(order))
        codes = rank[enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)]
        labels = d[order]
    del users
    # duplicates first, then the zones: the loader drops exact duplicates before build_od drops rows outside the
    # zones, so each reason counts the same rows as there
    dup = duplicate_rows(codes, t, lat, lon, len(labels))
    n_dup = int(dup.sum())
    if n_dup:
        keep = ~dup
        codes, t, lat, lon = codes[keep], t[keep], lat[keep], lon[keep]
    del dup
    ok, slot, cell = K.assign_batch(grid, lat, lon, t, tz, st)
    del t, lat, lon
    points = np.bincount(cell[ok], minlength=grid.n_cells) if cell_points else None
    if not ok.all():
        keep = np.flatnonzero(ok)
        codes, slot, cell = codes[keep], slot[keep], cell[keep]
    if len(codes) == 0:
        return None
    n_rows = len(codes)
    w = winners(codes, slot, cell, len(labels), grid.n_cells, tz)
    del codes, slot, cell
    tb = od_tables(w["wu"], w["ws"], w["wc"], w["wweek"], w["n_users"], grid.n_cells)
    del w
    out = {"labels": labels, "dups": n_dup, "rows": n_rows, **tb}
    if points is not None:
        out["cell_points"] = points
    if not keep_pairs:
        for key in ("p_week", "p_user", "p_o", "p_d"):
            out.pop(key)
    return out


def duplicate_rows(codes: np.ndarray, t: np.ndarray, lat: np.ndarray, lon: np.ndarray, n_users: int) -> np.ndarray:
    """Mask of exact duplicate rows (same user, time, lat, lon; the first one of each group is kept).

    Rows are grouped by one int64 key (user, time), no sort when already in that order (files usually are);
    only rows sharing a key with a neighbour are compared on their coordinates.
    """
    n = len(t)
    dup = np.zeros(n, bool)
    if n < 2:
        return dup
    tmin = int(t.min())
    span = int(t.max()) - tmin + 1
    if n_users * span < 2**62:
        key = codes * span + (t - tmin)
        order = None if bool((key[1:] >= key[:-1]).all()) else np.argsort(key, kind="stable")
        ks = key if order is None else key[order]
        del key
    else:
        order = np.lexsort((t, codes))
        ks = None
    if ks is not None:
        same = ks[1:] == ks[:-1]
    else:
        same = (codes[order[1:]] == codes[order[:-1]]) & (t[order[1:]] == t[order[:-1]])
    if not same.any():
        return dup
    grp = np.zeros(n, bool)
    grp[1:] |= same
    grp[:-1] |= same
    cand = np.flatnonzero(grp)
    rows = cand if order is None else order[cand]
    kk = ks[cand] if ks is not None else np.cumsum(np.r_[True, ~same])[cand]
    d = pd.DataFrame({"k": kk, "a": lat[rows], "o": lon[rows]}).duplicated().to_numpy()
    dup[rows[d]] = True
    return dup


def _merge(acc: dict[str, list], counts: pd.DataFrame, grid, config, st: K.PrepStats, n_dup: int, rows_used: int,
           user_hours: int, bbox, n_shards: int, keep_pairs: bool, engine: str = "memory", users: int = 0):
    user_week = pd.DataFrame({WEEK: np.concatenate(acc["a_week"]), USER: np.concatenate(acc["a_user"]),
                              TRIPS: np.concatenate(acc["trips"]), UNIQUE_TRIPS: np.concatenate(acc["uniq"])})
    pairs = None
    if keep_pairs:
        pairs = pd.DataFrame({WEEK: np.concatenate(acc["p_week"]), USER: np.concatenate(acc["p_user"]),
                              ORIGIN: np.concatenate(acc["p_o"]), DESTINATION: np.concatenate(acc["p_d"])})
    # the loader's reasons in the loader's order (missing, box, dates, duplicates), then the zones'
    loader_codes = (*K.DROP_CODES[:3], DROP_DUPLICATE)
    dropped = {k: st.dropped[k] for k in K.DROP_CODES[:3] if st.dropped.get(k)}
    if n_dup:
        dropped[DROP_DUPLICATE] = n_dup
    dropped.update({k: v for k, v in st.dropped.items() if k not in loader_codes and v})
    kept = st.rows_read - sum(v for k, v in dropped.items() if k in loader_codes)
    b = st.bounds
    # what the loader's table would hold (every filter and duplicate removal applied, the zones not)
    traces = {"rows": kept, "users": users, "outside_zones": sum(v for k, v in dropped.items() if k not in loader_codes),
              "time_min": None if st.t_min == K.IMIN else K.iso_second(st.t_min),
              "time_max": None if st.t_max == K.IMIN else K.iso_second(st.t_max),
              "lat_range": [b.lat_min, b.lat_max] if kept else None,
              "lon_range": [b.lon_min, b.lon_max] if kept else None}
    stats = {"rows_read": st.rows_read, "rows_used": rows_used, "rows_dropped": dropped, "user_hours": user_hours,
             "cells_used": np.unique(np.concatenate(acc["used_cells"])), "engine": engine, "shards": n_shards,
             "bbox_used": bbox, "traces": traces, "loader_drops": {DROP_DUPLICATE: n_dup} if n_dup else {},
             "rows_adjusted": {k: v for k, v in st.adjusted.items() if v}}
    return K.assemble(grid=grid, config=config, counts=counts, user_week=user_week, pairs=pairs, stats=stats)
