"""The guided tour in a real headless Chromium: open on a first visit, walked end to end with its "Next" buttons (one
step per page, the controls to touch named), one round of the game played on its step, the worksheet downloaded
from the last step, closed and reopened. Each step's first screen is drawn; ``make screenshots`` keeps it as
``guide_N.png`` in the screenshot folder (``tests.conftest.screenshot_dir``)."""

from __future__ import annotations

import os

import pytest

from odapp.shared.guide import STEPS
from odapp.shared.nav import HOME_FILE
from tests.browser.test_browser import _frames, _run, _settle, _watch_runs
from tests.conftest import SHOTS_ENV, screenshot_dir

pytestmark = [pytest.mark.browser, pytest.mark.timeout(900)]

SHOTS = screenshot_dir()
HEADINGS = {HOME_FILE: "OD Privacy Lab", "pages/1_Data.py": "Data", "pages/2_OD_release.py": "OD release",
            "pages/3_Attack.py": "Attack", "pages/4_Privacy_budget.py": "Privacy budget",
            "pages/7_Play_the_attacker.py": "Play the attacker", "pages/8_See_the_noise.py": "See the noise"}


def _step_panel(page, i: int):
    return page.locator(f".st-key-guide_step_{i}")


def _shot(page, i: int) -> None:
    """The first screen of the page (the step's panel sits at the top of the sidebar, beside the page), 1400 × 1000,
    drawn (a blank screen is a few kB); kept as ``guide_N.png`` under ``make screenshots``."""
    page.mouse.move(5, 5)
    _step_panel(page, i).evaluate("e => e.scrollIntoView({block: 'nearest'})")
    if os.environ.get(SHOTS_ENV):
        _frames(page)     # the scroll is painted
        SHOTS.mkdir(parents=True, exist_ok=True)
    png = page.screenshot(**({"path": str(SHOTS / f"guide_{i}.png")} if os.environ.get(SHOTS_ENV) else {}))
    assert len(png) > 20_000


def test_guided_tour_end_to_end(streamlit_url, page, tmp_path):
    assert STEPS[0].page == HOME_FILE
    _watch_runs(page)
    page.goto(streamlit_url, wait_until="domcontentloaded")
    page.get_by_role("heading", name="OD Privacy Lab", exact=True).first.wait_for(timeout=180_000)
    _settle(page)
    for i, step in enumerate(STEPS, start=1):
        panel = _step_panel(page, i)
        panel.wait_for(timeout=180_000)
        _settle(page)
        text = panel.inner_text()
        assert f"step {i} of {len(STEPS)}" in text
        assert step.title in text
        assert "Touch:" in text
        assert page.get_by_role("heading", name=HEADINGS[step.page], exact=True).first.is_visible()
        assert page.locator("[data-testid='stException']").count() == 0, f"step {i}: exception shown"
        if step.page.endswith("7_Play_the_attacker.py"):     # play one round so the step shows a reveal
            page.get_by_role("button", name="In", exact=True).click()
            page.get_by_text("The optimal attacker said").wait_for(timeout=120_000)
            _settle(page)
        if i < len(STEPS):
            _shot(page, i)
            panel.get_by_role("button", name=f"Next: {STEPS[i].title} →").click(timeout=180_000)
            page.get_by_role("heading", name=HEADINGS[STEPS[i].page], exact=True).first.wait_for(timeout=180_000)
        else:
            _shot(page, i)
            with page.expect_download(timeout=180_000) as dl:
                panel.get_by_role("button", name="Worksheet (HTML, printable)").click()
            out = tmp_path / "worksheet.html"
            dl.value.save_as(out)
            html = out.read_text(encoding="utf-8")
            assert "Answers (computed by the lab" in html
            assert "70.7 %" in html             # exact p_3 at ε = 0.66
            assert "In the game, against the real thresholded release" in html
    panel = _step_panel(page, len(STEPS))
    with _run(page):
        panel.get_by_role("button", name="Close the tour").click()
    assert _step_panel(page, len(STEPS)).count() == 0
    page.locator("[data-testid='stSidebar']").get_by_role("button", name="Guided tour").click()
    _step_panel(page, 1).wait_for(timeout=180_000)
    assert page.get_by_role("heading", name="OD Privacy Lab", exact=True).first.is_visible()
