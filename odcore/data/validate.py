"""One validation layer for everything that comes in: archives, text encodings, times, user ids, parameters.

Every way data enters the lab (``python -m odcore``, the dashboard's upload, :func:`odcore.data.traces.load_traces`)
goes through these functions, so the same input gets the same checks, the same defaults and the same messages
(file, row, column, the bad value and what would be accepted).

- **Archives** (:class:`ArchiveLimits`): zip and gzip are decompressed in chunks and stopped as soon as the total
  decompressed size, the number of members or the compression ratio passes its cap; zip members whose names point
  outside the archive ("zip slip"), nested archives and empty archives are refused.
- **Encodings** (:func:`decode_text`): UTF-8, UTF-8 with BOM, UTF-16 with BOM, else Latin-1 (every byte is a
  Latin-1 character, so this never fails; the encoding used is reported). HTML, JSON and binary files saved as
  ``.csv`` are named as such.
- **Times** (:func:`parse_times`): numbers are range-checked as floats before any integer conversion; the unit
  (Unix seconds, milliseconds, micro-, nanoseconds) is detected from the median, and a median date outside
  :data:`PLAUSIBLE_YEARS` is an error that names the likely unit; ISO text may mix UTC offsets and naive times
  (naive ones are local times in ``tz``); local times in a daylight-saving gap or in the repeated hour are
  resolved by a stated rule and counted.
- **User ids** (:func:`normalise_user_ids`): integers that fit int64 stay integers, anything else (including ids
  above 2^63) is kept as text, never through a float.
- **Parameters** (:data:`PARAMETERS`, :func:`check_param`, defined in :mod:`odcore.data.params` so that the command
  line checks its flags without importing numpy or pandas): one rule per parameter name, with limits that bound
  memory and time, used by every subcommand (including values from ``--config``) and by the engine's configs.
"""

from __future__ import annotations

import codecs
import io
import math
import re
import warnings
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import PurePosixPath, PureWindowsPath
from typing import Any

import numpy as np
import pandas as pd

from odcore.constants import TIME
from odcore.data.params import (  # noqa: F401  (the parameter rules, re-exported where they were first defined)
    MAX_MONTE_CARLO_DRAWS,
    PARAMETERS,
    Rule,
    check_monte_carlo_work,
    check_param,
    check_params,
)
from odcore.errors import ParameterError, TraceFormatError

__all__ = [
    "DEFAULT_LIMITS",
    "MAX_GRID_CELLS",
    "PARAMETERS",
    "PLAUSIBLE_YEARS",
    "ArchiveLimits",
    "Inflation",
    "check_grid_size",
    "check_param",
    "check_params",
    "decode_text",
    "parse_times",
]

MISSING_TIME = np.iinfo(np.int64).min
"""Marker of a missing time in the loaders' int64 Unix-seconds column."""

# ----------------------------------------------------------------------------------------------------------------
# Archives
# ----------------------------------------------------------------------------------------------------------------

_MiB = 1 << 20


@dataclass(frozen=True)
class ArchiveLimits:
    """Caps checked while decompressing (zip members, gzip streams), so a bomb stops early.

    Parameters
    ----------
    max_bytes:
        Total decompressed bytes over every member of one input (default 2 GiB).
    max_members:
        Data files in one folder or zip (default 20,000; Cabspotting has 536 cab files).
    max_ratio:
        Decompressed / compressed size of one member, checked once it has produced ``ratio_after`` bytes
        (default 100; CSV and Cabspotting text compress 3-20x, a file of zeros ~1000x). A gzip member is checked
        as it is read, against the compressed bytes read so far (a zip member too, when its reader counts them),
        so a bomb stops after a few ``ratio_after``.
    ratio_after:
        Bytes a member may produce before the ratio is checked (default 16 MiB: small files of repeated rows
        may compress very well and are harmless).
    """

    max_bytes: int = 2 << 30
    max_members: int = 20_000
    max_ratio: float = 100.0
    ratio_after: int = 16 * _MiB

    def __post_init__(self) -> None:
        for name in ("max_bytes", "max_members", "ratio_after"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ParameterError(f"ArchiveLimits.{name} must be an integer >= 1, got {name}={v!r}.")
        if not (self.max_ratio > 1 and math.isfinite(self.max_ratio)):
            raise ParameterError(f"ArchiveLimits.max_ratio must be a finite number > 1, got {self.max_ratio!r}.")


DEFAULT_LIMITS = ArchiveLimits()
_CHUNK = 1 * _MiB
_FIRST_CHUNK = 64 * 1024
_GZIP_STEP = 64 * _MiB


class CountedReads:
    """A binary file (for :class:`zipfile.ZipFile`) that counts the bytes read from it: how much of a member's
    compressed data its reader has taken, for :meth:`Inflation.read`'s ratio check."""

    def __init__(self, f: Any) -> None:
        self._f = f
        self.count = 0

    def read(self, n: int = -1) -> bytes:
        b = self._f.read(n)
        self.count += len(b)
        return b

    def __getattr__(self, name: str) -> Any:
        return getattr(self._f, name)


@dataclass
class Inflation:
    """Decompressed bytes used so far by one input (shared by its members)."""

    source: str
    limits: ArchiveLimits = DEFAULT_LIMITS
    used: int = 0
    members: int = 0

    def count_member(self, name: str) -> None:
        self.members += 1
        if self.members > self.limits.max_members:
            raise TraceFormatError(
                f"more than {self.limits.max_members:,} data files; the limit keeps memory bounded "
                f"(member {name!r}). Merge the files or raise ArchiveLimits.max_members.", file=self.source)

    def read(self, stream: Any, name: str, compressed: int, read_so_far: Callable[[], int] | None = None) -> bytes:
        """Read ``stream`` to the end in chunks, stopping at the caps (``compressed`` = bytes it came from).

        ``read_so_far()``, when given, says how many compressed bytes the stream has read: the ratio is then
        checked against them as the member is read (in chunks of 64 KiB until ``2 * ratio_after``, which keeps the
        zip reader from taking more compressed bytes than it needs, so a zip member that is a bomb stops soon after
        ``ratio_after``, as a gzip one does), else against the member's whole size."""
        buf = io.BytesIO()
        out = 0
        lim = self.limits
        while True:
            chunk = stream.read(_FIRST_CHUNK if read_so_far and out <= 2 * lim.ratio_after else _CHUNK)
            if not chunk:
                break
            out += len(chunk)
            self.used += len(chunk)
            if self.used > lim.max_bytes:
                raise TraceFormatError(
                    f"member {name!r}: decompressed data passes the cap of {lim.max_bytes / _MiB:,.0f} MiB "
                    "(stopped while reading); split the input or raise ArchiveLimits.max_bytes.", file=self.source)
            seen = min(read_so_far(), compressed) if read_so_far else compressed
            if out > lim.ratio_after and out > lim.max_ratio * max(seen, 1):
                first = "its first " if seen < compressed else ""
                raise TraceFormatError(
                    f"member {name!r} expands more than {lim.max_ratio:g}x ({first}{seen:,} compressed bytes gave "
                    f"over {out / _MiB:,.0f} MiB; stopped while reading): this looks like a decompression bomb.",
                    file=self.source)
            buf.write(chunk)
        return buf.getvalue()

    def gunzip(self, raw: bytes, name: str) -> bytes:
        """Decompress gzip bytes (several concatenated members allowed) under the caps.

        ``zlib`` inflates up to :data:`_GZIP_STEP` bytes a call (``ratio_after`` at first, then doubling), capped
        at what the limits still allow (the remaining total and the file's ratio cap). After each call the bytes
        produced are set against the compressed bytes read so far, so a bomb stops once it has produced about
        ``2 * ratio_after``, and a file is inflated in a few large buffers, without the chunk copies of a stream
        reader."""
        lim = self.limits
        cap = max(lim.ratio_after, int(lim.max_ratio * max(len(raw), 1)))
        parts: list[bytes] = []
        out = 0
        data = raw
        try:
            while True:
                d = zlib.decompressobj(wbits=31)   # gzip wrapper: header, CRC-32 and size checked by zlib
                while True:
                    allowed = min(cap - out, lim.max_bytes - self.used)
                    step = min(_GZIP_STEP, max(lim.ratio_after, out))
                    chunk = d.decompress(data, min(max(allowed, 0) + 1, step))
                    out += len(chunk)
                    self.used += len(chunk)
                    read = len(raw) - len(d.unused_data if d.eof else d.unconsumed_tail)
                    if len(chunk) > allowed or (out > lim.ratio_after and out > lim.max_ratio * max(read, 1)):
                        if self.used > lim.max_bytes:
                            raise TraceFormatError(
                                f"member {name!r}: decompressed data passes the cap of {lim.max_bytes / _MiB:,.0f} "
                                "MiB (stopped while reading); split the input or raise ArchiveLimits.max_bytes.",
                                file=self.source)
                        raise TraceFormatError(
                            f"member {name!r} expands more than {lim.max_ratio:g}x (its first {read:,} compressed "
                            f"bytes gave over {out / _MiB:,.0f} MiB; stopped while reading): this looks like a "
                            "decompression bomb.", file=self.source)
                    if chunk:
                        parts.append(chunk)
                    if d.eof:
                        break
                    data = d.unconsumed_tail
                    if not chunk and not data:
                        raise EOFError("compressed file ended before the end-of-stream marker was reached")
                data = d.unused_data
                if not data.strip(b"\x00"):             # the end, or the zero padding gzip readers accept
                    break
        except (OSError, EOFError, zlib.error) as exc:
            raise TraceFormatError(f"member {name!r}: corrupt or truncated gzip data ({exc}).",
                                   file=self.source) from None
        if len(parts) == 1:
            return parts[0]
        return b"".join(parts)


def check_member_name(name: str, source: str) -> None:
    """Refuse archive member names that point outside the archive (absolute paths, ``..``, drive letters)."""
    p = PurePosixPath(name.replace("\\", "/"))
    if p.is_absolute() or ".." in p.parts or PureWindowsPath(name).drive:
        raise TraceFormatError(f"archive member {name!r} points outside the archive (zip slip); refusing the "
                               "archive. Re-create it with relative names.", file=source)
    if name.lower().endswith((".zip", ".jar", ".7z", ".rar", ".tar", ".tgz", ".tar.gz")):
        raise TraceFormatError(f"archive member {name!r} is itself an archive; nested archives are not read. "
                               "Unpack it and upload the inner archive or its files.", file=source)


# ----------------------------------------------------------------------------------------------------------------
# Text encodings
# ----------------------------------------------------------------------------------------------------------------

def decode_text(data: bytes, name: str) -> tuple[bytes, str]:
    """Return ``(UTF-8 bytes without BOM, encoding read)``; refuse binary, HTML and JSON content with its name.

    UTF-8 (with or without BOM) and UTF-16 with BOM are read as such; anything else that is not valid UTF-8 is
    read as Latin-1 (ISO-8859-1), which maps every byte to a character.
    """
    enc = "utf-8"
    if data.startswith(codecs.BOM_UTF8):
        data, enc = data[len(codecs.BOM_UTF8):], "utf-8-sig"
    elif data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            return data.decode("utf-16").encode("utf-8"), "utf-16"
        except UnicodeDecodeError as exc:
            raise TraceFormatError(f"the file starts with a UTF-16 mark but is not UTF-16 ({exc}).", file=name) \
                from None
    head = data[:4096]
    if b"\x00" in head:
        raise TraceFormatError("this is a binary file, not text (CSV/TSV); upload CSV, Parquet or a zip of them.",
                               file=name)
    start = head.lstrip()[:64].lower()
    if start.startswith((b"<!doctype html", b"<html", b"<?xml", b"<")):
        raise TraceFormatError("this is HTML/XML (e.g. a web page saved as .csv), not a table of traces.",
                               file=name)
    if start.startswith((b"{", b"[")):
        raise TraceFormatError("this is JSON, not CSV; export the table as CSV or Parquet with columns user, "
                               "time, lat, lon.", file=name)
    if not data.isascii():
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            return data.decode("latin-1").encode("utf-8"), "latin-1"
    return data, enc


# ----------------------------------------------------------------------------------------------------------------
# Times
# ----------------------------------------------------------------------------------------------------------------

PLAUSIBLE_YEARS = (1990, 2100)
"""A column whose median time falls outside these years is read with the wrong unit or is not a time."""
VALID_YEARS = (1900, 2200)
"""Every single time must fall in these years (well inside what nanosecond timestamps can hold)."""

_SEC_PER_YEAR = 365.2425 * 86400
_UNIT_SCALE = {"s": 1.0, "ms": 1e3, "us": 1e6, "ns": 1e9}
_UNIT_WORDS = {"s": "Unix seconds", "ms": "Unix milliseconds", "us": "Unix microseconds", "ns": "Unix nanoseconds"}
_T_LO = (VALID_YEARS[0] - 1970) * _SEC_PER_YEAR
_T_HI = (VALID_YEARS[1] - 1970) * _SEC_PER_YEAR
_OFFSET_RE = r"\d:\d\d(?::\d\d(?:[.,]\d*)?)?\s*(?:[zZ]|UTC|GMT|[+-]\d\d(?::?\d\d)?)$"


@dataclass
class TimeInfo:
    """What :func:`parse_times` did: the unit used and how many times were adjusted, by rule."""

    unit: str = "iso"
    adjusted: dict[str, int] = field(default_factory=dict)
    naive: int = 0
    """Times read as local times in ``tz`` (naive text or datetimes): their instants depend on the zone."""
    zone: str | None = None
    """The zone a zone-aware datetime column states (``UTC`` included), else None."""


def _year(sec: float) -> float:
    return 1970 + sec / _SEC_PER_YEAR


def _fmt_time(sec: float) -> str:
    y = _year(sec)
    if VALID_YEARS[0] <= y < VALID_YEARS[1]:
        return pd.Timestamp(int(sec), unit="s", tz="UTC").strftime("%Y-%m-%d %H:%M UTC")
    return f"year {y:.0f}"


def _show(v: Any) -> str:
    """A cell value as the user wrote it (datetimes as ISO text, not their Python repr)."""
    return repr(v.isoformat() if hasattr(v, "isoformat") else v)


def _bad(msg: str, fname: str, i: int, col: str) -> TraceFormatError:
    return TraceFormatError(msg, file=fname, row=i + 1, column=col)


def numeric_seconds(v: np.ndarray, ok: np.ndarray, unit: str, raw: pd.Series, fname: str, col: str,
                     info: TimeInfo) -> np.ndarray:
    """Float Unix times -> int64 seconds: unit checked on the median, every value range-checked as a float."""
    inf = np.isinf(v) & ok
    if inf.any():
        i = int(np.flatnonzero(inf)[0])
        raise _bad(f"time {raw.iloc[i]!r} is not a finite number.", fname, i, col)
    if not ok.any():
        return np.full(len(v), MISSING_TIME, np.int64)
    med = float(np.median(v[ok]))
    fits = [u for u, k in _UNIT_SCALE.items() if PLAUSIBLE_YEARS[0] <= _year(med / k) <= PLAUSIBLE_YEARS[1]]
    lo, hi = PLAUSIBLE_YEARS
    if unit == "auto":
        if not fits:
            raise TraceFormatError(
                f"the median time {med:.15g} is {_fmt_time(med)} as Unix seconds and {_fmt_time(med / 1e3)} as "
                f"milliseconds: neither is within {lo}-{hi}. Is this the time column (Unix times of {lo}-{hi} are "
                f"{(lo - 1970) * _SEC_PER_YEAR:.3g} to {(hi - 1970) * _SEC_PER_YEAR:.3g} seconds)?",
                file=fname, column=col)
        unit = fits[0]
    elif unit not in fits:
        likely = (f" The values look like {_UNIT_WORDS[fits[0]]}: use time_unit={fits[0]!r} (--time-unit "
                  f"{fits[0]}).") if fits and fits[0] in ("s", "ms") else (
            f" The values look like {_UNIT_WORDS[fits[0]]}: use time_unit='auto'." if fits else
            " No unit puts them there: is this the time column?")
        raise TraceFormatError(
            f"read as {_UNIT_WORDS[unit]} (time_unit={unit!r}) the median time is {_fmt_time(med / _UNIT_SCALE[unit])}, "
            f"outside {lo}-{hi}.{likely}", file=fname, column=col)
    info.unit = unit
    sec = v / _UNIT_SCALE[unit]
    with np.errstate(invalid="ignore"):
        out_range = ok & ((sec < _T_LO) | (sec >= _T_HI))
    if out_range.any():
        i = int(np.flatnonzero(out_range)[0])
        raise _bad(f"time {raw.iloc[i]!r} ({_UNIT_WORDS[unit]}) is {_fmt_time(sec[i])}, outside "
                   f"{VALID_YEARS[0]}-{VALID_YEARS[1]}; fix or remove the row.", fname, i, col)
    return np.where(ok, np.floor(np.where(ok, sec, 0.0)).astype(np.int64), MISSING_TIME)


def _dt_seconds(dt: pd.Series) -> np.ndarray:
    """Seconds since the epoch of a tz-aware datetime Series (any resolution); NaT -> MISSING_TIME."""
    # the UTC instants as integers of the column's unit (NaT: int64 min, replaced by the caller), floored to seconds
    per_s = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}[dt.dt.unit]
    return dt.array.asi8 // per_s


def localize(naive: pd.Series, tz: str, info: TimeInfo | None = None) -> pd.Series:
    """Read naive local times in ``tz`` with an explicit daylight-saving rule; return tz-aware times.

    A local time that does not exist (the hour skipped when clocks go forward) is read with the UTC offset in
    force just before the change (02:30 on a spring-forward night in Los Angeles = 02:30 PST = 03:30 PDT); a local
    time that happens twice (the hour repeated when clocks go back) is read as its first occurrence (daylight
    time). Both are counted in ``info.adjusted`` (``dst_gap_shifted``, ``dst_ambiguous_first``).
    """
    loc = naive.dt.tz_localize(tz, ambiguous="NaT", nonexistent="NaT")
    fail = (loc.isna() & naive.notna()).to_numpy()
    if not fail.any():
        return loc
    sub = naive[fail]
    amb = sub.dt.tz_localize(tz, ambiguous=np.ones(len(sub), bool), nonexistent="NaT")
    gap = amb.isna().to_numpy()
    fixed = amb.copy()
    if gap.any():
        g = sub[gap]
        before = (g - pd.Timedelta(hours=6)).dt.tz_localize(tz, ambiguous=True, nonexistent="shift_forward")
        off = before.dt.tz_localize(None) - before.dt.tz_convert("UTC").dt.tz_localize(None)
        fixed[gap] = (g - off).dt.tz_localize("UTC").dt.tz_convert(tz)
    out = loc.copy()
    out[fail] = fixed
    if info is not None:
        n_gap, n_amb = int(gap.sum()), int((~gap).sum())
        if n_gap:
            info.adjusted["dst_gap_shifted"] = info.adjusted.get("dst_gap_shifted", 0) + n_gap
        if n_amb:
            info.adjusted["dst_ambiguous_first"] = info.adjusted.get("dst_ambiguous_first", 0) + n_amb
    return out


def _first_bad_text(txt: pd.Series, bad: np.ndarray, fname: str, col: str) -> TraceFormatError:
    i = int(np.flatnonzero(bad)[0])
    v = str(txt.iloc[i])
    m = re.match(r"^\s*([+-]?\d{4,})-\d", v)
    if m and not (VALID_YEARS[0] <= int(m.group(1)) < VALID_YEARS[1]):
        return _bad(f"time {v!r} is in year {int(m.group(1))}, outside {VALID_YEARS[0]}-{VALID_YEARS[1]}; fix or "
                    "remove the row.", fname, i, col)
    return _bad(f"cannot parse {v!r} as a time (expected ISO 8601 text such as 2024-03-04T08:15:00, optionally "
                "with Z or +01:00, or Unix seconds).", fname, i, col)


def _parse_iso(txt: pd.Series, tz: str, fname: str, col: str, info: TimeInfo) -> np.ndarray:
    miss = txt.isna().to_numpy()
    has_off = txt.str.contains(_OFFSET_RE, regex=True, na=False).to_numpy()
    out = np.full(len(txt), MISSING_TIME, np.int64)
    bad = np.zeros(len(txt), bool)
    for aware in (True, False):
        sel = (has_off if aware else ~has_off) & ~miss
        if not sel.any():
            continue
        part = txt[sel]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            dt = pd.to_datetime(part, format="ISO8601", errors="coerce", utc=aware)
            nat = dt.isna().to_numpy()
            if nat.any():   # other layouts (e.g. "03/04/2024 08:15"): element-wise, only for those rows
                dt[nat] = pd.to_datetime(part[nat], format="mixed", errors="coerce", utc=aware)
                nat = dt.isna().to_numpy()
        if not aware and getattr(dt.dt, "tz", None) is None:
            dt = localize(dt, tz, info)
        idx = np.flatnonzero(sel)
        bad[idx[nat]] = True
        ok = ~nat
        out[idx[ok]] = _dt_seconds(dt[ok])
    if bad.any():
        raise _first_bad_text(txt, bad, fname, col)
    n_off = int((has_off & ~miss).sum())
    info.naive = int((~has_off & ~miss).sum())
    if n_off and n_off < int((~miss).sum()):
        info.adjusted["naive_times_read_in_tz"] = int((~has_off & ~miss).sum())
    return out


def parse_times(s: pd.Series, unit: str, tz: str, fname: str, col: str) -> tuple[np.ndarray, TimeInfo]:
    """A time column -> (int64 Unix seconds, :class:`TimeInfo`); a missing time is :data:`MISSING_TIME`.

    ``unit``: ``auto`` (numbers: unit from the median; text: ISO 8601, or numbers written as text), ``iso``,
    ``s`` or ``ms``. Naive text (and naive datetimes) are local times in ``tz`` (:func:`localize`); text with a
    ``Z`` or ``+hh:mm`` offset is exact, and the two may be mixed.

    Raises
    ------
    TraceFormatError
        Naming the file, the first bad row (1-based, header excluded), the column and the value: unparsable
        text, times outside :data:`VALID_YEARS`, a median outside :data:`PLAUSIBLE_YEARS` (with the likely unit).
    """
    info = TimeInfo()
    miss = s.isna().to_numpy()
    if pd.api.types.is_datetime64_any_dtype(s):
        if s.dt.tz is not None:
            dt = s
            info.zone = str(s.dt.tz)
        else:
            dt = localize(s, tz, info)
            info.naive = int((~miss).sum())
        out = np.where(miss, MISSING_TIME, _dt_seconds(dt))
    else:
        numeric = pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s)
        if not numeric and unit in ("auto", "s", "ms"):
            v = pd.to_numeric(s.astype("string").str.strip(), errors="coerce").to_numpy(dtype=np.float64,
                                                                                         na_value=np.nan)
            n_num = int((~np.isnan(v) & ~miss).sum())
            # numbers written as text (or a few bad cells in a column of numbers): blame the real bad row
            numeric = unit != "auto" or n_num * 2 > int((~miss).sum())
        else:
            v = pd.to_numeric(s, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan) if numeric else None
        if numeric and unit != "iso":
            bad = np.isnan(v) & ~miss
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                what = _UNIT_WORDS.get(unit, "Unix time")
                raise _bad(f"cannot parse {s.iloc[i]!r} as {what} (the column holds numbers).", fname, i, col)
            out = numeric_seconds(v, ~miss, "auto" if unit == "auto" else unit, s, fname, col, info)
        else:
            out = _parse_iso(s.astype("string"), tz, fname, col, info)
    ok = out != MISSING_TIME
    if ok.any():
        with np.errstate(invalid="ignore"):
            rng = ok & ((out < _T_LO) | (out >= _T_HI))
        if rng.any():
            i = int(np.flatnonzero(rng)[0])
            raise _bad(f"time {_show(s.iloc[i])} is {_fmt_time(float(out[i]))}, outside {VALID_YEARS[0]}-"
                       f"{VALID_YEARS[1]}; fix or remove the row.", fname, i, col)
        med = float(np.median(out[ok]))
        if not PLAUSIBLE_YEARS[0] <= _year(med) <= PLAUSIBLE_YEARS[1]:
            raise TraceFormatError(f"the median time is {_fmt_time(med)}, outside {PLAUSIBLE_YEARS[0]}-"
                                   f"{PLAUSIBLE_YEARS[1]}: is this the time column, and is its unit right?",
                                   file=fname, column=col)
    return out, info


# ----------------------------------------------------------------------------------------------------------------
# User ids
# ----------------------------------------------------------------------------------------------------------------

_INT64_MAX = np.iinfo(np.int64).max


def user_ids_need_text(u: pd.Series) -> bool:
    """True when a parsed user column may have lost digits (unsigned 64-bit, or floats beyond 2^53)."""
    if pd.api.types.is_unsigned_integer_dtype(u):
        return bool(len(u)) and int(u.max()) > _INT64_MAX
    if pd.api.types.is_float_dtype(u):
        v = u.to_numpy(dtype=np.float64, na_value=np.nan)
        fin = v[np.isfinite(v)]
        return bool(fin.size) and float(np.abs(fin).max()) >= 2.0 ** 53
    return False


def normalise_user_ids(u: pd.Series) -> pd.Series:
    """Integers that fit int64 (or integral floats below 2^53) -> int64 (missing -> -1, flagged by the caller);
    anything else -> a categorical of strings (ids above 2^63 stay exact text). Vectorised: factorize once,
    convert only the distinct values to text."""
    if pd.api.types.is_integer_dtype(u) and not (pd.api.types.is_unsigned_integer_dtype(u)
                                                 and len(u) and int(u.max()) > _INT64_MAX):
        return u.astype(np.int64)
    if pd.api.types.is_float_dtype(u) and not user_ids_need_text(u):
        v = u.to_numpy(dtype=np.float64, na_value=np.nan)
        fin = np.isfinite(v)
        if np.all(v[fin] == np.round(v[fin])):
            return pd.Series(np.where(fin, v, -1).astype(np.int64), index=u.index)
    codes, uniques = pd.factorize(u, sort=False, use_na_sentinel=True)
    labels = np.asarray(uniques, dtype=object).astype(str)
    labels = np.char.strip(labels.astype(str)) if labels.size else labels
    # distinct raw values can print the same (1 and "1"): merge them
    cats, inv = np.unique(labels.astype(str), return_inverse=True)
    new_codes = np.where(codes >= 0, inv[np.maximum(codes, 0)], -1)
    return pd.Series(pd.Categorical.from_codes(new_codes, categories=pd.Index(cats, dtype=object)), index=u.index)


# ----------------------------------------------------------------------------------------------------------------
# Grid size
# ----------------------------------------------------------------------------------------------------------------

MAX_GRID_CELLS = 10_000_000_000
"""Largest square grid (cells of its bounding box): the whole Earth at 0.05 km². Memory does not grow with the grid
(only used cells are stored), so below this a large grid is a warning, not an error."""
WARN_GRID_CELLS = 1_000_000
"""Above this a grid is continent-wide for the cell size (Foursquare US at 1.3 km²: ~9 million cells): warn."""


def check_trace_table(df: pd.DataFrame, need: list[str], what: str) -> None:
    """Raise unless ``df`` has the columns ``need``, tz-aware times and at least one row; ``what`` names what the
    table is for, in the message (a :class:`TraceFormatError` names the column; an empty table is a
    :class:`ParameterError`)."""
    missing = [c for c in need if c not in df.columns]
    if missing:
        raise TraceFormatError(f"trace table lacks column(s) {missing}; expected {need}.", column=missing[0])
    if not isinstance(df[TIME].dtype, pd.DatetimeTZDtype):
        raise TraceFormatError(f"column 'time' must be tz-aware datetimes, got dtype {df[TIME].dtype}.",
                               column=TIME)
    if len(df) == 0:
        raise ParameterError(f"trace table is empty: no rows to build {what} from.")


def check_grid_size(lat: Iterable[float], lon: Iterable[float], cell_km2: float, *,
                    max_cells: int = MAX_GRID_CELLS, warn_cells: int = WARN_GRID_CELLS,
                    what: str = "--cell-km2") -> tuple[int, str | None]:
    """Estimate the cells of the grid over these points: ``(cells, warning or None)``.

    Raises :class:`ParameterError` above ``max_cells``; above ``warn_cells`` returns a warning that says which cell
    area or bounding box would give a city-sized grid.
    """
    cell_km2 = check_param("cell_km2", cell_km2)
    lat = np.asarray(lat, dtype=np.float64)
    lon = np.asarray(lon, dtype=np.float64)
    if lat.size == 0:
        return 0, None
    la0, la1 = float(np.nanmin(lat)), float(np.nanmax(lat))
    lo0, lo1 = float(np.nanmin(lon)), float(np.nanmax(lon))
    h_km = (la1 - la0) * 111.32 + 2 * math.sqrt(cell_km2)
    w_km = (lo1 - lo0) * 111.32 * max(math.cos(math.radians((la0 + la1) / 2)), 0.05) + 2 * math.sqrt(cell_km2)
    cells = int(h_km * w_km / cell_km2)
    if cells <= warn_cells:
        return cells, None
    fit = math.ceil(h_km * w_km / warn_cells * 10) / 10
    text = (f"the points span {h_km:,.0f} x {w_km:,.0f} km: a grid of {cell_km2:g} km² cells has ~{cells:,} cells "
            f"(a city has thousands). Use cells of at least {fit:g} km² ({what}) or keep one city with a bounding "
            "box (--bbox S,W,N,E).")
    if cells > max_cells:
        raise ParameterError(text.replace("(a city has thousands)", f"(limit {max_cells:,})"))
    return cells, text
