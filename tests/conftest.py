"""Shared fixtures: real data under ../shared/data (skipped when absent) and a live Streamlit server."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from benchmarks import harness
from odapp.data.disk_cache import CACHE_ENV
from odapp.shared import ahead
from odcore.paths import REPO_ROOT, SHARED_DATA_DIR
from odcore.report import figures

# The app keeps the bundled city's tables on disk between launches (odapp.data.disk_cache.disk_cached); the tests use a
# folder of their own (the servers they start and the xdist workers inherit it), not the user's ~/.cache/odlab,
# removed when the run ends (a run fills it with ~200 MB of tables).
if not os.environ.get(CACHE_ENV):
    os.environ[CACHE_ENV] = tempfile.mkdtemp(prefix="odlab-test-cache-")
    atexit.register(shutil.rmtree, os.environ[CACHE_ENV], ignore_errors=True)

# The app computes a person's likely next press in a background thread once a run ends (odapp.shared.ahead.after); in the
# test process that thread would race AppTest's next run, so it is off here (tests/app/test_ahead.py turns it on). The
# servers the browser tests start have it on, as every launch of the app.
ahead.enabled = False

SHOTS_ENV = "ODLAB_SHOTS"


def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile`` (``make test``) hands out the longest test files first (tests/longest_first.py)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from tests.longest_first import LongestFileFirst  # pytest-xdist: only a parallel run gets here

    return LongestFileFirst(config, log)


def screenshot_dir() -> Path:
    """Where the browser tests write their screenshots: ``$ODLAB_SHOTS`` when set (``make screenshots`` sets it to
    docs/screenshots to update the committed ones), else a folder under the system's temporary directory, so a
    test run leaves the working tree clean."""
    d = os.environ.get(SHOTS_ENV)
    return Path(d) if d else Path(tempfile.gettempdir()) / "odlab-screenshots"


def keep_screenshot(target, name: str) -> None:
    """A picture for the docs, taken only under ``make screenshots`` (``$ODLAB_SHOTS`` set): ``target`` (a Playwright
    page or locator) drawn into ``screenshot_dir() / name``. A test run takes none; what a test asserts on a picture
    it takes itself."""
    if os.environ.get(SHOTS_ENV):
        d = screenshot_dir()
        d.mkdir(parents=True, exist_ok=True)
        target.screenshot(path=str(d / name))


@pytest.fixture(autouse=True)
def _keep_main_module():
    """Put back the test process's ``__main__`` after each test. Streamlit's script runner (AppTest) makes each page
    script the ``__main__`` module and leaves the last one there; worker processes started later with ``spawn``
    (``knock --workers``) would then run that script again before their work and die."""
    main = sys.modules.get("__main__")
    yield
    if main is not None and sys.modules.get("__main__") is not main:
        sys.modules["__main__"] = main


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data``; skips the test when it is not there."""
    if not SHARED_DATA_DIR.is_dir():
        pytest.skip(f"real data not available: {SHARED_DATA_DIR} is absent")
    return SHARED_DATA_DIR


@pytest.fixture(scope="session")
def streamlit_url(tmp_path_factory):
    """Start ``streamlit run app.py`` on a free local port, once for the whole session (once per xdist worker), and
    yield its URL: every browser test of the worker uses this one server. Its log goes to the session's temporary
    folder, not into the working tree."""
    log = tmp_path_factory.mktemp("streamlit") / "streamlit.log"
    try:
        with harness.streamlit_server(log) as url:
            yield url
    except RuntimeError as e:
        pytest.fail(f"{e}; see {log}")


@pytest.fixture(scope="module")
def image_server():
    """One kaleido Chromium for every image a test module draws (``odcore.report.figures.image_server``) instead of
    one started and stopped per image; the commands' own ``image_server`` blocks nest inside it and leave it open.
    A module that draws several PNG/SVG/PDF files asks for it with ``pytestmark = pytest.mark.usefixtures(...)``."""
    if figures.find_browser() is None:   # the tests that draw skip themselves
        yield
        return
    with figures.image_server():
        yield


@pytest.fixture(scope="module")
def at():
    """One AppTest session of the dashboard per test module, on the landing page (the caches warm up once); skips
    when the bundled sample is missing. A module that needs another start (test_app_counts) defines its own."""
    from streamlit.testing.v1 import AppTest

    if not (REPO_ROOT / "sample_data" / "synthetic_city.parquet").is_file():
        pytest.skip("bundled sample missing (make sample-data)")
    app = AppTest.from_file(str(REPO_ROOT / "app.py"), default_timeout=300)
    app.run()
    assert not app.exception, [e.message for e in app.exception]
    assert not app.error, [e.value for e in app.error]
    return app


@pytest.fixture(scope="session")
def browser():
    """A headless Debian Chromium driven by Playwright (never Playwright's own browser download), started once for
    the whole session (once per xdist worker); each test opens a context of its own in it."""
    exe = harness.chromium_executable()
    if exe is None:
        pytest.skip("no Chromium on this machine (Debian package 'chromium'; .ci/run installs it; "
                    "ODLAB_BROWSER=none simulates its absence)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright's Python package is not installed")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, headless=True, args=harness.CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = ctx.new_page()
    yield pg
    ctx.close()
