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

from odcore.data.traces import cab_files, load_traces
from odcore.errors import TraceFormatError

__all__ = ["FileSource", "SourceTraces", "file_source"]

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


class SourceTraces:
    """Parquet/CSV files an engine (DuckDB, Spark) read itself, seen as :func:`odcore.data.traces.load_traces`
    would show them: the same :attr:`report`, :meth:`summary`, :attr:`n_users` and :attr:`fingerprint`
    (:func:`odcore.data.fingerprint.trace_fingerprint`), all computed by the engine (``build_od(...,
    describe=True)``), without the table of fixes in this process.

    The table itself (:attr:`df`) is read on first use only, by the loader with the same options, for what needs
    every fix (a zone comparison, a map of points).

    Parameters
    ----------
    report:
        The :class:`odcore.data.traces.LoadReport`.
    kept:
        ``rows, users, time_min, time_max, lat_range, lon_range`` of the kept fixes (the engine's
        ``stats["traces"]``).
    load_options:
        Keyword arguments of :func:`~odcore.data.traces.load_traces` that give the same table (``df``).
    fingerprint:
        The engine's ``stats["fingerprint"]``.
    has_loc:
        Whether the loader's table would hold a ``loc`` column.
    """

    def __init__(self, report, kept: dict[str, Any], load_options: dict[str, Any], fingerprint: str | None = None,
                 has_loc: bool = False):
        self.report = report
        self.kept = dict(kept)
        self.load_options = dict(load_options)
        self.fingerprint = fingerprint
        self.has_loc = bool(has_loc)
        self._traces = None

    @property
    def n_users(self) -> int:
        return int(self.kept["users"])

    @property
    def loaded(self) -> bool:
        """Whether the table of fixes has been read (:attr:`df`)."""
        return self._traces is not None

    @property
    def df(self):
        """The trace table, read by the loader on first use (the whole input in this process's memory)."""
        if self._traces is None:
            self._traces = load_traces(self.report.source, **self.load_options)
        return self._traces.df

    def summary(self) -> dict[str, Any]:
        """:meth:`odcore.data.traces.Traces.summary` of the table the loader would give."""
        r, k = self.report, self.kept
        return {"source": r.source, "format": r.format, "users": k["users"], "rows": k["rows"],
                "rows_read": r.rows_read, "rows_kept": r.rows_kept, "rows_dropped": dict(r.rows_dropped),
                "bbox_used": list(r.bbox_used) if r.bbox_used else None, "rows_adjusted": dict(r.rows_adjusted),
                "encoding": r.encoding, "time_unit": r.time_unit, "time_min": k["time_min"],
                "time_max": k["time_max"], "lat_range": _listed(k["lat_range"]),
                "lon_range": _listed(k["lon_range"]),
                "has_loc": self.has_loc, "tz": r.tz, "tz_source": r.tz_source, "regions": [dict(x) for x in r.regions],
                "region": r.region, "region_left_out": r.region_left_out}


def _listed(pair):
    """A (lo, hi) range as a list, as the loader's summary writes it (None stays None)."""
    return None if pair is None else list(pair)

