"""The memory engine on files: streamed, sharded by a hash of the user, compact arrays.

Instead of loading the whole trace table into pandas (``load_traces``) and running :func:`odcore.trips.build_od` on
it, the files are read in Arrow batches (``pyarrow.dataset``), filtered like the loader does
(:func:`odcore.engines.kernel.filter_batch`), mapped to (zone, hour slot) with the shared per-row code, and kept
as compact arrays split into user shards by a 64-bit hash of the user id (numpy over the Arrow buffers: no Python
object per id). Each shard then runs the numpy kernel (:func:`odcore.trips._winners`, :func:`odcore.trips.
_od_tables`) alone; the distinct-user counts of the shards are summed, which is exact because every user is in
exactly one shard. Text user ids are factorised per shard by Arrow (``dictionary_encode``), so distinct ids never
merge, whatever their hashes.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from odcore.constants import COUNT, DESTINATION, ORIGIN, TRIPS, UNIQUE_TRIPS, USER, WEEK
from odcore.engines import kernel as K
from odcore.engines.sources import FileSource
from odcore.errors import TraceFormatError

__all__ = ["build_od_memory_stream", "user_hash"]

BATCH_ROWS = 1_000_000
SHARD_ROWS = 8_000_000
_P = np.uint64(0x100000001B3)          # FNV-1a 64-bit prime (used as a polynomial base here)
_MIX1, _MIX2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser (a bijection of uint64)."""
    x = x.astype(np.uint64, copy=True)
    with np.errstate(over="ignore"):
        x ^= x >> np.uint64(30)
        x *= _MIX1
        x ^= x >> np.uint64(27)
        x *= _MIX2
        x ^= x >> np.uint64(31)
    return x


def user_hash(user) -> np.ndarray:
    """A 64-bit hash (uint64) of each user id of an Arrow array (integers or text), vectorised.

    Integers: splitmix64 of the value. Text: a polynomial hash of the UTF-8 bytes read straight from the Arrow
    buffers, then splitmix64. Only used to pick a shard; ids are compared exactly within a shard.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

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
    """Arrow batches (user, time, lat, lon) of a FileSource with the loader's column mapping."""

    def __init__(self, src: FileSource, batch_rows: int):
        import pyarrow.dataset as ds

        from odcore.traces import _resolve_mapping

        try:
            self.ds = ds.dataset(list(src.paths), format="parquet" if src.format == "parquet" else "csv")
        except Exception as exc:  # pyarrow raises several types for unreadable files
            raise TraceFormatError(f"cannot read as {src.format} ({type(exc).__name__}: {exc}).",
                                   file=src.display) from None
        mp = _resolve_mapping(list(self.ds.schema.names), dict(src.mapping) if src.mapping else None, src.display)
        self.cols = [mp.user, mp.time, mp.lat, mp.lon]
        self.time_unit = mp.time_unit or "auto"
        self.batch_rows = batch_rows
        self.src = src

    def count(self) -> int:
        return int(self.ds.count_rows())

    def batches(self):
        import pyarrow as pa
        import pyarrow.compute as pc

        for b in self.ds.to_batches(columns=self.cols, batch_size=self.batch_rows):
            if b.num_rows == 0:
                continue
            lat = b.column(2)
            lon = b.column(3)
            try:
                lat = pc.cast(lat, pa.float64()).to_numpy(zero_copy_only=False)
                lon = pc.cast(lon, pa.float64()).to_numpy(zero_copy_only=False)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                raise TraceFormatError("a coordinate is not a number.", file=self.src.display) from None
            yield b.column(0), b.column(1).to_pandas(), np.asarray(lat, np.float64), np.asarray(lon, np.float64)


class _Shard:
    """Compact per-shard columns, appended batch by batch."""

    __slots__ = ("cell", "lat", "lon", "slot", "t", "user")

    def __init__(self) -> None:
        self.user: list = []
        self.t: list = []
        self.lat: list = []
        self.lon: list = []
        self.slot: list = []
        self.cell: list = []


def build_od_memory_stream(src: FileSource, config, *, grid=None, keep_pairs: bool = True,
                           shard_rows: int = SHARD_ROWS, batch_rows: int = BATCH_ROWS):
    """Weekly unique OD data of Parquet/CSV files with the numpy kernel, streamed and sharded by user.

    Same filters, duplicate removal, zones and tables as :func:`odcore.traces.load_traces` followed by
    :func:`odcore.trips.build_od` (``bbox="auto"``: the robust box of a systematic sample of at most 200,000 rows).
    """
    import pyarrow as pa

    from odcore.traces import BBox, _to_time_ns

    rd = _Reader(src, batch_rows)
    n_rows = rd.count()
    bbox = None
    if src.bbox is not None:
        if isinstance(src.bbox, str) and src.bbox.strip().lower() == "auto":
            step = max(1, n_rows // 200_000)
            la, lo = [], []
            for user, time_, lat, lon in rd.batches():
                ok = ~(np.isnan(lat) | np.isnan(lon) | K._user_missing(user) | time_.isna().to_numpy())
                la.append(lat[ok][::step])
                lo.append(lon[ok][::step])
            if not la or sum(len(x) for x in la) == 0:
                raise TraceFormatError("no usable rows (every row misses a value).", file=src.display)
            bbox = BBox.robust(np.concatenate(la), np.concatenate(lo)).as_tuple()
        else:
            bbox = BBox.parse(src.bbox).as_tuple()
    f = K.Filters(source=src.display, tz=src.tz, time_unit=rd.time_unit, time_offset_s=src.time_offset_s, bbox=bbox,
                  start_ns=None if src.start is None else _to_time_ns(src.start, src.tz, "start"),
                  end_ns=None if src.end is None else _to_time_ns(src.end, src.tz, "end"))
    if grid is None:   # the zones from a streaming min/max pass over the kept rows
        b = K.Bounds()
        for user, time_, lat, lon in rd.batches():
            code, _ = K.filter_batch(user, time_, lat, lon, f, K.PrepStats())
            b.update(lat[code == 0], lon[code == 0])
        grid = K.fit_zones(b, config)
    n_shards = max(1, math.ceil(n_rows / max(1, int(shard_rows))))
    shards = [_Shard() for _ in range(n_shards)]
    st = K.PrepStats()
    cell_dtype = np.int32 if grid.n_cells < 2**31 else np.int64
    for user, time_, lat, lon in rd.batches():
        code, t = K.filter_batch(user, time_, lat, lon, f, st)
        idx = np.flatnonzero(code == 0)
        if idx.size == 0:
            continue
        lat, lon, t = lat[idx], lon[idx], t[idx]
        ok, slot, cell = K.assign_batch(grid, lat, lon, t, config.tz, st)
        idx = idx[ok]
        if not ok.all():
            lat, lon, t, slot, cell = lat[ok], lon[ok], t[ok], slot[ok], cell[ok]
        if isinstance(user, pa.ChunkedArray):
            user = user.combine_chunks()
        u = user.take(pa.array(idx))
        sh = (user_hash(u) % np.uint64(n_shards)).astype(np.int64) if n_shards > 1 else np.zeros(len(idx), np.int64)
        order = np.argsort(sh, kind="stable")
        bounds = np.searchsorted(sh[order], np.arange(n_shards + 1))
        for k in range(n_shards):
            sel = order[bounds[k]:bounds[k + 1]]
            if sel.size == 0:
                continue
            s = shards[k]
            s.user.append(u.take(pa.array(sel)))
            s.t.append(t[sel])
            s.lat.append(lat[sel])
            s.lon.append(lon[sel])
            s.slot.append(slot[sel].astype(np.int32) if slot.size and abs(int(slot.max())) < 2**31
                          else slot[sel])
            s.cell.append(cell[sel].astype(cell_dtype))
        del u, sh, order, code, t, lat, lon, slot, cell, idx
    if st.slot_min == K.IMIN:
        raise TraceFormatError("no trace row falls inside the grid.", file=src.display)
    parts: list[dict[str, Any]] = []
    dup_total = 0
    for k in range(n_shards):
        s = shards[k]
        if not s.t:
            continue
        parts.append(_run_shard(s, grid, config.tz, keep_pairs))
        dup_total += parts[-1]["dups"]
        shards[k] = _Shard()   # free the shard's columns
    return _merge(parts, grid, config, st, dup_total, bbox, n_shards, keep_pairs)


def _run_shard(s: _Shard, grid, tz: str, keep_pairs: bool) -> dict[str, Any]:
    import pyarrow as pa

    from odcore.trips import _od_tables, _winners

    users = pa.chunked_array(s.user).combine_chunks()
    s.user = []
    if pa.types.is_integer(users.type):
        labels, codes = np.unique(users.to_numpy(zero_copy_only=False).astype(np.int64), return_inverse=True)
        codes = codes.astype(np.int64).ravel()
    else:
        enc = users.dictionary_encode()
        d = enc.dictionary.to_numpy(zero_copy_only=False).astype(object)
        order = np.argsort(d.astype(str), kind="stable")
        rank = np.empty(len(order), np.int64)
        rank[order] = np.arange(len(order))
        codes = rank[enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)]
        labels = d[order]
    del users
    t = np.concatenate(s.t)
    s.t = []
    lat = np.concatenate(s.lat)
    s.lat = []
    lon = np.concatenate(s.lon)
    s.lon = []
    slot = np.concatenate(s.slot).astype(np.int64)
    s.slot = []
    cell = np.concatenate(s.cell).astype(np.int64)
    s.cell = []
    dup = _duplicates(codes, t, lat, lon, len(labels))
    del t, lat, lon
    n_dup = int(dup.sum())
    if n_dup:
        keep = ~dup
        codes, slot, cell = codes[keep], slot[keep], cell[keep]
    del dup
    w = _winners(codes, slot, cell, len(labels), grid.n_cells, tz)
    tb = _od_tables(w["wu"], w["ws"], w["wc"], w["wweek"], w["n_users"], grid.n_cells)
    out = {"labels": labels, "dups": n_dup, "rows": len(codes), **tb}
    if not keep_pairs:
        for key in ("p_week", "p_user", "p_o", "p_d"):
            out.pop(key)
    return out


def _duplicates(codes: np.ndarray, t: np.ndarray, lat: np.ndarray, lon: np.ndarray, n_users: int) -> np.ndarray:
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


def _merge(parts, grid, config, st: K.PrepStats, n_dup: int, bbox, n_shards: int, keep_pairs: bool):
    from odcore.traces import DROP_DUPLICATE

    def users_of(part, key):
        return part["labels"][part[key]]

    user_week = pd.DataFrame({
        WEEK: np.concatenate([p["a_week"] for p in parts]),
        USER: np.concatenate([users_of(p, "a_user") for p in parts]),
        TRIPS: np.concatenate([p["trips"] for p in parts]),
        UNIQUE_TRIPS: np.concatenate([p["uniq"] for p in parts]),
    })
    pairs = None
    if keep_pairs:
        pairs = pd.DataFrame({
            WEEK: np.concatenate([p["p_week"] for p in parts]),
            USER: np.concatenate([users_of(p, "p_user") for p in parts]),
            ORIGIN: np.concatenate([p["p_o"] for p in parts]),
            DESTINATION: np.concatenate([p["p_d"] for p in parts]),
        })
    c = pd.DataFrame({WEEK: np.concatenate([p["c_week"] for p in parts]),
                      ORIGIN: np.concatenate([p["c_o"] for p in parts]),
                      DESTINATION: np.concatenate([p["c_d"] for p in parts]),
                      COUNT: np.concatenate([p["c_n"] for p in parts])})
    counts = c.groupby([WEEK, ORIGIN, DESTINATION], sort=True, as_index=False)[COUNT].sum() if len(parts) > 1 else c
    dropped = dict(st.dropped)
    if n_dup:
        dropped[DROP_DUPLICATE] = n_dup
    cells = np.unique(np.concatenate([p["used_cells"] for p in parts]))
    stats = {"rows_read": st.rows_read, "rows_used": int(sum(p["rows"] for p in parts)), "rows_dropped": dropped,
             "user_hours": int(sum(p["user_hours"] for p in parts)), "cells_used": cells, "engine": "memory",
             "shards": n_shards, "bbox_used": bbox}
    return K.assemble(grid=grid, config=config, counts=counts, user_week=user_week, pairs=pairs, stats=stats)
