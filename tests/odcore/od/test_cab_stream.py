"""A Cabspotting folder streamed (odcore.od.engines.cab_stream) gives what loading it gives: the same OD tables,
load report, summary and release fingerprint, in the Python API and in every command that builds OD from it; and
those entry points do stream (the loader is never called)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from odcore.cli import main

T0 = 1211180400   # Mon 2008-05-19 00:00 PDT (the Cabspotting README's window)
TZ = "America/Los_Angeles"


def write_cabs(folder, rng, n_cabs=8, days=9):
    """Cabs hopping between a few spots of San Francisco every ~10 minutes, with gaps, exact duplicate fixes, GPS
    glitches far away, a row with a missing value and one file in newest-first order."""
    spots = np.array([[37.7749, -122.4194], [37.7936, -122.3965], [37.7599, -122.4148], [37.7680, -122.4300],
                      [37.8024, -122.4058], [37.7529, -122.4474]])
    folder.mkdir()
    for k in range(n_cabs):
        t = T0 + np.arange(0, days * 86400, 600) + 7 * k
        t = t[rng.random(t.size) > 0.3]
        where = spots[rng.integers(0, len(spots), t.size)] + rng.normal(0, 0.002, (t.size, 2))
        where[rng.random(t.size) < 0.003] = [45.0, -100.0]                  # glitches outside the robust box
        rows = [f"{a:.5f} {o:.5f} {int(rng.integers(0, 2))} {s}" for (a, o), s in zip(where, t, strict=True)]
        rows += rows[::19]                                                  # exact duplicates
        rows.sort(key=lambda r: int(r.split()[3]), reverse=k == 3)         # cab 3 newest first
        if k == 5:
            rows[10] = "nan " + rows[10].split(" ", 1)[1]                   # a missing latitude
        (folder / f"new_cab{k:02d}.txt").write_text("\n".join(rows) + "\n")


@pytest.fixture(scope="module")
def cabs(tmp_path_factory):
    d = tmp_path_factory.mktemp("cabstream") / "cabs"
    write_cabs(d, np.random.default_rng(5))
    return d


@pytest.fixture
def no_loader(monkeypatch):
    """Make the loader raise: whatever calls it did not stream."""
    import odcore.data.traces as tr

    def refuse(*a, **k):
        raise AssertionError("load_traces was called: the folder was loaded, not streamed")

    monkeypatch.setattr(tr, "load_traces", refuse)


def same_od(a, b, stats=("rows_used", "rows_dropped", "user_hours")) -> None:
    """Identical weekly tables, per-user-week figures, pairs, weeks, used cells and the ``stats`` named."""
    assert a.week_starts == b.week_starts
    pd.testing.assert_frame_equal(a.counts, b.counts)
    pd.testing.assert_frame_equal(a.user_week, b.user_week)
    pd.testing.assert_frame_equal(a.pairs, b.pairs)
    np.testing.assert_array_equal(a.cells, b.cells)
    for k in stats:
        assert a.stats[k] == b.stats[k], k


OPTIONS = [
    {"bbox": "auto"},
    {"bbox": None, "region": "auto"},                         # the glitches make the data wider than a city
    {"bbox": "auto", "region": "auto", "time_offset_s": 1800, "start": "2008-05-20", "end": "2008-05-27 12:00"},
    {"bbox": "37.74,-122.44,37.80,-122.40", "region": "all"},
    {"bbox": None, "region": "1"},
    {"bbox": "auto", "region": "37.75,-122.43,37.79,-122.39"},
]


@pytest.mark.parametrize("kw", OPTIONS)
def test_streamed_folder_equals_loaded_folder(cabs, kw):
    from odcore.data.fingerprint import trace_fingerprint
    from odcore.data.traces import load_traces
    from odcore.od.engines import build_od
    from odcore.od.engines.cab_stream import stream_cabspotting
    from odcore.od.trips import ODConfig

    loaded = load_traces(cabs, format="cabspotting", tz="auto", **kw)
    ref = build_od(loaded, ODConfig(tz=TZ))
    traces, od = stream_cabspotting(cabs, tz="auto", fingerprint=True, group_bytes=30_000, **kw)
    same_od(od, ref)
    assert traces.report == loaded.report
    assert traces.summary() == loaded.summary()
    assert traces.fingerprint == trace_fingerprint(loaded.df)
    assert not traces.loaded
    assert sum(loaded.report.rows_dropped.values()) > 0


def test_streamed_folder_report_has_every_drop_reason(cabs):
    from odcore.od.engines.cab_stream import stream_cabspotting

    traces, _ = stream_cabspotting(cabs, bbox="auto", start="2008-05-20")
    assert set(traces.report.rows_dropped) == {"missing_value", "outside_bbox", "outside_date_range", "duplicate_row"}
    assert traces.report.tz_source == "format"
    traces2, _ = stream_cabspotting(cabs, tz=TZ, bbox=None, region="1")
    assert traces2.report.tz_source == "given"
    assert traces2.report.region == 1
    assert traces2.report.regions


def test_streamed_traces_read_the_table_only_when_asked(cabs):
    from odcore.data.traces import load_traces
    from odcore.od.engines.cab_stream import stream_cabspotting

    traces, _ = stream_cabspotting(cabs, bbox="auto")
    assert not traces.loaded
    pd.testing.assert_frame_equal(traces.df, load_traces(cabs, format="cabspotting", tz="auto", bbox="auto").df)
    assert traces.loaded


def test_build_od_streams_a_cabspotting_file_source(cabs, no_loader):
    from odcore.od.engines import build_od, file_source
    from odcore.od.trips import ODConfig

    cfg = ODConfig(tz=TZ)
    src = file_source(cabs, format="cabspotting", bbox="auto", extra={"region": "auto"})
    od = build_od(src, cfg)
    assert od.stats["load_report"].rows_read > 0
    slim = build_od(src, cfg, keep_pairs=False, bound=(2, 7))
    assert len(slim.pairs) == 0
    assert slim.stats["bounding"]["user_weeks"] > 0


def test_build_od_of_a_cabspotting_file_source_equals_the_loaded_folder(cabs):
    from odcore.data.traces import load_traces
    from odcore.od.engines import build_od, file_source
    from odcore.od.trips import ODConfig

    cfg = ODConfig(tz=TZ)
    od = build_od(file_source(cabs, format="cabspotting", bbox="auto"), cfg)
    ref = build_od(load_traces(cabs, format="cabspotting", tz=TZ, bbox="auto"), cfg)
    pd.testing.assert_frame_equal(od.counts, ref.counts)
    pd.testing.assert_frame_equal(od.pairs, ref.pairs)


def test_other_engines_refuse_a_cabspotting_file_source(cabs):
    from odcore.errors import ParameterError
    from odcore.od.engines import build_od, file_source

    with pytest.raises(ParameterError, match="memory"):
        build_od(file_source(cabs, format="cabspotting"), engine="duckdb")


# ---- command line ----------------------------------------------------------------------------------------------

def _json(capsys, argv):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def _loaded_cli(monkeypatch):
    """The command line as it was: never stream, load the folder."""
    import odcore.cli.common as common

    monkeypatch.setattr(common, "streams_cabs", lambda args: False)


def _without_seconds(out: dict) -> dict:
    return {k: v for k, v in out.items() if k != "seconds"}


TRIPS_ARGS = [[], ["--bbox", "none", "--region", "1"], ["--start", "2008-05-21", "--time-offset", "600"],
              ["--cell-km2", "0.5", "--counts-out", "COUNTS"], ["--zones", "h3:8"], ["--zones", "ZONEFILE"]]


def _zone_file(path) -> str:
    """Two districts covering part of the cabs' spots: fixes elsewhere are outside every zone (and some of them are
    duplicates, dropped first as the loader drops them)."""
    def square(s, w, n, e):
        return [[[w, s], [e, s], [e, n], [w, n], [w, s]]]

    feats = [{"type": "Feature", "properties": {"name": nm}, "geometry": {"type": "Polygon", "coordinates": sq}}
             for nm, sq in (("north", square(37.785, -122.42, 37.81, -122.39)),
                            ("centre", square(37.765, -122.43, 37.785, -122.405)))]
    path.write_text(json.dumps({"type": "FeatureCollection", "features": feats}))
    return str(path)


@pytest.mark.parametrize("extra", TRIPS_ARGS)
def test_trips_streams_a_cabspotting_folder_with_the_same_output(capsys, monkeypatch, tmp_path, cabs, extra):
    extra = [str(tmp_path / x) if x == "COUNTS" else _zone_file(tmp_path / "z.geojson") if x == "ZONEFILE" else x
             for x in extra]
    with monkeypatch.context() as m:
        m.setattr("odcore.od.engines.cab_stream.build_od_cabspotting",
                  lambda *a, **k: (_ for _ in ()).throw(AssertionError("streamed")))
        _loaded_cli(m)
        before = _json(capsys, ["trips", "--input", str(cabs), "--json", *extra])
    import odcore.data.traces as tr

    monkeypatch.setattr(tr, "load_traces", lambda *a, **k: (_ for _ in ()).throw(AssertionError("loaded")))
    extra = [x + "2" if x.endswith("COUNTS") else x for x in extra]
    after = _json(capsys, ["trips", "--input", str(cabs), "--json", *extra])
    if "counts_out" in before:
        before.pop("counts_out"), after.pop("counts_out")
    assert _without_seconds(after) == _without_seconds(before)
    assert after["rows_dropped"]
    if "z.geojson" in " ".join(extra):
        assert set(after["rows_dropped"]) >= {"duplicate_row", "outside every zone"}


def test_trips_on_a_zip_or_with_duckdb_still_loads(capsys, monkeypatch, tmp_path, cabs):
    import zipfile

    import odcore.od.engines.cab_stream as cs

    monkeypatch.setattr(cs, "build_od_cabspotting", lambda *a, **k: (_ for _ in ()).throw(AssertionError("streamed")))
    z = tmp_path / "cabs.zip"
    with zipfile.ZipFile(z, "w") as zf:
        for f in sorted(cabs.iterdir()):
            zf.write(f, f.name)
    assert _json(capsys, ["trips", "--input", str(z), "--json"])["format"] == "cabspotting"
    assert _json(capsys, ["trips", "--input", str(cabs), "--engine", "duckdb", "--json"])["engine"] == "duckdb"


def test_od_from_args_streams_for_every_od_command(monkeypatch, cabs, no_loader):
    """attack user-risk, audit, design, figures and release build OD through od_from_args."""
    import argparse

    from odcore.cli.common import od_from_args
    from odcore.cli.parser import add_grid_args, add_loader_args
    from odcore.od.engines.cab_stream import StreamedTraces

    p = argparse.ArgumentParser()
    add_loader_args(p)
    add_grid_args(p)
    traces, od = od_from_args(p.parse_args(["--input", str(cabs)]))
    assert isinstance(traces, StreamedTraces)
    assert od.stats["rows_dropped"] == {}               # the zones' drops only; the loader's are in the report
    assert traces.report.rows_dropped


def test_od_from_args_streamed_equals_loaded(monkeypatch, cabs):
    import argparse

    from odcore.cli.common import od_from_args
    from odcore.cli.parser import add_grid_args, add_loader_args

    p = argparse.ArgumentParser()
    add_loader_args(p)
    add_grid_args(p)
    argv = ["--input", str(cabs), "--region", "auto", "--bbox", "none", "--end", "2008-05-26"]
    traces, od = od_from_args(p.parse_args(argv))
    with monkeypatch.context() as m:
        _loaded_cli(m)
        ref_traces, ref = od_from_args(p.parse_args(argv))
    same_od(od, ref)
    assert traces.report == ref_traces.report
    assert traces.summary() == ref_traces.summary()


def _release(capsys, out, src, *extra):
    code = main(["release", "--input", str(src), "--threshold", "2", "--seed", "3", "--out", str(out),
                 "--analysis-out", str(out) + "_analysis", "--json", *extra])
    text = capsys.readouterr().out
    assert code == 0
    return json.loads(text)


@pytest.mark.parametrize("extra", [[], ["--mode", "user_level", "--max-pairs", "2", "--week", "1"]])
def test_release_streams_a_cabspotting_folder_with_the_same_files(capsys, monkeypatch, tmp_path, cabs, extra):
    with monkeypatch.context() as m:
        _loaded_cli(m)
        before = _release(capsys, tmp_path / "a", cabs, *extra)
    import odcore.data.traces as tr

    monkeypatch.setattr(tr, "load_traces", lambda *a, **k: (_ for _ in ()).throw(AssertionError("loaded")))
    after = _release(capsys, tmp_path / "b", cabs, *extra)
    assert (tmp_path / "a" / "published.csv").read_bytes() == (tmp_path / "b" / "published.csv").read_bytes()
    ra = json.loads((tmp_path / "a" / "release.json").read_text())
    rb = json.loads((tmp_path / "b" / "release.json").read_text())
    for r in (ra, rb):
        r["record"].pop("written", None)
        r["record"].pop("software", None)
    assert ra == rb
    assert after["traces"] == before["traces"]
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "a_analysis" / "DO_NOT_SHARE_analysis.parquet"),
                                  pd.read_parquet(tmp_path / "b_analysis" / "DO_NOT_SHARE_analysis.parquet"))


# ---- real data -------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def real_cabs(shared_data, tmp_path_factory):
    """Twelve real cab files of the shared Cabspotting folder (a folder of links)."""
    src = shared_data / "cabspotting_sf"
    if not src.is_dir():
        pytest.skip("cabspotting_sf not present")
    d = tmp_path_factory.mktemp("realcabs") / "cabs"
    d.mkdir()
    for f in sorted(src.glob("new_*.txt.gz"))[:12]:
        (d / f.name).symlink_to(f)
    return d


@pytest.mark.realdata
def test_real_cabs_streamed_equal_loaded(real_cabs):
    from odcore.data.fingerprint import trace_fingerprint
    from odcore.data.traces import load_traces
    from odcore.od.engines import build_od
    from odcore.od.engines.cab_stream import stream_cabspotting
    from odcore.od.trips import ODConfig

    loaded = load_traces(real_cabs, format="cabspotting", tz="auto", bbox="auto", region="auto")
    traces, od = stream_cabspotting(real_cabs, bbox="auto", region="auto", fingerprint=True)
    same_od(od, build_od(loaded, ODConfig(tz=TZ)))
    assert traces.report == loaded.report
    assert traces.report.rows_dropped["outside_bbox"] > 0
    assert traces.summary() == loaded.summary()
    assert traces.fingerprint == trace_fingerprint(loaded.df)


@pytest.mark.realdata
def test_real_cabs_trips_and_release_stream_with_the_same_output(capsys, monkeypatch, tmp_path, real_cabs):
    with monkeypatch.context() as m:
        _loaded_cli(m)
        before = _json(capsys, ["trips", "--input", str(real_cabs), "--json"])
        rel_before = _release(capsys, tmp_path / "a", real_cabs)
    import odcore.data.traces as tr

    monkeypatch.setattr(tr, "load_traces", lambda *a, **k: (_ for _ in ()).throw(AssertionError("loaded")))
    after = _json(capsys, ["trips", "--input", str(real_cabs), "--json"])
    assert _without_seconds(after) == _without_seconds(before)
    assert after["rows_read"] > 100_000
    rel_after = _release(capsys, tmp_path / "b", real_cabs)
    assert rel_after["traces"] == rel_before["traces"]
    assert (tmp_path / "a" / "published.csv").read_bytes() == (tmp_path / "b" / "published.csv").read_bytes()
    assert (json.loads((tmp_path / "a_analysis" / "DO_NOT_SHARE_record.json").read_text())["fingerprint"]
            == json.loads((tmp_path / "b_analysis" / "DO_NOT_SHARE_record.json").read_text())["fingerprint"])


OD_COMMANDS = [
    ["user-risk", "--threshold", "2", "--fast", "--json"],
    ["audit", "--threshold", "2", "--canaries", "5", "--trips", "2", "--seed", "1", "--json"],
    ["selection", "--no-pipeline-dp", "--max-pairs", "2", "--seed", "1", "--json"],
    ["design", "--tune", "--seed", "1", "--json"],
]


@pytest.mark.parametrize("argv", OD_COMMANDS, ids=lambda a: a[0])
def test_od_commands_stream_a_cabspotting_folder_with_the_same_output(capsys, monkeypatch, cabs, argv):
    with monkeypatch.context() as m:
        _loaded_cli(m)
        before = _json(capsys, [*argv, "--input", str(cabs)])
    import odcore.data.traces as tr

    monkeypatch.setattr(tr, "load_traces", lambda *a, **k: (_ for _ in ()).throw(AssertionError("loaded")))
    after = _json(capsys, [*argv, "--input", str(cabs)])
    drop = ("seconds", "cpu_seconds", "written", "software")

    def clean(x):
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items() if k not in drop}
        return [clean(v) for v in x] if isinstance(x, list) else x

    assert clean(after) == clean(before)


def test_kept_fixes_are_read_back_instead_of_parsing_again(cabs, tmp_path, monkeypatch):
    """keep_dir: the first call parses and keeps the fixes; another zone system reads them (the parser is not
    called) and gives the tables of a fresh streamed call; changed files are parsed again."""
    import shutil

    import odcore.od.engines.cab_stream as cs
    from odcore.od.engines.cab_stream import fix_density_cabspotting, stream_cabspotting
    from odcore.od.trips import ODConfig
    from odcore.space.density import fix_density

    kw = {"bbox": "auto", "region": "auto", "group_bytes": 30_000}
    keep = tmp_path / "kept"
    first, _ = stream_cabspotting(cabs, keep_dir=keep, **kw)
    assert (keep / "groups.json").is_file()
    fresh = {c: stream_cabspotting(cabs, ODConfig(tz=TZ, cell_km2=c), **kw)[1] for c in (0.3, 2.0)}
    box = (-122.45, 37.74, -122.38, 37.81)
    image = fix_density(first.df["lon"], first.df["lat"], box, 200)
    with monkeypatch.context() as m:
        m.setattr(cs, "read_cab_file", lambda *a, **k: (_ for _ in ()).throw(AssertionError("parsed again")))
        for c, ref in fresh.items():
            traces, od = stream_cabspotting(cabs, ODConfig(tz=TZ, cell_km2=c), keep_dir=keep, **kw)
            same_od(od, ref)
            assert traces.report == first.report
        got = fix_density_cabspotting(cabs, box, 200, tz=TZ, bbox=first.report.bbox_used, keep_dir=keep,
                                      group_bytes=30_000)
        np.testing.assert_array_equal(got, image)
    other = tmp_path / "other"
    shutil.copytree(cabs, other)
    (other / "new_cab07.txt").write_text((other / "new_cab07.txt").read_text()[:2000].rsplit("\n", 1)[0] + "\n")
    with monkeypatch.context() as m:
        m.setattr(cs, "read_cab_file", lambda *a, **k: (_ for _ in ()).throw(AssertionError("parsed again")))
        with pytest.raises(AssertionError, match="parsed again"):
            stream_cabspotting(other, keep_dir=keep, **kw)
