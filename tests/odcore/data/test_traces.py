"""Loaders: fixtures for every format, each malformed-input case, and the real shared data when present."""

from __future__ import annotations

import gzip
import io
import re
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odcore.data.traces import BBox, ColumnMapping, load_traces, traces_from_frame
from odcore.errors import ParameterError, TraceFormatError

FIX = Path(__file__).parents[2] / "fixtures"
T0 = 1211180400 + 8 * 3600  # fixtures: Mon 2008-05-19 08:00 PDT


def _zip_of(folder: Path) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for p in sorted(folder.iterdir()):
            z.write(p, arcname=f"sub/{p.name}")
    return buf.getvalue()


# --- Cabspotting -------------------------------------------------------------------------------------------------

def test_cabspotting_folder_plain_and_gzip():
    tr = load_traces(FIX / "cabspotting", format="cabspotting")
    df = tr.df
    assert list(df.columns) == ["user", "time", "lat", "lon"]
    assert str(df["time"].dtype) == "datetime64[ns, UTC]"
    assert sorted(df["user"].unique()) == ["alpha", "beta"]
    # 9 lines, one exact duplicate in beta -> dropped and counted
    assert tr.report.rows_read == 9
    assert tr.report.rows_dropped == {"duplicate_row": 1}
    assert tr.report.rows_kept == len(df) == 8
    first = df[df["user"] == "alpha"].iloc[0]
    assert first["time"] == pd.Timestamp(T0 + 60, unit="s", tz="UTC")
    assert (first["lat"], first["lon"]) == (37.775, -122.419)
    # sorted by user then time
    assert df.groupby("user", observed=True)["time"].apply(lambda s: s.is_monotonic_increasing).all()


def test_cabspotting_auto_detect_zip_and_upload_agree():
    ref = load_traces(FIX / "cabspotting", format="cabspotting").df
    data = _zip_of(FIX / "cabspotting")
    up = load_traces(io.BytesIO(data), name="cabs.zip")            # auto-detected as Cabspotting
    assert up.report.format == "cabspotting"
    pd.testing.assert_frame_equal(up.df.astype({"user": str}), ref.astype({"user": str}))


def test_cabspotting_bbox_filters_glitch_and_reports():
    tr = load_traces(FIX / "cabspotting", format="cabspotting", bbox=(37.5, -122.6, 37.9, -122.2))
    assert tr.report.rows_dropped["outside_bbox"] == 1
    assert tr.df["lat"].max() < 38
    assert tr.report.bbox_used == (37.5, -122.6, 37.9, -122.2)


def test_cabspotting_bad_field_names_row_and_column(tmp_path):
    d = tmp_path / "cabs"
    d.mkdir()
    (d / "new_a.txt").write_text("37.7 -122.4 0 1211200841\n37.7 -122.4 0 1211200901\n")
    (d / "new_b.txt").write_text("37.7 -122.4 0 1211200841\n37.7 -122.4 0 12x11200901\n")
    with pytest.raises(TraceFormatError) as e:
        load_traces(d, format="cabspotting")
    assert (e.value.file, e.value.row, e.value.column) == ("new_b.txt", 2, "unix_time")
    (d / "new_b.txt").write_text("37.7 -122.4 0\n")
    with pytest.raises(TraceFormatError, match="expected 4") as e:
        load_traces(d, format="cabspotting")
    assert e.value.row == 1


def test_cabspotting_times_outside_the_integer_fast_path_read_as_before(tmp_path):
    """Whole Unix seconds of 1990-2100 are parsed as integers; a file with a fraction of a second, a missing time or
    a time of 1985 is parsed with float times and read by the float rules (rounded down, missing counted, kept)."""
    d = tmp_path / "cabs"
    d.mkdir()
    (d / "new_a.txt").write_text("37.7 -122.4 0 1211200841\n37.71 -122.41 1 1211200901\n")
    (d / "new_b.txt").write_text("37.7 -122.4 0 1211200841.7\n37.7 -122.4 0 \n37.72 -122.4 0 1211200961\n")
    (d / "new_c.txt").write_text("37.7 -122.4 0 489000000\n37.7 -122.4 0 1211200841\n37.7 -122.4 0 1211200901\n")
    tr = load_traces(d, format="cabspotting")
    secs = tr.df["time"].astype("int64") // 10**9
    got = {u: secs[tr.df["user"] == u].tolist() for u in ("a", "b", "c")}
    assert got == {"a": [1211200841, 1211200901], "b": [1211200841, 1211200961],
                   "c": [489000000, 1211200841, 1211200901]}
    assert tr.report.rows_dropped == {"missing_value": 1}


def test_gzip_members_padding_truncation_and_bomb_cap():
    from odcore.data.validate import ArchiveLimits, Inflation

    a, b = b"37.7 -122.4 0 1211200841\n", b"37.7 -122.4 0 1211200901\n"
    two = gzip.compress(a) + gzip.compress(b)
    assert Inflation("x").gunzip(two, "m") == a + b                       # concatenated members, as gzip reads them
    assert Inflation("x").gunzip(gzip.compress(a) + b"\x00" * 8, "m") == a  # zero padding after the last member
    with pytest.raises(TraceFormatError, match="truncated"):
        Inflation("x").gunzip(gzip.compress(a * 1000)[:-30], "m")
    with pytest.raises(TraceFormatError, match="truncated"):
        Inflation("x").gunzip(gzip.compress(a) + b"garbage!", "m")
    zeros = gzip.compress(bytes(5 << 20))
    lim = ArchiveLimits(ratio_after=1 << 20, max_ratio=100)
    with pytest.raises(TraceFormatError, match="decompression bomb") as bomb:
        Inflation("x", lim).gunzip(zeros, "m")
    gave = int(re.search(r"gave over (\d+) MiB", str(bomb.value)).group(1))
    assert gave <= 2                   # stopped by about 2 x ratio_after, not at the end of the file's 5 MiB
    text = ("".join(f"{u},2020-01-0{1 + u % 7},37.{u},-122.{u}\n" for u in range(100_000))).encode()
    assert Inflation("x", lim).gunzip(gzip.compress(text), "m") == text   # ordinary text passes the check
    inf = Inflation("x", ArchiveLimits(max_bytes=3 << 20))
    with pytest.raises(TraceFormatError, match="cap of 3 MiB"):
        inf.gunzip(zeros, "m")
    assert Inflation("x", ArchiveLimits(max_bytes=5 << 20)).gunzip(zeros, "m") == bytes(5 << 20)


def test_zip_member_ratio_is_checked_against_the_compressed_bytes_read_so_far(tmp_path):
    """8 MiB of four letters (~3.5x smaller compressed) under a 2x ratio cap checked after 1 MiB: the member is
    stopped after about 1 MiB, from the path and from an upload's bytes, where a check against the member's whole
    compressed size (~2.3 MiB) would let it produce ~5 MiB first; an ordinary member is read whole."""
    from odcore.data.traces import load_traces
    from odcore.data.validate import ArchiveLimits

    letters = np.random.default_rng(0).choice(np.frombuffer(b"ACGT", np.uint8), 8 << 20).tobytes()
    bomb = tmp_path / "bomb.zip"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("letters.csv", letters)
    assert 2 << 20 < zipfile.ZipFile(bomb).infolist()[0].compress_size < 3 << 20
    lim = ArchiveLimits(ratio_after=1 << 20, max_ratio=2)
    for source in (bomb, io.BytesIO(bomb.read_bytes())):
        with pytest.raises(TraceFormatError, match="decompression bomb") as err:
            load_traces(source, limits=lim)
        assert "its first" in str(err.value)
        assert int(re.search(r"gave over (\d+) MiB", str(err.value)).group(1)) <= 2
    rows = "".join(f"{u % 997},{1_600_000_000 + 61 * u},37.{u % 89:02d},-122.{u % 83:02d}\n" for u in range(200_000))
    ok = tmp_path / "ok.zip"
    with zipfile.ZipFile(ok, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("t.csv", "user,time,lat,lon\n" + rows)
    assert len(load_traces(ok, limits=ArchiveLimits(ratio_after=1 << 20)).df) == 200_000


# --- check-ins ---------------------------------------------------------------------------------------------------

def test_checkins_folder_with_offset_and_unknown_poi():
    tr = load_traces(FIX / "checkins", time_offset_s=28800)
    assert tr.report.format == "checkins"
    df = tr.df
    assert list(df.columns) == ["user", "time", "lat", "lon", "loc"]
    # POI 9 has no coordinates: dropped and counted
    assert tr.report.rows_dropped == {"unknown_poi": 1}
    assert len(df) == 4
    # Row 1 of the README example: 1333447208 + 28800 = 2012-04-03 18:00:08 UTC
    assert df["time"].iloc[0] == pd.Timestamp("2012-04-03 18:00:08", tz="UTC")
    assert (df["lat"].iloc[0], df["lon"].iloc[0], df["loc"].iloc[0]) == (40.748939, -73.99228, 1)


def test_checkins_explicit_poi_file_and_missing_poi_file(tmp_path):
    ck = tmp_path / "x_checkins.txt"
    ck.write_bytes((FIX / "checkins" / "Tiny_checkins.txt").read_bytes())
    with pytest.raises(TraceFormatError, match="POI coordinates"):
        load_traces(tmp_path, format="checkins")
    tr = load_traces(ck, format="checkins", poi_source=FIX / "checkins" / "Tiny_poi_coos.txt")
    assert len(tr.df) == 4


def test_checkins_bad_row(tmp_path):
    (tmp_path / "a_checkins.txt").write_text("0\t1\t1333447208.0\n1\t1\tyesterday\n")
    (tmp_path / "a_poi_coos.txt").write_text("1\t40.7\t-74.0\n")
    with pytest.raises(TraceFormatError) as e:
        load_traces(tmp_path)
    assert (e.value.row, e.value.column) == (2, "unix_time")


# --- CSV / Parquet -----------------------------------------------------------------------------------------------

def test_csv_aliases_and_time_zone():
    tr = load_traces(FIX / "traces.csv", tz="Europe/London")
    df = tr.df
    assert tr.report.format == "csv"
    assert len(df) == 5
    assert df["user"].nunique() == 2
    # January in London = UTC
    assert df["time"].iloc[0] == pd.Timestamp("2024-01-08 08:10", tz="UTC")
    tr2 = load_traces(FIX / "traces.csv", tz="Europe/Paris")
    assert tr2.df["time"].iloc[0] == pd.Timestamp("2024-01-08 07:10", tz="UTC")


def test_csv_mapping_unix_seconds_and_loc(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("who;when;y;x;ant\nA;1700000000;48.1;11.5;7\nB;1700003600;48.2;11.6;8\n")
    m = ColumnMapping(user="who", time="when", lat="y", lon="x", loc="ant")
    tr = load_traces(p, mapping=m)
    assert tr.df["time"].iloc[0] == pd.Timestamp(1_700_000_000, unit="s", tz="UTC")
    assert tr.df["loc"].tolist() == [7, 8]
    with pytest.raises(TraceFormatError) as e:
        load_traces(p, mapping=ColumnMapping(user="who", time="when", lat="lat", lon="x"))
    assert e.value.column == "lat"
    assert "has columns" in str(e.value)


def test_parquet_roundtrip_and_upload(tmp_path):
    ref = load_traces(FIX / "traces.csv")
    p = tmp_path / "t.parquet"
    ref.df.to_parquet(p)
    back = load_traces(p)
    assert back.report.format == "parquet"
    pd.testing.assert_frame_equal(back.df.astype({"user": str}), ref.df.astype({"user": str}))
    up = load_traces(io.BytesIO(p.read_bytes()), name="upload.parquet")
    assert len(up.df) == len(ref.df)
    gz = gzip.compress((FIX / "traces.csv").read_bytes())
    up2 = load_traces(io.BytesIO(gz), name="t.csv.gz")
    assert len(up2.df) == 5


def test_date_range_filter_counts(tmp_path):
    tr = load_traces(FIX / "traces.csv", start="2024-01-08 09:00", end="2024-01-08 10:00")
    assert tr.report.rows_dropped == {"outside_date_range": 3}
    assert len(tr.df) == 2
    with pytest.raises(ParameterError, match="start"):
        load_traces(FIX / "traces.csv", start="not a date")


# --- malformed input: each case its specific error ---------------------------------------------------------------

HEAD = "user,time,lat,lon\n"


@pytest.mark.parametrize(("body", "row", "column", "match"), [
    (HEAD + "a,2024-01-08T08:00,51.5,-0.1\nb,2024-01-08T09:00,51.5,-0.1\na,tomorrow,51.5,-0.1\n", 3, "time",
     "cannot parse 'tomorrow'"),
    (HEAD + "a,2024-01-08T08:00,51.5,-0.1\nb,2024-01-08T09:00,95.5,-0.1\n", 2, "lat", "outside"),
    (HEAD + "a,2024-01-08T08:00,51.5,-0.1\nb,2024-01-08T09:00,51.5,-190\n", 2, "lon", "outside"),
    (HEAD + "a,2024-01-08T08:00,51.5,-0.1\nb,2024-01-08T09:00,north,-0.1\n", 2, "lat", "as a number"),
])
def test_malformed_rows(tmp_path, body, row, column, match):
    p = tmp_path / "bad.csv"
    p.write_text(body)
    with pytest.raises(TraceFormatError, match=match) as e:
        load_traces(p)
    assert (e.value.file, e.value.row, e.value.column) == ("bad.csv", row, column)


def test_missing_column(tmp_path):
    p = tmp_path / "bad.csv"
    p.write_text("user,time,lat\na,2024-01-08T08:00,51.5\n")
    with pytest.raises(TraceFormatError, match="missing column") as e:
        load_traces(p)
    assert e.value.column == "lon"


def test_empty_files(tmp_path):
    p = tmp_path / "empty.csv"
    p.write_text("")
    with pytest.raises(TraceFormatError, match="empty"):
        load_traces(p, format="csv")
    p.write_text(HEAD)
    with pytest.raises(TraceFormatError, match="no rows"):
        load_traces(p, format="csv")


def test_single_user(tmp_path):
    p = tmp_path / "one.csv"
    p.write_text(HEAD + "a,2024-01-08T08:00,51.5,-0.1\na,2024-01-08T09:00,51.6,-0.1\n")
    with pytest.raises(TraceFormatError, match="only 1 user") as e:
        load_traces(p)
    assert e.value.column == "user"


def test_nans_and_duplicates_dropped_and_counted(tmp_path):
    p = tmp_path / "x.csv"
    p.write_text(HEAD + "a,2024-01-08T08:00,51.5,-0.1\n"
                        "a,2024-01-08T08:00,51.5,-0.1\n"       # duplicate
                        "b,2024-01-08T09:00,,-0.1\n"           # NaN latitude
                        ",2024-01-08T09:00,51.5,-0.1\n"        # missing user
                        "b,,51.5,-0.1\n"                       # missing time
                        "b,2024-01-08T10:00,51.6,-0.1\n")
    tr = load_traces(p)
    assert tr.report.rows_read == 6
    assert tr.report.rows_dropped == {"missing_value": 3, "duplicate_row": 1}
    assert tr.report.rows_kept == 2 == len(tr.df)
    assert sum(tr.report.rows_dropped.values()) + tr.report.rows_kept == tr.report.rows_read


def test_all_rows_filtered(tmp_path):
    with pytest.raises(TraceFormatError, match="no rows left"):
        load_traces(FIX / "traces.csv", bbox=(0, 0, 1, 1))


def test_unknown_format_and_bad_params(tmp_path):
    p = tmp_path / "x.bin"
    p.write_bytes(b"hello world\n")
    with pytest.raises(TraceFormatError, match="cannot tell the format"):
        load_traces(p)
    with pytest.raises(ParameterError, match="format"):
        load_traces(FIX / "traces.csv", format="gpx")
    with pytest.raises(ParameterError, match="tz"):
        load_traces(FIX / "traces.csv", tz="Mars/Olympus")
    with pytest.raises(ParameterError, match="bbox"):
        BBox.parse("1,2,3")
    with pytest.raises(TraceFormatError, match="no such file"):
        load_traces(tmp_path / "nope.csv")


def test_summary_is_jsonable():
    import json

    s = load_traces(FIX / "cabspotting", format="cabspotting", bbox="auto").summary()
    json.dumps(s)
    assert s["users"] == 2
    assert s["format"] == "cabspotting"


def test_traces_from_frame_roundtrip():
    ref = load_traces(FIX / "traces.csv").df
    tr = traces_from_frame(ref)
    pd.testing.assert_frame_equal(tr.df, ref)


# --- real data (../shared/data) ----------------------------------------------------------------------------------

@pytest.mark.realdata
def test_real_cabspotting_subset_zip(shared_data):
    files = sorted((shared_data / "cabspotting_sf").glob("new_*.txt.gz"))[:5]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for f in files:
            z.write(f, arcname=f.name)
    tr = load_traces(io.BytesIO(buf.getvalue()), name="cabs.zip", bbox="auto")
    assert tr.report.format == "cabspotting"
    assert tr.n_users == 5
    # README: the window is [Mon 2008-05-19 00:00 PDT, Mon 2008-06-09 00:00 PDT)
    assert tr.df["time"].min() >= pd.Timestamp(1211180400, unit="s", tz="UTC")
    assert tr.df["time"].max() < pd.Timestamp(1212994800, unit="s", tz="UTC")
    assert tr.report.rows_kept + sum(tr.report.rows_dropped.values()) == tr.report.rows_read


@pytest.mark.realdata
@pytest.mark.slow
def test_real_cabspotting_full(shared_data):
    # (its load time is measured in benchmarks/bench_trips.py, not asserted here)
    tr = load_traces(shared_data / "cabspotting_sf", format="cabspotting", bbox="auto")
    assert tr.n_users == 534                 # README: 534 cabs
    assert tr.report.rows_read == 10_006_896  # README: 10,006,896 fixes
    assert 0 < tr.report.rows_dropped.get("outside_bbox", 0) < 0.01 * tr.report.rows_read


@pytest.mark.realdata
@pytest.mark.parametrize(("folder", "users", "rows"), [
    ("gowalla_liu2017_1k", 1000, 157_251),          # README counts
    ("foursquare_us_liu2017_5k", 4969, 185_984),
])
def test_real_checkins(shared_data, folder, users, rows):
    tr = load_traces(shared_data / folder, time_offset_s=28800)
    assert tr.report.format == "checkins"
    assert tr.report.rows_read == rows
    assert tr.n_users == users
    assert tr.report.rows_kept + sum(tr.report.rows_dropped.values()) == rows
    if folder.startswith("foursquare"):
        # README: first check-in, corrected to UTC, is 2012-04-03 18:00:08
        assert tr.df["time"].min() == pd.Timestamp("2012-04-03 18:00:08", tz="UTC")
    assert np.isfinite(tr.df[["lat", "lon"]].to_numpy()).all()


def test_unix_milliseconds_detected_and_string_users_vectorised(tmp_path):
    p = tmp_path / "ms.csv"
    p.write_text("user,time,lat,lon\nx1,1700000000000,48.1,11.5\nx2,1700003600000,48.2,11.6\n")
    tr = load_traces(p)
    assert tr.df["time"].iloc[0] == pd.Timestamp(1_700_000_000, unit="s", tz="UTC")
    assert isinstance(tr.df["user"].dtype, pd.CategoricalDtype)
    assert sorted(tr.df["user"].astype(str)) == ["x1", "x2"]


def test_float_user_ids_become_integers(tmp_path):
    p = tmp_path / "f.parquet"
    pd.DataFrame({"user": [1.0, 2.0, 2.0], "time": pd.to_datetime([1_700_000_000, 1_700_003_600, 1_700_007_200], unit="s", utc=True),
                  "lat": [1.0, 1.1, 1.2], "lon": [2.0, 2.1, 2.2]}).to_parquet(p)
    tr = load_traces(p)
    assert tr.df["user"].dtype == np.int64
    assert tr.df["user"].tolist() == [1, 2, 2]


@settings(max_examples=40, deadline=None)
@given(rows=st.lists(st.tuples(st.sampled_from(["a", "b", "c", ""]), st.integers(0, 5),
                               st.sampled_from(["51.5", "51.6", ""]), st.sampled_from(["-0.1", "-0.2"])),
                     min_size=1, max_size=30))
def test_every_row_is_kept_or_counted(rows):
    """Property: rows_read = rows_kept + sum(rows_dropped); kept rows are unique and sorted by (user, time)."""
    body = HEAD + "".join(f"{u},{1_700_000_000 + 3600 * t},{la},{lo}\n" for u, t, la, lo in rows)
    err = None
    try:
        tr = load_traces(io.BytesIO(body.encode()), name="p.csv")
    except TraceFormatError as e:
        err = str(e)
    if err is not None:
        assert "user" in err or "no usable rows" in err   # fewer than 2 users / nothing usable
        return
    rep = tr.report
    assert rep.rows_read == len(rows)
    assert rep.rows_kept + sum(rep.rows_dropped.values()) == rep.rows_read
    assert not tr.df.duplicated().any()
    key = tr.df[["user", "time"]].astype({"user": str})
    assert key.equals(key.sort_values(["user", "time"], kind="stable"))


def test_folder_of_csvs_names_the_right_file_and_row(tmp_path):
    (tmp_path / "a.csv").write_text(HEAD + "a,2024-01-08T08:00,51.5,-0.1\nb,2024-01-08T09:00,51.5,-0.1\n")
    (tmp_path / "b.csv").write_text(HEAD + "c,2024-01-08T08:00,51.5,-0.1\nd,2024-01-08T09:00,51.5,-0.1\n"
                                           "e,2024-01-08T09:00,-91,-0.1\n")
    with pytest.raises(TraceFormatError) as e:
        load_traces(tmp_path)
    assert (e.value.file, e.value.row, e.value.column) == ("b.csv", 3, "lat")
    (tmp_path / "b.csv").write_text(HEAD + "c,2024-01-08T08:00,51.5,-0.1\n")
    assert load_traces(tmp_path).n_users == 3
