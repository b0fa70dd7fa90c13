"""The browser benchmark's reference apps (``benchmarks/bench_browser.py``, ``REFERENCE_APPS``): each script runs
and draws what it says on an ε change, and a press on the floor app (a run too short for the page to show it
running) is measured in Chromium."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from benchmarks import bench_browser as bb
from benchmarks import harness
from odcore.paths import REPO_ROOT

pytestmark = pytest.mark.timeout(300)

# what each app draws: element kind -> how many
DRAWS = {"floor": {}, "one chart": {"plotly_chart": 1}, "one map": {"deck_gl_json_chart": 1},
         "a map and a chart": {"plotly_chart": 1, "deck_gl_json_chart": 1}, "three charts": {"plotly_chart": 3}}


def _figures(at, kinds):
    """What the browser receives of the app's figures (plotly specs, deck JSON), in page order per kind."""
    return {kind: [e.proto.spec if kind == "plotly_chart" else e.proto.json for e in at.get(kind)] for kind in kinds}


@pytest.mark.parametrize("name", list(bb.REFERENCE_APPS))
def test_reference_app_draws_a_new_figure_on_each_epsilon(tmp_path, name):
    assert set(DRAWS) == set(bb.REFERENCE_APPS)
    app = tmp_path / "app.py"
    app.write_text(bb.REFERENCE_HEAD.format(root=str(REPO_ROOT)) + bb.REFERENCE_APPS[name][1])
    at = AppTest.from_file(str(app), default_timeout=120).run()
    assert not at.exception, at.exception
    kinds = DRAWS[name]
    before = _figures(at, kinds)
    assert {k: len(v) for k, v in before.items()} == kinds
    at.sidebar.slider[0].set_value(0.67).run()
    assert not at.exception, at.exception
    assert at.markdown[0].value == "ε = 0.67"
    after = _figures(at, kinds)
    for kind in kinds:   # every figure changes with ε: the browser draws each again on every press
        assert all(a != b for a, b in zip(after[kind], before[kind], strict=True)), kind


@pytest.mark.slow   # the harness's reference run: a Streamlit server and Chromium of its own
def test_a_press_on_the_floor_app_is_measured(monkeypatch):
    if harness.chromium_executable() is None:
        pytest.skip("no Chromium on this machine (Debian package 'chromium'; .ci/run installs it)")
    monkeypatch.setattr(bb, "REFERENCE_APPS", {"floor": bb.REFERENCE_APPS["floor"]})

    async def go(log):
        from playwright.async_api import async_playwright

        async with async_playwright() as p:
            br = await p.chromium.launch(executable_path=harness.chromium_executable(), headless=True,
                                         args=harness.CHROMIUM_ARGS)
            try:
                return await bb._reference_rows(br, 1, 3, log)
            finally:
                await br.close()

    with tempfile.TemporaryDirectory() as d:
        rows = harness.run_async(go(Path(d) / "server.log"))
    (row,) = rows
    assert row["case"] == "reference: floor"
    assert 0 < row["value"] < 60_000
    assert "3 presses" in row["note"]


def test_a_canvas_fallback_change_is_not_a_change_of_the_page():
    """The "done" check waits for the painted frame after the page's last DOM change. A dataframe rewrites the
    copy of its cells for screen readers, inside its canvas (fallback content, never painted), ~200 ms after its
    canvas was redrawn; that must not count. A change outside a canvas, and a canvas's own size, do count."""
    if harness.chromium_executable() is None:
        pytest.skip("no Chromium on this machine (Debian package 'chromium'; .ci/run installs it)")

    async def go():
        from playwright.async_api import async_playwright

        async with async_playwright() as p:
            br = await p.chromium.launch(executable_path=harness.chromium_executable(), headless=True,
                                         args=harness.CHROMIUM_ARGS)
            try:
                page = await br.new_page()
                await page.set_content('<div id="d">a</div><canvas id="c" width="10" height="10">'
                                       '<table><tr><td id="cell">1</td></tr></table></canvas>')
                await page.evaluate(bb.INSTRUMENT_JS)
                out = {}
                for what, js in (("cell text", "document.getElementById('cell').textContent = '2'"),
                                 ("cell added", "document.querySelector('#c tr').append(document.createElement('td'))"),
                                 ("div text", "document.getElementById('d').textContent = 'b'"),
                                 ("canvas size", "document.getElementById('c').width = 20")):
                    before = await page.evaluate("() => window.__odb.lastMut")
                    await page.evaluate(f"() => {{ {js}; }}")
                    await page.wait_for_timeout(50)   # the observer's callback has run
                    out[what] = await page.evaluate("() => window.__odb.lastMut") > before
                out["unpainted"] = await page.evaluate("() => window.__odb.unpainted")
                return out
            finally:
                await br.close()

    got = harness.run_async(go())
    assert got == {"cell text": False, "cell added": False, "div text": True, "canvas size": True, "unpainted": 2}
