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
``tests/benchmarks/test_peer_od.py`` checks table for table: ``bbox="auto"`` is the robust box of every usable fix's counts
(:class:`~odcore.data.traces.RobustBoxCounts`), and zones not given are fitted to the kept fixes' min/max; for these,
a first pass parses each group once and keeps its raw fixes in temporary files for the later passes (or in
``keep_dir``, for later calls on the same files). ``region`` follows the loader too: the cabs' home cells are found
group by group (:func:`odcore.data.regions.home_cells`, a cab being in one group).

Besides the tables, the result carries what loading would have reported (``stats["load_report"]``: rows read and
kept, drops by reason, box, regions; ``stats["traces"]``: the kept fixes' cabs, rows, first and last time and
extent; optionally the release record's fingerprint of the table of fixes), so every entry point can stream a
folder and still show the same report: :func:`stream_cabspotting` returns them as a :class:`StreamedTraces` (the
table itself read only if asked for), used by the command line (``odcore.cli.common.cabs_from_args``) and the
dashboard's upload (``odapp.data.loading.stream_upload``).
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing as mp
import os
import tempfile
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from odcore.constants import FORMAT_TZ, USER
from odcore.data.fingerprint import TraceFingerprint, row_hashes
from odcore.data.regions import home_cells, pick_region, regions_of_homes, spans_metro
from odcore.data.traces import (
    DROP_BBOX,
    DROP_DATES,
    DROP_DUPLICATE,
    DROP_MISSING,
    BBox,
    LoadReport,
    RobustBoxCounts,
    cab_files,
    load_traces,
    read_cab_file,
    to_time_ns,
)
from odcore.errors import ParameterError, TraceFormatError
from odcore.od import kernel as K
from odcore.od.engines.memory_stream import ShardMerger, duplicate_rows, ordered_results, run_shard
from odcore.od.engines.sources import SourceTraces
from odcore.od.trips import ODConfig
from odcore.space.density import fix_density

__all__ = ["GROUP_BYTES", "POOLS", "StreamedTraces", "build_od_cabspotting", "cab_groups", "fix_density_cabspotting",
           "kept_plan", "kept_summary", "stream_cabspotting", "zone_drops_only"]

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


_KEPT = ("t", "lat", "lon", "sizes")   # a group's raw fixes between passes: one .npy file each (cab codes: sizes)


@dataclass(frozen=True)
class _Job:
    """One group's work. ``stage``: ``stash`` (parse, keep the raw fixes in the ``keep_file.*.npy`` files, return the robust box's
    counts when ``box_counts``), ``homes`` (read ``keep_file``, return its cabs' home cells for the regions),
    ``bounds`` (read ``keep_file``, filter, return the kept fixes' min/max) or ``run`` (parse, or read
    ``keep_file``; filter, counting the drops; the kernel; what the loader would report of the kept fixes, and
    their rows' hashes when ``fingerprint``)."""

    stage: str
    paths: tuple[str, ...]
    first_code: int
    filters: K.Filters
    grid: Any = None
    keep_pairs: bool = False
    keep_file: str | None = None
    box_counts: bool = False
    labels: tuple[str, ...] = ()
    fingerprint: bool = False
    cell_points: bool = False
    image: tuple | None = None     # (box, width_px) of a fix-density image (stage ``fixes``)
    reuse: bool = False            # ``keep_file`` was written by an earlier call: read it instead of parsing
    keep: bool = False             # leave ``keep_file`` for later calls
    region_kept: bool = False      # a region's box is kept: count the cabs it leaves out (stage ``run``)


def _read_group(job: _Job) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(user code, Unix seconds, lat, lon, rows per file) of the group's files, concatenated."""
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
    st = K.PrepStats()
    if job.keep_file is None or (job.stage == "stash" and not job.reuse):
        codes, t, lat, lon, sizes = _read_group(job)
    else:
        t, lat, lon, sizes = (np.load(f"{job.keep_file}.{k}.npy") for k in _KEPT)
        codes = np.repeat(np.arange(job.first_code, job.first_code + len(sizes), dtype=np.int64), sizes)
    if job.stage == "stash":
        if not job.reuse:                   # plain .npy files: no zip and no checksum to compute (np.savez)
            for k, a in zip(_KEPT, (t, lat, lon, sizes), strict=True):
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
    if job.stage == "homes":
        ok = (t != K.IMIN) & ~(np.isnan(lat) | np.isnan(lon))
        return home_cells(codes[ok], lat[ok], lon[ok]), st
    left_out = None
    if job.stage == "run" and job.region_kept:
        left_out = _people_left_out(codes - job.first_code, t, lat, lon, job.filters.bbox, len(sizes))
    codes, t, lat, lon = _filter(job, codes, t, lat, lon, sizes, st)
    if job.stage == "bounds":
        st.bounds.update(lat, lon)
        return None, st
    if job.stage == "fixes":
        dup = duplicate_rows(codes - job.first_code, t, lat, lon, len(job.paths))
        return fix_density(lon[~dup], lat[~dup], job.image[0], job.image[1]), st
    if job.keep_file is not None and not job.keep:
        for k in _KEPT:
            os.unlink(f"{job.keep_file}.{k}.npy")
    kept = kept_summary(codes, t, lat, lon, job.labels, job.first_code, job.fingerprint)
    kept["people_left_out"] = left_out
    if len(t) == 0:
        return (None, kept), st
    tbl = pa.table({USER: codes, K.T_S: t, "lat": lat, "lon": lon})
    del codes, t, lat, lon
    return (run_shard(tbl, job.grid, job.filters.tz, job.keep_pairs, st, cell_points=job.cell_points), kept), st


def _people_left_out(rel: np.ndarray, t: np.ndarray, lat: np.ndarray, lon: np.ndarray,
                     box: tuple[float, float, float, float], n_cabs: int) -> int:
    """Cabs of a group (``rel``: their codes from 0) with a usable fix (no missing value) but none inside ``box``
    (south, west, north, east): the people a kept region leaves out, as the loader counts them
    (:attr:`odcore.data.traces.LoadReport.region_left_out`)."""
    ok = (t != K.IMIN) & ~(np.isnan(lat) | np.isnan(lon))
    s, w, n, e = box
    inside = ok & (lat >= s) & (lat <= n) & (lon >= w) & (lon <= e)
    had = np.bincount(rel[ok], minlength=n_cabs) > 0
    has = np.bincount(rel[inside], minlength=n_cabs) > 0
    return int((had & ~has).sum())


def kept_summary(codes: np.ndarray, t: np.ndarray, lat: np.ndarray, lon: np.ndarray, labels: tuple[str, ...],
                 first_code: int, fingerprint: bool) -> dict[str, Any]:
    """What :func:`odcore.data.traces.load_traces` would report of a group's kept fixes (after the box, dates and
    offset): rows (exact duplicates not counted), cabs, first and last time, latitude and longitude range; with
    ``fingerprint``, the per-row hashes (:func:`odcore.data.fingerprint.row_hashes`) of these rows (duplicates
    dropped), whose sums over the groups give the fingerprint of the loader's whole table
    (:func:`odcore.data.fingerprint.trace_fingerprint`). ``labels``: the group's cab ids, ``first_code`` the code of its
    first cab."""
    out: dict[str, Any] = {"rows": 0, "users": 0, "t_min": None, "t_max": None, "bounds": K.Bounds(),
                           "hashes": np.empty(0, np.uint64) if fingerprint else None}
    n = len(t)
    if n == 0:
        return out
    rel = codes - first_code
    order = None
    if n > 1:
        du = np.diff(rel)
        if not bool(((du > 0) | ((du == 0) & (np.diff(t) >= 0))).all()):
            order = np.lexsort((t, rel))     # stable, as the loader sorts
        del du
    r, ts = (rel, t) if order is None else (rel[order], t[order])
    la, lo = (lat, lon) if order is None else (lat[order], lon[order])
    dup = np.zeros(n, bool)
    same = (r[1:] == r[:-1]) & (ts[1:] == ts[:-1])
    if same.any():
        grp = np.zeros(n, bool)
        grp[1:] |= same
        grp[:-1] |= same
        cand = np.flatnonzero(grp)
        d = pd.DataFrame({"u": r[cand], "t": ts[cand], "a": la[cand], "o": lo[cand]}).duplicated().to_numpy()
        dup[cand] = d
    keep = ~dup
    out["rows"] = int(keep.sum())
    out["users"] = int(np.count_nonzero(np.bincount(r, minlength=len(labels))))
    out["t_min"], out["t_max"] = int(ts.min()), int(ts.max())
    out["bounds"].update(lat, lon)
    if fingerprint:
        if not keep.all():
            r, ts, la, lo = r[keep], ts[keep], la[keep], lo[keep]
        user = pd.Categorical.from_codes(r, categories=pd.Index(list(labels), dtype=object))
        out["hashes"] = row_hashes(pd.Series(user, copy=False), ts * 1_000_000_000, la, lo)
    return out


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
        ex = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="odcore-cabs")
    else:
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
    yield from ordered_results(pool, _group_task, jobs, 2 * workers, advice="or pass workers=1")


def build_od_cabspotting(source: str | Path, config, *, grid=None, bbox: Any = None, start: Any = None,
                         end: Any = None, time_offset_s: float = 0.0, region: Any = None, keep_pairs: bool = True,
                         fingerprint: bool = False, workers: int | None = None, pool: str = "threads",
                         group_bytes: int = GROUP_BYTES, temp_dir: str | None = None, check_bounds=None,
                         name: str | None = None, cell_points: bool = False, keep_dir: str | Path | None = None,
                         extent: tuple[float, float, float, float] | None = None):
    """Weekly unique OD data of a Cabspotting folder, streamed in groups of cab files on ``workers`` threads.

    The same tables as ``build_od(load_traces(source, format="cabspotting", bbox=bbox, start=start, end=end,
    time_offset_s=time_offset_s, region=region, tz=config.tz), config, grid=grid)`` without holding the folder in
    memory, and the same load report.

    Parameters
    ----------
    source:
        A Cabspotting folder (``new_<cab>.txt[.gz]`` files) or one cab file.
    config:
        :class:`odcore.od.oddata.ODConfig`; its ``tz`` gives the hours and weeks (and reads naive ``start`` /
        ``end``).
    grid:
        Zone object (``assign``, ``n_cells``); default: :func:`odcore.od.kernel.fit_zones` of the kept
        fixes' min/max, as the loader and every engine fit them.
    bbox, start, end, time_offset_s, region:
        As in :func:`odcore.data.traces.load_traces` (``bbox="auto"``: the robust box; ``region``: ``None`` /
        ``"all"``, ``"auto"``, a rank or a box, the regions of the cabs' home cells found group by group,
        :func:`odcore.data.regions.home_cells`).
    keep_pairs:
        Keep every user's unique pairs (``ODData.pairs``).
    fingerprint:
        Also hash the kept fixes as :func:`odcore.data.fingerprint.trace_fingerprint` hashes the loader's table
        (``stats["fingerprint"]``; the release record names its data by it).
    workers:
        Worker threads or processes (default: 2, or 1 on one core); 1 runs the groups in this process. The tables
        do not depend on it.
    pool:
        ``threads`` (default: one interpreter, the least memory and CPU) or ``processes`` (``spawn``ed workers,
        which need ``if __name__ == "__main__":`` in a calling script). The tables do not depend on it.
    group_bytes:
        Compressed bytes of cab files per group (memory per worker grows with it).
    temp_dir:
        Where the kept fixes wait between passes when zones or the box are fitted (default: the system's temporary
        folder).
    check_bounds:
        Called as ``check_bounds(lat_min, lat_max, lon_min, lon_max)`` with the kept fixes' box before zones are
        fitted to it (may raise to refuse a grid too big).
    name:
        The source's name in the report and messages (default: the path; an upload's file name when its cab files
        were unpacked into a folder, :func:`odcore.data.traces.unpack_cabspotting`).
    cell_points:
        Also count the kept fixes (duplicates dropped) in each zone: ``stats["cell_points"]``, a map of where the
        traces are (fixes outside every zone are ``rows_dropped``'s zone reason).
    keep_dir:
        A folder where the parsed fixes of each group stay after the call (about 24 bytes a fix): a later call on
        the same files with the same ``keep_dir`` and ``group_bytes`` reads them instead of parsing the files again
        (another zone system of the same upload costs the filters and the kernel only). Default: nothing kept.
    extent:
        ``(lat_min, lat_max, lon_min, lon_max)`` of the kept fixes when already known (an earlier call's
        ``stats["traces"]`` ``lat_range`` and ``lon_range`` with the same filters): zones not given are fitted to it
        without the pass that finds it.

    Returns
    -------
    odcore.od.oddata.ODData
        Its ``stats`` also hold ``load_report`` (the :class:`odcore.data.traces.LoadReport` the loader would give:
        rows read and kept, rows dropped by reason, box used, regions; ``tz`` is ``config.tz``) and ``traces``
        (the kept fixes' ``users``, ``rows``, ``time_min``, ``time_max``, ``lat_range``, ``lon_range``, as
        :meth:`odcore.data.traces.Traces.summary` gives them). ``rows_dropped`` holds the loader's reasons and the
        zones' (``outside_grid``), like the report and ``build_od``'s together.

    Raises
    ------
    TraceFormatError
        A bad file (named with its row and column), no usable row, or fewer than two cabs after the filters.
    """
    if pool not in POOLS:
        raise ParameterError(f"pool must be one of {list(POOLS)}, got pool={pool!r}.")
    if int(group_bytes) < 1:
        raise ParameterError(f"group_bytes must be >= 1, got group_bytes={group_bytes}.")
    disp, paths, ids = cab_files(source)
    disp = name or disp
    tz = config.tz
    n_workers = int(workers) if workers else max(1, min(2, os.cpu_count() or 1))
    if n_workers < 1:
        raise ParameterError(f"workers must be >= 1, got workers={workers}.")
    sizes = [p.stat().st_size for p in paths]
    groups = cab_groups(sizes, int(group_bytes))
    f = K.Filters(source=disp, tz=tz, time_unit="s", time_offset_s=float(time_offset_s or 0.0), bbox=None,
                  start_ns=None if start is None else to_time_ns(start, tz, "start"),
                  end_ns=None if end is None else to_time_ns(end, tz, "end"))

    # the loader's region rules (odcore.data.traces._region_box): a box given as the region replaces the box; "auto"
    # looks for regions only when the box (or the robust box of every usable fix) spans more than a city
    reg = None if region is None or str(region).strip().lower() in ("", "all", "none", "off") else region
    reg_box = isinstance(reg, str) and any(ch in reg.strip() for ch in ", \t")
    reg_auto = isinstance(reg, str) and reg.strip().lower() == "auto"
    auto_box = bbox is not None and isinstance(bbox, str) and bbox.strip().lower() == "auto"
    box = None if bbox is None or auto_box else BBox.parse(bbox).as_tuple()
    need_counts = auto_box or (reg_auto and bbox is None)
    regions: list = []
    region_rank = None
    st = K.PrepStats()
    n_workers = min(n_workers, len(groups))
    labels = np.asarray(ids, dtype=object)
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="odcore-cabs-", dir=temp_dir)))
        ex = stack.enter_context(_pool(n_workers, pool))    # shut down before the folder goes
        jobs = [_Job("run", tuple(str(paths[i]) for i in g), g.start, f, labels=tuple(ids[g.start:g.stop]),
                     fingerprint=fingerprint) for g in groups]
        kept_dir, reuse, marker = tmp, False, None
        if keep_dir is not None:
            kept_dir, marker, plan, reuse = kept_plan(keep_dir, paths, sizes, group_bytes)
            if not reuse:
                marker.unlink(missing_ok=True)
            jobs = [replace(j, keep_file=str(kept_dir / f"g{k:05d}"), keep=True, reuse=reuse)
                    for k, j in enumerate(jobs)]
        bounds_pass = grid is None and extent is None
        if (need_counts or (reg is not None and not reg_box) or (marker is not None and not reuse)
                or (bounds_pass and not reuse)):
            # one parse: the raw fixes wait in temporary files for the passes that need the whole folder first
            jobs = [replace(j, stage="stash", keep_file=str(kept_dir / f"g{k:05d}"), box_counts=need_counts)
                    for k, j in enumerate(jobs)]
            counts = RobustBoxCounts()
            for sp, _ in _run_jobs(jobs, ex, n_workers):
                if sp is not None:
                    counts.add_sparse(*sp)
            if marker is not None and not reuse:
                marker.write_text(plan)
            if need_counts and counts.n == 0:
                raise TraceFormatError("no usable rows (the file is empty or every row misses a value).", file=disp)
            robust = counts.box(source=disp) if need_counts else None
            if auto_box:
                box = robust.as_tuple()
            if reg_box:
                box = BBox.parse(reg).as_tuple()
            elif reg is not None and (not reg_auto or spans_metro(BBox(*box) if box is not None else robust)):
                homes = [h for h, _ in _run_jobs([replace(j, stage="homes") for j in jobs], ex, n_workers)]
                regions = regions_of_homes(pd.concat(homes, ignore_index=True))
                r = pick_region(regions, reg)
                box, region_rank = r.bbox, r.rank
        elif reg_box:
            box = BBox.parse(reg).as_tuple()
        f = replace(f, bbox=box)
        jobs = [replace(j, filters=f) for j in jobs]
        if grid is None:
            bounds = K.Bounds()
            if extent is not None:
                bounds.update(np.asarray(extent[:2], np.float64), np.asarray(extent[2:], np.float64))
            else:
                for _, gst in _run_jobs([replace(j, stage="bounds") for j in jobs], ex, n_workers):
                    bounds.merge(gst.bounds)
            if bounds.n == 0:
                raise TraceFormatError("no rows left after filtering (no fix inside the box and dates).",
                                       file=disp)
            if check_bounds is not None:
                check_bounds(bounds.lat_min, bounds.lat_max, bounds.lon_min, bounds.lon_max)
            grid = K.fit_zones(bounds, config)
        run = [replace(j, stage="run", grid=grid, keep_pairs=keep_pairs, cell_points=cell_points,
                       region_kept=region_rank is not None) for j in jobs]
        merged = ShardMerger(keep_pairs)
        kept = {"rows": 0, "users": 0, "t_min": None, "t_max": None, "bounds": K.Bounds(), "people_left_out": 0}
        fp = TraceFingerprint() if fingerprint else None
        for (part, info), gst in _run_jobs(run, ex, n_workers):
            st.merge(gst)
            kept["rows"] += info["rows"]
            kept["users"] += info["users"]        # a cab is in one group
            kept["people_left_out"] += info["people_left_out"] or 0
            kept["bounds"].merge(info["bounds"])
            for k, pick in (("t_min", min), ("t_max", max)):
                if info[k] is not None:
                    kept[k] = info[k] if kept[k] is None else pick(kept[k], info[k])
            if fp is not None:
                fp.add(info["hashes"])
            if part is not None:
                part["labels"] = labels[part["labels"]]
            merged.add(part)
            del part, info
        digest = None if fp is None else fp.hexdigest()
    if kept["rows"] == 0:
        raise TraceFormatError(f"no rows left after filtering (dropped: {st.dropped}).", file=disp)
    if kept["users"] < 2:
        raise TraceFormatError(f"only {kept['users']} user(s) after loading; weekly OD counts and attacks need at "
                               "least 2 users.", file=disp, column="user")
    if st.slot_min == K.IMIN:
        raise TraceFormatError("no trace row falls inside the grid.", file=disp)
    od = merged.result(grid, config, st, bbox=box, n_shards=len(groups))
    loader_drops = {DROP_MISSING: st.dropped.get(DROP_MISSING, 0), DROP_BBOX: st.dropped.get(DROP_BBOX, 0),
                    DROP_DATES: st.dropped.get(DROP_DATES, 0), DROP_DUPLICATE: merged.dups}
    report = LoadReport(source=disp, format="cabspotting", rows_read=st.rows_read, rows_kept=kept["rows"],
                        rows_dropped={k: v for k, v in loader_drops.items() if v},
                        bbox_used=None if box is None else tuple(float(v) for v in box), tz=tz,
                        regions=tuple(r.as_dict() for r in regions), region=region_rank,
                        region_left_out=None if region_rank is None else {
                            "fixes": st.dropped.get(DROP_BBOX, 0), "people": kept["people_left_out"]})
    b = kept["bounds"]
    traces = {"users": kept["users"], "rows": kept["rows"], "time_min": _iso(kept["t_min"]),
              "time_max": _iso(kept["t_max"]), "lat_range": [b.lat_min, b.lat_max],
              "lon_range": [b.lon_min, b.lon_max]}
    stats = {**od.stats, "load_report": report, "traces": traces}
    if digest is not None:
        stats["fingerprint"] = digest
    return replace(od, stats=stats)


def kept_plan(keep_dir: str | Path, paths: list[Path], sizes: list[int], group_bytes: int):
    """``(folder, marker file, plan, reusable)`` of ``build_od_cabspotting``'s ``keep_dir``: the plan names the files,
    their sizes and the group size; the kept fixes are reusable when the marker holds the same plan."""
    folder = Path(keep_dir)
    folder.mkdir(parents=True, exist_ok=True)
    marker = folder / "groups.json"
    plan = json.dumps([[p.name, n] for p, n in zip(paths, sizes, strict=True)] + [int(group_bytes)])
    return folder, marker, plan, marker.is_file() and marker.read_text() == plan


def _iso(t: int) -> str:
    """ISO text of a UTC Unix second, as ``pandas.Timestamp.isoformat`` writes the loader's times."""
    return pd.Timestamp(t, unit="s", tz="UTC").isoformat()


class StreamedTraces(SourceTraces):
    """A Cabspotting folder read by the streamed engine, seen as :func:`odcore.data.traces.load_traces` would show
    it: the same :attr:`report` and :meth:`summary`, without the table of fixes.

    The table itself (:attr:`df`) is read on first use only, by :func:`~odcore.data.traces.load_traces` with the
    same options, for what needs every fix rather than weekly counts (a zone comparison, Knock Knock series, a map
    of points).
    """

    def __init__(self, report, kept: dict[str, Any], load_options: dict[str, Any], fingerprint: str | None = None,
                 path: str | None = None):
        super().__init__(report, kept, load_options, fingerprint)
        self.path = path or report.source

    @property
    def df(self):
        """The trace table, read by the loader on first use (the whole folder in memory)."""
        if self._traces is None:
            t = load_traces(self.path, format="cabspotting", **self.load_options)
            self._traces = t if self.path == self.report.source else replace(t, report=replace(
                t.report, source=self.report.source))
        return self._traces.df


def stream_cabspotting(source: str | Path, config=None, *, tz: str = "auto", bbox: Any = None, start: Any = None,
                       end: Any = None, time_offset_s: float = 0.0, region: Any = None, keep_pairs: bool = True,
                       fingerprint: bool = False, check_bounds=None, **options: Any):
    """``(traces, od)`` of a Cabspotting folder, streamed: what ``traces = load_traces(source,
    format="cabspotting", tz=tz, ...)`` and ``build_od(traces, config)`` give, with ``traces`` a
    :class:`StreamedTraces` (the report and summary; the table read only if asked for).

    ``tz``: ``"auto"`` is the format's documented zone (America/Los_Angeles), as the loader reads it; ``config``
    (default: :class:`odcore.od.oddata.ODConfig` of that zone) must use the same zone. ``check_bounds(lat_min,
    lat_max, lon_min, lon_max)`` is called with the kept fixes' box before zones are fitted to it (the CLI refuses a
    continent-wide grid there). Other options go to :func:`build_od_cabspotting`.
    """
    auto = isinstance(tz, str) and tz.strip().lower() == "auto"
    zone = FORMAT_TZ["cabspotting"] if auto else tz
    config = config or ODConfig(tz=zone)
    if config.tz != zone:
        raise ParameterError(f"config.tz={config.tz!r} differs from tz={tz!r} (the zone the traces are read in).")
    od = build_od_cabspotting(source, config, bbox=bbox, start=start, end=end, time_offset_s=time_offset_s,
                              region=region, keep_pairs=keep_pairs, fingerprint=fingerprint,
                              check_bounds=check_bounds, **options)
    rep = replace(od.stats["load_report"], tz=zone, tz_source="format" if auto else "given")
    traces = StreamedTraces(rep, od.stats["traces"], {"tz": tz, "bbox": bbox, "start": start, "end": end,
                                                      "time_offset_s": time_offset_s, "region": region},
                            od.stats.get("fingerprint"), path=str(source))
    return traces, zone_drops_only(od)


def zone_drops_only(od):
    """:func:`build_od_cabspotting`'s OD data as :func:`odcore.od.engines.build_od` gives it from the loaded table:
    ``stats["rows_dropped"]`` holds the zones' drops only (the loader's are in ``stats["load_report"]``)."""
    loader = od.stats["load_report"].rows_dropped
    return replace(od, stats={**od.stats, "rows_dropped": {k: v for k, v in od.stats["rows_dropped"].items()
                                                           if k not in loader}})


def fix_density_cabspotting(source: str | Path, box: tuple[float, float, float, float], width_px: int, *,
                            tz: str, bbox: Any = None, start: Any = None, end: Any = None, time_offset_s: float = 0.0,
                            workers: int | None = None, group_bytes: int = GROUP_BYTES,
                            keep_dir: str | Path | None = None) -> np.ndarray:
    """:func:`odcore.space.density.fix_density` of the fixes the loader keeps of a Cabspotting folder (an image of
    where they lie, e.g. the streets under a flow map), summed group by group: the folder is read once and never
    held whole. ``bbox`` is the box the loader used (its report's ``bbox_used``, regions already applied); ``tz``
    the zone naive ``start`` / ``end`` are read in; ``keep_dir``: read the fixes :func:`build_od_cabspotting` kept
    there, when they are there."""
    _, paths, _ = cab_files(source)
    sizes = [p.stat().st_size for p in paths]
    groups = cab_groups(sizes, int(group_bytes))
    kept = kept_plan(keep_dir, paths, sizes, group_bytes) if keep_dir is not None else None
    f = K.Filters(source=str(source), tz=tz, time_unit="s", time_offset_s=float(time_offset_s or 0.0),
                  bbox=None if bbox is None else BBox.parse(bbox).as_tuple(),
                  start_ns=None if start is None else to_time_ns(start, tz, "start"),
                  end_ns=None if end is None else to_time_ns(end, tz, "end"))
    n_workers = min(int(workers) if workers else max(1, min(2, os.cpu_count() or 1)), len(groups))
    jobs = [_Job("fixes", tuple(str(paths[i]) for i in g), g.start, f, image=(tuple(box), int(width_px)))
            for g in groups]
    if kept is not None and kept[3]:
        jobs = [replace(j, keep_file=str(kept[0] / f"g{k:05d}"), keep=True, reuse=True) for k, j in enumerate(jobs)]
    total = None
    with _pool(n_workers, "threads") as ex:
        for counts, _ in _run_jobs(jobs, ex, n_workers):
            total = counts if total is None else total + counts
    return total
