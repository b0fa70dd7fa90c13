"""Shared fixtures: real data under ../shared/data (skipped when absent) and a live Streamlit server."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from odcore.paths import REPO_ROOT, SHARED_DATA_DIR

CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--no-first-run", "--disable-sync", "--disable-quic", "--disable-dev-shm-usage",
]


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data``; skips the test when it is not there."""
    if not SHARED_DATA_DIR.is_dir():
        pytest.skip(f"real data not available: {SHARED_DATA_DIR} is absent")
    return SHARED_DATA_DIR


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def streamlit_url():
    """Start ``streamlit run app.py`` on a free local port for the whole session; yield its URL."""
    port = _free_port()
    env = dict(os.environ, STREAMLIT_BROWSER_GATHER_USAGE_STATS="false")
    log = open(REPO_ROOT / ".pytest_cache_streamlit.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(REPO_ROOT / "app.py"), "--server.headless=true",
         f"--server.port={port}", "--server.address=127.0.0.1", "--server.fileWatcherType=none"],
        cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    break
        except OSError:
            time.sleep(0.3)
        if proc.poll() is not None:
            break
    else:
        proc.kill()
        pytest.fail("streamlit did not become healthy within 60 s")
    if proc.poll() is not None:
        pytest.fail(f"streamlit exited with code {proc.returncode}; see .pytest_cache_streamlit.log")
    yield url
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


@pytest.fixture(scope="session")
def browser():
    """A headless Debian Chromium driven by Playwright (never Playwright's own browser download)."""
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("no Chromium on this machine (Debian package 'chromium'; .ci/run installs it)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright's Python package is not installed")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = ctx.new_page()
    yield pg
    ctx.close()
