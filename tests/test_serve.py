"""``python -m odapp.serve``: several server processes behind one address. Each client address is pinned to one
server (its session, reruns and files stay there), new addresses spread over the servers, the relay listens on
127.0.0.1 by default, and the dashboard works through it in a real browser."""

from __future__ import annotations

import asyncio
import textwrap
import threading

import pytest

from benchmarks.protocol_client import ProtocolClient
from odapp import live, serve

pytestmark = pytest.mark.timeout(300)

# Says which server process ran it.
APP = textwrap.dedent("""
    import os
    import streamlit as st

    eps = st.sidebar.slider("ε", 0.05, 5.0, 0.66, 0.01)
    st.metric("Server", str(os.getpid()))
    st.metric("ε seen", f"{eps:.2f}")
""")


class _Running:
    """``odapp.serve.serve`` in a thread of its own (its own event loop) until :meth:`stop`."""

    def __init__(self, app_dir, workers: int, address: str = "127.0.0.1"):
        self.port = live.free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.ready = threading.Event()
        self.loop = asyncio.new_event_loop()

        def on_ready(relay, procs):
            self.relay, self.procs = relay, procs
            self.ready.set()

        self.task = None
        self.error: BaseException | None = None

        def run():
            asyncio.set_event_loop(self.loop)
            self.task = self.loop.create_task(serve.serve(workers, address, self.port, app_dir, on_ready=on_ready))
            try:
                self.loop.run_until_complete(self.task)
            except asyncio.CancelledError:
                pass
            except BaseException as e:   # reported to the test
                self.error = e
                self.ready.set()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        assert self.ready.wait(180), "the servers did not answer"
        assert self.error is None, self.error

    def stop(self):
        self.loop.call_soon_threadsafe(self.task.cancel)
        self.thread.join(60)


def _metric(run, label: str) -> str:
    return run.find("metric", label, sidebar=False).metric.body


def test_each_address_keeps_one_server_and_new_addresses_spread(tmp_path):
    (tmp_path / "app.py").write_text(APP)
    running = _Running(tmp_path, 2)
    try:
        pids = {str(p.pid) for p in running.procs}
        assert len(pids) == 2

        async def session(source):
            async with ProtocolClient(running.url, source=source) as c:     # the page's files too
                opened = await c.open("")
                assert not opened.errors, opened.errors
                pressed = await c.step_slider("ε")
                assert not pressed.errors, pressed.errors
                assert _metric(pressed, "ε seen") == "0.67"            # the press reached that session's server
                return _metric(opened, "Server"), _metric(pressed, "Server")

        async def go():
            a = await session("127.0.0.2")
            b = await session("127.0.0.3")
            a2 = await session("127.0.0.2")                             # a new connection from the first address
            return a, b, a2

        a, b, a2 = live.run_async(go())
        assert a[0] == a[1]                           # a session's page, files and press: one server
        assert b[0] == b[1]
        assert {a[0], b[0]} == pids                   # two addresses, two servers
        assert a2 == a                                # the same address comes back to its server
        assert running.relay.pinned == {"127.0.0.2": 0, "127.0.0.3": 1}
    finally:
        running.stop()
    assert all(p.poll() is not None for p in running.procs), "the servers were not stopped"


def test_the_relay_listens_on_this_machine_only_by_default():
    args = serve._parser().parse_args([])
    assert args.address == "127.0.0.1"
    assert args.workers >= 1


def test_the_dashboard_through_the_relay_in_a_browser(browser, tmp_path):
    """The real app behind the relay (two servers): the OD release page opens, ε moves, and the map is drawn."""
    from odcore.paths import REPO_ROOT

    running = _Running(REPO_ROOT, 2)
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = ctx.new_page()
    try:
        page.goto(f"{running.url}/OD_release", wait_until="domcontentloaded")
        page.get_by_role("heading", name="OD release").first.wait_for(timeout=120_000)
        noise = page.locator("[data-testid='stMetric']").filter(has_text="Noise scale").first
        noise.wait_for(timeout=120_000)
        before = noise.locator("[data-testid='stMetricValue']").inner_text()
        page.locator("[data-testid='stDeckGlJsonChart'] canvas").first.wait_for(timeout=120_000)
        thumb = page.locator("[data-testid='stSidebar'] input[type='range'][aria-label^='ε (privacy parameter']")
        thumb.focus()
        thumb.press("ArrowRight")
        page.wait_for_function(
            "(b) => [...document.querySelectorAll('[data-testid=stMetric]')].some(m => m.innerText.includes("
            "'Noise scale') && !m.innerText.includes(b))", arg=before, timeout=120_000)
        assert page.locator("[data-testid='stException']").count() == 0
        assert list(running.relay.pinned) == ["127.0.0.1"]
    finally:
        ctx.close()
        running.stop()
