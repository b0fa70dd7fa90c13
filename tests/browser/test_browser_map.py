"""The OD release map in a real headless Chromium on four kinds of data: the bundled city (square cells), an uploaded
Cabspotting week (real GPS traces of San Francisco taxis), H3 hexagons and the bundled districts (a zone file), and
a synthesised city of 100 people, where nothing is published. Each
map is drawn with its offline base layer on (the default: the zones' outlines, water from the bundled coastline, the
image of the data's GPS fixes, sent inline), and nothing is requested from another host.
Screenshots of the map at 1440×900 and 1024×768 go to the screenshot folder as ``2_od_release_map_<data>_<width>.png``
(``make screenshots`` updates docs/screenshots/)."""

from __future__ import annotations

import gzip
import io
import os
import re
import zipfile
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from odcore.paths import SHARED_DATA_DIR
from tests.browser.test_browser import _open, _painted, _run, _settle, _watch_requests
from tests.conftest import screenshot_dir

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.timeout(1200)]

SHOTS = screenshot_dir()
DATA = Path(os.environ.get("ODLAB_SHARED_DATA", SHARED_DATA_DIR))   # the real data (../shared/data by default)
SIZES = ((1440, 900), (1024, 768))
MAP = ".odmap"   # the lab's map element (odapp.components.map)


CAB_WEEK = datetime(2008, 5, 19, tzinfo=ZoneInfo("America/Los_Angeles"))   # a Monday of the Cabspotting weeks


def cabspotting_week_zip(folder, start: datetime = CAB_WEEK, days: int = 7) -> bytes:
    """A zip of the Cabspotting cab files (``new_<cab>.txt``) keeping the fixes of one week (Monday to Monday,
    local time): what a person uploads to look at one week."""
    t0 = int(start.timestamp())
    t1 = t0 + days * 86_400
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        for f in sorted(folder.glob("new_*.txt.gz")):
            keep = [ln for ln in gzip.open(f, "rt") if ln.strip() and t0 <= int(ln.split()[3]) < t1]
            if keep:
                z.writestr(f.name.removesuffix(".gz"), "".join(keep))
    return buf.getvalue()


def _sidebar_choice(page, text: str) -> None:
    choice = page.locator("[data-testid='stSidebar']").get_by_text(text, exact=True).first
    choice.scroll_into_view_if_needed()
    with _run(page, 300):
        choice.click()


def _map_into_view(page) -> None:
    """Scroll so the map's box (heading, map and the legend under it) ends at the bottom of the window."""
    page.locator(MAP).first.locator("canvas").first.wait_for(timeout=120_000)
    page.evaluate("""() => { const legend = [...document.querySelectorAll("[data-testid='stMarkdownContainer']")]
            .find(e => e.innerText.includes("Level:"));
        const d = legend || document.querySelector(".odmap");
        const r = d.getBoundingClientRect();
        const sc = document.querySelector("[data-testid='stMain']") || document.scrollingElement;
        sc.scrollBy(0, r.bottom - window.innerHeight + 16); }""")
    page.mouse.move(2, 2)             # no tooltip in the picture
    _painted(page)                    # the map draws its frame


def _shots(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    for w, h in SIZES:
        page.set_viewport_size({"width": w, "height": h})
        _map_into_view(page)
        path = SHOTS / f"2_od_release_map_{name}_{w}.png"
        page.screenshot(path=str(path))
        assert path.stat().st_size > 20_000
        assert page.locator("[data-testid='stException']").count() == 0
        legend = page.locator("[data-testid='stMarkdownContainer']").filter(has_text="Level:").first
        assert legend.is_visible()


@pytest.mark.parametrize("data", ["city", "h3", "districts", "cabspotting", "nothing"])
def test_release_map_on_four_kinds_of_data(streamlit_url, browser, data, tmp_path):
    if data == "cabspotting" and not (DATA / "cabspotting_sf").is_dir():
        pytest.skip(f"real data not available: {DATA / 'cabspotting_sf'} is absent")
    ctx = browser.new_context(viewport={"width": 1440, "height": 900})
    page = ctx.new_page()
    _watch_requests(page, streamlit_url)
    _open(page, f"{streamlit_url}/OD_release", "OD release")
    if data == "h3":
        _sidebar_choice(page, "H3 hexagons")
    elif data == "districts":
        _sidebar_choice(page, "Zone file (your polygons)")
    elif data == "nothing":     # a synthesised city of 100 people: no pair's noisy count reaches the threshold
        _sidebar_choice(page, "Synthesise a new city")
        side = page.locator("[data-testid='stSidebar']")
        side.get_by_role("spinbutton", name="Users").fill("100")
        with _run(page, 600):
            side.get_by_role("button", name="Generate city").click()
    elif data == "cabspotting":
        z = tmp_path / "cabspotting_week.zip"
        z.write_bytes(cabspotting_week_zip(DATA / "cabspotting_sf"))
        _sidebar_choice(page, "Upload a file")
        with _run(page):    # the file is sent, then the uploader's new value reruns the script
            page.locator("[data-testid='stSidebar'] input[type='file']").first.set_input_files(str(z))
        with _run(page, 600):
            page.locator("[data-testid='stSidebar']").get_by_role("button", name="Load this file").click()
    page.get_by_role("heading", name="OD release", exact=True).first.wait_for(timeout=600_000)
    _settle(page, 600)
    _shots(page, data)
    legend = page.locator("[data-testid='stMarkdownContainer']").filter(has_text="Level:").first.inner_text()
    if data == "nothing":
        assert "Nothing published at these settings" in legend
        assert not re.findall(r"\d–\d", legend), legend      # no count classes of nothing
    else:                       # count classes, none of them empty (a class "0–0" is no class)
        classes = re.findall(r"([\d,]+)–([\d,]+)", legend)
        assert classes, legend
        assert all(int(b.replace(",", "")) > int(a.replace(",", "")) for a, b in classes), classes
    names = page.evaluate("() => (window.odmap.map_0 || {}).drawn")
    assert data == "nothing" or names["place_labels"] > 0, names    # named (or numbered) places
    assert page.outside() == [], f"requests to another host: {page.outside()}"
    ctx.close()
