"""``python -m odcore synth`` and ``python -m odcore trips``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from odcore.cli import main

FIX = Path(__file__).parents[2] / "fixtures"
KEYS = {"users", "weeks", "rows_read", "rows_dropped", "cells", "trips", "unique_trips",
        "unique_trips_per_user_week", "od_pairs", "od_pairs_over_threshold"}


def _json(capsys, argv):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_trips_json_on_cabspotting_fixture(capsys):
    out = _json(capsys, ["trips", "--input", str(FIX / "cabspotting"), "--format", "cabspotting", "--json",
                         "--bbox", "37.5,-122.6,37.9,-122.2"])
    assert KEYS <= set(out)
    assert out["tz"] == "America/Los_Angeles"          # Cabspotting's local time (README)
    assert out["rows_read"] == 9
    assert out["rows_dropped"] == {"duplicate_row": 1, "outside_bbox": 1}
    assert out["users"] == 2
    assert set(out["unique_trips_per_user_week"]) >= {"p10", "p50", "p90", "max"}
    assert out["unique_trips"] <= out["trips"]


def test_trips_checkins_with_offset_and_threshold(capsys, tmp_path):
    counts = tmp_path / "counts.csv"
    out = _json(capsys, ["trips", "--input", str(FIX / "checkins"), "--time-offset", "28800", "--threshold", "1",
                         "--bbox", "none", "--json", "--counts-out", str(counts)])
    assert out["format"] == "checkins"
    assert out["rows_dropped"] == {"unknown_poi": 1}
    assert out["od_pairs_over_threshold"] == out["od_pairs"]
    assert counts.read_text().startswith("week,origin,origin_name,destination,destination_name,count")


def test_synth_then_trips(capsys, tmp_path):
    p = tmp_path / "city.parquet"
    info = _json(capsys, ["synth", "--users", "400", "--weeks", "1", "--seed", "3", "--out", str(p), "--json"])
    assert info["rows"] > 0
    assert p.exists()
    out = _json(capsys, ["trips", "--input", str(p), "--json"])
    assert out["users"] == 400
    assert out["weeks"] == 1
    assert out["trips"] > 0
    # same seed, same file content
    p2 = tmp_path / "city2.parquet"
    _json(capsys, ["synth", "--users", "400", "--seed", "3", "--out", str(p2), "--json"])
    import pandas as pd

    assert pd.read_parquet(p).equals(pd.read_parquet(p2))


def test_synth_csv(capsys, tmp_path):
    p = tmp_path / "city.csv"
    _json(capsys, ["synth", "--users", "50", "--out", str(p), "--json"])
    out = _json(capsys, ["trips", "--input", str(p), "--json"])
    assert out["users"] == 50


@pytest.mark.parametrize(("argv", "msg"), [
    (["trips", "--input", "/nonexistent/x.csv"], "no such file"),
    (["trips", "--input", str(FIX / "traces.csv"), "--cell-km2", "-1"], "cell_km2"),
    (["trips", "--input", str(FIX / "traces.csv"), "--tz", "Mars/Base"], "tz"),
    (["synth", "--users", "1", "--out", "x.parquet"], "users"),
])
def test_errors_exit_2(capsys, argv, msg):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:")
    assert msg in err


def test_trips_default_input_is_the_bundled_sample(capsys):
    from odcore.cli.parser import DEFAULT_INPUT

    if not DEFAULT_INPUT.exists():
        pytest.skip("bundled sample absent")
    out = _json(capsys, ["trips", "--json"])
    assert out["od_pairs_over_threshold"] >= 200


def test_trips_with_a_column_mapping(capsys, tmp_path):
    # a generic CSV whose columns have other names: the mapping flags say which is which. Its Unix times state no
    # zone (Atlanta's would be inferred); the Parquet's UTC-aware column states UTC, the synthetic city's clock
    import pandas as pd

    src = tmp_path / "city.parquet"
    _json(capsys, ["synth", "--users", "200", "--weeks", "1", "--seed", "5", "--out", str(src), "--json"])
    df = pd.read_parquet(src)
    renamed = pd.DataFrame({"pid": df["user"], "epoch": (df["time"] - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(seconds=1),
                            "y": df["lat"], "x": df["lon"]})
    f = tmp_path / "renamed.csv"
    renamed.to_csv(f, index=False)
    want = _json(capsys, ["trips", "--input", str(src), "--json"])
    got = _json(capsys, ["trips", "--input", str(f), "--user-col", "pid", "--time-col", "epoch", "--lat-col", "y",
                         "--lon-col", "x", "--time-unit", "s", "--tz", "UTC", "--json"])
    for key in ("users", "trips", "unique_trips", "od_pairs"):
        assert got[key] == want[key], key
    # without the mapping the file is refused with a message naming the missing column
    assert main(["trips", "--input", str(f), "--json"]) == 2
    assert "column" in capsys.readouterr().err


# ------------------------------------------------------------------ a Parquet file streamed with the loader's report


def _trips_streamed_and_loaded(capsys, tmp_path, monkeypatch, path: Path, *args: str) -> tuple[dict, dict]:
    """``trips --json`` of the Parquet file ``path`` (the memory engine streams it; the loader must not run) and
    of the same file inside a zip (which only the loader reads), without the input's name and the timings."""
    import zipfile

    import odcore.cli.common as common
    import odcore.data.traces as traces

    zipped = tmp_path / (path.stem + ".zip")
    with zipfile.ZipFile(zipped, "w") as z:
        z.write(path, path.name)
    loaded = _json(capsys, ["trips", "--input", str(zipped), *args, "--json"])
    with monkeypatch.context() as m:
        def refuse(*a, **k):
            raise AssertionError("the loader read a Parquet file the memory engine streams")

        m.setattr(traces, "load_traces", refuse)
        m.setattr(common, "load_traces", refuse, raising=False)
        streamed = _json(capsys, ["trips", "--input", str(path), *args, "--json"])
    for out in (loaded, streamed):
        out.pop("input")
        out.pop("seconds")
    return streamed, loaded


def _messy_parquet(tmp_path: Path) -> Path:
    """Text ids, naive local times over the night Los Angeles springs forward (2024-03-10), exact duplicates, a
    missing value, a far GPS glitch and rows before ``--start``."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(11)
    n = rng.integers(30, 80, 60)
    lat = np.array([37.76, 37.78, 37.80, 37.74, 37.77, 37.79])
    lon = np.array([-122.42, -122.40, -122.44, -122.41, -122.47, -122.39])
    p = rng.integers(0, len(lat), n.sum())
    t0 = pd.Timestamp("2024-03-07 00:00").value // 10**9
    df = pd.DataFrame({"person": np.repeat([f"p{i:02d}" for i in range(len(n))], n),
                       "when": pd.to_datetime(t0 + rng.integers(0, 7 * 86400, n.sum()), unit="s"),
                       "y": lat[p] + rng.normal(0, 0.003, p.size), "x": lon[p] + rng.normal(0, 0.003, p.size)})
    df.loc[5, "when"] = pd.Timestamp("2024-03-10 02:30")              # in the spring-forward gap
    df = pd.concat([df, df.iloc[40:70]], ignore_index=True)            # 30 exact duplicates
    df.loc[3, "y"] = np.nan
    df.loc[9, "y"], df.loc[9, "x"] = 45.0, -100.0                        # far away
    df = df.sort_values(["person", "when"], kind="stable")
    path = tmp_path / "messy.parquet"
    df.to_parquet(path, index=False)
    return path


def test_trips_streams_a_small_parquet_file_with_the_loaders_report(capsys, tmp_path, monkeypatch):
    """The memory engine streams a Parquet file of any size and prints what the loader's path prints: rows read,
    drops by reason, the box, the time zone found from the coordinates, naive times read by the daylight-saving
    rule, the time range and every OD figure."""
    path = _messy_parquet(tmp_path)
    cols = ["--user-col", "person", "--time-col", "when", "--lat-col", "y", "--lon-col", "x"]
    streamed, loaded = _trips_streamed_and_loaded(capsys, tmp_path, monkeypatch, path, *cols, "--start",
                                                  "2024-03-08", "--threshold", "2")
    assert streamed == loaded
    assert loaded["tz"] == "America/Los_Angeles"
    assert loaded["tz_source"] == "coordinates"
    assert loaded["rows_adjusted"]["dst_gap_shifted"] >= 1
    assert set(loaded["rows_dropped"]) >= {"missing_value", "outside_bbox", "outside_date_range", "duplicate_row"}
    assert loaded["rows_dropped"]["duplicate_row"] > 0
    assert loaded["trips"] > 0


def test_trips_streams_a_parquet_file_of_two_regions_like_the_loader(capsys, tmp_path, monkeypatch):
    """Two cities far apart: the densest region is kept, and the people and fixes left out are said the same way."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(4)
    parts = []
    for city, (la, lo, users) in enumerate(((48.85, 2.35, 40), (45.76, 4.84, 12))):   # Paris, Lyon
        n = rng.integers(40, 90, users)
        parts.append(pd.DataFrame({
            "user": np.repeat(np.arange(users) + 1000 * city, n),
            "time": pd.to_datetime(pd.Timestamp("2024-05-06", tz="UTC").value // 10**9
                                   + np.sort(rng.integers(0, 5 * 86400, n.sum())), unit="s", utc=True),
            "lat": la + rng.normal(0, 0.02, n.sum()), "lon": lo + rng.normal(0, 0.02, n.sum())}))
    # the first person of Lyon also comes to Paris once: of Lyon's 12 people, 11 have no fix in the region kept
    df = pd.concat([*parts, pd.DataFrame({"user": [1000, 1000], "time": pd.to_datetime(["2024-05-09 10:00",
                                                                                       "2024-05-09 12:00"], utc=True),
                                      "lat": [48.86, 48.85], "lon": [2.34, 2.36]})], ignore_index=True)
    path = tmp_path / "two_cities.parquet"
    df.to_parquet(path, index=False)
    streamed, loaded = _trips_streamed_and_loaded(capsys, tmp_path, monkeypatch, path, "--threshold", "1")
    assert streamed == loaded
    assert loaded["region"] == 1
    assert loaded["tz_source"] == "file"
    assert loaded["region_left_out"]["people"] == 11
    assert loaded["region_left_out"]["fixes"] > 0


def test_trips_streams_real_cabspotting_parquet_like_the_loader(capsys, tmp_path, monkeypatch, shared_data):
    """Twenty real cabs as one Parquet file with generic column names (naive local times): the same output."""
    import pandas as pd

    from odcore.data.traces import cab_files, read_cab_file

    _, files, _ = cab_files(shared_data / "cabspotting_sf")
    parts = []
    for f in sorted(files)[:20]:
        lat, lon, t = read_cab_file(f)
        parts.append(pd.DataFrame({"cab": Path(f).name.split(".")[0], "ts": pd.to_datetime(t, unit="s", utc=True)
                                   .tz_convert("America/Los_Angeles").tz_localize(None), "la": lat, "lo": lon}))
    path = tmp_path / "cabs.parquet"
    pd.concat(parts, ignore_index=True).to_parquet(path, index=False)
    cols = ["--user-col", "cab", "--time-col", "ts", "--lat-col", "la", "--lon-col", "lo"]
    streamed, loaded = _trips_streamed_and_loaded(capsys, tmp_path, monkeypatch, path, *cols)
    assert streamed == loaded
    assert loaded["users"] == 20
    assert loaded["tz"] == "America/Los_Angeles"
