"""The Trajectory recovery page in headless Chromium: it opens on its map (within the first screen at 1024×768),
the map draws, and nothing is fetched from another host. Screenshot: ``10_trajectory_recovery_1024.png`` in the
screenshot folder (``make screenshots`` updates docs/screenshots/)."""

from __future__ import annotations

from urllib.parse import urlparse

import pytest

from tests.browser.test_browser import LOCAL_SCHEMES, _settle
from tests.conftest import screenshot_dir

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.timeout(900)]
MAP = ".odmap"   # the lab's map element (odapp.components.map)


def test_recovery_page_opens_on_its_map(streamlit_url, page):
    hosts = set()
    # the map element's code arrives as a blob: URL of the page itself (no host), a picture as a data: URL
    page.on("request", lambda r: r.url.startswith(LOCAL_SCHEMES) or hosts.add(urlparse(r.url).hostname))
    page.set_viewport_size({"width": 1024, "height": 768})
    page.goto(f"{streamlit_url}/Trajectory_recovery")
    canvas = page.locator(MAP).first.locator("canvas").first
    canvas.wait_for(timeout=300_000)
    _settle(page, 300)                   # the run is over; the map element has sized its canvas and drawn
    box = page.locator(MAP).first.bounding_box()
    assert box is not None
    assert box["y"] < 768                # the picture starts within the first screen
    assert page.locator("[data-testid='stException']").count() == 0
    shots = screenshot_dir()
    shots.mkdir(parents=True, exist_ok=True)
    path = shots / "10_trajectory_recovery_1024.png"
    page.mouse.move(2, 2)
    page.screenshot(path=str(path))
    assert path.stat().st_size > 20_000
    # below the map: the scores and the accuracy in every hour
    page.evaluate("""() => { const sc = document.querySelector("[data-testid='stMain']") || document.scrollingElement;
        sc.scrollBy(0, 700); }""")
    _settle(page)                        # painted after the scroll
    page.screenshot(path=str(shots / "10_trajectory_recovery_below_1024.png"))
    assert hosts <= {urlparse(streamlit_url).hostname}, hosts
