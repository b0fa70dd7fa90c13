"""``python -m odcore districts``: the bundled Voronoi districts of a city (``sample_data/districts.geojson``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from odcore.cli.common import add_loader_args, traces_from_args


def register(sub: argparse._SubParsersAction) -> None:
    from odcore.zones import DEFAULT_DISTRICTS, DEFAULT_DISTRICTS_SEED

    p = sub.add_parser("districts", help="make Voronoi districts of a city's traces (a small zone file)",
                       description="Voronoi districts of the traces' points (seeds drawn among distinct points, "
                                   "so districts are small where people are dense), clipped to the circle that "
                                   "holds 99.5%% of the points; written as GeoJSON with 'district_id' and 'name'.")
    add_loader_args(p)
    p.add_argument("--n", type=int, default=DEFAULT_DISTRICTS, help="number of districts (default %(default)s)")
    p.add_argument("--seed", type=int, default=DEFAULT_DISTRICTS_SEED, help="random seed (default %(default)s)")
    p.add_argument("--out", required=True, help="output .geojson")
    p.add_argument("--json", action="store_true", help="print a JSON summary")
    p.set_defaults(func=run_districts)


def run_districts(args: argparse.Namespace) -> int:
    from odcore.cli import print_json
    from odcore.zones import write_districts

    traces = traces_from_args(args)
    df = traces.df
    out = Path(args.out)
    gdf = write_districts(out, df["lat"].to_numpy(), df["lon"].to_numpy(), args.n, rng=args.seed)
    info = {"out": str(out), "districts": len(gdf), "seed": args.seed, "bytes": out.stat().st_size,
            "bounds": [round(float(v), 5) for v in gdf.total_bounds]}
    if args.json:
        print_json(info)
    else:
        print(f"wrote {info['districts']} districts to {out} ({info['bytes']:,} bytes)")
    return 0
