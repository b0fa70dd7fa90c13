"""A chart's image downloads in a real headless Chromium: the sidebar's "Chart images" choice gives a chart's SVG the
screen's size or a paper preset's (``python -m odcore figures --preset``: odcore.report.figures.SIZE_PRESETS), with
the preset's fonts embedded."""

from __future__ import annotations

import re

import pytest

from odapp.shared.export import EXPORT_SIZE_WORDS
from odcore.report import figures
from tests.browser.test_browser import _run, _settle, _watch_runs

pytestmark = [pytest.mark.browser, pytest.mark.timeout(900)]


def svg_size(data: bytes) -> tuple[float, float]:
    m = re.search(rb'<svg[^>]*?\swidth="([\d.]+)"[^>]*?\sheight="([\d.]+)"', data)
    assert m, data[:300]
    return float(m.group(1)), float(m.group(2))


def _download(page, label: str, tmp_path) -> bytes:
    with page.expect_download(timeout=240_000) as dl:
        page.locator("[data-testid=stDownloadButton] button").filter(has_text=re.compile(rf"{label}\s*$")).first.click()
    path = tmp_path / dl.value.suggested_filename
    dl.value.save_as(path)
    return path.read_bytes(), dl.value.suggested_filename


def _choose(page, words: str) -> None:
    box = page.locator("[data-testid=stSidebar] [data-testid=stSelectbox]").filter(has_text="Chart images").first
    box.scroll_into_view_if_needed()
    box.locator("input").first.click()
    page.keyboard.type(words)
    with _run(page):
        page.keyboard.press("Enter")


def test_svg_download_has_the_chosen_size(streamlit_url, page, tmp_path):
    _watch_runs(page)
    page.goto(streamlit_url.rstrip("/") + "/See_the_noise", wait_until="domcontentloaded")
    page.get_by_role("heading", name="See the noise", exact=True).first.wait_for(timeout=180_000)
    page.locator("[data-testid=stDownloadButton]").filter(has_text="SVG").first.wait_for(timeout=180_000)
    _settle(page)
    svg, name = _download(page, "SVG", tmp_path)
    assert svg_size(svg) == (900, 540)
    assert name == "noise_picture.svg"
    for preset in ("single-column", "slide"):
        _choose(page, EXPORT_SIZE_WORDS[preset])
        svg, name = _download(page, "SVG", tmp_path)
        size = figures.SIZE_PRESETS[preset]
        w, h = svg_size(svg)
        assert name == f"noise_picture_{preset}.svg"
        assert w == size.width_px
        assert size.height_px <= h <= 2 * size.height_px    # a long legend makes a figure taller, never narrower
        assert b"@font-face" in svg                          # the paper type embedded (figures.embed_svg_fonts)
    # a chart drawn for the files only, when its button asks (the Attack page's curve: export_buttons(fig=callable))
    page.goto(streamlit_url.rstrip("/") + "/Attack", wait_until="domcontentloaded")
    page.get_by_role("heading", name="Attack", exact=True).first.wait_for(timeout=180_000)
    page.locator("[data-testid=stDownloadButton]").filter(has_text="SVG").first.wait_for(timeout=180_000)
    _settle(page)
    svg, name = _download(page, "SVG", tmp_path)
    assert name == "attack_success_curve.svg"             # a new session (the page was loaded): the screen's size
    assert svg_size(svg) == (900, 540)
    assert b"Membership attack success" in svg or b"attack success" in svg.lower()


def test_designer_files_say_what_the_page_shows(streamlit_url, page, tmp_path):
    """The Release designer's two files, made when their buttons are clicked: the report is the page's design (the
    same max pairs, threshold and goal), the sheet names them."""
    import json

    from odapp.shared.words import num

    page.goto(streamlit_url.rstrip("/") + "/Release_designer", wait_until="domcontentloaded")
    page.get_by_role("heading", name="Release designer", exact=True).first.wait_for(timeout=180_000)
    page.locator("[data-testid=stDownloadButton]").filter(has_text="Design report").first.wait_for(timeout=180_000)
    _settle(page)
    shown = {}
    for label in ("Max pairs per person and week", "Threshold"):
        card = page.locator("[data-testid=stMetric]").filter(has_text=label).first
        shown[label] = card.locator("[data-testid=stMetricValue]").inner_text().strip()

    def download(words: str) -> tuple[bytes, str]:
        with page.expect_download(timeout=240_000) as dl:
            page.locator("[data-testid=stDownloadButton] button").filter(has_text=words).first.click()
        path = tmp_path / dl.value.suggested_filename
        dl.value.save_as(path)
        return path.read_bytes(), dl.value.suggested_filename

    data, name = download("Design report (JSON)")
    assert name == "design.json"
    rep = json.loads(data)
    assert num(rep["max_pairs"]) == shown["Max pairs per person and week"]
    assert num(rep["threshold"]) == shown["Threshold"]
    assert "frontier" not in rep
    assert rep["goal"]["words"]
    data, name = download("Design sheet")
    assert name == "DO_NOT_SHARE_design_sheet.html"   # it holds figures of the true data (typical person, verdict)
    text = data.decode()
    assert text.startswith("<!DOCTYPE html>") or "<html" in text[:200]
    assert "Guarantee sheet" in text
    assert "DO NOT SHARE" in text
    assert rep["goal"]["words"] in text


def _drawn(page, url: str, heading: str, live_page: str, chart: str) -> dict:
    """Open the page titled ``heading`` and return what its live chart ``chart`` drew (``window.odlive``): ``x`` and
    ``y`` per series key, and its ``layout``."""
    page.goto(url.rstrip("/") + "/" + heading.replace(" ", "_"), wait_until="domcontentloaded")
    page.get_by_role("heading", name=heading, exact=True).first.wait_for(timeout=180_000)
    page.wait_for_function(f"() => window.odlive && window.odlive[{live_page!r}]", timeout=180_000)
    _settle(page)
    return page.evaluate(f"() => {{ const g = window.odlive[{live_page!r}]; return {{x: g.x[{chart!r}], "
                         f"y: g.values[{chart!r}], layout: g.layout[{chart!r}]}}; }}")


def test_designer_frontier_drawn_is_the_one_exported(streamlit_url, page, tmp_path):
    """The designer's frontier, drawn in the browser: every candidate's point is the one in the chart's CSV (the
    same ε and share for each max pairs), a point's text shows under the pointer, and the SVG file is the plotly
    chart of the same title."""
    import io

    import numpy as np
    import pandas as pd

    got = _drawn(page, streamlit_url, "Release designer", "design", "frontier")
    data, name = _download(page, "CSV", tmp_path)
    assert name == "design_frontier.csv"
    front = pd.read_csv(io.BytesIO(data), comment="#")
    assert len(front)
    assert {f"max_pairs_{m}" for m in front["max_pairs"]} <= set(got["x"])
    for m, grp in front.groupby("max_pairs"):
        key = f"max_pairs_{m}"
        assert np.allclose(got["x"][key], grp["epsilon_user_week"].to_numpy(), rtol=1e-12), m
        assert np.allclose(got["y"][key], grp["trips_published_frac"].to_numpy(), rtol=1e-12), m
    assert got["layout"]["title"].startswith("Share of user-trips published against ε")
    # the pointer on a point shows its text (the chart is drawn first, above the goal and the downloads: back to it)
    canvas = page.locator(".odlive[data-page=design] canvas").first
    canvas.scroll_into_view_if_needed()
    box = canvas.bounding_box()
    x, y, _ = got["layout"]["dots"][0]
    page.mouse.move(box["x"] + x, box["y"] + y)
    tip = page.locator(".odlive[data-page=design] .odlive-tip").first
    tip.wait_for(state="visible", timeout=10_000)
    assert re.match(r"(max pairs \d+, ε|Google|this design)", tip.inner_text()), tip.inner_text()
    svg, name = _download(page, "SVG", tmp_path)
    assert name == "design_frontier.svg"
    assert b"Share of user-trips published" in svg


def test_data_trips_histogram_drawn_is_the_one_exported(streamlit_url, page, tmp_path):
    """The Data page's users by trips in the week, drawn in the browser: both step outlines are the CSV's columns,
    a step's text shows under the pointer, and the SVG file is the plotly chart of the same title."""
    import io

    import pandas as pd

    from odcore.report.figures import template

    got = _drawn(page, streamlit_url, "Data", "data", "trips")
    t = template(projector=False).layout     # the type of the plotly heatmap beside it
    assert got["layout"]["font"] == {"title": t.title.font.size, "tick": t.xaxis.tickfont.size,
                                     "label": t.xaxis.title.font.size, "legend": t.legend.font.size}
    data, name = _download(page, "CSV", tmp_path)
    assert name == "trips_hist_week0.csv"
    hist = pd.read_csv(io.BytesIO(data), comment="#")
    assert hist["users_total"].sum() > 0
    for col in ("users_total", "users_unique"):
        assert got["x"][col] == hist["trips_in_week"].tolist()
        assert got["y"][col] == hist[col].tolist()
    box = page.locator(".odlive[data-page=data] canvas").first.bounding_box()
    line = got["layout"]["curves"][0]
    k = (len(line) // 4) * 2
    page.mouse.move(box["x"] + line[k] + 1, box["y"] + line[k + 1] + 2)
    tip = page.locator(".odlive[data-page=data] .odlive-tip").first
    tip.wait_for(state="visible", timeout=10_000)
    m = re.fullmatch(r"([\d,]+) users with (\d+) (total|unique) trips in the week", tip.inner_text())
    assert m, tip.inner_text()
    col = "users_total" if m.group(3) == "total" else "users_unique"
    assert int(m.group(1).replace(",", "")) == int(hist.set_index("trips_in_week").loc[int(m.group(2)), col])
    svg, name = _download(page, "SVG", tmp_path)
    assert name == "trips_hist_week0.svg"
    assert b"Distribution over users" in svg
