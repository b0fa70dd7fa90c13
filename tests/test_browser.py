"""The dashboard in a real headless Chromium: every page draws, the ε slider moves the attack curve, the pydeck map
canvas is drawn, an unreadable upload shows an error; full-page screenshots go to ``docs/screenshots/``."""

from __future__ import annotations

import io

import pytest

from odcore.paths import REPO_ROOT

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]

SHOTS = REPO_ROOT / "docs" / "screenshots"
PAGES = [  # (url path, heading, screenshot name)
    ("", "OD Privacy Lab", "0_home.png"),
    ("Data", "Data", "1_data.png"),
    ("OD_release", "OD release", "2_od_release.png"),
    ("Attack", "Attack", "3_attack.png"),
    ("Privacy_budget", "Privacy budget", "4_privacy_budget.png"),
    ("Knock_Knock", "Knock Knock", "5_knock_knock.png"),
]


def _settle(page, timeout_s: float = 120) -> None:
    """Wait until the script run is over: Streamlit marks ``stApp`` with ``data-test-script-state``."""
    page.wait_for_timeout(300)
    page.wait_for_function(
        "() => { const a = document.querySelector('[data-testid=stApp]'); "
        "return a && !['running', 'initial'].includes(a.getAttribute('data-test-script-state')); }",
        timeout=timeout_s * 1000)
    page.wait_for_timeout(500)   # let charts and the map finish drawing


def _open(page, url: str, heading: str) -> None:
    page.goto(url, wait_until="domcontentloaded")
    page.get_by_role("heading", name=heading, exact=True).first.wait_for(timeout=120_000)
    _settle(page)
    assert page.locator("[data-testid='stException']").count() == 0, f"{url}: exception shown"


def _screenshot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    h = page.evaluate("""() => Math.max(...['stMain', 'stMainBlockContainer', 'stAppViewContainer']
        .map(id => document.querySelector(`[data-testid="${id}"]`)).filter(Boolean)
        .map(e => e.scrollHeight + e.getBoundingClientRect().top), document.body.scrollHeight)""")
    page.mouse.move(5, 5)          # no hover tooltip in the picture
    page.set_viewport_size({"width": 1400, "height": int(min(max(h + 40, 900), 7000))})
    page.wait_for_timeout(1000)
    _settle(page)
    for deck in page.locator("[data-testid='stDeckGlJsonChart']").all():   # maps redraw after the resize
        deck.locator("canvas").first.wait_for(timeout=60_000)
    page.wait_for_timeout(1200)
    page.screenshot(path=str(SHOTS / name), full_page=True)
    page.set_viewport_size({"width": 1400, "height": 1000})


def _plotly_y(page, index: int = 0) -> list[float]:
    page.wait_for_function(
        "(i) => { const d = document.querySelectorAll('.js-plotly-plot')[i]; return d && d._fullData && "
        "d._fullData.length > 0 && d._fullData[0].y && d._fullData[0].y.length > 0; }", arg=index, timeout=60_000)
    return page.evaluate(
        "(i) => Array.from(document.querySelectorAll('.js-plotly-plot')[i]._fullData[0].y)", index)


def _metric(page, label: str) -> str:
    m = page.locator("[data-testid='stMetric']").filter(has_text=label).first
    return m.locator("[data-testid='stMetricValue']").inner_text()


def test_every_page_and_screenshots(streamlit_url, page):
    for path, heading, shot in PAGES:
        _open(page, f"{streamlit_url}/{path}", heading)
        if path == "Attack":   # show the Monte Carlo points and the population histogram in the picture
            page.get_by_text("Monte Carlo check (the paper's simulation)").click()
            page.get_by_role("button", name="Run the Monte Carlo").click()
            page.get_by_text("of the exact values fall inside").wait_for(timeout=120_000)
            _settle(page)
            page.get_by_text("Attack every user of the week").click()
            page.get_by_text("Median success").wait_for(timeout=120_000)
            _settle(page)
            assert page.locator("[data-testid='stException']").count() == 0
        if path == "Knock_Knock":
            page.get_by_role("button", name="Run the experiment").click()
            page.get_by_text("Mean AUC, best classifier").wait_for(timeout=180_000)
            _settle(page, 180)
            assert page.locator("[data-testid='stException']").count() == 0
        _screenshot(page, shot)
        assert (SHOTS / shot).stat().st_size > 20_000


def test_epsilon_slider_moves_the_attack_curve(streamlit_url, page):
    _open(page, f"{streamlit_url}/Attack", "Attack")
    before_metric = _metric(page, "Success with k = 3")
    before = _plotly_y(page)
    assert len(before) == 71
    assert before[3] == pytest.approx(0.7071, abs=1e-4)     # exact p_3 at ε = 0.66
    thumb = page.locator("[data-testid='stSidebar'] input[type='range'][aria-label^='ε (privacy parameter']")
    thumb.focus()
    for _ in range(10):
        thumb.press("ArrowRight")
    page.wait_for_function(
        "(b) => { const d = document.querySelector('.js-plotly-plot'); return d && d._fullData && "
        "d._fullData[0].y[3] !== b; }", arg=before[3], timeout=60_000)
    _settle(page)
    after = _plotly_y(page)
    assert after[3] > before[3]                              # larger ε: the attacker does better
    assert _metric(page, "Success with k = 3") != before_metric
    assert float(thumb.input_value()) > 0.66    # ArrowRight steps of 0.01 (a press during a rerun may be lost)


def test_pydeck_map_canvas_is_drawn(streamlit_url, page):
    from PIL import Image

    _open(page, f"{streamlit_url}/OD_release", "OD release")
    deck = page.locator("[data-testid='stDeckGlJsonChart']").first
    canvas = deck.locator("canvas").first
    canvas.wait_for(timeout=60_000)
    box = canvas.bounding_box()
    assert box is not None
    assert box["width"] > 300
    assert box["height"] > 300
    page.wait_for_timeout(800)
    img = Image.open(io.BytesIO(deck.screenshot())).convert("L")
    lo, hi = img.getextrema()
    assert hi - lo > 50, "the map area is blank"
    colours = sum(1 for n in img.histogram() if n)
    assert colours > 20, f"only {colours} grey levels: nothing drawn on the map"


def test_unreadable_upload_shows_error_and_keeps_data(streamlit_url, page, tmp_path):
    _open(page, f"{streamlit_url}/Data", "Data")
    users_before = _metric(page, "Users")
    page.locator("[data-testid='stSidebar']").get_by_text("Upload a file").click()
    _settle(page)
    bad = tmp_path / "broken.csv"
    bad.write_bytes(b"\x00\x01garbage\xff\xfe")
    page.locator("[data-testid='stSidebar'] input[type='file']").set_input_files(str(bad))
    page.wait_for_timeout(800)
    _settle(page)
    page.locator("[data-testid='stSidebar']").get_by_role("button", name="Load this file").click()
    err = page.locator("[data-testid='stSidebar'] [data-testid='stAlert']").filter(has_text="broken.csv")
    err.first.wait_for(timeout=60_000)
    _settle(page)
    assert "previous data stays loaded" in err.first.inner_text()
    assert page.locator("[data-testid='stException']").count() == 0
    assert _metric(page, "Users") == users_before
