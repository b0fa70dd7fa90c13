"""One trace -> weekly OD pipeline, three engines: ``memory`` (numpy), ``duckdb`` (embedded, out of core) and
``spark`` (PySpark, local mode here, ``spark-submit`` on a cluster).

Every engine implements the same definition (Houssiau et al. 2022, Methods; Bassolas et al. 2022): the zone of a
point from the zone object's ``assign``, winner takes all per user-hour with ties to the lower cell id, trips to a
distinct cell in the next hour counted in the week of the origin hour, distinct users per (week, origin,
destination). The per-row parts are shared code (:mod:`odcore.od.kernel`); the engines differ only in how they
group rows, and ``tests/odcore/od/test_engines.py`` requires identical tables.

>>> from odcore.od.engines import ENGINES
>>> ENGINES
('memory', 'duckdb', 'spark')
"""

from __future__ import annotations

import importlib.util
from dataclasses import replace
from typing import Any

from odcore.data.traces import Traces
from odcore.errors import ParameterError
from odcore.od.engines.cab_stream import build_od_cabspotting
from odcore.od.engines.duckdb_engine import build_od_duckdb
from odcore.od.engines.memory_stream import build_od_memory_stream
from odcore.od.engines.sources import FileSource, SourceTraces, file_source, is_streamable
from odcore.od.engines.spark_engine import build_od_spark
from odcore.od.kernel import ENGINES, check_engine, grid_of_frame
from odcore.od.pairs import bounded_counts
from odcore.od.trips import ODConfig
from odcore.od.trips import build_od as build_memory

__all__ = ["ENGINES", "FileSource", "SourceTraces", "bound_and_trim", "build_od", "file_source", "is_streamable"]


def build_od(traces: Any, config=None, *, grid=None, engine: str = "memory", keep_pairs: bool = True,
             bound: tuple[int, int] | None = None, describe: bool = False, fingerprint: bool = True,
             **engine_options: Any):
    """Weekly unique OD data of ``traces`` computed by ``engine``.

    Parameters
    ----------
    traces:
        A trace DataFrame (``user, time, lat, lon``), a :class:`odcore.data.traces.Traces`, or a
        :class:`~odcore.od.engines.sources.FileSource` (Parquet/CSV files each engine streams itself: the memory
        engine in user shards, :mod:`odcore.od.engines.memory_stream`; a Cabspotting folder,
        ``file_source(folder, format="cabspotting")``, which the memory engine streams in groups of cab files,
        :mod:`odcore.od.engines.cab_stream`, with the loader's report in ``stats["load_report"]``).
    config:
        :class:`odcore.od.oddata.ODConfig` (cell area, time zone).
    grid:
        Zone object (``assign(lat, lon) -> int64``, ``n_cells``; e.g. :class:`~odcore.space.grid.SquareGrid`). Default:
        :func:`odcore.od.kernel.fit_zones` of the kept points' min/max (same in every engine).
    engine:
        ``memory``, ``duckdb`` or ``spark``.
    keep_pairs:
        Return every user's unique pairs too (``ODData.pairs``; the attacks need them). Without them the result
        holds counts and per-user-week figures only (``stats["pairs_available"] = False``).
    bound:
        ``(max_pairs, key)``: also the per-pair counts after per-person bounding by the keyed hash of
        :mod:`odcore.od.bounding` (``stats["bounded_counts"]``, :data:`odcore.od.pairs.BOUNDED_COLUMNS`;
        ``stats["bounding"]``: user-weeks and bounded user-weeks), identical in every engine for a key; DuckDB and
        Spark compute them in SQL, so no per-person table is needed (``keep_pairs=False``); the memory engine
        bounds its pairs in numpy. Spark with ``keep_pairs=False`` then brings aggregates only to the driver: the
        result's ``per_user`` is False, its ``user_week`` refuses any use
        (:class:`~odcore.errors.AggregatesOnlyError`) and ``user_week_histogram()``, ``unique_trips_figures()``
        and ``summary()`` give the same figures as the other engines.
    describe:
        DuckDB and Spark, a :class:`~odcore.od.engines.sources.FileSource`: also what the loader would report of the
        fixes it keeps, computed by the engine (``stats["traces"]``, ``stats["loader_drops"]``,
        ``stats["fingerprint"]``; :class:`~odcore.od.engines.sources.SourceTraces` shows them as a loaded
        table's summary). The memory engine ignores it (its callers load or stream the input themselves).
    fingerprint:
        With ``describe``: also hash the kept fixes (``stats["fingerprint"]``, for the release's private record);
        False skips that pass and leaves it None.
    engine_options:
        ``duckdb``: ``memory_limit``, ``threads``, ``temp_dir``, ``shard_rows``; ``spark``: ``spark`` (a session),
        ``master``, ``driver_memory``; ``memory``: ``shard_rows``, ``workers``, ``pool`` (files only).

    Returns
    -------
    odcore.od.oddata.ODData
    """
    engine = check_engine(engine)
    config = config or ODConfig()
    if isinstance(traces, Traces):
        traces = traces.df
    if engine == "memory":
        if isinstance(traces, FileSource) and traces.format == "cabspotting":
            od = build_od_cabspotting(traces.paths[0], config, grid=grid, bbox=traces.bbox, start=traces.start,
                                      end=traces.end, time_offset_s=traces.time_offset_s,
                                      region=traces.extra.get("region"), keep_pairs=keep_pairs or bound is not None,
                                      **engine_options)
        elif isinstance(traces, FileSource):
            od = build_od_memory_stream(traces, config, grid=grid, keep_pairs=keep_pairs or bound is not None,
                                        **engine_options)
        else:
            if grid is None:
                grid = grid_of_frame(traces, config)
            od = build_memory(traces, config, grid=grid, **engine_options)
        return bound_and_trim(od, keep_pairs=keep_pairs, bound=bound)
    if isinstance(traces, FileSource) and traces.format == "cabspotting":
        raise ParameterError(f"engine={engine!r} does not read Cabspotting files itself: stream the folder with "
                             "engine='memory', or pass the table of odcore.data.traces.load_traces.")
    if engine == "duckdb":
        return build_od_duckdb(traces, config, grid=grid, keep_pairs=keep_pairs, bound=bound, describe=describe,
                               fingerprint=fingerprint, **engine_options)
    if importlib.util.find_spec("pyspark") is None:
        raise ParameterError("engine='spark' needs PySpark, an optional extra: pip install 'odlab[spark]' (or "
                             "pip install pyspark; Java 17+ too).")
    return build_od_spark(traces, config, grid=grid, keep_pairs=keep_pairs, bound=bound, describe=describe,
                          fingerprint=fingerprint, **engine_options)


def bound_and_trim(od, *, keep_pairs: bool = True, bound: tuple[int, int] | None = None):
    """The memory engine's ``bound`` and ``keep_pairs`` on its OD data (built with every pair): the bounded counts
    of :func:`odcore.od.pairs.bounded_counts` added to ``stats``, the pairs dropped when not kept."""
    if bound is not None:
        table, rep = bounded_counts(od.pairs, bound[0], bound[1])
        od = replace(od, stats={**od.stats, "bounded_counts": table, "bounding": rep})
    if not keep_pairs:
        od = _without_pairs(od)
    return od


def _without_pairs(od):
    return replace(od, pairs=od.pairs.iloc[:0], stats={**od.stats, "pairs_available": False})
