"""What the OD release page computes for a week, in one place: the page draws it, and the landing page has it
computed ahead, in the server's idle time, so that opening the OD release page the first time finds it cached.

Everything here goes through :mod:`odapp.cache` (shared by every session with the same data and settings), so a
computation done ahead is exactly the one the page would do: same function, same arguments, same cache entry. If
the page is opened while the work ahead is still running, it waits for that entry instead of computing it twice
(Streamlit's cache computes each entry once).
"""

from __future__ import annotations

import logging
import threading

from odapp import cache

# The map options a person sees first (the widgets' defaults on the OD release page).
MAP_DEFAULTS = {"view": "Published", "top_n": 300, "min_count": 0.0, "cell": None, "show_sup": False,
                "basemap": False}

_log = logging.getLogger(__name__)
_ahead: set = set()
_ahead_lock = threading.Lock()


def bounding_seed(settings) -> int | None:
    """Per user, the seed also picks the pairs each person keeps; per metric the exact probabilities (cells, curve)
    do not depend on it."""
    return settings.seed if settings.mode == "user_level" else None


def week_release(ctx, week: int, rcfg):
    """The week's release (:func:`odapp.cache.week_release`) for the context's data and seed."""
    s = ctx.settings
    return cache.week_release(s.dataset.id, ctx.od_config, week, rcfg, s.seed, _od=ctx.od)


def centroids(ctx):
    return cache.used_centroids(ctx.settings.dataset.id, ctx.od_config, _od=ctx.od)


def week_cells(ctx, rcfg, table, week: int, cent):
    """``(cell_p, cells_df, edges)``: the week's cells shaded by the chance that one of their flows is published
    (exact probabilities, the same for every seed, so cached per week and release settings)."""
    s = ctx.settings
    return cache.release_cells(s.dataset.id, ctx.od_config, week, rcfg, bounding_seed(s), _table=table,
                               _grid=ctx.od.grid, _cent=cent)


def flow_maps(ctx, rcfg, table, week: int, cent, cells, o: dict):
    """The week's :class:`~odapp.maps.FlowMap` list for the map options ``o`` (keys of :data:`MAP_DEFAULTS`)."""
    s = ctx.settings
    return cache.release_map(s.dataset.id, ctx.od_config, week, rcfg, s.seed, o["view"], int(o["top_n"]),
                             float(o["min_count"]), o["cell"], o["show_sup"], o["basemap"], _table=table, _cent=cent,
                             _cells_df=cells[1], _edges=cells[2])


def release_curve(ctx, rcfg, table, week: int, projector: bool):
    """``(figure, curve)``: release probability against the true count (:func:`odapp.cache.release_curve`)."""
    s = ctx.settings
    return cache.release_curve(s.dataset.id, ctx.od_config, week, rcfg, bounding_seed(s), projector,
                               _true_counts=table["true_count"].to_numpy())


def first_view(ctx) -> None:
    """Compute into the caches what the OD release page shows when it is opened with these settings: the week's
    release, its cells, the map with the default options and the release-probability chart."""
    s = ctx.settings
    rcfg = s.release_config()
    table = week_release(ctx, s.week, rcfg).table
    cent = centroids(ctx)
    cells = week_cells(ctx, rcfg, table, s.week, cent)
    flow_maps(ctx, rcfg, table, s.week, cent, cells, MAP_DEFAULTS)
    release_curve(ctx, rcfg, table, s.week, projector=False)


def _first_view_quietly(ctx) -> None:
    try:
        first_view(ctx)
    except Exception:   # the page itself computes it again and shows what went wrong, with the advice
        _log.info("computing the OD release page ahead failed; the page will compute it", exc_info=True)


def first_view_ahead(ctx, *, background: bool = True) -> bool:
    """Start :func:`first_view` in a background thread, once per process for each dataset and grid (not for every
    slider step on the landing page: that would add its cost to every step). Returns whether it started."""
    if ctx.od is None:
        return False
    key = (ctx.settings.dataset.id, ctx.od_config)
    with _ahead_lock:
        if key in _ahead:
            return False
        _ahead.add(key)
    if background:
        threading.Thread(target=_first_view_quietly, args=(ctx,), name="odlab-ahead", daemon=True).start()
    else:
        _first_view_quietly(ctx)
    return True
