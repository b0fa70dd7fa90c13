"""Every ``st.cache_*`` wrapper of the app, keyed on small things (dataset id, frozen configs, seed).

Large objects are passed as ``_``-prefixed arguments, which Streamlit does not hash: the dataset id already says
which data they are. Heavy tables use ``st.cache_resource``: ``st.cache_data`` would unpickle a copy on every rerun
(~0.2 s for a week's release of the bundled sample), too slow for a slider to redraw within 300 ms. Their results
are shared and must be treated as read-only by the pages (pandas copy-on-write makes accidental writes local).
Small results use ``st.cache_data``. Nothing in here reads a global.

The frozen configs are hashed by their fields' ``repr`` (:func:`config_key`): Streamlit's own way for a dataclass
(``dataclasses.asdict``, then every value) took ~0.1 ms a config, and a press on the OD release page hashes them
some twenty times.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import math
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from odapp import data as _data
from odapp import private
from odapp.export import styled
from odapp.maps import (
    RISK_COLOR,
    cell_layers,
    cells_base,
    cells_frame,
    inset,
    outline_edges,
    release_maps,
    release_outline_style,
    risk_cells_frame,
    trace_density_deck,
    zones_box,
)
from odapp.maps import map_context as _map_context
from odapp.words import num, pct, unit_words
from odapp.zones_ui import zone_polygons
from odcore.knock import build_timeseries, mre_table
from odcore.od.engines.cab_stream import build_od_cabspotting, zone_drops_only
from odcore.od.odtable import read_counts_folder
from odcore.od.pairs import bound_contributions, prepare_pairs
from odcore.od.trips import HourIndex, build_od
from odcore.privacy import accounting as acc
from odcore.privacy import attack, pld
from odcore.privacy.accounting import budget as _budget
from odcore.privacy.attack import bounded_success_curve as _curve
from odcore.privacy.attack import person_others, risk_by_origin, risk_summary, roc_plain
from odcore.privacy.attack import user_risk as risk
from odcore.privacy.attack import week_risk as _week_risk
from odcore.privacy.audit import AuditConfig, audit_one_run
from odcore.privacy.design import WeekIndex
from odcore.privacy.design import design_report as _design_report
from odcore.privacy.live import (
    attack_tables,
    coherent_draws,
    delta_tables,
    person_success,
    trips_tables,
    weeks_tables,
)
from odcore.privacy.release import (
    Mode,
    cell_release_probability,
    release_counts_with_report,
    release_with_report,
)
from odcore.privacy.selection import compare_selection
from odcore.report import figures
from odcore.report.figures import PALETTE, integer_bins, legend_at, readable_log_ticks
from odcore.report.plain_json import jsonable
from odcore.report.teaching import AttackerPool, GameRules, round_others, round_success
from odcore.report.zone_compare import compare_zones
from odcore.space.zones import zone_names


def config_key(config) -> str:
    """The cache key of a frozen config dataclass: its type and the ``repr`` of every field, in order (the fields
    are numbers, strings, None and enums, whose ``repr`` tells every value apart)."""
    return type(config).__qualname__ + repr(tuple(getattr(config, f.name) for f in dataclasses.fields(config)))


# by fully qualified name, so that the engine's modules are imported only when a page uses them
CONFIG_TYPES = ("odcore.od.oddata.ODConfig", "odcore.privacy.release.ReleaseConfig")
HASH_FUNCS = dict.fromkeys(CONFIG_TYPES, config_key)
_resource = functools.partial(st.cache_resource, hash_funcs=HASH_FUNCS)
_data_cache = functools.partial(st.cache_data, hash_funcs=HASH_FUNCS)


def _kept(kind: str, build, *args, **kwargs):
    """``build(*args, **kwargs)``, kept on disk between launches (:func:`odapp.data.disk_cached`, keyed on the
    ``repr`` of the arguments): only for results that depend on numbers alone, not on any data (the privacy-loss
    tables take seconds and are the same on every server, for every person)."""
    return _data.disk_cached(kind, repr((args, sorted(kwargs.items()))), lambda: build(*args, **kwargs))


def _live_json(tables):
    """A :mod:`odcore.privacy.live` table builder whose tables come back as the browser reads them."""
    return lambda *args: {k: t.to_json() for k, t in tables(*args).items()}


def release_session_files(folder: str) -> None:
    """The end of a session (Streamlit calls this when its browser's connection closes): its uploads' tables leave
    the server-wide caches (their open files are closed) and its private folder is removed."""
    p = Path(folder)
    if p.is_dir():
        for f in p.glob("*.parquet"):
            upload_traces.clear(str(f))
        if any(p.glob("cabs_*")):       # its streamed cab files: their tables and fixes are held by these caches
            upload_cab_traces.clear()
            streamed_od.clear()
    private.remove(p)


@_resource(scope="session", on_release=release_session_files, show_spinner=False)
def session_files(existing: str = "") -> str:
    """This session's private folder: ``existing`` (the one its state names, made before this run) or a new one
    (:func:`odapp.private.new_session_folder`); removed by :func:`release_session_files` when the session's
    connection closes."""
    return existing or str(private.new_session_folder())


@_resource(max_entries=2, show_spinner="Reading the bundled synthetic city…")
def sample_traces(dataset_id: str) -> _data.Loaded:
    return _data.disk_cached("sample", dataset_id, _data.load_sample)


@_resource(max_entries=12, show_spinner="Reading the uploaded traces…")
def upload_traces(path: str) -> _data.Loaded:
    """An upload's traces, read once from its session's Parquet file (:class:`odapp.data.StoredUpload`);
    at most 12 uploads are held in memory server-wide (~32 MB per million rows each), others are read again when
    used. Fewer entries than sessions working at once would make every rerun a miss (least recently used goes
    first, and the sessions take turns), so this is sized for ten people at once."""
    return _data.StoredUpload(path, {}).load()


@_resource(max_entries=2, show_spinner="Reading every fix of the uploaded cab files…")
def upload_cab_traces(cabs) -> _data.Loaded:
    """The table of fixes of a streamed Cabspotting upload (:class:`odapp.data.StreamedCabs`), read by the loader
    only for the pages that need every fix (Knock Knock series, the zone comparison); the weekly counts never ask
    for it (:func:`streamed_od`)."""
    return _data.StoredUpload(cabs.folder, {}, {}, cabs).load()


@_resource(max_entries=8, show_spinner="Streaming the cab files into weekly trips on the grid…")
def streamed_od(dataset_id: str, od_config, cabs, _summary: dict):
    """Weekly OD data of a streamed Cabspotting upload on ``od_config``'s zones
    (:func:`odcore.od.engines.cab_stream.build_od_cabspotting`: the tables of :func:`od_data` of the loaded table),
    with the fixes per zone for the Data page's map (``stats["cell_points"]``). The upload's pass found the box,
    the region and the kept fixes' extent (``_summary``, its load report) and kept the parsed fixes: this pass
    filters them by that box and runs the kernel; on the upload pass's own zones its tables are read back instead
    (:meth:`odapp.data.StreamedCabs.first_od`)."""
    first = cabs.first_od(od_config)
    if first is not None:
        return first
    lo = cabs.load_options
    return zone_drops_only(build_od_cabspotting(cabs.folder, od_config, bbox=_summary.get("bbox_used"),
                                time_offset_s=lo.get("time_offset_s", 0.0), name=cabs.name, cell_points=True,
                                keep_dir=cabs.keep_dir, extent=(*_summary["lat_range"], *_summary["lon_range"])))


@_resource(max_entries=4, show_spinner="Synthesising a city…")
def synth_traces(users: int, weeks: int, extent_km: float, seed: int) -> _data.Loaded:
    return _data.load_synth(users, weeks, extent_km, seed)


@_resource(max_entries=16, show_spinner="Cutting traces into weekly trips on the grid…")
def od_data(dataset_id: str, od_config, _df):
    """:func:`odcore.od.trips.build_od` of the dataset ``dataset_id`` (``_df`` is its trace table), from the dataset's
    :func:`hour_index` (another grid does not sort the traces again)."""
    def build():
        return build_od(_df, od_config, hours=hour_index(dataset_id, od_config.tz, _df=_df))

    if dataset_id.startswith("sample:"):
        # the bundled city on a grid, on H3 or on a zone file of the app's own (by content: an uploaded zone file
        # is never written to disk)
        shipped = _data.shipped_file_hash(od_config.zones)
        if od_config.zones is None or ":" in str(od_config.zones) or shipped is not None:
            return _data.disk_cached("od", f"{dataset_id}|{od_config!r}|{shipped}", build)
    return build()


@_resource(max_entries=4, show_spinner=False)
def hour_index(dataset_id: str, tz: str, _df):
    """:class:`odcore.od.trips.HourIndex` of the dataset (rows in (user, hour) order, projected coordinates kept per
    projection), shared by every grid, zone system, session and page (read-only)."""
    return HourIndex.of(_df, tz)


@_resource(max_entries=4, show_spinner="Reading the OD counts folder…")
def counts_folder(dataset_id: str, path: str):
    """:func:`odcore.od.odtable.read_counts_folder` (``dataset_id`` changes when the folder is rewritten)."""
    return read_counts_folder(path)


# ---- budget (odcore.privacy.accounting) --------------------------------------------------------------------------------

@_data_cache(max_entries=64, show_spinner="Computing exact budgets (privacy-loss distributions)…")
def budget(config) -> dict:
    return _kept("budget", _budget, config)


@_data_cache(max_entries=64, show_spinner=False)
def median_trips(dataset_id: str, od_config, week: int, _od) -> float | None:
    """The median number of unique trips of the week's users (None for a week without users). Every page's headline
    asks for it on every rerun; filtering the user-week table for it took 3-9 ms of a rerun's ~50-80 ms."""
    uw = _od.user_week
    trips = uw.loc[uw["week"].to_numpy() == week, "unique_trips"]
    return float(trips.median()) if len(trips) else None


@_data_cache(max_entries=64, show_spinner="Computing exact budgets (privacy-loss distributions)…")
def epsilon_vs_trips(epsilon: float, trips_max: int, delta: float):
    return _kept("vstrips", acc.epsilon_vs_trips, epsilon, trips_max=trips_max, delta=delta)


@_data_cache(max_entries=64, show_spinner="Computing exact budgets (privacy-loss distributions)…")
def epsilon_over_weeks(epsilon: float, trips: int, weeks: int, delta: float, interval: float | None = None,
                       lower: bool = True):
    return _kept("overweeks", acc.epsilon_over_weeks, epsilon, trips=trips, weeks=weeks, delta=delta,
                 interval=interval, lower=lower)


@_data_cache(max_entries=64, show_spinner="Computing exact budgets (privacy-loss distributions)…")
def epsilon_delta_curve(epsilon: float, k: int):
    return acc.epsilon_delta_curve(epsilon, k=k)


def budget_curves(epsilon: float, trips: int, weeks: int, delta: float, trips_max: int,
                  interval: float | None = None):
    """The budget page's curves against n and over weeks, each cached on its own inputs only (moving the weeks
    recomputes one). ``interval``: loss-grid step of the many-week tight bracket, of which the chart draws the upper
    end only (the lower end, for the chart's CSV: :func:`epsilon_over_weeks` with ``lower``). ε against δ is drawn
    from its live table; its exact values (:func:`epsilon_delta_curve`) are made for its files only."""
    return (epsilon_vs_trips(epsilon, trips_max, delta),
            epsilon_over_weeks(epsilon, trips, weeks, delta, interval, lower=False))


# ---- data page -------------------------------------------------------------------------------------------------

@_resource(max_entries=16, show_spinner=False)
def cell_density(dataset_id: str, od_config, _df, _grid, _od=None):
    """``DataFrame[cell, points]``: trace points per grid cell (every cell of the grid, zeros included), and the
    points outside every cell; from the OD data's own counts when it has them (``stats["cell_points"]``: a streamed
    folder, whose table ``_df`` is not read)."""
    if _od is not None and "cell_points" in _od.stats:
        counts = _od.stats["cell_points"]
        outside = sum(v for k, v in (_od.stats.get("rows_dropped") or {}).items()
                      if k == getattr(_grid, "outside_reason", "outside_grid"))
        return pd.DataFrame({"cell": np.arange(_grid.n_cells), "points": counts}), int(outside)
    cells = hour_index(dataset_id, od_config.tz, _df=_df).cells(_grid)   # the rows' cells, as the trips have them
    inside = cells.min(initial=0) >= 0   # usually every row (the grid is fitted to them): no mask to make
    counts = np.bincount(cells if inside else cells[cells >= 0], minlength=_grid.n_cells)
    outside = 0 if inside else int(np.count_nonzero(cells < 0))
    return pd.DataFrame({"cell": np.arange(_grid.n_cells), "points": counts}), outside


@_data_cache(max_entries=32, show_spinner=False)
def od_summary(dataset_id: str, od_config, threshold: int, _od) -> dict:
    """:meth:`odcore.od.oddata.ODData.summary` (the Data page's figures; computed once per data, grid and τ)."""
    return _od.summary(threshold=threshold)


@_resource(max_entries=8, show_spinner="Drawing the trace points on the grid…")
def trace_density_map(dataset_id: str, od_config, _df, _grid, _od=None):
    """The Data page's map: trace points per zone (log colour scale; the empty zones as :func:`empty_zones_drawn`
    says), with a scale bar. Returns ``(deck, most, outside)``: the most trace points in one zone (where the colour
    scale ends) and the points outside every zone; the deck's JSON is made once and reused by every rerun and
    session."""
    density, outside = cell_density(dataset_id, od_config, _df=_df, _grid=_grid, _od=_od)
    draw = density if empty_zones_drawn(_grid) else density[density["points"] > 0]
    shapes = cell_shapes(dataset_id, od_config, None if len(draw) == _grid.n_cells
                         else tuple(int(x) for x in draw["cell"]), _grid=_grid)
    deck, _ = trace_density_deck(shapes.merge(draw, on="cell"), _grid)
    return deck, int(density["points"].to_numpy().max(initial=0)), outside


MAX_GRID_CELLS_DRAWN = 20_000   # above this, the Data map draws only the zones that hold points


def empty_zones_drawn(grid) -> bool:
    """Whether the Data page's map draws the zones that hold no trace point: the squares' (as outlines) and a zone
    file's (pale grey: a named zone with nothing in it is worth seeing), up to :data:`MAX_GRID_CELLS_DRAWN` zones.
    Not H3 hexagons: theirs are the hexagons of a box fitted around the data, about half of them empty on the bundled
    city (1,677 of 3,657 at res 8), and drawing them (pale grey) made each press that draws the map 50–90 ms slower
    in the browser (docs/benchmarks.md, "The Data map without its empty hexagons")."""
    return grid.n_cells <= MAX_GRID_CELLS_DRAWN and getattr(grid, "kind", "square") != "h3"


@_resource(max_entries=16, show_spinner=False)
def cell_shapes(dataset_id: str, od_config, cells: tuple[int, ...] | None, _grid):
    """Outlines (``cell, name, polygon``) of ``cells`` (all cells when None) for pydeck: squares, hexagons or the
    user's polygons (:func:`odapp.zones_ui.zone_polygons`)."""
    c = np.arange(_grid.n_cells) if cells is None else np.asarray(cells, dtype=np.int64)
    return zone_polygons(_grid, c)


@_data_cache(max_entries=16, show_spinner="Comparing zone systems: trips, release and attack for each…")
def zone_comparison(dataset_id: str, tz: str, specs: tuple[str, ...], epsilon: float, threshold: float,
                    week: int, seed: int, _df):
    """:func:`odcore.report.zone_compare.compare_zones` of the dataset (same ε, τ, week and seed for every zone system)."""
    return compare_zones(_df, list(specs), epsilon=epsilon, threshold=threshold, week=week, tz=tz, rng=seed)


# ---- release (odcore.privacy.release / odcore.privacy.utility) -----------------------------------------------------------------

@_resource(max_entries=16, show_spinner=False)
def week_pairs_prepared(dataset_id: str, od_config, week: int, _od):
    """One week's unique pairs checked, sorted and counted once (:func:`odcore.od.pairs.prepare_pairs`): every
    release of that week (each ε, threshold, mode and seed a slider visits, in every session) starts from it."""
    return prepare_pairs(_od.week_pairs(week))


@_resource(max_entries=32, show_spinner="Adding noise and thresholding…")
def week_release(dataset_id: str, od_config, week: int, release_config, seed: int, _od):
    """:func:`odcore.privacy.release.release_with_report` of one week's unique pairs (same seed, same noise)."""
    if not _od.stats.get("pairs_available", True):   # an OD counts folder: the release from its counts
        return release_counts_with_report(_od.week_counts(week), release_config, rng=seed)
    return release_with_report(week_pairs_prepared(dataset_id, od_config, week, _od=_od), release_config, rng=seed)


@_resource(max_entries=64, show_spinner=False)
def release_cells(dataset_id: str, od_config, week: int, release_config, bounding_seed: int | None, _table, _grid,
                  _cent):
    """``(cell_p, cells_df, edges, layers)`` of a week's release: per origin cell the exact chance that one of its
    pairs is published (:func:`odcore.privacy.release.cell_release_probability`), the map's cell frame (:func:`odapp.maps.
    cells_frame`), the cells' outlines (:func:`release_cells_base`) and the map's layers of both, their JSON
    made once (:func:`odapp.maps.cell_layers`). They depend on the true counts and the release settings, not on the
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


@_resource(max_entries=16, show_spinner=False)
def release_cells_base(dataset_id: str, od_config, cells_key: str, _cell_p, _grid, _cent):
    """:func:`odapp.maps.cells_base` of the cells with observed pairs (``cells_key``: a digest of their ids and
    pair counts) and how the map tells them apart (:func:`odapp.maps.release_outline_style`): their
    :func:`odapp.maps.inset` (a zone file) or None (squares and H3: gaps), shared by
    every ε, threshold and seed of a week."""
    # cell_shapes' outlines without its cache: this entry is the cache of these cells' outlines, and Streamlit
    # hashing a tuple of a thousand cell ids for cell_shapes' key took longer than drawing them
    shapes = zone_polygons(_grid, _cell_p["cell"].to_numpy(np.int64))
    base = cells_base(shapes, _cell_p, _cent)
    style, polys = release_outline_style(_grid), base["polygon"].tolist()
    return base, (outline_edges(polys) if style == "lines" else inset(polys) if style == "insets" else None)


@_resource(max_entries=64, show_spinner=False)
def release_map(dataset_id: str, od_config, week: int, release_config, seed: int, view: str, top_n: int,
                min_count: float, cell: int | None, show_suppressed: bool, basemap: bool, level: str, _table, _cent,
                _cells_df, _edges=None, _base_layers=None, context: bool = False, _context=None,
                risk: bool = False):
    """The OD release page's map(s) (:func:`odapp.maps.release_maps`) with decks whose JSON is made once: a rerun
    that changes nothing on the map (another control, a return to earlier settings) sends the same text again
    without rebuilding it. Read-only, shared by the sessions with the same settings and seed."""
    return release_maps(_table, _cent, _cells_df, view=view, top_n=top_n, min_count=min_count,
                        threshold=release_config.threshold, cell=cell, show_suppressed=show_suppressed,
                        basemap=basemap, frozen=True, edges=_edges, base_layers=_base_layers, level=level,
                        context=_context if context else None, risk=risk)


@_resource(max_entries=16, show_spinner="Attacking every person of the week…")
def risk_cells(dataset_id: str, od_config, week: int, release_config, seed: int, _cells, _grid, _od):
    """``(cells_df, layers)``: the week's release-map cells (``_cells``: :func:`release_cells`) shaded by the attack
    success on the people who start a trip in each (:func:`odcore.privacy.attack.risk_by_origin` of
    :func:`week_risk`, the Attack page's entry), for the map's per-person risk."""
    pairs, counts = attack_pairs(dataset_id, od_config, week, release_config, seed, _od=_od)
    risk, _, _ = week_risk(dataset_id, od_config, week, release_config, seed, _pairs=pairs, _counts=counts)
    cells = risk_cells_frame(_cells[1], risk_by_origin(pairs, risk, week))
    return cells, cell_layers(cells, _cells[2], encoded=True, outline=release_outline_style(_grid),
                              color=RISK_COLOR)


@_resource(max_entries=8, show_spinner=False)
def map_context(dataset_id: str, od_config, _cells_df, _frame=None, _fixes=None):
    """The release map's offline base layer (:func:`odapp.maps.map_context`) round the zones of ``_cells_df``, with
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


@_resource(max_entries=64, show_spinner=False)
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


@_resource(max_entries=16, show_spinner=False)
def used_centroids(dataset_id: str, od_config, _od):
    """Centroids (``cell, lat, lon``, and ``name`` for hexagons and polygons) of the zones that hold data (for arcs
    and tooltips)."""
    c = _od.centroids()
    if getattr(_od.grid, "kind", "square") == "square":   # squares are "zone <id>" in every tooltip (odapp.maps.zone_label)
        return c
    return c.assign(name=zone_names(_od.grid, c["cell"].to_numpy()))


# ---- attack (odcore.privacy.attack) -------------------------------------------------------------------------------------

@_data_cache(max_entries=64, show_spinner=False)
def success_curve(epsilon: float, k_max: int, prior: float):
    """Exact p_k (equal priors), the Bayes success at ``prior`` and the posterior bound, for k = 0..k_max."""
    k = np.arange(k_max + 1)
    df = pd.DataFrame({"k": k, "success": attack.success_curve(epsilon, k_max),
                       "bound": attack.posterior_bound(epsilon, 0.5)})
    if prior != 0.5:
        df["bayes_success"] = np.asarray(attack.bayes_success(k, epsilon, prior), dtype=float)
        df["posterior_bound_prior"] = attack.posterior_bound(epsilon, prior)
    return df


@_data_cache(max_entries=32, show_spinner="Computing per-person budgets…")
def person_curves(epsilon: float, max_pairs: int, delta: float, vs_trips, over_weeks):
    """Add ``person_tight`` to the budget curves: per person with contribution bounding, the tight ε of a week
    for n trips (the min(n, m)-fold Laplace(ε/m)) and over 1..W weeks (upper end of the bracket)."""
    week, total = person_columns(epsilon, int(max_pairs), delta, int(vs_trips["trips"].max()),
                                 int(over_weeks["weeks"].max()))
    return vs_trips.assign(person_tight=week), over_weeks.assign(person_tight=total)


@_data_cache(max_entries=64, show_spinner=False)
def person_columns(epsilon: float, max_pairs: int, delta: float, trips_max: int, weeks: int):
    """:func:`person_curves`' two columns, for n = 1..trips_max and w = 1..weeks (cached: every rerun of the budget
    page in the per-person unit draws them)."""
    def build(epsilon, m, delta, trips_max, weeks):
        n = np.minimum(np.arange(1, trips_max + 1), m)
        week = np.asarray(pld.epsilon_for_delta(delta, n, epsilon / m), dtype=float)
        w = np.arange(1, weeks + 1)
        step = acc.person_weeks_interval(epsilon, weeks)
        _, hi = pld.composed_epsilon_curve(delta, m, epsilon / m, w, interval=step)
        return week, np.minimum(hi, w * epsilon)

    return _kept("personcolsrel", build, float(epsilon), int(max_pairs), float(delta), int(trips_max), int(weeks))


@_resource(max_entries=8, show_spinner="Indexing the week's pairs for the designer…")
def design_week(dataset_id: str, od_config, week: int, _od):
    """:class:`odcore.privacy.design.WeekIndex` of one week (seed-independent, read-only): a new seed only re-ranks it."""
    return WeekIndex(week_pairs_prepared(dataset_id, od_config, week, _od=_od))


@_data_cache(max_entries=16, show_spinner="Designing the release (searching max pairs, noise and threshold)…")
def design_report(dataset_id: str, od_config, week: int, goal, max_pairs: int | None, seed: int, _od,
                  tune: bool = False) -> dict:
    """:func:`odcore.privacy.design.design_report` on one week of the data (with the frontier), JSON-able."""
    uw = _od.user_week
    trips = uw.loc[uw["week"] == week, "unique_trips"].to_numpy()
    return jsonable(_design_report(goal, design_week(dataset_id, od_config, week, _od=_od), trips, week=week,
                                    max_pairs=max_pairs, tune=tune, rng=seed, with_frontier=True))


@_data_cache(max_entries=64, show_spinner=False)
def bounded_success_curve(epsilon: float, max_pairs: int, k_max: int):
    """:func:`odcore.privacy.attack.bounded_success_curve`: the per-person (bounded) release, k = 0..k_max."""
    return _curve(epsilon, max_pairs, k_max)


def pairs_key(release_config, seed: int) -> tuple:
    """What the week's (user, pair) rows of a release depend on besides data and week (:func:`attack_pairs`, the
    attacker pool): per user, the contribution bound and the seed of :func:`odcore.od.pairs.bound_contributions`; per
    metric nothing (not ε, threshold or seed)."""
    if release_config.mode is Mode.USER_LEVEL:
        return (release_config.mode.value, int(release_config.max_pairs), int(seed))
    return (release_config.mode.value,)


def attack_pairs(dataset_id: str, od_config, week: int, release_config, seed: int, _od):
    """The week's (user, pair) rows the release counts, and per pair the count of *other* users' trips.

    Per-metric: every unique pair; user-level: the pairs kept by :func:`odcore.od.pairs.bound_contributions`
    (seeded as the release). Returns ``(pairs, counts or None)`` as :func:`odcore.privacy.attack.week_risk` takes them.
    Built once per data, week and :func:`pairs_key`: an ε or threshold press (and, per metric, a seed) reuses them.
    """
    return _attack_pairs(dataset_id, od_config, week, pairs_key(release_config, seed),
                         _release_config=release_config, _seed=seed, _od=_od)


@_resource(max_entries=16, show_spinner=False)
def _attack_pairs(dataset_id: str, od_config, week: int, key: tuple, _release_config, _seed: int, _od):
    release_config, seed = _release_config, _seed
    if release_config.mode is Mode.USER_LEVEL:   # the week as the release prepared it (and its seed's draw)
        pairs, _ = bound_contributions(week_pairs_prepared(dataset_id, od_config, week, _od=_od),
                                       release_config.max_pairs, rng=seed)
        return pairs, None
    counts = _od.counts
    return _od.week_pairs(week), counts.loc[counts["week"].to_numpy() == week]


@_resource(max_entries=16, show_spinner=False)
def attack_users(dataset_id: str, od_config, week: int, key: tuple, _pairs):
    """The Attack page's people of the week: unique pairs per user (``Series`` indexed by user, sorted), from
    :func:`attack_pairs`' rows of :func:`pairs_key` ``key``. Grouping ~10⁵ rows took about a third of every rerun
    of the page, a rerun with nothing changed included. Shared and read-only."""
    return _pairs.groupby("user", sort=True).size()


@_data_cache(max_entries=256, show_spinner=False)
def attack_others(dataset_id: str, od_config, week: int, key: tuple, user, _pairs, _counts):
    """Per pair of ``user``, the count of the *other* users who made it (the attacker's knowledge in
    :func:`odcore.privacy.attack.user_risk`), as a float array (:func:`odcore.privacy.attack.person_others`: from
    the person's rows of :func:`attack_pairs` and the rows on their pairs, not a table of the whole week)."""
    return person_others(_pairs, _counts, week, user)


@_resource(max_entries=16, show_spinner="Attacking every user of the week…")
def week_risk(dataset_id: str, od_config, week: int, release_config, seed: int, _pairs, _counts):
    risk, report = _week_risk(_pairs, week, 1.0 / release_config.scale, release_config.threshold, counts=_counts)
    return risk, report, risk_summary(risk)


def user_risk(others: tuple[float, ...], epsilon_pair: float, threshold: float):
    """:func:`odcore.privacy.attack.user_risk` with its ROC, and the ROC of the same person with every pair published
    (:func:`~odcore.privacy.attack.roc_plain`, which a threshold change does not touch: kept on its own)."""
    return _user_risk(others, epsilon_pair, threshold), _roc_plain(len(others), epsilon_pair)


@_data_cache(max_entries=64, show_spinner=False)
def _user_risk(others: tuple[float, ...], epsilon_pair: float, threshold: float):
    return risk(list(others), epsilon_pair, threshold, roc=True)


@_data_cache(max_entries=64, show_spinner=False)
def _roc_plain(k: int, epsilon_pair: float):
    return roc_plain(k, epsilon_pair)


# ---- teaching mode (odcore.report.teaching) ----------------------------------------------------------------------------

def attacker_pool(dataset_id: str, od_config, week: int, release_config, seed: int, _od):
    """:class:`odcore.report.teaching.AttackerPool` of the week, for the release's mode (bounded pairs per user); built
    once per data, week and :func:`pairs_key` (an ε, threshold or, per metric, seed change reuses it)."""
    return _attacker_pool(dataset_id, od_config, week, pairs_key(release_config, seed), _release_config=release_config,
                          _seed=seed, _od=_od)


@_resource(max_entries=8, show_spinner="Listing the week's people and their trips…")
def _attacker_pool(dataset_id: str, od_config, week: int, pool_key: tuple, _release_config, _seed: int, _od):
    pairs, counts = attack_pairs(dataset_id, od_config, week, _release_config, _seed, _od=_od)
    return AttackerPool.from_pairs(pairs, counts)


def game_theory(dataset_id: str, od_config, week: int, release_config, seed: int, game_seed: int, k: int,
                rounds: int, _pool):
    """Exact success of the optimal attacker on each of the first ``rounds`` rounds of level ``k``
    (:func:`odcore.report.teaching.expected_success`). The rounds' pairs are drawn once per pool, game seed and k; an ε or
    threshold change only recomputes the successes (:func:`odcore.report.teaching.round_success`, batched)."""
    pool_key = pairs_key(release_config, seed)
    others = _round_others(dataset_id, od_config, week, pool_key, game_seed, k, rounds, _pool=_pool)
    return _round_success(dataset_id, od_config, week, pool_key, game_seed, k, rounds, release_config.epsilon,
                          release_config.threshold, release_config.sensitivity, _others=others)


@_resource(max_entries=32, show_spinner="Dealing the game's rounds…")
def _round_others(dataset_id: str, od_config, week: int, pool_key: tuple, game_seed: int, k: int, rounds: int,
                  _pool):
    out = round_others(_pool, k, game_seed, rounds)
    out.setflags(write=False)
    return out


@_data_cache(max_entries=64, show_spinner="Computing the optimal attacker's exact success on the game's rounds…")
def _round_success(dataset_id: str, od_config, week: int, pool_key: tuple, game_seed: int, k: int, rounds: int,
                   epsilon: float, threshold: float, sensitivity: int, _others):
    return round_success(_others, GameRules(epsilon, threshold, sensitivity))


# ---- Knock Knock (odcore.knock) ---------------------------------------------------------------------------------

@_resource(max_entries=4, show_spinner="Building location time-series (10 × 10 grid, hourly)…")
def knock_series(dataset_id: str, ts_config, _df):
    """:func:`odcore.knock.build_timeseries` of the dataset (heavy, read-only: not copied per rerun)."""
    return build_timeseries(_df, ts_config)


@_data_cache(max_entries=16, show_spinner="Measuring the defences' error…")
def knock_mre(dataset_id: str, ts_config, mre_config, _ts):
    return mre_table(_ts, mre_config)


@_resource(max_entries=16, show_spinner=False)
def frontier_figure(report_key: tuple, projector_on: bool, _rep: dict):
    """The Release designer's frontier chart of one report (``report_key``: the arguments of
    ``cache.design_report``), built once: a sidebar control the report does not depend on (ε, threshold, unit)
    reruns the page without rebuilding it. Read-only once built. Returns ``(figure, frontier DataFrame)``. (Here, not
    in the page script: Streamlit's cache machinery was seen holding the function it wraps, and with it the page's
    namespace.)"""
    g, d = _rep["google"], _rep["goal"]["delta"]
    front = pd.DataFrame(_rep["frontier"])
    # the traces as plain dicts, checked once by the figure (add_scatter checks each twice: ~half the build)
    traces = []
    for m, grp in front.groupby("max_pairs"):
        useful = grp["useful"] if "useful" in grp else pd.Series(True, index=grp.index)
        tr = {"type": "scatter", "x": grp["epsilon_user_week"], "y": grp["trips_published_frac"],
              "mode": "lines+markers", "name": f"max pairs {m} (threshold fitted, δ ≤ {d:.0e})",
              "marker": {"symbol": ["circle" if u else "circle-open" for u in useful], "size": 8}}
        if "relative_error" in grp:
            tr["customdata"] = grp[["relative_error"]].to_numpy()
            tr["hovertemplate"] = ("ε %{x:.3g}: %{y:.1%} of user-trips, expected error %{customdata[0]:.1%}"
                                   "<extra></extra>")
        traces.append(tr)
    # Google's two points named in the legend (text beside them crossed the curves), one marker each
    for who, key, trips, symbol in (("typical person", "epsilon_user_week_typical", g["typical_trips"], "x"),
                                    ("busiest person", "epsilon_user_week_max", g["max_trips"], "diamond")):
        traces.append({"type": "scatter", "x": [g[key]], "y": [g["trips_published_frac"]], "mode": "markers",
                       "marker": {"size": 12, "symbol": symbol, "color": "#66a61e"}, "cliponaxis": False,
                       "name": f"Google per-count (ε 0.66, threshold 100), {who} ({trips} trips)"})
    traces.append({"type": "scatter", "x": [_rep["epsilon_user_week"]], "y": [_rep["trips_published_frac"]],
                   "mode": "markers", "marker": {"size": 14, "symbol": "star"},
                   "name": "this design (one seeded release)"})
    fig = go.Figure(data=traces)
    styled(fig, f"Share of user-trips published against ε {unit_words('user_level')}, week {_rep['week']}",
           height=480)
    layout = {}
    if not projector_on:   # the legend under the plot on a screen too: at its right it squeezed the plot to a third
        extra = sum(1 for t in fig.data if t.name) * 20 + 10
        layout.update(legend=legend_at({}, True), height=480 + extra, margin={"b": 70 + extra})
    layout.update(xaxis_title=f"ε {unit_words('user_level')} (tight, δ = {d / 2:.0e} + thresholding)",
                  yaxis_title="share of user-trips on published pairs", xaxis_type="log", yaxis_tickformat=".0%")
    xs = [*front["epsilon_user_week"], g["epsilon_user_week_typical"], g["epsilon_user_week_max"],
          _rep["epsilon_user_week"]]
    xs = [float(x) for x in xs if x is not None and float(x) > 0]
    if xs:   # plain tick labels, not plotly's minor digits ("5 0.1 2 5 1 2")
        vals, labels = readable_log_ticks(min(xs) / 1.2, max(xs) * 1.2)
        layout.update(xaxis_tickvals=vals, xaxis_ticktext=labels)
    fig.update_layout(**layout)   # one update: each walks the template-laden layout
    return fig, front


def _finite(values) -> list:
    """Floats, None for a missing or non-finite value (JSON has no NaN; the browser leaves a gap)."""
    return [float(v) if v is not None and math.isfinite(float(v)) else None for v in values]


@_resource(max_entries=16, show_spinner=False)
def frontier_chart(report_key: tuple, _rep: dict) -> dict:
    """The Release designer's frontier chart of one report as the live component draws it
    (:func:`odapp.live_view.frontier`; ``report_key``: the arguments of ``cache.design_report``): the same traces,
    names, colours and axes as :func:`frontier_figure`, which stays for the PNG/SVG files. Drawn on a canvas, a
    press that changes the design repaints it in a few milliseconds instead of plotly's ~140 ms. Read-only."""
    g, d = _rep["google"], _rep["goal"]["delta"]
    front = pd.DataFrame(_rep["frontier"])
    series = []
    for i, (m, grp) in enumerate(front.groupby("max_pairs")):
        useful = grp["useful"].tolist() if "useful" in grp else [True] * len(grp)
        x, y = (_finite(grp[c]) for c in ("epsilon_user_week", "trips_published_frac"))
        err = _finite(grp["relative_error"]) if "relative_error" in grp else [None] * len(grp)
        hover = [None if xx is None or yy is None else f"max pairs {m}, ε {xx:.3g}: {pct(yy)} of user-trips"
                 + ("" if e is None else f", expected error {pct(e)}") for xx, yy, e in zip(x, y, err, strict=True)]
        series.append({"name": f"max pairs {m} (threshold fitted, δ ≤ {d:.0e})", "key": f"max_pairs_{m}", "x": x,
                       "y": y, "marker": 4, "line": True, "width": 2, "open": [not bool(u) for u in useful],
                       "hover": hover, "color": PALETTE[i % 5]})

    def point(name, key, x, y, symbol, size, colour):   # one marker, left out when it has no place on the axes
        x, y = _finite([x])[0], _finite([y])[0]
        ok = x is not None and y is not None and x > 0
        series.append({"name": name, "key": key, "x": [x if ok else None], "y": [y if ok else None],
                       "marker": size, "symbol": symbol, "color": colour,
                       "hover": [f"{name}: ε {x:.3g}, {pct(y)} of user-trips" if ok else None]})

    for who, key, trips, symbol in (("typical person", "epsilon_user_week_typical", g["typical_trips"], "x"),
                                    ("busiest person", "epsilon_user_week_max", g["max_trips"], "diamond")):
        point(f"Google per-count (ε 0.66, threshold 100), {who} ({trips} trips)", f"google_{who.split()[0]}",
              g[key], g["trips_published_frac"], symbol, 6, PALETTE[5])
    point("this design (one seeded release)", "design", _rep["epsilon_user_week"], _rep["trips_published_frac"],
          "star", 7, PALETTE[7])
    xs = [x for s_ in series for x in s_["x"] if x is not None and x > 0]
    top = max([y for s_ in series for y in s_["y"] if y is not None] + [0.01])
    chart = {"id": "frontier", "title": f"Share of user-trips published against ε {unit_words('user_level')}, "
                                        f"week {_rep['week']}",
             "xlabel": f"ε {unit_words('user_level')} (tight, δ = {d / 2:.0e} + thresholding)",
             "ylabel": "share of user-trips on published pairs", "xlog": True, "ypct": True,
             "ymin": -0.04 * top, "ymax": 1.08 * top,   # room for the markers at 0 and at the top
             "legend": "below", "height": 420, "series": series}
    if xs:   # plain tick labels, with room for the markers at both ends
        lo, hi = min(xs) / 1.2, max(xs) * 1.2
        vals, labels = readable_log_ticks(lo, hi)
        chart.update(xmin=lo, xmax=hi, xtickvals=vals, xticktext=labels)
    return chart


# ---- audit (odcore.privacy.audit / odcore.privacy.selection) -------------------------------------------------------

@_data_cache(max_entries=16, show_spinner="Auditing the release: canaries in, one release, guesses…")
def audit(dataset_id: str, od_config, week: int, epsilon: float, threshold: float, unit: str, placement: str,
          canaries: int, seed: int, _od) -> dict:
    """:func:`odcore.privacy.audit.audit_one_run` of one week (cached per data, zones, week and settings)."""
    cfg = AuditConfig(epsilon=epsilon, threshold=threshold, unit=unit, placement=placement, canaries=canaries)
    return audit_one_run(_od.week_pairs(week), cfg, week=week, rng=seed).to_dict()


@_data_cache(max_entries=16, show_spinner="Comparing partition selection strategies…")
def selection_table(dataset_id: str, od_config, week: int, epsilon: float, delta: float, max_pairs: int, seed: int,
                    _od):
    """:func:`odcore.privacy.selection.compare_selection` of one week, without PipelineDP (a test dependency), from
    the week's pairs prepared once (:func:`week_pairs_prepared`, shared with the releases): a new seed only ranks
    the rows by the hash of its key."""
    return compare_selection(week_pairs_prepared(dataset_id, od_config, week, _od=_od), epsilon=epsilon, delta=delta,
                             max_pairs=max_pairs, week=week, rng=seed, pipeline_dp=False)


# ---- live curves (odcore.privacy.live): tables on a grid of ε, drawn by the browser while ε is dragged --------------

@_resource(max_entries=32, show_spinner="Tabulating the attack curves for the live slider…")
def live_attack_tables(k_max: int, max_pairs: int | None) -> dict:
    """:func:`odcore.privacy.live.attack_tables` as the browser reads them (shared by every session, read-only)."""
    return _kept("liveattack", _live_json(attack_tables), k_max, max_pairs)


@_resource(max_entries=32, show_spinner="Tabulating the budget curves for the live slider…")
def live_trips_tables(trips_max: int, delta: float, max_pairs: int | None) -> dict:
    """:func:`odcore.privacy.live.trips_tables` as the browser reads them (shared, read-only)."""
    return _kept("livetrips", _live_json(trips_tables), trips_max, delta, max_pairs)


@_resource(max_entries=32, show_spinner="Tabulating ε against δ for the live slider…")
def live_delta_tables(trips: int) -> dict:
    """:func:`odcore.privacy.live.delta_tables` as the browser reads them (shared, read-only)."""
    return _kept("livedelta", _live_json(delta_tables), trips)


@_resource(max_entries=32, show_spinner="Tabulating the budget over weeks for the live slider (a few seconds)…")
def live_weeks_tables(trips: int, weeks: int, delta: float, relative_step: float, max_pairs: int | None) -> dict:
    """:func:`odcore.privacy.live.weeks_tables` as the browser reads them (shared, read-only; ``relative_step``: the
    loss-grid step per unit of ε, :data:`odcore.privacy.accounting.WEEKS_RELATIVE_STEP`)."""
    return _kept("liveweeksrel", _live_json(weeks_tables), trips, weeks, delta, relative_step, max_pairs)


@_resource(max_entries=16, show_spinner=False)
def live_release(dataset_id: str, od_config, week: int, mode: str, max_pairs: int | None, seed: int,
                 sensitivity: float, _scale: float, _table) -> dict:
    """The OD release page's live tables: the unit draws by true count (:func:`odcore.privacy.live.coherent_draws`)
    and the histogram of the true counts (bins up to twice the largest threshold), shared and read-only. Not keyed
    on ε or the threshold: ``_scale`` only turns the week's noise into unit draws, which are the same for every ε
    and threshold of a seed (the release draws ``scale · u``)."""
    tc = _table["true_count"].to_numpy(dtype=float)
    p99 = float(np.percentile(tc, 99)) if len(tc) else 1.0
    hist, edges = integer_bins(tc, max(1000.0, p99), max_bins=400)
    keep = hist > 0
    return {"draws": coherent_draws(tc, _table["noise"].to_numpy(dtype=float), _scale, sensitivity), "p99": p99,
            "bars": {"x": ((edges[:-1] + edges[1:]) / 2)[keep].tolist(), "w": np.diff(edges)[keep].tolist(),
                     "y": hist[keep].astype(float).tolist()}}


@_data_cache(max_entries=64, show_spinner="Tabulating this person's attack success for the live slider…")
def live_person(others: tuple[float, ...], max_pairs: int, thresholds: tuple[float, ...] | float) -> list[float]:
    """:func:`odcore.privacy.live.person_success` (``others``: sorted counts, as for :func:`user_risk`)."""
    return person_success(others, max_pairs, thresholds).tolist()
