"""Uploads: bytes + name in, a clear error out when unreadable, and the previous data stays loaded."""

from __future__ import annotations

import html

import pytest

from odapp.data.loading import UploadOptions, apply_upload, read_upload, sample_ref
from odapp.shared.state import K_DATASET, K_SOURCE, K_UPLOAD_ERROR, K_UPLOAD_TRACES
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
    # San Francisco coordinates and no zone in the file: local time is looked up from the coordinates
    assert loaded.cli == {"input": "trips.csv", "format": "csv", "tz": "America/Los_Angeles", "time_offset": 0.0,
                          "bbox": "auto", "region": "auto"}
    assert loaded.summary["tz_source"] == "coordinates"


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

    from odapp.data.loading import apply_upload
    from odapp.shared import sidebar
    from odapp.shared.state import K_SOURCE

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
    errors = [html.unescape(e.value).replace("\u200b", "") for e in at.sidebar.error]   # names shown as text
    assert any("broken.csv" in e and "previous data stays loaded" in e for e in errors), errors
    assert any("dataset in use: sample" in m.value for m in at.markdown)
    at.run()   # still there, still no traceback
    assert not at.exception
    assert any("broken.csv" in html.unescape(e.value).replace("\u200b", "") for e in at.sidebar.error)


def _hold(q, key=None):
    """Start a thread that holds ``q``'s slot until the returned event is set; return (thread, event)."""
    import threading
    import time

    release = threading.Event()

    def holder():
        with q.slot(key=key):
            release.wait(timeout=10)

    t = threading.Thread(target=holder)
    t.start()
    while not q._line:
        time.sleep(0.001)
    return t, release


def test_parse_queue_reads_one_upload_at_a_time_and_says_how_many_are_ahead():
    """Uploads of several sessions (threads) go through the queue one at a time, in arrival order; a waiting one
    is told how many are ahead of it, and the counts it is told only go down."""
    import threading
    import time

    from odapp.data.parse_queue import ParseQueue

    q = ParseQueue(slots=1, poll_s=0.01)
    inside, most, order, told = [0], [0], [], {}
    lock = threading.Lock()

    def session(i: int) -> None:
        while len(q._line) < i:   # arrive in order 0, 1, 2, 3
            time.sleep(0.002)
        with q.slot(on_wait=lambda n: told.setdefault(i, []).append(n)):
            with lock:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
                order.append(i)
            while i == 0 and len(q._line) < 4:   # hold the slot until everyone is queued
                time.sleep(0.002)
            time.sleep(0.05)
            with lock:
                inside[0] -= 1

    threads = [threading.Thread(target=session, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert most[0] == 1, "two uploads were parsed at the same time"
    assert order == [0, 1, 2, 3]
    assert 0 not in told                   # the first one never waited
    assert told[3] == sorted(told[3], reverse=True)
    assert (told[3][0], told[3][-1]) == (3, 1)
    assert (q.served, q._line) == (4, [])


def test_parse_queue_lets_a_stopped_waiter_leave():
    """A session stopped while waiting (its script raises in on_wait) leaves the queue; the next one goes on."""

    from odapp.data.parse_queue import ParseQueue

    q = ParseQueue(slots=1, poll_s=0.01)
    t, release = _hold(q)

    def stop(n):
        raise RuntimeError("script stopped")

    with pytest.raises(RuntimeError):
        with q.slot(on_wait=stop):
            pass
    assert len(q._line) == 1
    release.set()
    t.join(timeout=5)
    with q.slot():
        assert len(q._line) == 1
    assert q._line == []


def test_apply_upload_waits_in_the_queue_and_reports_it():
    """apply_upload goes through the queue it is given; while another upload holds the slot it calls on_wait."""

    from odapp.data.parse_queue import ParseQueue

    q = ParseQueue(slots=1, poll_s=0.01)
    t, release = _hold(q)
    told = []

    def on_wait(n):
        told.append(n)
        release.set()

    state = {}
    assert apply_upload(state, GOOD, "trips.csv", on_wait=on_wait, queue=q) is True
    t.join(timeout=5)
    assert told == [1]
    assert state[K_SOURCE] == "upload"


def test_parse_queue_keeps_the_place_of_an_interrupted_wait():
    """Streamlit stops a waiting script when the person presses again: the same session and file take their place
    back (not the back of the line); a place nobody takes back is dropped after the lease."""
    import threading
    import time

    from odapp.data.parse_queue import ParseQueue

    q = ParseQueue(slots=1, poll_s=0.01, lease_s=0.5)
    order, told = [], []

    def stopped(n):
        raise RuntimeError("rerun requested")

    def waiter(key, record=None):
        with q.slot(on_wait=record, key=key):
            order.append(key)

    h, release = _hold(q, "h")
    threads = [h]
    with pytest.raises(RuntimeError):   # "c" is interrupted while waiting: its place stays
        with q.slot(on_wait=stopped, key="c"):
            pass
    threads.append(threading.Thread(target=waiter, args=("d",)))
    threads[-1].start()
    while len(q._line) < 3:
        time.sleep(0.001)
    threads.append(threading.Thread(target=waiter, args=("c", told.append)))   # "c" again, after "d" arrived
    threads[-1].start()
    time.sleep(0.1)
    assert told[0] == 1                 # one ahead (the holder), not two
    release.set()
    for t in threads:
        t.join(timeout=10)
    assert order == ["c", "d"]
    h, release = _hold(q, "h")
    with pytest.raises(RuntimeError):   # interrupted and never taken back: dropped after the lease
        with q.slot(on_wait=stopped, key="e"):
            pass
    assert [t.key for t in q._line] == ["h", "e"]
    f = threading.Thread(target=waiter, args=("f",))
    f.start()
    time.sleep(0.8)
    assert [t.key for t in q._line] == ["h", "f"]
    release.set()
    for t in (h, f):
        t.join(timeout=10)
    assert order == ["c", "d", "f"]
    assert q._line == []
