"""Trace table: one schema for every mobility source, and loaders that turn real files into it.

The trace table (:class:`Traces`) has the columns of :data:`odcore.constants.TRACE_COLUMNS`:
``user`` (pseudonymous id, integer or categorical string), ``time`` (``datetime64[ns, UTC]``), ``lat`` and
``lon`` (WGS84 degrees, float64), plus an optional integer ``loc`` (a precomputed location id such as a POI).
Rows are sorted by (user, time).

Loaders (:func:`load_traces`):

- ``csv`` / ``parquet``: generic tables with a :class:`ColumnMapping` (time as ISO text or Unix seconds; naive
  times are read in the ``tz`` time zone);
- ``cabspotting``: one file per cab, ``lat lon occupancy unix_time`` (gzip or plain, a folder, a zip or one file);
  the cab id is the file name without ``new_`` and ``.txt[.gz]`` (Piorkowski et al., CRAWDAD epfl/mobility);
- ``checkins``: a check-ins file ``user poi unix_time`` plus a POI coordinates file ``poi lat lon``
  (the preprocessed Foursquare / Gowalla sets of Liu et al. 2017; their times are 8 h early, use
  ``time_offset_s=28800``).

Every dropped row is counted in :attr:`LoadReport.rows_dropped` under its reason; a file that cannot be used raises
:class:`odcore.errors.TraceFormatError` naming the file, the first bad row and the column.
"""

from __future__ import annotations

import csv
import gzip
import io
import os
import re
import zipfile
import zlib
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
from pandas._libs.parsers import STR_NA_VALUES

from odcore.constants import FORMAT_TZ, LAT, LOC, LON, TIME, USER
from odcore.data.regions import find_regions, pick_region, spans_metro, zone_of_box
from odcore.data.validate import (
    DEFAULT_LIMITS,
    MISSING_TIME,
    PLAUSIBLE_YEARS,
    ArchiveLimits,
    CountedReads,
    Inflation,
    TimeInfo,
    check_member_name,
    decode_text,
    normalise_user_ids,
    numeric_seconds,
    parse_times,
    user_ids_need_text,
)
from odcore.errors import ParameterError, TraceFormatError

__all__ = [
    "BBox",
    "ColumnMapping",
    "LoadReport",
    "RobustBoxCounts",
    "TraceFormat",
    "Traces",
    "cab_files",
    "finalize_traces",
    "load_traces",
    "read_cab_file",
    "trace_format",
    "unpack_cabspotting",
]

# Reasons under which rows are dropped (keys of LoadReport.rows_dropped).
DROP_MISSING = "missing_value"
DROP_DUPLICATE = "duplicate_row"
DROP_BBOX = "outside_bbox"
DROP_DATES = "outside_date_range"
DROP_UNKNOWN_POI = "unknown_poi"

_NS = 1_000_000_000


class TraceFormat(StrEnum):
    """Input formats understood by :func:`load_traces`."""

    AUTO = "auto"
    CSV = "csv"
    PARQUET = "parquet"
    CABSPOTTING = "cabspotting"
    CHECKINS = "checkins"


_TIME_UNITS = ("auto", "iso", "s", "ms")


@dataclass(frozen=True)
class ColumnMapping:
    """Which column of a generic CSV / Parquet table holds what.

    Parameters
    ----------
    user, time, lat, lon:
        Column names in the file.
    loc:
        Optional column with a precomputed location id (integer).
    time_unit:
        ``"iso"`` (text such as ``2008-05-19T07:00:00``), ``"s"`` / ``"ms"`` (Unix seconds / milliseconds) or
        ``"auto"`` (numbers are Unix seconds, text is ISO).
    """

    user: str = USER
    time: str = TIME
    lat: str = LAT
    lon: str = LON
    loc: str | None = None
    time_unit: str = "auto"

    def __post_init__(self) -> None:
        for name in ("user", "time", "lat", "lon"):
            v = getattr(self, name)
            if not isinstance(v, str) or not v:
                raise ParameterError(f"ColumnMapping.{name} must be a non-empty column name, got {v!r}.")
        if self.time_unit not in _TIME_UNITS:
            raise ParameterError(f"ColumnMapping.time_unit must be one of {_TIME_UNITS}, got {self.time_unit!r}.")


# Column names recognised when no mapping is given (lower-cased).
_ALIASES = {
    USER: ("user", "user_id", "userid", "uid", "id", "taxi", "cab", "cab_id", "device", "device_id"),
    TIME: ("time", "timestamp", "datetime", "date_time", "unix_time", "ts", "t", "utc_time"),
    LAT: ("lat", "latitude", "y"),
    LON: ("lon", "lng", "long", "longitude", "x"),
    LOC: ("loc", "location", "location_id", "poi", "poi_id", "venue_id", "cell", "antenna"),
}


ROBUST_Q = 0.5
"""Percent of the points cut at each end, per axis, by the robust box."""
ROBUST_PAD = 0.25
"""The robust box is widened by this fraction of its size on each side."""
ROBUST_BIN_DEG = 1e-4
"""Width (degrees, about 11 m) of the bins the robust box counts points in."""


@dataclass(frozen=True)
class BBox:
    """A latitude/longitude box (inclusive), e.g. to clip GPS glitches hundreds of km away."""

    south: float
    west: float
    north: float
    east: float

    def __post_init__(self) -> None:
        vals = (self.south, self.west, self.north, self.east)
        if not all(np.isfinite(v) for v in vals):
            raise ParameterError(f"bbox values must be finite numbers, got bbox={vals}.")
        if not (-90 <= self.south < self.north <= 90):
            raise ParameterError(f"bbox needs -90 <= south < north <= 90, got south={self.south}, north={self.north}.")
        if not (-180 <= self.west < self.east <= 180):
            raise ParameterError(f"bbox needs -180 <= west < east <= 180, got west={self.west}, east={self.east}.")

    @classmethod
    def parse(cls, value: BBox | str | Iterable[float]) -> BBox:
        """From a :class:`BBox`, ``"south,west,north,east"`` or a 4-sequence."""
        if isinstance(value, BBox):
            return value
        if isinstance(value, str):
            parts = [p for p in re.split(r"[,\s]+", value.strip()) if p]
        else:
            parts = list(value)
        if len(parts) != 4:
            raise ParameterError(f"bbox must be south,west,north,east (4 numbers), got bbox={value!r}.")
        try:
            s, w, n, e = (float(p) for p in parts)
        except (TypeError, ValueError):
            raise ParameterError(f"bbox must be 4 numbers south,west,north,east, got bbox={value!r}.") from None
        return cls(s, w, n, e)

    @classmethod
    def robust(cls, lat: np.ndarray, lon: np.ndarray, *, q: float = ROBUST_Q, pad: float = ROBUST_PAD) -> BBox:
        """The robust box of the points: :meth:`RobustBoxCounts.box` of their counts (the rule of every engine).

        Clips far-away GPS glitches (Cabspotting has fixes at latitude 33 and 50 for a city at 37.7) while
        keeping the whole metropolitan area.
        """
        counts = RobustBoxCounts()
        counts.add(np.asarray(lat, np.float64), np.asarray(lon, np.float64))
        return counts.box(q=q, pad=pad)

    def as_tuple(self) -> tuple[float, float, float, float]:
        return (float(self.south), float(self.west), float(self.north), float(self.east))


class RobustBoxCounts:
    """Counts of points per :data:`ROBUST_BIN_DEG` band of latitude and of longitude, and the robust box they give.

    The one rule for ``bbox="auto"`` in the loader and in every engine: integer counts of *all* usable points
    (no sample), so batches, threads and Spark partitions add up to the same counts whatever their order or
    size, and every engine clips the same rows. The box runs from the band holding the ``q`` % lowest point to
    the band holding the ``q`` % highest, per axis (exact to :data:`ROBUST_BIN_DEG`), widened by ``pad`` × its
    size (at least 0.01°) on each side.

    >>> c = RobustBoxCounts()
    >>> c.add(np.r_[np.full(999, 37.75), 50.0], np.r_[np.full(999, -122.4), 0.0])   # one far glitch
    >>> c.box(q=0.5, pad=0.25).as_tuple()
    (37.7475, -122.4025, 37.7526, -122.3974)
    """

    N_LAT = 1_800_001
    N_LON = 3_600_001

    def __init__(self) -> None:
        self.lat = np.zeros(self.N_LAT, np.int64)
        self.lon = np.zeros(self.N_LON, np.int64)

    @property
    def n(self) -> int:
        return int(self.lat.sum())

    @staticmethod
    def bins(lat: np.ndarray, lon: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Band of each point (rows with a NaN coordinate must be removed first; + 1e-6 band: a coordinate
        written with 4 decimals falls in its own band, not the one below by a rounding error)."""
        bl = np.clip(np.floor((lat + 90.0) / ROBUST_BIN_DEG + 1e-6), 0, RobustBoxCounts.N_LAT - 1).astype(np.int64)
        bo = np.clip(np.floor((lon + 180.0) / ROBUST_BIN_DEG + 1e-6), 0, RobustBoxCounts.N_LON - 1).astype(np.int64)
        return bl, bo

    def add(self, lat: np.ndarray, lon: np.ndarray) -> None:
        """Count the points whose coordinates are both present."""
        ok = ~(np.isnan(lat) | np.isnan(lon))
        if not ok.all():
            lat, lon = lat[ok], lon[ok]
        if not len(lat):
            return
        for dense, b in zip((self.lat, self.lon), self.bins(lat, lon), strict=True):
            lo = int(b.min())
            c = np.bincount(b - lo)
            dense[lo:lo + len(c)] += c

    def add_sparse(self, axis: np.ndarray, band: np.ndarray, n: np.ndarray) -> None:
        """Add counts given as (axis 0 = latitude / 1 = longitude, band, count) rows (:meth:`sparse` output)."""
        axis = np.asarray(axis)
        for k, dense in ((0, self.lat), (1, self.lon)):
            m = axis == k
            np.add.at(dense, np.asarray(band, np.int64)[m], np.asarray(n, np.int64)[m])

    def merge(self, other: RobustBoxCounts) -> None:
        self.lat += other.lat
        self.lon += other.lon

    def sparse(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The non-zero counts as (axis, band, count) arrays (small: a city covers a few thousand bands)."""
        il, io = np.flatnonzero(self.lat), np.flatnonzero(self.lon)
        return (np.r_[np.zeros(len(il), np.int8), np.ones(len(io), np.int8)], np.r_[il, io],
                np.r_[self.lat[il], self.lon[io]])

    def box(self, *, q: float = ROBUST_Q, pad: float = ROBUST_PAD, source: str | None = None) -> BBox:
        """The robust box of the counted points (raises :class:`TraceFormatError` when none was counted)."""
        n = self.n
        if n == 0:
            raise TraceFormatError("no usable rows (every row misses a value).", file=source)
        k_lo = min(int(np.floor(n * q / 100.0)), n - 1)              # 0-based rank of the q % lowest point
        k_hi = max(int(np.ceil(n * (100.0 - q) / 100.0)) - 1, 0)     # ... and of the q % highest
        edges = []
        for dense, off in ((self.lat, 90.0), (self.lon, 180.0)):
            cum = np.cumsum(dense)
            b_lo = int(np.searchsorted(cum, k_lo, side="right"))
            b_hi = int(np.searchsorted(cum, k_hi, side="right"))
            edges.append((round(b_lo * ROBUST_BIN_DEG - off, 6), round((b_hi + 1) * ROBUST_BIN_DEG - off, 6)))
        (lo_lat, hi_lat), (lo_lon, hi_lon) = edges
        dlat = max(hi_lat - lo_lat, 0.01) * pad
        dlon = max(hi_lon - lo_lon, 0.01) * pad
        return BBox(round(max(lo_lat - dlat, -90.0), 6), round(max(lo_lon - dlon, -180.0), 6),
                    round(min(hi_lat + dlat, 90.0), 6), round(min(hi_lon + dlon, 180.0), 6))


@dataclass(frozen=True)
class LoadReport:
    """What a loader read, kept and dropped (with reasons)."""

    source: str
    format: str
    rows_read: int
    rows_kept: int
    rows_dropped: dict[str, int] = field(default_factory=dict)
    bbox_used: tuple[float, float, float, float] | None = None
    rows_adjusted: dict[str, int] = field(default_factory=dict)
    """Rows kept but read by a stated rule (daylight-saving gap / repeated hour, naive times next to UTC offsets)."""
    encoding: str | None = None
    time_unit: str | None = None
    tz: str | None = None
    """Time zone of naive times, local hours and weeks (``load_traces(tz="auto")`` infers it)."""
    tz_source: str | None = None
    """Where :attr:`tz` comes from: ``given``, ``format`` (its documentation), ``file`` (a zone-aware time column)
    or ``coordinates`` (the zone at the centre of the kept box, :func:`odcore.data.regions.zone_of_box`)."""
    regions: tuple[dict, ...] = ()
    """Dense regions of a trace set wider than a metropolitan area (:func:`odcore.data.regions.find_regions`)."""
    region: int | None = None
    """Rank of the region kept (its box is :attr:`bbox_used`), or None when every region is kept."""
    region_left_out: dict[str, int] | None = None
    """With a region kept (:attr:`region`): ``fixes`` outside its box and ``people`` with no fix inside it, left out
    (:func:`region_left_out_words`)."""


@dataclass(frozen=True)
class Traces:
    """A trace table (columns ``user, time, lat, lon[, loc]``, ``time`` UTC) and its :class:`LoadReport`."""

    df: pd.DataFrame
    report: LoadReport

    @property
    def n_users(self) -> int:
        return int(self.df[USER].nunique())

    def summary(self) -> dict[str, Any]:
        """A JSON-able summary: counts, time span, bounding box and the load report."""
        df = self.df
        t = df[TIME]
        return {
            "source": self.report.source,
            "format": self.report.format,
            "users": self.n_users,
            "rows": len(df),
            "rows_read": self.report.rows_read,
            "rows_kept": self.report.rows_kept,
            "rows_dropped": dict(self.report.rows_dropped),
            "bbox_used": list(self.report.bbox_used) if self.report.bbox_used else None,
            "rows_adjusted": dict(self.report.rows_adjusted),
            "encoding": self.report.encoding,
            "time_unit": self.report.time_unit,
            "time_min": t.min().isoformat() if len(df) else None,
            "time_max": t.max().isoformat() if len(df) else None,
            "lat_range": [float(df[LAT].min()), float(df[LAT].max())] if len(df) else None,
            "lon_range": [float(df[LON].min()), float(df[LON].max())] if len(df) else None,
            "has_loc": LOC in df.columns,
            "tz": self.report.tz,
            "tz_source": self.report.tz_source,
            "regions": [dict(r) for r in self.report.regions],
            "region": self.report.region,
            "region_left_out": self.report.region_left_out,
        }


def region_left_out_words(region: int | None, left_out: dict | None, keep_them: str) -> str | None:
    """What keeping one region of a wider trace set leaves out, and how to keep it (``keep_them``: the control or
    flag that keeps every region), or None when nothing is left out.

    >>> region_left_out_words(1, {"fixes": 3917, "people": 2}, "--region all")
    'Region #1 kept: 3,917 fixes outside it are left out (with their trips), and 2 people who have none inside it. To keep them: --region all.'
    """
    if region is None or not left_out or not left_out.get("fixes"):
        return None
    people = left_out.get("people", 0)
    who = (f", and {people:,} {'person' if people == 1 else 'people'} who {'has' if people == 1 else 'have'} none "
           "inside it" if people else "")
    return (f"Region #{region} kept: {left_out['fixes']:,} fixes outside it are left out (with their trips){who}. "
            f"To keep them: {keep_them}.")


# --------------------------------------------------------------------------------------------------------------
# Sources: a path (file, folder, zip) or a binary file-like object; iterate over named members.
# --------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Member:
    name: str          # for messages and cab ids
    path: Path | None = None
    data: bytes | None = None
    inflation: Inflation | None = field(default=None, compare=False, repr=False)

    def raw_bytes(self) -> bytes:
        if self.data is not None:
            return self.data
        assert self.path is not None
        return self.path.read_bytes()

    def text_bytes(self) -> bytes:
        """Content, decompressed when gzip."""
        raw = self.raw_bytes()
        if raw[:2] == b"\x1f\x8b":
            return (self.inflation or Inflation(self.name)).gunzip(raw, self.name)
        return raw

    def head_bytes(self, n: int = 4096) -> bytes:
        """The first ``n`` bytes of the content (decompressing only that much of a gzip stream)."""
        raw = self.raw_bytes()
        if raw[:2] == b"\x1f\x8b":
            try:
                with gzip.GzipFile(fileobj=io.BytesIO(raw)) as g:
                    return g.read(n)
            except (OSError, EOFError, zlib.error) as exc:
                raise TraceFormatError(f"corrupt or truncated gzip data ({exc}).", file=self.name) from None
        return raw[:n]


def _members(source: Any, name: str | None,
             limits: ArchiveLimits = DEFAULT_LIMITS) -> tuple[str, list[_Member]]:
    """Return (display name, members) for a path or a file-like object; archives are read under ``limits``."""
    if hasattr(source, "read"):
        data = source.read()
        if isinstance(data, str):
            data = data.encode()
        disp = name or getattr(source, "name", None) or "<upload>"
        disp = os.path.basename(str(disp))
        inf = Inflation(disp, limits)
        if data[:4] == b"PK\x05\x06" or zipfile.is_zipfile(io.BytesIO(data)):
            return disp, _zip_members(io.BytesIO(data), disp, inf)
        _not_a_broken_zip(data[:4], disp)
        return disp, [_Member(disp, data=data, inflation=inf)]
    path = Path(source)
    if not path.exists():
        raise TraceFormatError("no such file or folder.", file=str(path))
    disp = str(path)
    inf = Inflation(disp, limits)
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith(".")
                       and p.name.lower() not in ("readme.md", "readme.txt", "readme"))
        if not files:
            raise TraceFormatError("the folder holds no data files.", file=disp)
        for p in files:
            inf.count_member(p.name)
        return disp, [_Member(p.name, path=p, inflation=inf) for p in files]
    if zipfile.is_zipfile(path):
        return disp, _zip_members(path, disp, inf)
    with path.open("rb") as f:
        _not_a_broken_zip(f.read(4), disp)
    return disp, [_Member(path.name, path=path, inflation=inf)]


def _base(name: str) -> str:
    """File name of an archive member, whichever slash it uses."""
    return name.replace("\\", "/").rsplit("/", 1)[-1]


def _not_a_broken_zip(head: bytes, disp: str) -> None:
    """A file that starts like a zip but has no readable directory is a truncated or corrupt archive."""
    if head == b"PK\x03\x04" or (disp.lower().endswith(".zip") and head[:2] == b"PK"):
        raise TraceFormatError("corrupt or truncated zip archive (no central directory); download it again.",
                               file=disp)


def _zip_members(src: Any, disp: str, inf: Inflation) -> list[_Member]:
    """Members of a zip, each decompressed in chunks under the caps of ``inf`` (checked before and while reading)."""
    out = []
    own = None if hasattr(src, "read") else open(src, "rb")   # closed below
    counted = CountedReads(own or src)
    try:
        with zipfile.ZipFile(counted) as z:
            for i in z.infolist():
                check_member_name(i.filename, disp)
            infos = [i for i in z.infolist()
                     if not i.is_dir() and not _base(i.filename).startswith(".")
                     and "__MACOSX" not in i.filename
                     and _base(i.filename).lower() not in ("readme.md", "readme.txt", "readme")]
            for i in infos:
                inf.count_member(i.filename)
            declared = sum(i.file_size for i in infos)
            if declared > inf.limits.max_bytes:
                raise TraceFormatError(f"the archive declares {declared / (1 << 20):,.0f} MiB of data, over the cap "
                                       f"of {inf.limits.max_bytes / (1 << 20):,.0f} MiB.", file=disp)
            for i in infos:
                start = counted.count
                with z.open(i) as f:
                    data = inf.read(f, i.filename, i.compress_size, lambda s=start: counted.count - s)
                out.append(_Member(_base(i.filename), data=data, inflation=inf))
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError) as exc:
        raise TraceFormatError(f"corrupt or unsupported zip archive ({exc}).", file=disp) from None
    except RuntimeError as exc:   # encrypted members
        raise TraceFormatError(f"cannot read the zip archive ({exc}); encrypted archives are not read.",
                               file=disp) from None
    finally:
        if own is not None:
            own.close()
    if not out:
        raise TraceFormatError("the zip archive holds no data files.", file=disp)
    if len({m.name for m in out}) != len(out):
        raise TraceFormatError("two members of the zip archive have the same file name in different folders.",
                               file=disp)
    return sorted(out, key=lambda m: m.name)


def _strip_ext(name: str) -> str:
    base = name
    for ext in (".gz", ".txt", ".csv", ".plt", ".dat"):
        if base.lower().endswith(ext):
            base = base[: -len(ext)]
    return base


def _is_checkins_name(n: str) -> bool:
    return "checkin" in n.lower()


def _is_poi_name(n: str) -> bool:
    return "poi" in n.lower() and "coo" in n.lower()


def _detect_format(members: list[_Member], disp: str) -> TraceFormat:
    names = [m.name.lower() for m in members]
    if any(_is_checkins_name(n) for n in names) and any(_is_poi_name(n) for n in names):
        return TraceFormat.CHECKINS
    if all(n.endswith((".parquet", ".pq")) for n in names):
        return TraceFormat.PARQUET
    if all(n.endswith((".csv", ".csv.gz", ".tsv", ".tsv.gz")) for n in names):
        return TraceFormat.CSV
    # Sniff the first line: 4 numeric space-separated fields, lat/lon in range -> Cabspotting.
    head = members[0].head_bytes(4096).decode("utf-8", "replace").splitlines()
    first = head[0].split() if head else []
    if len(first) == 4:
        try:
            lat, lon, occ, t = (float(x) for x in first)
            if abs(lat) <= 90 and abs(lon) <= 180 and occ in (0.0, 1.0) and t > 1e8:
                return TraceFormat.CABSPOTTING
        except ValueError:
            pass
    if head and ("," in head[0] or "\t" in head[0]):
        return TraceFormat.CSV
    raise TraceFormatError(
        "cannot tell the format; pass format= one of csv, parquet, cabspotting, checkins.", file=disp)


# --------------------------------------------------------------------------------------------------------------
# Cabspotting: `lat lon occupancy unix_time`, one file per cab.
# --------------------------------------------------------------------------------------------------------------

_CAB_FIELDS = ("lat", "lon", "occ", "t")
# Unix seconds read as integers are taken as they are when every one lies in these years (the float path's checks,
# odcore.data.validate.numeric_seconds, cannot fail then); otherwise the file goes through the float path.
_CAB_T_FAST = (int((PLAUSIBLE_YEARS[0] - 1970) * 365.2425 * 86400) + 1,
               int((PLAUSIBLE_YEARS[1] - 1970) * 365.2425 * 86400) - 1)


def _read_cab(m: _Member) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One cab file -> (lat, lon, Unix seconds int64; missing = MISSING_TIME), without copying the columns.

    The text is parsed once by ``pyarrow.csv`` with explicit column types into one chunk per column (so
    ``to_numpy`` hands over Arrow's buffers). Times are parsed as int64; a file whose times are not all whole
    seconds in 1990-2100 (or misses one) is parsed again with float times and checked row by row."""
    data = m.text_bytes()
    if _blank(data):
        return np.empty(0), np.empty(0), np.empty(0, np.int64)
    buf = pa.py_buffer(data)
    ro = pcsv.ReadOptions(column_names=list(_CAB_FIELDS), use_threads=False, block_size=max(len(data) + 1, 1 << 20))
    po = pcsv.ParseOptions(delimiter=" ")
    f64 = pa.float64()

    def parse(t_type: pa.DataType) -> pa.Table:
        co = pcsv.ConvertOptions(column_types={"lat": f64, "lon": f64, "occ": f64, "t": t_type},
                                 strings_can_be_null=False)
        return pcsv.read_csv(buf, read_options=ro, parse_options=po, convert_options=co)

    def column(tab: pa.Table, name: str) -> np.ndarray:
        c = tab.column(name)
        c = c.chunk(0) if c.num_chunks == 1 else c.combine_chunks()
        return c.to_numpy(zero_copy_only=False)

    try:
        tab = parse(pa.int64())
        tc = tab.column("t")
        if tc.null_count == 0:
            mm = pc.min_max(tc).as_py()
            if _CAB_T_FAST[0] <= mm["min"] and mm["max"] <= _CAB_T_FAST[1]:
                return column(tab, "lat"), column(tab, "lon"), column(tab, "t")
    except pa.ArrowInvalid:
        pass
    try:
        tab = parse(f64)
    except pa.ArrowInvalid as exc:
        _diagnose_cab(m.name, data, exc)
        raise  # pragma: no cover - _diagnose_cab always raises
    # Unix seconds: range-checked as floats before the integer conversion (missing -> MISSING_TIME).
    return column(tab, "lat"), column(tab, "lon"), _unix_seconds(column(tab, "t"), m.name, "unix_time")


def cab_files(source: str | Path, limits: ArchiveLimits = DEFAULT_LIMITS) -> tuple[str, list[Path], list[str]]:
    """``(display name, files, cab ids)`` of a Cabspotting folder (or one cab file) in the loader's order, without
    reading them (the streamed memory engine reads them in groups: :mod:`odcore.od.engines.cab_stream`).

    Raises
    ------
    TraceFormatError
        No such path, a zip (read it with :func:`load_traces`), no cab file, or two files giving the same cab id.
    """
    p = Path(source)
    if p.is_file() and zipfile.is_zipfile(p):
        raise TraceFormatError("a zip archive is read by load_traces, not streamed.", file=str(p))
    disp, members = _members(p, None, limits)
    members = [m for m in members if not m.name.lower().endswith((".md", ".json", ".html"))]
    if not members:
        raise TraceFormatError("the folder holds no cab file.", file=disp)
    ids = [_strip_ext(m.name).removeprefix("new_") for m in members]
    if len(set(ids)) != len(ids):
        raise TraceFormatError("two files give the same cab id.", file=disp)
    return disp, [m.path for m in members], ids


def trace_format(source: Any, format: str | TraceFormat = "auto", limits: ArchiveLimits = DEFAULT_LIMITS) -> str:
    """The format :func:`load_traces` reads ``source`` (a path) as: ``format`` unless ``auto``, else the one detected
    from the file names and the first line (nothing else is read).

    Raises
    ------
    TraceFormatError
        No such path, or a format that cannot be told.
    """
    try:
        fmt = TraceFormat(format.lower() if isinstance(format, str) else format)
    except ValueError:
        raise ParameterError(f"format must be one of {[f.value for f in TraceFormat]}, got format={format!r}.") from None
    if fmt is not TraceFormat.AUTO:
        return fmt.value
    disp, members = _members(source, None, limits)
    return _detect_format(members, disp).value


def unpack_cabspotting(source: Any, folder: str | Path, *, name: str | None = None,
                       format: str | TraceFormat = "auto", limits: ArchiveLimits = DEFAULT_LIMITS) -> bool:
    """Write the cab files of ``source`` (an upload's bytes as a file-like object, or a path: a zip or one cab
    file) into ``folder``, under the names the loader reads them by, so that a streamed engine reads the same cabs
    in the same order (:mod:`odcore.od.engines.cab_stream`). Returns False, writing nothing, when ``source`` is not
    Cabspotting (``format``, or the format detected as :func:`load_traces` detects it).

    Archives are read under ``limits`` as by :func:`load_traces` (gzip members are written as they are and
    inflated, under the same caps, when read).
    """
    fmt = TraceFormat(format.lower() if isinstance(format, str) else format)
    disp, members = _members(source, name, limits)
    if fmt is TraceFormat.AUTO:
        fmt = _detect_format(members, disp)
    if fmt is not TraceFormat.CABSPOTTING:
        return False
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    for m in members:
        if m.name.lower().endswith((".md", ".json", ".html")):
            continue
        check_member_name(m.name, disp)
        (out / Path(m.name).name).write_bytes(m.raw_bytes())
    return True


def read_cab_file(path: str | Path, limits: ArchiveLimits = DEFAULT_LIMITS) -> tuple[np.ndarray, np.ndarray,
                                                                                     np.ndarray]:
    """One cab file (gzip or plain) -> ``(lat, lon, Unix seconds int64)``, missing time = ``MISSING_TIME``: the
    loader's parser and checks (a bad row raises :class:`TraceFormatError` naming the file, row and column)."""
    p = Path(path)
    m = _Member(p.name, path=p, inflation=Inflation(str(p), limits))
    return _read_cab(m)


def _unix_seconds(t: np.ndarray, fname: str, col: str) -> np.ndarray:
    return numeric_seconds(t, np.isfinite(t) | np.isinf(t), "s", pd.Series(t), fname, col, TimeInfo())


def _diagnose_cab(name: str, data: bytes, exc: Exception) -> None:
    """Slow path after the fast parser failed: name the first bad row and column."""
    cols = ("lat", "lon", "occupancy", "unix_time")
    for i, line in enumerate(data.decode("utf-8", "replace").splitlines(), start=1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 4:
            raise TraceFormatError(
                f"expected 4 space-separated fields 'lat lon occupancy unix_time', got {len(parts)}: {line[:80]!r}.",
                file=name, row=i)
        for c, p in zip(cols, parts, strict=True):
            try:
                float(p)
            except ValueError:
                what = "Unix seconds" if c == "unix_time" else "a number"
                raise TraceFormatError(f"cannot parse {p!r} as {what}.", file=name, row=i, column=c) from None
    raise TraceFormatError(f"cannot parse the file as Cabspotting ({exc}).", file=name)


def _load_cabspotting(members: list[_Member], disp: str) -> tuple[pd.DataFrame, dict[str, int]]:
    members = [m for m in members if not m.name.lower().endswith((".md", ".json", ".html"))]
    workers = max(1, min(len(members), os.cpu_count() or 1))
    if len(members) > 1:
        with ThreadPoolExecutor(workers) as ex:
            parts = list(ex.map(_read_cab, members))
    else:
        parts = [_read_cab(members[0])]
    sizes = np.array([len(p[0]) for p in parts], dtype=np.int64)
    cab_ids = [_strip_ext(m.name).removeprefix("new_") for m in members]
    if len(set(cab_ids)) != len(cab_ids):
        raise TraceFormatError("two files give the same cab id.", file=disp)
    # one table, each file's arrays released as soon as they are copied in (not all files held twice)
    total = int(sizes.sum())
    lat, lon, t = np.empty(total), np.empty(total), np.empty(total, np.int64)
    off = 0
    for i, n in enumerate(sizes.tolist()):
        lat[off:off + n], lon[off:off + n], t[off:off + n] = parts[i]
        parts[i] = None
        off += n
    codes = np.repeat(np.arange(len(members), dtype=np.int32), sizes)
    # Unix seconds (a non-integer value is rounded down; missing = MISSING_TIME, counted below).
    t_int = t.astype(np.int64, copy=False)
    user = pd.Categorical.from_codes(codes, categories=pd.Index(cab_ids, dtype=object))
    df = pd.DataFrame({USER: user, "_t": t_int, LAT: lat, LON: lon}, copy=False)
    df.attrs["_row_in_file"] = (sizes, [m.name for m in members])
    return df, {}


# --------------------------------------------------------------------------------------------------------------
# Check-ins: `user poi unix_time` + POI coordinates `poi lat lon`.
# --------------------------------------------------------------------------------------------------------------

def _read_numeric_table(m: _Member, columns: tuple[str, ...]) -> pd.DataFrame:
    data = m.text_bytes()
    if _blank(data):
        raise TraceFormatError("the file is empty.", file=m.name)
    try:
        df = pd.read_csv(io.BytesIO(data), sep=r"\s+", header=None, engine="c", dtype=np.float64,
                         names=list(columns))
    except ValueError:
        # name the first bad row
        for i, line in enumerate(data.decode("utf-8", "replace").splitlines(), start=1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) != len(columns):
                raise TraceFormatError(f"expected {len(columns)} fields {' '.join(columns)}, got {len(parts)}.",
                                       file=m.name, row=i) from None
            for c, p in zip(columns, parts, strict=True):
                try:
                    float(p)
                except ValueError:
                    raise TraceFormatError(f"cannot parse {p!r} as a number.", file=m.name, row=i,
                                           column=c) from None
        raise
    if df.shape[1] != len(columns) or df.iloc[:, -1].isna().all():
        raise TraceFormatError(f"expected {len(columns)} fields {' '.join(columns)}.", file=m.name)
    return df


def _load_checkins(members: list[_Member], disp: str, poi_source: Any) -> tuple[pd.DataFrame, dict[str, int]]:
    ck = [m for m in members if _is_checkins_name(m.name)] or [m for m in members if not _is_poi_name(m.name)]
    if poi_source is not None:
        _, pm = _members(poi_source, None)
        poi = pm[0]
    else:
        cand = [m for m in members if _is_poi_name(m.name)]
        if not cand:
            raise TraceFormatError("check-ins need a POI coordinates file (poi lat lon): pass poi_source / --poi.",
                                   file=disp)
        poi = cand[0]
    if len(ck) != 1:
        raise TraceFormatError(f"expected one check-ins file, found {[m.name for m in ck]}.", file=disp)
    c = _read_numeric_table(ck[0], ("user", "poi", "unix_time"))
    p = _read_numeric_table(poi, ("poi", "lat", "lon"))
    pid = p["poi"].to_numpy()
    if np.isnan(pid).any():
        raise TraceFormatError("missing POI id.", file=poi.name, row=int(np.flatnonzero(np.isnan(pid))[0]) + 1,
                               column="poi")
    pid = pid.astype(np.int64)
    order = np.argsort(pid, kind="stable")
    spid = pid[order]
    if (np.diff(spid) == 0).any():
        dup = int(spid[np.flatnonzero(np.diff(spid) == 0)[0]])
        raise TraceFormatError(f"POI id {dup} appears twice with coordinates.", file=poi.name, column="poi")
    cpoi = c["poi"].to_numpy()
    cpoi_i = np.where(np.isnan(cpoi), -1, cpoi).astype(np.int64)
    pos = np.clip(np.searchsorted(spid, cpoi_i), 0, max(len(spid) - 1, 0))
    found = (spid[pos] == cpoi_i) & ~np.isnan(cpoi) if len(spid) else np.zeros(len(c), bool)
    idx = order[pos]
    lat = np.where(found, p["lat"].to_numpy()[idx], np.nan)
    lon = np.where(found, p["lon"].to_numpy()[idx], np.nan)
    drops: dict[str, int] = {}
    n_unknown = int((~found & ~np.isnan(cpoi)).sum())
    if n_unknown:
        drops[DROP_UNKNOWN_POI] = n_unknown
    known = found | np.isnan(cpoi)
    t = c["unix_time"].to_numpy()
    t_int = _unix_seconds(t, ck[0].name, "unix_time")
    u = c["user"].to_numpy()
    df = pd.DataFrame({
        USER: _checkin_users(c["user"], ck[0]),
        "_t": t_int,
        LAT: lat, LON: lon, LOC: cpoi_i,
    })
    missing = np.isnan(u) | ~np.isfinite(t) | np.isnan(cpoi)
    df.loc[missing, "_t"] = np.iinfo(np.int64).min
    df = df.loc[known].reset_index(drop=True)
    df.attrs["_file"] = ck[0].name
    return df, drops


def _checkin_users(u: pd.Series, m: _Member) -> pd.Series | np.ndarray:
    """User ids of a check-ins table read as floats: int64 when exact, else the column read again as text.

    Ids at or above 2^53 do not survive a float (distinct ids merge), so then the first column is re-read as text:
    ids that fit int64 become exact integers, larger ones (above 2^63) stay text, as on the CSV path
    (:func:`odcore.data.validate.normalise_user_ids`). A missing id is -1 / missing (the row is dropped and counted)."""
    if not user_ids_need_text(u):
        v = u.to_numpy()
        return np.where(np.isnan(v), -1, v).astype(np.int64)
    txt = pd.read_csv(io.BytesIO(m.text_bytes()), sep=r"\s+", header=None, usecols=[0], dtype=str, engine="c")[0]
    num = pd.to_numeric(txt, errors="coerce")
    exact = pd.api.types.is_integer_dtype(num)   # every id an integer that fits int64 or uint64
    return normalise_user_ids(num if exact else txt.str.strip()).set_axis(u.index)


# --------------------------------------------------------------------------------------------------------------
# Generic CSV / Parquet with a column mapping.
# --------------------------------------------------------------------------------------------------------------

def _read_table(m: _Member, fmt: TraceFormat) -> pd.DataFrame:
    if fmt is TraceFormat.PARQUET:
        try:
            return pd.read_parquet(io.BytesIO(m.raw_bytes()) if m.path is None else m.path)
        except Exception as exc:  # pyarrow raises several types for a corrupt file
            raise TraceFormatError(f"cannot read as Parquet ({type(exc).__name__}: {exc}).", file=m.name) from None
    data, enc = decode_text(m.text_bytes(), m.name)
    if _blank(data):
        raise TraceFormatError("the file is empty.", file=m.name)
    first = data[:65536].decode("utf-8", "replace").lstrip().splitlines()[0]
    try:
        sep = csv.Sniffer().sniff(first, delimiters=",;\t|").delimiter
    except csv.Error:
        sep = ","
    header = [h.strip().strip('"') for h in next(csv.reader([first], delimiter=sep))]
    dups = sorted({h for h in header if header.count(h) > 1})
    if dups:
        raise TraceFormatError(f"column(s) {dups} appear more than once in the header {header}; rename them.",
                               file=m.name, column=dups[0])
    try:
        df = _arrow_csv(data, sep)
    except Exception:
        try:
            df = pd.read_csv(io.BytesIO(data), sep=sep, engine="c")
        except (ValueError, pd.errors.ParserError) as exc:
            msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise TraceFormatError(f"cannot parse as CSV ({msg}).", file=m.name) from None
    df.attrs["_encoding"] = enc
    df.attrs["_csv"] = (data, sep)
    return df


def _blank(data: bytes) -> bool:
    """True when ``data`` holds only whitespace (without copying it, as ``data.strip()`` would)."""
    return _NON_BLANK.search(data) is None


_NON_BLANK = re.compile(rb"\S")


def _arrow_csv(data: bytes, sep: str) -> pd.DataFrame:
    """One pass of ``pyarrow.csv`` over the text (one thread: a server parses one upload at a time and keeps the
    other core for the other sessions), with pandas' missing-value words, into a pandas table.

    ISO times with ``Z`` or an offset come out as UTC timestamps, naive ones as naive timestamps (read later in the
    chosen time zone), columns pyarrow cannot type (mixed offsets, bad cells) as text for the checks of
    :func:`odcore.data.validate.parse_times`. Raises pyarrow's errors on ragged rows or bad quoting (the caller falls
    back to pandas' C parser for its messages)."""
    tab = pcsv.read_csv(io.BytesIO(data), read_options=pcsv.ReadOptions(use_threads=False),
                        parse_options=pcsv.ParseOptions(delimiter=sep),
                        convert_options=pcsv.ConvertOptions(null_values=sorted(STR_NA_VALUES),
                                                            strings_can_be_null=True))
    # all-empty columns are float NaN (as pandas reads them), not objects holding None
    for i, t in enumerate(tab.schema.types):
        if pa.types.is_null(t):
            tab = tab.set_column(i, tab.schema.field(i).with_type(pa.float64()), tab.column(i).cast(pa.float64()))
    return tab.to_pandas(split_blocks=True, self_destruct=True)


def resolve_mapping(columns: list[str], mapping: ColumnMapping | dict | None, fname: str) -> ColumnMapping:
    if isinstance(mapping, dict):
        # roles not named are detected (giving only time_unit does not turn detection off)
        given = {k: v for k, v in mapping.items() if v is not None}
        roles = (USER, TIME, LAT, LON)
        need = [r for r in roles if r not in given]
        if need:
            found = _detect_columns(columns, fname, need=need)
            keep = need + ([LOC] if len(need) == len(roles) and found[LOC] else [])
            given.update({r: found[r] for r in keep})
        mapping = ColumnMapping(**given)
    if mapping is not None:
        for role in ("user", "time", "lat", "lon", "loc"):
            col = getattr(mapping, role)
            if col is not None and col not in columns:
                raise TraceFormatError(
                    f"missing column {col!r} for {role}; the file has columns {columns}.", file=fname, column=col)
        return mapping
    found = _detect_columns(columns, fname, need=[USER, TIME, LAT, LON])
    return ColumnMapping(user=found[USER], time=found[TIME], lat=found[LAT], lon=found[LON], loc=found[LOC])


def _detect_columns(columns: list[str], fname: str, need: list[str]) -> dict[str, str | None]:
    """Columns of each role recognised by name (:data:`_ALIASES`); a role in ``need`` that is absent is an error."""
    lower = {c.lower().strip(): c for c in columns}
    found: dict[str, str | None] = {}
    for role, names in _ALIASES.items():
        found[role] = next((lower[n] for n in names if n in lower), None)
    for role in need:
        if found[role] is None:
            raise TraceFormatError(
                f"missing column for {role} (looked for {list(_ALIASES[role])}); the file has columns {columns}. "
                "Pass a column mapping.", file=fname, column=role)
    return found


def parse_time(s: pd.Series, unit: str, tz: str, fname: str, col: str) -> np.ndarray:
    """Column -> int64 Unix seconds (missing = int64 min); see :func:`odcore.data.validate.parse_times`."""
    return parse_times(s, unit, tz, fname, col)[0]


def _load_table(members: list[_Member], fmt: TraceFormat, mapping: Any, tz: str) -> tuple[pd.DataFrame, dict]:
    frames = []
    info: dict[str, Any] = {"adjusted": {}, "encoding": None, "time_unit": None, "naive": 0, "zone": None}
    for m in members:
        raw = _read_table(m, fmt)
        if len(raw) == 0:
            raise TraceFormatError("the file has a header but no rows.", file=m.name)
        cols = [str(c) for c in raw.columns]
        raw.columns = cols
        mp = resolve_mapping(cols, mapping, m.name)
        t, tinfo = parse_times(raw[mp.time], mp.time_unit, tz, m.name, mp.time)
        for k, v in tinfo.adjusted.items():
            info["adjusted"][k] = info["adjusted"].get(k, 0) + v
        info["time_unit"] = tinfo.unit
        info["naive"] += tinfo.naive
        info["zone"] = info["zone"] or tinfo.zone
        info["encoding"] = raw.attrs.get("_encoding", info["encoding"])
        lat = pd.to_numeric(raw[mp.lat], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
        lon = pd.to_numeric(raw[mp.lon], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
        for col, v in ((mp.lat, lat), (mp.lon, lon)):
            bad = np.isnan(v) & raw[col].notna().to_numpy()
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise TraceFormatError(f"cannot parse {raw[col].iloc[i]!r} as a number (degrees).", file=m.name,
                                       row=i + 1, column=col)
        user = raw[mp.user]
        if user_ids_need_text(user):
            user = _user_as_text(raw, m, mp.user)
        d = {USER: user.to_numpy() if pd.api.types.is_numeric_dtype(user) and not pd.api.types.is_bool_dtype(user)
             else user.astype(object).to_numpy(),
             "_t": t, LAT: lat, LON: lon}
        if mp.loc is not None:
            loc = pd.to_numeric(raw[mp.loc], errors="coerce")
            d[LOC] = loc.to_numpy(dtype=np.float64, na_value=np.nan)
        frames.append(pd.DataFrame(d))
    df = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    # where each row came from (file, 1-based row) for error messages, without a per-row column
    df.attrs["_row_in_file"] = (np.array([len(f) for f in frames], dtype=np.int64), [m.name for m in members])
    df.attrs["_info"] = info
    # missing users / locs count as missing values
    miss_user = df[USER].isna().to_numpy().copy()
    if LOC in df.columns:
        miss_user |= np.isnan(df[LOC].to_numpy(dtype=np.float64))
        df[LOC] = np.where(np.isnan(df[LOC].to_numpy(dtype=np.float64)), -1, df[LOC]).astype(np.int64)
    df.loc[miss_user, "_t"] = MISSING_TIME
    df[USER] = normalise_user_ids(df[USER])
    return df, {}


def _user_as_text(raw: pd.DataFrame, m: _Member, col: str) -> pd.Series:
    """Re-read the user column as text: ids above 2^63 (or beyond 2^53 as floats) must not go through a float."""
    if "_csv" in raw.attrs:
        data, sep = raw.attrs["_csv"]
        return pd.read_csv(io.BytesIO(data), sep=sep, usecols=[col], dtype=str, engine="c")[col]
    u = raw[col]
    if pd.api.types.is_unsigned_integer_dtype(u):
        return u.astype(str)
    raise TraceFormatError("user ids are stored as floating-point numbers beyond 2^53, so distinct ids may have "
                           "merged; store them as text or 64-bit integers.", file=m.name, column=col)


# --------------------------------------------------------------------------------------------------------------
# Common validation, filters, duplicates.
# --------------------------------------------------------------------------------------------------------------

def _where(df: pd.DataFrame, i: int) -> tuple[str | None, int | None]:
    """(file, 1-based row) of row ``i`` of the concatenated table, when known."""
    if "_file" in df.columns:
        return str(df["_file"].iloc[i]), int(df["_row"].iloc[i])
    info = df.attrs.get("_row_in_file")
    if info is not None:
        sizes, names = info
        ends = np.cumsum(sizes)
        k = int(np.searchsorted(ends, i, side="right"))
        start = ends[k] - sizes[k]
        return names[k], int(i - start + 1)
    return df.attrs.get("_file"), i + 1


def to_time_ns(value: Any, tz: str, name: str) -> int:
    try:
        ts = pd.Timestamp(value)
        if ts is pd.NaT:
            raise ValueError
        if ts.tzinfo is None:
            ts = ts.tz_localize(tz, ambiguous=True, nonexistent="shift_forward")
        return int(ts.tz_convert("UTC").as_unit("ns").value)
    except (TypeError, ValueError, OverflowError):   # OutOfBoundsDatetime is a ValueError
        raise ParameterError(f"{name} must be a date or time (ISO 8601) between 1678 and 2261, got "
                             f"{name}={value!r}.") from None


def finalize_traces(df: pd.DataFrame, *, source: str, fmt: str, rows_read: int, drops: dict[str, int] | None = None,
                    time_offset_s: float = 0, bbox: Any = None, start: Any = None, end: Any = None,
                    tz: str = "UTC", min_users: int = 2, region: Any = None) -> Traces:
    """Validate a raw table (``user, _t`` Unix seconds, ``lat, lon[, loc]``), filter, sort and wrap it.

    Also used for in-memory tables (e.g. :func:`odcore.data.synth.generate_city` output) via :func:`traces_from_frame`.
    Missing values, duplicate rows and rows outside the box / date range are dropped and counted; out-of-range
    coordinates raise :class:`TraceFormatError` (they usually mean swapped or mislabelled columns).
    """
    drops = dict(drops or {})
    t = df["_t"].to_numpy()
    lat = df[LAT].to_numpy(dtype=np.float64)
    lon = df[LON].to_numpy(dtype=np.float64)
    imin = np.iinfo(np.int64).min
    missing = (t == imin) | np.isnan(lat) | np.isnan(lon)
    with np.errstate(invalid="ignore"):
        for arr, col, lim in ((lat, LAT, 90), (lon, LON, 180)):
            bad = np.abs(arr) > lim                      # NaN compares False
            if bad.any():
                i = int(np.argmax(bad))
                f, r = _where(df, i)
                raise TraceFormatError(f"{col} {arr[i]} is outside [-{lim}, {lim}] (are latitude and longitude "
                                       "swapped?).", file=f, row=r, column=col)
    keep = ~missing
    if missing.any():
        drops[DROP_MISSING] = drops.get(DROP_MISSING, 0) + int(missing.sum())
    if len(df) == 0 or not keep.any():
        raise TraceFormatError("no usable rows (the file is empty or every row misses a value).", file=source)

    t = t + round(time_offset_s)
    bbox_used = None
    box = None
    if bbox is not None:
        if isinstance(bbox, str) and bbox.strip().lower() == "auto":
            box = BBox.robust(lat[keep], lon[keep])
        else:
            box = BBox.parse(bbox)
    box, regions, region_rank = _region_box(df, keep, lat, lon, box, region)
    left_out = None
    if box is not None:
        bbox_used = box.as_tuple()
        inside = (lat >= box.south) & (lat <= box.north) & (lon >= box.west) & (lon <= box.east)
        out = keep & ~inside
        if out.any():
            drops[DROP_BBOX] = int(out.sum())
        if region_rank is not None:   # a region kept: who and what it leaves out, said where the data is named
            codes = pd.factorize(df[USER])[0]
            had, has = np.zeros(int(codes.max()) + 1, bool), np.zeros(int(codes.max()) + 1, bool)
            had[codes[keep]] = True
            has[codes[keep & inside]] = True
            left_out = {"fixes": int(out.sum()), "people": int((had & ~has).sum())}
        keep &= inside
    if start is not None or end is not None:
        in_range = np.ones(len(t), bool)
        if start is not None:
            in_range &= t * _NS >= to_time_ns(start, tz, "start")
        if end is not None:
            in_range &= t * _NS < to_time_ns(end, tz, "end")
        out = keep & ~in_range
        if out.any():
            drops[DROP_DATES] = int(out.sum())
        keep &= in_range
    if not keep.any():
        raise TraceFormatError(f"no rows left after filtering (dropped: {drops}).", file=source)

    # idx = None means "every row" (no copies on the fast path of a clean, sorted file)
    idx = None if keep.all() else np.flatnonzero(keep)

    def take(a: np.ndarray, ix: np.ndarray | None) -> np.ndarray:
        return a if ix is None else a[ix]

    ucol = df[USER]
    is_cat = isinstance(ucol.dtype, pd.CategoricalDtype)
    if is_cat:
        ucodes = take(ucol.cat.codes.to_numpy(), idx)
    else:
        ucodes = pd.factorize(ucol if idx is None else ucol.iloc[idx], sort=True)[0]
    tk = take(t, idx)
    n = len(tk)
    # Sort by (user, time); skip when already sorted (Cabspotting files are in time order).
    if n < 2:
        order = None
    else:
        du = np.diff(ucodes)
        already = bool(((du > 0) | ((du == 0) & (np.diff(tk) >= 0))).all())
        del du
        order = None if already else np.lexsort((tk, ucodes))
    sel = idx if order is None else take(np.arange(len(t)), idx)[order]
    ucodes_s = take(ucodes, order)
    t_s = take(tk, order)
    # Exact duplicate rows (same user, time, lat, lon[, loc]) -> drop and count.
    same_ut = np.zeros(n, bool)
    if n > 1:
        same_ut[1:] = (ucodes_s[1:] == ucodes_s[:-1]) & (t_s[1:] == t_s[:-1])
    dup = None
    if same_ut.any():
        grp = same_ut.copy()
        grp[:-1] |= same_ut[1:]
        cand = np.flatnonzero(grp)
        rows = cand if sel is None else sel[cand]
        sub = pd.DataFrame({"u": ucodes_s[cand], "t": t_s[cand], "a": lat[rows], "o": lon[rows]})
        if LOC in df.columns:
            sub["l"] = df[LOC].to_numpy()[rows]
        d = sub.duplicated().to_numpy()
        if d.any():
            dup = np.zeros(n, bool)
            dup[cand] = d
            drops[DROP_DUPLICATE] = int(d.sum())
    del same_ut
    if dup is None:
        fin = sel
    else:
        fin = np.flatnonzero(~dup) if sel is None else sel[~dup]
    kept_as_read = order is None and dup is None     # fin is idx: the user codes and times taken above are final
    if is_cat:
        # remove unused categories by a bincount (pandas' version sorts all codes)
        codes = ucodes if kept_as_read else take(ucol.cat.codes.to_numpy(), fin)
        cats = ucol.cat.categories
        used = np.bincount(codes, minlength=len(cats)) > 0
        n_users = int(used.sum())
        if n_users < len(cats):
            remap = (np.cumsum(used) - 1).astype(codes.dtype)
            codes = remap[codes]
        us = pd.Categorical.from_codes(codes, categories=cats[used])
    else:
        us = take(ucol.to_numpy(), fin)
        n_users = int(ucodes.max()) + 1 if len(ucodes) else 0   # duplicates never remove a user's last row
    tt = (tk if kept_as_read else take(t, fin)) * _NS
    out = pd.DataFrame({
        USER: us,
        TIME: pd.array(tt.view("datetime64[ns]"), dtype="datetime64[ns, UTC]"),
        LAT: take(lat, fin),
        LON: take(lon, fin),
    }, copy=False)
    if LOC in df.columns:
        out[LOC] = take(df[LOC].to_numpy(), fin).astype(np.int64)
    if n_users < min_users:
        raise TraceFormatError(
            f"only {n_users} user(s) after loading; weekly OD counts and attacks need at least {min_users} users.",
            file=source, column=USER)
    info = df.attrs.get("_info") or {}
    report = LoadReport(source=source, format=fmt, rows_read=int(rows_read), rows_kept=len(out),
                        rows_dropped={k: v for k, v in drops.items() if v}, bbox_used=bbox_used,
                        rows_adjusted={k: v for k, v in info.get("adjusted", {}).items() if v},
                        encoding=info.get("encoding"), time_unit=info.get("time_unit"), tz=tz,
                        regions=tuple(r.as_dict() for r in regions), region=region_rank,
                        region_left_out=left_out)
    return Traces(out, report)


def _region_box(df: pd.DataFrame, keep: np.ndarray, lat: np.ndarray, lon: np.ndarray, box: BBox | None,
                region: Any) -> tuple[BBox | None, list, int | None]:
    """The box to keep after ``region``: ``None`` / ``"all"`` keeps ``box``; ``"S,W,N,E"`` is a box; ``"auto"``
    keeps the densest region when the data (``box``, else its robust box) spans more than a metropolitan area;
    a rank ``N`` keeps the N-th region. Returns (box, regions listed, rank kept)."""
    if region is None or (isinstance(region, str) and region.strip().lower() in ("", "all", "none", "off")):
        return box, [], None
    if isinstance(region, str) and re.search(r"[,\s]", region.strip()):
        return BBox.parse(region), [], None
    auto = isinstance(region, str) and region.strip().lower() == "auto"
    if auto and not spans_metro(box if box is not None else BBox.robust(lat[keep], lon[keep])):
        return box, [], None
    idx = np.flatnonzero(keep)
    ucol = df[USER]
    codes = (ucol.cat.codes.to_numpy()[idx] if isinstance(ucol.dtype, pd.CategoricalDtype)
             else pd.factorize(ucol.iloc[idx])[0])
    regions = find_regions(codes, lat[idx], lon[idx])
    r = pick_region(regions, region)
    return BBox(*r.bbox), regions, r.rank


def traces_from_frame(df: pd.DataFrame, *, source: str = "<dataframe>", **kw: Any) -> Traces:
    """Wrap an in-memory table that already has the trace columns (``time`` tz-aware or naive UTC)."""
    missing = [c for c in (USER, TIME, LAT, LON) if c not in df.columns]
    if missing:
        raise TraceFormatError(f"missing columns {missing}; have {list(df.columns)}.", file=source,
                               column=missing[0])
    raw = pd.DataFrame({USER: df[USER].to_numpy() if not isinstance(df[USER].dtype, pd.CategoricalDtype)
                        else df[USER].array,
                        "_t": parse_time(df[TIME], "auto", "UTC", source, TIME),
                        LAT: df[LAT].to_numpy(np.float64), LON: df[LON].to_numpy(np.float64)})
    if LOC in df.columns:
        raw[LOC] = df[LOC].to_numpy(np.int64)
    return finalize_traces(raw, source=source, fmt="dataframe", rows_read=len(df), **kw)


# --------------------------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------------------------

def load_traces(source: Any, *, format: str | TraceFormat = "auto", mapping: ColumnMapping | dict | None = None,
                tz: str = "UTC", time_offset_s: float = 0, bbox: Any = None, start: Any = None, end: Any = None,
                poi_source: Any = None, name: str | None = None, min_users: int = 2,
                limits: ArchiveLimits = DEFAULT_LIMITS, region: Any = None) -> Traces:
    """Load traces from a file, folder, zip or binary file-like object into the trace schema.

    Parameters
    ----------
    source:
        A path (file, folder or zip) or a binary file-like object (an upload; ``name`` gives the file name).
    format:
        ``auto``, ``csv``, ``parquet``, ``cabspotting`` or ``checkins`` (:class:`TraceFormat`).
    mapping:
        For csv / parquet: a :class:`ColumnMapping` (or a dict of its fields). Default: recognise common names.
    tz:
        Time zone in which naive (offset-less) times in text columns, and naive ``start`` / ``end``, are read.
        Unix times are UTC. The table always stores UTC. ``"auto"``: the format's documented zone (Cabspotting:
        America/Los_Angeles), else the zone a zone-aware time column states, else the zone at the centre of the
        kept box (:func:`odcore.data.regions.zone_of_box`; naive times are then read in it). The zone in effect
        and its source are :attr:`LoadReport.tz` and :attr:`LoadReport.tz_source`.
    time_offset_s:
        Seconds added to every time (the shared check-in sets are 8 h early: ``28800``).
    bbox:
        ``None`` (keep all), ``"auto"`` (robust percentile box, clips GPS glitches), a :class:`BBox`,
        ``"south,west,north,east"`` or a 4-sequence. Rows outside are dropped and counted.
    start, end:
        Keep ``start <= time < end`` (dates or times; naive ones in ``tz``). Rows outside are dropped and counted.
    poi_source:
        For check-ins: the POI coordinates file (``poi lat lon``); found automatically in a folder / zip.
    name:
        File name of a file-like ``source`` (format detection and messages).
    min_users:
        Fewest distinct users accepted (default 2: a single user cannot give OD counts or membership games).
    limits:
        Caps on decompressed size, member count and compression ratio of zip / gzip input
        (:class:`odcore.data.validate.ArchiveLimits`), checked while reading.
    region:
        ``None`` / ``"all"`` (keep every region), ``"auto"`` (when the data spans more than a metropolitan area,
        keep the densest region of users' homes, :func:`odcore.data.regions.find_regions`), a rank ``N`` (the
        N-th densest) or a box ``"S,W,N,E"``. The regions found are :attr:`LoadReport.regions`.

    Returns
    -------
    Traces

    Raises
    ------
    TraceFormatError
        Missing columns, unparsable values (naming file, row and column), out-of-range coordinates, empty files,
        fewer than ``min_users`` users or no rows left after filters.
    """
    try:
        fmt = TraceFormat(format.lower() if isinstance(format, str) else format)
    except ValueError:
        raise ParameterError(f"format must be one of {[f.value for f in TraceFormat]}, got format={format!r}.") from None
    auto_tz = isinstance(tz, str) and tz.strip().lower() == "auto"
    if not auto_tz:
        _check_tz(tz)
    disp, members = _members(source, name, limits)
    if fmt is TraceFormat.AUTO:
        fmt = _detect_format(members, disp)

    def read(read_tz: str) -> tuple[Traces, dict]:
        if fmt is TraceFormat.CABSPOTTING:
            raw, drops = _load_cabspotting(members, disp)
        elif fmt is TraceFormat.CHECKINS:
            raw, drops = _load_checkins(members, disp, poi_source)
        else:
            raw, drops = _load_table(members, fmt, mapping, read_tz)
        info = raw.attrs.get("_info") or {}
        rows_read = len(raw) + sum(drops.values())
        return finalize_traces(raw, source=disp, fmt=fmt.value, rows_read=rows_read, drops=drops,
                               time_offset_s=time_offset_s, bbox=bbox, start=start, end=end, tz=read_tz,
                               min_users=min_users, region=region), info

    if not auto_tz:
        t, _ = read(tz)
        return Traces(t.df, replace(t.report, tz=tz, tz_source="given"))
    first = FORMAT_TZ.get(fmt.value, "UTC")
    t, info = read(first)
    if fmt.value in FORMAT_TZ:
        zone, src = first, "format"
    elif info.get("zone"):
        zone, src = str(info["zone"]), "file"
    else:
        box = (BBox(*t.report.bbox_used) if t.report.bbox_used
               else BBox.robust(t.df[LAT].to_numpy(), t.df[LON].to_numpy()))
        zone, src = zone_of_box(box), "coordinates"
        if zone != first and (info.get("naive") or start is not None or end is not None):
            t, _ = read(zone)             # naive times (and a naive start / end) are local times of that zone
    return Traces(t.df, replace(t.report, tz=zone, tz_source=src))


def _check_tz(tz: str) -> None:
    try:
        pd.Timestamp("2020-01-01").tz_localize(tz)
    except Exception:
        raise ParameterError(f"tz must be an IANA time zone such as 'UTC' or 'America/Los_Angeles', got tz={tz!r}.") \
            from None
