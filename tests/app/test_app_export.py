"""Exports: PNG/SVG through kaleido, JSON that the CLI accepts and that reproduces the app's numbers, words."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from enum import StrEnum

import numpy as np
import plotly.graph_objects as go
import pytest

from odapp.data.loading import load_sample
from odapp.shared import cli_config
from odapp.shared.export import figure_image, slug, to_json_text
from odapp.shared.state import Settings
from odapp.shared.styling import styled
from odapp.shared.words import epsilon_words, num, pct, probability_words
from odcore.cli import main as cli_main
from odcore.paths import REPO_ROOT
from odcore.report.figures import find_browser

# one kaleido Chromium for the module's images (tests/conftest.py: image_server)
pytestmark = pytest.mark.usefixtures("image_server")

SAMPLE = REPO_ROOT / "sample_data" / "synthetic_city.parquet"


def _cli(*args: str) -> subprocess.CompletedProcess:
    """``python -m odcore ARGS`` from the repository's root, run by the command line's ``main`` in this process (what
    is tested is what the command accepts and prints, not a start of Python)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.chdir(REPO_ROOT), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli_main(list(args))
    return subprocess.CompletedProcess([sys.executable, "-m", "odcore", *args], rc, out.getvalue(), err.getvalue())


def test_no_browser_gives_a_clear_error(monkeypatch):
    from odcore.errors import MissingBrowserError
    from odcore.report import figures

    monkeypatch.setenv(figures.BROWSER_ENV, "none")
    fig = go.Figure(go.Scatter(x=[0, 1], y=[0, 1]))
    with pytest.raises(MissingBrowserError, match="needs Google Chrome or Chromium"):
        figure_image(fig.to_json(), "png")
    with pytest.raises(MissingBrowserError, match="CSV and JSON downloads work without it"):
        figures.image_bytes(fig, "svg")


@pytest.mark.skipif(find_browser() is None, reason="no Chrome/Chromium on this machine: kaleido cannot draw PNG/SVG "
                    "(Debian package 'chromium'; .ci/run installs it)")
def test_png_and_svg_through_kaleido():
    fig = styled(go.Figure(go.Scatter(x=[0, 1, 2], y=[0.5, 0.7, 0.95], name="p_k")), "test")
    png = figure_image(fig.to_json(), "png")
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width = int.from_bytes(png[16:20], "big")
    assert width == 1800      # 900 px at scale 2
    svg = figure_image(fig.to_json(), "svg")
    assert svg.lstrip().startswith(b"<svg")
    assert b">test</text>" in svg


def test_json_text_handles_enums_and_numpy():
    class Mode(StrEnum):
        A = "a"

    text = to_json_text({"mode": Mode.A, "eps": np.float64(0.66), "k": np.int64(3), "v": np.arange(2)})
    assert json.loads(text) == {"mode": "a", "eps": 0.66, "k": 3, "v": [0, 1]}


def test_slug_and_words():
    assert slug("roc user 12/3") == "roc-user-12-3"
    assert probability_words(0.5) == "a coin flip"
    assert probability_words(0.659) == "somewhat better than a coin flip"
    assert probability_words(0.955) == "very likely right"
    assert probability_words(0.995) == "near-certain"
    assert "far outside" in epsilon_words(2402.4)
    assert pct(0.7071) == "70.7 %"
    assert num(46.2) == "46.2"
    assert num(2402.4) == "2,402.4"


def _settings(**kw) -> Settings:
    from odapp.data.loading import sample_ref

    base = {"dataset": sample_ref(), "week": 0, "cell_km2": 1.3, "epsilon": 0.66, "threshold": 100, "seed": 7}
    return Settings(**{**base, **kw})


def test_settings_validate():
    from odcore.errors import ParameterError

    for bad in ({"epsilon": 0}, {"threshold": 0.5}, {"week": -1}, {"mode": "x"}, {"max_pairs": 0}):
        with pytest.raises(ParameterError):
            _settings(**bad)


def test_budget_json_is_accepted_by_the_cli_and_reproduces_the_numbers(tmp_path):
    from odcore.privacy.accounting import BudgetConfig, budget, delta_parts

    s = _settings(epsilon=0.5, threshold=50)
    cfg = cli_config.budget_config(s, trips=20, weeks=4, delta=1e-5)
    f = tmp_path / "budget.config.json"
    f.write_text(to_json_text(cfg))
    r = _cli("budget", "--config", str(f), "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    # the page and the command split the δ asked for the same way (odcore.privacy.accounting.delta_parts)
    lap = delta_parts(0.5, 1e-5, 4, threshold=50, trips=20).laplace
    want = budget(BudgetConfig(epsilon=0.5, threshold=50, trips=20, weeks=4, delta=lap))
    for key in ("epsilon_user_week", "epsilon_user_total", "epsilon_user_week_tight", "delta_per_metric"):
        assert out[key] == pytest.approx(want[key], rel=1e-12)


def _goal():
    from odcore.privacy.design import Goal

    return Goal("attack", known_trips=32, success=0.6, delta=1e-6, weeks=52)


def test_command_line_flags_parse():
    from odcore.cli import build_parser

    s = _settings(mode="user_level", max_pairs=5)
    loaded_cli = {"input": "x.parquet", "format": "parquet", "tz": "UTC", "bbox": "none"}

    class L:
        cli = loaded_cli

    for command, cfg in (("release", cli_config.release_config(s, L)),
                         ("user-risk", cli_config.user_risk_config(s, L, user="12")),
                         ("attack-curve", cli_config.attack_curve_config(s, k_max=70, prior=0.3, monte_carlo=500)),
                         ("budget", cli_config.budget_config(s, trips=10, weeks=2, delta=1e-6)),
                         ("design", cli_config.design_config(s, L, _goal(), max_pairs=5)),
                         ("trips", {**loaded_cli, "cell_km2": 2.0})):
        line = cli_config.command_line(command, cfg)
        argv = line.split()[3:]   # drop "python -m odcore"
        assert argv[0] == command
        ns = build_parser().parse_args(argv)
        for k, v in cfg.items():
            if k != "dataset":
                got = getattr(ns, k)
                assert (got == pytest.approx(v)) if isinstance(v, int | float) and not isinstance(v, bool) else (str(got) == str(v)), (command, k)


@pytest.mark.skipif(not SAMPLE.is_file(), reason="bundled sample missing")
def test_release_json_reproduces_the_app_release(tmp_path):
    from odcore.od.trips import ODConfig, build_od
    from odcore.privacy.release import release_with_report

    s = _settings(epsilon=0.8, threshold=60, seed=11)
    loaded = load_sample()
    od = build_od(loaded.df, ODConfig(cell_km2=s.cell_km2, tz=loaded.tz))
    app = release_with_report(od.week_pairs(0), s.release_config(), rng=s.seed)   # what the page shows
    f = tmp_path / "release.config.json"
    f.write_text(to_json_text(cli_config.release_config(s, loaded)))
    r = _cli("release", "--config", str(f), "--out", str(tmp_path / "out"), "--analysis-out", str(tmp_path / "an"),
             "--json")
    assert r.returncode == 0, r.stderr
    summary = json.loads((tmp_path / "an" / "DO_NOT_SHARE_summary.json").read_text())
    published = json.loads((tmp_path / "out" / "release.json").read_text())
    assert published["release"]["pairs_published"] == app.report["pairs_released"]
    assert summary["release"]["pairs_released"] == app.report["pairs_released"]
    assert summary["release"]["pairs_observed"] == app.report["pairs_observed"]


def test_attack_curve_json_is_accepted_by_the_cli(tmp_path):
    from odcore.privacy.attack import success_curve

    s = _settings(epsilon=0.9, seed=3)
    cfg = {**cli_config.attack_curve_config(s, k_max=12, prior=0.5, monte_carlo=None), "dataset": {"label": "x"}}
    f = tmp_path / "attack.config.json"
    f.write_text(to_json_text(cfg))
    r = _cli("attack-curve", "--config", str(f), "--json")
    assert r.returncode == 0, r.stderr
    assert "'dataset' is not used" in r.stderr
    out = json.loads(r.stdout)
    assert out["k"] == list(range(13))
    np.testing.assert_allclose(out["success"], np.asarray(success_curve(0.9, 12)), atol=1e-12)
    # an explicit flag wins over the file
    r = _cli("attack-curve", "--config", str(f), "--k-max", "5", "--json")
    assert json.loads(r.stdout)["k"] == list(range(6))


def test_a_path_without_chromium_skips_the_browser_tests_with_the_reason():
    """No ``chromium`` on PATH (and ODLAB_BROWSER unset) is treated like ODLAB_BROWSER=none for the browser tests:
    they skip, naming what is missing, and nothing fails. (Image export may still find a Chrome that kaleido's own
    search knows outside PATH; without any, it raises the message of test_no_browser_gives_a_clear_error.)"""
    import os
    from pathlib import Path

    env = {k: v for k, v in os.environ.items() if k != "ODLAB_BROWSER"}
    env["PATH"] = str(Path(sys.executable).parent)   # the virtual environment's scripts only: no chromium
    probe = subprocess.run([sys.executable, "-c", "from benchmarks.harness import chromium_executable as c; print(c())"],
                           env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert probe.stdout.strip() == "None", probe
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-p", "no:hypothesispytest",
                        "tests/browser/test_browser.py"],
                       env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:]
    assert "no Chromium on this machine" in r.stdout
    assert " passed" not in r.stdout, r.stdout[-2000:]
    assert "failed" not in r.stdout, r.stdout[-2000:]


def test_chart_image_sizes_are_the_figures_command_presets():
    from odapp.shared.export import EXPORT_SIZE_WORDS, EXPORT_SIZES, SCREEN, chart_image
    from odcore.constants import SIZE_PRESET_NAMES

    assert EXPORT_SIZES == (SCREEN, *SIZE_PRESET_NAMES)
    assert set(EXPORT_SIZE_WORDS) == set(EXPORT_SIZES)
    with pytest.raises(ValueError, match="export size must be one of screen, single-column"):
        chart_image(go.Figure().to_json(), "svg", "a4")


@pytest.mark.skipif(find_browser() is None, reason="no Chrome/Chromium: the charts offer no PNG/SVG buttons")
def test_one_image_size_choice_for_every_chart(at):
    """The size chosen in the sidebar is the size of every chart's downloads, on every page; one element per page."""
    from odapp.shared.export import EXPORT_SIZE_WORDS, K_EXPORT_SIZE, SCREEN

    at.switch_page("pages/8_See_the_noise.py").run()
    box = at.sidebar.selectbox(key="w.export_size")
    assert box.value == SCREEN
    assert box.options == list(EXPORT_SIZE_WORDS.values())
    assert [b.label for b in at.get("download_button")][:2] == ["PNG", "SVG"]
    assert "at the screen's size" in at.get("download_button")[1].proto.help
    box.set_value("double-column").run()
    try:
        assert at.session_state[K_EXPORT_SIZE] == "double-column"
        at.switch_page("pages/1_Data.py").run()
        assert at.sidebar.selectbox(key="w.export_size").value == "double-column"
        helps = [b.proto.help for b in at.get("download_button") if b.proto.label in ("PNG", "SVG")]
        assert len(helps) >= 4
        assert all("double column (7 in, 9 pt)" in h for h in helps)
    finally:
        at.sidebar.selectbox(key="w.export_size").set_value(SCREEN).run()


@pytest.mark.skipif(find_browser() is None, reason="no Chrome/Chromium: kaleido cannot draw the image")
def test_map_image_at_a_paper_preset(at):
    """The OD release map's image box: a preset instead of width, height and DPI gives the figures command's layout
    at the preset's width (the flow map grows taller for its legend, never narrower)."""
    import re

    from odcore.report.figures import SIZE_PRESETS

    at.switch_page("pages/2_OD_release.py").run()
    at.session_state["img_open_od_map"] = True
    at.run()
    try:
        at.selectbox(key="img_preset_od_map").set_value("single-column").run()
        assert not [n for n in at.number_input if n.key == "img_w_od_map"]    # the preset sets the size
        at.radio(key="img_fmt_od_map").set_value("svg").run()
        at.button(key="img_go_od_map").click().run()
        assert not at.exception, [e.message for e in at.exception]
        want, svg = at.session_state["img_data_od_map"]
        assert want[-1] == "single-column"
        w, h = (float(x) for x in re.search(rb'<svg[^>]*?\swidth="([\d.]+)"[^>]*?\sheight="([\d.]+)"', svg).groups())
        assert w == SIZE_PRESETS["single-column"].width_px
        assert h >= SIZE_PRESETS["single-column"].height_px
        assert [b for b in at.get("download_button") if b.proto.label.endswith("_single-column.svg")]
    finally:
        at.session_state["img_open_od_map"] = False
        at.run()


def test_a_browser_that_will_not_start_is_said_on_the_page(at, monkeypatch):
    """ODLAB_BROWSER naming a program that is not a browser: the map's image box says in its status line that the
    browser did not start, the page keeps working, and no image is offered."""
    at.switch_page("pages/2_OD_release.py").run()
    at.session_state["img_open_od_map"] = True
    at.run()
    try:
        with monkeypatch.context() as m:
            m.setenv("ODLAB_BROWSER", "/bin/false")
            at.radio(key="img_fmt_od_map").set_value("pdf").run()
            at.button(key="img_go_od_map").click().run()
        assert not at.exception, [e.message for e in at.exception]
        [status] = [s for s in at.status if s.label.startswith("No PDF")]
        assert status.state == "error"
        assert "(/bin/false) did not start" in status.label
        assert not [b for b in at.get("download_button") if b.proto.label.endswith(".pdf")]
    finally:
        at.session_state["img_open_od_map"] = False
        at.run()


def test_published_view_downloads_are_offered_with_their_do_not_share_twins(at):
    """The OD release page offers release.json beside the published table; the Privacy budget page (per person)
    the shareable guarantee sheet and, apart and named so, the sheet with the data's record. The files themselves
    are compared across neighbouring datasets in tests/odcore/report/test_published_boundary.py."""

    def labels():
        return {b.proto.label: b.proto for b in at.get("download_button")}

    at.switch_page("pages/2_OD_release.py").run()
    assert not at.exception, [e.message for e in at.exception]
    assert "release.json" in labels()
    at.sidebar.selectbox(key="w.mode").set_value("user_level").run()
    try:
        at.switch_page("pages/4_Privacy_budget.py").run()
        assert not at.exception, [e.message for e in at.exception]
        got = labels()
        assert "Guarantee sheet (HTML, printable)" in got
        assert "Sheet with the data's record — do not share (HTML)" in got
    finally:
        at.sidebar.selectbox(key="w.mode").set_value("per_metric").run()
