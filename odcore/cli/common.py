"""What every subcommand that reads traces or builds weekly OD counts does with its options (added by
:func:`odcore.cli.parser.add_loader_args` and :func:`odcore.cli.parser.add_grid_args`): the traces, the zones, the
engine and the week's OD data.
"""

from __future__ import annotations

import argparse
import codecs
import re
import sys
import zipfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds

from odcore.constants import FORMAT_TZ
from odcore.data import traces as trace_files
from odcore.data.regions import find_regions, pick_region, spans_metro, zone_of_box
from odcore.data.traces import (
    BBox,
    LoadReport,
    RobustBoxCounts,
    Traces,
    resolve_mapping,
    trace_format,
)
from odcore.data.validate import check_grid_size, parse_times
from odcore.errors import ParameterError, TraceFormatError
from odcore.od.engines import SourceTraces, bound_and_trim, build_od, file_source, is_streamable
from odcore.od.engines.cab_stream import stream_cabspotting
from odcore.od.kernel import DROP_CODES
from odcore.od.odtable import NO_PAIRS_REASON, CountsInput, is_counts_folder, read_counts_folder
from odcore.od.trips import ODConfig, ODData
from odcore.space.zones import parse_zone_spec

STREAM_BYTES = 256 * 2**20   # the memory engine streams CSV inputs from this size (Parquet: any size, and folders)



def _format_of(args: argparse.Namespace) -> str:
    return getattr(args, "format", "auto") or "auto"


def resolve_tz(args: argparse.Namespace, fmt: str | None = None) -> str:
    """The time zone in effect: ``--tz`` unless ``auto``, then the format's local zone or UTC."""
    tz = getattr(args, "tz", "auto") or "auto"
    if tz != "auto":
        return tz
    found = getattr(args, "tz_found", None)    # set by traces_from_args / stream_source_from_args
    if found:
        return found
    return FORMAT_TZ.get(fmt or _format_of(args), "UTC")


def mapping_from_args(args: argparse.Namespace) -> dict[str, str] | None:
    """The column mapping given by ``--user-col`` ... ``--time-unit`` (None: detect common column names).

    >>> mapping_from_args(argparse.Namespace(user_col="id", time_col="ts", lat_col=None, lon_col=None,
    ...                                      loc_col=None, time_unit="s"))
    {'user': 'id', 'time': 'ts', 'time_unit': 's'}
    """
    m = {role: getattr(args, f"{role}_col", None) for role in ("user", "time", "lat", "lon", "loc")}
    m["time_unit"] = getattr(args, "time_unit", None)
    m = {k: v for k, v in m.items() if v}
    return m or None


def traces_from_args(args: argparse.Namespace) -> Traces:
    """Load the traces named by :func:`odcore.cli.parser.add_loader_args` options."""
    if is_counts_folder(getattr(args, "input", None)):
        raise ParameterError(f"--input {args.input}: this command needs traces, but {NO_PAIRS_REASON}")

    fmt = _format_of(args)
    bbox = getattr(args, "bbox", None)
    if isinstance(bbox, str) and bbox.strip().lower() in ("", "none", "off"):
        bbox = None
    tz = getattr(args, "tz", "auto") or "auto"
    tr = trace_files.load_traces(args.input, format=fmt, tz=tz, time_offset_s=getattr(args, "time_offset", 0.0) or 0.0,
                     bbox=bbox, start=getattr(args, "start", None), end=getattr(args, "end", None),
                     poi_source=getattr(args, "poi", None), mapping=mapping_from_args(args),
                     region=getattr(args, "region", None))
    args.tz_found = tr.report.tz
    return tr


def od_config_from_args(args: argparse.Namespace, fmt: str | None = None):
    """The :class:`odcore.od.oddata.ODConfig` of ``--zones`` (or ``--cell-km2``) and ``--tz``."""
    zones = getattr(args, "zones", None) or None
    explicit = getattr(args, "_explicit", frozenset())
    if zones is not None and "cell_km2" in explicit and "zones" in explicit:
        raise ParameterError("give --zones or --cell-km2, not both (--cell-km2 K is --zones square:K).")
    return ODConfig(cell_km2=getattr(args, "cell_km2", 1.3), tz=resolve_tz(args, fmt), zones=zones)


def grid_note(df, cell_km2: float) -> None:
    """Refuse a grid over :data:`odcore.data.validate.MAX_GRID_CELLS` cells; note on stderr a continent-wide one."""
    _, warning = check_grid_size(df["lat"].to_numpy(), df["lon"].to_numpy(), cell_km2)
    if warning:
        print(f"note: {warning}", file=sys.stderr)


def zones_note(df, cfg) -> None:
    """:func:`grid_note` for square zones (``--cell-km2`` or ``--zones square:KM2``); H3 covers and zone files have
    their own limits (:data:`odcore.space.hexagons.MAX_H3_CELLS`, :data:`odcore.space.zones.MAX_ZONES`)."""
    spec = parse_zone_spec(cfg.zones) if cfg.zones is not None else None
    if spec is None or spec.kind == "square":
        grid_note(df, cfg.cell_km2 if spec is None else spec.value)


def engine_options(args: argparse.Namespace) -> dict:
    """Engine keyword arguments of ``--engine --memory-limit --spark-master``."""
    engine = getattr(args, "engine", "memory") or "memory"
    if engine == "duckdb":
        return {"memory_limit": getattr(args, "memory_limit", "3GB")}
    if engine == "spark":
        return {"master": getattr(args, "spark_master", "local[2]")}
    return {}


def stream_source_from_args(args: argparse.Namespace):
    """A :class:`odcore.od.engines.FileSource` when ``--input`` names generic Parquet/CSV files the engine reads
    itself: always for duckdb/spark; for the memory engine Parquet files (without a location id column, which the
    loader keeps) and CSV files of :data:`STREAM_BYTES` or more, streamed in chunks of whole users or user shards.
    Else None (the loader reads the input)."""
    if not is_streamable(args.input, _format_of(args)):
        return None
    if (getattr(args, "engine", "memory") or "memory") == "memory":
        src = file_source(args.input, format=_format_of(args), mapping=mapping_from_args(args))
        if src.format != "parquet" and src.n_bytes < STREAM_BYTES:
            return None
        if src.format == "parquet" and not Path(args.input).is_dir():
            try:
                loc_id = first_batch_facts(src)[2]
            except (pa.ArrowException, OSError):   # not readable as Parquet: the loader says why, naming the file
                return None
            if loc_id:
                return None
    bbox = getattr(args, "bbox", None)
    if isinstance(bbox, str) and bbox.strip().lower() in ("", "none", "off"):
        bbox = None
    fmt = _format_of(args)
    region = getattr(args, "region", None)
    if isinstance(region, str) and re.search(r"[,\s]", region.strip()):
        bbox = region                              # a box given as the region
    want_tz = (getattr(args, "tz", "auto") or "auto") == "auto"
    found: dict = {}
    if want_tz or not (region is None or str(region).strip().lower() in ("", "all", "none", "off")):
        bbox, zone = source_place(file_source(args.input, format=fmt, mapping=mapping_from_args(args)), bbox,
                                  region, found)
        if want_tz:
            args.tz_found = zone
    args.place_found = {**found, "tz_source": found.get("tz_source") if want_tz else "given"}
    return file_source(args.input, format=fmt, mapping=mapping_from_args(args), tz=resolve_tz(args, None),
                       time_offset_s=getattr(args, "time_offset", 0.0) or 0.0, bbox=bbox,
                       start=getattr(args, "start", None), end=getattr(args, "end", None))


def source_place(src, bbox, region, found: dict | None = None) -> tuple:
    """``(box, zone)`` that ``load_traces(bbox=..., region=..., tz="auto")`` gives a streamed Parquet/CSV source,
    by the loader's rules: the robust box (:class:`odcore.data.traces.RobustBoxCounts` of every usable row) or the
    given box; the densest region (or rank N) of users' homes when that box spans more than a metropolitan area
    (:func:`odcore.data.regions.find_regions`, on the usable rows' user, lat and lon); the zone a zone-aware
    Parquet time column states, else the zone at the centre of the box kept. ``box`` is the box's ``"S,W,N,E"``
    (the robust box found, or the box given; None for none) when no region applies, else the region's, so that the
    engine need not count the coordinates again. ``found`` (a dict) receives what the loader's report says of
    them: ``tz_source`` (``file`` or ``coordinates``), ``regions`` (dicts), ``region`` (the rank kept) and
    ``region_left_out`` (the usable fixes outside its box and the people with none inside it)."""
    found = {} if found is None else found
    found.update({"regions": [], "region": None, "region_left_out": None})

    data = ds.dataset(list(src.paths), format="parquet" if src.format == "parquet" else "csv")
    mp = resolve_mapping(list(data.schema.names), src.mapping, src.display)
    stated = getattr(data.schema.field(mp.time).type, "tz", None)
    cols = [mp.user, mp.time, mp.lat, mp.lon]

    def usable(b):
        ok = np.asarray(b.column(0).is_valid()) & np.asarray(b.column(1).is_valid())
        lat = b.column(2).to_numpy(zero_copy_only=False).astype(np.float64)
        lon = b.column(3).to_numpy(zero_copy_only=False).astype(np.float64)
        ok &= ~(np.isnan(lat) | np.isnan(lon))
        return ok, lat, lon

    if bbox is None:
        box = None
    elif isinstance(bbox, str) and bbox.strip().lower() == "auto":
        counts = RobustBoxCounts()
        for b in data.to_batches(columns=cols):
            ok, lat, lon = usable(b)
            counts.add(lat[ok], lon[ok])
        box = counts.box(source=src.display)
    else:
        box = BBox.parse(bbox)
    out = bbox if box is None else ",".join(str(v) for v in box.as_tuple())
    named = region is not None and str(region).strip().lower() not in ("", "all", "none", "off")
    if named and (str(region).strip().lower() != "auto" or box is None or spans_metro(box)):
        users, lats, lons = [], [], []
        for b in data.to_batches(columns=cols):
            ok, lat, lon = usable(b)
            users.append(b.column(0).filter(pa.array(ok)))
            lats.append(lat[ok])
            lons.append(lon[ok])

        ids = pa.chunked_array(users, type=users[0].type if users else pa.int64()).combine_chunks()
        if pa.types.is_integer(ids.type):
            u = pd.factorize(ids.to_numpy(zero_copy_only=False))[0]
        else:   # codes in order of first appearance, as pandas.factorize gives them, without a Python str per row
            if pa.types.is_dictionary(ids.type):
                ids = ids.cast(ids.type.value_type)
            u = ids.dictionary_encode().indices.to_numpy(zero_copy_only=False).astype(np.int64)
        la, lo = np.concatenate(lats), np.concatenate(lons)
        if str(region).strip().lower() != "auto" or spans_metro(box or BBox.robust(la, lo)):
            regions = find_regions(u, la, lo)
            r = pick_region(regions, region)
            box = BBox(*r.bbox)
            out = ",".join(str(v) for v in r.bbox)
            inside = (la >= box.south) & (la <= box.north) & (lo >= box.west) & (lo <= box.east)
            had = np.bincount(u, minlength=int(u.max()) + 1 if len(u) else 0) > 0
            has = np.bincount(u[inside], minlength=len(had)) > 0
            found.update({"regions": [x.as_dict() for x in regions], "region": r.rank,
                          "region_left_out": {"fixes": int((~inside).sum()), "people": int((had & ~has).sum())}})
    if stated:
        found["tz_source"] = "file"
        return out, str(stated)
    found["tz_source"] = "coordinates"
    if box is None:
        counts = RobustBoxCounts()
        for b in data.to_batches(columns=cols):
            ok, lat, lon = usable(b)
            counts.add(lat[ok], lon[ok])
        box = counts.box(source=src.display)
    return out, zone_of_box(box)


def require_pairs(od, what: str) -> None:
    """Refuse, in one line, a command that needs each person's pairs when the input is an OD counts folder
    (``what``: what the command does with them, e.g. "audit inserts canary people among the week's people")."""
    if not od.stats.get("pairs_available", True):
        raise ParameterError(f"{what}, but {NO_PAIRS_REASON}")


def streams_cabs(args: argparse.Namespace) -> bool:
    """True when ``--input`` is a Cabspotting folder (or one cab file; not a zip) and ``--engine`` is ``memory``:
    then the engine streams it in groups of cab files (:mod:`odcore.od.engines.cab_stream`) instead of loading it,
    with the same tables and load report."""
    inp = getattr(args, "input", None)
    if (getattr(args, "engine", "memory") or "memory") != "memory" or not isinstance(inp, (str, Path)):
        return False
    p = Path(inp)
    if not p.exists() or is_counts_folder(inp) or (p.is_file() and zipfile.is_zipfile(p)):
        return False
    if _format_of(args) not in ("auto", "cabspotting"):
        return False
    if p.is_dir() and any(f.is_dir() for f in p.iterdir()):
        return False                     # the loader reads only the folder's own files; leave nested ones to it
    return trace_format(inp, _format_of(args)) == "cabspotting"


def cabs_from_args(args: argparse.Namespace, *, keep_pairs: bool = True, bound: tuple[int, int] | None = None,
                   fingerprint: bool = False):
    """``(traces, od)`` of the Cabspotting folder ``--input`` streamed by the memory engine
    (:func:`odcore.od.engines.cab_stream.stream_cabspotting`): the tables, load report and summary that
    :func:`traces_from_args` and :func:`odcore.od.engines.build_od` give, ``traces`` a
    :class:`~odcore.od.engines.cab_stream.StreamedTraces` (its ``df`` is read only if a command needs the fixes).
    ``fingerprint``: hash the kept fixes as the release record does."""
    bbox = getattr(args, "bbox", None)
    if isinstance(bbox, str) and bbox.strip().lower() in ("", "none", "off"):
        bbox = None
    cfg = od_config_from_args(args, "cabspotting")

    def check(lat_min, lat_max, lon_min, lon_max):
        zones_note(pd.DataFrame({"lat": [lat_min, lat_max], "lon": [lon_min, lon_max]}), cfg)

    traces, od = stream_cabspotting(args.input, cfg, tz=getattr(args, "tz", "auto") or "auto", bbox=bbox,
                                    start=getattr(args, "start", None), end=getattr(args, "end", None),
                                    time_offset_s=getattr(args, "time_offset", 0.0) or 0.0,
                                    region=getattr(args, "region", None), keep_pairs=keep_pairs or bound is not None,
                                    fingerprint=fingerprint, check_bounds=check)
    args.tz_found = traces.report.tz
    return traces, bound_and_trim(od, keep_pairs=keep_pairs, bound=bound)


def engine_streams(args: argparse.Namespace) -> bool:
    """True when ``--engine`` is ``duckdb`` or ``spark`` and ``--input`` names generic Parquet/CSV files: then the
    engine reads them itself (:func:`engine_traces_from_args`), and this process never holds the table of fixes."""
    return ((getattr(args, "engine", "memory") or "memory") in ("duckdb", "spark")
            and is_streamable(getattr(args, "input", None), _format_of(args)))


def engine_traces_from_args(args: argparse.Namespace, *, fingerprint: bool = False, src=None, **build_options):
    """``(traces, od)`` of Parquet/CSV files read by ``--engine`` itself (``src``: the source of
    :func:`stream_source_from_args`, when already made): what
    :func:`traces_from_args` and :func:`odcore.od.engines.build_od` of the loaded table give (the same OD data,
    load report, summary, people and fingerprint), ``traces`` a :class:`odcore.od.engines.SourceTraces` whose
    figures the engine computed (``build_od(..., describe=True)``; its ``df`` is read only if a command needs the
    fixes). This process reads the input's schema, its first batch (the time unit) and, for the robust box and
    the time zone, its coordinates batch by batch (:func:`source_place`); never the whole table. The memory
    engine (:func:`odcore.od.engines.memory_stream.build_od_memory_stream`) counts the report's ``rows_adjusted``
    (naive times read by a daylight-saving rule or next to times with offsets) too; DuckDB and Spark leave it empty.
    ``fingerprint``: DuckDB and Spark also hash the kept fixes for the release's record (``traces.fingerprint``;
    else None)."""
    src = stream_source_from_args(args) if src is None else src
    cfg = od_config_from_args(args, src.format)
    od = build_od(src, cfg, engine=getattr(args, "engine", "memory") or "memory", describe=True,
                  fingerprint=fingerprint, **engine_options(args), **build_options)
    kept = od.stats["traces"]
    if kept["users"] < 2:
        raise TraceFormatError(f"only {kept['users']} user(s) after loading; weekly OD counts and attacks need at "
                               "least 2 users.", file=str(args.input), column="user")
    zones_note(_range_frame(kept), cfg)
    drops = od.stats.get("rows_dropped", {})
    loader = {k: drops[k] for k in DROP_CODES[:3] if drops.get(k)}
    loader.update(od.stats["loader_drops"])
    zone = {k: v for k, v in drops.items() if k not in DROP_CODES[:3] and k != "duplicate_row"}
    if zone:   # the zones drop the loaded table's rows: each distinct row once
        zone = {k: kept["outside_zones"] for k in zone}
    place = getattr(args, "place_found", {}) or {}
    unit, encoding, has_loc = first_batch_facts(src)
    bbox = od.stats.get("bbox_used")
    report = LoadReport(source=str(args.input), format=src.format, rows_read=int(od.stats["rows_read"]),
                        rows_kept=int(kept["rows"]), rows_dropped=loader,
                        bbox_used=None if bbox is None else tuple(float(v) for v in bbox), encoding=encoding,
                        rows_adjusted=dict(od.stats.get("rows_adjusted") or {}),
                        time_unit=unit, tz=cfg.tz, tz_source=place.get("tz_source") or "given",
                        regions=tuple(place.get("regions") or ()), region=place.get("region"),
                        region_left_out=place.get("region_left_out"))
    options = {"format": _format_of(args), "tz": cfg.tz if place.get("tz_source") == "given" else "auto",
               "time_offset_s": getattr(args, "time_offset", 0.0) or 0.0, "bbox": src.bbox, "start": src.start,
               "end": src.end, "mapping": mapping_from_args(args), "region": getattr(args, "region", None)}

    od = replace(od, stats={**od.stats, "rows_dropped": zone})
    return SourceTraces(report, kept, options, od.stats.get("fingerprint"), has_loc=has_loc), od


def _range_frame(kept: dict):
    return pd.DataFrame({"lat": kept["lat_range"], "lon": kept["lon_range"]})


def first_batch_facts(src) -> tuple[str | None, str | None, bool]:
    """``(time unit, encoding, has loc)`` the loader's report gives a Parquet/CSV input, from its schema and first
    batch: the unit :func:`odcore.data.validate.parse_times` finds in the first 10,000 times, the CSV's encoding from
    its byte-order mark (else ``utf-8``: DuckDB and Spark read CSV as UTF-8), and whether the column mapping finds
    a location id column."""
    if "://" in src.paths[0]:
        return None, None, False
    data = ds.dataset(list(src.paths[:1]), format="parquet" if src.format == "parquet" else "csv")
    mp = resolve_mapping(list(data.schema.names), src.mapping, src.display)
    unit = None
    for b in data.to_batches(columns=[mp.time], batch_size=10_000):
        if b.num_rows:
            _, info = parse_times(b.column(0).to_pandas(), mp.time_unit or "auto", src.tz, src.display, mp.time)
            unit = info.unit
            break
    encoding = None
    if src.format == "csv":
        with open(src.paths[0], "rb") as fh:
            head = fh.read(4)
        encoding = ("utf-8-sig" if head.startswith(codecs.BOM_UTF8) else
                    "utf-16" if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)) else "utf-8")
    return unit, encoding, mp.loc is not None


def od_from_args(args: argparse.Namespace, *, fingerprint: bool = False, **build_options) -> tuple[Traces, ODData]:
    """Load traces and build the weekly unique OD counts (grid, hourly locations, trips) with ``--engine``.

    An OD counts folder (``trips --counts-out DIR``) as ``--input`` gives its table directly (no per-person pairs:
    ``od.stats["pairs_available"]`` is False) and a :class:`odcore.od.odtable.CountsInput` in place of the traces.
    A Cabspotting folder with the memory engine is streamed (:func:`cabs_from_args`). Parquet/CSV files with
    ``--engine duckdb|spark`` are read by the engine (:func:`engine_traces_from_args`: the load report and people
    computed there, never loaded here). ``fingerprint`` asks a streamed input for the release record's hash of the
    fixes (a loaded table has its own). ``build_options`` go to :func:`odcore.od.engines.build_od`
    (``keep_pairs``, ``bound``).
    """
    if is_counts_folder(getattr(args, "input", None)):
        od = read_counts_folder(args.input)
        return CountsInput(od), od
    if streams_cabs(args):
        return cabs_from_args(args, fingerprint=fingerprint, **build_options)
    if engine_streams(args):
        return engine_traces_from_args(args, fingerprint=fingerprint, **build_options)
    traces = traces_from_args(args)
    cfg = od_config_from_args(args, traces.report.format)
    zones_note(traces.df, cfg)
    od = build_od(traces.df, cfg, engine=getattr(args, "engine", "memory") or "memory", **engine_options(args),
                  **build_options)
    return traces, od
