"""``python -m odcore districts`` (the bundled Voronoi districts of a city, ``sample_data/districts.geojson``) and
``python -m odcore zones-compare`` (same data, same ε and τ: what each zone system publishes and the attack's
success)."""

from __future__ import annotations

import argparse
from pathlib import Path

from odcore.cli import print_json
from odcore.cli.common import resolve_tz, traces_from_args
from odcore.errors import ParameterError
from odcore.paths import atomic_output
from odcore.report.safe_csv import write_csv
from odcore.report.zone_compare import compare_zones
from odcore.space.polygons import write_districts


def run_districts(args: argparse.Namespace) -> int:
    traces = traces_from_args(args)
    df = traces.df
    out = Path(args.out)

    with atomic_output(out) as tmp:   # all or nothing
        gdf = write_districts(tmp, df["lat"].to_numpy(), df["lon"].to_numpy(), args.n, rng=args.seed)
    info = {"out": str(out), "districts": len(gdf), "seed": args.seed, "bytes": out.stat().st_size,
            "bounds": [round(float(v), 5) for v in gdf.total_bounds]}
    if args.json:
        print_json(info)
    else:
        print(f"wrote {info['districts']} districts to {out} ({info['bytes']:,} bytes)")
    return 0


_COLUMNS = (("zones", "zones", "{}"), ("n_zones", "zones#", "{:,}"), ("zone_km2", "km2", "{:.2f}"),
            ("rows_outside", "outside", "{:,}"), ("od_pairs", "pairs", "{:,}"), ("pairs_published", "published",
            "{:,}"), ("user_trips_published_frac", "user-trips pub.", "{:.1%}"),
            ("median_unique_pairs", "median k", "{:g}"), ("median_success", "attack median", "{:.3f}"),
            ("p90_success", "attack p90", "{:.3f}"), ("share_above_90pct", ">90%", "{:.1%}"))


def run_zones_compare(args: argparse.Namespace) -> int:
    traces = traces_from_args(args)
    table = compare_zones(traces.df, list(args.zones), epsilon=args.epsilon, threshold=args.threshold,
                          week=args.week, tz=resolve_tz(args, traces.report.format), rng=args.seed)
    if args.out:
        try:
            with atomic_output(args.out) as tmp:
                write_csv(table, tmp)
        except OSError as exc:
            raise ParameterError(f"--out {args.out}: cannot write ({exc}).") from None
    if args.json:
        print_json(table.to_dict(orient="records"))
        return 0
    print(f"{traces.report.source}: week {int(table['week'].iloc[0])}, epsilon {args.epsilon:g}, threshold "
          f"{args.threshold:g}, {int(table['users'].max()):,} users")
    cells = [[fmt.format(r[k]) if k != "zones" else Path(str(r[k])).name for k, _, fmt in _COLUMNS]
             for r in table.to_dict(orient="records")]
    heads = [h for _, h, _ in _COLUMNS]
    widths = [max(len(h), *(len(row[i]) for row in cells)) for i, h in enumerate(heads)]
    print("  ".join(h.rjust(w) for h, w in zip(heads, widths, strict=True)))
    for row in cells:
        print("  ".join(v.rjust(w) for v, w in zip(row, widths, strict=True)))
    if args.out:
        print(f"wrote {args.out}")
    return 0
