"""The cached tables every page reads: the traces (bundled, uploaded, streamed cab files, synthetic), the weekly
trips on the grid, the hour index, a counts folder, and the Data page's densities, shapes and zone comparison.

Each session's private folder is a session-scoped resource, removed when its connection closes. The caching rules
(keys, ``_``-prefixed arguments, resources vs data) are :mod:`odapp.shared.caching`'s.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from odapp.data import disk_cache, loading, private
from odapp.data.zones_ui import zone_polygons
from odapp.maps.zones import trace_density_deck
from odapp.shared.caching import cache_data, cache_resource
from odcore.od.engines.cab_stream import build_od_cabspotting, zone_drops_only
from odcore.od.odtable import read_counts_folder
from odcore.od.pairs import prepare_pairs
from odcore.od.trips import HourIndex, build_od
from odcore.report.zone_compare import compare_zones


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


@cache_resource(scope="session", on_release=release_session_files, show_spinner=False)
def session_files(existing: str = "") -> str:
    """This session's private folder: ``existing`` (the one its state names, made before this run) or a new one
    (:func:`odapp.data.private.new_session_folder`); removed by :func:`release_session_files` when the session's
    connection closes."""
    return existing or str(private.new_session_folder())


@cache_resource(max_entries=2, show_spinner="Reading the bundled synthetic city…")
def sample_traces(dataset_id: str) -> loading.Loaded:
    return disk_cache.disk_cached("sample", dataset_id, loading.load_sample)


@cache_resource(max_entries=12, show_spinner="Reading the uploaded traces…")
def upload_traces(path: str) -> loading.Loaded:
    """An upload's traces, read once from its session's Parquet file (:class:`odapp.data.loading.StoredUpload`);
    at most 12 uploads are held in memory server-wide (~32 MB per million rows each), others are read again when
    used. Fewer entries than sessions working at once would make every rerun a miss (least recently used goes
    first, and the sessions take turns), so this is sized for ten people at once."""
    return loading.StoredUpload(path, {}).load()


@cache_resource(max_entries=2, show_spinner="Reading every fix of the uploaded cab files…")
def upload_cab_traces(cabs) -> loading.Loaded:
    """The table of fixes of a streamed Cabspotting upload (:class:`odapp.data.loading.StreamedCabs`), read by the loader
    only for the pages that need every fix (Knock Knock series, the zone comparison); the weekly counts never ask
    for it (:func:`streamed_od`)."""
    return loading.StoredUpload(cabs.folder, {}, {}, cabs).load()


@cache_resource(max_entries=8, show_spinner="Streaming the cab files into weekly trips on the grid…")
def streamed_od(dataset_id: str, od_config, cabs, _summary: dict):
    """Weekly OD data of a streamed Cabspotting upload on ``od_config``'s zones
    (:func:`odcore.od.engines.cab_stream.build_od_cabspotting`: the tables of :func:`od_data` of the loaded table),
    with the fixes per zone for the Data page's map (``stats["cell_points"]``). The upload's pass found the box,
    the region and the kept fixes' extent (``_summary``, its load report) and kept the parsed fixes: this pass
    filters them by that box and runs the kernel; on the upload pass's own zones its tables are read back instead
    (:meth:`odapp.data.loading.StreamedCabs.first_od`)."""
    first = cabs.first_od(od_config)
    if first is not None:
        return first
    lo = cabs.load_options
    return zone_drops_only(build_od_cabspotting(cabs.folder, od_config, bbox=_summary.get("bbox_used"),
                                time_offset_s=lo.get("time_offset_s", 0.0), name=cabs.name, cell_points=True,
                                keep_dir=cabs.keep_dir, extent=(*_summary["lat_range"], *_summary["lon_range"])))


@cache_resource(max_entries=4, show_spinner="Synthesising a city…")
def synth_traces(users: int, weeks: int, extent_km: float, seed: int) -> loading.Loaded:
    return loading.load_synth(users, weeks, extent_km, seed)


@cache_resource(max_entries=16, show_spinner="Cutting traces into weekly trips on the grid…")
def od_data(dataset_id: str, od_config, _df):
    """:func:`odcore.od.trips.build_od` of the dataset ``dataset_id`` (``_df`` is its trace table), from the dataset's
    :func:`hour_index` (another grid does not sort the traces again)."""
    def build():
        return build_od(_df, od_config, hours=hour_index(dataset_id, od_config.tz, _df=_df))

    if dataset_id.startswith("sample:"):
        # the bundled city on a grid, on H3 or on a zone file of the app's own (by content: an uploaded zone file
        # is never written to disk)
        shipped = disk_cache.shipped_file_hash(od_config.zones)
        if od_config.zones is None or ":" in str(od_config.zones) or shipped is not None:
            return disk_cache.disk_cached("od", f"{dataset_id}|{od_config!r}|{shipped}", build)
    return build()


@cache_resource(max_entries=4, show_spinner=False)
def hour_index(dataset_id: str, tz: str, _df):
    """:class:`odcore.od.trips.HourIndex` of the dataset (rows in (user, hour) order, projected coordinates kept per
    projection), shared by every grid, zone system, session and page (read-only)."""
    return HourIndex.of(_df, tz)


@cache_resource(max_entries=4, show_spinner="Reading the OD counts folder…")
def counts_folder(dataset_id: str, path: str):
    """:func:`odcore.od.odtable.read_counts_folder` (``dataset_id`` changes when the folder is rewritten)."""
    return read_counts_folder(path)


@cache_data(max_entries=64, show_spinner=False)
def median_trips(dataset_id: str, od_config, week: int, _od) -> float | None:
    """The median number of unique trips of the week's users (None for a week without users). Every page's headline
    asks for it on every rerun; filtering the user-week table for it took 3-9 ms of a rerun's ~50-80 ms."""
    uw = _od.user_week
    trips = uw.loc[uw["week"].to_numpy() == week, "unique_trips"]
    return float(trips.median()) if len(trips) else None


# ---- data page -------------------------------------------------------------------------------------------------

@cache_resource(max_entries=16, show_spinner=False)
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


@cache_data(max_entries=32, show_spinner=False)
def od_summary(dataset_id: str, od_config, threshold: int, _od) -> dict:
    """:meth:`odcore.od.oddata.ODData.summary` (the Data page's figures; computed once per data, grid and τ)."""
    return _od.summary(threshold=threshold)


@cache_resource(max_entries=8, show_spinner="Drawing the trace points on the grid…")
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


@cache_resource(max_entries=16, show_spinner=False)
def cell_shapes(dataset_id: str, od_config, cells: tuple[int, ...] | None, _grid):
    """Outlines (``cell, name, polygon``) of ``cells`` (all cells when None) for pydeck: squares, hexagons or the
    user's polygons (:func:`odapp.data.zones_ui.zone_polygons`)."""
    c = np.arange(_grid.n_cells) if cells is None else np.asarray(cells, dtype=np.int64)
    return zone_polygons(_grid, c)


@cache_data(max_entries=16, show_spinner="Comparing zone systems: trips, release and attack for each…")
def zone_comparison(dataset_id: str, tz: str, specs: tuple[str, ...], epsilon: float, threshold: float,
                    week: int, seed: int, _df):
    """:func:`odcore.report.zone_compare.compare_zones` of the dataset (same ε, τ, week and seed for every zone system)."""
    return compare_zones(_df, list(specs), epsilon=epsilon, threshold=threshold, week=week, tz=tz, rng=seed)


@cache_resource(max_entries=16, show_spinner=False)
def week_pairs_prepared(dataset_id: str, od_config, week: int, _od):
    """One week's unique pairs checked, sorted and counted once (:func:`odcore.od.pairs.prepare_pairs`): every
    release of that week (each ε, threshold, mode and seed a slider visits, in every session) starts from it."""
    return prepare_pairs(_od.week_pairs(week))
