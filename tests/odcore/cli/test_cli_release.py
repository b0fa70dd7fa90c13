"""Tests of ``python -m odcore budget`` and ``python -m odcore release``."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from odcore.cli import main
from odcore.paths import REPO_ROOT

BUDGET_KEYS = ("epsilon_per_metric", "delta_per_metric", "posterior_bound_per_metric", "epsilon_user_week",
               "delta_user_week", "epsilon_user_total", "delta_user_total", "epsilon_user_week_tight")


def _run(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def traces_csv(tmp_path_factory):
    """A small trace CSV: 120 users commuting between 12 spots, hourly fixes over 2 weeks."""
    rng = np.random.default_rng(0)
    users, hours = 120, 24 * 14
    spots = np.c_[37.77 + rng.uniform(-0.04, 0.04, 12), -122.42 + rng.uniform(-0.04, 0.04, 12)]
    h = np.arange(hours)
    t0 = pd.Timestamp("2024-01-01T00:10:00Z").value // 10**9
    frames = []
    for u in range(users):
        home, work = rng.integers(0, 12, 2)
        loc = np.where((h % 24 >= 9) & (h % 24 < 17), work, home)
        evening = (h % 24 == 19) & (rng.random(hours) < 0.4)
        loc = np.where(evening, rng.integers(0, 12, hours), loc)
        frames.append(pd.DataFrame({"user": f"u{u}", "time": t0 + h * 3600, "lat": spots[loc, 0],
                                    "lon": spots[loc, 1]}))
    p = tmp_path_factory.mktemp("traces") / "traces.csv"
    pd.concat(frames).to_csv(p, index=False)
    return p


# ------------------------------------------------------------------ budget


def test_budget_json_golden(capsys):
    code, out, _ = _run(capsys, "budget", "--epsilon", "0.66", "--threshold", "100", "--trips", "70", "--weeks",
                        "52", "--json")
    assert code == 0
    b = json.loads(out)
    for k in BUDGET_KEYS:
        assert k in b
    assert f"{b['delta_per_metric']:.1e}" == "2.1e-29"  # Bassolas et al. reply
    assert b["epsilon_user_week"] == pytest.approx(46.2)  # Houssiau et al. 2022, Methods
    assert b["epsilon_user_total"] == pytest.approx(2402.4)
    assert round(b["posterior_bound_per_metric"], 3) == 0.659
    assert 0 < b["epsilon_user_week_tight"] < 46.2
    assert b["delta"] == 1e-6


def test_budget_text_and_user_level(capsys):
    code, out, err = _run(capsys, "budget", "--mode", "user_level", "--max-pairs", "10")
    assert code == 0
    assert "46.2" in out
    assert "Per person (max_pairs = 10" in out
    assert "note: user_level: threshold" in err


def test_budget_config_file_and_precedence(capsys, tmp_path):
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"epsilon": 1.0, "trips": 10, "weeks": 2, "delta": 1e-5}))
    code, out, _ = _run(capsys, "budget", "--config", str(cfg), "--json")
    assert code == 0
    b = json.loads(out)
    assert b["epsilon_user_week"] == pytest.approx(10.0)
    assert b["epsilon_user_total"] == pytest.approx(20.0)
    code, out, _ = _run(capsys, "budget", "--config", str(cfg), "--trips", "3", "--json")  # explicit flag wins
    assert json.loads(out)["epsilon_user_week"] == pytest.approx(3.0)


def test_budget_accepts_dashboard_config(capsys, tmp_path):
    # odapp.shared.state.Settings.as_dict(): the dashboard's export; per_metric with max_pairs set is fine (ignored)
    cfg = tmp_path / "dash.json"
    cfg.write_text(json.dumps({"dataset": {"id": "synthetic", "kind": "sample"}, "week": 0, "cell_km2": 1.3,
                               "epsilon": 0.66, "threshold": 100, "seed": 0, "mode": "per_metric", "max_pairs": 10}))
    code, out, err = _run(capsys, "budget", "--config", str(cfg), "--json")
    assert code == 0
    assert "ignored" in err
    assert json.loads(out)["epsilon_user_week"] == pytest.approx(46.2)


@pytest.mark.parametrize(("argv", "match"), [
    (["budget", "--epsilon", "0"], "epsilon"),
    (["budget", "--epsilon", "nan"], "epsilon"),
    (["budget", "--threshold", "0.5"], "threshold"),
    (["budget", "--trips", "0"], "trips"),
    (["budget", "--max-pairs", "3"], "user_level"),
    (["budget", "--mode", "user_level"], "max-pairs"),
    (["budget", "--mode", "user_level", "--max-pairs", "0"], "max_pairs"),
    (["budget", "--config", "/nonexistent/x.json"], "not found"),
])
def test_budget_errors(capsys, argv, match):
    code, _, err = _run(capsys, *argv)
    assert code == 2
    assert err.startswith("error:")
    assert match in err
    assert "Traceback" not in err


def test_budget_config_errors(capsys, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"epsilon": 0.66, "epsilonn": 1}))
    code, _, err = _run(capsys, "budget", "--config", str(bad))
    assert code == 2
    assert "epsilonn" in err
    bad.write_text("[1, 2]")
    code, _, err = _run(capsys, "budget", "--config", str(bad))
    assert code == 2
    assert "JSON object" in err
    bad.write_text("{not json")
    code, _, err = _run(capsys, "budget", "--config", str(bad))
    assert code == 2
    assert "JSON" in err


def test_budget_as_a_subprocess():
    r = subprocess.run([sys.executable, "-m", "odcore", "budget", "--epsilon", "0.66", "--threshold", "100",
                        "--trips", "70", "--weeks", "52", "--json"], cwd=REPO_ROOT, capture_output=True, text=True,
                       timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["epsilon_user_total"] == pytest.approx(2402.4)


# ------------------------------------------------------------------ release


def test_release_writes_table_and_summary(capsys, tmp_path, traces_csv):
    out, an = tmp_path / "out", tmp_path / "analysis"
    code, stdout, err = _run(capsys, "release", "--input", str(traces_csv), "--cell-km2", "1.3", "--epsilon", "1",
                             "--threshold", "5", "--seed", "3", "--out", str(out), "--analysis-out", str(an), "--json")
    assert code == 0, err
    summary = json.loads(stdout)
    public = summary.pop("published_release")
    private = summary.pop("private_record")
    assert json.loads((an / "DO_NOT_SHARE_record.json").read_text()) == private
    assert json.loads((an / "DO_NOT_SHARE_summary.json").read_text()) == summary
    assert json.loads((out / "release.json").read_text()) == public
    first = (an / "DO_NOT_SHARE_analysis.csv").read_text().splitlines()[0]
    assert first.startswith("# DO NOT SHARE")
    csv = pd.read_csv(an / "DO_NOT_SHARE_analysis.csv", comment="#")
    pq = pd.read_parquet(an / "DO_NOT_SHARE_analysis.parquet")
    assert len(csv) == len(pq) == summary["utility"]["pairs_total"] > 0
    for c in ("week", "week_start", "origin", "destination", "true_count", "noise", "noisy_count", "released",
              "release_prob", "origin_lat", "origin_lon", "destination_lat", "destination_lon"):
        assert c in pq.columns
    assert pq[["origin_lat", "origin_lon", "destination_lat", "destination_lon"]].notna().all().all()
    assert pq["origin_lat"].between(37.6, 37.9).all()
    assert (pq.loc[pq["released"], "noisy_count"] >= 5).all()
    assert summary["utility"]["pairs_published"] == int(pq["released"].sum())
    assert summary["release"]["noise_scale"] == 1.0
    assert summary["config"]["epsilon"] == 1.0
    assert summary["budget_typical_user"]["epsilon_per_metric"] == 1.0
    # same seed, same output
    # the published table: the released rows of the analysis table, nothing else
    pub = pd.read_parquet(out / "published.parquet")
    assert len(pub) == summary["utility"]["pairs_published"] > 0
    assert not {"true_count", "noise", "raw_count", "released", "release_prob"} & set(pub.columns)
    seeds = []

    def walk(o):
        if isinstance(o, dict):
            seeds.extend(v for k, v in o.items() if "seed" in k)
            [walk(v) for v in o.values()]

    walk(public)
    assert len(seeds) == 1   # the seed is never written where it is shared
    assert seeds[0].startswith("secret")
    exp = pq.loc[pq["released"]].sort_values(["week", "noisy_count"], ascending=[True, False])
    np.testing.assert_allclose(pub["noisy_count"].to_numpy(), exp["noisy_count"].to_numpy())
    assert sorted(p.name for p in out.iterdir()) == sorted(("published.csv", "published.parquet", "zones.geojson",
                                                           "release.json", "guarantee_sheet.html"))
    # same seed, same output; no analysis folder unless asked for
    out2 = tmp_path / "out2"
    code, _, _ = _run(capsys, "release", "--input", str(traces_csv), "--epsilon", "1", "--threshold", "5",
                      "--seed", "3", "--out", str(out2))
    assert code == 0
    pd.testing.assert_frame_equal(pub, pd.read_parquet(out2 / "published.parquet"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["analysis", "out", "out2"]


def test_release_user_level_week_and_config(capsys, tmp_path, traces_csv):
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"epsilon": 2.0, "threshold": 3, "mode": "user_level", "max_pairs": 2, "week": 1,
                               "seed": 5, "cell_km2": 1.3, "dataset": {"id": "x"}}))
    out = tmp_path / "o"
    code, stdout, err = _run(capsys, "release", "--input", str(traces_csv), "--config", str(cfg), "--out", str(out),
                             "--analysis-out", str(tmp_path / "a"), "--json")
    assert code == 0, err
    s = json.loads(stdout)
    assert s["release"]["mode"] == "user_level"
    assert s["release"]["noise_scale"] == 1.0
    assert s["release"]["contributions_dropped_by_bounding"] > 0
    t = pd.read_parquet(tmp_path / "a" / "DO_NOT_SHARE_analysis.parquet")
    assert set(t["week"]) == {1}
    assert (t["true_count"] <= t["raw_count"]).all()
    assert "budget_max_user" in s


@pytest.mark.parametrize(("extra", "match"), [
    ([], "--out"),
    (["--out", "{tmp}", "--epsilon", "-1"], "epsilon"),
    (["--out", "{tmp}", "--threshold", "0"], "threshold"),
    (["--out", "{tmp}", "--mode", "user_level"], "--max-pairs"),
    (["--out", "{tmp}", "--week", "99"], "week"),
])
def test_release_errors(capsys, tmp_path, traces_csv, extra, match):
    argv = ["release", "--input", str(traces_csv), *[a.replace("{tmp}", str(tmp_path / "o")) for a in extra]]
    code, _, err = _run(capsys, *argv)
    assert code == 2
    assert match in err
    assert "Traceback" not in err


@pytest.fixture
def fake_image(monkeypatch):
    """Image export without a browser: the map is 'drawn' as fixed bytes (the writing path is what is tested)."""
    from odcore.report import figures

    monkeypatch.setattr(figures, "require_browser", lambda: "/fake/chromium")
    monkeypatch.setattr(figures, "image_bytes", lambda fig, fmt, **kw: b"IMAGE:" + fmt.encode())


def test_release_map_is_written_with_the_release(capsys, tmp_path, traces_csv, fake_image):
    out, maps = tmp_path / "out", tmp_path / "maps"
    code, _, err = _run(capsys, "release", "--input", str(traces_csv), "--threshold", "5", "--out", str(out),
                        "--map", f"{maps / 'flows.png'},{maps / 'flows.svg'}")
    assert code == 0, err
    assert (maps / "flows.png").read_bytes() == b"IMAGE:.png"
    assert (maps / "flows.svg").read_bytes() == b"IMAGE:.svg"
    assert sorted(q.name for q in maps.iterdir()) == ["flows.png", "flows.svg"]   # no temporary files left


def test_failing_release_writes_no_map(capsys, tmp_path, traces_csv, fake_image):
    """The release cannot be written (--out is a file): exit 2 and the map images are not written either."""
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("x")
    maps = tmp_path / "maps"
    maps.mkdir()
    code, _, err = _run(capsys, "release", "--input", str(traces_csv), "--threshold", "5", "--out", str(blocker),
                        "--map", str(maps / "flows.png"))
    assert code == 2, err
    assert "is not a folder" in err
    assert "Traceback" not in err
    assert list(maps.iterdir()) == []


def test_failing_map_writes_no_release(capsys, tmp_path, traces_csv, monkeypatch):
    """The second map cannot be drawn: exit 2, and neither the release files nor the first map are written."""
    from odcore.report import figures

    def image_bytes(fig, fmt, **kw):
        if fmt.lstrip(".") == "svg":
            raise ValueError("svg export broke")
        return b"IMAGE"

    monkeypatch.setattr(figures, "require_browser", lambda: "/fake/chromium")
    monkeypatch.setattr(figures, "image_bytes", image_bytes)
    out = tmp_path / "out"
    code, _, err = _run(capsys, "release", "--input", str(traces_csv), "--threshold", "5", "--out", str(out),
                        "--map", f"{tmp_path / 'a.png'},{tmp_path / 'b.svg'}")
    assert code == 2
    assert "--map" in err
    assert "svg export broke" in err
    assert not (tmp_path / "a.png").exists()
    assert not out.exists() or list(out.iterdir()) == []


def test_release_map_without_a_browser_says_what_is_missing(capsys, tmp_path, traces_csv, monkeypatch):
    monkeypatch.setenv("ODLAB_BROWSER", "none")
    out = tmp_path / "out"
    code, _, err = _run(capsys, "release", "--input", str(traces_csv), "--threshold", "5", "--out", str(out),
                        "--map", str(tmp_path / "m.png"))
    assert code == 2
    assert "Chromium" in err
    assert "Traceback" not in err
    assert not (tmp_path / "m.png").exists()
    assert not out.exists() or list(out.iterdir()) == []


@pytest.mark.realdata
def test_release_on_real_checkins(capsys, tmp_path, shared_data):
    src = shared_data / "gowalla_liu2017_1k"
    if not src.is_dir():
        pytest.skip("gowalla_liu2017_1k not present")
    out = tmp_path / "g"
    code, stdout, err = _run(capsys, "release", "--input", str(src), "--format", "checkins", "--time-offset",
                             "28800", "--epsilon", "0.66", "--threshold", "2", "--seed", "0", "--out", str(out),
                             "--json")
    assert code == 0, err
    s = json.loads(stdout)
    assert s["utility"]["pairs_total"] > 0
    t = pd.read_parquet(out / "published.parquet")
    assert len(t) == s["utility"]["pairs_published"]
    assert (t["noisy_count"] >= 2).all()


def test_user_level_release_bounded_in_duckdb_equals_the_memory_engine(capsys, traces_csv, tmp_path):
    # --engine duckdb bounds each person's pairs in SQL (odcore.od.bounding) and returns per-pair counts only;
    # the files written are the memory engine's, byte for byte; another seed keeps other pairs
    argv = ["release", "--input", str(traces_csv), "--mode", "user_level", "--max-pairs", "2", "--epsilon", "1",
            "--threshold", "3", "--json"]
    outs = {}
    for engine, seed in (("memory", 5), ("duckdb", 5), ("duckdb", 6)):
        out = tmp_path / f"{engine}{seed}"
        code, text, _ = _run(capsys, *argv, "--engine", engine, "--seed", str(seed), "--out", str(out))
        assert code == 0
        outs[engine, seed] = ((out / "published.csv").read_bytes(), json.loads(text)["release"])
    assert outs["memory", 5][0] == outs["duckdb", 5][0]
    assert outs["duckdb", 5][1]["bounded_in"] == "duckdb"
    assert outs["duckdb", 5][1]["user_weeks_bounded"] == outs["memory", 5][1]["user_weeks_bounded"] > 0
    assert outs["duckdb", 6][0] != outs["duckdb", 5][0]
