"""Trace sources the out-of-core engines stream: an in-memory table or Parquet/CSV files read by the engine itself.

A :class:`FileSource` names generic Parquet or CSV files (a file, a folder of them, or a glob) with the loader's
column mapping and filters; :func:`odcore.od.engines.build_od` streams it through DuckDB or Spark without loading the
table into pandas; the memory engine streams a Cabspotting folder too (:mod:`odcore.od.engines.cab_stream`). Other
inputs (check-in sets, zips, uploads) are read by :func:`odcore.data.traces.load_traces` first.
"""

from __future__ import annotations

import glob
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from odcore.errors import TraceFormatError

__all__ = ["FileSource", "file_source"]

_PARQUET = (".parquet", ".pq")
_CSV = (".csv", ".csv.gz", ".tsv", ".txt")


@dataclass(frozen=True)
class FileSource:
    """Parquet or CSV files to stream, with the loader's options.

    Parameters
    ----------
    paths:
        The files (local paths here; on a cluster any Hadoop-compatible URI for Spark).
    format:
        ``parquet``, ``csv`` or ``cabspotting`` (a folder of cab files: the memory engine only).
    mapping:
        Column mapping (``user, time, lat, lon, time_unit`` keys) or None to recognise common names.
    tz, time_offset_s, bbox, start, end:
        As in :func:`odcore.data.traces.load_traces` (``bbox="auto"``: the robust box, one rule in every engine).
    """

    paths: tuple[str, ...]
    format: str = "parquet"
    mapping: dict[str, str] | None = None
    tz: str = "UTC"
    time_offset_s: float = 0.0
    bbox: Any = None
    start: Any = None
    end: Any = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def display(self) -> str:
        return self.paths[0] if len(self.paths) == 1 else f"{self.paths[0]} (+{len(self.paths) - 1} files)"

    @property
    def n_bytes(self) -> int:
        total = 0
        for p in self.paths:
            try:
                total += Path(p).stat().st_size
            except OSError:
                pass
        return total


def is_streamable(path: Any, fmt: str = "auto") -> bool:
    """True when ``path`` names generic Parquet/CSV files an engine can read directly (no zip, no upload)."""
    if not isinstance(path, (str, Path)) or fmt not in ("auto", "parquet", "csv"):
        return False
    if "://" in str(path):
        return True
    p = Path(path)
    if p.is_file():
        n = p.name.lower()
        return n.endswith(_PARQUET) or (fmt == "csv" or (fmt == "auto" and n.endswith(_CSV)))
    if p.is_dir():
        files = [f for f in p.rglob("*") if f.is_file() and not f.name.startswith((".", "_"))]
        return bool(files) and all(f.name.lower().endswith(_PARQUET) for f in files)
    return any(ch in str(path) for ch in "*?[") and bool(glob.glob(str(path)))


def file_source(path: Any, *, format: str = "auto", **kw: Any) -> FileSource:
    """A :class:`FileSource` for a file, a folder of Parquet files (e.g. ``synth --chunked`` output) or a glob; with
    ``format="cabspotting"``, a Cabspotting folder (the memory engine streams it; ``extra={"region": ...}`` as
    :func:`odcore.data.traces.load_traces`'s ``region``)."""
    s = str(path)
    if format == "cabspotting":   # a folder of cab files (or one), streamed by the memory engine
        from odcore.data.traces import cab_files

        cab_files(s)               # refuses a zip, a missing path, a folder without cab files
        return FileSource(paths=(s,), format="cabspotting", **kw)
    if "://" in s:   # a cluster path: Spark reads it
        fmt = format if format != "auto" else ("csv" if s.lower().endswith(_CSV) else "parquet")
        return FileSource(paths=(s,), format=fmt, **kw)
    p = Path(s)
    if p.is_dir():
        files = sorted(str(f) for f in p.rglob("*") if f.is_file() and not f.name.startswith((".", "_")))
    elif p.is_file():
        files = [s]
    else:
        files = sorted(glob.glob(s))
    if not files:
        raise TraceFormatError("no file found.", file=s)
    if format in ("parquet", "csv"):
        fmt = format
    else:
        fmt = "parquet" if all(f.lower().endswith(_PARQUET) for f in files) else "csv"
    return FileSource(paths=tuple(files), format=fmt, **kw)
