"""Work the next page will need, done in the server's idle time while the person reads the landing page.

Opening the OD release page for the first time after the server started would compute its week's release, cells,
map and chart; the landing page starts that work in a background thread, once per process for each dataset, with the
settings of that first landing run (not again for another grid or any other slider step on the landing page: each
start costs CPU that the next press would share the two cores with). It calls the page's own cached functions with
the arguments the page uses for its first view (:mod:`odapp.release_view`), so it fills the very cache entries the
page reads. If the page is opened while the work is still running, it waits for the entry being
computed instead of computing it twice (Streamlit's cache computes each entry once).

The Data page's map is not computed ahead: it needs the dataset's hour index (:func:`odapp.cache.hour_index`, ~1 s
of CPU), and computing it in the background made the first open of whichever page a person opened right after the
landing page slower (in the browser benchmark, Data's map was drawn after 7.4 s instead of 4.9 s).
"""

from __future__ import annotations

import logging
import threading

from odapp import release_view

_log = logging.getLogger(__name__)
_started: set = set()
_lock = threading.Lock()
THREAD = "odlab-ahead"


class _NotAhead(logging.Filter):
    """Streamlit warns "missing ScriptRunContext" whenever a cached function runs outside a page's run; for this
    thread that is by design (no page to draw a spinner on), so the warning would only mislead."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.threadName != THREAD


logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context").addFilter(_NotAhead())


def _quietly(ctx) -> None:
    try:
        release_view.first_view(ctx)
    except Exception:   # the page computes it again itself and shows what went wrong, with the advice
        _log.info("computing the OD release page's first view ahead failed; the page will compute it",
                  exc_info=True)


def start(ctx, *, background: bool = True) -> bool:
    """Compute :func:`odapp.release_view.first_view` (in a background thread unless ``background`` is false), once
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
