"""The dashboard in a real browser: input-to-paint of every sidebar control on every page, cold start, N sessions.

``python -m benchmarks -k browser`` drives Debian's headless Chromium (``/usr/bin/chromium``, Playwright's Python
package, the flags of ``benchmarks.harness.CHROMIUM_ARGS``) against ``streamlit run app.py`` on 127.0.0.1.

What is timed
-------------
*Input-to-paint* of one control = from the input event (``keydown`` ``event.timeStamp`` of a key press on the
focused control, taken in the page) to the **painted frame**: the first animation frame that begins after both (a)
the rerun the input caused has finished (``stApp``'s ``data-test-script-state`` went ``running`` then
``notRunning``) and (b) the last DOM change of that rerun (a ``MutationObserver`` on the whole document: Streamlit's
elements, plotly's SVG, tables, the stale-element fade; not what is inside a ``<canvas>``, its fallback content,
which is never painted: a dataframe rewrites its cells for screen readers there ~200 ms after redrawing its canvas,
and this benchmark counted that wait until 2026-11-24). The time taken is that of a ``setTimeout(0)`` queued from
the frame's ``requestAnimationFrame`` callback, i.e. after the frame's callbacks, style, layout and paint were
done. deck.gl draws its canvas in its own ``requestAnimationFrame`` callback of the same frame (a canvas draw is not
a DOM change), so a map update is inside the figure. A change counts as the last one when no further DOM change
follows for ``QUIET_MS``; the wait for that quiet period is not part of the figure.

Each control is measured in a fresh browser session on a page of a freshly started server (so no earlier case warmed
the caches the page uses): sliders and number inputs step one step up per key press (ArrowRight / ArrowUp: every
press is a value that page has not seen, as for a person exploring), a select box moves one option down then back
up (ArrowDown/ArrowUp, Enter), a radio to the next option (ArrowDown, wrapping), a toggle flips (Space), so after
the warm-ups these revisit options. ``WARMUP`` presses are dropped,
the next ``REPEAT`` give the median and the worst. The baseline of each page is a rerun in which nothing changed
(the ``r`` shortcut), measured in the same session.

What each press redrew is recorded with it (``redrew``, :func:`redrawn`): the plotly charts whose DOM changed, the
live charts (``odapp/components/live``) whose drawn values or layout changed, and the WebGL canvases (deck.gl maps)
that drew between the input and the painted frame. :func:`reference_for` names the reference app with that content
(below), and ``python -m benchmarks.browser_table`` holds each control to it: a median within 150 ms of that
reference's median in the same run (at least 300 ms), the slowest within twice that. The reference apps' own
presses are recorded the same way, a check of the detector (``tests/benchmarks/test_bench_floor.py``).

Breakdown of each press (medians): *to server* = input -> first WebSocket message of the rerun (the widget message
reaches the server and the run starts); *server* = that message -> the run's end (``notRunning``): script,
serialisation and the transfer of every delta, which the server streams while the script runs and the browser draws
as they arrive; *after the run* = end of the run -> painted frame; *browser main thread busy* = long tasks (>= 50
ms, ``PerformanceObserver('longtask')``) between the input and the painted frame: React, plotly, deck.gl, tables;
*received* = bytes of WebSocket messages from the input to the end of the run. ``python -m benchmarks -k app``
(AppTest, no browser) gives the script time alone.

Cold start = from launching the server process to the landing page's painted frame (the browser is already open),
once with an empty disk cache (a first launch: the bundled city is validated and its OD tables built) and then
``FIRST_OPENS`` times for every page with the tables read back from the disk cache (``odapp.data.disk_cache.disk_cached``, as
on every later launch), each on a freshly started server (median and slowest). The whole run uses a disk cache
folder of its own (:func:`_run_cache`, unless ``ODLAB_CACHE_DIR`` is set), filled when the run opens the app
the first time: a grid or zone press then builds the new grid's tables the first time a page asks for them, in
every run alike, instead of finding them or not in ``~/.cache/odlab`` depending on what ran on the machine before;
*first open* of each page = click on its link in the navigation (same session, right after the landing page was
painted, as soon as the benchmark can click) to its painted
frame (DOM quiet), and on a page with a map also to the *map drawn*: the painted frame after deck.gl's last WebGL
draw call (shaders compiled in software), no draw following for ``QUIET_MS``.

What any press costs: reference apps
------------------------------------
Before the pages, the same measurement runs on five small apps in the same run (``REFERENCE_APPS``, each on a
server of its own with the repo's ``.streamlit/config.toml``): *the floor*, a page with a title, one sidebar ε
slider and one line of text (what Streamlit and this browser take for any press on this machine: the message to
the server, a rerun, the deltas, React and a painted frame); *one chart*, the floor plus the OD release page's
release-probability chart (``odcore.report.figures.release_curve_figure``, styled as in the app), redrawn by plotly on each
press; *one map*, the floor plus a deck.gl map of 1,200 shaded square cells with tooltips and 300 arcs (about the
bundled city's OD release map), whose JSON is re-sent, parsed and drawn on each press; *a map and a chart*, both
on one page (what the OD release page's ε press redraws at the least); *three charts*, three such charts each new on
each press (what the Privacy budget page's ε press redraws at the least). Their rows (``reference:``) give the
median and the ratio to the floor measured in the same run: what a page pays before its own work, what one plotly
chart or one map adds to every press that changes it, and what the content of the slowest presses costs with no
computing at all (none of them waits for a cache or an engine).

The floor beside each page: this machine's speed moves between runs and within one by more than a change to a page
does (the same code measured 24 and then 14 of 72 controls under the targets in two runs back to back). So the floor
app runs on a server of its own for the whole page loop and is pressed again just before and just after each page's
controls (``WARMUP`` + ``REPEAT`` presses each time, a fresh browser session). Row ``PAGE: the floor beside this
page``: the median of both; every control's median row of that page then has it as baseline and its ratio to it
(the ratio to the page's unchanged rerun moves into the note). Ratios of two runs can be compared where their
milliseconds cannot. ``python -m benchmarks.browser_table`` prints both tables for docs/benchmarks.md.

Many users at once: a class
---------------------------
In a class every person has their own laptop: their browser draws their page on their own cores, and the server
only runs the scripts and sends the messages. So the concurrency part measures ``N`` sessions (N = 1, 5, 10, 30;
``--quick``: 1, 5) on one server as **one real headless Chromium session plus N-1 protocol clients**
(``benchmarks/protocol_client.py``). A protocol client is a browser tab without the drawing: it fetches the page's
HTML, scripts and stylesheets, connects to ``/_stcore/stream`` and exchanges the same messages a tab does (a
``rerun_script`` ``BackMsg`` naming the page, then the page's script hash, every widget's state, the hashes of the
elements it has cached; it reads every ``ForwardMsg`` of each run), so the server runs the same reruns and sends the
same payloads as for a browser tab (what it leaves out: the script chunks, fonts and images a browser fetches lazily
after the first ones). Running N Chromiums on the server's 2 cores instead (the ``browsers`` mode below) measured
mostly the browsers: in the last round they used 14-37 times the server's CPU.

All sessions open the OD release page at once, each sets its own seed (1000·N + i, so each session's release is its
own, as for a class exploring independently), then every session presses ε one slider step up at the same moment
(``Barrier``), ``ROUNDS`` times (``--quick``: ``QUICK_ROUNDS``). Reported for each N (rows ``class of N``):

* *browser: median / worst input-to-paint*: the Chromium session's key press on ε to the painted frame, exactly as
  for a single control above (what the person at that laptop sees);
* *clients: median / worst press-to-run-finished*: a protocol client's ``rerun_script`` sent to that run's
  ``script_finished`` received, i.e. every delta of the rerun received (what every other laptop waits for before
  its own browser draws; that drawing is not included: the browser row above has it, for one session);
* *clients: received per press*: WebSocket payload of one press's run, counted as the browser session counts its
  own (beside it in the note; the server sends it uncompressed: Streamlit's ``server.enableWebsocketCompression`` is
  off by default);
* *browser: page open* (navigation to the painted frame) and *clients: median page open* (files, WebSocket and
  the first run finished), with every session opening at once;
* *errors*, by kind: exceptions shown in a page, runs that do not finish within ``ODLAB_BENCH_TIMEOUT_S``, closed
  sockets, pages that never opened;
* *server RSS peak* of the server's process tree (sampled every 0.25 s) and its RSS 5 s after the sessions closed;
* *CPU used*: of the server's process tree and of the benchmark side (Chromium, Playwright's driver and this
  process with the protocol clients; ``benchmarks.harness.tree_cpu_seconds``), from the first page open to the last press;
* *server CPU per press*: the server's CPU from the release of the first press to the end of the last one, divided
  by the number of presses (all sessions): what one press costs the server.

The page's frame loop (for the painted frame) runs only while a measurement waits. The protocol clients still share
the machine with the server (their CPU is reported, a small fraction of a browser's), and so does the one browser:
on 2 cores its figure includes waiting for the server's reruns of everyone else, which is the point.

``ODLAB_BENCH_CLASS=browsers`` measures the previous way instead: N headless Chromium sessions, all on this
machine (rows ``N concurrent browser sessions``: median/worst input-to-paint over all sessions, page open, errors,
server RSS, CPU of the server and of the browsers). There the browsers' drawing competes with the server for the same
cores, so those figures are pessimistic for a class.

Classes coming and going: memory
---------------------------------
Then ``WAVES`` (``--quick``: ``QUICK_WAVES``) waves of protocol clients on one fresh server, one wave after the
other, as a day of classes: each session of a wave opens the OD release page, sets a seed no earlier session used,
presses ε one step up twice (all at once) and closes. Rows ``sessions come and go``: the server's RSS before the
first wave, after each wave, and once the closed sessions have expired (Streamlit keeps a closed session's state for
``server.disconnectedSessionTTL``, 120 s, so that a dropped connection can come back; the wait is that plus 10 s).
Every wave asks for new releases, maps and charts, so what stays is what the caches keep (the app's ``cache`` modules: each
function's ``max_entries``): memory rises while they fill, and while the closed sessions of the last
``server.disconnectedSessionTTL`` seconds are still kept, then levels off. The ``level`` row gives the growth per
wave over the last quarter of the waves against the first quarter.

Environment knobs: ``ODLAB_BENCH_WAVES`` (``WAVESxSESSIONS``, e.g. ``10x10``; empty: no waves),
``ODLAB_BENCH_PAGES`` (comma-separated URL paths, ``home`` for the landing page; ``none``: no
page, no cold start, only the sessions), ``ODLAB_BENCH_CONTROLS`` (comma-separated parts of control labels, e.g.
``ε,Threshold``), ``ODLAB_BENCH_SESSIONS`` (e.g. ``1,5``; empty: no sessions), ``ODLAB_BENCH_CLASS`` (``class``, the
default, or ``browsers``), ``ODLAB_BENCH_TIMEOUT_S`` (how long one wait may take, default 120),
``ODLAB_BENCH_WORKERS`` (the class on ``python -m odserve --workers K``: K server processes behind its relay,
each protocol client connecting from its own loopback address 127.0.0.2, …, as other machines; default 1: one plain
server), ``ODLAB_BENCH_APP_DIR`` (measure another checkout, e.g. a baseline ``git worktree``),
``ODLAB_BENCH_PAUSE_MS`` (how long the person looks at a press's painted frame before the next press of the same
control, default 0: pressed again at once, the hardest case for a press whose computation the server does ahead,
:mod:`odapp.shared.ahead`; each control's note says the pause when there is one). Only the class of 1,
5, 10:
``ODLAB_BENCH_PAGES=none ODLAB_BENCH_SESSIONS=1,5,10 python -m benchmarks --quick -k browser``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchmarks import harness
from odcore.paths import REPO_ROOT

WARMUP, REPEAT, ROUNDS = 2, 7, 3
QUICK_WARMUP, QUICK_REPEAT, QUICK_ROUNDS = 1, 3, 2
QUIET_MS = 400
FIRST_OPENS = 3       # cold starts and first opens of each page, each on a freshly started server
SESSIONS, QUICK_SESSIONS = (1, 5, 10, 30), (1, 5)
WAVES, QUICK_WAVES = (16, 10), (4, 5)   # classes coming and going: waves x sessions per wave
TIMEOUT_MS = int(os.environ.get("ODLAB_BENCH_TIMEOUT_S", 120)) * 1000
PAUSE_MS = int(os.environ.get("ODLAB_BENCH_PAUSE_MS") or 0)   # between two presses of a control (looking at it)
VIEWPORT = {"width": 1400, "height": 1000}

# Installed before any page script: WebSocket message log, input times, script-state changes, DOM changes, frames.
INSTRUMENT_JS = r"""
(() => {
  if (window.__odb) return;
  const B = window.__odb = {inputT: null, lastMut: 0, states: [], msgs: [], paints: []};
  const WS = window.WebSocket;
  window.WebSocket = class extends WS {
    constructor(...a) {
      super(...a);
      this.addEventListener('message', e => {
        const d = e.data;
        B.msgs.push([performance.now(), d.byteLength ?? d.size ?? d.length ?? 0]);
        if (B.msgs.length > 20000) B.msgs.splice(0, 10000);
      });
    }
  };
  for (const t of ['keydown', 'mousedown']) window.addEventListener(t, e => { B.inputT = e.timeStamp; B.wake(); }, true);
  // What is inside a <canvas> is its fallback content, never painted: a dataframe (glide-data-grid) keeps a copy of
  // its cells there for screen readers and rewrites it ~200 ms after its canvas was redrawn. Those changes do not
  // count as the page changing (B.unpainted counts them); a canvas's own attributes (its size) do.
  B.unpainted = 0;
  const painted = r => {
    const el = r.target.nodeType === 1 ? r.target : r.target.parentElement;
    if (!el) return true;
    if (el.tagName === 'CANVAS') return r.type === 'attributes' && r.target === el;
    return el.closest('canvas') === null;
  };
  // What a press redrew, for the reference it is held to: each plotly chart's last change to its DOM, each WebGL
  // canvas's (a deck.gl map's) last draw call, and what the live charts drew when the press began (B.snap): their
  // values and their layout (type sizes, plot box, the curves' pixels), so new type in projector mode counts too.
  B.plotAt = new Map(); B.glAt = new Map(); B.liveBefore = {};
  const liveCharts = () => {
    const out = {};
    for (const [p, r] of Object.entries(window.odlive || {}))
      for (const id of Object.keys(r.layout || {}))
        out[`${p}/${id}`] = JSON.stringify([(r.values || {})[id], (r.x || {})[id], r.layout[id]]);
    return out;
  };
  B.snap = () => { B.liveBefore = liveCharts(); };
  B.redrew = (t0) => {
    const since = m => [...m.entries()].filter(([el, t]) => t >= t0 && el.isConnected).length;
    const now = liveCharts();
    return {plotly: since(B.plotAt), maps: since(B.glAt),
            live: Object.keys(now).filter(k => now[k] !== B.liveBefore[k]).length};
  };
  const obs = new MutationObserver(recs => {
    const t = performance.now();
    let seen = false;
    for (const r of recs) {
      if (r.type === 'attributes' && r.attributeName === 'data-test-script-state') {
        B.states.push([t, r.target.getAttribute('data-test-script-state')]);
        B.wake();   // a rerun no input of ours started (e.g. a fragment's timer) is measured too
      }
      const el = r.target.nodeType === 1 ? r.target : r.target.parentElement;
      const plot = el && el.closest('.js-plotly-plot');
      if (plot) B.plotAt.set(plot, t);
      if (!seen) seen = painted(r);
    }
    if (seen) B.lastMut = t; else B.unpainted++;
  });
  obs.observe(document, {subtree: true, childList: true, attributes: true, characterData: true});
  B.long = [];
  new PerformanceObserver(l => { for (const e of l.getEntries()) B.long.push([e.startTime, e.duration]); })
    .observe({type: 'longtask', buffered: true});
  // The frame loop runs only while a measurement waits for its painted frame (from the page's load or an input
  // until DONE_JS finds the frame): a loop left running would make an idle page draw 60 frames a second, load
  // that a person's browser does not have (with 30 sessions, most of the machine).
  const loop = () => requestAnimationFrame(() => {
    const f = performance.now();
    setTimeout(() => {
      B.paints.push([f, performance.now()]);
      if (B.paints.length > 4000) B.paints.splice(0, 2000);
      if (B.active) loop(); else B.looping = false;
    }, 0);
  });
  B.wake = () => { B.active = true; if (!B.looping) { B.looping = true; loop(); } };
  B.wake();
  // WebGL draw calls (deck.gl's map): when the map was last drawn
  B.draws = 0; B.lastDraw = 0;
  for (const C of [window.WebGLRenderingContext, window.WebGL2RenderingContext]) {
    if (!C) continue;
    for (const f of ['drawArrays', 'drawElements', 'drawArraysInstanced', 'drawElementsInstanced']) {
      const o = C.prototype[f];
      if (o) C.prototype[f] = function (...a) {
        B.draws++; B.lastDraw = performance.now(); B.glAt.set(this.canvas, B.lastDraw); return o.apply(this, a);
      };
    }
  }
  // the lab's map element (Canvas 2D, odapp/components/map): its fills on the map's canvas
  const fill = CanvasRenderingContext2D.prototype.fill;
  CanvasRenderingContext2D.prototype.fill = function (...a) {
    if (this.canvas.classList && this.canvas.classList.contains('odmap-base')) {
      B.draws++; B.lastDraw = performance.now(); B.glAt.set(this.canvas, B.lastDraw);
    }
    return fill.apply(this, a);
  };
})();
"""

# Done when the rerun after the input finished, the DOM has been quiet for `quiet` ms and a frame painted it.
DONE_JS = r"""
([quiet, since]) => {
  const B = window.__odb;
  const t0 = since ?? B.inputT;
  if (t0 === null) return false;
  const app = document.querySelector('[data-testid=stApp]');
  if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
  const st = B.states.filter(s => s[0] >= t0);
  const iRun = st.findIndex(s => s[1] === 'running' || s[1] === 'rerunRequested');
  const now = performance.now();
  let fin;
  if (iRun >= 0) {
    const fins = st.slice(iRun).filter(s => s[1] === 'notRunning');
    if (!fins.length) return false;
    fin = fins[fins.length - 1][0];
  } else {
    // A run so short that React drew its start and end in one render: the page never showed 'running'. Its
    // messages say it ran; it ended with the last of them (none for `quiet` ms since).
    const ms = B.msgs.filter(m => m[0] >= t0);
    if (st.length || !ms.length || now - ms[ms.length - 1][0] < quiet) return false;
    fin = ms[ms.length - 1][0];
  }
  if (now - B.lastMut < quiet) return false;
  const paint = B.paints.find(p => p[0] >= B.lastMut);
  if (!paint) return false;
  B.active = false;   // found: the frame loop stops after its next frame
  const msgs = B.msgs.filter(m => m[0] >= t0 && m[0] <= fin + 1);
  const running = msgs.length ? msgs[0][0] : st[iRun][0];
  const busy = B.long.filter(e => e[0] + e[1] >= t0 && e[0] <= paint[1])
    .reduce((a, e) => a + Math.min(e[0] + e[1], paint[1]) - Math.max(e[0], t0), 0);
  return {input: t0, running, finished: fin, lastMut: B.lastMut, paint: paint[1], busy,
          bytes: msgs.reduce((a, m) => a + m[1], 0), origin: performance.timeOrigin, redrew: B.redrew(t0),
          exceptions: document.querySelectorAll('[data-testid=stException]').length};
}
"""

# Sidebar controls, found generically: (kind, css of the control's block, css of the element to focus, keys).
CONTROL_KINDS = [
    ("slider", "[data-testid=stSlider]", "[role=slider], input[type=range]", ["ArrowRight"]),
    ("number", "[data-testid=stNumberInput]", "input", ["ArrowUp"]),
    ("select", "[data-testid=stSelectbox]", "input", ["ArrowDown", "Enter"]),
    ("radio", "[data-testid=stRadio]", "input:checked", ["ArrowDown"]),
    ("toggle", "[data-testid=stCheckbox]", "input", ["Space"]),
    # a page's live slider (odapp/components/live): one step per key press, released at once (input + change)
    ("live", ".odlive-control", "input[type=range]", ["ArrowRight"]),
]
SIDEBAR = "[data-testid=stSidebarUserContent]"
SCOPE = {"live": "[data-testid=stMain]"}   # where a kind's controls are (the sidebar for the others)
LABEL = {"live": ".odlive-label"}           # a control's label (Streamlit's widget label for the others)


class Timeout(Exception):
    pass


def _app_dir() -> Path:
    return Path(os.environ.get("ODLAB_BENCH_APP_DIR") or REPO_ROOT).resolve()


async def wait_done(page, since: float | None = None, timeout_ms: float = TIMEOUT_MS) -> dict:
    try:
        h = await page.wait_for_function(DONE_JS, arg=[QUIET_MS, since], timeout=timeout_ms, polling=50)
    except Exception as e:  # playwright's TimeoutError, or the page went away
        try:
            state = await page.evaluate(
                "() => { const B = window.__odb; return {states: B.states.slice(-3), input: B.inputT, "
                "lastMut: B.lastMut, now: performance.now(), app: document.querySelector('[data-testid=stApp]')"
                "?.getAttribute('data-test-script-state')}; }")
        except Exception:  # the page is gone
            state = None
        raise Timeout(f"{str(e).splitlines()[0]} ({state})") from e
    return await h.json_value()


MAP_DRAWN_JS = r"""
(quiet) => {
  const B = window.__odb;
  if (!B.draws || performance.now() - B.lastDraw < quiet) { B.wake(); return false; }
  const p = B.paints.find(p => p[0] >= B.lastDraw);
  if (!p) { B.wake(); return false; }
  B.active = false;
  return p[1] - B.inputT;
}
"""


async def map_drawn(page) -> float | None:
    """Milliseconds from the input to the painted frame after the map's last WebGL draw call (deck.gl's first
    frames, shaders compiled in software), once no draw has followed for ``QUIET_MS``; None if it never draws."""
    try:
        h = await page.wait_for_function(MAP_DRAWN_JS, arg=QUIET_MS, timeout=TIMEOUT_MS, polling=50)
    except Exception:  # playwright's TimeoutError: the map never drew
        return None
    return await h.json_value()


def _split(r: dict) -> dict:
    """Milliseconds of one measured input: total and its parts; bytes received."""
    return {"total": r["paint"] - r["input"], "to_server": r["running"] - r["input"],
            "server": r["finished"] - r["running"], "browser": r["paint"] - r["finished"],
            "busy": r["busy"], "bytes": r["bytes"], "exceptions": r["exceptions"], "redrew": r.get("redrew")}


async def new_page(browser, viewport=VIEWPORT):
    ctx = await browser.new_context(viewport=viewport)
    await ctx.add_init_script(INSTRUMENT_JS)
    return ctx, await ctx.new_page()


async def _goto_drawn(page, url: str) -> dict:
    """Open ``url`` in ``page`` and wait for its painted frame (the page's title and sidebar widgets drawn)."""
    await page.goto(url, wait_until="commit")
    for css in ("[data-testid=stMain] h1", f"{SIDEBAR} [data-testid=stWidgetLabel]"):
        await page.locator(css).first.wait_for(timeout=TIMEOUT_MS)
    return await wait_done(page, 0)


async def _discover_controls(page) -> list[dict]:
    """Every sidebar control of the kinds above and the page's live sliders, in page order: kind, index within its
    kind, label, options."""
    found = []
    for kind, block, _, _ in CONTROL_KINDS:
        loc = page.locator(f"{SCOPE.get(kind, SIDEBAR)} {block}")
        label_css = LABEL.get(kind, "[data-testid=stWidgetLabel]")
        for i in range(await loc.count()):
            el = loc.nth(i)
            if not await el.is_visible():
                continue
            label = (await el.locator(label_css).first.inner_text()).strip() \
                if await el.locator(label_css).count() else f"{kind} {i}"
            n_opt = None
            if kind == "radio":
                n_opt = await el.locator("input[type=radio]").count()
            if kind == "select":
                await el.locator("input").first.click()
                try:
                    await page.locator("[role=option]").first.wait_for(timeout=5000)
                except Exception:  # playwright's TimeoutError: no option at all
                    pass
                n_opt = await page.locator("[role=option]").count() or None   # None: could not count
                await page.keyboard.press("Escape")
                await page.evaluate("() => document.activeElement && document.activeElement.blur()")
            found.append({"kind": kind, "index": i, "label": label.split("\n")[0], "options": n_opt})
    return found


async def _stable_controls(page, tries: int = 6) -> list[dict]:
    """:func:`_discover_controls` until two looks 0.5 s apart find the same controls (on a busy machine the page can
    look drawn while the sidebar is still arriving)."""
    prev = await _discover_controls(page)
    for _ in range(tries):
        await page.wait_for_timeout(500)
        cur = await _discover_controls(page)
        if [c["label"] for c in cur] == [c["label"] for c in prev]:
            return cur
        prev = cur
    return prev


# a rerun started: the page showed it, or (a run too short to show) its first message arrived
STARTED_JS = ("() => window.__odb.inputT !== null && (window.__odb.states.some(s => s[0] >= window.__odb.inputT) "
              "|| window.__odb.msgs.some(m => m[0] >= window.__odb.inputT))")


async def _timed(page, act, tries: int = 3) -> dict:
    """Run ``act`` (an input), wait for its painted frame and split the time. An input that starts no rerun within
    10 s (a key press can be lost while the page is busy) is repeated, at most ``tries`` times."""
    for _ in range(tries):
        await page.evaluate("() => { window.__odb.inputT = null; window.__odb.snap(); }")
        await act()
        try:
            await page.wait_for_function(STARTED_JS, timeout=10_000, polling=50)
        except Exception:  # playwright's TimeoutError: no rerun started, try the input again
            continue
        return _split(await wait_done(page))
    raise Timeout(f"no rerun started after {tries} inputs")


async def press(page, ctl: dict, i: int = 0) -> dict:
    """Focus the control, press its keys (the last key is the input timed), wait for the painted frame. A select
    box goes one option down on even ``i`` and back up on odd ``i`` (its list does not wrap around)."""
    _, block, focus, keys = next(k for k in CONTROL_KINDS if k[0] == ctl["kind"])
    if ctl["kind"] == "select" and i % 2:   # (the first arrow key opens the list on the next or previous option)
        keys = ["ArrowUp", "Enter"]
    blocks = page.locator(f"{SCOPE.get(ctl['kind'], SIDEBAR)} {block}")
    if ctl.get("label"):   # by its label: other controls may appear above it (e.g. the synthetic city's form)
        blocks = blocks.filter(has=page.locator(LABEL.get(ctl["kind"], "[data-testid=stWidgetLabel]"),
                                                has_text=ctl["label"]))
    else:
        blocks = blocks.nth(ctl["index"])
    target = blocks.first.locator(focus).first

    async def act():
        await target.focus(timeout=TIMEOUT_MS)
        for k in keys[:-1]:
            await page.keyboard.press(k)
            await page.wait_for_timeout(60)
        await page.evaluate("() => { window.__odb.inputT = null; window.__odb.snap(); }")
        await page.keyboard.press(keys[-1])

    return await _timed(page, act)


async def _rerun_unchanged(page) -> dict:
    async def act():
        await page.evaluate("() => { document.activeElement && document.activeElement.blur(); "
                            "window.__odb.inputT = null; window.__odb.snap(); }")   # the shortcut works when no widget has the focus
        await page.keyboard.press("r")

    return await _timed(page, act)


def _med(xs):
    return statistics.median(xs) if xs else None


def redrawn(runs: list[dict]) -> dict | None:
    """What the presses redrew: the median number of charts (plotly charts whose drawing changed, live charts whose
    values or layout changed) and of maps (WebGL canvases that drew) between the input and the painted frame."""
    rs = [r["redrew"] for r in runs if r.get("redrew")]
    if not rs:
        return None
    return {"charts": int(_med([r["plotly"] + r["live"] for r in rs])), "maps": int(_med([r["maps"] for r in rs]))}


def reference_for(redrew: dict | None) -> str | None:
    """The reference app (:data:`REFERENCE_APPS`) whose content is what a press redrew, at the least: a map and a
    chart, one map, three charts (three or more), one chart (one or two), else the floor."""
    if redrew is None:
        return None
    charts, maps = redrew["charts"], redrew["maps"]
    if maps:
        return "a map and a chart" if charts else "one map"
    return "three charts" if charts >= 3 else "one chart" if charts else "floor"


def _control_rows(page_name: str, label: str, kind: str, runs: list[dict], base: float | None,
                  note: str) -> list[dict]:
    tot = [r["total"] for r in runs]
    case = f"{page_name}: {label}"
    med = _med(tot)
    redrew = redrawn(runs)
    return [
        {"case": case, "metric": "median input-to-paint", "value": med, "unit": "ms",
         "baseline": "rerun, nothing changed" if base else None, "ratio": med / base if base else None,
         "redrew": redrew, "reference": reference_for(redrew),
         "note": f"{kind}; {note}; target < 300 ms" + (
             f"; redrew {redrew['charts']} chart(s) and {redrew['maps']} map(s)" if redrew else "")},
        {"case": case, "metric": "worst input-to-paint", "value": max(tot), "unit": "ms", "baseline": None,
         "ratio": None, "note": "target < 600 ms"},
        {"case": case, "metric": "breakdown (median)", "value": None, "unit": "",
         "baseline": None, "ratio": None,
         "note": (f"to server {_med([r['to_server'] for r in runs]):.0f} ms, server "
                  f"{_med([r['server'] for r in runs]):.0f} ms, after the run {_med([r['browser'] for r in runs]):.0f}"
                  f" ms; browser main thread busy {_med([r['busy'] for r in runs]):.0f} ms; received "
                  f"{_med([r['bytes'] for r in runs]) / 1024:.0f} KiB")},
    ]


def _page_name(href_path: str) -> str:
    return href_path or "home"


@contextlib.contextmanager
def _run_cache():
    """A new, empty disk cache folder (``ODLAB_CACHE_DIR``) for the servers this run starts, removed afterwards;
    an ``ODLAB_CACHE_DIR`` already set is kept. Yields the folder in use."""
    from odapp.data.disk_cache import CACHE_ENV

    if os.environ.get(CACHE_ENV):
        yield os.environ[CACHE_ENV]
        return
    with tempfile.TemporaryDirectory(prefix="odlab-bench-cache-") as d:
        os.environ[CACHE_ENV] = d
        try:
            yield d
        finally:
            os.environ.pop(CACHE_ENV, None)


async def _first_launch(browser, app_dir: Path, log: Path) -> list[dict]:
    """Cold start with an empty disk cache (``ODLAB_CACHE_DIR`` set to a new empty folder): the first launch on a
    new machine, when the bundled city is validated and its OD tables are built (the other cold starts read them
    back from the run's disk cache folder, :func:`_run_cache`, as every later launch does from ``~/.cache/odlab``)."""
    from odapp.data.disk_cache import CACHE_ENV

    old = os.environ.get(CACHE_ENV)
    with tempfile.TemporaryDirectory(prefix="odlab-empty-cache-") as empty:
        os.environ[CACHE_ENV] = empty
        ctx, page = await new_page(browser)
        try:
            proc, _, cold = await _cold_start(page, app_dir, log)
            harness.stop_server(proc)
        finally:
            await ctx.close()
            if old is None:
                os.environ.pop(CACHE_ENV, None)
            else:
                os.environ[CACHE_ENV] = old
    return [{"case": "cold start, first launch (empty disk cache)", "metric": "launch to landing page painted",
             "value": cold, "unit": "ms", "baseline": None, "ratio": None,
             "note": "target < 5000 ms; the bundled city is validated and its OD tables built, then kept on disk"}]


async def _cold_start(page, app_dir: Path, log: Path):
    """Launch a server and open its landing page in ``page``: ``(process, url, ms from launch to painted)``. The
    server is stopped here only if it never drew the page."""
    t_launch = time.time() * 1000
    proc, url = harness.start_server(log, app_dir=app_dir)
    try:
        await asyncio.to_thread(harness.wait_healthy, proc, url, 120)
        r = await _goto_drawn(page, url)
    except BaseException:
        harness.stop_server(proc)
        raise
    return proc, url, r["origin"] + r["paint"] - t_launch


async def _first_open(page, path: str) -> tuple[dict, float | None]:
    """Click ``path``'s link in the navigation: the timed parts up to the painted frame, and the ms to the map
    drawn (None on a page without a map)."""
    link = page.locator(f"[data-testid=stSidebarNav] a[href$='/{path}']").first
    await page.evaluate("() => { window.__odb.inputT = null; }")
    await link.click()
    r = _split(await wait_done(page))
    try:   # a map can arrive after the DOM was first quiet (the page's run is still streaming)
        await page.locator(".odmap canvas, [data-testid=stDeckGlJsonChart] canvas").first.wait_for(timeout=10_000)
    except Exception:  # playwright's TimeoutError: no map on this page
        return r, None
    return r, await map_drawn(page)


async def _one_page(browser, app_dir: Path, path: str, warmup: int, repeat: int, log: Path,
                    floor_now=None) -> list[dict]:
    """Cold start to the landing page and first open of ``path``, each ``FIRST_OPENS`` times on a freshly started
    server; then, on the last server, each sidebar control. ``floor_now`` (an async function giving the ms of some
    presses on the floor app) is called just before and just after the controls: each control's median is then also
    given as a ratio to the floor measured beside it (:func:`_floor_beside`)."""
    rows: list[dict] = []
    colds, opens, drawn = [], [], []
    for i in range(FIRST_OPENS):
        ctx, page = await new_page(browser)
        proc, url, cold = await _cold_start(page, app_dir, log)
        colds.append(cold)
        if i == FIRST_OPENS - 1:
            break   # this server goes on to the controls (stopped in the finally below)
        try:
            if path:
                r, d = await _first_open(page, path)
                opens.append(r)
                drawn += [d] if d is not None else []
        finally:
            await ctx.close()
            harness.stop_server(proc)
    try:
        rows.append({"case": f"cold start (for {_page_name(path)})", "metric": "launch to landing page painted",
                     "value": _med(colds), "unit": "ms", "baseline": None, "ratio": None,
                     "note": f"median of {len(colds)} launches, slowest {max(colds):.0f} ms; target < 5000 ms"})
        if path:
            r, d = await _first_open(page, path)
            opens.append(r)
            drawn += [d] if d is not None else []
            tot = [o["total"] for o in opens]
            rows.append({"case": f"{path}: first open", "metric": "click to painted", "value": _med(tot),
                         "unit": "ms", "baseline": None, "ratio": None,
                         "note": f"median of {len(tot)} first opens (server just started), slowest {max(tot):.0f} "
                                 f"ms; server {_med([o['server'] for o in opens]):.0f} ms, browser "
                                 f"{_med([o['browser'] for o in opens]):.0f} ms, received "
                                 f"{_med([o['bytes'] for o in opens]) / 1024:.0f} KiB; target < 5000 ms"})
            if drawn:
                rows.append({"case": f"{path}: first open", "metric": "click to map drawn", "value": _med(drawn),
                             "unit": "ms", "baseline": None, "ratio": None,
                             "note": f"median of {len(drawn)}, slowest {max(drawn):.0f} ms: to the painted frame "
                                     f"after the map's last WebGL draw (none for {QUIET_MS} ms after it); "
                                     "target < 5000 ms"})
        await ctx.close()
        floor_before = await _floor_presses(floor_now)
        n_before = len(rows)
        ctx, page = await new_page(browser)
        await _goto_drawn(page, f"{url}/{path}")
        controls = await _stable_controls(page)
        base_runs = [await _rerun_unchanged(page) for _ in range(warmup + repeat)][warmup:]
        base = _med([b["total"] for b in base_runs])
        rows += _control_rows(_page_name(path), "rerun with nothing changed ('r')", "baseline", base_runs, None,
                              "everything cached")
        await ctx.close()
        wanted = [w.strip() for w in os.environ.get("ODLAB_BENCH_CONTROLS", "").split(",") if w.strip()]
        for w in wanted:   # a control asked for but not on the page is said, not silently left out
            if not any(w in c["label"] for c in controls):
                rows.append({"case": f"{_page_name(path)}: {w}", "metric": "not found", "value": None, "unit": "",
                             "baseline": None, "ratio": None,
                             "note": "found: " + ", ".join(c["label"] for c in controls)})
        for ctl in controls:
            if wanted and not any(w in ctl["label"] for w in wanted):
                continue
            if ctl["options"] is not None and ctl["options"] < 2:
                rows.append({"case": f"{_page_name(path)}: {ctl['label']}", "metric": "skipped", "value": None,
                             "unit": "", "baseline": None, "ratio": None,
                             "note": f"{ctl['kind']} with {ctl['options']} option: nothing to change"})
                continue
            ctx, page = await new_page(browser)
            runs = []
            try:
                await _goto_drawn(page, f"{url}/{path}")
                for i in range(warmup + repeat):
                    if i and PAUSE_MS:
                        await page.wait_for_timeout(PAUSE_MS)
                    runs.append(await press(page, ctl, i))
            except Exception as e:  # a control that fails is reported, the others are still measured
                rows.append({"case": f"{_page_name(path)}: {ctl['label']}", "metric": "error", "value": None,
                             "unit": "", "baseline": None, "ratio": None,
                             "note": f"after {len(runs)} presses: {type(e).__name__}: {str(e)[:200]}"})
                print(f"  {_page_name(path)}: {ctl['label']}: {type(e).__name__}", file=sys.stderr)
                continue
            finally:
                await ctx.close()
            each = ", ".join(f"{r['total']:.0f} (server {r['server']:.0f})" + (" warm-up" if i < warmup else "")
                             for i, r in enumerate(runs))
            print(f"  {_page_name(path)}: {ctl['label']}: median {_med([r['total'] for r in runs[warmup:]]):.0f} ms"
                  f" [{each}]", file=sys.stderr)
            errors = sum(r["exceptions"] for r in runs)
            note = {"slider": "each press a new value", "number": "each press a new value",
                    "live": "live slider: each press a new value, released at once",
                    "select": "down one option, then back up", "radio": f"cycles {ctl['options']} options",
                    }.get(ctl["kind"], "toggles") + (f"; {errors} exceptions shown" if errors else "") + (
                        f"; {PAUSE_MS} ms between presses" if PAUSE_MS else "")
            rows += _control_rows(_page_name(path), ctl["label"], ctl["kind"], runs[warmup:], base, note)
        if floor_now:
            rows.append(_floor_beside(_page_name(path), floor_before, await _floor_presses(floor_now), rows[n_before:]))
    finally:
        harness.stop_server(proc)
    return rows


class RssSampler:
    """Peak resident memory of the server's process tree, sampled every 0.25 s in a thread."""

    def __init__(self, pid: int):
        self.pid, self.peak, self._stop = pid, 0, threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, harness.tree_rss_bytes(self.pid))
            self._stop.wait(0.25)

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()


async def _session(browser, url: str, path: str, seed: int, rounds: int, barrier, out: dict):
    ctx, page = await new_page(browser, {"width": 1200, "height": 900})
    try:
        t = time.time() * 1000
        r = await _goto_drawn(page, f"{url}/{path}")
        out["open"].append(r["origin"] + r["paint"] - t)
        seed_box = page.locator(f"{SIDEBAR} [data-testid=stNumberInput]").filter(has_text="Seed").locator("input")
        await seed_box.fill(str(seed), timeout=TIMEOUT_MS)   # the same patience as for opening the page
        await page.evaluate("() => { window.__odb.inputT = null; }")
        await seed_box.press("Enter", timeout=TIMEOUT_MS)
        await wait_done(page)
        ctl = {"kind": "slider", "index": 0}
        eps = page.locator(f"{SIDEBAR} [data-testid=stSlider]").filter(has_text="ε")
        ctl["index"] = await page.locator(f"{SIDEBAR} [data-testid=stSlider]").evaluate_all(
            "(els) => els.findIndex(e => e.innerText.includes('ε'))")
        if not await eps.count():   # the page holds ε beside its live curves (odapp/components/live)
            ctl = {"kind": "live", "label": "ε"}
            eps = page.locator(".odlive-control[data-name=epsilon]")
        assert await eps.count()
        for _ in range(rounds):
            await barrier()
            r = await press(page, ctl)
            out["press"].append(r["total"])
            out["bytes"].append(r["bytes"])
            out["exceptions"] += r["exceptions"]
    except (Timeout, AssertionError, Exception) as e:
        out["errors"].append(f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
    finally:
        await ctx.close()
        await barrier(leave=True)


class Barrier:
    """All live sessions press at the same moment; a session that ends leaves the barrier. With ``wait_s`` none waits
    longer than that for the others (a stuck session must not turn every other session into a timeout).
    ``on_first`` is called when the first press is released (where the press phase starts)."""

    def __init__(self, n: int, wait_s: float | None = None, on_first=None):
        self.n, self.waiting, self.generation, self.wait_s, self.on_first = n, 0, 0, wait_s, on_first
        self.cond = asyncio.Condition()

    async def __call__(self, leave: bool = False) -> None:
        async with self.cond:
            if leave:
                self.n -= 1
            else:
                self.waiting += 1
                gen = self.generation
            if self.waiting and self.waiting >= self.n:
                self.waiting, self.generation = 0, self.generation + 1
                if self.generation == 1 and self.on_first is not None:
                    self.on_first()
                self.cond.notify_all()
            elif not leave:
                try:
                    await asyncio.wait_for(self.cond.wait_for(lambda: self.generation != gen), self.wait_s)
                except TimeoutError:   # go alone; the others were too slow
                    if self.generation == gen:
                        self.waiting -= 1


def _class_mode() -> str:
    mode = (os.environ.get("ODLAB_BENCH_CLASS") or "class").strip().lower()
    if mode not in ("class", "browsers"):
        raise ValueError(f"ODLAB_BENCH_CLASS must be 'class' or 'browsers', got {mode!r}")
    return mode


async def _client_session(url: str, path: str, seed: int, rounds: int, barrier, out: dict,
                          source: str | None = None):
    """One protocol client (another laptop): open the page, set its seed, press ε one step up ``rounds`` times at
    the barrier, timing each press to the run's ``script_finished``. Stops at its first error (as a browser session
    does), which is recorded by kind. ``source``: the local address it connects from (another machine)."""
    from benchmarks.protocol_client import ProtocolClient

    client = ProtocolClient(url, timeout_s=TIMEOUT_MS / 1000, source=source)
    try:
        r = await client.open(path)
        out["open"].append(r.ms)
        if not r.errors:
            r = await client.set_value("number_input", "Seed", seed)
        for _ in range(rounds):
            if r.errors:
                break
            await barrier()
            r = await client.step_epsilon()
            out["press"].append(r.ms)
            out["bytes"].append(r.bytes)
        out["errors"] += r.errors
    except Exception as e:  # e.g. LookupError: the page has no ε slider or Seed box (an error page)
        out["errors"].append(f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
    finally:
        await client.close()
        await barrier(leave=True)


def _error_kinds(errors: list[str]) -> str:
    from collections import Counter

    return "; ".join(f"{k} ×{c}" if c > 1 else k for k, c in Counter(errors).most_common())[:300] or "none"


async def _concurrency(browser, app_dir: Path, sessions: tuple[int, ...], rounds: int, log: Path) -> list[dict]:
    """N sessions on one server pressing ε together; ``ODLAB_BENCH_CLASS`` picks how the N sessions are made (class:
    1 browser + N-1 protocol clients; browsers: N browsers)."""
    from concurrent.futures import ThreadPoolExecutor

    mode = _class_mode()
    rows: list[dict] = []
    path = "OD_release"
    # the protocol clients fetch the page's files in threads: as many at once as there are clients
    asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=max(sessions, default=1) + 4))
    workers = int(os.environ.get("ODLAB_BENCH_WORKERS") or 1)
    if workers > 1:   # odserve: K servers behind its relay; each client connects from its own address
        port = harness.free_port()
        out_file = open(log, "w")   # closed by harness.stop_server
        proc = subprocess.Popen([sys.executable, "-m", "odserve", "--workers", str(workers), "--port", str(port),
                                 "--app-dir", str(app_dir)], cwd=app_dir, stdout=out_file, stderr=subprocess.STDOUT)
        proc._odlab_log = out_file
        url = f"http://127.0.0.1:{port}"
    else:
        proc, url = harness.start_server(log, app_dir=app_dir)
    try:
        await asyncio.to_thread(harness.wait_healthy, proc, url, 120)
        ctx, page = await new_page(browser)
        await _goto_drawn(page, f"{url}/{path}")     # load the bundled city once
        await ctx.close()
        for n in sessions:
            out = {"open": [], "press": [], "bytes": [], "errors": [], "exceptions": 0}   # browser sessions
            cout = {"open": [], "press": [], "bytes": [], "errors": []}          # protocol clients
            at_first_press: list[float] = []   # the server's CPU when the first press is released
            barrier = Barrier(n, on_first=lambda mark=at_first_press: mark.append(harness.tree_cpu_seconds(proc.pid)))
            n_browsers = n if mode == "browsers" else min(n, 1)
            rss_before = harness.tree_rss_bytes(proc.pid)
            cpu0 = (harness.tree_cpu_seconds(proc.pid), harness.tree_cpu_seconds(os.getpid(), exclude=proc.pid),
                    time.perf_counter(), time.process_time())
            with RssSampler(proc.pid) as rss:
                await asyncio.gather(
                    *(_session(browser, url, path, 1000 * n + i, rounds, barrier, out) for i in range(n_browsers)),
                    *(_client_session(url, path, 1000 * n + i, rounds, barrier, cout,
                                      f"127.0.0.{2 + i}" if workers > 1 else None) for i in range(n_browsers, n)))
            cpu_end = harness.tree_cpu_seconds(proc.pid)
            cpu = (cpu_end - cpu0[0],
                   harness.tree_cpu_seconds(os.getpid(), exclude=proc.pid) - cpu0[1], time.perf_counter() - cpu0[2],
                   time.process_time() - cpu0[3])   # this process alone: the protocol clients, Playwright's client
            presses = len(out["press"]) + len(cout["press"])
            press_cpu = (cpu_end - at_first_press[0]) / presses if presses and at_first_press else None
            await asyncio.sleep(5)
            rss_after = harness.tree_rss_bytes(proc.pid)
            common = dict(path=path, n=n, rounds=rounds, rss=(rss_before, rss.peak, rss_after), cpu=cpu,
                          press_cpu=press_cpu)
            new = _class_rows(out, cout, **common) if mode == "class" else _browsers_rows(out, **common)
            for r in new if workers > 1 else ():
                r["case"] += f", odserve with {workers} server processes"
            rows += new
    finally:
        harness.stop_server(proc)
    return rows


def _waves_setting(quick: bool) -> tuple[int, int] | None:
    """``(waves, sessions per wave)`` from ``ODLAB_BENCH_WAVES`` (``10x10``; empty: none), else the default."""
    w = os.environ.get("ODLAB_BENCH_WAVES")
    if w is None:
        return QUICK_WAVES if quick else WAVES
    if not w.strip():
        return None
    parts = w.lower().replace(" ", "").split("x")
    if len(parts) != 2 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise ValueError(f"ODLAB_BENCH_WAVES={w!r}: expected WAVESxSESSIONS, e.g. 10x10 (or empty for none)")
    return int(parts[0]), int(parts[1])


async def _waves(app_dir: Path, waves: int, n: int, log: Path, *, path: str = "OD_release",
                 ttl_s: float | None = None) -> list[dict]:
    """Memory of one server as ``waves`` waves of ``n`` protocol clients come and go (module docstring, "Classes
    coming and going"); ``ttl_s``: how long the server keeps a closed session (default: its config's)."""
    from concurrent.futures import ThreadPoolExecutor

    if ttl_s is None:
        ttl_s = float(os.environ.get("STREAMLIT_SERVER_DISCONNECTED_SESSION_TTL", 120))
    case = f"sessions come and go ({path}, {waves} waves of {n})"
    # the protocol clients fetch the page's files in threads: as many at once as there are clients
    asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=n + 4))
    proc, url = harness.start_server(log, app_dir=app_dir)
    rows, rss, errors, presses = [], [], [], []

    async def wave(w: int) -> None:
        """Wave ``w`` (0: one session opens the page and closes, as before a class or to expire old sessions)."""
        out = {"open": [], "press": [], "bytes": [], "errors": []}
        if w:
            barrier = Barrier(n)
            await asyncio.gather(*(_client_session(url, path, 100_000 + (w - 1) * n + i, 2, barrier, out)
                                   for i in range(n)))
        else:
            await _client_session(url, path, 1, 0, Barrier(1), out)
        errors.extend(out["errors"])
        presses.extend(out["press"])
        await asyncio.sleep(2)   # the closing sessions' last messages

    try:
        await asyncio.to_thread(harness.wait_healthy, proc, url, 120)
        for w in range(waves + 1):
            await wave(w)
            rss.append(harness.tree_rss_bytes(proc.pid))
            print(f"  wave {w}: RSS {rss[-1] / 2**20:.0f} MiB, errors so far {len(errors)}", file=sys.stderr)
        await asyncio.sleep(ttl_s + 10)
        await wave(0)   # Streamlit drops expired sessions when it next looks them up
        expired = harness.tree_rss_bytes(proc.pid)
    finally:
        harness.stop_server(proc)
    mib = [b / 2**20 for b in rss]
    seeds = f"each session a new seed (100000 + its number), 2 ε presses; errors: {_error_kinds(errors)}"
    rows.append(_row(case, "server RSS after loading", mib[0], "MiB", "one session opened the page and closed"))
    for w in range(1, waves + 1):
        rows.append(_row(case, f"server RSS after wave {w}", mib[w], "MiB",
                         f"{n} sessions opened the page, pressed and closed; {seeds}" if w == 1 else
                         f"{mib[w] - mib[w - 1]:+.0f} MiB in this wave"))
    rows.append(_row(case, "server RSS after the closed sessions expired", expired / 2**20, "MiB",
                     f"{ttl_s + 10:.0f} s after the last wave (server.disconnectedSessionTTL {ttl_s:.0f} s + 10 s), "
                     "then one session opened and closed (Streamlit drops expired sessions when it next looks them up)"))
    q = max(1, waves // 4)     # the first and the last quarter of the waves
    first, last = (mib[q] - mib[0]) / q, (mib[waves] - mib[waves - q]) / q       # MiB per wave
    rows.append(_row(case, "level: growth per wave, last quarter of the waves", last, "MiB",
                     f"waves {waves - q + 1}-{waves}: {last:+.0f} MiB per wave; waves 1-{q}: {first:+.0f} MiB per "
                     f"wave (ratio = last / first); {len(presses)} presses, median press-to-run-finished "
                     f"{_med(presses) or 0:.0f} ms", last / first if first > 0 else None))
    return rows


REFERENCE_HEAD = """
import sys
sys.path.insert(0, {root!r})
import streamlit as st
st.title("Reference")
eps = st.sidebar.slider("ε", 0.05, 5.0, 0.66, 0.01)
st.write(f"ε = {{eps:.2f}}")
"""
_CHART = """
import numpy as np
from odcore.report import figures
tc = np.random.default_rng(0).zipf(1.8, 50_000).clip(max=5_000)
for i in range({n}):
    fig, _ = figures.release_curve_figure(tc, eps * (1 + i / 10), 100)
    st.plotly_chart(figures.style(fig), width="stretch", key=f"chart_{{i}}")
"""
_MAP = """
import numpy as np
import pandas as pd
from odapp.maps import deck as map_deck
from odapp.maps import flows as map_flows
from odapp.maps import zones as map_zones
i, j = np.divmod(np.arange(1_200), 40)
lon, lat, d = 13.2 + j * 0.016, 52.35 + i * 0.0105, 0.016
polygons = [[[x, y], [x + d, y], [x + d, y + 0.0105], [x, y + 0.0105]] for x, y in zip(lon, lat)]
edges = st.cache_resource(map_zones.outline_edges)(polygons)
rng = np.random.default_rng(0)
cells = pd.DataFrame({"polygon": polygons, "value": np.clip(rng.random(1_200) * eps, 0, 1)})
cells["tip"] = [f"cell {k}\\ncentre {y:.5f}, {x:.5f}\\n{v:.3f}" for k, x, y, v in
                zip(range(1_200), lon, lat, cells["value"])]
a, b = rng.integers(0, 1_200, 300), rng.integers(0, 1_200, 300)
flows = pd.DataFrame({"o_lon": lon[a], "o_lat": lat[a], "d_lon": lon[b], "d_lat": lat[b],
                      "f": rng.random(300) * min(eps, 1.0)})
flows["tip"] = [f"{x} -> {y}: {f:.3f}" for x, y, f in zip(a, b, flows["f"])]
layers = [*map_zones.grid_layers(cells, map_flows.CELL_COLOR, columns=("value",), edges=edges), map_deck.arc_layer(flows)]
st.pydeck_chart(map_deck.deck(layers, map_deck.view_state(lat, lon, pitch=30, height_px=460), height=460), height=460,
                key="map")
"""
# name -> (what it adds to the floor, the rest of its script). The last two are what the slowest pages must redraw on
# an ε press, with no computing of their own: OD release a map and a chart, Privacy budget three charts.
REFERENCE_APPS = {
    "floor": ("a title, one ε slider and one line of text", ""),
    "one chart": ("the floor plus the release-probability chart (plotly), new on each press", _CHART.format(n=1)),
    "one map": ("the floor plus a deck.gl map of 1,200 shaded cells and 300 arcs with tooltips, new on each press "
                "(its cells' outlines computed once)", _MAP),
    "a map and a chart": ("the floor plus both of the above, new on each press (what the OD release page's ε press "
                          "redraws at the least)", _MAP + _CHART.format(n=1)),
    "three charts": ("the floor plus three release-probability charts, each new on each press (what the Privacy "
                     "budget page's ε press redraws at the least)", _CHART.format(n=3)),
}


def write_small_app(d: Path, body: str = "") -> Path:
    """A small app in folder ``d``: :data:`REFERENCE_HEAD` (the floor) followed by ``body``, with the repo's
    ``.streamlit/config.toml``. Returns ``d``."""
    import shutil

    (d / ".streamlit").mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO_ROOT / ".streamlit" / "config.toml", d / ".streamlit" / "config.toml")
    (d / "app.py").write_text(REFERENCE_HEAD.format(root=str(REPO_ROOT)) + body)
    return d


@contextlib.contextmanager
def _reference_server(name: str, log: Path):
    """A server of its own for the reference app ``name`` (in a temporary folder) for the ``with`` block; yields
    its URL."""
    with tempfile.TemporaryDirectory(prefix="odlab_ref_") as tmp:
        d = write_small_app(Path(tmp), REFERENCE_APPS[name][1])
        with harness.streamlit_server(log, app_dir=d, timeout_s=120) as url:
            yield url


EPS_SLIDER = {"kind": "slider", "index": 0, "label": "ε"}


async def _eps_presses(browser, url: str, warmup: int, repeat: int) -> list[dict]:
    """``warmup + repeat`` presses of the ε slider of the app at ``url`` in a fresh browser session; the timed parts
    of the last ``repeat``."""
    ctx, page = await new_page(browser)
    try:
        await _goto_drawn(page, url)
        return [await press(page, EPS_SLIDER, i) for i in range(warmup + repeat)][warmup:]
    finally:
        await ctx.close()


async def _reference_rows(browser, warmup: int, repeat: int, log: Path) -> list[dict]:
    """Input-to-paint of an ε press on each of :data:`REFERENCE_APPS`, each on a server of its own; ratios to the
    floor measured here."""
    rows, floor = [], None
    for name, (what, _) in REFERENCE_APPS.items():
        with _reference_server(name, log) as url:
            runs = await _eps_presses(browser, url, warmup, repeat)
        med = _med([r["total"] for r in runs])
        floor = med if name == "floor" else floor
        redrew = redrawn(runs)   # the reference's own presses: a check of what the pages' presses are held to
        rows.append({"case": f"reference: {name}", "metric": "median input-to-paint", "value": med, "unit": "ms",
                     "baseline": "reference: floor" if name != "floor" else None,
                     "ratio": med / floor if floor and name != "floor" else None, "redrew": redrew,
                     "note": f"{what}; ε one step up per press, {len(runs)} presses, slowest "
                             f"{max(r['total'] for r in runs):.0f} ms; server {_med([r['server'] for r in runs]):.0f}"
                             f" ms, after the run {_med([r['browser'] for r in runs]):.0f} ms, received "
                             f"{_med([r['bytes'] for r in runs]) / 1024:.0f} KiB"})
        print(f"  reference {name}: median {med:.0f} ms", file=sys.stderr)
    return rows


FLOOR_BESIDE = "the floor beside this page"


async def _floor_presses(floor_now) -> list[float]:
    """``floor_now()``, or [] when there is none or it fails (said on stderr): a floor that cannot be measured must
    not cost the page its rows."""
    if floor_now is None:
        return []
    try:
        return await floor_now()
    except Exception as e:  # playwright's errors, a server that did not answer: the page is measured without it
        print(f"  the floor app: {type(e).__name__}: {str(e)[:200]}", file=sys.stderr)
        return []


def _floor_beside(page_name: str, before: list[float], after: list[float], rows: list[dict]) -> dict:
    """The row of the floor app measured just before and just after a page's controls, and each control's median
    row of ``rows`` given its ratio to it (the unchanged rerun's ratio moves into the note)."""
    floor = _med(before + after)
    case = f"{page_name}: {FLOOR_BESIDE}"
    if not floor:   # the floor app could not be measured: the page's rows stay, without ratios
        return {"case": case, "metric": "error", "value": None, "unit": "", "baseline": None, "ratio": None,
                "note": f"the floor app gave {len(before)} presses before and {len(after)} after this page's controls"}
    for r in rows:
        if r["metric"] == "median input-to-paint" and r["value"] is not None:
            if r.get("ratio") is not None:
                r["note"] += f"; {r['ratio']:.2f} × the rerun with nothing changed"
            r["baseline"], r["ratio"] = FLOOR_BESIDE, r["value"] / floor
    return {"case": case, "metric": "median input-to-paint", "value": floor, "unit": "ms",
            "baseline": None, "ratio": None,
            "note": f"the reference floor app (a title, one ε slider, one line of text; a server of its own) pressed "
                    f"{len(before)} times just before this page's controls (median {_med(before):.0f} ms) and "
                    f"{len(after)} times just after (median {_med(after):.0f} ms): what any press cost on this "
                    "machine while the page was measured; each control's ratio is to this"}


def _row(case: str, metric: str, value, unit: str, note: str, ratio=None) -> dict:
    return {"case": case, "metric": metric, "value": value, "unit": unit, "baseline": None, "ratio": ratio,
            "note": note}


def _server_rows(case: str, rss: tuple[int, int, int], cpu: tuple[float, float, float, float], other: str,
                 press_cpu: float | None) -> list[dict]:
    before, peak, after = (b / 2**20 for b in rss)
    return [
        _row(case, "server CPU per press", None if press_cpu is None else press_cpu * 1000, "ms",
             "the server's CPU from the first press's release to the end of the last press, divided by the presses "
             "of all sessions: N presses at once ask the server for N times this"),
        _row(case, "server RSS peak", peak, "MiB",
             f"server process tree, sampled every 0.25 s; before {before:.0f} MiB, 5 s after all sessions closed "
             f"{after:.0f} MiB"),
        _row(case, f"CPU used, server / {other}", cpu[0], "s",
             f"server {cpu[0]:.1f} s, {other} {cpu[1]:.1f} s of CPU (of which the benchmark's own Python process, "
             f"its protocol clients and Playwright's client side, {cpu[3]:.1f} s) in {cpu[2]:.0f} s wall (opening the "
             f"page, the seed, the presses) on {os.cpu_count()} cores; ratio = {other} / server",
             cpu[1] / cpu[0] if cpu[0] else None),
    ]


def _class_rows(out: dict, cout: dict, *, path: str, n: int, rounds: int, rss, cpu, press_cpu) -> list[dict]:
    m = n - 1
    case = f"class of {n} ({path}, ε): 1 browser" + (f" + {m} protocol client{'s' if m > 1 else ''}" if m else "")
    target = "; target (10 sessions): median < 1000 ms"
    errs = out["errors"] + [f"exception shown in the browser ×{out['exceptions']}"] * bool(out["exceptions"]) \
        + cout["errors"]
    n_err = len(out["errors"]) + out["exceptions"] + len(cout["errors"])
    kib = [b / 1024 for b in cout["bytes"]]
    rows = [
        _row(case, "browser: median input-to-paint", _med(out["press"]), "ms",
             f"the one real Chromium session: key press on ε to the painted frame, {len(out['press'])} presses "
             f"({rounds} rounds, all sessions press at once, each its own seed){target}"),
        _row(case, "browser: worst input-to-paint", max(out["press"], default=None), "ms", ""),
        _row(case, "browser: page open", _med(out["open"]), "ms",
             "navigation to the painted frame, while every session opens the page at once"),
    ]
    if m:
        rows += [
            _row(case, "clients: median press-to-run-finished", _med(cout["press"]), "ms",
                 f"the {m} protocol client{'s' if m > 1 else ''} (the other laptops; their drawing is not on this machine): ε rerun "
                 f"request sent to the run's script_finished received, all its deltas received; "
                 f"{len(cout['press'])} presses"),
            _row(case, "clients: worst press-to-run-finished", max(cout["press"], default=None), "ms", ""),
            _row(case, "clients: received per press", _med(kib), "KiB",
                 f"WebSocket payload of one press's run, median; largest {max(kib, default=0):.0f} "
                 f"KiB; the browser session received {_med(out['bytes']) / 1024 if out['bytes'] else 0:.0f} KiB "
                 "per press (median, the same way)"),
            _row(case, "clients: median page open", _med(cout["open"]), "ms",
                 "the files of the page's HTML (scripts, stylesheet, font, icon), health and host-config, "
                 "WebSocket, first run finished; all sessions at once"),
        ]
    rows.append(_row(case, "errors", n_err, "",
                     f"of {n} sessions: exceptions shown, timeouts, closed sockets, pages that never opened; "
                     + _error_kinds(errs)))
    return rows + _server_rows(case, rss, cpu, "benchmark side (browser, its driver, protocol clients)", press_cpu)


def _browsers_rows(out: dict, *, path: str, n: int, rounds: int, rss, cpu, press_cpu) -> list[dict]:
    case = f"{n} concurrent browser session{'s' if n > 1 else ''} ({path}, ε)"
    errs = len(out["errors"]) + out["exceptions"]
    note = f"{len(out['press'])} presses, {rounds} rounds, each session its own seed"
    return [
        _row(case, "median input-to-paint", _med(out["press"]), "ms",
             note + "; all browsers on this machine; target (10 sessions) < 1000 ms"),
        _row(case, "worst input-to-paint", max(out["press"], default=None), "ms", ""),
        _row(case, "median page open", _med(out["open"]), "ms", "all sessions open the page at once"),
        _row(case, "errors", errs, "", _error_kinds(out["errors"])),
        *_server_rows(case, rss, cpu, "browsers", press_cpu),
    ]


async def _run(quick: bool) -> list[dict]:
    from playwright.async_api import async_playwright

    exe = harness.chromium_executable()
    if exe is None:
        raise RuntimeError("no Chromium on this machine (Debian package 'chromium')")
    app_dir = _app_dir()
    warmup, repeat, rounds = (QUICK_WARMUP, QUICK_REPEAT, QUICK_ROUNDS) if quick else (WARMUP, REPEAT, ROUNDS)
    sessions = tuple(int(x) for x in os.environ["ODLAB_BENCH_SESSIONS"].split(",") if x) \
        if os.environ.get("ODLAB_BENCH_SESSIONS") is not None else (QUICK_SESSIONS if quick else SESSIONS)
    waves = _waves_setting(quick)
    log = Path(tempfile.gettempdir()) / f"odlab_bench_browser_{os.getpid()}.log"
    rows: list[dict] = []
    wanted = os.environ.get("ODLAB_BENCH_PAGES")
    no_pages = wanted is not None and wanted.strip().lower() == "none"
    _class_mode()   # a wrong ODLAB_BENCH_CLASS is said before anything runs
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=exe, headless=True, args=harness.CHROMIUM_ARGS)
        try:
            rows += await _measure(browser, app_dir, warmup, repeat, rounds, sessions, waves, wanted, no_pages, log)
        finally:
            await browser.close()
    for r in rows:
        r["note"] = (r.get("note") or "") + f" [app: {app_dir.name}]" if app_dir != REPO_ROOT else r.get("note")
    return rows


async def _measure(browser, app_dir: Path, warmup: int, repeat: int, rounds: int, sessions: tuple[int, ...],
                   waves, wanted: str | None, no_pages: bool, log: Path) -> list[dict]:
    """Every part of the run, on the run's own disk cache (:func:`_run_cache`)."""
    rows: list[dict] = []
    with _run_cache():
        paths = []
        if not no_pages:
            rows += await _reference_rows(browser, warmup, repeat, log)
            rows += await _first_launch(browser, app_dir, log)
            paths = await _discover_pages(browser, app_dir, log)   # (also fills the disk cache)
        if wanted and not no_pages:
            keep = {w.strip() for w in wanted.split(",")}
            paths = [q for q in paths if _page_name(q) in keep]
        with contextlib.ExitStack() as stack:   # the floor app, measured again beside every page
            floor_url = stack.enter_context(_reference_server("floor", log.with_name(log.stem + "_floor.log"))) \
                if paths else None

            async def floor_now() -> list[float]:
                return [r["total"] for r in await _eps_presses(browser, floor_url, warmup, repeat)]

            for path in paths:
                try:
                    rows += await _one_page(browser, app_dir, path, warmup, repeat, log, floor_now)
                except Exception as e:  # a page that fails is reported, the other pages are still measured
                    rows.append({"case": _page_name(path), "metric": "error", "value": None, "unit": "",
                                 "baseline": None, "ratio": None, "note": f"{type(e).__name__}: {str(e)[:300]}"})
                    print(f"  {_page_name(path)}: {type(e).__name__}: {str(e)[:300]}", file=sys.stderr)
        if waves:
            try:
                rows += await _waves(app_dir, *waves, log)
            except Exception as e:  # reported; the rows measured before stay
                rows.append(_row("sessions come and go", "error", None, "", f"{type(e).__name__}: {str(e)[:300]}"))
        if sessions:
            try:
                rows += await _concurrency(browser, app_dir, sessions, rounds, log)
            except Exception as e:  # reported; the rows measured before stay
                rows.append({"case": "concurrent sessions", "metric": "error", "value": None, "unit": "",
                             "baseline": None, "ratio": None, "note": f"{type(e).__name__}: {str(e)[:300]}"})
    return rows


async def _discover_pages(browser, app_dir: Path, log: Path) -> list[str]:
    """URL paths of every page in the app's navigation ('' = the landing page), in navigation order."""
    with harness.streamlit_server(log, app_dir=app_dir, timeout_s=120) as url:
        ctx, page = await new_page(browser)
        await _goto_drawn(page, url)
        hrefs = await page.locator("[data-testid=stSidebarNav] a").evaluate_all("els => els.map(e => e.href)")
        await ctx.close()
    paths = [h.removeprefix(url).strip("/") for h in hrefs]
    return [""] + [q for q in paths if q] if "" not in paths else paths


def run(quick: bool) -> list[dict]:
    return asyncio.run(_run(quick))
