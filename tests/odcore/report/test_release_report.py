"""The two release reports: the shareable one depends on the published table and the public settings only
(neighbouring datasets with the same published table give the same bytes), neither makes an outside request, both
read at 1024 and 1440 px in Chromium; ``python -m odcore report`` writes them."""

from __future__ import annotations

import dataclasses
import html
import re
import subprocess
import sys
from functools import cache

import numpy as np
import pandas as pd
import pytest

from odcore.constants import WEEK
from odcore.data.traces import load_traces
from odcore.errors import ParameterError
from odcore.od.trips import ODConfig, build_od
from odcore.paths import REPO_ROOT
from odcore.privacy.release import Mode, ReleaseConfig
from odcore.report import release_report as rr
from odcore.report.private_report import PRIVATE_NOTICE, release_reports
from tests.conftest import screenshot_dir

WRITTEN = re.compile(r"Written \(UTC\) [^<]*")
OUTSIDE = re.compile(r"https?:|@import|url\((?!['\"]?data:)|(?:src|href)\s*=\s*(?!['\"]?(?:data:|#))", re.IGNORECASE)
CFG = ReleaseConfig(epsilon=2.0, threshold=15, mode=Mode.USER_LEVEL, max_pairs=5)


@cache
def city():
    """A quarter of the bundled city's people (the release, the designer and the measures in a few seconds)."""
    df = load_traces(REPO_ROOT / "sample_data" / "synthetic_city.parquet").df
    users = df["user"].unique()
    return build_od(df.loc[df["user"].isin(users[: len(users) // 4])], ODConfig())


def with_one_more_person(od):
    """The same data and one more person, whose one trip is a pair nobody else makes, between the zones of highest
    id: it comes last in the release's pair order, so every other pair's noise is the same draw as without them."""
    top = int(od.grid.n_cells) - 1
    users = od.pairs["user"]
    new_user = (users.max() + 1) if pd.api.types.is_integer_dtype(users) else "one-more-person"
    row = pd.DataFrame({WEEK: [0], "user": [new_user], "origin": [top], "destination": [top]}).astype(
        od.pairs.dtypes.to_dict())
    pairs = pd.concat([od.pairs, row], ignore_index=True)
    counts = pd.concat([od.counts, pd.DataFrame({WEEK: [0], "origin": [top], "destination": [top], "count": [1]})
                        .astype(od.counts.dtypes.to_dict())], ignore_index=True)
    uw = od.user_week
    uw2 = pd.concat([uw, pd.DataFrame({WEEK: [0], "user": [new_user], "trips": [1], "unique_trips": [1]})
                     .astype(uw.dtypes.to_dict())], ignore_index=True)
    stats = {**od.stats, "cells_used": np.union1d(od.cells, [top])}
    return dataclasses.replace(od, pairs=pairs, counts=counts, user_week=uw2, stats=stats)


def test_shareable_report_is_the_same_for_neighbouring_datasets_with_the_same_published_table():
    od = city()
    od2 = with_one_more_person(od)
    assert len(od2.pairs) == len(od.pairs) + 1
    a = release_reports(od, 0, CFG, goal_epsilon=2.0, seed=3, with_map=False, audit=False, verdict=False, written="T1")
    b = release_reports(od2, 0, CFG, goal_epsilon=2.0, seed=3, with_map=False, audit=False, verdict=False, written="T2")
    pd.testing.assert_frame_equal(a.published, b.published)          # the premise: the same published table
    assert a.public_html != b.public_html                            # the time written differs ...
    assert WRITTEN.sub("", a.public_html) == WRITTEN.sub("", b.public_html)   # ... and nothing else
    assert a.private_html != b.private_html   # the do-not-share one reads the truth, which differs by one person
    # the map is drawn from the published table and the zones alone: the same figure, to the last byte of its JSON
    fa = rr.published_map_figure(a.published, od.grid, a.settings).to_json()
    fb = rr.published_map_figure(b.published, od2.grid, b.settings).to_json()
    assert fa == fb


def test_a_different_published_table_changes_the_shareable_report():
    od = city()
    a = release_reports(od, 0, CFG, goal_epsilon=2.0, seed=3, with_map=False, audit=False, verdict=False, written="T")
    b = release_reports(od, 0, CFG, goal_epsilon=2.0, seed=4, with_map=False, audit=False, verdict=False, written="T")
    assert a.public_html != b.public_html   # the test above could fail: another seed, another table, another file


def test_public_report_reads_only_the_published_columns():
    od = city()
    a = release_reports(od, 0, CFG, goal_epsilon=2.0, seed=3, with_map=False, audit=False, written="T")
    for word in ("true count", "true_count", "raw_count", "release_prob", "DO NOT SHARE", "Kendall", "audit"):
        assert word not in a.public_html.replace("no true count", ""), word
    assert html.escape(PRIVATE_NOTICE) in a.private_html
    assert "Kendall" in a.private_html
    assert "RMSE" in a.private_html
    assert "Goal met" in a.private_html   # the designer's full verdict
    with pytest.raises(ParameterError, match="misses column"):
        rr.public_report_html(a.published.drop(columns=["noisy_count"]), a.settings, map_png=None, written="T")


def test_map_legend_describes_no_shading_the_public_map_lacks():
    od = city()
    a = release_reports(od, 0, CFG, goal_epsilon=2.0, seed=3, with_map=False, audit=False, verdict=False, written="T")
    fig = rr.published_map_figure(a.published, od.grid, a.settings)
    texts = [x.text or "" for x in fig.layout.annotations]
    assert not any(rr.ZONE_SHADING_TITLE in t or "flow leaving" in t for t in texts)
    assert any("noisy count" in t for t in texts)


def test_guarantee_in_both_units_agrees_with_the_budget():
    from odcore.privacy.accounting import person_week

    s = rr.PublicSettings(epsilon=1.0, threshold=100, max_pairs=10, weeks=8)
    g = rr.guarantee_rows(s)
    assert g["per_count"]["epsilon"] == pytest.approx(0.1)
    pw = person_week("user_level", 1.0, 100, 10, max_pairs=10)
    assert g["per_person"][0]["epsilon"] == pytest.approx(pw["epsilon_person_week"], rel=1e-9)
    per_count = rr.guarantee_rows(rr.PublicSettings(epsilon=0.66, threshold=100, mode="per_metric"))
    assert [r["trips"] for r in per_count["per_person"]] == list(rr.REFERENCE_TRIPS)
    eps = [r["epsilon"] for r in per_count["per_person"]]
    assert eps == sorted(eps)   # busier people are less protected per count
    with pytest.raises(ParameterError, match="mode"):
        rr.PublicSettings(epsilon=1.0, threshold=10, mode="per_user")


@pytest.mark.slow
def test_cli_writes_both_reports_offline_and_they_read_at_1024_and_1440(tmp_path, browser):
    """``python -m odcore report`` on the bundled city with the map; both files self-contained, looked at in
    Chromium at two widths (no request leaves the page, nothing wider than the window)."""
    out = tmp_path / "rep"
    r = subprocess.run([sys.executable, "-m", "odcore", "report", "--out", str(out), "--target-epsilon", "2",
                        "--seed", "1"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    files = {p.name: p for p in out.iterdir()}
    assert set(files) == {"report.html", "DO_NOT_SHARE_report.html"}
    for p in files.values():
        text = p.read_text(encoding="utf-8")
        assert not OUTSIDE.search(text), OUTSIDE.search(text)
        assert "data:image/png;base64," in text
        assert "@media print" in text
    shots = screenshot_dir()
    shots.mkdir(parents=True, exist_ok=True)
    for width in (1024, 1440):
        ctx = browser.new_context(viewport={"width": width, "height": 900})
        page = ctx.new_page()
        requests: list[str] = []
        page.on("request", lambda req, seen=requests: seen.append(req.url))
        for name, p in files.items():
            requests.clear()
            page.goto(p.as_uri())
            page.wait_for_load_state("load")
            assert all(u.startswith(("file:", "data:")) for u in requests), requests
            assert page.evaluate("document.documentElement.scrollWidth") <= width
            assert page.evaluate("document.images[0].naturalWidth") > 0   # the map decoded
            page.screenshot(path=str(shots / f"{name.removesuffix('.html')}_{width}.png"), full_page=True)
        ctx.close()


@pytest.mark.slow
def test_shareable_file_with_its_map_is_byte_identical_for_neighbouring_datasets():
    od = city()
    od2 = with_one_more_person(od)
    a = release_reports(od, 0, CFG, goal_epsilon=2.0, seed=3, audit=False, written="T")
    b = release_reports(od2, 0, CFG, goal_epsilon=2.0, seed=3, audit=False, written="T")
    assert a.public_html == b.public_html
    assert np.char.count(a.public_html, "data:image/png") == 1


def test_page_download_is_the_commands_report(monkeypatch):
    """The OD release page's buttons hand over the same documents as odcore's release_reports at the page's seed."""
    from types import SimpleNamespace

    from odapp.release import view as rv
    from odapp.shared.state import USER_DELTA, USER_WEEKS

    monkeypatch.setattr(rv.figures, "find_browser", lambda: None)   # no map: the test stays fast
    od = city()
    ctx = SimpleNamespace(settings=SimpleNamespace(dataset=SimpleNamespace(id="quarter-city"), seed=5),
                          od_config=ODConfig(), od=od)
    pub = rv.report_html(ctx, CFG, 0, "public")
    priv = rv.report_html(ctx, CFG, 0, "private")
    ref = release_reports(od, 0, CFG, weeks=USER_WEEKS, delta=USER_DELTA, seed=5, with_map=False, audit=False,
                          verdict=False, written="T")
    assert WRITTEN.sub("", pub) == WRITTEN.sub("", ref.public_html)
    assert "DO NOT SHARE" in priv
    assert "Audit on the week" in priv


def test_nothing_published_is_said_in_words():
    cols = ["week", "week_start", "origin", "destination", "noisy_count", "origin_lat", "origin_lon",
            "destination_lat", "destination_lon"]
    empty = pd.DataFrame({c: pd.Series(dtype=float) for c in cols})
    s = rr.PublicSettings(epsilon=1.0, threshold=100, max_pairs=10, weeks=4)
    page = rr.public_report_html(empty, s, map_png=None, written="T")
    assert "Nothing is published" in page
    assert "<img" not in page
