"""Headless Chromium: a hostile upload (every user id markup pointing at 127.0.0.2) played on the attacker game page
makes the browser request nothing from another host and draws no image or link from the data."""

from __future__ import annotations

import pytest

from tests.browser.test_browser import _open, _run, _settle
from tests.conftest import keep_screenshot
from tests.hostile import names

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]


def test_game_page_on_a_hostile_upload_requests_nothing_outside(streamlit_url, page):
    seen: list[str] = []
    page.on("request", lambda r: seen.append(r.url))        # 127.0.0.2:9 refuses: a request would only be seen
    body = names.traces_csv().replace(names.USER_COLUMN.encode(), b"user", 1)   # ids hostile, columns detected
    side = page.locator("[data-testid='stSidebar']")
    _open(page, f"{streamlit_url}/Data", "Data")
    with _run(page):
        side.get_by_text("Upload a file").click()
    with _run(page):    # the file is sent, then the uploader's new value reruns the script
        side.locator("input[type='file']").set_input_files({"name": names.FILE_NAME, "mimeType": "text/csv",
                                                            "buffer": body})
    side.get_by_role("button", name="Load this file").click()
    side.locator("[data-testid='stCaptionContainer']").filter(has_text="Upload:").first.wait_for(timeout=120_000)
    _settle(page)
    page.locator("[data-testid=stSidebarNav] a").filter(has_text="Play the attacker").first.click()   # same session
    heading = page.get_by_role("heading").filter(has_text="Round 1 ")
    heading.first.wait_for(timeout=120_000)
    _settle(page)
    text = heading.first.inner_text().replace("\u200b", "")
    assert names.HOST in text, text           # the person's id, shown as its characters
    page.get_by_role("button", name="In", exact=True).click()
    page.get_by_role("heading").filter(has_text="Round 2 ").first.wait_for(timeout=120_000)
    _settle(page)
    assert page.locator("[data-testid='stException']").count() == 0
    round2 = page.get_by_role("heading").filter(has_text="Round 2 ").first
    round2.scroll_into_view_if_needed()
    keep_screenshot(page, "hostile_game.png")     # the heading with the person's id
    for sel in (f"img[src*='{names.HOST}']", f"a[href*='{names.HOST}']", "main .katex",
                "main span[style*='color: red']"):
        assert page.locator(sel).count() == 0, sel
    base = streamlit_url.rstrip("/")
    outside = [u for u in seen if not u.startswith((base, "data:", "blob:", "about:"))]
    assert outside == [], outside
