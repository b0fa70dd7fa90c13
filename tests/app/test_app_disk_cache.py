"""The disk cache of the bundled city's tables and of the number-only privacy tables (odapp.data.disk_cache.disk_cached):
built once, read back, rebuilt when damaged, keyed on the engine's source, switched off by ODLAB_CACHE_DIR=none,
never used for uploads, each kind keeping its own most recent files."""

from __future__ import annotations

import pandas as pd

from odapp.data import disk_cache, loading


def test_built_once_then_read_back(tmp_path, monkeypatch):
    monkeypatch.setenv(disk_cache.CACHE_ENV, str(tmp_path))
    calls = []

    def build():
        calls.append(1)
        return pd.DataFrame({"x": [1, 2, 3]})

    a = disk_cache.disk_cached("t", "key", build)
    b = disk_cache.disk_cached("t", "key", build)
    assert len(calls) == 1
    assert a.equals(b)
    assert a is not b
    disk_cache.disk_cached("t", "other key", build)
    assert len(calls) == 2
    assert len(list(tmp_path.glob("*.pkl"))) == 2
    assert not list(tmp_path.glob("*.tmp"))


def test_damaged_file_is_rebuilt_and_switch_off(tmp_path, monkeypatch):
    monkeypatch.setenv(disk_cache.CACHE_ENV, str(tmp_path))
    disk_cache.disk_cached("t", "k", lambda: [1])
    (f,) = tmp_path.glob("*.pkl")
    f.write_bytes(b"not a pickle")
    assert disk_cache.disk_cached("t", "k", lambda: [2]) == [2]
    assert disk_cache.disk_cached("t", "k", lambda: [3]) == [2]          # the rebuilt value was written back
    monkeypatch.setenv(disk_cache.CACHE_ENV, "none")
    assert disk_cache.disk_cached("t", "k", lambda: [4]) == [4]          # off: always built, nothing read


def test_key_includes_the_engine_source(tmp_path, monkeypatch):
    monkeypatch.setenv(disk_cache.CACHE_ENV, str(tmp_path))
    disk_cache.disk_cached("t", "k", lambda: "old code")
    monkeypatch.setattr(disk_cache, "code_stamp", lambda: "another version of odcore")
    assert disk_cache.disk_cached("t", "k", lambda: "new code") == "new code"


def test_only_the_bundled_city_is_kept(tmp_path, monkeypatch):
    # an upload or a synthetic city never reaches the disk; the bundled city ("sample:" ids) does
    from odapp.data import cache as data_cache
    from odcore.od.trips import ODConfig

    monkeypatch.setenv(disk_cache.CACHE_ENV, str(tmp_path))
    df = loading.load_synth(200, 1, 3.0, 1).df
    build = data_cache.od_data.__wrapped__          # the function under st.cache_resource
    for dataset_id in ("upload:abc", "synth:200:1:3:1"):
        build(dataset_id, ODConfig(), _df=df)
    assert not list(tmp_path.glob("*.pkl"))
    od = build("sample:test", ODConfig(), _df=df)
    assert len(list(tmp_path.glob("od-*.pkl"))) == 1
    assert build("sample:test", ODConfig(), _df=df.iloc[:0]).counts.equals(od.counts)   # read back, not rebuilt


def test_each_kind_keeps_its_own_most_recent_files(tmp_path, monkeypatch):
    monkeypatch.setenv(disk_cache.CACHE_ENV, str(tmp_path))
    monkeypatch.setattr(disk_cache, "CACHE_MAX_FILES", 2)
    disk_cache.disk_cached("od", "city", lambda: "the city's tables")
    for i in range(5):                                     # many small tables do not push the city's out
        disk_cache.disk_cached("budget", f"eps {i}", lambda i=i: i)
    assert len(list(tmp_path.glob("budget-*.pkl"))) == 2
    assert disk_cache.disk_cached("od", "city", lambda: "rebuilt") == "the city's tables"
    assert disk_cache.disk_cached("budget", "eps 4", lambda: "rebuilt") == 4
    assert disk_cache.disk_cached("budget", "eps 0", lambda: "rebuilt") == "rebuilt"


def test_number_only_tables_are_kept_and_equal_the_engines(tmp_path, monkeypatch):
    """The privacy-loss tables (no data in them) are built once per machine: a second server reads them back."""
    import numpy as np

    from odapp.budget import cache as budget_cache
    from odcore.privacy import accounting as acc

    monkeypatch.setenv(disk_cache.CACHE_ENV, str(tmp_path))
    got = budget_cache.epsilon_vs_trips.__wrapped__(0.66, 12, 1e-6)
    assert len(list(tmp_path.glob("vstrips-*.pkl"))) == 1
    pd.testing.assert_frame_equal(got, acc.epsilon_vs_trips(0.66, trips_max=12, delta=1e-6))
    monkeypatch.setattr(acc, "epsilon_vs_trips", lambda *a, **k: 1 / 0)   # read back: the engine is not called
    pd.testing.assert_frame_equal(budget_cache.epsilon_vs_trips.__wrapped__(0.66, 12, 1e-6), got)
    week, total = budget_cache.person_columns.__wrapped__(0.66, 10, 1e-6, 12, 3)
    again = budget_cache.person_columns.__wrapped__(0.66, 10, 1e-6, 12, 3)
    assert np.array_equal(week, again[0])
    assert np.array_equal(total, again[1])
    assert len(list(tmp_path.glob("personcolsrel-*.pkl"))) == 1


def test_the_bundled_districts_are_kept_by_content_and_an_uploaded_zone_file_is_not(tmp_path, monkeypatch):
    import shutil

    from odapp.data import cache as data_cache
    from odapp.data.zones_ui import BUNDLED_ZONES
    from odcore.od.trips import ODConfig

    monkeypatch.setenv(disk_cache.CACHE_ENV, str(tmp_path / "cache"))
    loaded = loading.load_sample()
    build = data_cache.od_data.__wrapped__
    upload = tmp_path / "districts.geojson"          # the same content, as an upload would be
    shutil.copy(BUNDLED_ZONES, upload)
    build("sample:test", ODConfig(tz=loaded.tz, zones=str(upload)), _df=loaded.df)
    assert not list((tmp_path / "cache").glob("od-*.pkl"))
    od = build("sample:test", ODConfig(tz=loaded.tz, zones=str(BUNDLED_ZONES)), _df=loaded.df)
    assert len(list((tmp_path / "cache").glob("od-*.pkl"))) == 1
    back = build("sample:test", ODConfig(tz=loaded.tz, zones=str(BUNDLED_ZONES)), _df=loaded.df.iloc[:0])
    assert back.counts.equals(od.counts)            # read back, not rebuilt
    assert disk_cache.shipped_file_hash(BUNDLED_ZONES) is not None
    assert disk_cache.shipped_file_hash(upload) is None
    assert disk_cache.shipped_file_hash("h3:8") is None
