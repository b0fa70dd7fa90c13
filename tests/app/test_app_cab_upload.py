"""The dashboard's upload of Cabspotting cab files (a zip, or one cab file) streams them (odapp.data.loading.stream_upload,
odcore.od.engines.cab_stream): the same load report, weekly tables, map of points per zone, image of the fixes and
data fingerprint as reading the upload into a table, without reading it into a table."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from odapp.data import cache as data_cache
from odapp.data.loading import UploadOptions, apply_upload, first_od_path, read_upload
from odapp.shared.state import K_SOURCE, K_UPLOAD_TRACES, DataSource
from odcore.od.trips import ODConfig
from odcore.paths import REPO_ROOT
from tests.app import app_on_upload
from tests.app.map_element import deck_text, decks, map_elements
from tests.app.test_app_regions import zip_folder
from tests.odcore.od.test_cab_stream import TZ, write_cabs


@pytest.fixture(scope="module")
def cab_zip(tmp_path_factory) -> bytes:
    d = tmp_path_factory.mktemp("cabupload") / "cabs"
    write_cabs(d, np.random.default_rng(9), n_cabs=6, days=8)
    return zip_folder(d)


def _refuse(*a, **k):
    raise AssertionError("load_traces was called: the upload was read into a table")


OPTIONS = [UploadOptions(), UploadOptions(bbox="none", region="1", tz=TZ, time_offset_s=600),
           UploadOptions(bbox="37.74,-122.44,37.80,-122.40", region="all")]


@pytest.mark.parametrize("options", OPTIONS)
def test_cab_upload_is_streamed_with_the_loaded_summary(cab_zip, monkeypatch, options):
    ref = read_upload(cab_zip, "cabs.zip", options)
    import odcore.data.traces as tr

    monkeypatch.setattr(tr, "load_traces", _refuse)
    state: dict = {}
    assert apply_upload(state, cab_zip, "cabs.zip", options)
    stored = state[K_UPLOAD_TRACES]
    assert stored.cabs is not None
    assert stored.summary == ref.summary
    assert stored.cli == ref.cli
    assert stored.summary["source"] == "cabs.zip"


def test_streamed_upload_tables_map_and_fingerprint_equal_the_loaded_ones(cab_zip):
    from odcore.data.fingerprint import trace_fingerprint
    from odcore.od.engines.cab_stream import fix_density_cabspotting, stream_cabspotting
    from odcore.od.trips import ODConfig, build_od
    from odcore.space.density import fix_density

    loaded = read_upload(cab_zip, "cabs.zip")
    state: dict = {}
    assert apply_upload(state, cab_zip, "cabs.zip")
    cabs = state[K_UPLOAD_TRACES].cabs
    from odapp.data import cache as data_cache

    summary = state[K_UPLOAD_TRACES].summary
    for cfg in (ODConfig(tz=TZ), ODConfig(tz=TZ, cell_km2=0.4), ODConfig(tz=TZ, zones="h3:8")):
        od = data_cache.streamed_od("upload:test", cfg, cabs, _summary=summary)    # as the sidebar builds them
        _, fresh = stream_cabspotting(cabs.folder, cfg, name=cabs.name, cell_points=True, **cabs.load_options)
        ref = build_od(loaded.df, cfg)
        pd.testing.assert_frame_equal(fresh.counts, ref.counts)
        assert fresh.stats["rows_dropped"] == ref.stats["rows_dropped"]
        pd.testing.assert_frame_equal(od.counts, ref.counts)
        pd.testing.assert_frame_equal(od.user_week, ref.user_week)
        pd.testing.assert_frame_equal(od.pairs, ref.pairs)
        assert od.stats["rows_dropped"] == ref.stats["rows_dropped"]
        cells = od.grid.assign(loaded.df["lat"].to_numpy(), loaded.df["lon"].to_numpy())
        np.testing.assert_array_equal(od.stats["cell_points"], np.bincount(cells[cells >= 0],
                                                                           minlength=od.grid.n_cells))
    box = (-122.45, 37.74, -122.38, 37.81)
    img = fix_density_cabspotting(cabs.folder, box, 300, tz=TZ, bbox=loaded.summary["bbox_used"], group_bytes=20_000)
    np.testing.assert_array_equal(img, fix_density(loaded.df["lon"], loaded.df["lat"], box, 300))
    assert img.sum() > 1000
    assert cabs.fingerprint == trace_fingerprint(loaded.df)


def _same_od(a, b) -> None:
    pd.testing.assert_frame_equal(a.counts, b.counts)
    pd.testing.assert_frame_equal(a.user_week, b.user_week)
    pd.testing.assert_frame_equal(a.pairs, b.pairs)
    assert a.stats["rows_dropped"] == b.stats["rows_dropped"]
    np.testing.assert_array_equal(a.stats["cell_points"], b.stats["cell_points"])
    assert a.grid.to_dict() == b.grid.to_dict()


def _first_od_is_the_second_pass(raw: bytes, name: str, options: UploadOptions | None = None) -> None:
    """The tables the upload's pass kept for its own zones are those the sidebar's pass builds (the second pass
    over the kept fixes, :func:`odapp.data.cache.streamed_od` without them); another grid gets none of them."""
    state: dict = {}
    assert apply_upload(state, raw, name, options or UploadOptions())
    stored = state[K_UPLOAD_TRACES]
    cfg = ODConfig(tz=stored.summary["tz"])
    first = stored.cabs.first_od(cfg)
    assert first is not None
    assert stored.cabs.first_od(ODConfig(tz=cfg.tz, cell_km2=0.4)) is None
    kept = first_od_path(Path(stored.cabs.folder))
    assert kept.is_file()
    assert Path(stored.cabs.folder) not in kept.parents   # no file of the upload can replace it
    kept.unlink()
    assert stored.cabs.first_od(cfg) is None
    second = data_cache.streamed_od.__wrapped__("upload:test", cfg, stored.cabs, stored.summary)
    _same_od(first, second)


@pytest.mark.parametrize("options", OPTIONS)
def test_the_upload_pass_keeps_the_tables_of_its_zones(cab_zip, options):
    _first_od_is_the_second_pass(cab_zip, "cabs.zip", options)


def test_other_uploads_are_read_into_a_table(cab_zip, tmp_path):
    state: dict = {}
    assert apply_upload(state, cab_zip, "cabs.zip", UploadOptions(format="csv")) is False   # not a CSV
    csv = b"user,time,lat,lon\n" + b"".join(f"u{i % 3},2024-01-0{1 + i % 5}T0{i % 9}:00:00Z,37.7{i},-122.4{i}\n"
                                            .encode() for i in range(40))
    assert apply_upload(state, csv, "t.csv")
    assert state[K_UPLOAD_TRACES].cabs is None


def test_a_new_upload_removes_the_unpacked_cab_files(cab_zip):
    from pathlib import Path

    state: dict = {}
    assert apply_upload(state, cab_zip, "cabs.zip")
    folder = Path(state[K_UPLOAD_TRACES].path)
    assert folder.is_dir()
    assert apply_upload(state, cab_zip, "cabs.zip", UploadOptions(bbox="none"))
    assert not folder.exists()
    assert Path(state[K_UPLOAD_TRACES].path).is_dir()


def _pages(cab_zip, streamed: bool, monkeypatch) -> dict:
    """The Data page's figures and map and the OD release page's map after uploading the cabs."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    from odapp.data import loading

    st.cache_resource.clear()
    st.cache_data.clear()
    at = AppTest.from_file(str(REPO_ROOT / "app.py"), default_timeout=600)
    at.run()
    state: dict = {}
    with monkeypatch.context() as m:
        if not streamed:
            m.setattr(loading, "stream_upload", lambda *a, **k: None)
        assert apply_upload(state, cab_zip, "cabs.zip")
    for k, v in state.items():
        at.session_state[k] = v
    at.session_state[K_SOURCE] = DataSource.UPLOAD.value
    with monkeypatch.context() as m:
        if streamed:
            import odcore.data.traces as tr

            m.setattr(tr, "load_traces", _refuse)
        at.switch_page("pages/1_Data.py").run()
        assert not at.exception, [e.message for e in at.exception]
        out = {"metrics": [(x.label, x.value) for x in at.metric],
               "data_maps": [deck_text(el) for el in map_elements(at)],
               "tables": [x.value.to_dict() for x in at.dataframe]}
        at.switch_page("pages/2_OD_release.py").run()
        assert not at.exception, [e.message for e in at.exception]
        out["release_maps"] = decks(at)
    assert at.session_state[K_UPLOAD_TRACES].cabs is not None if streamed else True
    return out


@pytest.mark.slow
def test_app_pages_from_a_streamed_cab_upload_equal_the_loaded_ones(cab_zip, monkeypatch):
    """The Data page (figures, drop reasons, map of points per zone) and the OD release page (flow map with the
    image of the fixes) of a streamed upload are those of the loaded upload; the loader is never called."""
    streamed = _pages(cab_zip, True, monkeypatch)
    loaded = _pages(cab_zip, False, monkeypatch)
    assert streamed["metrics"] == loaded["metrics"]
    assert streamed["tables"] == loaded["tables"]
    assert streamed["data_maps"] == loaded["data_maps"]
    assert streamed["release_maps"] == loaded["release_maps"]
    assert any("fixes" in json.dumps(m) for m in streamed["release_maps"])



def test_pages_that_need_every_fix_read_the_table_when_they_ask(cab_zip):
    """Knock Knock series and the zone comparison take the table of fixes: read from the unpacked cab files by
    the loader, equal to the table of the loaded upload, only when asked for."""
    from odapp.data import cache as data_cache
    from odapp.data.loading import StreamedLoaded

    state: dict = {}
    assert apply_upload(state, cab_zip, "cabs.zip")
    stored = state[K_UPLOAD_TRACES]
    asked = []

    def load():
        asked.append(1)
        return data_cache.upload_cab_traces(stored.cabs).df

    lazy = StreamedLoaded(stored.cabs, stored.summary, stored.cli, load)
    assert lazy.tz == TZ
    assert not asked
    pd.testing.assert_frame_equal(lazy.df, read_upload(cab_zip, "cabs.zip").df)
    assert asked


@pytest.mark.realdata
def test_real_cab_upload_is_streamed_with_the_loaded_summary_and_tables(shared_data, monkeypatch):
    """Twelve real cab files zipped: the streamed upload's summary and weekly tables are the loaded upload's."""
    from odcore.od.engines.cab_stream import stream_cabspotting
    from odcore.od.trips import ODConfig, build_od

    src = shared_data / "cabspotting_sf"
    if not src.is_dir():
        pytest.skip("cabspotting_sf not present")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for f in sorted(src.glob("new_*.txt.gz"))[:12]:
            z.write(f, f.name)
    raw = buf.getvalue()
    loaded = read_upload(raw, "cabs12.zip")
    import odcore.data.traces as tr

    state: dict = {}
    with monkeypatch.context() as m:
        m.setattr(tr, "load_traces", _refuse)
        assert apply_upload(state, raw, "cabs12.zip")
    cabs = state[K_UPLOAD_TRACES].cabs
    assert state[K_UPLOAD_TRACES].summary == loaded.summary
    assert loaded.summary["rows_dropped"]["outside_bbox"] > 0
    cfg = ODConfig(tz=TZ)
    _, od = stream_cabspotting(cabs.folder, cfg, name=cabs.name, keep_dir=cabs.keep_dir, **cabs.load_options)
    ref = build_od(loaded.df, cfg)
    pd.testing.assert_frame_equal(od.counts, ref.counts)
    pd.testing.assert_frame_equal(od.user_week, ref.user_week)
    _first_od_is_the_second_pass(raw, "cabs12.zip")


@pytest.mark.slow
def test_every_page_runs_from_a_streamed_cab_upload(cab_zip):
    """Pages that need every fix (Knock Knock) read the table on their own; the others run from the streamed
    tables."""

    at = app_on_upload(cab_zip, "cabs.zip")
    for page in sorted((REPO_ROOT / "pages").glob("*.py")):
        at.switch_page(f"pages/{page.name}").run()
        assert not at.exception, (page.name, [e.message for e in at.exception])
    assert at.session_state[K_UPLOAD_TRACES].cabs is not None
