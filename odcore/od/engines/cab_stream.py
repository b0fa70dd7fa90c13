"""The memory engine on a Cabspotting folder, streamed: groups of cab files on two worker threads (or processes).

Each cab file is one user, so a group of files is a complete set of users: a natural user shard. A worker reads a
group (:func:`odcore.data.traces.read_cab_file`, the loader's parser), applies the loader's filters (missing values,
the box, the dates, the time offset; exact duplicate fixes dropped) and runs the numpy kernel on it
(:func:`odcore.od.engines.memory_stream.run_shard`: hourly cells -> trips -> per-(week, pair) distinct-user counts
and per-user-week figures); the caller sums the groups' counts (exact, as every user is in one group) and joins the
per-user tables (:class:`~odcore.od.engines.memory_stream.ShardMerger`). Each worker holds one group at a time, so
memory holds about ``workers`` groups, never the whole folder; the groups are merged in file order, so the tables
do not depend on ``workers`` or on threads versus processes.

The rules are those of :func:`odcore.data.traces.load_traces` followed by the memory engine, which
``tests/test_peer_od.py`` checks table for table: ``bbox="auto"`` is the robust box of every usable fix's counts
(:class:`~odcore.data.traces.RobustBoxCounts`), and zones not given are fitted to the kept fixes' min/max; for these,
a first pass parses each group once and keeps its raw fixes in temporary files for the later passes.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections import deque
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from odcore.errors import ParameterError, TraceFormatError
from odcore.od.engines import kernel as K

__all__ = ["GROUP_BYTES", "POOLS", "build_od_cabspotting", "cab_groups"]

GROUP_BYTES = 4 << 20
"""Compressed bytes of cab files per group (about 500,000 fixes of gzipped Cabspotting text, 25 cabs: a worker peaks
at about 170 MiB with its imports)."""


def cab_groups(sizes: list[int], group_bytes: int = GROUP_BYTES) -> list[range]:
    """Consecutive runs of files of about ``group_bytes`` bytes each (at least one file per run).

    >>> cab_groups([5, 5, 5, 20, 1], group_bytes=10)
    [range(0, 2), range(2, 3), range(3, 4), range(4, 5)]
    """
    out: list[range] = []
    start, acc = 0, 0
    for i, n in enumerate(sizes):
        if i > start and acc + n > group_bytes:
            out.append(range(start, i))
            start, acc = i, 0
        acc += n
    if start < len(sizes):
        out.append(range(start, len(sizes)))
    return out


_KEPT = ("codes", "t", "lat", "lon", "sizes")   # a group's raw fixes between passes: one .npy file each


@dataclass(frozen=True)
class _Job:
    """One group's work. ``stage``: ``stash`` (parse, keep the raw fixes in the ``keep_file.*.npy`` files, return the robust box's
    counts when ``box_counts``), ``bounds`` (read ``keep_file``, filter, return the kept fixes' min/max) or ``run``
    (parse, or read ``keep_file``; filter, counting the drops; the kernel)."""

    stage: str
    paths: tuple[str, ...]
    first_code: int
    filters: K.Filters
    grid: Any = None
    keep_pairs: bool = False
    keep_file: str | None = None
    box_counts: bool = False


def _read_group(job: _Job) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(user code, Unix seconds, lat, lon, rows per file) of the group's files, concatenated."""
    from odcore.data.traces import read_cab_file

    parts = [read_cab_file(p) for p in job.paths]
    sizes = np.array([len(p[0]) for p in parts], np.int64)
    lat = np.concatenate([p[0] for p in parts]) if parts else np.empty(0)
    lon = np.concatenate([p[1] for p in parts]) if parts else np.empty(0)
    t = np.concatenate([p[2] for p in parts]).astype(np.int64, copy=False) if parts else np.empty(0, np.int64)
    del parts
    codes = np.repeat(np.arange(job.first_code, job.first_code + len(sizes), dtype=np.int64), sizes)
    return codes, t, lat, lon, sizes


def _filter(job: _Job, codes, t, lat, lon, sizes, st: K.PrepStats):
    """The loader's filters (:func:`odcore.data.traces.finalize_traces`) on one group: rows with a missing value,
    outside the box or outside the dates are dropped and counted in ``st`` (:func:`kernel.filter_codes`); a
    coordinate outside [-90, 90] x [-180, 180] raises, naming the file and row. Returns the kept (codes, t, lat, lon)."""
    f = job.filters
    st.rows_read += len(t)
    with np.errstate(invalid="ignore"):
        for arr, col, lim in ((lat, "lat", 90), (lon, "lon", 180)):
            bad = np.abs(arr) > lim
            if bad.any():
                i = int(np.argmax(bad))
                ends = np.cumsum(sizes)
                k = int(np.searchsorted(ends, i, side="right"))
                raise TraceFormatError(f"{col} {arr[i]} is outside [-{lim}, {lim}] (are latitude and longitude "
                                       "swapped?).", file=Path(job.paths[k]).name,
                                       row=int(i - (ends[k] - sizes[k]) + 1), column=col)
    code, t = K.filter_codes(t, (t == K.IMIN) | np.isnan(lat) | np.isnan(lon), lat, lon, f, st)
    keep = code == 0
    if keep.all():
        return codes, t, lat, lon
    idx = np.flatnonzero(keep)
    return codes[idx], t[idx], lat[idx], lon[idx]


def _group_task(job: _Job) -> tuple[Any, K.PrepStats]:
    """One group's stage in a worker: ``(result, stats)``; the result is the box counts (sparse, or None) for
    ``stash``, None for ``bounds`` (the bounds are in the stats) and
    :func:`~odcore.od.engines.memory_stream.run_shard`'s tables for ``run``."""
    import pyarrow as pa

    from odcore.constants import USER
    from odcore.data.traces import RobustBoxCounts
    from odcore.od.engines.memory_stream import run_shard

    st = K.PrepStats()
    if job.stage == "stash" or job.keep_file is None:
        codes, t, lat, lon, sizes = _read_group(job)
    else:
        codes, t, lat, lon, sizes = (np.load(f"{job.keep_file}.{k}.npy") for k in _KEPT)
    if job.stage == "stash":                # plain .npy files: no zip and no checksum to compute (np.savez)
        for k, a in zip(_KEPT, (codes, t, lat, lon, sizes), strict=True):
            np.save(f"{job.keep_file}.{k}.npy", a)
        if not job.box_counts:
            return None, st
        ok = (t != K.IMIN) & ~(np.isnan(lat) | np.isnan(lon))
        axis, band, n = [], [], []            # the group's counts per band, sparse (a dense table is 43 MB)
        for k, b in enumerate(RobustBoxCounts.bins(lat[ok], lon[ok])):
            if len(b):
                lo = int(b.min())
                c = np.bincount(b - lo)
                nz = np.flatnonzero(c)
                axis.append(np.full(len(nz), k, np.int8))
                band.append(nz + lo)
                n.append(c[nz])
        return ((np.concatenate(axis), np.concatenate(band), np.concatenate(n)) if axis else None), st
    codes, t, lat, lon = _filter(job, codes, t, lat, lon, sizes, st)
    if job.stage == "bounds":
        st.bounds.update(lat, lon)
        return None, st
    if job.keep_file is not None:
        for k in _KEPT:
            os.unlink(f"{job.keep_file}.{k}.npy")
    if len(t) == 0:
        return None, st
    tbl = pa.table({USER: codes, K.T_S: t, "lat": lat, "lon": lon})
    del codes, t, lat, lon
    return run_shard(tbl, job.grid, job.filters.tz, job.keep_pairs, st), st


POOLS = ("threads", "processes")


@contextlib.contextmanager
def _pool(workers: int, kind: str):
    """An executor of ``workers`` threads or processes (None for one worker: the groups run in the caller's
    thread); on the way out, jobs not started are cancelled.

    Threads share one interpreter (its imports are counted once) and run at once where the work is: zlib,
    ``pyarrow.csv`` and numpy's sorts release the GIL. Processes are started by ``spawn``: they import what a group
    needs and copy nothing of the parent's memory, and as the parent's own children their CPU time is the
    parent's, as ``getrusage`` and ``time`` report it."""
    if workers <= 1:
        yield None
        return
    if kind == "threads":
        from concurrent.futures import ThreadPoolExecutor

        ex = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="odcore-cabs")
    else:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        ex = ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn"))
    try:
        yield ex
    finally:
        ex.shutdown(wait=True, cancel_futures=True)


def _run_jobs(jobs: list[_Job], pool, workers: int):
    """``_group_task`` of every job, in order, on the ``pool``'s threads or processes (in this thread when None).

    Each worker holds one group at a time, so at most ``workers`` groups are in memory; up to ``2 * workers`` jobs
    are submitted (a queued job is a list of paths, a finished one its small tables), so a worker does not wait
    while the parent merges or while an earlier group finishes."""
    if pool is None:
        for j in jobs:
            yield _group_task(j)
        return
    from concurrent.futures.process import BrokenProcessPool

    pending: deque = deque()
    try:
        for j in jobs:
            pending.append(pool.submit(_group_task, j))
            if len(pending) >= 2 * workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    except BrokenProcessPool:
        raise ParameterError(
            "the worker processes stopped before their work was done: out of memory, or the program calling this "
            "is a script without `if __name__ == '__main__':` (spawned workers import it again). Guard the script, "
            "or pass workers=1.") from None


def build_od_cabspotting(source: str | Path, config, *, grid=None, bbox: Any = None, start: Any = None,
                         end: Any = None, time_offset_s: float = 0.0, keep_pairs: bool = True,
                         workers: int | None = None, pool: str = "threads", group_bytes: int = GROUP_BYTES,
                         temp_dir: str | None = None):
    """Weekly unique OD data of a Cabspotting folder, streamed in groups of cab files on ``workers`` processes.

    The same tables as ``build_od(load_traces(source, format="cabspotting", bbox=bbox, start=start, end=end,
    time_offset_s=time_offset_s, tz=config.tz), config, grid=grid)`` without holding the folder in memory.

    Parameters
    ----------
    source:
        A Cabspotting folder (``new_<cab>.txt[.gz]`` files) or one cab file.
    config:
        :class:`odcore.od.oddata.ODConfig`; its ``tz`` gives the hours and weeks (and reads naive ``start`` /
        ``end``).
    grid:
        Zone object (``assign``, ``n_cells``); default: :func:`odcore.od.engines.kernel.fit_zones` of the kept
        fixes' min/max, as the loader and every engine fit them.
    bbox, start, end, time_offset_s:
        As in :func:`odcore.data.traces.load_traces` (``bbox="auto"``: the robust box).
    keep_pairs:
        Keep every user's unique pairs (``ODData.pairs``).
    workers:
        Worker processes (default: 2, or 1 on one core); 1 runs the groups in this process. The tables do not
        depend on it.
    pool:
        ``threads`` (default: one interpreter, the least memory and CPU) or ``processes`` (``spawn``ed workers,
        which need ``if __name__ == "__main__":`` in a calling script). The tables do not depend on it.
    group_bytes:
        Compressed bytes of cab files per group (memory per worker grows with it).
    temp_dir:
        Where the kept fixes wait between passes when zones are fitted (default: the system's temporary folder).

    Returns
    -------
    odcore.od.oddata.ODData

    Raises
    ------
    TraceFormatError
        A bad file (named with its row and column), no usable row, or fewer than two cabs after the filters.
    """
    from odcore.data.traces import BBox, RobustBoxCounts, cab_files, to_time_ns
    from odcore.od.engines.memory_stream import ShardMerger

    if pool not in POOLS:
        raise ParameterError(f"pool must be one of {list(POOLS)}, got pool={pool!r}.")
    if int(group_bytes) < 1:
        raise ParameterError(f"group_bytes must be >= 1, got group_bytes={group_bytes}.")
    disp, paths, ids = cab_files(source)
    tz = config.tz
    n_workers = int(workers) if workers else max(1, min(2, os.cpu_count() or 1))
    if n_workers < 1:
        raise ParameterError(f"workers must be >= 1, got workers={workers}.")
    sizes = [p.stat().st_size for p in paths]
    groups = cab_groups(sizes, int(group_bytes))
    f = K.Filters(source=disp, tz=tz, time_unit="s", time_offset_s=float(time_offset_s or 0.0), bbox=None,
                  start_ns=None if start is None else to_time_ns(start, tz, "start"),
                  end_ns=None if end is None else to_time_ns(end, tz, "end"))

    auto_box = bbox is not None and isinstance(bbox, str) and bbox.strip().lower() == "auto"
    box = None if bbox is None or auto_box else BBox.parse(bbox).as_tuple()
    st = K.PrepStats()
    n_workers = min(n_workers, len(groups))
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="odcore-cabs-", dir=temp_dir)))
        ex = stack.enter_context(_pool(n_workers, pool))    # shut down before the folder goes
        jobs = [_Job("run", tuple(str(paths[i]) for i in g), g.start, f) for g in groups]
        if auto_box or grid is None:
            # one parse: the raw fixes wait in temporary files for the passes that need the whole folder first
            jobs = [replace(j, stage="stash", keep_file=str(tmp / f"g{k:05d}"), box_counts=auto_box)
                    for k, j in enumerate(jobs)]
            counts = RobustBoxCounts()
            for sp, _ in _run_jobs(jobs, ex, n_workers):
                if sp is not None:
                    counts.add_sparse(*sp)
            if auto_box:
                box = counts.box(source=disp).as_tuple()
        f = replace(f, bbox=box)
        jobs = [replace(j, filters=f) for j in jobs]
        if grid is None:
            bounds = K.Bounds()
            for _, gst in _run_jobs([replace(j, stage="bounds") for j in jobs], ex, n_workers):
                bounds.merge(gst.bounds)
            if bounds.n == 0:
                raise TraceFormatError("no rows left after filtering (no fix inside the box and dates).",
                                       file=disp)
            grid = K.fit_zones(bounds, config)
        run = [replace(j, stage="run", grid=grid, keep_pairs=keep_pairs) for j in jobs]
        merged = ShardMerger(keep_pairs)
        labels = np.asarray(ids, dtype=object)
        for part, gst in _run_jobs(run, ex, n_workers):
            st.merge(gst)
            if part is not None:
                part["labels"] = labels[part["labels"]]
            merged.add(part)
            del part
    if st.slot_min == K.IMIN:
        raise TraceFormatError(f"no rows left after filtering (dropped: {st.dropped}).", file=disp)
    n_users = len(set().union(*(set(a.tolist()) for a in merged.acc["a_user"])))
    if n_users < 2:
        raise TraceFormatError(f"only {n_users} user(s) after loading; weekly OD counts and attacks need at least "
                               "2 users.", file=disp, column="user")
    return merged.result(grid, config, st, bbox=box, n_shards=len(groups))

