"""The peer's SQL (benchmarks/peer_od.py) and the engines give the same weekly OD table row for row."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from benchmarks.peer_od import CABSPOTTING_BOX, DegreeGrid, cab_files, engine_table, peer_table
from tests.odcore.od.test_cab_stream import same_od

T0 = 1211180400   # Mon 2008-05-19 00:00 PDT (Cabspotting README)


def _write_cabs(folder, rng, n_cabs=12, days=9):
    """Cabs moving among four cells around one grid corner every 10 minutes, with many tied cab-hours (six fixes
    over a few cells), exact duplicate fixes, gaps of several hours and fixes outside the box."""
    g = DegreeGrid.of_box(CABSPOTTING_BOX)
    lat0 = g.south + 20 * g.dlat
    lon0 = g.west + 17 * g.dlon
    folder.mkdir()
    for k in range(n_cabs):
        t = T0 + np.arange(0, days * 86400, 600) + k
        t = t[rng.random(t.size) > 0.3]                                 # gaps
        dr, dc = rng.integers(-1, 1, size=(2, t.size))
        lat = lat0 + (dr + 0.5) * g.dlat + rng.normal(0, g.dlat / 8, t.size)
        lon = lon0 + (dc + 0.5) * g.dlon + rng.normal(0, g.dlon / 8, t.size)
        lat[rng.random(t.size) < 0.01] = 45.0                           # glitches outside the box
        rows = [f"{a:.5f} {o:.5f} {int(rng.integers(0, 2))} {s}" for a, o, s in zip(lat, lon, t, strict=True)]
        rows += rows[:: 17]                                             # exact duplicates
        rows.sort(key=lambda r: int(r.split()[3]))
        (folder / f"new_cab{k:02d}.txt").write_text("\n".join(rows) + "\n")


def test_degree_grid_cells():
    g = DegreeGrid.of_box(CABSPOTTING_BOX)
    side_km = np.radians(g.dlat) * 6371.0088
    assert side_km**2 == pytest.approx(1.3)
    lat = np.array([g.south, g.south + 1.5 * g.dlat, CABSPOTTING_BOX[2], 10.0])
    lon = np.array([g.west, g.west + 2.5 * g.dlon, CABSPOTTING_BOX[3], g.west])
    ne = (g.n_rows - 1) * g.n_cols + g.n_cols - 1                     # the box's north-east corner: last cell
    assert g.assign(lat, lon).tolist() == [0, g.n_cols + 2, ne, -1]


@pytest.mark.parametrize("engine", ["memory", "duckdb"])
def test_peer_sql_and_engine_tables_identical(tmp_path, engine):
    _write_cabs(tmp_path / "cabs", np.random.default_rng(7))
    grid = DegreeGrid.of_box(CABSPOTTING_BOX)
    peer = peer_table(cab_files(tmp_path / "cabs"), grid, threads=1)
    eng = engine_table(tmp_path / "cabs", grid, engine)
    assert len(peer) > 20
    assert peer["week_start"].nunique() == 2
    pd.testing.assert_frame_equal(peer, eng)
    no_dedupe = peer_table(cab_files(tmp_path / "cabs"), grid, threads=1, dedupe=False)
    assert not no_dedupe.equals(peer)                  # the duplicate fixes matter here: the DISTINCT is needed


def test_peer_sql_breaks_ties_to_the_lower_cell(tmp_path):
    """One cab-hour with two fixes in cell A and two in cell B (B > A), then an hour in cell C: one trip A -> C."""
    g = DegreeGrid.of_box(CABSPOTTING_BOX)
    a = (g.south + 5.5 * g.dlat, g.west + 5.5 * g.dlon)
    b = (g.south + 5.5 * g.dlat, g.west + 6.5 * g.dlon)
    c = (g.south + 7.5 * g.dlat, g.west + 5.5 * g.dlon)
    t = T0 + 3600 * 10
    fixes = [(b, t + 60), (a, t + 120), (b, t + 180), (a, t + 240), (c, t + 3700)]
    d = tmp_path / "cabs"
    d.mkdir()
    for cab in ("x", "y"):
        (d / f"new_{cab}.txt").write_text("".join(f"{p[0]:.6f} {p[1]:.6f} 0 {s}\n" for p, s in fixes))
    peer = peer_table(cab_files(d), g, threads=1)
    cell = g.assign(np.array([a[0], c[0]]), np.array([a[1], c[1]]))
    assert peer[["origin", "destination", "count"]].values.tolist() == [[cell[0], cell[1], 2]]
    pd.testing.assert_frame_equal(peer, engine_table(d, g, "memory"))


@pytest.mark.realdata
def test_peer_sql_and_engines_identical_on_real_cabs(shared_data, tmp_path):
    files = cab_files(shared_data / "cabspotting_sf")[:4]
    d = tmp_path / "cabs"
    d.mkdir()
    for f in files:
        (d / f.rsplit("/", 1)[-1]).symlink_to(f)
    grid = DegreeGrid.of_box(CABSPOTTING_BOX)
    peer = peer_table(cab_files(d), grid)
    assert len(peer) > 500
    pd.testing.assert_frame_equal(peer_table(cab_files(d), grid, dedupe=False), peer)   # no duplicate fix here
    for engine in ("memory", "duckdb"):
        pd.testing.assert_frame_equal(peer, engine_table(d, grid, engine))




@pytest.mark.parametrize(("workers", "group_bytes", "pool"), [(1, 1, "threads"), (2, 1, "threads"),
                                                              (2, 1, "processes"), (2, 40_000, "threads"),
                                                              (3, 40_000, "processes"), (3, 10**9, "threads")])
def test_streamed_cabs_equal_the_loaded_folder(tmp_path, workers, group_bytes, pool):
    """Groups of cab files (one file each, a few, all) on 1-3 worker threads or processes give the tables of the
    loader + memory engine: robust box, fitted grid, duplicates, glitches, the time offset and a date range."""
    from odcore.data.traces import load_traces
    from odcore.od.engines import build_od
    from odcore.od.engines.cab_stream import build_od_cabspotting
    from odcore.od.trips import ODConfig

    _write_cabs(tmp_path / "cabs", np.random.default_rng(11), n_cabs=9, days=10)
    cfg = ODConfig(tz="America/Los_Angeles")
    kw = {"bbox": "auto", "time_offset_s": 1800, "start": "2008-05-19 06:00", "end": "2008-05-28"}
    tr = load_traces(tmp_path / "cabs", format="cabspotting", tz=cfg.tz, **kw)
    ref = build_od(tr, cfg)
    got = build_od_cabspotting(tmp_path / "cabs", cfg, workers=workers, group_bytes=group_bytes, pool=pool, **kw)
    same_od(got, ref, stats=("user_hours",))
    assert got.stats["bbox_used"] == tr.report.bbox_used
    want = {k: v for k, v in tr.report.rows_dropped.items() if v}
    assert {k: v for k, v in got.stats["rows_dropped"].items() if v} == want
    assert want["duplicate_row"] > 0
    assert want["outside_date_range"] > 0
    assert got.stats["rows_read"] == tr.report.rows_read
    if group_bytes in (1, 10**9):
        assert got.stats["shards"] == (9 if group_bytes == 1 else 1)


@pytest.mark.parametrize("pool", ["threads", "processes"])
def test_streamed_cabs_name_the_bad_file_and_row(tmp_path, pool):
    from odcore.errors import TraceFormatError
    from odcore.od.engines.cab_stream import build_od_cabspotting
    from odcore.od.trips import ODConfig

    _write_cabs(tmp_path / "cabs", np.random.default_rng(3), n_cabs=4, days=2)
    bad = tmp_path / "cabs" / "new_cab02.txt"
    lines = bad.read_text().splitlines()
    lines[4] = "137.5 -122.4 0 " + lines[4].split()[3]
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(TraceFormatError, match="outside") as e:
        build_od_cabspotting(tmp_path / "cabs", ODConfig(tz="America/Los_Angeles"), bbox="auto", workers=2,
                             group_bytes=1, pool=pool)
    assert e.value.file == "new_cab02.txt"
    assert e.value.row == 5


def test_cab_files_refuse_two_files_of_one_cab_and_a_zip(tmp_path):
    import zipfile

    from odcore.data.traces import cab_files
    from odcore.errors import TraceFormatError

    d = tmp_path / "cabs"
    d.mkdir()
    (d / "new_a.txt").write_text(f"37.7 -122.4 0 {T0}\n")
    (d / "README.md").write_text("about the cabs\n")
    assert cab_files(d)[2] == ["a"]                                 # the README is not a cab
    (d / "new_a.txt.gz").write_bytes(b"")
    with pytest.raises(TraceFormatError, match="same cab id"):
        cab_files(d)
    z = tmp_path / "cabs.zip"
    with zipfile.ZipFile(z, "w") as f:
        f.writestr("new_a.txt", f"37.7 -122.4 0 {T0}\n")
    with pytest.raises(TraceFormatError, match="zip"):
        cab_files(z)


@pytest.mark.parametrize("engine", ["memory", "duckdb"])
def test_peer_sql_on_a_synthetic_parquet_folder_equals_the_engines(tmp_path, engine):
    """The peer's query on trace Parquet files (a ``synth --out`` folder) and each engine streaming the same files
    on the same box and degree grid: the same table row for row."""
    from benchmarks.peer_od import SYNTH_BOX, SYNTH_TZ, is_parquet_folder, parquet_files
    from odcore.data.synth import SynthConfig, write_city_chunked

    folder = tmp_path / "city"
    write_city_chunked(folder, SynthConfig(users=600), seed=3, chunk_users=250)
    assert is_parquet_folder(folder)
    assert not is_parquet_folder(tmp_path)
    grid = DegreeGrid.of_box(SYNTH_BOX)
    peer = peer_table(parquet_files(folder), grid, box=SYNTH_BOX, tz=SYNTH_TZ, threads=1, parquet=True)
    eng = engine_table(folder, grid, engine, box=SYNTH_BOX, tz=SYNTH_TZ)
    assert len(peer) > 500
    pd.testing.assert_frame_equal(peer, eng)
