"""Hostile input files, written at test time, each with the outcome it must have.

:func:`write_all` writes every :data:`CASES` file into a folder and returns ``(case, path)`` pairs. A case expects
either an error (a fragment of the one-line message, which names file / row / column where it can) or a load whose
figures are known exactly (users, rows kept, rows dropped or adjusted and why, first and last time).

The base table is 40 users x 8 hourly fixes in San Francisco in the week of Monday 2024-03-04 (UTC), so every
correct reading gives 40 users and 320 rows.
"""

from __future__ import annotations

import codecs
import gzip
import io
import struct
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

T0 = 1_709_553_600          # 2024-03-04T12:00:00Z, a Monday noon
USERS, PER_USER = 40, 8
N = USERS * PER_USER
HEADER = "user,time,lat,lon"


def rows(n_users: int = USERS, per_user: int = PER_USER) -> list[tuple[int, int, float, float]]:
    """(user, unix seconds, lat, lon): user ``u``'s ``j``-th fix at T0 + 60 u + 3600 j, cells varying by hour."""
    out = []
    for u in range(n_users):
        for j in range(per_user):
            out.append((u, T0 + 60 * u + 3600 * j, round(37.70 + 0.01 * ((u + j) % 10), 5),
                        round(-122.47 + 0.01 * ((3 * u + j) % 10), 5)))
    return out


def iso(t: int, fmt: str = "%Y-%m-%dT%H:%M:%S") -> str:
    return pd.Timestamp(t, unit="s").strftime(fmt)


def table(times: Callable[[int, int], str] | None = None, users: Callable[[int], str] | None = None,
          header: str = HEADER, sep: str = ",", n_users: int = USERS, per_user: int = PER_USER,
          edit: Callable[[int, list[str]], list[str]] | None = None, eol: str = "\n") -> str:
    """CSV text of the base rows; ``times``/``users`` format those fields; ``edit(i, fields)`` changes row i."""
    lines = [header]
    for i, (u, t, la, lo) in enumerate(rows(n_users, per_user)):
        f = [users(u) if users else str(u), times(i, t) if times else str(t), f"{la}", f"{lo}"]
        if edit:
            f = edit(i, f)
        lines.append(sep.join(f))
    return eol.join(lines) + eol


def at(row: int, col: int, value: str) -> Callable[[int, list[str]], list[str]]:
    """Edit: put ``value`` in column ``col`` of data row ``row`` (1-based, header excluded)."""
    def f(i: int, fields: list[str]) -> list[str]:
        if i == row - 1:
            fields = list(fields)
            fields[col] = value
        return fields
    return f


def zip_bytes(members: dict[str, bytes], method: int = zipfile.ZIP_DEFLATED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", method) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return buf.getvalue()


_ZERO_BLOCK = 1 << 24


def _deflate_zeros(n_bytes: int) -> tuple[bytes, int, int]:
    """A raw deflate stream of ``n_bytes // 2**24`` blocks of 2**24 zero bytes, with its CRC-32 and length.

    Each block is compressed at level 9 and ended by a full flush, which empties the compressor's history, so every
    block compresses to the same bytes: the first is compressed, the others are copies of it (~16 kB a block,
    ~1 MB per GiB, in a fraction of a second where compressing the whole GiB takes seconds)."""
    block = b"\0" * _ZERO_BLOCK
    n_blocks = n_bytes // _ZERO_BLOCK
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    piece = c.compress(block) + c.flush(zlib.Z_FULL_FLUSH)
    crc = 0
    for _ in range(n_blocks):
        crc = zlib.crc32(block, crc)
    return piece * n_blocks + c.flush(zlib.Z_FINISH), crc, n_blocks * _ZERO_BLOCK


def gzip_zeros(n_bytes: int) -> bytes:
    """A gzip file of ``n_bytes`` zero bytes (whole 16 MiB blocks; RFC 1952: header, deflate, CRC-32, size)."""
    data, crc, size = _deflate_zeros(n_bytes)
    header = b"\x1f\x8b\x08\x00" + struct.pack("<I", 0) + b"\x02\xff"   # deflate, no name, mtime 0, level 9, any OS
    return header + data + struct.pack("<II", crc, size & 0xFFFFFFFF)


def zip_zeros(n_bytes: int, name: str = "zeros.csv") -> bytes:
    """A zip archive of one deflated member ``name`` holding ``n_bytes`` zero bytes (whole 16 MiB blocks; PKWARE
    APPNOTE 4.3: local header, data, central directory, end record; sizes under 4 GiB)."""
    data, crc, size = _deflate_zeros(n_bytes)
    if size >= 1 << 32:
        raise ValueError(f"zip_zeros writes members under 4 GiB, got n_bytes={n_bytes}")
    fname = name.encode()
    date_1980 = (0 << 9) | (1 << 5) | 1                                    # 1980-01-01, time 00:00
    common = struct.pack("<HHHHHIIIH", 20, 0, 8, 0, date_1980, crc, len(data), size, len(fname))
    local = b"PK\x03\x04" + common + struct.pack("<H", 0) + fname
    central = (b"PK\x01\x02" + struct.pack("<H", 20) + common
               + struct.pack("<HHHHII", 0, 0, 0, 0, 0, 0) + fname)
    end = b"PK\x05\x06" + struct.pack("<HHHHIIH", 0, 0, 1, 1, len(central), len(local) + len(data), 0)
    return local + data + central + end


def parquet_bytes(df: pd.DataFrame) -> bytes:
    buf = io.BytesIO()
    df.to_parquet(buf, index=False)
    return buf.getvalue()


def base_frame() -> pd.DataFrame:
    r = np.array(rows(), dtype=object)
    return pd.DataFrame({"user": r[:, 0].astype(np.int64), "time": pd.to_datetime(r[:, 1].astype(np.int64),
                                                                                 unit="s", utc=True),
                         "lat": r[:, 2].astype(float), "lon": r[:, 3].astype(float)})


@dataclass(frozen=True)
class Case:
    """One hostile input and its expected outcome.

    ``error``: a fragment of the one-line message (``None`` = must load). Otherwise ``users``, ``rows_kept``,
    ``dropped`` / ``adjusted`` (exact dicts) and ``time_min`` (ISO, UTC) are the right numbers.
    ``cli``: extra command-line flags (the app gets the same through :func:`upload_options`).
    """

    name: str
    filename: str
    make: Callable[[], bytes] = field(repr=False)
    error: str | None = None
    users: int = USERS
    rows_kept: int = N
    dropped: dict[str, int] = field(default_factory=dict)
    adjusted: dict[str, int] = field(default_factory=dict)
    time_min: str | None = "2024-03-04T12:00:00+00:00"
    cli: tuple[str, ...] = ()
    app: bool = True       # also through the dashboard's upload path
    heavy: bool = False    # large file (bombs): one run is enough


def _t(s: str) -> bytes:
    return s.encode()


def _iso_in_2300(i: int, t: int) -> str:
    return iso(t).replace("2024", "2300", 1)


def _mixed_offsets(i: int, t: int) -> str:
    ts = pd.Timestamp(t, unit="s", tz="UTC")
    tz = "+02:00" if i % 2 else "-05:00"
    return ts.tz_convert(tz).isoformat()


def _z_and_naive(i: int, t: int) -> str:
    return iso(t) + ("Z" if i % 2 else "")


# DST: 2024-03-10 02:00-03:00 does not exist in Los Angeles; 2024-11-03 01:00-02:00 happens twice.
def _la_local(i: int, t: int) -> str:
    return pd.Timestamp(t, unit="s", tz="UTC").tz_convert("America/Los_Angeles").strftime("%Y-%m-%dT%H:%M:%S")


def _dst_gap(i: int, t: int) -> str:
    return f"2024-03-10T02:{i % 60:02d}:00" if i % 8 == 0 else _la_local(i, t)


def _dst_repeat(i: int, t: int) -> str:
    return f"2024-11-03T01:{i % 60:02d}:00" if i % 8 == 0 else _la_local(i, t)


BIG = 2**63


def checkins_zip(users: Callable[[int], str], n_users: int = USERS) -> bytes:
    """The base rows as a check-ins set (``user poi unix_time`` + ``poi lat lon``, whitespace-separated, in one zip,
    the layout of the shared Foursquare sets): one POI per distinct place."""
    places: dict[tuple[float, float], int] = {}
    ck = []
    for u, t, la, lo in rows(n_users):
        poi = places.setdefault((la, lo), len(places) + 1)
        ck.append(f"{users(u)}\t{poi}\t{t}")
    poi = [f"{i} {la} {lo}" for (la, lo), i in places.items()]
    return zip_bytes({"checkins.txt": ("\n".join(ck) + "\n").encode(),
                      "poi_coords.txt": ("\n".join(poi) + "\n").encode()})


CASES: list[Case] = [
    # --- times ----------------------------------------------------------------------------------------------
    Case("iso_year_2300", "y2300.csv", lambda: _t(table(times=_iso_in_2300)), error="row 1, column 'time'"),
    Case("iso_one_row_2300", "y2300_row57.csv",
         lambda: _t(table(times=lambda i, t: _iso_in_2300(i, t) if i == 56 else iso(t))),
         error="row 57, column 'time': time '2300-"),
    Case("unix_year_3000", "y3000.csv", lambda: _t(table(times=lambda i, t: str(t + 976 * 31_556_952))),
         error="neither is within 1990-2100"),
    Case("unix_one_row_year_3000", "y3000_row5.csv",
         lambda: _t(table(times=lambda i, t: str(32_503_680_000 if i == 4 else t))),
         error="row 5, column 'time'"),
    Case("unix_ms_read_as_s", "ms_as_s.csv", lambda: _t(table(times=lambda i, t: str(t * 1000))),
         error="look like Unix milliseconds: use time_unit='ms' (--time-unit ms)", cli=("--time-unit", "s")),
    Case("unix_s_read_as_ms", "s_as_ms.csv", lambda: _t(table()),
         error="look like Unix seconds: use time_unit='s' (--time-unit s)", cli=("--time-unit", "ms")),
    Case("unix_ms_auto", "ms.csv", lambda: _t(table(times=lambda i, t: str(t * 1000)))),
    Case("unix_us_auto", "us.csv", lambda: _t(table(times=lambda i, t: str(t * 1_000_000)))),
    Case("unix_float_seconds", "fs.csv", lambda: _t(table(times=lambda i, t: f"{t}.75"))),
    Case("unix_negative_1960", "neg.csv", lambda: _t(table(times=lambda i, t: str(t - 64 * 31_556_952))),
         error="neither is within 1990-2100"),
    Case("unix_inf", "inf_time.csv", lambda: _t(table(edit=at(7, 1, "inf"))), error="row 7, column 'time'"),
    Case("unix_abc_row_89", "abc.csv", lambda: _t(table(edit=at(89, 1, "abc"))),
         error="row 89, column 'time': cannot parse 'abc'"),
    Case("iso_garbage_row_17", "iso17.csv", lambda: _t(table(times=lambda i, t: "yesterday" if i == 16 else iso(t))),
         error="row 17, column 'time': cannot parse 'yesterday'"),
    Case("time_all_text", "words.csv", lambda: _t(table(times=lambda i, t: "noon")), error="row 1, column 'time'"),
    Case("iso_mixed_offsets", "mixoff.csv", lambda: _t(table(times=_mixed_offsets))),
    # naive times read in UTC here, where the case is their layout; the default (--tz auto: the zone at the data's
    # centre, San Francisco here) is tested in tests/odcore/data/test_regions.py
    Case("iso_z_and_naive", "mixz.csv", lambda: _t(table(times=_z_and_naive)),
         adjusted={"naive_times_read_in_tz": N // 2}, cli=("--tz", "UTC")),
    Case("iso_fraction_seconds", "frac.csv", lambda: _t(table(times=lambda i, t: iso(t) + ".250")), cli=("--tz", "UTC")),
    Case("iso_space_separator", "space.csv", lambda: _t(table(times=lambda i, t: iso(t, "%Y-%m-%d %H:%M:%S"))),
         cli=("--tz", "UTC")),
    Case("us_date_layout", "us.csv", lambda: _t(table(times=lambda i, t: iso(t, "%m/%d/%Y %H:%M:%S"))),
         cli=("--tz", "UTC")),
    Case("dst_gap_los_angeles", "dst_gap.csv", lambda: _t(table(times=_dst_gap)),
         cli=("--tz", "America/Los_Angeles"), adjusted={"dst_gap_shifted": N // 8},
         time_min="2024-03-04T13:00:00+00:00"),
    Case("dst_repeat_los_angeles", "dst_repeat.csv", lambda: _t(table(times=_dst_repeat)),
         cli=("--tz", "America/Los_Angeles"), adjusted={"dst_ambiguous_first": N // 8},
         time_min="2024-03-04T13:00:00+00:00"),
    Case("local_times_in_tz", "local.csv", lambda: _t(table(times=_la_local)), cli=("--tz", "America/Los_Angeles")),
    Case("missing_times", "notime.csv", lambda: _t(table(times=lambda i, t: "" if i % 40 == 3 else str(t))),
         rows_kept=N - 8, dropped={"missing_value": 8}),
    Case("end_in_2300", "end2300.csv", lambda: _t(table()), cli=("--end", "2300-01-01"),
         error="end must be a date or time (ISO 8601) between 1678 and 2261", app=False),
    Case("time_unit_alone_detects_columns", "detect.csv",
         lambda: _t(table(header="user_id,time,latitude,longitude")), cli=("--time-unit", "s")),
    # --- user ids -------------------------------------------------------------------------------------------
    Case("ids_above_2_63_mixed", "bigid.csv", lambda: _t(table(users=lambda u: str(BIG + u) if u % 2 else str(u)))),
    Case("four_huge_ids", "big4.csv", lambda: _t(table(users=lambda u: str(2**64 - 1 - u), n_users=4)),
         users=4, rows_kept=32),
    Case("ids_near_2_53", "id53.csv", lambda: _t(table(users=lambda u: str(2**53 + u)))),
    Case("checkins_small_ids", "ck.zip", lambda: checkins_zip(users=str)),
    Case("checkins_ids_above_2_63_mixed", "ck_bigid.zip",
         lambda: checkins_zip(users=lambda u: str(BIG + u) if u % 2 else str(u))),
    Case("checkins_ids_near_2_53", "ck_id53.zip", lambda: checkins_zip(users=lambda u: str(2**53 + u))),
    Case("checkins_four_huge_ids", "ck_big4.zip", lambda: checkins_zip(users=lambda u: str(2**64 - 1 - u), n_users=4),
         users=4, rows_kept=32),
    Case("negative_ids", "negid.csv", lambda: _t(table(users=lambda u: str(-u - 1)))),
    Case("float_ids", "floatid.csv", lambda: _t(table(users=lambda u: f"{u}.0"))),
    Case("text_ids_unicode", "uni.csv", lambda: _t(table(users=lambda u: f"usér-{u}-東京"))),
    Case("ids_text_prefix", "txtid.csv", lambda: _t(table(users=lambda u: f"u{u}"))),
    Case("missing_user_cells", "nouser.csv", lambda: _t(table(users=lambda u: "" if u == 5 else str(u))),
         users=39, rows_kept=N - 8, dropped={"missing_value": 8}),
    Case("one_user", "one_user.csv", lambda: _t(table(n_users=1)), error="only 1 user(s)"),
    Case("one_row", "one_row.csv", lambda: _t(table(n_users=1, per_user=1)), error="only 1 user(s)"),
    # --- encodings and wrong content ------------------------------------------------------------------------
    Case("latin1", "latin1.csv", lambda: table(users=lambda u: f"José{u}").encode("latin-1")),
    Case("cp1252_quotes", "cp1252.csv", lambda: table(users=lambda u: f"“u{u}”").encode("cp1252")),
    Case("utf8_bom", "bom.csv", lambda: codecs.BOM_UTF8 + _t(table())),
    Case("utf16_bom", "utf16.csv", lambda: table().encode("utf-16")),
    Case("binary_garbage", "garbage.csv", lambda: bytes(range(256)) * 40, error="binary file"),
    Case("html_as_csv", "page.csv", lambda: b"<!DOCTYPE html><html><body>404</body></html>", error="HTML"),
    Case("json_as_csv", "data.csv", lambda: b'[{"user": 1, "time": 1709553600, "lat": 37.7, "lon": -122.4}]',
         error="this is JSON"),
    Case("xml_as_csv", "data2.csv", lambda: b'<?xml version="1.0"?><gpx></gpx>', error="HTML/XML"),
    # --- structure ------------------------------------------------------------------------------------------
    Case("empty_file", "empty.csv", lambda: b"", error="empty"),
    Case("whitespace_only", "blank.csv", lambda: b"\n\n   \n", error="empty"),
    Case("header_only", "header.csv", lambda: _t(HEADER + "\n"), error="header but no rows"),
    Case("missing_lat_column", "nolat.csv", lambda: _t("user,time,lon\n1,1709553600,-122.4\n2,1709553600,-122.4\n"),
         error="missing column for lat"),
    Case("duplicate_columns", "dupcol.csv", lambda: _t(table(header="user,time,lat,lat")),
         error="['lat'] appear more than once"),
    Case("ragged_rows", "ragged.csv", lambda: _t(table(edit=lambda i, f: [*f, "9"] if i == 49 else f)),
         error="cannot parse as CSV"),
    Case("unterminated_quote", "quote.csv", lambda: _t(table(edit=at(30, 0, '"30'))), error="cannot parse as CSV"),
    Case("semicolon_delimiter", "semi.csv", lambda: _t(table(header=HEADER.replace(",", ";"), sep=";"))),
    Case("tab_delimiter", "tab.csv", lambda: _t(table(header=HEADER.replace(",", "\t"), sep="\t"))),
    Case("pipe_delimiter", "pipe.csv", lambda: _t(table(header=HEADER.replace(",", "|"), sep="|"))),
    Case("space_delimiter", "spaces.csv", lambda: _t(table(header=HEADER.replace(",", " "), sep=" ")),
         error="missing column for user"),
    Case("decimal_comma", "dcomma.csv",
         lambda: _t(table(header=HEADER.replace(",", ";"), sep=";",
                          edit=lambda i, f: [f[0], f[1], f[2].replace(".", ","), f[3].replace(".", ",")])),
         error="row 1, column 'lat': cannot parse '37,7' as a number"),
    Case("crlf_lines", "crlf.csv", lambda: _t(table(eol="\r\n"))),
    Case("uppercase_header", "upper.csv", lambda: _t(table(header=HEADER.upper()))),
    Case("reordered_and_extra_columns", "reorder.csv",
         lambda: _t("lon,speed,lat,time,user\n" + "".join(f"{lo},3.5,{la},{t},{u}\n" for u, t, la, lo in rows()))),
    Case("quoted_fields", "quoted.csv", lambda: _t(table(edit=lambda i, f: [f'"{x}"' for x in f]))),
    Case("trailing_blank_lines", "trail.csv", lambda: _t(table() + "\n\n\n")),
    Case("swapped_lat_lon", "swap.csv", lambda: _t(table(header="user,time,lon,lat")), error="swapped"),
    Case("lat_95_row_12", "lat95.csv", lambda: _t(table(edit=at(12, 2, "95.0"))), error="row 12, column 'lat'"),
    Case("lat_text_row_12", "latx.csv", lambda: _t(table(edit=at(12, 2, "north"))),
         error="row 12, column 'lat': cannot parse 'north' as a number"),
    Case("lat_inf", "latinf.csv", lambda: _t(table(edit=at(3, 2, "inf"))), error="row 3, column 'lat'"),
    Case("nan_everywhere", "nan.csv", lambda: _t(table(times=lambda i, t: "NaN",
                                                       edit=lambda i, f: [f[0], f[1], "NaN", "NaN"])),
         error="no usable rows"),
    Case("nan_coordinates", "nanxy.csv", lambda: _t(table(edit=lambda i, f: [f[0], f[1], "NaN", "NaN"])),
         error="no usable rows"),
    Case("all_points_equal", "same.csv", lambda: _t(table(edit=lambda i, f: [f[0], f[1], "37.75", "-122.42"]))),
    Case("all_rows_duplicated", "dups.csv",
         lambda: _t(table(times=lambda i, t: str(T0 + 60 * (i // PER_USER)),
                          edit=lambda i, f: [f[0], f[1], "37.75", "-122.42"])),
         rows_kept=USERS, dropped={"duplicate_row": N - USERS}),
    Case("stray_gps_fix", "stray.csv", lambda: _t(table(edit=at(100, 2, "0.5"))), rows_kept=N - 1,
         dropped={"outside_bbox": 1}),
    # --- compression and archives ---------------------------------------------------------------------------
    Case("gzip_csv", "t.csv.gz", lambda: gzip.compress(_t(table()))),
    Case("gzip_truncated", "cut.csv.gz", lambda: gzip.compress(_t(table()))[:300], error="truncated gzip"),
    Case("gzip_concatenated", "cat.csv.gz",
         lambda: gzip.compress(_t(table(n_users=20))) + gzip.compress(_t(table())[len(table(n_users=20)):].lstrip())),
    Case("gzip_bomb_1gb", "bomb.csv.gz", lambda: gzip_zeros(1 << 30), error="decompression bomb", heavy=True),
    Case("zip_bomb_1gb", "bomb.zip", lambda: zip_zeros(1 << 30), error="decompression bomb", heavy=True),
    Case("zip_csv", "one.zip", lambda: zip_bytes({"traces.csv": _t(table())})),
    Case("zip_with_readme_and_dotfiles", "rd.zip",
         lambda: zip_bytes({"README.md": b"# hi", ".DS_Store": b"\0\0", "__MACOSX/._t.csv": b"x",
                            "data/traces.csv": _t(table())})),
    Case("zip_stored", "stored.zip", lambda: zip_bytes({"t.csv": _t(table())}, zipfile.ZIP_STORED)),
    Case("zip_empty", "empty.zip", lambda: zip_bytes({}), error="holds no data files"),
    Case("zip_only_folders", "dirs.zip", lambda: zip_bytes({"a/": b"", "b/": b""}), error="holds no data files"),
    Case("zip_nested", "nested.zip", lambda: zip_bytes({"inner.zip": zip_bytes({"t.csv": _t(table())})}),
         error="nested archives are not read"),
    Case("zip_slip_dotdot", "slip.zip", lambda: zip_bytes({"../../evil.csv": _t(table())}), error="zip slip"),
    Case("zip_slip_absolute", "slip2.zip", lambda: zip_bytes({"/etc/evil.csv": _t(table())}), error="zip slip"),
    Case("zip_slip_windows", "slip3.zip", lambda: zip_bytes({"..\\..\\evil.csv": _t(table())}), error="zip slip"),
    Case("zip_same_name_twice", "twice.zip",
         lambda: zip_bytes({"a/t.csv": _t(table()), "b/t.csv": _t(table())}), error="same file name"),
    Case("zip_too_many_members", "many.zip",
         lambda: zip_bytes({f"f{i}.csv": b"" for i in range(20_001)}, zipfile.ZIP_STORED),
         error="more than 20,000 data files"),
    Case("zip_truncated", "cut.zip", lambda: zip_bytes({"t.csv": _t(table())})[:200],
         error="corrupt or truncated zip"),
    Case("zip_two_csv_parts", "parts.zip",
         lambda: zip_bytes({"a.csv": _t(table(n_users=20)),
                            "b.csv": _t(HEADER + "\n" + table()[len(table(n_users=20)):].lstrip())})),
    Case("parquet_ok", "t.parquet", lambda: parquet_bytes(base_frame())),
    Case("parquet_truncated", "cut.parquet", lambda: parquet_bytes(base_frame())[:500],
         error="cannot read as Parquet"),
    Case("csv_named_parquet", "fake.parquet", lambda: _t(table()), error="cannot read as Parquet"),
    Case("parquet_uint64_ids", "u64.parquet",
         lambda: parquet_bytes(base_frame().assign(user=lambda d: (np.uint64(2**64 - 1) - d.user.astype(np.uint64))))),
    Case("parquet_naive_local_dst", "naive.parquet",
         lambda: parquet_bytes(base_frame().assign(time=pd.to_datetime([_dst_gap(i, t) for i, (_, t, _, _)
                                                                         in enumerate(rows())]))),
         cli=("--tz", "America/Los_Angeles"), adjusted={"dst_gap_shifted": N // 8},
         time_min="2024-03-04T13:00:00+00:00"),
    Case("parquet_year_2300", "y2300.parquet",
         lambda: parquet_bytes(base_frame().assign(time=pd.to_datetime([_iso_in_2300(i, t) for i, (_, t, _, _)
                                                                         in enumerate(rows())]).as_unit("s"))),
         error="row 1, column 'time'"),
    Case("cabspotting_year_3000", "new_cab.txt",
         lambda: _t("".join(f"37.7 -122.4 0 {32_503_680_000 + i}\n" for i in range(10))),
         error="new_cab.txt, column 'unix_time'"),
    Case("cabspotting_bad_field", "new_cab2.txt",
         lambda: _t("37.7 -122.4 0 1213084687\n37.7 -122.4 zero 1213084688\n"),
         error="new_cab2.txt, row 2, column 'occupancy'"),
]


def upload_options(case: Case):
    """The dashboard's :class:`odapp.data.loading.UploadOptions` equivalent to the case's command-line flags."""
    from odapp.data.loading import UploadOptions

    kw: dict = {}
    mapping: list[tuple[str, str]] = []
    flags = list(case.cli)
    while flags:
        flag, value = flags.pop(0), flags.pop(0)
        if flag == "--tz":
            kw["tz"] = value
        elif flag == "--time-unit":
            mapping.append(("time_unit", value))
        else:  # pragma: no cover - a case with a flag the app has no control for sets app=False
            raise ValueError(flag)
    return UploadOptions(mapping=tuple(mapping), **kw)


def write_all(folder: Path, *, heavy: bool = False) -> list[tuple[Case, Path]]:
    """Write every case (the bombs only with ``heavy``) into ``folder``; return (case, path) pairs."""
    out = []
    for c in CASES:
        if c.heavy and not heavy:
            continue
        p = folder / c.name / c.filename
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(c.make())
        out.append((c, p))
    return out
