"""AppTest: hostile uploads as the dashboard shows them (AppTest has no file picker, so the upload is applied with
the function the "Load this file" button calls, in the session's own state, and the pages are run on it)."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from odapp.data.loading import StoredUpload, UploadOptions, apply_upload
from odapp.shared.state import K_DATASET, K_SOURCE, K_UPLOAD_ERROR, K_UPLOAD_TRACES, DataSource
from odcore.paths import REPO_ROOT
from tests.hostile.generator import CASES, rows

BY_NAME = {c.name: c for c in CASES}


def _session_with_upload(data: bytes, name: str, options: UploadOptions | None = None) -> AppTest:
    at = AppTest.from_file(str(REPO_ROOT / "app.py"), default_timeout=240)
    at.run()
    state: dict = {}
    ok = apply_upload(state, data, name, options or UploadOptions())
    for k, v in state.items():
        at.session_state[k] = v
    at.session_state[K_SOURCE] = DataSource.UPLOAD.value
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    at.ok = ok
    return at


def test_upload_error_is_shown_in_the_main_area_not_a_crash():
    at = _session_with_upload(BY_NAME["iso_year_2300"].make(), "y2300.csv")
    assert not at.ok
    main_errors = [e.value for e in at.main.error]
    assert any("year 2300" in m for m in main_errors), main_errors
    assert "Bundled synthetic city" in " ".join(c.value for c in at.sidebar.caption)   # previous data stays


def test_stray_fix_upload_is_clipped_and_kept_once_as_parquet():
    at = _session_with_upload(BY_NAME["stray_gps_fix"].make(), "stray.csv")
    assert at.ok
    stored = at.session_state[K_UPLOAD_TRACES]
    assert isinstance(stored, StoredUpload)
    assert stored.path.endswith(".parquet")
    assert stored.summary["rows_dropped"] == {"outside_bbox": 1}
    assert at.session_state[K_DATASET].kind == DataSource.UPLOAD
    at.switch_page("pages/1_Data.py").run()
    assert not at.exception, [e.message for e in at.exception]
    assert not at.main.error, [e.value for e in at.main.error]


def test_continent_wide_upload_warns_about_the_grid():
    # the base users spread from San Francisco to New York: a 4,000 km wide grid of 1.3 km² cells
    body = "user,time,lat,lon\n" + "".join(
        f"{u},{t},{la + (u % 2) * 3.0},{lo + (u % 2) * 48.0}\n" for u, t, la, lo in rows())
    at = _session_with_upload(body.encode(), "usa.csv", UploadOptions(bbox="none", region="all"))
    assert at.ok
    warnings = [w.value for w in at.main.warning]
    assert any("Very large grid" in w and "cells" in w for w in warnings), warnings


@pytest.mark.parametrize("name", ["latin1", "ids_above_2_63_mixed", "dst_gap_los_angeles"])
def test_formerly_crashing_uploads_render_every_number(name):
    case = BY_NAME[name]
    from tests.hostile.generator import upload_options

    at = _session_with_upload(case.make(), case.filename, upload_options(case))
    assert at.ok, at.session_state[K_UPLOAD_ERROR] if K_UPLOAD_ERROR in at.session_state else None
    assert at.session_state[K_UPLOAD_TRACES].summary["users"] == case.users
    assert not at.main.error, [e.value for e in at.main.error]
