"""OD counts folders (``trips --counts-out DIR``) as output and input; the release from counts; chunked synth."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from odcore.cli import main
from odcore.data.synth import SynthConfig, generate_city, write_city_chunked
from odcore.od.engines import build_od
from odcore.od.odtable import is_counts_folder, read_counts_folder, write_counts_folder
from odcore.od.trips import ODConfig
from odcore.privacy.release import ReleaseConfig, release_counts_with_report, release_with_report


@pytest.fixture(scope="module")
def city() -> pd.DataFrame:
    return generate_city(SynthConfig(users=600, weeks=2), 11)


def test_counts_folder_round_trip(city, tmp_path):
    od = build_od(city, ODConfig(tz="America/New_York"))
    man = write_counts_folder(od, tmp_path / "od", source="city", engine="memory")
    assert is_counts_folder(tmp_path / "od")
    assert not is_counts_folder(tmp_path)
    assert sorted(p.name for p in (tmp_path / "od" / "counts").iterdir()) == [f"week={i}" for i in range(od.n_weeks)]
    assert man["rows"]["counts"] == len(od.counts)
    assert man["users"] == 600
    back = read_counts_folder(tmp_path / "od")
    pd.testing.assert_frame_equal(back.counts, od.counts)
    assert back.week_starts == od.week_starts
    assert back.config.tz == "America/New_York"
    np.testing.assert_array_equal(back.cells, od.cells)
    np.testing.assert_array_equal(back.grid.assign(city["lat"], city["lon"]), od.grid.assign(city["lat"], city["lon"]))
    np.testing.assert_array_equal(back.user_week["unique_trips"], od.user_week["unique_trips"])
    assert back.summary()["users"] == od.summary()["users"]
    assert back.stats["pairs_available"] is False
    assert len(back.pairs) == 0


def test_release_from_counts_equals_release_from_pairs(city):
    od = build_od(city)
    a = release_with_report(od.pairs, ReleaseConfig(threshold=5), rng=3).table
    b = release_counts_with_report(od.counts, ReleaseConfig(threshold=5), rng=3).table
    pd.testing.assert_frame_equal(a, b)
    with pytest.raises(Exception, match="per-person pair lists"):
        release_counts_with_report(od.counts, ReleaseConfig(mode="user_level", max_pairs=5))


def test_cli_counts_out_folder_is_an_input(city, tmp_path, capsys):
    src = tmp_path / "city.parquet"
    city.to_parquet(src, index=False)
    folder = tmp_path / "counts"
    assert main(["trips", "--input", str(src), "--engine", "duckdb", "--counts-out", str(folder), "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert main(["trips", "--input", str(folder), "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    for k in ("users", "weeks", "od_pairs", "unique_trips", "trips", "max_count"):
        assert first[k] == again[k], k
    assert main(["release", "--input", str(folder), "--out", str(tmp_path / "rel"), "--threshold", "5",
                 "--seed", "1", "--analysis-out", str(tmp_path / "an")]) == 0
    rel = pd.read_parquet(tmp_path / "an" / "DO_NOT_SHARE_analysis.parquet")
    assert len(rel) == first["od_pairs"]
    capsys.readouterr()
    assert main(["user-risk", "--input", str(folder)]) == 2
    assert "per-person pair lists" in capsys.readouterr().err


def test_synth_chunked_folder(tmp_path, capsys):
    res = write_city_chunked(tmp_path / "big", SynthConfig(users=500, weeks=1), 4, chunk_users=200)
    assert len(res["files"]) == 3
    df = pd.concat([pd.read_parquet(f) for f in res["files"]], ignore_index=True)
    assert df["user"].nunique() == 500
    assert len(df) == res["rows"]
    again = write_city_chunked(tmp_path / "again", SynthConfig(users=500, weeks=1), 4, chunk_users=200)
    pd.testing.assert_frame_equal(df, pd.concat([pd.read_parquet(f) for f in again["files"]], ignore_index=True))
    # the folder is an input: memory (loader) and DuckDB (streamed) agree
    m = build_od(pd.read_parquet(tmp_path / "big"), ODConfig())
    from odcore.od.engines import file_source

    d = build_od(file_source(tmp_path / "big"), ODConfig(), engine="duckdb")
    pd.testing.assert_frame_equal(m.counts, d.counts)
    assert main(["synth", "--users", "300", "--out", str(tmp_path / "cli"), "--chunk-users", "100", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["files"] == 3


def _counts_folder(city, tmp_path):
    od = build_od(city, ODConfig(tz="America/New_York"))
    folder = tmp_path / "od"
    write_counts_folder(od, folder, source="city", engine="memory")
    return folder


def _rewrite_week0(folder, count, *, rehash: bool = True):
    """Replace the first count of week 0 with ``count`` (a float column, as a hand-edited file would hold) and,
    with ``rehash``, update the manifest's hashes as a careful editor would (so the value check is what answers)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from odcore.od.odtable import file_hashes

    part = next((folder / "counts" / "week=0").glob("*.parquet"))
    t = pq.read_table(part).to_pandas()
    t["count"] = t["count"].astype(float)
    t.loc[0, "count"] = count
    pq.write_table(pa.Table.from_pandas(t, preserve_index=False), part)
    if rehash:
        m = json.loads((folder / "manifest.json").read_text())
        m["sha256"] = file_hashes(folder)
        (folder / "manifest.json").write_text(json.dumps(m))


@pytest.mark.parametrize(("count", "words"), [
    (float("nan"), "got nan"),
    (2.0**62, "got 4.611686018427388e+18"),
    (2.5, "got 2.5"),
    (0.0, "got 0.0"),
])
def test_counts_folder_refuses_nan_huge_and_fractional_counts(city, tmp_path, capsys, count, words):
    folder = _counts_folder(city, tmp_path)
    _rewrite_week0(folder, count)
    with pytest.raises(Exception, match=r"file counts/week=0/part-0\.parquet, row 1, column 'count': count must be a "
                                        r"whole number from 1 to 600 .*" + words.replace("+", r"\+").replace(".", r"\.")):
        read_counts_folder(folder)
    # the command line says it in one line, no traceback
    assert main(["release", "--input", str(folder), "--out", str(tmp_path / "rel")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: "), err
    assert "\n" not in err
    assert "column 'count'" in err
    assert not (tmp_path / "rel").exists()


def test_counts_folder_refuses_files_of_two_writes(city, tmp_path):
    folder = _counts_folder(city, tmp_path)
    _rewrite_week0(folder, 7.0, rehash=False)   # a valid count, but not the file the manifest was written with
    with pytest.raises(Exception, match=r"mixes files of two writes: counts/week=0/part-0\.parquet is not the file"):
        read_counts_folder(folder)
    (folder / "user_weeks.parquet").unlink()
    with pytest.raises(Exception, match="mixes files of two writes"):
        read_counts_folder(folder)
