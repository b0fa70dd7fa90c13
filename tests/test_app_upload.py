"""Uploads: bytes + name in, a clear error out when unreadable, and the previous data stays loaded."""

from __future__ import annotations

import pytest

from odapp.data import UploadOptions, apply_upload, read_upload, sample_ref
from odapp.state import K_DATASET, K_SOURCE, K_UPLOAD_ERROR, K_UPLOAD_TRACES
from odcore.errors import TraceFormatError

GOOD = (b"uid,timestamp,latitude,longitude\n"
        b"a,2024-03-04T08:00:00,37.70,-122.40\na,2024-03-04T09:00:00,37.75,-122.45\n"
        b"b,2024-03-04T08:00:00,37.70,-122.40\nb,2024-03-04T10:00:00,37.72,-122.42\n")
MAPPED = b"who;when;y;x\n1;1709539200;37.7;-122.4\n1;1709542800;37.75;-122.45\n2;1709539200;37.7;-122.4\n"

BAD = [
    (b"\x00\x01garbage\xff\xfe", "bad.csv", "bad.csv"),
    (b"PAR1garbagePAR1", "bad.parquet", "Parquet"),
    (b"a,b\n1,2\n", "cols.csv", "missing column"),
    (b"user,time,lat,lon\n1,notatime,1,2\n", "t.csv", "row 1"),
    (b"", "empty.csv", "empty"),
    (b"hello", "x.bin", "cannot tell the format"),
]


def test_good_csv_with_detected_columns():
    loaded = read_upload(GOOD, "trips.csv")
    assert loaded.summary["users"] == 2
    assert loaded.summary["rows_kept"] == 4
    assert list(loaded.df.columns[:4]) == ["user", "time", "lat", "lon"]
    assert loaded.cli == {"input": "trips.csv", "format": "csv", "tz": "UTC", "time_offset": 0.0, "bbox": "auto"}


def test_column_mapping_and_time_offset():
    with pytest.raises(TraceFormatError, match="missing column"):
        read_upload(MAPPED.replace(b";", b","), "m.csv")
    opts = UploadOptions(format="csv", mapping=(("user", "who"), ("time", "when"), ("lat", "y"), ("lon", "x"),
                                                ("time_unit", "s")), time_offset_s=3600)
    loaded = read_upload(MAPPED.replace(b";", b","), "m.csv", opts)
    assert loaded.summary["users"] == 2
    assert str(loaded.df["time"].min()) == "2024-03-04 09:00:00+00:00"   # 1709539200 = 08:00 UTC, + 1 h


@pytest.mark.parametrize(("data", "name", "says"), BAD)
def test_unreadable_upload_names_file_and_problem(data, name, says):
    with pytest.raises(TraceFormatError) as e:
        read_upload(data, name)
    assert name in str(e.value)
    assert says.lower() in str(e.value).lower()


@pytest.mark.parametrize(("data", "name", "says"), BAD)
def test_failed_upload_keeps_previous_data(data, name, says):
    previous = sample_ref()
    state = {K_DATASET: previous, K_SOURCE: "sample"}
    assert apply_upload(state, data, name) is False
    assert state[K_DATASET] is previous
    assert state[K_SOURCE] == "sample"
    assert K_UPLOAD_TRACES not in state
    assert name in state[K_UPLOAD_ERROR]
    assert "previous data stays loaded" in state[K_UPLOAD_ERROR]


def test_good_upload_replaces_data_and_clears_error():
    state = {K_DATASET: sample_ref(), K_SOURCE: "sample", K_UPLOAD_ERROR: "old"}
    assert apply_upload(state, GOOD, "trips.csv") is True
    assert state[K_SOURCE] == "upload"
    assert state[K_DATASET].kind == "upload"
    assert state[K_DATASET].id.startswith("upload:")
    assert K_UPLOAD_ERROR not in state
    # a later bad upload keeps this good one
    good = state[K_DATASET]
    assert apply_upload(state, b"junk", "junk.csv") is False
    assert state[K_DATASET] is good
    assert state[K_SOURCE] == "upload"


def test_same_bytes_same_dataset_id():
    s1, s2 = {}, {}
    apply_upload(s1, GOOD, "trips.csv")
    apply_upload(s2, GOOD, "trips.csv")
    assert s1[K_DATASET].id == s2[K_DATASET].id


def _app_with_bad_upload():
    import streamlit as st

    from odapp import sidebar
    from odapp.data import apply_upload
    from odapp.state import K_SOURCE

    if "did_upload" not in st.session_state:
        st.session_state["did_upload"] = True
        st.session_state[K_SOURCE] = "upload"
        apply_upload(st.session_state, b"\x00\x01garbage\xff\xfe", "broken.csv")
    ctx = sidebar.render()
    st.write(f"dataset in use: {ctx.settings.dataset.kind}")


def test_app_shows_error_and_keeps_sample(tmp_path):
    from streamlit.testing.v1 import AppTest

    from odcore.paths import REPO_ROOT

    if not (REPO_ROOT / "sample_data" / "synthetic_city.parquet").is_file():
        pytest.skip("bundled sample missing")
    at = AppTest.from_function(_app_with_bad_upload, default_timeout=120).run()
    assert not at.exception
    errors = [e.value for e in at.sidebar.error]
    assert any("broken.csv" in e and "previous data stays loaded" in e for e in errors), errors
    assert any("dataset in use: sample" in m.value for m in at.markdown)
    at.run()   # still there, still no traceback
    assert not at.exception
    assert any("broken.csv" in e.value for e in at.sidebar.error)
