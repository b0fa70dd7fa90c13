"""What a data provider hands over: published-only files, spreadsheet-safe CSV, all-or-nothing outputs, the δ rule
and the guarantee sheet as a record."""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from odcore.cli import main
from odcore.paths import REPO_ROOT, atomic_folder, atomic_output, current_umask
from odcore.report.safe_csv import csv_text, is_risky, neutralise, safe_frame

HOSTILE = ["=1+1", "+1+1", "@SUM(1+1)", '=HYPERLINK("http://127.0.0.2:9/x","click")', "-2+3", "\tTAB", "\r=CR",
           "![b](http://127.0.0.2:9/beacon.png)", "<img src=http://127.0.0.2:9/i.png>"]


def _run(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _cells(text: str):
    for row in csv.reader(io.StringIO(text, newline="")):
        yield from row


def _risky_cells(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    lines = [ln for ln in text.splitlines(keepends=True) if not ln.startswith("# ")]
    return [c for c in _cells("".join(lines)) if is_risky(c)]


# ------------------------------------------------------------------ spreadsheet-safe CSV


def test_neutralise_follows_the_owasp_rule():
    for s in HOSTILE[:7]:
        assert is_risky(s), s
        assert neutralise(s) == "'" + s
    for s in ("Camden", "-3.5", "+2", "1e-5", "", "a=b"):
        assert not is_risky(s), s
        assert neutralise(s) == s
    assert neutralise(-1.5) == -1.5


def test_safe_frame_keeps_numbers_and_quotes_formulas():
    df = pd.DataFrame({"name": HOSTILE, "count": np.arange(len(HOSTILE)) - 3.5, "id": np.arange(len(HOSTILE))})
    text = csv_text(df)
    rows = list(csv.reader(io.StringIO(text, newline="")))
    back = pd.DataFrame(rows[1:], columns=rows[0])
    assert back["count"].astype(float).tolist() == df["count"].tolist()   # numbers stay numbers (negative ones too)
    assert not [c for c in _cells(text) if is_risky(c)]
    # the original text is still there, behind the quote
    assert back["name"].str[1:].tolist()[:3] == HOSTILE[:3]
    # a plain to_csv would have written formulas: the check above can fail
    assert [c for c in _cells(df.iloc[:6].to_csv(index=False)) if is_risky(c)]
    assert safe_frame(df)["count"].dtype == df["count"].dtype


def test_first_line_is_a_comment_pandas_skips(tmp_path):
    from odcore.report.safe_csv import write_csv

    p = tmp_path / "a.csv"
    write_csv(pd.DataFrame({"x": [1, 2]}), p, first_line="DO NOT SHARE: test")
    assert p.read_text().splitlines()[0] == "# DO NOT SHARE: test"
    assert pd.read_csv(p, comment="#")["x"].tolist() == [1, 2]


# ------------------------------------------------------------------ hostile names through the CLI


@pytest.fixture(scope="module")
def hostile_city(tmp_path_factory):
    """Traces of 150 people (ids with formulas and markup) among 9 spots, and a zone file whose 4 zone names are
    formulas and Markdown."""
    import geopandas as gpd
    from shapely.geometry import box

    d = tmp_path_factory.mktemp("hostile")
    rng = np.random.default_rng(1)
    spots = np.c_[37.75 + rng.uniform(-0.03, 0.03, 9), -122.42 + rng.uniform(-0.03, 0.03, 9)]
    hours = np.arange(24 * 7)
    t0 = pd.Timestamp("2024-01-01T00:10:00Z").value // 10**9
    frames = []
    for u in range(150):
        home, work = rng.integers(0, 9, 2)
        loc = np.where((hours % 24 >= 9) & (hours % 24 < 17), work, home)
        frames.append(pd.DataFrame({"user": f"{HOSTILE[u % len(HOSTILE)]}#{u}", "time": t0 + hours * 3600,
                                    "lat": spots[loc, 0], "lon": spots[loc, 1]}))
    traces = d / "traces.csv"
    pd.concat(frames).to_csv(traces, index=False)
    polys, names = [], ["=1+1", "@SUM(1+1)", '=HYPERLINK("http://127.0.0.2:9/")', "![b](http://127.0.0.2:9/b.png)"]
    for i in range(2):
        for j in range(2):
            polys.append(box(-122.46 + 0.04 * j, 37.71 + 0.04 * i, -122.42 + 0.04 * j, 37.75 + 0.04 * i))
    zones = d / "zones.geojson"
    gpd.GeoDataFrame({"name": names, "geometry": polys}, crs="EPSG:4326").to_file(zones, driver="GeoJSON")
    return traces, zones


def test_hostile_names_never_reach_a_csv_cell_as_formulas(capsys, tmp_path, hostile_city):
    traces, zones = hostile_city
    out, an = tmp_path / "pub", tmp_path / "an"
    code, _, err = _run(capsys, "release", "--input", str(traces), "--zones", str(zones), "--threshold", "2",
                        "--seed", "1", "--out", str(out), "--analysis-out", str(an))
    assert code == 0, err
    counts = tmp_path / "counts.csv"
    code, _, err = _run(capsys, "trips", "--input", str(traces), "--zones", str(zones), "--counts-out", str(counts))
    assert code == 0, err
    files = [out / "published.csv", an / "DO_NOT_SHARE_analysis.csv", counts]
    for f in files:
        assert _risky_cells(f) == [], f
    pub = pd.read_csv(out / "published.csv")
    assert len(pub) > 0
    assert pub["origin_name"].str.startswith("'=").any()          # the names were there, neutralised


# ------------------------------------------------------------------ the published table and the analysis table


def test_release_default_output_is_published_rows_only(capsys, tmp_path, hostile_city):
    traces, _ = hostile_city
    out = tmp_path / "D"
    code, _, err = _run(capsys, "release", "--input", str(traces), "--threshold", "3", "--seed", "1", "--out",
                        str(out))
    assert code == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["D"]   # no analysis table unless asked
    pub = pd.read_csv(out / "published.csv")
    assert not {"true_count", "noise", "raw_count", "released", "release_prob"} & set(pub.columns)
    assert (pub["noisy_count"] >= 3).all()
    rec = json.loads((out / "release.json").read_text())
    assert rec["release"]["pairs_published"] == len(pub)
    sheet = (out / "guarantee_sheet.html").read_text()
    assert not {"fingerprint", "rows", "users"} & set(rec["record"])   # no figure of the data leaves
    assert "sha256:" not in sheet
    assert "the noise seed is not written" in sheet


def test_release_refuses_a_folder_of_other_files(capsys, tmp_path, hostile_city):
    traces, _ = hostile_city
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    code, _, err = _run(capsys, "release", "--input", str(traces), "--seed", "1", "--out", str(out))
    assert code == 2
    assert "did not write" in err
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    code, _, err = _run(capsys, "release", "--input", str(traces), "--seed", "1", "--out", str(tmp_path / "a"),
                        "--analysis-out", str(tmp_path / "a" / "b"))
    assert code == 2
    assert "apart" in err


# ------------------------------------------------------------------ one rule for δ


def test_release_and_budget_fit_the_same_threshold_and_keep_delta(capsys, tmp_path, hostile_city):
    traces, _ = hostile_city
    code, out, err = _run(capsys, "budget", "--mode", "user_level", "--max-pairs", "10", "--json",
                          "--total-interval", "0")
    assert code == 0, err
    b = json.loads(out)
    code, out, err = _run(capsys, "release", "--input", str(traces), "--mode", "user_level", "--max-pairs", "10",
                          "--seed", "1", "--out", str(tmp_path / "r"), "--json")
    assert code == 0, err
    r = json.loads(out)
    assert r["release"]["threshold"] == b["threshold"] == b["delta_parts"]["threshold"]
    for parts in (b["delta_parts"], r["delta"]):
        assert parts["delta_total"] <= 1e-6
        assert parts["delta_total"] == pytest.approx(parts["delta_laplace"] + parts["delta_threshold_cost"])
    assert "warning" not in err
    # a threshold far below the fit: a warning that names δ, in both commands
    for argv in (["budget", "--mode", "user_level", "--max-pairs", "10", "--threshold", "50", "--total-interval",
                  "0"],
                 ["release", "--input", str(traces), "--mode", "user_level", "--max-pairs", "10", "--threshold", "50",
                  "--seed", "1", "--out", str(tmp_path / "r50")]):
        code, out, err = _run(capsys, *argv)
        assert code == 0, err
        assert "warning: total delta" in err
        assert "no meaningful guarantee" in err


def test_budget_prints_how_delta_combines(capsys):
    code, out, err = _run(capsys, "budget", "--mode", "user_level", "--max-pairs", "20", "--threshold", "100",
                          "--total-interval", "0")
    assert code == 0
    assert "total = Laplace part + threshold part" in out
    assert "no meaningful guarantee" in err


def test_budget_many_weeks_large_epsilon_works(capsys):
    code, out, err = _run(capsys, "budget", "--mode", "user_level", "--weeks", "520", "--epsilon", "50",
                          "--max-pairs", "10", "--trips", "5", "--json")
    assert code == 0, err
    assert json.loads(out)["delta_parts"]["delta_total"] <= 1e-6


def test_design_says_the_default_attacker(capsys, hostile_city):
    traces, _ = hostile_city
    code, _, err = _run(capsys, "design", "--input", str(traces), "--goal", "attack", "--max-pairs", "3")
    assert code == 0, err
    assert "k = 32" in err


# ------------------------------------------------------------------ δ described correctly


def test_loss_exceeds_probability_against_simulation_and_dp_accounting():
    """P[L > ε'] from the exact PLD agrees with a Monte Carlo of the k-fold Laplace loss and with dp_accounting's
    PLD (which gives δ(ε') = E[(1 − e^{ε'−L})₊]; its tail P[L > ε'] is read from the same discretised loss)."""
    from odcore.privacy.accounting import loss_exceeds_probability, tight_epsilon

    k, e1 = 20, 0.033
    rng = np.random.default_rng(7)
    n = 400_000
    x = rng.laplace(1.0, 1.0 / e1, size=(n, k))             # the person is in: counts shifted by 1
    loss = e1 * (np.abs(x) - np.abs(x - 1.0)).sum(axis=1)
    for ep in (0.1, 0.3, 0.45):
        exact = loss_exceeds_probability(ep, k, e1)
        mc = float((loss > ep).mean())
        se = np.sqrt(exact * (1 - exact) / n)
        assert abs(mc - exact) < 5 * se + 1e-6, (ep, mc, exact)
        # and it would notice a wrong noise scale
        wrong = e1 * 1.3 * (np.abs(x[:50_000]) - np.abs(x[:50_000] - 1.0)).sum(axis=1)
        assert abs(float((wrong > ep).mean()) - exact) > 5 * np.sqrt(exact / 50_000)
    # the figure: 28·δ at m = 20, ε = 0.66 (tight ε 0.555 at δ = 1e-6)
    et = tight_epsilon(1e-6, k, e1)
    assert loss_exceeds_probability(et, k, e1) / 1e-6 == pytest.approx(27.7, abs=0.5)
    # dp_accounting: the Laplace PLD's δ(ε') is below P[L > ε'] (δ weighs the tail by 1 − e^{ε'−L})
    pytest.importorskip("dp_accounting")
    from dp_accounting.pld import privacy_loss_distribution as pldlib

    pl = pldlib.from_laplace_mechanism(1.0 / e1, value_discretization_interval=1e-5).self_compose(k)
    for ep in (0.3, 0.45):
        d = pl.get_delta_for_epsilon(ep)
        p = loss_exceeds_probability(ep, k, e1)
        assert d < p
        # δ(ε') = ∫_{ε'} P[L > t]·e^{ε'−t} dt: integrate the exact tail and compare
        ts = np.linspace(ep, k * e1, 4001)
        tail = np.array([loss_exceeds_probability(t, k, e1) for t in ts[::40]])
        ts_c = ts[::40]
        integral = np.trapezoid(tail * np.exp(ep - ts_c), ts_c)
        assert integral == pytest.approx(d, rel=0.05)


def test_sheet_explains_delta_and_counts_it_in_the_attacker_bound():
    from odcore.privacy.accounting import BudgetConfig, budget, delta_parts
    from odcore.report.sheet import budget_sheet, posterior_with_delta

    parts = delta_parts(0.66, 1e-6, 52, max_pairs=20, threshold=100)
    b = budget(BudgetConfig(max_pairs=20, threshold=100, delta=parts.laplace, total_interval=0))
    text = budget_sheet(b, delta_parts=parts.to_dict())
    assert "chance the guarantee fails" not in text
    assert "is <b>not</b> the chance that the guarantee fails" in text
    assert "no meaningful guarantee" in text
    assert "plus" in text
    assert posterior_with_delta(0.66, 0.3) > posterior_with_delta(0.66, 0.0)


# ------------------------------------------------------------------ the sheet as a record


def test_fingerprint_changes_with_the_data(capsys, tmp_path, hostile_city):
    from odcore.report.sheet import data_fingerprint

    df = pd.read_csv(hostile_city[0])
    a = data_fingerprint(df)
    assert a == data_fingerprint(df.copy())
    df2 = df.copy()
    df2.loc[17, "lat"] += 1e-9
    assert data_fingerprint(df2) != a
    # through the CLI: one changed row of the input, another fingerprint in the record and on the sheet
    changed = tmp_path / "t.csv"
    df2.to_csv(changed, index=False)
    fps = []
    for i, src in enumerate((hostile_city[0], changed)):
        code, _, err = _run(capsys, "release", "--input", str(src), "--seed", "1", "--threshold", "3", "--out",
                            str(tmp_path / f"o{i}"), "--analysis-out", str(tmp_path / f"a{i}"))
        assert code == 0, err
        # the data holder's record and sheet (do not share) carry it; the published ones do not
        rec = json.loads((tmp_path / f"a{i}" / "DO_NOT_SHARE_record.json").read_text())
        assert rec["fingerprint"] in (tmp_path / f"a{i}" / "DO_NOT_SHARE_guarantee_sheet.html").read_text()
        assert rec["fingerprint"] not in (tmp_path / f"o{i}" / "guarantee_sheet.html").read_text()
        assert rec["fingerprint"] not in (tmp_path / f"o{i}" / "release.json").read_text()
        assert rec["rows"] == len(df)
        assert rec["users"] == 150
        assert rec["software"]["odcore"]
        assert "seed" not in rec["settings"]
        fps.append(rec["fingerprint"])
    assert fps[0] != fps[1]


def test_sheet_numbers_are_the_pages_numbers():
    from odapp.shared.words import num, pct
    from odcore.privacy.accounting import BudgetConfig, budget
    from odcore.report.sheet import budget_sheet, posterior_with_delta

    b = budget(BudgetConfig(max_pairs=10, threshold=306, delta=5e-7, total_interval=0))
    text = budget_sheet(b)
    for v in (b["epsilon_user_week_bounded_tight"], b["delta_user_week_bounded_tight"]):
        assert num(v) in text
    assert pct(posterior_with_delta(b["epsilon_user_week_bounded_tight"], b["delta_user_week_bounded_tight"])) in text
    assert pct(0.99952) == "99.95 %"                              # never "100.0 %" for less than certainty


# ------------------------------------------------------------------ all or nothing


def test_outputs_follow_the_umask(tmp_path):
    old = os.umask(0o027)
    try:
        assert current_umask() == 0o027
        with atomic_output(tmp_path / "f.txt") as t:
            t.write_text("x")
        with atomic_folder(tmp_path / "d", lambda p: False, what="test") as t:
            (t / "a").write_text("y")
    finally:
        os.umask(old)
    assert (tmp_path / "f.txt").stat().st_mode & 0o777 == 0o640
    assert (tmp_path / "d").stat().st_mode & 0o777 == 0o750


def test_synth_refuses_a_folder_it_did_not_write(capsys, tmp_path):
    f = tmp_path / "city"
    f.mkdir()
    (f / "part-00000.parquet").write_bytes(b"someone else's")
    code, _, err = _run(capsys, "synth", "--users", "50", "--weeks", "1", "--out", str(f))
    assert code == 2
    assert "did not write" in err
    assert (f / "part-00000.parquet").read_bytes() == b"someone else's"


def test_counts_out_never_overwrites_its_geometry(capsys, tmp_path, hostile_city):
    code, _, err = _run(capsys, "trips", "--input", str(hostile_city[0]), "--counts-out",
                        str(tmp_path / "x.zones.geojson"))
    assert code == 2
    assert ".csv" in err


def _cli(*argv: str) -> list[str]:
    return [sys.executable, "-m", "odcore", *argv]


def _killed(cmd: list[str], after: float, watch: Path | None = None) -> None:
    """Run ``cmd`` and SIGKILL it ``after`` seconds after its start, or, with ``watch``, ``after`` seconds after it
    began writing its output (a temporary of its own appeared under ``watch``): so some kills land in the write."""
    p = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if watch is not None:
        mark, t0 = f".odcore-tmp-{p.pid}-", time.perf_counter()
        while p.poll() is None and time.perf_counter() - t0 < 300:
            if any(mark in n for n in os.listdir(watch)):   # temporaries sit beside their output
                break
            time.sleep(0.005)
    time.sleep(after)
    if p.poll() is None:
        os.kill(p.pid, signal.SIGKILL)
    p.wait(timeout=60)


def _finish(cmd: list[str]) -> None:
    """Run ``cmd`` (``python -m odcore ...``) to its end in this process: the same command, without a second start
    of Python (only the runs that are killed need a process of their own)."""
    assert cmd[:3] == [sys.executable, "-m", "odcore"], cmd
    assert main(cmd[3:]) == 0, cmd


def _timed(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=REPO_ROOT, check=True, capture_output=True, timeout=600)
    return time.perf_counter() - t0


def _synth_state(folder: Path) -> tuple | None:
    """(users, rows) of a synth folder as ``trips`` would load it, None if absent."""
    if not folder.exists():
        return None
    df = pd.read_parquet(folder)
    return int(df["user"].nunique()), len(df)


def _kill_tries(tries: int, tmp_path: Path, seed: int, cmd_of, state_of, allowed, finals: int = 1) -> None:
    """``tries`` runs killed with SIGKILL, half at a random moment, half a random moment after they began writing;
    after each, the output must be the previous whole one or a new whole one. Then ``finals`` complete runs (one
    per output kind) must leave no temporary behind."""
    rng = np.random.default_rng(seed)
    full = _timed(cmd_of(0))                     # the previous output, complete
    before = state_of()
    assert before is not None
    in_write = 0
    for i in range(tries):
        if i % 2:
            _killed(cmd_of(i + 1), float(rng.uniform(0.0, 0.3)), watch=tmp_path)
        else:
            _killed(cmd_of(i + 1), float(rng.uniform(0.0, 1.2 * full)))
        now = state_of()
        assert now in allowed(before), (i, now, before)  # the previous output or a whole new one, never a part
        in_write += any(".odcore-tmp-" in n for n in os.listdir(tmp_path))
    if tries >= 20:   # some kills landed while the output was being written (what a killed writer leaves)
        assert in_write >= 1
    # runs that finish remove what killed runs left behind
    for j in range(finals):
        _finish(cmd_of(tries + 1 + j))
    assert not [n for n in os.listdir(tmp_path) if ".odcore-tmp-" in n]


KILL_TRIES = [pytest.param(2, id="2 tries"), pytest.param(20, id="20 tries", marks=pytest.mark.slow)]


@pytest.mark.parametrize("tries", KILL_TRIES)
def test_kill_synth_folder(tmp_path, tries):
    folder = tmp_path / "city"

    def cmd(i):   # the same city every time: old and new outputs are equal when whole
        return _cli("synth", "--users", "2000", "--weeks", "1", "--chunk-users", "250", "--seed", "3",
                    "--out", str(folder))

    _kill_tries(tries, tmp_path, 1, cmd, lambda: _synth_state(folder), lambda before: [before])


@pytest.fixture(scope="module")
def small_city(tmp_path_factory):
    p = tmp_path_factory.mktemp("city") / "city.parquet"
    _finish(_cli("synth", "--users", "1500", "--weeks", "1", "--seed", "5", "--out", str(p)))
    return p


@pytest.mark.parametrize("tries", KILL_TRIES)
def test_kill_trips_counts_out(tmp_path, small_city, tries):
    folder, file = tmp_path / "counts", tmp_path / "counts.csv"

    def cmd(i):
        return _cli("trips", "--input", str(small_city), "--counts-out", str(folder if i % 2 == 0 else file))

    _finish(cmd(1))   # both exist before

    def state():
        from odcore.od.odtable import read_counts_folder

        if not folder.exists() or not file.exists():
            return None
        c = read_counts_folder(folder).counts
        f = pd.read_csv(file)
        return len(c), int(c["count"].sum()), len(f), int(f["count"].sum())

    _kill_tries(tries, tmp_path, 2, cmd, state, lambda before: [before], finals=2)


@pytest.mark.parametrize("tries", KILL_TRIES)
def test_kill_release(tmp_path, small_city, tries):
    out, an = tmp_path / "pub", tmp_path / "an"

    def cmd(i):   # seed i: each whole run publishes other noisy counts
        return _cli("release", "--input", str(small_city), "--threshold", "5", "--seed", str(i), "--out", str(out),
                    "--analysis-out", str(an))

    def state():
        if not out.exists() or not an.exists():
            return None
        names = sorted(p.name for p in out.iterdir())
        pub = pd.read_parquet(out / "published.parquet")
        csv_ = pd.read_csv(out / "published.csv")
        rec = json.loads((out / "release.json").read_text())
        full = pd.read_parquet(an / "DO_NOT_SHARE_analysis.parquet")
        full_csv = pd.read_csv(an / "DO_NOT_SHARE_analysis.csv", comment="#")
        summ = json.loads((an / "DO_NOT_SHARE_summary.json").read_text())
        ok_pub = len(pub) == len(csv_) == rec["release"]["pairs_published"] and len(names) == 5
        ok_an = (len(full) == len(full_csv) == summ["utility"]["pairs_total"]
                 and int(full["released"].sum()) == summ["utility"]["pairs_published"])
        return "whole" if ok_pub and ok_an else ("partial", names, len(pub), len(csv_), len(full), len(full_csv))

    _kill_tries(tries, tmp_path, 3, cmd, state, lambda before: ["whole"])


# ------------------------------------------------------------------ the app's downloads


def test_app_downloads_are_the_published_table_and_a_recorded_sheet(hostile_city):
    from types import SimpleNamespace

    from odapp.data.loading import Loaded
    from odapp.release import view as rv
    from odapp.shared.state import DatasetRef, Settings
    from odcore.data.traces import load_traces
    from odcore.od.engines import build_od
    from odcore.od.oddata import ODConfig
    from odcore.privacy.accounting import BudgetConfig, budget
    from odcore.privacy.release import ANALYSIS_NOTICE
    from odcore.report.safe_csv import csv_text

    tr = load_traces(hostile_city[0])
    cfg = ODConfig()
    od = build_od(tr.df, cfg)
    s = Settings(dataset=DatasetRef(id="test:hostile", kind="upload", label="Upload: ![b](http://127.0.0.2:9/b.png)"),
                 week=0, cell_km2=1.3, epsilon=0.66, threshold=3, seed=1)
    ctx = SimpleNamespace(settings=s, loaded=Loaded(df=tr.df, summary={}), od=od, od_config=cfg)
    rcfg = s.release_config()
    pub = rv.published_csv(ctx, rcfg, 0)
    full = rv.analysis_csv(ctx, rcfg, 0)
    assert len(pub) == int(full["released"].sum()) > 0
    assert not {"true_count", "noise", "released", "release_prob"} & set(pub.columns)
    assert not [c for c in _cells(csv_text(pub)) if is_risky(c)]
    text = csv_text(full, first_line=ANALYSIS_NOTICE)
    assert text.startswith("# DO NOT SHARE")
    # the sheet made on the Privacy budget page: a record of this data, the seed left out, names escaped as HTML
    b = budget(BudgetConfig(max_pairs=10, threshold=306, delta=5e-7, total_interval=0))
    html_text = rv.private_sheet_html(ctx, b)
    rec = rv.sheet_record(ctx)
    assert rec["fingerprint"] in html_text
    assert rec["fingerprint"] not in rv.budget_sheet_html(ctx, b)    # the sheet that may be shared
    assert rec["users"] == 150
    assert "seed" not in rec["settings"]
    assert "![b](http://127.0.0.2:9/b.png)" in html_text          # shown as the text it is (no markup inside)


@pytest.mark.slow
@pytest.mark.browser
def test_figures_csvs_neutralise_a_hostile_zone_file_name(capsys, tmp_path, monkeypatch, hostile_city):
    """``figures --out``: every CSV goes through the spreadsheet-safe writer, the zone comparison's too (a zone
    file named ``=cmd|' calc'A1.geojson`` gives its label to a cell; a ``!`` in a path is GDAL's archive syntax)."""
    import shutil

    from odcore.report import figures

    if figures.find_browser() is None:
        pytest.skip("no Chromium: figures cannot be drawn")
    traces, zones = hostile_city
    named = "=cmd|' calc'A1.geojson"   # given as a relative path: the label starts with "="
    shutil.copy(zones, tmp_path / named)
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "figs"
    code, _, err = _run(capsys, "figures", "--out", str(out), "--only", "zone_comparison,flow_map", "--formats",
                        "svg", "--input", str(traces), "--compare-zones", f"square:1.3,{named}", "--zones",
                        str(zones), "--threshold", "2", "--seed", "1")
    assert code == 0, err
    csvs = sorted(out.glob("*.csv"))
    assert [p.name for p in csvs] == ["DO_NOT_SHARE_zone_comparison.csv", "flow_map.csv"]
    for f in csvs:
        assert _risky_cells(f) == [], f
    text = (out / "DO_NOT_SHARE_zone_comparison.csv").read_text()
    assert "'=cmd|' calc'A1" in text   # there, behind the quote
