"""Work a page will need, done in the server's idle time, through the very cached functions the page calls (so it
fills the cache entries the page reads; a page that asks while the work runs waits for that entry instead of
computing it twice: Streamlit's cache computes each entry once).

Two kinds:

* **The OD release page's first view** (:func:`start`). Opening the OD release page for the first time after the
  server started would compute its week's release, cells, map and chart; the landing page starts that work in a
  background thread, once per process for each dataset, with the settings of that first landing run (not again for
  another grid or any other slider step on the landing page). It calls :func:`odapp.release.view.first_view`.
  The Data page's map is not computed ahead: it needs the dataset's hour index (:func:`odapp.data.cache.hour_index`, ~1 s
  of CPU), and computing it in the background made the first open of whichever page a person opened right after the
  landing page slower (in the browser benchmark, Data's map was drawn after 7.4 s instead of 4.9 s).
* **The next step of the control a person just pressed** (:func:`after`): see below.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time

from odapp.data import cache as data_cache
from odapp.data.loading import grid_check
from odapp.data.zones_ui import square_label
from odapp.facts import view as facts_view
from odapp.release import view as release_view
from odapp.shared.state import CELL_KM2_RANGE, SEED_MAX
from odcore.errors import ParameterError

_log = logging.getLogger(__name__)
_started: set = set()
_lock = threading.Lock()
THREAD = "odlab-ahead"


class _NotAhead(logging.Filter):
    """Streamlit warns "missing ScriptRunContext" whenever a cached function runs outside a page's run; for this
    thread that is by design (no page to draw a spinner on), so the warning would only mislead."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.threadName not in (THREAD, WORKER)


logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context").addFilter(_NotAhead())


def _quietly(ctx) -> None:
    try:
        release_view.first_view(ctx)
    except Exception:   # the page computes it again itself and shows what went wrong, with the advice
        _log.info("computing the OD release page's first view ahead failed; the page will compute it",
                  exc_info=True)


def start(ctx, *, background: bool = True) -> bool:
    """Compute :func:`odapp.release.view.first_view` (in a background thread unless ``background`` is false), once
    per process for the context's dataset. Returns whether it started."""
    if ctx.od is None:
        return False
    key = ctx.settings.dataset.id
    with _lock:
        if key in _started:
            return False
        _started.add(key)
    if background:
        threading.Thread(target=_quietly, args=(ctx,), name=THREAD, daemon=True).start()
    else:
        _quietly(ctx)
    return True


# ---- the next press, computed while the person looks at this one ------------------------------------------------------
#
# A press of "Grid cell area" or "Seed" makes a page compute from new tables or new noise (hundreds of ms on the
# busier pages). A person who stepped the grid from 1.3 to 1.4 km² is likely to step on to 1.5: once the page is
# drawn and no page of the server is running, one background worker computes what that next step needs (the grid's
# OD tables and the page's own cached computations, through the very cached functions the page calls), so the press,
# if it comes, finds them ready. Only the continuation of the last change is computed (the same control, one more
# step the same way), at most one setting at a time, and it starts only while no script runs (a press that comes
# while it works shares the CPU with it, or waits for the very entry it is computing, which it would compute anyway).

SCRIPT_THREAD = "ScriptRunner.scriptThread"   # Streamlit's thread of a page's run (one per run in progress)
WORKER = "odlab-ahead-next"
IDLE_POLL_S = 0.02
AHEAD_ENV = "ODLAB_AHEAD"   # "0": compute nothing ahead (e.g. to measure a press without it)
enabled = os.environ.get(AHEAD_ENV, "1") != "0"   # the test suite turns it off (it would race AppTest's own runs)
_cv = threading.Condition()
_pending: list = []    # [job]: the newest wish replaces one not yet started
_worker: threading.Thread | None = None


def script_running() -> bool:
    """Whether a page's script is running in this server (Streamlit runs each in a thread of that name)."""
    return any(t.name == SCRIPT_THREAD for t in threading.enumerate())


def _work() -> None:
    while True:
        with _cv:
            while not _pending:
                _cv.wait()
        while script_running():       # never beside a run: a press in progress gets both cores
            time.sleep(IDLE_POLL_S)
        with _cv:
            if not _pending:
                continue
            job = _pending.pop(0)
        try:
            job()
        except Exception:   # the page computes it itself when asked, and shows what went wrong
            _log.info("computing the next step ahead failed; a press will compute it", exc_info=True)
        del job   # holds a page context: not kept while waiting for the next wish


def submit(job) -> bool:
    """Run ``job()`` in the background once no page's script runs; it replaces a wish not yet started (what is
    already computed is a cache hit, so asking again costs little). Returns whether it was queued."""
    global _worker
    if not enabled:
        return False
    with _cv:
        _pending[:] = [job]
        if _worker is None or not _worker.is_alive():
            _worker = threading.Thread(target=_work, name=WORKER, daemon=True)
            _worker.start()
        _cv.notify()
    return True


def next_settings(before, now):
    """The setting a person who went from ``before`` to ``now`` (:class:`odapp.shared.state.Settings`) is likely to press
    next: one more step of the grid or seed the same way, when that was the only change (else None)."""
    if before is None or before == now:
        return None
    if now.zones is None and dataclasses.replace(before, cell_km2=now.cell_km2, zones_label=now.zones_label) == now:
        lo, hi, step = CELL_KM2_RANGE
        nxt = round(now.cell_km2 + (step if now.cell_km2 > before.cell_km2 else -step), 1)
        return dataclasses.replace(now, cell_km2=nxt, zones_label=square_label(nxt)) if lo <= nxt <= hi else None
    if dataclasses.replace(before, seed=now.seed) == now:
        nxt = now.seed + (1 if now.seed > before.seed else -1)
        return dataclasses.replace(now, seed=nxt) if 0 <= nxt <= SEED_MAX else None
    return None


GRID_AHEAD_MAX_ROWS = 5_000_000
"""Above this many trace rows a grid is built only when asked for (the bundled city's 1.7 M rows take ~0.35 s of
CPU and its tables tens of MiB; a large upload's would hold seconds of CPU and its memory for a guess)."""


def grid_ahead(loaded, *, counts: bool = False) -> bool:
    """Whether the next grid of this data may be built ahead: not for an OD counts folder (its zones are fixed), a
    streamed upload (its grids are built by a pass of its own) or more than :data:`GRID_AHEAD_MAX_ROWS` rows."""
    if counts or getattr(loaded, "cabs", None) is not None:   # (a streamed upload's df would read every fix)
        return False
    df = getattr(loaded, "df", None)
    return df is not None and len(df) <= GRID_AHEAD_MAX_ROWS


def context_for(ctx, settings):
    """``ctx`` (:class:`odapp.shared.sidebar.PageContext`) with ``settings`` instead of its own, and the OD tables of its
    grid (from :func:`odapp.data.cache.od_data`, the entry the page's sidebar reads for that grid)."""
    od, od_config = ctx.od, ctx.od_config
    if settings.cell_km2 != ctx.settings.cell_km2:
        if grid_check(ctx.loaded, settings.cell_km2) is not None:   # raises over the limit
            raise ParameterError(f"a very large grid ({settings.cell_km2:g} km² cells) is built only when asked for")
        od_config = dataclasses.replace(ctx.od_config, cell_km2=settings.cell_km2)
        od = data_cache.od_data(settings.dataset.id, od_config, _df=ctx.loaded.df)
    return dataclasses.replace(ctx, settings=settings, od=od, od_config=od_config, next=None)


def after(ctx, work=None) -> bool:
    """Queue the next step of the person's last change (``ctx.next``): its OD tables and ``work(next_ctx)``, the
    page's own cached computations for it (called with a context like ``ctx``, see :func:`context_for`). A page
    calls this at its end with the function it computes its heavy parts with. Returns whether it was queued."""
    nxt = getattr(ctx, "next", None)
    if nxt is None:
        return False

    def job():
        c = context_for(ctx, nxt)
        facts_view.of(c)   # every page's guarantee card
        if work is not None:
            work(c)

    return submit(job)
