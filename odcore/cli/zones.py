"""``python -m odcore districts`` (the bundled Voronoi districts of a city, ``sample_data/districts.geojson``) and
``python -m odcore zones-compare`` (same data, same ε and τ: what each zone system publishes and the attack's
success)."""

from __future__ import annotations

import argparse
from pathlib import Path

from odcore.cli.common import add_loader_args, resolve_tz, traces_from_args
from odcore.constants import DEFAULT_COMPARE_SPECS, DEFAULT_DISTRICTS, DEFAULT_DISTRICTS_SEED


def register(sub: argparse._SubParsersAction) -> None:
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

    from odcore.paths import SAMPLE_DATA_DIR

    default = [*DEFAULT_COMPARE_SPECS, str(SAMPLE_DATA_DIR / "districts.geojson")]
    c = sub.add_parser("zones-compare", help="compare zone systems: pairs and user-trips published, attack success",
                       description="On the same traces, epsilon and threshold: for each zone system, the weekly "
                                   "unique OD pairs, what the Laplace + threshold release publishes (pairs and "
                                   "user-trips) and the per-user membership attack's success (Houssiau et al. "
                                   "2022) over the week's users.")
    add_loader_args(c)
    c.add_argument("--zones", nargs="+", default=default, metavar="SPEC",
                   help="zone systems: square:KM2, h3:RES or zone files (default: " + " ".join(
                       DEFAULT_COMPARE_SPECS) + " and the bundled districts)")
    g = c.add_argument_group("release")
    g.add_argument("--epsilon", type=float, default=0.66, help="Laplace epsilon per count (default %(default)s)")
    g.add_argument("--threshold", type=float, default=100,
                   help="publish iff noisy count >= this (default %(default)s)")
    g.add_argument("--week", type=int, default=None,
                   help="week released and attacked (default: the week with the most user-pairs)")
    g.add_argument("--seed", type=int, default=1, help="random seed of the noise (default %(default)s)")
    c.add_argument("--out", default=None, metavar="FILE.csv", help="also write the table as CSV")
    c.add_argument("--json", action="store_true", help="print JSON records instead of a table")
    c.set_defaults(func=run_zones_compare)


def run_districts(args: argparse.Namespace) -> int:
    from odcore.cli import print_json
    from odcore.space.zones import write_districts

    traces = traces_from_args(args)
    df = traces.df
    out = Path(args.out)
    from odcore.paths import atomic_output

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
    from odcore.cli import print_json
    from odcore.errors import ParameterError
    from odcore.report.zone_compare import compare_zones

    traces = traces_from_args(args)
    table = compare_zones(traces.df, list(args.zones), epsilon=args.epsilon, threshold=args.threshold,
                          week=args.week, tz=resolve_tz(args, traces.report.format), rng=args.seed)
    if args.out:
        try:
            from odcore.paths import atomic_output
            from odcore.report.safe_csv import write_csv

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
