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
