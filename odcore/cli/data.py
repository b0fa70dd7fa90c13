"""``python -m odcore synth`` and ``python -m odcore trips``: make a synthetic city; traces -> weekly OD figures."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from odcore.cli.common import add_grid_args, add_loader_args, od_config_from_args, traces_from_args
from odcore.constants import DEFAULT_SAMPLE_SEED
from odcore.paths import atomic_output, pause_for_test

# The defaults of odcore.data.synth.SynthConfig that the synth command shows, written out so that parsing arguments
# does not import the generator (and pandas); tests/odcore/cli/test_cli_data.py checks that they agree.
SYNTH_DEFAULTS = {"users": 25_000, "weeks": 1, "center": (33.7490, -84.3880), "extent_km": 20.0,
                  "start": "2024-01-08", "tz": "UTC"}


def register(sub: argparse._SubParsersAction) -> None:
    d = argparse.Namespace(**SYNTH_DEFAULTS)
    p = sub.add_parser("synth", help="generate a synthetic city's traces (Parquet or CSV)",
                       description="Generate a synthetic city (odcore.data.synth): homes, workplaces, commuting and "
                                   "exploration/preferential-return leisure trips, one location per user-hour.")
    p.add_argument("--users", type=int, default=d.users, help="number of users (default %(default)s)")
    p.add_argument("--weeks", type=int, default=d.weeks, help="number of weeks (default %(default)s)")
    p.add_argument("--seed", type=int, default=DEFAULT_SAMPLE_SEED, help="random seed (default %(default)s)")
    p.add_argument("--center", default=f"{d.center[0]},{d.center[1]}", metavar="LAT,LON",
                   help="city centre (default %(default)s, Atlanta)")
    p.add_argument("--extent-km", type=float, default=d.extent_km, help="city radius in km (default %(default)s)")
    p.add_argument("--start", default=d.start, help="first Monday, ISO date (default %(default)s)")
    p.add_argument("--tz", default=d.tz, help="local time zone of the daily schedule (default %(default)s)")
    p.add_argument("--out", required=True,
                   help="output file (.parquet or .csv[.gz]), or a folder (no suffix): Parquet files written in "
                        "chunks of users, for big cities (any size in the memory of one chunk)")
    p.add_argument("--chunk-users", type=int, default=200_000,
                   help="users per chunk when --out is a folder (default %(default)s)")
    p.add_argument("--json", action="store_true", help="print a JSON summary")
    p.set_defaults(func=run_synth)

    q = sub.add_parser("trips", help="traces -> hourly cells -> trips -> weekly unique OD counts (summary)",
                       description="Load traces, lay a square grid, keep the most used cell per user-hour, count "
                                   "trips to a distinct cell in the next hour and distinct users per week and "
                                   "cell pair (Houssiau et al. 2022, Methods; Bassolas et al. 2022).")
    add_loader_args(q)
    add_grid_args(q)
    q.add_argument("--threshold", type=int, default=100,
                   help="count pair-weeks with at least this many distinct users (default %(default)s)")
    q.add_argument("--counts-out", default=None, metavar="DIR|FILE",
                   help="DIR (no suffix): write an OD counts folder (Parquet partitioned by week, per-user-week "
                        "figures, zones, manifest.json) that every subcommand and the dashboard accept as --input; "
                        "FILE (.csv/.parquet): the weekly counts table (week, origin, origin_name, destination, "
                        "destination_name, count) and the used zones' geometry beside it (FILE's name + "
                        ".zones.geojson)")
    q.add_argument("--json", action="store_true", help="print JSON instead of text")
    q.set_defaults(func=run_trips)


COUNTS_FILE_SUFFIXES = (".csv", ".csv.gz", ".parquet", ".pq")


def counts_geometry_path(counts_file: Path) -> Path:
    """Where ``trips --counts-out FILE`` puts the used zones' geometry: FILE's name up to its first dot +
    ``.zones.geojson`` (never FILE itself: FILE must end in one of :data:`COUNTS_FILE_SUFFIXES`).

    >>> counts_geometry_path(Path("out/week.counts.csv")).as_posix()
    'out/week.zones.geojson'
    """
    return counts_file.with_name(counts_file.name.split(".")[0] + ".zones.geojson")


def _parse_center(text: str) -> tuple[float, float]:
    from odcore.errors import ParameterError

    try:
        lat, lon = (float(x) for x in text.split(","))
    except ValueError:
        raise ParameterError(f"--center must be LAT,LON, got {text!r}.") from None
    return lat, lon


def run_synth(args: argparse.Namespace) -> int:
    from odcore.cli import print_json
    from odcore.data.synth import SynthConfig, write_sample

    cfg = SynthConfig(users=args.users, weeks=args.weeks, center=_parse_center(args.center),
                      extent_km=args.extent_km, start=args.start, tz=args.tz)
    out = Path(args.out)
    t0 = time.perf_counter()
    if not out.suffix:
        from odcore.data.synth import write_city_chunked

        res = write_city_chunked(out, cfg, args.seed, chunk_users=args.chunk_users)
        info = {"out": str(out), "users": cfg.users, "weeks": cfg.weeks, "seed": args.seed, "rows": res["rows"],
                "files": len(res["files"]), "chunk_users": args.chunk_users,
                "bytes": sum(Path(f).stat().st_size for f in res["files"]),
                "seconds": round(time.perf_counter() - t0, 3)}
        if args.json:
            print_json(info)
        else:
            print(f"wrote {info['rows']:,} rows of {cfg.users:,} users x {cfg.weeks} week(s) to {out}/ in "
                  f"{info['files']} Parquet files ({info['bytes'] / 1e6:.1f} MB, {info['seconds']} s)")
        return 0
    with atomic_output(out) as tmp:
        if out.suffix.lower() in (".parquet", ".pq"):
            df = write_sample(tmp, cfg, args.seed)
        else:
            from odcore.data.synth import generate_city

            df = generate_city(cfg, args.seed)
            from odcore.report.safe_csv import write_csv  # pandas: loaded only when a CSV is written

            write_csv(df.assign(time=df["time"].dt.strftime("%Y-%m-%dT%H:%M:%SZ")), tmp)
    info = {"out": str(out), "users": cfg.users, "weeks": cfg.weeks, "seed": args.seed, "rows": len(df),
            "bytes": out.stat().st_size, "seconds": round(time.perf_counter() - t0, 3)}
    if args.json:
        print_json(info)
    else:
        print(f"wrote {info['rows']:,} rows of {cfg.users:,} users x {cfg.weeks} week(s) to {out} "
              f"({info['bytes'] / 1e6:.1f} MB, {info['seconds']} s)")
    return 0


def time_range(traces) -> dict[str, str]:
    """``time_min`` and ``time_max`` of the kept fixes (ISO, UTC): from a streamed folder's summary (its table is
    not read for them), else from the loaded table."""
    if getattr(traces, "kept", None) is not None:
        return {"time_min": traces.kept["time_min"], "time_max": traces.kept["time_max"]}
    return {"time_min": traces.df["time"].min().isoformat(), "time_max": traces.df["time"].max().isoformat()}


def run_trips(args: argparse.Namespace) -> int:
    from odcore.cli import print_json
    from odcore.cli.common import (
        cabs_from_args,
        engine_options,
        engine_traces_from_args,
        stream_source_from_args,
        streams_cabs,
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
    from odcore.space.grid import crs_label
    from odcore.space.zones import add_zone_names, write_zone_geometry, zones_summary

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
        if streams_cabs(args):
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
                        from odcore.report.safe_csv import write_csv  # pandas: loaded only for a CSV

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
