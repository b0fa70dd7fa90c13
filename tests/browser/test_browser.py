"""The dashboard in a real headless Chromium: every page draws, nothing is requested from another host, the pydeck
map canvas is drawn and its tooltips are plain text, the base map fails softly offline (the live curves and their ε
slider: test_browser_live), an unreadable upload shows an error; every page's first screen at 1440×900 is drawn
(checked on its screenshot, kept in memory). ``make screenshots`` writes the first screens at 1440×900 and 1024×768 and
the whole pages to the screenshot folder (``tests.conftest.screenshot_dir``: docs/screenshots/)."""

from __future__ import annotations

import io
import os
from contextlib import contextmanager

import pytest

from odcore.report import figures
from tests.conftest import SHOTS_ENV, screenshot_dir

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]

SHOTS = screenshot_dir()
MAP = ".odmap"                                   # the lab's map element (odapp.components.map)
DECK = "[data-testid='stDeckGlJsonChart']"       # a pydeck map: the online base map on
MAPS = f"{MAP}, {DECK}"
PAGES = [  # (url path, heading, screenshot name)
    ("", "OD Privacy Lab", "0_home.png"),
    ("Data", "Data", "1_data.png"),
    ("OD_release", "OD release", "2_od_release.png"),
    ("Attack", "Attack", "3_attack.png"),
    ("Privacy_budget", "Privacy budget", "4_privacy_budget.png"),
    ("Knock_Knock", "Knock Knock", "5_knock_knock.png"),
    ("Release_designer", "Release designer", "6_release_designer.png"),
]


SIZES = {"1440": (1440, 900), "1024": (1024, 768)}
LOCAL_SCHEMES = ("data:", "blob:", "about:")


def _watch_requests(page, base: str) -> list[str]:
    """Record every request the page makes; requests to another host are recorded and then aborted (this machine
    has no internet: an outside request would hang or fail anyway)."""
    seen: list[str] = []

    def outside(url: str) -> bool:
        return not (url.startswith(base) or url.startswith(LOCAL_SCHEMES))

    page.on("request", lambda r: seen.append(r.url))
    page.route(lambda url: outside(url), lambda route: route.abort())
    page.outside = lambda: [u for u in seen if outside(u)]
    return seen


# The end of a script run, as the server says it: a ForwardMsg whose ``script_finished`` (field 6, a varint) is set,
# other than FINISHED_EARLY_FOR_RERUN (2: another run follows). The page counts them on its WebSocket (wrapped before
# the app's code loads), so "a run ended since the action" holds however soon after the action the run starts and
# however fast it is. (The ``data-test-script-state`` attribute of ``stApp`` can miss a short run: React renders the
# run's start and end in one go, and the attribute never says "running".)
RUNS_JS = """(() => {
  if (window.__odRuns) return;
  const runs = window.__odRuns = { ended: 0, socket: false };
  const finished = (b) => {   // the top-level field 6 of a protobuf message, or -1
    let i = 0;
    const varint = () => { let v = 0, k = 1, x; do { x = b[i++]; v += (x & 0x7f) * k; k *= 128; } while (x & 0x80); return v; };
    while (i < b.length) {
      const tag = varint(), field = Math.floor(tag / 8), wire = tag & 7;
      if (field === 6 && wire === 0) return varint();
      if (wire === 0) varint(); else if (wire === 2) i += varint(); else if (wire === 1) i += 8;
      else if (wire === 5) i += 4; else return -1;
    }
    return -1;
  };
  const count = (buf) => { const f = finished(new Uint8Array(buf)); if (f >= 0 && f !== 2) runs.ended += 1; };
  const Native = window.WebSocket;
  window.WebSocket = class extends Native {
    constructor(...args) {
      super(...args);
      runs.socket = true;
      this.addEventListener("message", (ev) => {
        if (ev.data instanceof ArrayBuffer) count(ev.data);
        else if (ev.data instanceof Blob) ev.data.arrayBuffer().then(count);
      });
    }
  };
})()"""
IDLE_JS = """(since) => {
  const a = document.querySelector("[data-testid=stApp]");
  return !!a && !!window.__odRuns && window.__odRuns.ended > since
    && !["initial", "running", "rerunRequested", "stopRequested"].includes(a.getAttribute("data-test-script-state"));
}"""
# Every chart on the screen has its drawing: a plotly chart its SVG, a Vega chart its canvas or SVG, a pydeck map
# its canvas, the lab's map element its first draw and no draw pending (odapp/components/map/map.js marks its root
# with ``data-draws`` and ``data-pending``). Charts of zero size (a closed expander, another tab) draw nothing.
PAINTED_JS = """() => [...document.querySelectorAll(
    "[data-testid=stPlotlyChart], [data-testid=stVegaLiteChart], [data-testid=stDeckGlJsonChart], .odmap")]
  .filter((e) => e.getBoundingClientRect().width > 0 && e.getBoundingClientRect().height > 0)
  .every((e) => e.classList.contains("odmap") ? e.hasAttribute("data-draws") && !e.hasAttribute("data-pending")
    : e.querySelector(e.matches("[data-testid=stPlotlyChart]") ? ".main-svg" : "canvas, svg") !== null)"""


def _watch_runs(page) -> int:
    """Count the ended script runs of every document the page opens from now on (call it before ``goto``); returns
    the count so far in this one."""
    if not getattr(page, "_od_runs", False):
        page.add_init_script(RUNS_JS)
        page._od_runs = True
    page.evaluate(RUNS_JS)
    return page.evaluate("() => window.__odRuns.ended")


@contextmanager
def _run(page, timeout_s: float = 120):
    """The ``with`` block's action (a click, a choice, an upload) asks for a script run: on leaving, wait until a run
    has ended since the block began and none is running, and until what it drew is painted (:func:`_painted`)."""
    since = _watch_runs(page)
    assert page.evaluate("() => window.__odRuns.socket"), "runs are counted on pages opened after _watch_runs"
    yield
    _settle(page, timeout_s, since=since)


def _settle(page, timeout_s: float = 120, since: int = -1) -> None:
    """Wait until no script run is on and more than ``since`` runs have ended (the count of :func:`_watch_runs`
    taken before the action; -1: whatever has ended), then until what the run drew is painted. Without ``since``,
    call it when the run's end is all that is left to wait for: after the element the run makes has shown, or after
    a page load (the first run)."""
    _watch_runs(page)
    page.wait_for_function(IDLE_JS, arg=since, timeout=timeout_s * 1000)
    _painted(page)


def _painted(page, timeout_s: float = 60) -> None:
    """Wait until the page's fonts are loaded, every chart on the screen has its drawing (``PAINTED_JS``) and two
    animation frames have passed: what was laid out has been painted."""
    _frames(page)    # a resize or a new element reaches its observers within a frame and asks for a draw
    page.evaluate("() => document.fonts.ready.then(() => true)")
    page.wait_for_function(PAINTED_JS, timeout=timeout_s * 1000, polling="raf")
    _frames(page)


def _open(page, url: str, heading: str) -> None:
    _watch_runs(page)
    page.goto(url, wait_until="domcontentloaded")
    page.get_by_role("heading", name=heading, exact=True).first.wait_for(timeout=120_000)
    _settle(page)
    assert page.locator("[data-testid='stException']").count() == 0, f"{url}: exception shown"


def _frames(page, n: int = 2) -> None:
    """Wait for ``n`` animation frames: what was laid out has been painted."""
    page.evaluate("n => new Promise(r => { const f = k => k ? requestAnimationFrame(() => f(k - 1)) : r(); f(n); })",
                  n)


def _screenshot(page, name: str, size: str = "1440") -> bytes:
    """Screenshot of the first screen at a viewport of 1440×900 or 1024×768 (PNG bytes). When the committed pictures
    are updated (``$ODLAB_SHOTS`` set, ``make screenshots``) it is written as ``NAME_screen_1440.png`` /
    ``NAME_screen_1024.png``, and the full page as ``NAME.png`` / ``NAME_1024.png``. A test run writes none: it checks
    the first screen at 1440×900 in memory; the other pictures would only be thrown away."""
    keep = os.environ.get(SHOTS_ENV)
    w, vh = SIZES[size]
    suffix = "" if size == "1440" else "_1024"
    page.mouse.move(5, 5)          # no hover tooltip in the picture
    if page.viewport_size != {"width": w, "height": vh}:
        page.set_viewport_size({"width": w, "height": vh})
    _maps_drawn(page)
    if not keep:
        return page.screenshot()
    SHOTS.mkdir(parents=True, exist_ok=True)
    png = page.screenshot(path=str(SHOTS / f"{name}_screen{suffix or '_1440'}.png"))
    h = page.evaluate("""() => Math.max(...['stMain', 'stMainBlockContainer', 'stAppViewContainer']
        .map(id => document.querySelector(`[data-testid="${id}"]`)).filter(Boolean)
        .map(e => e.scrollHeight + e.getBoundingClientRect().top), document.body.scrollHeight)""")
    page.set_viewport_size({"width": w, "height": int(min(max(h + 40, vh), 7000))})
    _maps_drawn(page)
    page.screenshot(path=str(SHOTS / f"{name}{suffix}.png"), full_page=True)
    page.set_viewport_size({"width": w, "height": vh})
    return png


def _maps_drawn(page) -> None:
    """Every map has its canvas and has painted since the last resize (the lab's map element marks its draws and a
    draw to come, :data:`PAINTED_JS`; a pydeck map with the online base map draws a few frames after its canvas)."""
    decks = page.locator(MAPS).all()
    for deck in decks:
        deck.locator("canvas").first.wait_for(timeout=60_000)
    _painted(page)
    if page.locator(DECK).count():
        _frames(page, 4)


def _metric(page, label: str) -> str:
    m = page.locator("[data-testid='stMetric']").filter(has_text=label).first
    return m.locator("[data-testid='stMetricValue']").inner_text()


def test_every_page_and_screenshots(streamlit_url, browser):
    ctx = browser.new_context(viewport={"width": 1440, "height": 900})   # the first screen's size: no relayout
    try:
        _every_page(ctx.new_page(), streamlit_url)
    finally:
        ctx.close()


def _every_page(page, streamlit_url: str) -> None:
    _watch_requests(page, streamlit_url)
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
            if not os.environ.get(SHOTS_ENV):   # a test run: one target shows the results as well as three
                page.get_by_role("spinbutton", name="Targets").fill("1")
            page.get_by_role("button", name="Run the experiment").click()
            page.get_by_text("Mean AUC, best classifier").wait_for(timeout=180_000)
            _settle(page, 180)
            assert page.locator("[data-testid='stException']").count() == 0
        stem = shot.removesuffix(".png")
        first = _screenshot(page, stem, "1440")
        assert len(first) > 20_000, f"{stem}_screen_1440.png"   # a blank first screen is a few kB
        if os.environ.get(SHOTS_ENV):
            _screenshot(page, stem, "1024")
            page.set_viewport_size({"width": 1440, "height": 900})
            assert (SHOTS / shot).stat().st_size > 20_000, shot
        assert page.outside() == [], f"{path or 'home'}: requests to another host: {page.outside()}"


def test_map_canvas_is_drawn(streamlit_url, page):
    from PIL import Image

    _open(page, f"{streamlit_url}/OD_release", "OD release")
    deck = page.locator(MAP).first
    canvas = deck.locator("canvas").first
    canvas.wait_for(timeout=60_000)
    # a new canvas is 300×150 until the element sizes it to the map, which can come a frame after it appears
    page.wait_for_function("""() => { const c = document.querySelector(".odmap canvas");
        const r = c && c.getBoundingClientRect(); return r && r.width > 300 && r.height > 300; }""", timeout=60_000)
    box = canvas.bounding_box()
    assert box is not None
    assert box["width"] > 300
    assert box["height"] > 300
    _painted(page)                          # drawn at that size
    img = Image.open(io.BytesIO(deck.screenshot())).convert("L")
    lo, hi = img.getextrema()
    assert hi - lo > 50, "the map area is blank"
    colours = sum(1 for n in img.histogram() if n)
    assert colours > 20, f"only {colours} grey levels: nothing drawn on the map"


def test_command_line_box_shows_the_command_when_opened(streamlit_url, page):
    """The "Reproduce from the command line" box is made when opened (odapp.shared.export.opened_expander): closed, the page
    has no code block; a click opens it and shows the command."""
    _open(page, f"{streamlit_url}/OD_release", "OD release")
    assert page.locator("[data-testid='stCode']").count() == 0
    page.locator("[data-testid='stExpander'] summary").filter(has_text="Reproduce from the command line").click()
    code = page.locator("[data-testid='stCode']").first
    code.wait_for(timeout=60_000)
    assert code.inner_text().strip().startswith("python -m odcore release")


def test_map_image_box_shows_its_controls_when_opened(streamlit_url, page):
    """The map's image export is made when opened (inside the map's fragment): closed, its controls are not on the
    page; a click opens it and shows them."""
    _open(page, f"{streamlit_url}/OD_release", "OD release")
    width = page.locator("input[aria-label='Width (in)']")
    assert width.count() == 0
    page.locator("[data-testid='stExpander'] summary").filter(has_text="Download this map as an image").click()
    width.first.wait_for(timeout=60_000)
    assert width.first.input_value() == "8.00"
    assert page.get_by_role("button", name="Make the PNG").count() == 1


def test_unreadable_upload_shows_error_and_keeps_data(streamlit_url, page, tmp_path):
    _open(page, f"{streamlit_url}/Data", "Data")
    users_before = _metric(page, "People in the data")
    with _run(page):
        page.locator("[data-testid='stSidebar']").get_by_text("Upload a file").click()
    bad = tmp_path / "broken.csv"
    bad.write_bytes(b"\x00\x01garbage\xff\xfe")
    with _run(page):    # the file is sent, then the uploader's new value reruns the script
        page.locator("[data-testid='stSidebar'] input[type='file']").set_input_files(str(bad))
    page.locator("[data-testid='stSidebar']").get_by_role("button", name="Load this file").click()
    err = page.locator("[data-testid='stSidebar'] [data-testid='stAlert']").filter(has_text="broken.csv")
    err.first.wait_for(timeout=60_000)
    _settle(page)
    assert "previous data stays loaded" in err.first.inner_text()
    assert page.locator("[data-testid='stException']").count() == 0
    assert _metric(page, "People in the data") == users_before


def _hover_until(page, deck, needle: str, step: int = 14):
    """Move the pointer over the map on a grid until its tooltip (the lab's map element's, or deck.gl's with the
    online base map) shows ``needle``; return it or None."""
    deck.scroll_into_view_if_needed()
    _painted(page)
    box = deck.locator("canvas").first.bounding_box()
    tip = deck.locator(".odmap-tip, .deck-tooltip")
    for fy in [0.5 + d for d in (0, 0.05, -0.05, 0.1, -0.1, 0.15, -0.15, 0.2, -0.2, 0.25, -0.25)]:
        for i in range(step):
            fx = 0.2 + 0.6 * i / (step - 1)
            page.mouse.move(box["x"] + fx * box["width"], box["y"] + fy * box["height"])
            _frames(page)     # the lab's map shows its tooltip on the move; deck.gl picks on the next frame
            if tip.count() and tip.first.is_visible() and needle in tip.first.inner_text():
                return tip.first
    return None


def test_map_tooltips_are_plain_text_and_nothing_leaves(streamlit_url, browser):
    ctx = browser.new_context(viewport={"width": 1024, "height": 768})
    page = ctx.new_page()
    _watch_requests(page, streamlit_url)
    _open(page, f"{streamlit_url}/OD_release", "OD release")
    deck = page.locator(MAP).first
    deck.locator("canvas").first.wait_for(timeout=60_000)
    assert deck.bounding_box()["y"] < 768, "the map starts below the first screen at 1024×768"
    _painted(page)
    found = {}
    for needle in ("→", figures.ZONE_WORDS):        # an arc, a zone of a published pair
        tip = _hover_until(page, deck, needle)
        assert tip is not None, f"no tooltip with {needle!r} found over the map"
        text, html = tip.inner_text(), tip.inner_html()
        assert "<" not in text, f"markup in the tooltip: {text!r}"
        assert "&lt;" not in html, f"escaped markup in the tooltip: {html!r}"
        found[needle] = text
        tb, mb = tip.bounding_box(), deck.bounding_box()
        assert tb["x"] >= mb["x"] - 1, "tooltip cut on the left"
        assert tb["x"] + tb["width"] <= mb["x"] + mb["width"] + 1, "tooltip cut on the right"
    assert "true count" in found["→"]
    assert "noisy count" in found["→"]
    assert "release probability" in found["→"]
    assert "° N" in found["→"]
    assert "centre" in found[figures.ZONE_WORDS]
    assert page.outside() == [], f"requests to another host: {page.outside()}"
    # the base map on: the browser asks CARTO for the style; offline (aborted here) the flows are still drawn
    with page.expect_request(lambda r: "cartocdn" in r.url, timeout=120_000), _run(page):
        page.get_by_text("Base map", exact=True).click()
    assert any("cartocdn" in u for u in page.outside()), "the base map toggle did not request a style"
    assert page.locator("[data-testid='stException']").count() == 0
    assert page.get_by_text("CARTO Positron").first.is_visible()
    deck = page.locator(DECK).first      # the online base map: deck.gl's map
    assert _hover_until(page, deck, "→") is not None, "with the base map failing, the arcs are not drawn"
    ctx.close()


def test_release_designer_meets_an_attack_goal(streamlit_url, page):
    _open(page, f"{streamlit_url}/Release_designer", "Release designer")
    page.get_by_text("Goal met").first.wait_for(timeout=300_000)       # the default goal: ε per person-week <= 1
    page.get_by_text("an attacker who knows k trips is right at most p of the time").click()
    page.get_by_role("button", name="Design the release").click()
    page.get_by_text("an attacker who knows 32 of a person's trips").first.wait_for(timeout=300_000)
    _settle(page, 300)
    assert page.locator("[data-testid='stException']").count() == 0
    assert page.get_by_text("Goal met").count() >= 1
    assert _metric(page, "Max pairs per person and week") == "10"
    typical = float(_metric(page, "Attack on a typical person").rstrip(" %"))
    assert 50.0 < typical <= 60.0                                         # p = 0.6


def test_names_from_the_data_show_as_text_and_fetch_nothing(streamlit_url, page):
    """An upload whose name is Markdown for an image, unreadable and then good (user ids that are formulas): the
    error message and the sidebar's data caption show the name's characters, and the browser never asks for the
    image."""
    seen: list[str] = []
    page.on("request", lambda r: seen.append(r.url))   # recorded only: 127.0.0.2:9 refuses anyway
    name = "![b](http://127.0.0.2:9/beacon.png) :red[x] $y$ www.ex.org.csv"
    good = b"user,time,lat,lon\n" + b"".join(
        f"{u},2024-01-0{1 + d}T0{h}:00:00Z,37.7{h},-122.4{d}\n".encode()
        for u in ("=1+1", "@SUM(1)", "+x") for d in range(3) for h in range(6))
    side = page.locator("[data-testid='stSidebar']")
    for body in (b"\x00\x01garbage\xff\xfe", good):
        _open(page, f"{streamlit_url}/Data", "Data")
        with _run(page):
            side.get_by_text("Upload a file").click()
        with _run(page):    # the file is sent, then the uploader's new value reruns the script
            side.locator("input[type='file']").set_input_files({"name": name, "mimeType": "text/csv",
                                                                "buffer": body})
        with _run(page):
            side.get_by_role("button", name="Load this file").click()
        if body is not good:
            err = side.locator("[data-testid='stAlert']").filter(has_text="beacon.png")
            err.first.wait_for(timeout=60_000)
            assert name in err.first.inner_text().replace("\u200b", "")
    shown = side.locator("[data-testid='stCaptionContainer']").filter(has_text="Upload:")
    shown.first.wait_for(timeout=60_000)
    assert shown.first.inner_text().replace("\u200b", "") == f"Data: Upload: {name}"
    assert page.locator("img[src*='127.0.0.2']").count() == 0
    for sel in ("a[href*='127.0.0.2']", "a[href*='ex.org']", "[data-testid='stSidebar'] .katex",
                "[data-testid='stSidebar'] span[style*='color']"):
        assert page.locator(sel).count() == 0, sel
    assert not [u for u in seen if "127.0.0.2" in u], seen
