"""The picture first: on every page with a chart or map, its first one starts within the first screen, at 1024×768
in projector mode and at 1440×900 (a headless Chromium measures the top of the first chart, map or live canvas);
screenshots of each page's first screen at both sizes go to the screenshot folder."""

from __future__ import annotations

import json
import re

import pytest

from tests.browser.test_browser import _run
from tests.browser.test_browser_classroom import goto, open_app, settle
from tests.conftest import screenshot_dir

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.timeout(900)]

SHOTS = screenshot_dir()
# pages whose main picture is drawn on opening (Knock Knock and Audit draw theirs after a button; Home has none)
PICTURE_PAGES = ["Data", "OD_release", "Attack", "Privacy_budget", "Release_designer", "Play_the_attacker",
                 "See_the_noise", "Trajectory_recovery"]
PICTURES = (".odmap, [data-testid=stDeckGlJsonChart], [data-testid=stPlotlyChart], "
            "[data-testid=stVegaLiteChart], .odlive canvas, [data-testid=stImage] img")
MAIN = {"Play_the_attacker": "[data-testid=stDataFrame]"}   # the game's picture: the round's published counts
FIRST_TOP = """(sel) => {
    const els = [...document.querySelectorAll(`[data-testid=stMain] :is(${sel})`)]
        .filter(e => e.getBoundingClientRect().height > 20);
    const main = document.querySelector('[data-testid=stMain]');
    if (main) main.scrollTop = 0;
    return els.length ? Math.min(...els.map(e => e.getBoundingClientRect().top)) : null;
}"""
SIDEBAR_WIDTH = "() => document.querySelector('[data-testid=stSidebar]').getBoundingClientRect().width"
CODE_NAMES = r"\b(odcore|odapp)\.[a-z_]+"


def projector_faults(page) -> list[str]:
    """What projector mode says it hides but a page shows: download buttons, the engine's function names."""
    faults = [f"{n} download button(s)" for n in [page.locator("[data-testid=stMain] [data-testid=stDownloadButton]")
                                                  .count()] if n]
    text = page.locator("[data-testid=stMain]").inner_text()
    faults += [f"code name {m.group(0)!r}" for m in re.finditer(CODE_NAMES, text)]
    return faults


@pytest.mark.parametrize(("width", "height", "projector"), [(1024, 768, True), (1440, 900, False)],
                         ids=["1024-projector", "1440-screen"])
def test_first_picture_within_the_first_screen(streamlit_url, browser, width, height, projector):
    ctx, page = open_app(browser, streamlit_url, width, height, projector=projector)
    tops, faults = {}, {}
    try:
        if projector:   # the sidebar gives the picture the width: under a quarter of the 1,024 px
            assert page.evaluate(SIDEBAR_WIDTH) <= 240
        for name in PICTURE_PAGES:
            goto(page, name)
            sel = MAIN.get(name, PICTURES)
            page.locator(f"[data-testid=stMain] :is({sel})").first.wait_for(timeout=120_000)
            settle(page)
            tops[name] = page.evaluate(FIRST_TOP, sel)
            if projector:
                faults[name] = projector_faults(page)
            SHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SHOTS / f"first_screen_{name}_{width}{'_projector' if projector else ''}.png"))
        for name in ("", "Knock_Knock", "Audit"):   # no picture on opening: their first screens, to look at
            goto(page, name)
            page.screenshot(path=str(SHOTS / f"first_screen_{name or 'Home'}_{width}"
                                              f"{'_projector' if projector else ''}.png"))
            if projector:
                faults[name or "Home"] = projector_faults(page)
    finally:
        ctx.close()
    (SHOTS / f"first_picture_tops_{width}.json").write_text(json.dumps(tops, indent=1), encoding="utf-8")
    late = {k: v for k, v in tops.items() if v is None or v >= height}
    assert not late, f"first picture below the first screen at {width}×{height}: {late} (all: {tops})"
    shown = {k: v for k, v in faults.items() if v}
    assert not shown, f"projector mode shows what it says it hides: {shown}"


def test_guarantee_card_greys_while_the_live_slider_is_dragged(streamlit_url, browser):
    """The card shows the released ε: while the live slider is held and moved it is greyed and says it updates on
    release; after the release (one rerun) it is drawn at the new ε, not greyed."""
    ctx, page = open_app(browser, streamlit_url, 1440, 900, projector=False)
    try:
        goto(page, "Attack")
        card = page.locator(".st-key-odlab_card").first
        before = card.inner_text()
        opacity = "e => getComputedStyle(e).opacity"
        assert float(card.evaluate(opacity)) == 1.0
        box = page.locator(".odlive-range").first.bounding_box()
        y = box["y"] + box["height"] / 2
        page.mouse.move(box["x"] + box["width"] * 0.1, y)
        page.mouse.down()
        page.mouse.move(box["x"] + box["width"] * 0.5, y, steps=8)
        # the card greys as the slider moves (a CSS transition on the opacity): at most 0.6 within 10 s
        page.wait_for_function("e => getComputedStyle(e).opacity < 0.6", arg=card.element_handle(),
                               timeout=10_000, polling="raf")
        assert float(card.evaluate(opacity)) < 0.6   # greyed while held
        assert "updates when the slider is released" in card.evaluate(
            "e => getComputedStyle(e.querySelector('summary'), '::after').content")
        with _run(page, 180):
            page.mouse.up()
        assert float(card.evaluate(opacity)) == 1.0   # redrawn at the released value
        assert card.inner_text() != before
    finally:
        ctx.close()
