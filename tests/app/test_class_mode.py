"""Serving a class (``python -m odserve`` sets :data:`odapp.data.private.CLASS_ENV`): no path on the server can be named
in the app, and each session's files are private to it (0700) and removed when it ends."""

from __future__ import annotations

import io
import os
import stat
import time
import zipfile
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from odapp.data import cache as data_cache
from odapp.data import private
from odapp.data.loading import K_UPLOAD_DIR, UploadOptions, apply_upload, session_folder, unpack_counts_zip
from odapp.data.zones_ui import apply_zone_upload
from odapp.shared.state import K_COUNTS_DIR, K_SOURCE, K_ZONE_FILE, DataSource
from odcore.cli import main
from odcore.errors import TraceFormatError
from odcore.paths import REPO_ROOT
from tests.hostile import generator, names

pytestmark = pytest.mark.timeout(300)
REFUSED = "reads no folder named by path"


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """A teacher's folder holding one counts folder ("city"), and a counts folder elsewhere on the server."""
    d = tmp_path_factory.mktemp("class")
    traces = d / "traces.csv"
    traces.write_text(generator.table())
    teacher = d / "teacher"
    for out in (teacher / "city", d / "elsewhere" / "private_counts"):
        assert main(["trips", "--input", str(traces), "--counts-out", str(out)]) == 0
    return teacher, d / "elsewhere" / "private_counts"


def _zip_of(folder: Path, prefix: str = "counts/") -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for f in sorted(folder.rglob("*")):
            if f.is_file():
                z.write(f, prefix + str(f.relative_to(folder)))
    return buf.getvalue()


def _app(state: dict | None = None) -> AppTest:
    at = AppTest.from_file(str(REPO_ROOT / "app.py"), default_timeout=120)
    for k, v in (state or {}).items():
        at.session_state[k] = v
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def _data_caption(at) -> str:
    return next(c.value for c in at.sidebar.caption if c.value.startswith("Data:"))


def test_a_typed_server_path_is_refused_in_class_mode(folders, monkeypatch):
    _, elsewhere = folders
    state = {K_SOURCE: DataSource.COUNTS.value, K_COUNTS_DIR: str(elsewhere)}
    at = _app(state)                                   # on one's own machine any folder may be named
    assert "OD counts folder" in _data_caption(at)
    monkeypatch.setenv(private.CLASS_ENV, "1")
    at = _app(state)
    assert any(REFUSED in e.value for e in at.error), [e.value for e in at.error]
    assert not any("OD counts folder" in c.value for c in at.caption)    # nothing of the folder was read
    assert not [t for t in at.text_input if t.label == "Counts folder"]    # no box to type a path into
    for trick in (str(elsewhere / ".." / "private_counts"), f"{private.server_root()}/../../{elsewhere}"):
        at = _app({**state, K_COUNTS_DIR: trick})
        assert any(REFUSED in e.value for e in at.error), trick


def test_class_mode_opens_the_teachers_folders_and_uploaded_zips(folders, monkeypatch):
    teacher, elsewhere = folders
    monkeypatch.setenv(private.CLASS_ENV, "1")
    monkeypatch.setenv(private.COUNTS_ENV, str(teacher))
    at = _app({K_SOURCE: DataSource.COUNTS.value})
    pick = at.selectbox(key="w.counts_pick")
    assert pick.options == ["—", "city"]
    pick.set_value("city").run()
    assert not at.exception, [e.message for e in at.exception]
    assert "OD counts folder" in _data_caption(at)
    assert at.session_state[K_COUNTS_DIR] == str(teacher / "city")
    # an upload: a zip of a counts folder, unpacked into the session's own folder, which is allowed
    state: dict = {}
    path = unpack_counts_zip(state, _zip_of(elsewhere), "mine.zip")
    assert private.within(path, state[K_UPLOAD_DIR])
    at = _app({**state, K_SOURCE: DataSource.COUNTS.value, K_COUNTS_DIR: path})
    assert not at.error, [e.value for e in at.error]
    assert "OD counts folder" in _data_caption(at)


def test_a_counts_zip_that_points_outside_or_holds_nothing_is_refused(tmp_path):
    state: dict = {}
    for members, message in (({"../../evil/manifest.json": b"{}"}, "zip slip"),
                             ({"notes.txt": b"hello"}, "holds no OD counts folder")):
        with pytest.raises(TraceFormatError, match=message):
            unpack_counts_zip(state, generator.zip_bytes(members), "c.zip")
    with pytest.raises(TraceFormatError, match="not a zip"):
        unpack_counts_zip(state, b"not a zip", "c.zip")
    folder = Path(state[K_UPLOAD_DIR])
    assert not (folder.parent.parent / "evil").exists()
    assert not [p for p in folder.iterdir() if p.name.startswith("counts_")]   # nothing of them kept


def test_session_folders_are_private_and_hold_every_upload():
    state: dict = {}
    assert apply_upload(state, generator.table().encode(), "t.csv", UploadOptions())
    assert apply_zone_upload(state, names.zones_geojson(), "zones.geojson")
    folder = session_folder(state)
    root = private.server_root()
    assert folder.parent == root
    for d in (root, folder):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d
    assert private.within(state[K_ZONE_FILE], folder)           # zone files too, not a shared folder
    assert {p.suffix for p in folder.iterdir()} == {".parquet", ".geojson"}
    other: dict = {}
    assert session_folder(other) != folder                      # each session its own


def test_the_end_of_a_session_removes_its_files_and_their_cache():
    state: dict = {}
    assert apply_upload(state, generator.table().encode(), "t.csv", UploadOptions())
    folder = session_folder(state)
    parquet = next(folder.glob("*.parquet"))
    assert len(data_cache.upload_traces(str(parquet)).df) == generator.N
    data_cache.release_session_files(str(folder))                    # what Streamlit calls when the connection closes
    assert not folder.exists()
    with pytest.raises(FileNotFoundError):                      # the table left the cache with its file
        data_cache.upload_traces(str(parquet))


def test_the_sweeper_removes_folders_untouched_for_its_idle_time():
    old, fresh = private.new_session_folder(), private.new_session_folder()
    then = time.time() - private.IDLE_S - 5
    os.utime(old, (then, then))
    gone = private.sweep()
    assert old in gone
    assert not old.exists()
    assert fresh.exists()
    assert not private.remove(private.server_root().parent)    # only session folders of this server


def test_a_session_back_after_its_folder_was_removed_is_told_to_upload_again():
    """The connection closed (its folder removed with the upload) and the browser came back to the same session:
    the upload is forgotten, the page opens on the bundled city and says why."""
    state: dict = {}
    assert apply_upload(state, generator.table().encode(), "t.csv", UploadOptions())
    data_cache.release_session_files(state[K_UPLOAD_DIR])
    at = _app(state)
    assert "Bundled synthetic city" in _data_caption(at)
    assert any("removed from the server when your connection closed" in e.value for e in at.error), \
        [e.value for e in at.error]
    assert Path(at.session_state[K_UPLOAD_DIR]).is_dir()            # a new folder for what comes next
