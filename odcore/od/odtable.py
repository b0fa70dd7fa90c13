"""OD tables as a first-class input and output: a *counts folder* written by ``trips --counts-out DIR``.

Layout (everything a release, a budget or a map needs, nothing per person but pseudonymous per-user-week figures)::

    DIR/manifest.json                    what, from where, how: source, zones, engine, version, row counts
    DIR/counts/week=0/part-0.parquet     distinct users per (origin, destination) of week 0 (Hive partitions)
    DIR/counts/week=1/...
    DIR/user_weeks.parquet               week, user (pseudonym 0..U-1), trips, unique_trips of every active user-week
    DIR/zones.json                       the zone system (rebuilds the same cell ids: odcore.space.zones.zones_from_dict)
    DIR/zones.geojson                    the used zones' polygons (for GIS tools)

The folder holds no per-person pair lists: pages and commands that need them (the per-person attack, user-level
bounding, Knock Knock) say so and why (:data:`NO_PAIRS_REASON`). A cluster job (``--engine spark``) writes the same
folder, so its output opens in the lab.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from odcore import __version__
from odcore.constants import COUNT, DESTINATION, ORIGIN, TRIPS, UNIQUE_TRIPS, USER, WEEK
from odcore.errors import ParameterError, TraceFormatError
from odcore.od.trips import ODConfig, ODData
from odcore.paths import atomic_folder
from odcore.space.zones import write_zone_geometry, zones_from_dict

__all__ = ["COUNTS_HASH_MEMBER", "KIND", "NO_PAIRS_REASON", "CountsInput", "check_files", "file_hashes",
           "is_counts_folder", "read_counts_file", "read_counts_folder", "sha256_file", "whole_numbers",
           "write_counts_folder"]

KIND = "odcore-od-counts"
COUNTS_HASH_MEMBER = "odcore_counts"   # in FILE.zones.geojson: {"file", "sha256"} of the counts file it goes with
FORMAT_VERSION = 1
MANIFEST = "manifest.json"

NO_PAIRS_REASON = ("this input is an OD counts folder (weekly distinct-user counts per zone pair): it has no "
                   "per-person pair lists, which the per-person attack, user-level bounding and Knock Knock need. "
                   "Open the traces instead (or run trips without --counts-out) to use them.")


def is_counts_folder(path: Any) -> bool:
    """True when ``path`` is a folder with an OD counts manifest."""
    if not isinstance(path, (str, Path)) or "://" in str(path):
        return False
    p = Path(path) / MANIFEST
    if not p.is_file():
        return False
    try:
        return json.loads(p.read_text(encoding="utf-8")).get("kind") == KIND
    except (OSError, ValueError, AttributeError):
        return False


def write_counts_folder(od, folder, *, source: str, engine: str = "memory", extra: dict | None = None) -> dict:
    """Write ``od`` (:class:`odcore.od.oddata.ODData`) as a counts folder; returns the manifest.

    The folder is written next to its final place and swapped in whole (:func:`odcore.paths.atomic_folder`), so a
    reader, or a run killed at any moment, sees either the previous folder or the new one, never half of one. An
    existing ``folder`` must be empty or a counts folder; anything else is refused and left as it was.
    """
    out = Path(folder)
    try:
        with atomic_folder(out, is_counts_folder, what=f"--counts-out {out}") as tmp:
            c = od.counts
            table = pa.table({WEEK: pa.array(c[WEEK].to_numpy(np.int64)),
                              ORIGIN: pa.array(c[ORIGIN].to_numpy(np.int64)),
                              DESTINATION: pa.array(c[DESTINATION].to_numpy(np.int64)),
                              COUNT: pa.array(c[COUNT].to_numpy(np.int64))})
            ds.write_dataset(table, str(tmp / "counts"), format="parquet", partitioning=[WEEK],
                             partitioning_flavor="hive", basename_template="part-{i}.parquet")
            uw = od.user_week
            codes = pd.factorize(uw[USER], sort=True)[0].astype(np.int64)     # pseudonyms: no ids leave the engine
            pq.write_table(pa.table({WEEK: pa.array(uw[WEEK].to_numpy(np.int64)), USER: pa.array(codes),
                                     TRIPS: pa.array(uw[TRIPS].to_numpy(np.int64)),
                                     UNIQUE_TRIPS: pa.array(uw[UNIQUE_TRIPS].to_numpy(np.int64))}),
                           str(tmp / "user_weeks.parquet"), compression="zstd")
            (tmp / "zones.json").write_text(json.dumps(od.grid.to_dict(), default=_json_default), encoding="utf-8")
            write_zone_geometry(od.grid, tmp / "zones.geojson", od.cells)
            per_week = c.groupby(WEEK)[COUNT].agg(["size", "sum"])
            st = od.stats
            manifest = {
                "kind": KIND,
                "format_version": FORMAT_VERSION,
                "odcore_version": __version__,
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "source": str(source),
                "engine": engine,
                "config": {"cell_km2": od.config.cell_km2, "tz": od.config.tz,
                           "zones": getattr(od.config, "zones", None)},
                "zones": od.grid.to_dict(),
                "week_starts": list(od.week_starts),
                "rows": {"counts": len(c), "user_weeks": len(uw),
                         "counts_per_week": {int(w): int(r["size"]) for w, r in per_week.iterrows()},
                         "unique_trips_per_week": {int(w): int(r["sum"]) for w, r in per_week.iterrows()}},
                "users": int(codes.max()) + 1 if len(codes) else 0,
                "cells_used": [int(x) for x in od.cells],
                "stats": {"rows_read": st.get("rows_read"), "rows_used": st.get("rows_used"),
                          "rows_dropped": st.get("rows_dropped", {}), "user_hours": st.get("user_hours")},
                "files": {"counts": "counts/week=*/part-*.parquet (Hive partitions by week)",
                          "user_weeks": "user_weeks.parquet", "zones": "zones.json", "geometry": "zones.geojson"},
                **(extra or {}),
            }
            manifest["sha256"] = file_hashes(tmp)   # the set this manifest belongs to (checked by the reader)
            (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2, default=_json_default), encoding="utf-8")
    except OSError as exc:
        raise ParameterError(f"--counts-out {out}: cannot write ({exc}).") from None
    return manifest


def sha256_file(path) -> str:
    """SHA-256 of a file's bytes (hex)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def file_hashes(folder) -> dict[str, str]:
    """``{relative path: sha256}`` of every file under ``folder`` but the manifest (POSIX paths, sorted)."""
    folder = Path(folder)
    return {p.relative_to(folder).as_posix(): sha256_file(p) for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name != MANIFEST}


def check_files(folder, manifest: dict) -> None:
    """Refuse a counts folder whose files are not the set its manifest was written with (a file missing, added or
    from another write): :class:`TraceFormatError` naming the first such file. Folders written without hashes
    are not checked."""
    want = manifest.get("sha256")
    if not isinstance(want, dict):
        return
    have = file_hashes(folder)
    for name in sorted(set(want) | set(have)):
        if want.get(name) != have.get(name):
            how = ("is missing" if name not in have else "is not listed in manifest.json" if name not in want
                   else "is not the file manifest.json was written with")
            raise TraceFormatError(f"the counts folder mixes files of two writes: {name} {how}; write the folder "
                                   "again (trips --counts-out).", file=str(folder))


def _json_default(o: Any):
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"cannot serialise {type(o).__name__} to JSON")


def read_manifest(folder) -> dict:
    p = Path(folder) / MANIFEST
    try:
        m = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TraceFormatError("not an OD counts folder (no manifest.json).", file=str(folder)) from None
    except (OSError, ValueError) as exc:
        raise TraceFormatError(f"unreadable manifest.json ({exc}).", file=str(folder)) from None
    if not isinstance(m, dict) or m.get("kind") != KIND:
        raise TraceFormatError(f"manifest.json is not an OD counts manifest (kind must be {KIND!r}).",
                               file=str(folder))
    if int(m.get("format_version", 0)) > FORMAT_VERSION:
        raise TraceFormatError(f"counts folder format {m.get('format_version')} is newer than this odcore reads "
                               f"({FORMAT_VERSION}); update odcore.", file=str(folder))
    return m


MAX_COUNT = 2**40
"""Largest id, week, trip figure or count a counts folder may hold (far above any city; far below int64's end)."""


def whole_numbers(values: pd.Series, *, file: str, column: str, lo: int, hi: int, why: str = "") -> None:
    """Raise :class:`TraceFormatError` naming ``file``, the first bad row (1-based) and ``column`` unless every value
    is a whole number in [``lo``, ``hi``] (no NaN, no fraction such as 2.5, nothing huge such as 2^62)."""
    v = pd.to_numeric(values, errors="coerce").to_numpy(dtype=float)
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(v) | (v != np.floor(v)) | (v < lo) | (v > hi)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raw = values.iloc[i]
        raw = raw.item() if isinstance(raw, np.generic) else raw
        shown = f"{raw:,}" if isinstance(raw, int) else repr(raw)
        n = int(bad.sum())
        raise TraceFormatError(f"{column} must be a whole number from {lo:,} to {hi:,}"
                               + (f" ({why})" if why else "") + f", got {shown}"
                               + (f" ({n:,} rows like it)." if n > 1 else "."), file=file, row=i + 1, column=column)


def read_counts_folder(folder):
    """:class:`odcore.od.oddata.ODData` of a counts folder: counts, per-user-week figures (pseudonymous users), zones.

    ``pairs`` is empty and ``stats["pairs_available"]`` is False (:data:`NO_PAIRS_REASON`).
    """
    folder = Path(folder)
    m = read_manifest(folder)
    check_files(folder, m)
    users = m.get("users")
    most = int(users) if isinstance(users, int) and users > 0 else MAX_COUNT
    parts = []
    try:
        dset = ds.dataset(str(folder / "counts"), format="parquet", partitioning="hive")
        for frag in dset.get_fragments():
            t = frag.to_table(schema=dset.schema).to_pandas()
            name = str(Path(frag.path).relative_to(folder))
            for col in (ORIGIN, DESTINATION, WEEK):
                whole_numbers(t[col], file=name, column=col, lo=0, hi=MAX_COUNT)
            whole_numbers(t[COUNT], file=name, column=COUNT, lo=1, hi=most,
                          why=f"a count of distinct people: 1 to the folder's {most:,} people")
            parts.append(t[[WEEK, ORIGIN, DESTINATION, COUNT]].astype(np.int64))
        uw = pd.read_parquet(folder / "user_weeks.parquet")
    except (OSError, ValueError) as exc:
        if isinstance(exc, TraceFormatError):
            raise
        raise TraceFormatError(f"cannot read the counts folder's tables ({exc}).", file=str(folder)) from None
    for col in (WEEK, USER, TRIPS, UNIQUE_TRIPS):
        if col in uw.columns:
            whole_numbers(uw[col], file="user_weeks.parquet", column=col, lo=0, hi=MAX_COUNT)
    counts = (pd.concat(parts, ignore_index=True) if parts else
              pd.DataFrame({c: np.empty(0, np.int64) for c in (WEEK, ORIGIN, DESTINATION, COUNT)}))
    counts = counts.sort_values([WEEK, ORIGIN, DESTINATION], kind="stable").reset_index(drop=True)
    want = int(m["rows"]["counts"])
    if len(counts) != want or len(uw) != int(m["rows"]["user_weeks"]):
        raise TraceFormatError(f"the counts folder is incomplete: {len(counts)} count rows and {len(uw)} user-weeks, "
                               f"the manifest says {want} and {m['rows']['user_weeks']}.", file=str(folder))
    uw = uw[[WEEK, USER, TRIPS, UNIQUE_TRIPS]].sort_values([WEEK, USER], kind="stable").reset_index(drop=True)
    grid = zones_from_dict(m["zones"])
    cfg = m.get("config", {})
    config = ODConfig(cell_km2=float(cfg.get("cell_km2", 1.3)), tz=cfg.get("tz", "UTC"), zones=cfg.get("zones"))
    pairs = pd.DataFrame({WEEK: np.empty(0, np.int64), USER: np.empty(0, np.int64),
                          ORIGIN: np.empty(0, np.int64), DESTINATION: np.empty(0, np.int64)})
    stats = {**(m.get("stats") or {}), "cells_used": np.asarray(m.get("cells_used", []), dtype=np.int64),
             "pairs_available": False, "counts_folder": str(folder), "manifest": m}
    return ODData(grid=grid, week_starts=list(m["week_starts"]), user_week=uw, pairs=pairs, counts=counts,
                  config=config, stats=stats)


def read_counts_file(path) -> tuple[pd.DataFrame, dict]:
    """A counts file of ``trips --counts-out FILE`` (CSV or Parquet) and the GeoJSON of its zones beside it
    (``FILE``'s name up to its first dot + ``.zones.geojson``): ``(table, geojson)``.

    The two files are one set: the GeoJSON names the SHA-256 of the counts file it was written with, and a pair
    from two writes (a run stopped between its two renames, or one file replaced by hand) is refused with
    :class:`TraceFormatError` rather than read as zones of another table."""
    path = Path(path)
    geo_path = path.with_name(path.name.split(".")[0] + ".zones.geojson")
    try:
        geo = json.loads(geo_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TraceFormatError(f"no zones file {geo_path.name} beside the counts file.", file=str(path)) from None
    except (OSError, ValueError) as exc:
        raise TraceFormatError(f"unreadable zones file ({exc}).", file=str(geo_path)) from None
    mark = geo.get(COUNTS_HASH_MEMBER) if isinstance(geo, dict) else None
    try:
        digest = sha256_file(path)
    except OSError as exc:
        raise TraceFormatError(f"cannot read the counts file ({exc}).", file=str(path)) from None
    if not isinstance(mark, dict) or mark.get("sha256") != digest:
        raise TraceFormatError(f"{path.name} and {geo_path.name} are not from the same write (the zones file names "
                               "another counts file's content): write both again with trips --counts-out.",
                               file=str(path))
    try:
        if path.name.lower().endswith((".parquet", ".pq")):
            table = pd.read_parquet(path)
        else:
            table = pd.read_csv(path, comment="#")
    except (OSError, ValueError) as exc:
        raise TraceFormatError(f"cannot read the counts file ({exc}).", file=str(path)) from None
    return table, geo


class CountsInput:
    """Stands where a :class:`odcore.data.traces.Traces` would for a command given a counts folder (``summary()``)."""

    def __init__(self, od) -> None:
        self.od = od
        self.manifest = od.stats.get("manifest", {})

    def summary(self) -> dict[str, Any]:
        m = self.manifest
        st = m.get("stats") or {}
        return {"source": m.get("source"), "format": "od-counts-folder", "counts_folder": self.od.stats.get(
            "counts_folder"), "engine": m.get("engine"), "users": m.get("users"), "rows": st.get("rows_used"),
            "rows_read": st.get("rows_read"), "rows_kept": st.get("rows_used"),
            "rows_dropped": st.get("rows_dropped", {}), "bbox_used": None, "pairs_available": False}
