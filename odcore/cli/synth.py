"""``python -m odcore synth``: make a synthetic city's traces (:mod:`odcore.data.synth`) as Parquet or CSV."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from odcore.cli import print_json
from odcore.data.synth import SynthConfig, generate_city, write_city_chunked, write_sample
from odcore.errors import ParameterError
from odcore.paths import atomic_output
from odcore.report.safe_csv import write_csv


def _parse_center(text: str) -> tuple[float, float]:
    try:
        lat, lon = (float(x) for x in text.split(","))
    except ValueError:
        raise ParameterError(f"--center must be LAT,LON, got {text!r}.") from None
    return lat, lon


def run_synth(args: argparse.Namespace) -> int:
    cfg = SynthConfig(users=args.users, weeks=args.weeks, center=_parse_center(args.center),
                      extent_km=args.extent_km, start=args.start, tz=args.tz)
    out = Path(args.out)
    t0 = time.perf_counter()
    if not out.suffix:
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
            df = generate_city(cfg, args.seed)

            write_csv(df.assign(time=df["time"].dt.strftime("%Y-%m-%dT%H:%M:%SZ")), tmp)
    info = {"out": str(out), "users": cfg.users, "weeks": cfg.weeks, "seed": args.seed, "rows": len(df),
            "bytes": out.stat().st_size, "seconds": round(time.perf_counter() - t0, 3)}
    if args.json:
        print_json(info)
    else:
        print(f"wrote {info['rows']:,} rows of {cfg.users:,} users x {cfg.weeks} week(s) to {out} "
              f"({info['bytes'] / 1e6:.1f} MB, {info['seconds']} s)")
    return 0
