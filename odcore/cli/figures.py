"""``python -m odcore figures --out DIR [--preset ...]``: the paper set, each figure with the JSON that redraws it.

Figures (names for ``--only``): Houssiau et al.'s Fig. 1 per count and per person and week (``fig1_per_count``,
``fig1_per_person``), a person's ε over weeks (``budget_weeks``), the release probability (``release_probability``),
the week's flow map (``flow_map``), the zone comparison (``zone_comparison``) and a Knock Knock AUC chart
(``knock_auc``). Each is written as ``NAME.svg`` (fonts embedded), ``NAME.pdf`` and ``NAME.png`` at a size preset
(``single-column`` 3.5 in, ``double-column`` 7 in, ``slide`` 16:9) or ``--size WxH`` and ``--dpi``, with
``NAME.csv`` (the numbers drawn) and ``NAME.json``: ``python -m odcore figures --config NAME.json`` draws that
figure again. Every file is written at the end, all or nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path

from odcore.cli.common import add_grid_args, add_loader_args

FIGURES = ("fig1_per_count", "fig1_per_person", "budget_weeks", "release_probability", "flow_map",
           "zone_comparison", "knock_auc")
FORMATS = ("svg", "pdf", "png")
_NOT_CONFIG = frozenset({"out", "config", "func", "json"})


def register(sub: argparse._SubParsersAction) -> None:
    from odcore.constants import (
        SIZE_PRESET_NAMES,  # not odcore.report.figures: --help stays free of plotly/pandas
    )

    p = sub.add_parser("figures", help="write the paper set of figures (SVG/PDF/PNG at a size preset) with configs",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, metavar="DIR", help="output folder (created)")
    p.add_argument("--preset", default="single-column", choices=list(SIZE_PRESET_NAMES),
                   help="figure size: single-column 3.5 in, double-column 7 in, slide 16:9 (default %(default)s)")
    p.add_argument("--size", default=None, metavar="WxH", help="width x height in inches instead of the preset's")
    p.add_argument("--dpi", type=int, default=None, help="PNG resolution (default: the preset's)")
    p.add_argument("--formats", default=",".join(FORMATS), help="comma-separated among svg,pdf,png (default all)")
    p.add_argument("--only", default=",".join(FIGURES), metavar="NAME[,NAME]",
                   help="figures to draw (default all: " + ", ".join(FIGURES) + ")")
    g = p.add_argument_group("settings drawn")
    g.add_argument("--epsilon", type=float, default=0.66, help="ε (default %(default)s, Bassolas et al.)")
    g.add_argument("--mode", default="per_metric", choices=["per_metric", "user_level"],
                   help="unit of the budget and release figures: per count or per person and week "
                        "(Fig. 1 is drawn in both) (default %(default)s)")
    g.add_argument("--max-pairs", type=int, default=10, help="pairs kept per person and week (default %(default)s)")
    g.add_argument("--threshold", type=float, default=100, help="publish iff noisy count >= this (default 100)")
    g.add_argument("--trips", type=int, default=21,
                   help="unique trips a week of the person of the budget figure (default %(default)s, the bundled "
                        "city's median)")
    g.add_argument("--weeks", type=int, default=52, help="weeks released in the budget figure (default 52)")
    g.add_argument("--week", type=int, default=None, help="week of the release and map (default: the first)")
    g.add_argument("--seed", type=int, default=1, help="random seed of the noise and the experiments (default 1)")
    g.add_argument("--map-top", type=int, default=0,
                   help="flows drawn on the map (default 0: as many as the OD release page draws, 'auto')")
    g.add_argument("--compare-zones", default="square:1.3,h3:8,square:5",
                   help="zone systems compared (default %(default)s)")
    g.add_argument("--knock-targets", type=int, default=3, help="Knock Knock targets (default %(default)s)")
    g.add_argument("--knock-classifiers", default="lr,knn,rf", help="Knock Knock classifiers (default %(default)s)")
    add_loader_args(p)
    add_grid_args(p)
    p.set_defaults(func=run_figures)


def settings(args: argparse.Namespace) -> dict:
    """The command's settings as a ``--config`` object (flag names in snake_case), without the output folder."""
    return {k: v for k, v in vars(args).items() if not k.startswith("_") and k not in _NOT_CONFIG}


def figure_size(args: argparse.Namespace):
    from odcore.errors import ParameterError
    from odcore.report.figures import FigureSize

    try:
        size = FigureSize.preset(args.preset, dpi=args.dpi)
        if args.size:
            try:
                w, h = (float(v) for v in str(args.size).lower().split("x"))
            except ValueError:
                raise ParameterError(f"--size={args.size!r}: expected WIDTHxHEIGHT in inches, e.g. 3.5x2.8.") from None
            size = FigureSize(w, h, size.dpi, size.font_pt, size.legend)
    except ValueError as exc:
        raise ParameterError(f"--preset/--size/--dpi: {exc}") from None
    return size


def build(name: str, args: argparse.Namespace, data: dict):
    """Figure ``name`` and the table it draws (``data`` caches the loaded traces and OD data between figures)."""
    import pandas as pd

    from odcore.report import paper

    if name == "fig1_per_count":
        return paper.attack_curve_figure(args.epsilon, "per_metric", max_pairs=args.max_pairs)
    if name == "fig1_per_person":
        return paper.attack_curve_figure(args.epsilon, "user_level", max_pairs=args.max_pairs)
    if name == "budget_weeks":
        return paper.budget_weeks_figure(args.epsilon, args.mode, trips=args.trips, weeks=args.weeks,
                                         max_pairs=args.max_pairs)
    if name in ("release_probability", "flow_map"):
        table, od, cfg, wk = week_release(args, data)
        if name == "release_probability":
            return paper.release_probability_figure(table["true_count"].to_numpy(), args.epsilon, args.threshold,
                                                    args.mode, max_pairs=args.max_pairs)
        return flow_map(table, od, cfg, wk, args.map_top)
    if name == "zone_comparison":
        from odcore.cli.common import resolve_tz, traces_from_args
        from odcore.report.zone_compare import compare_zones

        traces = data.get("traces") or traces_from_args(args)
        data["traces"] = traces
        specs = [z.strip() for z in str(args.compare_zones).split(",") if z.strip()]
        table = compare_zones(traces.df, specs, epsilon=args.epsilon, threshold=args.threshold, week=args.week,
                              tz=resolve_tz(args, traces.report.format), rng=args.seed)
        return paper.zone_comparison_figure(table, args.epsilon, args.threshold)
    if name == "knock_auc":
        from odcore.cli.common import resolve_tz, traces_from_args
        from odcore.knock.experiment import KnockConfig, run_experiment
        from odcore.knock.timeseries import TimeSeriesConfig, build_timeseries

        traces = data.get("traces") or traces_from_args(args)
        data["traces"] = traces
        ts = build_timeseries(traces.df, TimeSeriesConfig(tz=resolve_tz(args, traces.report.format)))
        res = run_experiment(ts, KnockConfig(targets=args.knock_targets, classifiers=args.knock_classifiers,
                                             seed=args.seed))
        rows = [{"target": t.target, "classifier": c, "auc": a} for t in res.per_target for c, a in t.auc.items()]
        return paper.knock_auc_figure(pd.DataFrame(rows))
    raise AssertionError(name)  # pragma: no cover - names are checked before


def week_release(args: argparse.Namespace, data: dict):
    """The week's release table (one draw shared by the release-probability chart and the map)."""
    if "release" in data:
        return data["release"]
    from odcore.cli.common import od_from_args
    from odcore.constants import WEEK
    from odcore.errors import ParameterError
    from odcore.privacy.release import Mode, ReleaseConfig, release_with_report

    traces, od = od_from_args(args)
    data.setdefault("traces", traces)
    pairs = od.pairs
    weeks = sorted(int(x) for x in pairs[WEEK].unique()) if len(pairs) else [0]
    wk = weeks[0] if args.week is None else int(args.week)
    if wk not in weeks:
        raise ParameterError(f"--week={wk} has no trips; weeks with trips: {weeks}.")
    cfg = ReleaseConfig(epsilon=args.epsilon, threshold=args.threshold, mode=Mode(args.mode),
                        max_pairs=args.max_pairs if args.mode == "user_level" else None)
    res = release_with_report(pairs[pairs[WEEK] == wk], cfg, rng=args.seed)
    data["release"] = (res.table, od, cfg, wk)
    return data["release"]


def flow_map(table, od, cfg, wk: int, top: int):
    """The week's published map, as ``release --map`` and the OD release page draw it
    (:func:`odcore.cli.release.published_map`); its table: the places drawn, numbered, and the flows between them."""
    import pandas as pd

    from odcore.cli.release import published_map
    from odcore.report import figures

    t = table.loc[table["week"].to_numpy() == wk]
    fig = published_map(t, od, cfg, title=f"Published OD flows, week {wk}", top_n=top or None)
    return fig, pd.DataFrame(fig.layout.meta[figures.FLOW_MAP_META]["args"]["flows"])


def run_figures(args: argparse.Namespace) -> int:
    from odcore.errors import ParameterError
    from odcore.paths import atomic_output
    from odcore.report import figures

    names = [n.strip() for n in str(args.only).split(",") if n.strip()]
    bad = [n for n in names if n not in FIGURES]
    if bad or not names:
        raise ParameterError(f"--only: unknown figure(s) {bad}; choose among {', '.join(FIGURES)}.")
    fmts = [f.strip().lower() for f in str(args.formats).split(",") if f.strip()]
    if not fmts or any(f not in FORMATS for f in fmts):
        raise ParameterError(f"--formats={args.formats!r}: choose among {', '.join(FORMATS)}.")
    size = figure_size(args)
    figures.require_browser()
    out = Path(args.out)
    data: dict = {}
    files: dict[Path, bytes] = {}
    with figures.image_server():
        for name in names:
            print(f"drawing {name}…", file=sys.stderr, flush=True)
            fig, table = build(name, args, data)
            for fmt in fmts:
                files[out / f"{name}.{fmt}"] = figures.figure_bytes(fig, fmt, size)
            files[out / f"{name}.csv"] = table.to_csv(index=False).encode("utf-8")
            cfg = {**settings(args), "only": name}
            files[out / f"{name}.json"] = (json.dumps(cfg, indent=2, default=str) + "\n").encode("utf-8")
    try:
        with contextlib.ExitStack() as stack:
            tmps = [(stack.enter_context(atomic_output(p)), data) for p, data in files.items()]
            for tmp, blob in tmps:
                tmp.write_bytes(blob)
    except OSError as exc:
        raise ParameterError(f"--out {out}: cannot write ({exc}).") from None
    for p in files:
        print(p)
    return 0
