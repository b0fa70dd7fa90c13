"""``python -m odcore trips``: traces -> weekly OD figures (and an OD counts folder or file)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from odcore.cli import common, print_json
from odcore.cli.common import (
    cabs_from_args,
    engine_options,
    engine_traces_from_args,
    od_config_from_args,
    stream_source_from_args,
    traces_from_args,
    zones_note,
)
from odcore.data.traces import region_left_out_words
from odcore.errors import ParameterError
from odcore.od.engines import build_od
from odcore.od.odtable import (
    COUNTS_HASH_MEMBER,
    is_counts_folder,
    read_counts_folder,
    sha256_file,
    write_counts_folder,
)
from odcore.paths import atomic_output, pause_for_test
from odcore.report.safe_csv import write_csv
from odcore.space.grid import crs_label
from odcore.space.zones import add_zone_names, write_zone_geometry, zones_summary

COUNTS_FILE_SUFFIXES = (".csv", ".csv.gz", ".parquet", ".pq")


def counts_geometry_path(counts_file: Path) -> Path:
    """Where ``trips --counts-out FILE`` puts the used zones' geometry: FILE's name up to its first dot +
    ``.zones.geojson`` (never FILE itself: FILE must end in one of :data:`COUNTS_FILE_SUFFIXES`).

    >>> counts_geometry_path(Path("out/week.counts.csv")).as_posix()
    'out/week.zones.geojson'
    """
    return counts_file.with_name(counts_file.name.split(".")[0] + ".zones.geojson")


def time_range(traces) -> dict[str, str]:
    """``time_min`` and ``time_max`` of the kept fixes (ISO, UTC): from a streamed folder's summary (its table is
    not read for them), else from the loaded table."""
    if getattr(traces, "kept", None) is not None:
        return {"time_min": traces.kept["time_min"], "time_max": traces.kept["time_max"]}
    return {"time_min": traces.df["time"].min().isoformat(), "time_max": traces.df["time"].max().isoformat()}


def run_trips(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    engine = args.engine
    src = stream_source_from_args(args)
    traces = None
    folder_out = bool(args.counts_out) and not Path(args.counts_out).suffix
    if args.counts_out and not folder_out:
        cp = Path(args.counts_out)
        if not cp.name.lower().endswith(COUNTS_FILE_SUFFIXES):
            raise ParameterError(f"--counts-out {cp}: a counts file must end in .csv, .csv.gz, .parquet or .pq "
                                 "(or give a folder name without a suffix).")
    if is_counts_folder(args.input):   # an OD counts folder: its table as written
        od = read_counts_folder(args.input)
        t1 = time.perf_counter()
        cfg = od.config
        m = od.stats["manifest"]
        source, fmt, engine = m.get("source"), "od-counts-folder", m.get("engine")
        rows_read, rows_kept = od.stats.get("rows_read"), od.stats.get("rows_used")
        dropped = {}
        bbox_used = None
    elif src is None:   # the loader reads the input (any format; a Cabspotting folder is streamed, same report)
        if common.streams_cabs(args):
            traces, od = cabs_from_args(args, keep_pairs=not folder_out)
            t1 = t0
            cfg = od.config
        else:
            traces = traces_from_args(args)
            t1 = time.perf_counter()
            cfg = od_config_from_args(args, traces.report.format)
            zones_note(traces.df, cfg)
            od = build_od(traces.df, cfg, engine=engine, keep_pairs=engine == "memory" and not folder_out,
                          **engine_options(args))
        rep = traces.report
        source, fmt, rows_read, rows_kept = rep.source, rep.format, rep.rows_read, rep.rows_kept
        dropped = dict(rep.rows_dropped)
        bbox_used = rep.bbox_used
    elif engine == "memory":   # streamed in chunks of whole users or user shards, with the loader's report
        traces, od = engine_traces_from_args(args, src=src, keep_pairs=False)
        t1 = t0
        cfg = od.config
        rep = traces.report
        source, fmt, rows_read, rows_kept = rep.source, rep.format, rep.rows_read, rep.rows_kept
        dropped = dict(rep.rows_dropped)
        bbox_used = rep.bbox_used
    else:             # the engine streams the files itself (filters, duplicates and zones as the loader's)
        t1 = t0
        cfg = od_config_from_args(args, src.format)
        od = build_od(src, cfg, engine=engine, keep_pairs=False, **engine_options(args))
        source, fmt, rows_read, rows_kept = src.display, src.format, od.stats["rows_read"], od.stats["rows_used"]
        dropped = {}
        bbox_used = od.stats.get("bbox_used")
    t2 = time.perf_counter()
    s = od.summary(threshold=args.threshold)
    for k, v in od.stats.get("rows_dropped", {}).items():
        dropped[k] = dropped.get(k, 0) + v
    out = {
        "input": source,
        "format": fmt,
        "engine": engine,
        "tz": cfg.tz,
        "users": s["users"],
        "weeks": s["weeks"],
        "week_starts": s["week_starts"],
        **({} if traces is None else {
            "tz_source": traces.report.tz_source, "region": traces.report.region,
            "regions": [dict(r) for r in traces.report.regions[:5]],
            "region_left_out": getattr(traces.report, "region_left_out", None),
            "region_note": region_left_out_words(getattr(traces.report, "region", None),
                                                 getattr(traces.report, "region_left_out", None), "--region all"),
            "rows_adjusted": dict(traces.report.rows_adjusted), "encoding": traces.report.encoding,
            "time_unit": traces.report.time_unit, **time_range(traces)}),
        "rows_read": rows_read,
        "rows_kept": rows_kept,
        "rows_dropped": dropped,
        "bbox_used": list(bbox_used) if bbox_used else None,
        "cell_km2": s["cell_km2"],
        "zones": zones_summary(od.grid),
        "crs": s["crs"],
        "crs_name": crs_label(s["crs"]) if s.get("crs") else None,
        "cells": s["cells"],
        "grid_cells": s["grid_cells"],
        "user_hours": s["user_hours"],
        "trips": s["trips"],
        "unique_trips": s["unique_trips"],
        "unique_trips_per_user_week": s["unique_trips_per_user_week"],
        "od_pairs": s["od_pairs"],
        "threshold": s["threshold"],
        "od_pairs_over_threshold": s["od_pairs_over_threshold"],
        "max_count": s["max_count"],
        "seconds": {"load": round(t1 - t0, 3), "build_od": round(t2 - t1, 3)},
    }
    if folder_out:
        man = write_counts_folder(od, args.counts_out, source=source, engine=engine)
        out["counts_out"] = str(args.counts_out)
        out["counts_out_rows"] = man["rows"]["counts"]
    elif args.counts_out:
        p = Path(args.counts_out)
        table = add_zone_names(od.counts, od.grid)
        geo_path = counts_geometry_path(p)
        try:
            # two files, one set: the geometry names the SHA-256 of the counts file it goes with, so a reader
            # (odcore.od.odtable.read_counts_file) refuses the pair left by a run killed between the two renames
            with atomic_output(p) as tmp:
                with atomic_output(geo_path) as tmp_geo:
                    if p.suffix.lower() in (".parquet", ".pq"):
                        table.to_parquet(tmp, index=False)
                    else:
                        write_csv(table, tmp)
                    write_zone_geometry(od.grid, tmp_geo, od.cells,
                                        members={COUNTS_HASH_MEMBER: {"file": p.name, "sha256": sha256_file(tmp)}})
                pause_for_test("counts-out")   # between the renames: the new zones in place, the counts not yet
            geo = geo_path
        except OSError as exc:
            raise ParameterError(f"--counts-out {p}: cannot write ({exc}).") from None
        out["counts_out"] = str(p)
        out["zones_out"] = str(geo)
    if args.json:
        print_json(out)
    else:
        for k, v in out.items():
            print(f"{k}: {v}")
    return 0
