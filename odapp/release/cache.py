"""The OD release page's cached computations: the week's release, its cells and map, the attack on every person of
the week drawn on the map, and the release curve."""

from __future__ import annotations

import hashlib

import numpy as np

from odapp.attack.cache import attack_pairs, week_risk
from odapp.data.cache import week_pairs_prepared
from odapp.data.zones_ui import zone_polygons
from odapp.maps.context import map_context as _map_context
from odapp.maps.context import zones_box
from odapp.maps.flows import RISK_COLOR, cells_base, cells_frame, risk_cells_frame
from odapp.maps.od_map import release_maps
from odapp.maps.zones import cell_layers, inset, outline_edges, release_outline_style
from odapp.shared.caching import cache_resource
from odapp.shared.words import num
from odcore.privacy.attack import risk_by_origin
from odcore.privacy.release import (
    cell_release_probability,
    release_counts_with_report,
    release_with_report,
)
from odcore.report import figures
from odcore.space.zones import zone_names


@cache_resource(max_entries=32, show_spinner="Adding noise and thresholding…")
def week_release(dataset_id: str, od_config, week: int, release_config, seed: int, _od):
    """:func:`odcore.privacy.release.release_with_report` of one week's unique pairs (same seed, same noise)."""
    if not _od.stats.get("pairs_available", True):   # an OD counts folder: the release from its counts
        return release_counts_with_report(_od.week_counts(week), release_config, rng=seed)
    return release_with_report(week_pairs_prepared(dataset_id, od_config, week, _od=_od), release_config, rng=seed)


@cache_resource(max_entries=64, show_spinner=False)
def release_cells(dataset_id: str, od_config, week: int, release_config, bounding_seed: int | None, _table, _grid,
                  _cent):
    """``(cell_p, cells_df, edges, layers)`` of a week's release: per origin cell the exact chance that one of its
    pairs is published (:func:`odcore.privacy.release.cell_release_probability`), the map's cell frame (:func:`odapp.maps.
    cells_frame`), the cells' outlines (:func:`release_cells_base`) and the map's layers of both, their JSON
    made once (:func:`odapp.maps.zones.cell_layers`). They depend on the true counts and the release settings, not on the
    noise: one entry serves every seed and session (per user, the seed also picks the pairs each person keeps:
    ``bounding_seed``)."""
    cp = cell_release_probability(_table)
    # what the cells' outlines and first tooltip lines depend on (not ε or the threshold): hashed here once,
    # instead of Streamlit hashing a tuple of a thousand cell ids on every call
    key = hashlib.blake2b(cp["cell"].to_numpy(np.int64).tobytes() + cp["pairs"].to_numpy(np.int64).tobytes(),
                          digest_size=16).hexdigest()
    base, edges = release_cells_base(dataset_id, od_config, key, _cell_p=cp, _grid=_grid, _cent=_cent)
    cells = cells_frame(base, cp)
    return cp, cells, edges, cell_layers(cells, edges, encoded=True, outline=release_outline_style(_grid))


@cache_resource(max_entries=16, show_spinner=False)
def release_cells_base(dataset_id: str, od_config, cells_key: str, _cell_p, _grid, _cent):
    """:func:`odapp.maps.flows.cells_base` of the cells with observed pairs (``cells_key``: a digest of their ids and
    pair counts) and how the map tells them apart (:func:`odapp.maps.zones.release_outline_style`): their
    :func:`odapp.maps.zones.inset` (a zone file) or None (squares and H3: gaps), shared by
    every ε, threshold and seed of a week."""
    # cell_shapes' outlines without its cache: this entry is the cache of these cells' outlines, and Streamlit
    # hashing a tuple of a thousand cell ids for cell_shapes' key took longer than drawing them
    shapes = zone_polygons(_grid, _cell_p["cell"].to_numpy(np.int64))
    base = cells_base(shapes, _cell_p, _cent)
    style, polys = release_outline_style(_grid), base["polygon"].tolist()
    return base, (outline_edges(polys) if style == "lines" else inset(polys) if style == "insets" else None)


@cache_resource(max_entries=64, show_spinner=False)
def release_map(dataset_id: str, od_config, week: int, release_config, seed: int, view: str, top_n: int,
                min_count: float, cell: int | None, show_suppressed: bool, basemap: bool, level: str, _table, _cent,
                _cells_df, _edges=None, _base_layers=None, context: bool = False, _context=None,
                risk: bool = False):
    """The OD release page's map(s) (:func:`odapp.maps.od_map.release_maps`) with decks whose JSON is made once: a rerun
    that changes nothing on the map (another control, a return to earlier settings) sends the same text again
    without rebuilding it. Read-only, shared by the sessions with the same settings and seed."""
    return release_maps(_table, _cent, _cells_df, view=view, top_n=top_n, min_count=min_count,
                        threshold=release_config.threshold, cell=cell, show_suppressed=show_suppressed,
                        basemap=basemap, frozen=True, edges=_edges, base_layers=_base_layers, level=level,
                        context=_context if context else None, risk=risk)


@cache_resource(max_entries=16, show_spinner="Attacking every person of the week…")
def risk_cells(dataset_id: str, od_config, week: int, release_config, seed: int, _cells, _grid, _od):
    """``(cells_df, layers)``: the week's release-map cells (``_cells``: :func:`release_cells`) shaded by the attack
    success on the people who start a trip in each (:func:`odcore.privacy.attack.risk_by_origin` of
    :func:`week_risk`, the Attack page's entry), for the map's per-person risk."""
    pairs, counts = attack_pairs(dataset_id, od_config, week, release_config, seed, _od=_od)
    risk, _, _ = week_risk(dataset_id, od_config, week, release_config, seed, _pairs=pairs, _counts=counts)
    cells = risk_cells_frame(_cells[1], risk_by_origin(pairs, risk, week))
    return cells, cell_layers(cells, _cells[2], encoded=True, outline=release_outline_style(_grid),
                              color=RISK_COLOR)


@cache_resource(max_entries=8, show_spinner=False)
def map_context(dataset_id: str, od_config, _cells_df, _frame=None, _fixes=None):
    """The release map's offline base layer (:func:`odapp.maps.context.map_context`) round the zones of ``_cells_df``, with
    the image of the fixes of ``_frame`` (the traces; None for an OD counts folder), or of ``_fixes(box, width_px)``
    (a streamed Cabspotting upload's counts, :func:`odcore.od.engines.cab_stream.fix_density_cabspotting`). The same
    for every week, ε, threshold and seed of the data and zones: made once, its layers' JSON too (Cabspotting's
    week, 3.3 million fixes: about 0.8 s)."""
    zbox = zones_box(_cells_df["polygon"].tolist())
    if _fixes is not None:     # a streamed folder: the image's counts, read group by group
        return _map_context(zbox, fixes=_fixes)
    if _frame is None or not len(_frame) or "lon" not in _frame.columns:
        return _map_context(zbox)
    return _map_context(zbox, _frame["lon"].to_numpy(), _frame["lat"].to_numpy())


@cache_resource(max_entries=64, show_spinner=False)
def release_curve(dataset_id: str, od_config, week: int, release_config, bounding_seed: int | None, projector: bool,
                  _true_counts):
    """The OD release page's release-probability chart, styled (read-only: the same figure serves every seed and
    session). Returns ``(figure, curve)`` of :func:`odcore.report.figures.release_curve_figure`."""
    rc = release_config
    fig, curve = figures.release_curve_figure(_true_counts, rc.epsilon, rc.threshold, rc.sensitivity)
    figures.style(fig, f"ε = {rc.epsilon:g}, threshold {num(rc.threshold)}, noise scale {num(rc.scale)}",
                  height=440, projector=projector)
    fig.update_layout(margin={"r": 90})
    return fig, curve


@cache_resource(max_entries=16, show_spinner=False)
def used_centroids(dataset_id: str, od_config, _od):
    """Centroids (``cell, lat, lon``, and ``name`` for hexagons and polygons) of the zones that hold data (for arcs
    and tooltips)."""
    c = _od.centroids()
    if getattr(_od.grid, "kind", "square") == "square":   # squares are "zone <id>" in every tooltip (odapp.maps.flows.zone_label)
        return c
    return c.assign(name=zone_names(_od.grid, c["cell"].to_numpy()))
