"""What the OD release page computes for a week, in one place: the page draws it, and :mod:`odapp.ahead` has its
first view computed while the person is still on the landing page.

Everything here goes through :mod:`odapp.cache` (shared by every session with the same data and settings), so a
computation done ahead is exactly the one the page would do: same function, same arguments, same cache entry.
"""

from __future__ import annotations

from odapp import cache

# The map options a person sees first (the widgets' defaults on the OD release page).
MAP_DEFAULTS = {"view": "Published", "top_n": 300, "min_count": 0.0, "cell": None, "show_sup": False,
                "basemap": False}


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
